import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { canonicalJson, copyJson, digest, DigestError, sha256Hex } from "../../src/digest.js";

/** The double whose IEEE 754 bits are `hex` (RFC 8785 Appendix B lists inputs this way). */
function fromBits(hex: string): number {
  const view = new DataView(new ArrayBuffer(8));
  view.setBigUint64(0, BigInt(`0x${hex}`));
  return view.getFloat64(0);
}

/** Canonicalizes `value`, expecting a DigestError; returns it so the test can check it further. */
function rejection(value: unknown): DigestError {
  let caught: unknown;
  try {
    canonicalJson(value);
  } catch (error) {
    caught = error;
  }
  expect(DigestError.isInstance(caught)).toBe(true);
  const error = caught as DigestError;
  expect(error.code).toBe("unsupported_value");
  expect(error.name).toBe("DigestError");
  // digest() must refuse exactly what canonicalJson() refuses.
  expect(() => digest(value)).toThrow(error.message);
  return error;
}

/** Asserts a rejection at `path`, with the path and `problem` both in the message. */
function expectRejected(value: unknown, path: string, problem: RegExp): void {
  const error = rejection(value);
  expect(error.path).toBe(path);
  expect(error.message).toContain(path);
  expect(error.message).toMatch(problem);
}

describe("canonicalJson: RFC 8785 vectors", () => {
  it("serializes the example of sections 3.2.2-3.2.4 byte for byte", () => {
    // The input exactly as printed in the RFC, as JSON text.
    const input: unknown = JSON.parse(String.raw`{
      "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
      "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
      "literals": [null, true, false]
    }`);
    const expected = String.raw`{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`;
    expect(canonicalJson(input)).toBe(expected);
    // Section 3.2.4: the UTF-8 bytes of the canonical form, as the RFC prints them (20 per line).
    expect(Buffer.from(canonicalJson(input), "utf8").toString("hex")).toBe(
      [
        "7b226c69746572616c73223a5b6e756c6c2c7472",
        "75652c66616c73655d2c226e756d62657273223a",
        "5b3333333333333333332e333333333333332c31",
        "652b33302c342e352c302e3030322c31652d3237",
        "5d2c22737472696e67223a22e282ac245c753030",
        "30665c6e4127425c225c5c5c5c5c222f227d",
      ].join(""),
    );
    // Regression vector: computed once with `printf '<expected>' | sha256sum`, not with this code.
    expect(digest(input)).toBe("2d5e01a318d0f0879ab568c4be289c8b1f64ef8921a53c6277d5e069978baacb");
  });

  it("sorts members by UTF-16 code units (section 3.2.3)", () => {
    const input = {
      "\u20ac": "Euro Sign",
      "\r": "Carriage Return",
      "\ufb33": "Hebrew Letter Dalet With Dagesh",
      "1": "One",
      "\ud83d\ude00": "Emoji: Grinning Face",
      "\u0080": "Control",
      "\u00f6": "Latin Small Letter O With Diaeresis",
    };
    const expected =
      '{"\\r":"Carriage Return","1":"One","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis",' +
      '"\u20ac":"Euro Sign","\ud83d\ude00":"Emoji: Grinning Face","\ufb33":"Hebrew Letter Dalet With Dagesh"}';
    expect(canonicalJson(input)).toBe(expected);
  });

  // Appendix B: IEEE 754 bit patterns and their ES6/JCS serialization.
  const appendixB: [bits: string, expected: string][] = [
    ["0000000000000000", "0"],
    ["8000000000000000", "0"], // minus zero
    ["0000000000000001", "5e-324"], // min positive subnormal
    ["8000000000000001", "-5e-324"],
    ["7fefffffffffffff", "1.7976931348623157e+308"], // max double
    ["ffefffffffffffff", "-1.7976931348623157e+308"],
    ["4340000000000000", "9007199254740992"], // 2^53
    ["c340000000000000", "-9007199254740992"],
    ["4430000000000000", "295147905179352830000"], // ~2^68
    ["44b52d02c7e14af5", "9.999999999999997e+22"],
    ["44b52d02c7e14af6", "1e+23"],
    ["44b52d02c7e14af7", "1.0000000000000001e+23"],
    ["444b1ae4d6e2ef4e", "999999999999999700000"],
    ["444b1ae4d6e2ef4f", "999999999999999900000"],
    ["444b1ae4d6e2ef50", "1e+21"],
    ["3eb0c6f7a0b5ed8c", "9.999999999999997e-7"],
    ["3eb0c6f7a0b5ed8d", "0.000001"],
    ["41b3de4355555553", "333333333.3333332"],
    ["41b3de4355555554", "333333333.33333325"],
    ["41b3de4355555555", "333333333.3333333"],
    ["41b3de4355555556", "333333333.3333334"],
    ["41b3de4355555557", "333333333.33333343"],
    ["becbf647612f3696", "-0.0000033333333333333333"],
    ["43143ff3c1cb0959", "1424953923781206.2"],
  ];

  it.each(appendixB)("serializes the double with bits %s as %s (Appendix B)", (bits, expected) => {
    const value = fromBits(bits);
    expect(canonicalJson(value)).toBe(expected);
    expect(canonicalJson([value])).toBe(`[${expected}]`);
    expect(canonicalJson({ n: value })).toBe(`{"n":${expected}}`);
  });

  it("rejects the Appendix B NaN and Infinity bit patterns", () => {
    expectRejected(fromBits("7fffffffffffffff"), "$", /NaN/);
    expectRejected(fromBits("7ff0000000000000"), "$", /Infinity/);
  });

  // Not RFC vectors: boundaries of the decimal vs exponent forms. RFC 8785 defines number output as
  // ECMAScript Number#toString, so these expectations are derived from it (and JSON.stringify).
  it.each([
    [1e21, "1e+21"],
    [1e20, "100000000000000000000"],
    [1e-7, "1e-7"],
    [1e-6, "0.000001"],
    [-0, "0"],
    [0.1 + 0.2, "0.30000000000000004"],
    [Number.MAX_SAFE_INTEGER, "9007199254740991"],
    [Number.MIN_VALUE, "5e-324"],
  ])("serializes %d as %s", (value, expected) => {
    expect(canonicalJson(value)).toBe(expected);
    expect(canonicalJson(value)).toBe(JSON.stringify(value));
  });
});

describe("canonicalJson: structure", () => {
  it("serializes literals, strings and nesting without whitespace", () => {
    expect(canonicalJson(null)).toBe("null");
    expect(canonicalJson(true)).toBe("true");
    expect(canonicalJson(false)).toBe("false");
    expect(canonicalJson("")).toBe('""');
    expect(canonicalJson({})).toBe("{}");
    expect(canonicalJson([])).toBe("[]");
    expect(canonicalJson({ b: [1, { d: 1, c: 2 }], a: { z: null, y: "" } })).toBe(
      '{"a":{"y":"","z":null},"b":[1,{"c":2,"d":1}]}',
    );
  });

  it("escapes strings exactly as JSON.stringify does", () => {
    const samples = [
      "plain",
      'quote " backslash \\ slash /',
      "\b\f\n\r\t\u0000\u0001\u001f\u007f\u0080",
      "\u2028\u2029 are not escaped",
      "emoji \ud83d\ude00 pair",
      "x".repeat(200) + '"' + "y".repeat(200),
      "é".repeat(100),
    ];
    for (const text of samples) {
      expect(canonicalJson(text)).toBe(JSON.stringify(text));
      expect(canonicalJson({ [text]: text })).toBe(`{${JSON.stringify(text)}:${JSON.stringify(text)}}`);
    }
  });

  it("ignores member order, at every depth, but keeps array order", () => {
    expect(digest({ a: 1, b: 2 })).toBe(digest({ b: 2, a: 1 }));
    expect(digest({ x: { a: 1, b: [{ c: 1, d: 2 }] } })).toBe(digest({ x: { b: [{ d: 2, c: 1 }], a: 1 } }));
    expect(digest([1, 2])).not.toBe(digest([2, 1]));
    expect(canonicalJson({ 10: "a", 9: "b", b: 1, a: 2 })).toBe('{"10":"a","9":"b","a":2,"b":1}');
  });

  it("sorts large objects too", () => {
    const forward: Record<string, number> = {};
    const backward: Record<string, number> = {};
    for (let i = 0; i < 2000; i++) forward[`k${i}`] = i;
    for (let i = 1999; i >= 0; i--) backward[`k${i}`] = i;
    const keys = Object.keys(forward).sort();
    expect(Object.keys(JSON.parse(canonicalJson(forward)) as object)).toEqual(keys);
    expect(canonicalJson(backward)).toBe(canonicalJson(forward));
  });

  it("accepts null-prototype objects and shared (non-cyclic) references", () => {
    const bare = Object.create(null) as Record<string, unknown>;
    bare.b = 1;
    bare.a = 2;
    expect(canonicalJson(bare)).toBe('{"a":2,"b":1}');
    const shared = { x: 1 };
    expect(canonicalJson({ a: shared, b: shared, c: [shared, shared] })).toBe(
      '{"a":{"x":1},"b":{"x":1},"c":[{"x":1},{"x":1}]}',
    );
  });

  it("treats an own __proto__ member (as JSON.parse creates it) as data", () => {
    const parsed: unknown = JSON.parse('{"b":1,"__proto__":{"x":[]}}');
    expect(canonicalJson(parsed)).toBe('{"__proto__":{"x":[]},"b":1}');
  });

  it("does not mutate its input", () => {
    const input = { b: 1, a: [3, 2, 1], c: { z: 1, y: 2 } };
    canonicalJson(input);
    expect(Object.keys(input)).toEqual(["b", "a", "c"]);
    expect(Object.keys(input.c)).toEqual(["z", "y"]);
    expect(input.a).toEqual([3, 2, 1]);
  });
});

describe("digest and sha256Hex", () => {
  it("hashes the UTF-8 bytes of the canonical form", () => {
    // Computed once with `printf '{}' | sha256sum`.
    expect(digest({})).toBe("44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a");
    expect(sha256Hex("{}")).toBe(digest({}));
    // Computed once with `printf '{"a":[1,"x",null],"b":{"c":true}}' | sha256sum`.
    expect(digest({ b: { c: true }, a: [1, "x", null] })).toBe(
      "038932932d9f36881391140ac309421b0bf0c001fc66458904c4c077b2bde713",
    );
    // FIPS 180-2 "abc" and empty-string vectors.
    expect(sha256Hex("abc")).toBe("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    expect(sha256Hex("")).toBe("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  });

  it("streams large values to the hash in chunks without changing the result", () => {
    const long = "x".repeat(40_000) + "\u20ac\n" + "y".repeat(40_000);
    const value = {
      items: Array.from({ length: 3000 }, (_, i) => ({ id: `item-${i}`, n: i / 7, tags: ["a", "b\u00e9"] })),
      long,
      nested: { before: "z".repeat(20_000), long, after: [long, 1, long] },
      [long.slice(0, 70_000)]: long,
    };
    const text = canonicalJson(value);
    expect(text.length).toBeGreaterThan(500_000);
    expect(digest(value)).toBe(sha256Hex(text));
    expect(digest(long)).toBe(sha256Hex(JSON.stringify(long)));
  });

  it("hashes non-ASCII text as UTF-8", () => {
    // Computed once with `printf '€ 😀' | sha256sum`.
    expect(sha256Hex("\u20ac \ud83d\ude00")).toBe("3403edf3b67714533f4ee45c7390014fe30c399bf9fd0136e98ab4887112be6b");
    expect(digest("\u20ac \ud83d\ude00")).toBe(sha256Hex('"\u20ac \ud83d\ude00"'));
  });
});

describe("rejections", () => {
  it("rejects undefined anywhere", () => {
    expectRejected(undefined, "$", /undefined/);
    expectRejected({ a: undefined }, "$.a", /undefined/);
    expectRejected({ a: [1, 2, { b: undefined }] }, "$.a[2].b", /undefined/);
    expectRejected([1, undefined], "$[1]", /undefined/);
  });

  it("rejects functions, symbols and bigints", () => {
    expectRejected({ f: () => 1 }, "$.f", /function/);
    expectRejected({ s: Symbol("s") }, "$.s", /symbol/);
    expectRejected([0, 10n], "$[1]", /bigint/);
  });

  it("rejects NaN and infinities", () => {
    expectRejected({ a: [0, 1, { b: NaN }] }, "$.a[2].b", /NaN is not a JSON number/);
    expectRejected({ x: Infinity }, "$.x", /Infinity is not a JSON number/);
    expectRejected([-Infinity], "$[0]", /-Infinity is not a JSON number/);
  });

  it("rejects holes in sparse arrays", () => {
    // eslint-disable-next-line no-sparse-arrays
    expectRejected({ list: [1, , 3] }, "$.list[1]", /hole/);
    expectRejected(new Array(2), "$[0]", /hole/);
    // A hole plus a named property keep the own-key count of a dense array; the hole is still found.
    // eslint-disable-next-line no-sparse-arrays
    expectRejected(Object.assign([1, , 3], { extra: 1 }), "$[1]", /hole/);
  });

  it("rejects cycles but names the ancestor", () => {
    const self: Record<string, unknown> = { a: 1 };
    self.self = self;
    expectRejected(self, "$.self", /circular reference to \$/);
    const deep: { a: { b: unknown[] } } = { a: { b: [] } };
    deep.a.b.push(deep.a);
    expectRejected(deep, "$.a.b[0]", /circular reference to \$\.a/);
    const list: unknown[] = [];
    list.push(list);
    expectRejected(list, "$[0]", /circular/);
  });

  it("rejects accessor properties without calling them", () => {
    let calls = 0;
    const getter = {
      get value() {
        calls++;
        return 1;
      },
    };
    expectRejected({ nested: getter }, "$.nested.value", /accessor/);
    expect(calls).toBe(0);
    const setterOnly = {};
    Object.defineProperty(setterOnly, "x", { set: () => undefined, enumerable: true });
    expectRejected(setterOnly, "$.x", /accessor/);
    const element = [1, 2];
    Object.defineProperty(element, 1, { get: () => 2, enumerable: true });
    expectRejected({ element }, "$.element[1]", /accessor/);
  });

  it("ignores a non-enumerable object property, as JSON.stringify does", () => {
    const hidden = { visible: 1 };
    Object.defineProperty(hidden, "hidden", { value: 2, enumerable: false });
    expect(canonicalJson({ hidden })).toBe('{"hidden":{"visible":1}}');
    expect(digest({ hidden })).toBe(digest({ hidden: { visible: 1 } }));
  });

  it("rejects symbol-keyed properties and non-enumerable array members", () => {
    expectRejected({ a: { [Symbol("tag")]: 1, b: 2 } }, "$.a", /symbol-keyed property Symbol\(tag\)/);
    const arrayWithSymbol = Object.assign([1], { [Symbol("s")]: 1 });
    expectRejected(arrayWithSymbol, "$", /symbol-keyed property Symbol\(s\)/);
    const arrayWithHidden = [1];
    Object.defineProperty(arrayWithHidden, "meta", { value: 1, enumerable: false });
    expectRejected(arrayWithHidden, "$", /named property "meta" on an array/);
    expectRejected(Object.assign([1, 2], { total: 2 }), "$", /named property "total" on an array/);
    expectRejected(Object.assign([1], { "4294967295": 2 }), "$", /named property "4294967295" on an array/);
    const hiddenElement = [1, 2];
    Object.defineProperty(hiddenElement, 0, { value: 1, enumerable: false });
    expectRejected(hiddenElement, "$[0]", /non-enumerable/);
  });

  it("rejects objects that are not plain objects or arrays", () => {
    class Point {
      x = 1;
    }
    class List extends Array<number> {}
    const cases: [unknown, RegExp][] = [
      [new Date(0), /Date/],
      [new Map(), /Map/],
      [new Set(), /Set/],
      [/re/, /RegExp/],
      [Buffer.from("x"), /Buffer/],
      [new Uint8Array(1), /Uint8Array/],
      [new Point(), /Point/],
      [new String("x"), /String/],
      [new Number(1), /Number/],
      [new Boolean(true), /Boolean/],
      [Object.create({ inherited: 1 }), /custom prototype|not a plain object/],
      [List.from([1]), /Array subclass/],
      [new Error("x"), /Error/],
      [Promise.resolve(1), /Promise/],
    ];
    for (const [value, problem] of cases) {
      expectRejected({ list: [0, { value }] }, "$.list[1].value", problem);
    }
  });

  it("rejects lone surrogates in strings and keys", () => {
    expectRejected({ a: "x\ud800" }, "$.a", /lone UTF-16 surrogate/);
    expectRejected(["\udc00" + "y".repeat(100)], "$[0]", /lone UTF-16 surrogate/);
    expectRejected({ ["k\udfff"]: 1 }, '$["k\\udfff"]', /lone UTF-16 surrogate/);
    // A reversed pair is two lone surrogates.
    expectRejected("\ude00\ud83d", "$", /lone UTF-16 surrogate/);
  });

  it("formats paths with quoted keys when they are not identifiers", () => {
    expectRejected({ "a b": { "0": [undefined] } }, '$["a b"]["0"][0]', /undefined/);
    expectRejected({ $ok_1: { "é": null, x: NaN } }, "$.$ok_1.x", /NaN/);
  });
});

describe("DigestError", () => {
  it("is recognised by its registered-symbol brand, not by instanceof", () => {
    const error = rejection({ a: undefined });
    expect(error).toBeInstanceOf(Error);
    expect(DigestError.isInstance(error)).toBe(true);
    expect(DigestError.isInstance(new Error("x"))).toBe(false);
    expect(DigestError.isInstance(null)).toBe(false);
    expect(DigestError.isInstance("DigestError")).toBe(false);
    // What a second (e.g. CommonJS) copy of the class would produce.
    const foreign = Object.assign(new Error("copy"), { [Symbol.for("arkah-agent-guardrails.error")]: "DigestError" });
    expect(DigestError.isInstance(foreign)).toBe(true);
    expect(
      (error as unknown as Record<symbol, unknown>)[Symbol.for("arkah-agent-guardrails.error")],
    ).toBe("DigestError");
  });
});

// ---------------------------------------------------------------------------------------------
// Property test: random JSON values from a seeded PRNG (mulberry32), so failures reproduce.

function mulberry32(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const ALPHABET = ["a", "b", "Z", "0", "9", "_", " ", '"', "\\", "/", "\n", "\u0000", "\u001f", "é", "€", "\u2028", "\ud83d\ude00", "\ufb33", "\u0080"];

function randomString(random: () => number): string {
  const length = Math.floor(random() * 8);
  let text = "";
  for (let i = 0; i < length; i++) text += ALPHABET[Math.floor(random() * ALPHABET.length)]!;
  return text;
}

function randomNumber(random: () => number): number {
  const pick = random();
  if (pick < 0.3) return Math.floor(random() * 2000) - 1000;
  if (pick < 0.6) return (random() - 0.5) * 10 ** Math.floor(random() * 40 - 20);
  if (pick < 0.8) {
    // Arbitrary exponent and sign: NaN, infinities and -0 (which JSON cannot round-trip) excluded.
    const value = fromBits(Math.floor(random() * 2 ** 32).toString(16).padStart(8, "0") + "00000000");
    return Number.isFinite(value) && !Object.is(value, -0) ? value : 1;
  }
  return random() * Number.MAX_SAFE_INTEGER;
}

function randomJson(random: () => number, depth: number): unknown {
  const pick = random();
  if (depth <= 0 || pick < 0.4) {
    const leaf = random();
    if (leaf < 0.1) return null;
    if (leaf < 0.2) return random() < 0.5;
    if (leaf < 0.6) return randomNumber(random);
    return randomString(random);
  }
  if (pick < 0.7) {
    return Array.from({ length: Math.floor(random() * 5) }, () => randomJson(random, depth - 1));
  }
  const object: Record<string, unknown> = {};
  const size = Math.floor(random() * (random() < 0.1 ? 40 : 6));
  for (let i = 0; i < size; i++) object[randomString(random)] = randomJson(random, depth - 1);
  return object;
}

/** A copy with every object's members inserted in a random order. */
function shuffled(value: unknown, random: () => number): unknown {
  if (Array.isArray(value)) return value.map((item) => shuffled(item, random));
  if (typeof value !== "object" || value === null) return value;
  const entries = Object.entries(value);
  for (let i = entries.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [entries[i], entries[j]] = [entries[j]!, entries[i]!];
  }
  const copy: Record<string, unknown> = {};
  for (const [key, item] of entries) copy[key] = shuffled(item, random);
  return copy;
}

/** An obviously correct (and slow) reference: sorted keys, JSON.stringify for everything else. */
function reference(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(reference).join(",")}]`;
  if (typeof value === "object" && value !== null) {
    const record = value as Record<string, unknown>;
    return `{${Object.keys(record)
      .sort()
      .map((key) => `${JSON.stringify(key)}:${reference(record[key])}`)
      .join(",")}}`;
  }
  return JSON.stringify(value);
}

describe("property: random JSON values", () => {
  it("round-trips, matches a reference, and is stable under member shuffling", () => {
    const random = mulberry32(0x8785);
    for (let i = 0; i < 400; i++) {
      const value = randomJson(random, 4);
      const text = canonicalJson(value);
      expect(JSON.parse(text)).toEqual(value);
      expect(text).toBe(reference(value));
      expect(canonicalJson(shuffled(value, random))).toBe(text);
      expect(canonicalJson(JSON.parse(text))).toBe(text);
      expect(digest(value)).toBe(sha256Hex(text));
    }
  });
});

describe("copyJson", () => {
  /** Every object reachable from `value`. */
  const objects = (value: unknown, into = new Set<object>()): Set<object> => {
    if (typeof value === "object" && value !== null) {
      into.add(value);
      for (const child of Object.values(value)) objects(child, into);
    }
    return into;
  };

  it("copies any JSON value as structuredClone does, sharing no object with it", () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        const copy = copyJson(value);
        expect(copy).toStrictEqual(structuredClone(value));
        expect(canonicalJson(copy)).toBe(canonicalJson(value));
        const shared = [...objects(copy)].filter((object) => objects(value).has(object));
        expect(shared).toEqual([]);
      }),
    );
  });

  it("keeps an own __proto__ key an own property, not the copy's prototype", () => {
    const value = JSON.parse('{"__proto__": {"admin": true}, "a": [1, {"__proto__": 2}]}') as Record<string, unknown>;
    const copy = copyJson(value);
    expect(Object.getPrototypeOf(copy)).toBe(Object.prototype);
    expect(Object.hasOwn(copy, "__proto__")).toBe(true);
    expect((copy as { admin?: unknown }).admin).toBeUndefined();
    expect(canonicalJson(copy)).toBe(canonicalJson(value));
  });

  it("leaves anything but plain JSON data to structuredClone: copied or refused exactly as it would be", () => {
    const array = Object.assign([1, 2], { extra: "named" });
    expect(copyJson({ list: array })).toStrictEqual(structuredClone({ list: array }));
    expect(copyJson({ when: new Date(0), missing: undefined })).toStrictEqual(structuredClone({ when: new Date(0), missing: undefined }));
    expect(copyJson({ big: 1n })).toStrictEqual({ big: 1n });
    // A proxy (whose traps could answer the digest one thing and the copy another) and a function
    // are refused, as structuredClone refuses them.
    expect(() => copyJson({ nested: new Proxy({ a: 1 }, {}) })).toThrow(/could not be cloned/);
    expect(() => copyJson({ run: () => 1 })).toThrow(/could not be cloned/);
  });
});
