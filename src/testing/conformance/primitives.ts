/**
 * The primitives suite: an adapter on `KeyValueGuardrailStore` tested below the `GuardrailStore`
 * methods, on its own `atomic` and the get, put, delete and scan it hands a step. The other suites
 * only see these through the base's records (digest keys, small collections), so a scan that
 * skips keys extending `after`, or orders them by UTF-8 bytes, or a store object whose concurrent
 * steps share one connection, passes them; each fails a test here.
 */
import { expect } from "vitest";
import type { JsonValue } from "../../contracts/index.js";
import { StoreContractError } from "../../errors.js";
import { KEY_VALUE_COLLECTIONS } from "../../store/records.js";
import type { StoreTest } from "./harness.js";
import { get, runStep, scan, type Entries, type KitTransaction } from "./key-value.js";

/** The collections the suite writes to: two of the base's own (an adapter may know only those), on a fresh store. */
const A = KEY_VALUE_COLLECTIONS.receipts;
const B = KEY_VALUE_COLLECTIONS.claims;

/** JavaScript's `<` on strings: UTF-16 code unit order, the order `scan` promises. */
const byCodeUnits = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

const keysOf = (entries: Entries): string[] => entries.map(([key]) => key);

/** Shows keys with every non-ASCII code unit escaped, so a failure message says which keys differ. */
const show = (keys: readonly string[]): string => keys.map((key) => JSON.stringify(key).replace(/[^\x20-\x7e]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`)).join(", ");

/**
 * Keys whose UTF-16 code unit order is not their UTF-8 byte order (U+E000 to U+FFFF sort after
 * the surrogate pairs of astral characters in UTF-16, before them in UTF-8), lone surrogates
 * (which UTF-8 cannot hold), and keys that are prefixes of others.
 */
const ORDER_KEYS: readonly string[] = [
  "b",
  "a",
  "ab",
  "a\u0000",
  "aa",
  "Z",
  "~",
  "\u00e9",
  "\u0800",
  "\ue000",
  "\ufffd",
  "\uffff",
  "\ud83d\ude00", // U+1F600, a surrogate pair
  "\udbff\udfff", // U+10FFFF
  "\ud800", // a lone high surrogate
  "\udc00", // a lone low surrogate
  "\ud83d", // the high half of U+1F600 alone: a prefix of it
  "a\ud800",
  "a\ue000",
  "a\udbff\udfff",
];

/** Keys that extend one another: `after` one of them must still answer the longer ones. */
const PREFIX_KEYS: readonly string[] = ["a", "a\u0000", "a\u0000\u0000", "aa", "ab", "abc", "ac", "b", "\ud83d", "\ud83d\ude00", "\ud83d\ude00x"];

/** Values that must come back equal: every JSON type, NUL and lone surrogates in strings, nesting, a long string. */
const VALUES: readonly (readonly [string, JsonValue])[] = [
  ["null", null],
  ["true", true],
  ["false", false],
  ["zero", 0],
  ["negative", -1.5],
  ["max-safe", Number.MAX_SAFE_INTEGER],
  ["empty-string", ""],
  ["odd-string", "\u0000 \ud800 \udc00 \ud83d\ude00 text "],
  ["empty-array", []],
  ["empty-object", {}],
  ["nested", { a: [1, { b: "c", "\udc00": null }], "": { deep: [[], [true]] } }],
  ["long", "x".repeat(20_000)],
];

/** A key as long as a verdict's (over 300 characters), with a NUL in it. */
const LONG_KEY = `["${"f".repeat(64)}","call\u0000-1","${"e".repeat(300)}"]`;

function putAll(tx: KitTransaction, collection: string, keys: readonly string[]): void {
  keys.forEach((key, index) => {
    tx.put(collection, key, { index, key });
  });
}

/** Every entry of `collection`, read in pages of `limit`, each page after the previous page's last key. */
function* paged(tx: KitTransaction, collection: string, limit: number): Generator<unknown, Entries, unknown> {
  const all: Entries = [];
  let after: string | undefined;
  for (let pages = 0; pages < 1_000; pages++) {
    const page = yield* scan(tx, collection, after === undefined ? { limit } : { after, limit });
    expect(page.length, `a page of scan(limit ${String(limit)}) has at most ${String(limit)} entries`).toBeLessThanOrEqual(limit);
    all.push(...page);
    const last = page.at(-1);
    if (page.length < limit || last === undefined) return all;
    after = last[0];
  }
  throw new Error("scan paged by `after` never ended: it answers a key at or before `after`");
}

/** `atomic`'s rejection, or a failure saying it resolved. */
async function rejection(run: Promise<unknown>, what: string): Promise<unknown> {
  const outcome = await run.then(
    (value: unknown) => ({ resolved: true as const, value }),
    (error: unknown) => ({ resolved: false as const, error }),
  );
  if (outcome.resolved) expect.fail(`${what} must reject, but it resolved with ${JSON.stringify(outcome.value)}`);
  return outcome.error;
}

export function primitivesSuite(test: StoreTest): void {
  test("scan answers keys in UTF-16 code unit order (as JavaScript's < compares), not UTF-8 byte order: astral characters, U+E000-U+FFFF, lone surrogates, prefixes", async ({ store }) => {
    const expected = [...ORDER_KEYS].sort(byCodeUnits);
    const buffered = await runStep(store, function* (tx) {
      putAll(tx, A, ORDER_KEYS);
      return keysOf(yield* scan(tx, A));
    });
    expect(show(buffered), "a step's scan of its own buffered puts, in code unit order").toBe(show(expected));
    const committed = await runStep(store, (tx) => scan(tx, A));
    expect(show(keysOf(committed)), "a scan of the committed keys, in code unit order").toBe(show(expected));
    for (const [key, value] of committed) expect(value, `the value stored under ${show([key])}`).toEqual({ index: ORDER_KEYS.indexOf(key), key });
    const pages = await runStep(store, (tx) => paged(tx, A, 3));
    expect(show(keysOf(pages)), "the same keys paged 3 at a time with `after`: each once, in order").toBe(show(expected));
  });

  test("scan after a key answers every key after it, those that extend it included; with limit, the first of them", async ({ store }) => {
    const after = (key: string) => [...PREFIX_KEYS].sort(byCodeUnits).filter((each) => each > key);
    const check = function* (tx: KitTransaction, when: string): Generator<unknown, void, unknown> {
      for (const key of ["a", "a\u0000", "ab", "\ud83d", "aa\uffff", "\ud83d\ude00"]) {
        expect(show(keysOf(yield* scan(tx, A, { after: key }))), `${when}: scan({ after: ${show([key])} })`).toBe(show(after(key)));
      }
      expect(show(keysOf(yield* scan(tx, A, { after: "a", limit: 2 }))), `${when}: scan({ after: "a", limit: 2 }): the first two keys after "a"`).toBe(show(after("a").slice(0, 2)));
      expect(keysOf(yield* scan(tx, A, { after: "\ud83d\ude00x" })), `${when}: after the last key, nothing`).toEqual([]);
    };
    await runStep(store, function* (tx) {
      putAll(tx, A, PREFIX_KEYS);
      yield* check(tx, "buffered puts");
    });
    await runStep(store, (tx) => check(tx, "committed keys"));
    const pages = await runStep(store, (tx) => paged(tx, A, 1));
    expect(show(keysOf(pages)), "every key paged one at a time with `after`: none skipped").toBe(show([...PREFIX_KEYS].sort(byCodeUnits)));
  });

  test("limit counts the entries scan answers after the step's buffered puts and deletes are applied, never the stored entries before them", async ({ store }) => {
    await runStep(store, function* (tx) {
      for (let n = 1; n <= 6; n++) tx.put(A, `k${String(n)}`, n);
      yield* scan(tx, A, { limit: 1 });
    });
    await runStep(store, function* (tx) {
      tx.delete(A, "k1");
      tx.delete(A, "k2");
      tx.put(A, "k0", 0);
      tx.put(A, "k4", 40);
      tx.put(A, "k7", 7);
      expect(yield* scan(tx, A, { limit: 3 }), "the first 3 after two stored keys were deleted and one put before them").toEqual([
        ["k0", 0],
        ["k3", 3],
        ["k4", 40],
      ]);
      expect(yield* scan(tx, A, { after: "k0", limit: 2 }), "after a buffered key").toEqual([
        ["k3", 3],
        ["k4", 40],
      ]);
      expect(yield* scan(tx, A, { after: "k5", limit: 5 }), "the last page, with a buffered key beyond the stored ones").toEqual([
        ["k6", 6],
        ["k7", 7],
      ]);
      tx.delete(A, "k0");
      tx.delete(A, "k3");
      expect(yield* scan(tx, A, { limit: 1 }), "limit 1 after more deletes").toEqual([["k4", 40]]);
    });
    expect(await runStep(store, (tx) => scan(tx, A)), "what the step committed").toEqual([
      ["k4", 40],
      ["k5", 5],
      ["k6", 6],
      ["k7", 7],
    ]);
  });

  test("a step reads its own writes, and values and keys come back exactly: every JSON type, NUL, lone surrogates, a 300-character key", async ({ store }) => {
    await runStep(store, function* (tx) {
      for (const [key, value] of VALUES) {
        expect(yield* get(tx, A, key), `get of ${key} before any put`).toBeUndefined();
        tx.put(A, key, value);
        expect(yield* get(tx, A, key), `get of ${key} after its put, in the same step`).toEqual(value);
      }
      tx.put(A, LONG_KEY, "long key");
      tx.put(A, "overwritten", 1);
      tx.put(A, "overwritten", 2);
      expect(yield* get(tx, A, "overwritten"), "the step's last put wins").toBe(2);
    });
    await runStep(store, function* (tx) {
      for (const [key, value] of VALUES) expect(yield* get(tx, A, key), `get of ${key} in a later step`).toEqual(value);
      expect(yield* get(tx, A, LONG_KEY), "a long key with a NUL").toBe("long key");
      expect(yield* get(tx, A, `${LONG_KEY} `), "a key one character longer is another key").toBeUndefined();
      expect(yield* get(tx, A, "overwritten"), "the step's last put, committed").toBe(2);
      expect(yield* get(tx, B, "overwritten"), "the same key in another collection is another entry").toBeUndefined();
    });
  });

  test("deletes: buffered like puts, seen by the step's gets and scans, committed with it; deleting an absent key does nothing; collections are separate", async ({ store }) => {
    await runStep(store, function* (tx) {
      tx.put(A, "kept", "a");
      tx.put(A, "gone", "a");
      tx.put(B, "gone", "b");
      yield* get(tx, A, "kept");
    });
    await runStep(store, function* (tx) {
      tx.delete(A, "never-stored");
      tx.delete(A, "gone");
      expect(yield* get(tx, A, "gone"), "get after a delete in the same step").toBeUndefined();
      expect(yield* scan(tx, A), "scan after a delete in the same step").toEqual([["kept", "a"]]);
      tx.put(A, "gone", "again");
      expect(yield* get(tx, A, "gone"), "a put after a delete in the same step").toBe("again");
      tx.delete(A, "gone");
    });
    await runStep(store, function* (tx) {
      expect(yield* scan(tx, A), "what the step committed: the delete, not the put between").toEqual([["kept", "a"]]);
      expect(yield* get(tx, A, "never-stored"), "deleting an absent key stores nothing").toBeUndefined();
      expect(yield* scan(tx, B), "the other collection's entry under the same key is untouched").toEqual([["gone", "b"]]);
    });
  });

  test("a step that rejects commits none of its writes, and atomic rejects with its error", async ({ store }) => {
    await runStep(store, function* (tx) {
      tx.put(A, "stored", 1);
      yield* get(tx, A, "stored");
    });
    const failure = new Error("the kit's step rejects on purpose");
    const error = await rejection(
      runStep(store, function* (tx) {
        tx.put(A, "stored", 2);
        tx.put(A, "new", 1);
        tx.delete(A, "stored");
        yield* get(tx, A, "new");
        throw failure;
      }),
      "atomic of a step that rejects",
    );
    expect(error, "atomic rejects with the step's own error").toBe(failure);
    expect(await runStep(store, (tx) => scan(tx, A)), "nothing of the rejected step was committed").toEqual([["stored", 1]]);
  });

  test("bytes stored that the adapter cannot decode: get and scan reject with StoreContractError, other keys still read", async ({ store, writeRaw }) => {
    if (writeRaw === undefined) throw new Error("the primitives suite needs writeRaw");
    await runStep(store, function* (tx) {
      tx.put(A, "a-first", 1);
      tx.put(A, "good", 2);
      yield* get(tx, A, "good");
    });
    await writeRaw({ collection: A, key: "bad", unparseable: true });
    for (const [what, step] of [
      ["get", (tx: KitTransaction) => get(tx, A, "bad")],
      ["scan", (tx: KitTransaction) => scan(tx, A)],
      ["scan after a key before it", (tx: KitTransaction) => scan(tx, A, { after: "a" })],
    ] as const) {
      const error = await rejection(runStep(store, step), `${what} of undecodable bytes`);
      expect(StoreContractError.isInstance(error), `${what} of undecodable bytes rejects with a StoreContractError, not ${String(error)}`).toBe(true);
    }
    expect(await runStep(store, (tx) => get(tx, A, "good")), "another key of the collection still reads").toBe(2);
    expect(await runStep(store, (tx) => scan(tx, A, { after: "bad" })), "a scan past the bad key still reads").toEqual([["good", 2]]);
  });

  test("concurrent steps on one store object are serializable: no lost update, each sees only its own buffer, read-only steps see one consistent state", async ({ store }) => {
    const WRITERS = 8;
    const READERS = 8;
    await runStep(store, function* (tx) {
      tx.put(A, "x", 0);
      tx.put(A, "y", 0);
      yield* get(tx, A, "x");
    });
    const writers = Array.from({ length: WRITERS }, (_, index) =>
      runStep(store, function* (tx) {
        const mine = `writer-${String(index)}`;
        tx.put(B, "buffer", mine);
        const x = yield* get(tx, A, "x");
        expect(yield* get(tx, B, "buffer"), "a step sees its own buffered put, not another step's").toBe(mine);
        const y = yield* get(tx, A, "y");
        if (typeof x !== "number" || x !== y) throw new Error(`the kit's writer saw x = ${String(x)}, y = ${String(y)}: not one state`);
        tx.put(A, "x", x + 1);
        tx.put(A, "y", x + 1);
        tx.put(A, mine, x);
        return x;
      }),
    );
    // A reader that sees two states at once throws: an adapter must re-run it (the view was never consistent) or have served one state.
    const readers = Array.from({ length: READERS }, () =>
      runStep(store, function* (tx) {
        const x = yield* get(tx, A, "x");
        const y = yield* get(tx, A, "y");
        if (x !== y) throw new Error(`a read-only step saw x = ${String(x)} and y = ${String(y)}: two states in one step`);
        return x;
      }),
    );
    const seen = await Promise.all(writers);
    const read = await Promise.all(readers);
    expect([...seen].sort((a, b) => a - b), "each writer read the count the one before it wrote: no two read the same").toEqual(Array.from({ length: WRITERS }, (_, n) => n));
    for (const value of read) expect(typeof value === "number" && value >= 0 && value <= WRITERS, "each reader saw a committed count").toBe(true);
    expect(await runStep(store, (tx) => get(tx, A, "x")), "every writer's increment committed").toBe(WRITERS);
    expect(await runStep(store, (tx) => get(tx, B, "buffer")), "one writer's put of the shared key committed").toMatch(/^writer-\d$/);
  });
}
