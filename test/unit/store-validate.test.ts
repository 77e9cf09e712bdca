/**
 * The store boundary's fast paths must never accept what the zod schemas reject, and must build
 * the same value zod would. Checked on valid records and on many corrupted variants of them.
 */
import { describe, expect, it, vi } from "vitest";
import {
  DigestSchema,
  InMemoryGuardrailStore,
  StoreContractError,
} from "arkah-agent-guardrails";
import {
  AuditEventSchema,
  ClaimOptionsSchema,
  ClaimResultSchema,
  MAX_READ_EVIDENCE,
  MutationIdentitySchema,
  MutationReleaseSchema,
  MutationSettlementSchema,
  ReadEvidenceSchema,
  RecordReadOptionsSchema,
} from "arkah-agent-guardrails/store";
import { SqliteGuardrailStore } from "arkah-agent-guardrails/sqlite";
import type { z } from "zod";
import {
  isTrustedStore,
  parseAuditEvent,
  parseClaimOptions,
  parseClaimResult,
  parseDigest,
  parseEvidence,
  parseIdentity,
  parseReadOptions,
  parseRelease,
  parseSettlement,
  requiresResolvedScope,
  TRUSTED_STORE,
} from "../../src/store/validate.js";
import { ForwardingStore } from "../support/fixtures.js";

const hex = (char: string) => char.repeat(64);

/** An audit event with every field but `args`, and one with only the required ones. */
const fullEvent = {
  at: "2031-02-03T06:05:06.789+02:00",
  decision: "executed",
  turnKey: hex("a"),
  scopeId: "doc-1",
  toolCallId: "call-1",
  toolName: "rename_document",
  toolFingerprint: hex("e"),
  kind: "mutation",
  argsDigest: hex("b"),
  code: "",
  guardrail: "pii",
  action: "deny",
  approvalId: hex("f"),
  mutationKey: hex("c"),
  operatorRef: "op-1",
  result: "ok",
};
const minimalEvent = { at: "2031-02-03T04:05:06Z", decision: "approval", turnKey: hex("a"), scopeId: "doc-1" };

const valid = {
  identity: {
    turnKey: hex("a"),
    scopeId: "doc-1",
    toolCallId: "call-1",
    toolName: "rename_document",
    argsDigest: hex("b"),
    mutationKey: hex("c"),
    toolFingerprint: hex("e"),
  },
  evidence: { turnKey: hex("a"), evidenceDigest: hex("d") },
  complete: { turnKey: hex("a"), token: "t-1", outcome: "complete", result: { content: "ok", status: "success" } },
  unknown: { turnKey: hex("a"), token: "t-1", outcome: "unknown" },
  release: { turnKey: hex("a"), token: "t-1" },
  claims: [
    { status: "acquired", token: "t-1" },
    { status: "replay", result: { content: "ok", status: "error" } },
    { status: "pending" },
    { status: "unknown" },
    { status: "conflict" },
    { status: "conflict", completed: { toolName: "rename_document", toolCallId: "call-1", result: { content: "ok", status: "success" } } },
    { status: "scope_unresolved" },
    { status: "read_required" },
  ],
  options: [
    {},
    { requireResolvedScope: false },
    { requireResolvedScope: true },
    { readEvidence: [] },
    { readEvidence: [hex("d")] },
    { requireResolvedScope: false, readEvidence: [hex("d"), hex("0")] },
  ],
  events: [fullEvent, minimalEvent, { ...minimalEvent, args: { a: [1, null] } }],
};

/** Timestamps at the edges of what `z.iso.datetime({ offset: true })` accepts. */
const TIMES = [
  "2031-02-03T04:05:06Z",
  "2031-02-03T04:05:06.1+23:59",
  "2031-02-03T04:05:06.123456789-00:00",
  "2024-02-29T00:00:00Z",
  "2023-02-29T00:00:00Z",
  "2031-13-03T04:05:06Z",
  "2031-02-03T24:00:00Z",
  "2031-02-03T04:05:60Z",
  "2031-02-03T04:05Z",
  "2031-02-03T04:05:06",
  "2031-02-03T04:05:06+0200",
  "2031-02-03T04:05:06+24:00",
  "2031-02-03 04:05:06Z",
  "2031-02-03t04:05:06z",
  " 2031-02-03T04:05:06Z",
  "2031-02-03T04:05:06Z\n",
  "2031-02-03",
  "",
];

/** Values that break a record in one way: each field replaced, removed, or an extra one added. */
function corruptions(record: Record<string, unknown>): unknown[] {
  const replacements: unknown[] = [undefined, null, "", "x", hex("A"), hex("a").slice(1), `${hex("a")}0`, 0, true, {}, [], "complete", "unknown", "acquired", "success"];
  const variants: unknown[] = [null, undefined, [], "text", 1, Object.create(record) as unknown, { ...record, extra: 1 }];
  for (const key of Object.keys(record)) {
    const { [key]: _removed, ...rest } = record;
    variants.push(rest);
    for (const replacement of replacements) variants.push({ ...record, [key]: replacement });
    const nested = record[key];
    if (typeof nested === "object" && nested !== null) {
      for (const inner of corruptions(nested as Record<string, unknown>)) variants.push({ ...record, [key]: inner });
    }
  }
  // Same own keys, but not a plain object (a class instance's prototype).
  variants.push(Object.setPrototypeOf({ ...record }, { custom: true }));
  return variants;
}

function agreesWithSchema(fast: (value: unknown) => unknown, schema: z.ZodType, value: unknown) {
  const expected = schema.safeParse(value);
  if (expected.success) {
    expect(fast(value)).toEqual(expected.data);
  } else {
    expect(() => fast(value)).toThrow(StoreContractError);
  }
}

describe("store boundary fast paths agree with the schemas", () => {
  it("mutation identities", () => {
    for (const value of [valid.identity, ...corruptions(valid.identity)]) {
      agreesWithSchema(parseIdentity, MutationIdentitySchema, value);
    }
  });

  it("read evidence", () => {
    for (const value of [valid.evidence, ...corruptions(valid.evidence)]) {
      agreesWithSchema(parseEvidence, ReadEvidenceSchema, value);
    }
  });

  it("settlements", () => {
    for (const value of [valid.complete, valid.unknown, ...corruptions(valid.complete), ...corruptions(valid.unknown)]) {
      agreesWithSchema(parseSettlement, MutationSettlementSchema, value);
    }
  });

  it("releases", () => {
    for (const value of [valid.release, ...corruptions(valid.release), valid.unknown, valid.complete]) {
      agreesWithSchema(parseRelease, MutationReleaseSchema, value);
    }
  });

  it("claim answers", () => {
    for (const claim of valid.claims) {
      for (const value of [claim, ...corruptions(claim)]) agreesWithSchema(parseClaimResult, ClaimResultSchema, value);
    }
  });

  it("claim options, where only an omitted argument means the defaults", () => {
    expect(requiresResolvedScope(undefined)).toBe(true);
    expect(parseClaimOptions(undefined)).toEqual({ requireResolvedScope: true, readEvidence: undefined });
    const lists = [
      Array.from({ length: MAX_READ_EVIDENCE }, () => hex("d")),
      Array.from({ length: MAX_READ_EVIDENCE + 1 }, () => hex("d")),
      [hex("d"), undefined],
      Object.assign([hex("d")], { extra: 1 }),
      new Array<string>(1),
      "not a list",
      { 0: hex("d"), length: 1 },
    ];
    const candidates = [...valid.options, ...lists.map((readEvidence) => ({ readEvidence }))];
    for (const options of candidates) {
      for (const value of [options, ...corruptions(options)]) {
        if (value === undefined) continue;
        const expected = ClaimOptionsSchema.safeParse(value);
        if (expected.success) {
          expect(requiresResolvedScope(value)).toBe(expected.data.requireResolvedScope ?? true);
          expect(parseClaimOptions(value)).toEqual({
            requireResolvedScope: expected.data.requireResolvedScope ?? true,
            readEvidence: expected.data.readEvidence,
          });
        } else {
          expect(() => requiresResolvedScope(value)).toThrow(StoreContractError);
          expect(() => parseClaimOptions(value)).toThrow(StoreContractError);
        }
      }
    }
  });

  it("audit events", () => {
    const variants: unknown[] = [];
    for (const event of valid.events) {
      variants.push(event, ...corruptions(event));
      for (const at of TIMES) variants.push({ ...event, at });
      // Not strings, though a regular expression's test would coerce them to a valid timestamp.
      const stamp = "2031-02-03T04:05:06Z";
      for (const at of [[stamp], new String(stamp), { toString: () => stamp }]) variants.push({ ...event, at });
      for (const decision of ["executed", "released", "deleted", "", 1]) variants.push({ ...event, decision });
      for (const kind of ["document-read", "auxiliary", "write", undefined]) variants.push({ ...event, kind });
      variants.push({ ...event, constructor: "x" }, { ...event, __proto__: null }, { ...event, seq: 1 }, { ...event, code: undefined });
    }
    for (const value of variants) agreesWithSchema(parseAuditEvent, AuditEventSchema, value);
  });

  it("read options", () => {
    expect(parseReadOptions(undefined)).toBeUndefined();
    const candidates = [{}, { audit: fullEvent }, { audit: minimalEvent }, { audit: valid.events[2] }];
    for (const options of candidates) {
      for (const value of [options, ...corruptions(options)]) {
        if (value === undefined) continue;
        agreesWithSchema((v) => ({ audit: parseReadOptions(v) }), RecordReadOptionsSchema, value);
      }
    }
  });

  it("settlements that carry an audit event", () => {
    for (const base of [valid.complete, valid.unknown]) {
      for (const audit of [fullEvent, minimalEvent]) {
        const settlement = { ...base, audit };
        for (const value of [settlement, ...corruptions(settlement)]) agreesWithSchema(parseSettlement, MutationSettlementSchema, value);
      }
    }
  });

  it("digests", () => {
    for (const value of [hex("0"), hex("f"), hex("g"), hex("F"), "", 1, null, hex("a").slice(2)]) {
      agreesWithSchema((v) => parseDigest(v, "turn key"), DigestSchema, value);
    }
  });

  it("digests: one that passed is remembered by its content only", () => {
    const valid64 = hex("a");
    expect(parseDigest(valid64, "turn key")).toBe(valid64);
    // The same content in another string object passes; one unit changed anywhere never does.
    expect(parseDigest(["a".repeat(32), "a".repeat(32)].join(""), "turn key")).toBe(valid64);
    for (let index = 0; index < 64; index++) {
      for (const unit of ["A", "g", "/", ":", "`", "\u007f", "\u0080", "\u00e1", "\ud83d"]) {
        const changed = valid64.slice(0, index) + unit + valid64.slice(index + 1);
        if (changed.length === 64) expect(() => parseDigest(changed, "turn key"), `${unit} at ${String(index)}`).toThrow(StoreContractError);
      }
    }
    for (let round = 0; round < 20; round++) expect(() => parseDigest(hex("A"), "turn key")).toThrow(StoreContractError);
  });

  it("keys in any order, and enumerable keys inherited from Object.prototype, are judged as zod judges them", () => {
    const reordered = Object.fromEntries(Object.entries(valid.identity).reverse());
    agreesWithSchema(parseIdentity, MutationIdentitySchema, reordered);
    const polluted = Object.prototype as Record<string, unknown>;
    for (const [key, value] of [
      ["extra", 1],
      ["audit", fullEvent],
      ["toolFingerprint", hex("e")],
    ] as const) {
      Object.defineProperty(polluted, key, { value, enumerable: true, configurable: true, writable: true });
      try {
        const { toolFingerprint: _omitted, ...withoutFingerprint } = valid.identity;
        for (const identity of [valid.identity, withoutFingerprint]) agreesWithSchema(parseIdentity, MutationIdentitySchema, identity);
        for (const settlement of [valid.complete, valid.unknown]) agreesWithSchema(parseSettlement, MutationSettlementSchema, settlement);
        agreesWithSchema(parseEvidence, ReadEvidenceSchema, valid.evidence);
      } finally {
        Reflect.deleteProperty(polluted, key);
      }
    }
  });

  it("returns detached copies of evidence lists and audit events", () => {
    const list = [hex("d")];
    const parsed = parseClaimOptions({ readEvidence: list });
    expect(parsed.readEvidence).not.toBe(list);
    list.push(hex("e"));
    expect(parsed.readEvidence).toEqual([hex("d")]);
    const event = { ...fullEvent };
    expect(parseAuditEvent(event)).not.toBe(event);
    const settled = parseSettlement({ ...valid.unknown, audit: event });
    expect(settled.audit).not.toBe(event);
    expect(parseReadOptions({ audit: event })).not.toBe(event);
  });

  it("returns detached copies", () => {
    const result = { content: "ok", status: "success" as const };
    const settlement = { ...valid.complete, result };
    const parsed = parseSettlement(settlement);
    expect(parsed).not.toBe(settlement);
    expect(parsed.outcome === "complete" && parsed.result).not.toBe(result);
    const release = { ...valid.release };
    expect(parseRelease(release)).not.toBe(release);
  });
});

describe("valid records take the fast path: zod is not asked", () => {
  // The fast paths exist for speed (docs/benchmarks.md); one that quietly fell through to zod for
  // a valid record would still be correct, only slow, so nothing else would notice.
  const validTimes = TIMES.filter((at) => AuditEventSchema.safeParse({ ...minimalEvent, at }).success);
  const cases: [string, z.ZodType, (value: unknown) => unknown, unknown[]][] = [
    ["identities", MutationIdentitySchema, parseIdentity, [valid.identity, Object.fromEntries(Object.entries(valid.identity).reverse())]],
    ["read evidence", ReadEvidenceSchema, parseEvidence, [valid.evidence]],
    [
      "settlements",
      MutationSettlementSchema,
      parseSettlement,
      [valid.complete, valid.unknown, ...[fullEvent, minimalEvent].flatMap((audit) => [{ ...valid.complete, audit }, { ...valid.unknown, audit }])],
    ],
    ["releases", MutationReleaseSchema, parseRelease, [valid.release]],
    ["claim answers", ClaimResultSchema, parseClaimResult, valid.claims],
    [
      "claim options",
      ClaimOptionsSchema,
      parseClaimOptions,
      [undefined, ...valid.options, { readEvidence: Array.from({ length: MAX_READ_EVIDENCE }, () => hex("d")) }],
    ],
    [
      "audit events",
      AuditEventSchema,
      parseAuditEvent,
      [fullEvent, minimalEvent, { ...minimalEvent, code: undefined }, ...validTimes.map((at) => ({ ...fullEvent, at }))],
    ],
    ["read options", RecordReadOptionsSchema, parseReadOptions, [undefined, {}, { audit: fullEvent }, { audit: minimalEvent }]],
    ["digests", DigestSchema, (value) => parseDigest(value, "turn key"), [hex("0"), hex("f"), "0123456789abcdef".repeat(4)]],
  ];

  it.each(cases)("%s", (_name, schema, fast, values) => {
    const spy = vi.spyOn(schema, "safeParse");
    try {
      for (const value of values) {
        fast(value);
        expect(spy, JSON.stringify(value)).not.toHaveBeenCalled();
      }
    } finally {
      spy.mockRestore();
    }
    expect(validTimes.length).toBeGreaterThan(3);
  });
});

describe("what the boundary's errors name", () => {
  it.each<[string, () => unknown, string]>([
    ["parseIdentity", () => parseIdentity({}), "invalid mutation identity: "],
    ["parseEvidence", () => parseEvidence({}), "invalid read evidence: "],
    ["parseSettlement", () => parseSettlement({}), "invalid mutation settlement: "],
    ["parseRelease", () => parseRelease({}), "invalid mutation release: "],
    ["parseClaimOptions", () => parseClaimOptions(null), "invalid claim options: "],
    ["parseReadOptions", () => parseReadOptions(null), "invalid read options: "],
    ["parseAuditEvent", () => parseAuditEvent({}), "invalid audit event: "],
    ["parseClaimResult", () => parseClaimResult({}), "invalid claimMutation answer: "],
  ])("%s", (_name, parse, prefix) => {
    let caught: unknown;
    try {
      parse();
    } catch (error) {
      caught = error;
    }
    expect(StoreContractError.isInstance(caught)).toBe(true);
    expect((caught as Error).message.startsWith(prefix), (caught as Error).message).toBe(true);
  });
});

describe("stores this package ships are trusted; nothing else is", () => {
  it("trusts the shipped stores as they are made", () => {
    const memory = new InMemoryGuardrailStore();
    const sqlite = SqliteGuardrailStore.open({ path: ":memory:" });
    try {
      expect(isTrustedStore(memory)).toBe(true);
      expect(isTrustedStore(sqlite)).toBe(true);
      // The brand is not enumerable, so it shows nowhere.
      expect(Object.keys(memory)).toEqual([]);
      expect(JSON.stringify(memory)).toBe("{}");
    } finally {
      sqlite.close();
    }
  });

  it("does not trust a custom store, a wrapper, a subclass, a Proxy, a derived object or a tampered instance", () => {
    const memory = new InMemoryGuardrailStore();
    class Subclass extends InMemoryGuardrailStore {}
    const patched = new InMemoryGuardrailStore();
    Object.defineProperty(patched, "claimMutation", { value: () => Promise.resolve({ status: "acquired", token: "x" }) });
    const reparented = new InMemoryGuardrailStore();
    Object.setPrototypeOf(reparented, Subclass.prototype);
    const forged = new ForwardingStore(memory);
    Object.defineProperty(forged, TRUSTED_STORE, { value: true });
    // The right brand value on an object made to look like a shipped store, but not as the class brands it.
    const lookalike = (flags: PropertyDescriptor) => {
      const store = Object.create(InMemoryGuardrailStore.prototype) as object;
      Object.defineProperty(store, TRUSTED_STORE, { value: InMemoryGuardrailStore.prototype, ...flags });
      return store;
    };
    for (const [label, store] of [
      ["a wrapper around a shipped store", new ForwardingStore(memory)],
      ["an instance of a subclass", new Subclass()],
      ["a Proxy around a shipped store", new Proxy(memory, {})],
      ["an object whose prototype is a shipped store", Object.create(memory) as object],
      ["a shipped store with a method replaced on it", patched],
      ["a shipped store given another prototype", reparented],
      ["a wrapper with a brand that is not its prototype", forged],
      ["a lookalike with an enumerable brand", lookalike({ enumerable: true })],
      ["a lookalike with a writable brand", lookalike({ writable: true })],
      ["a lookalike with a configurable brand", lookalike({ configurable: true })],
      ["a lookalike with the brand and another own property", Object.assign(lookalike({}), { extra: 1 })],
      ["a shipped store with a symbol-keyed property added after its brand", Object.defineProperty(new InMemoryGuardrailStore(), Symbol("tag"), { value: 1 })],
      ["a plain object", {}],
      ["null", null],
      ["undefined", undefined],
    ] as const) {
      expect(isTrustedStore(store), label).toBe(false);
    }
  });

  it("the brand cannot be removed or changed on a shipped store", () => {
    const memory = new InMemoryGuardrailStore();
    expect(() => Object.defineProperty(memory, TRUSTED_STORE, { value: {} })).toThrow(TypeError);
    expect(Reflect.deleteProperty(memory, TRUSTED_STORE)).toBe(false);
    expect(isTrustedStore(memory)).toBe(true);
  });
});
