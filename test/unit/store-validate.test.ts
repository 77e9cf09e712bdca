/**
 * The store boundary's fast paths must never accept what the zod schemas reject, and must build
 * the same value zod would. Checked on valid records and on many corrupted variants of them.
 */
import { describe, expect, it } from "vitest";
import {
  ClaimOptionsSchema,
  ClaimResultSchema,
  DigestSchema,
  MutationIdentitySchema,
  MutationReleaseSchema,
  MutationSettlementSchema,
  ReadEvidenceSchema,
  StoreContractError,
} from "arkah-agent-guardrails";
import type { z } from "zod";
import {
  parseClaimResult,
  parseDigest,
  parseEvidence,
  parseIdentity,
  parseRelease,
  parseSettlement,
  requiresResolvedScope,
} from "../../src/stores/validate.js";

const hex = (char: string) => char.repeat(64);

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
  ],
  options: [{}, { requireResolvedScope: false }, { requireResolvedScope: true }],
};

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
    for (const options of valid.options) {
      for (const value of [options, ...corruptions(options)]) {
        if (value === undefined) continue;
        const expected = ClaimOptionsSchema.safeParse(value);
        if (expected.success) {
          expect(requiresResolvedScope(value)).toBe(expected.data.requireResolvedScope ?? true);
        } else {
          expect(() => requiresResolvedScope(value)).toThrow(StoreContractError);
        }
      }
    }
  });

  it("digests", () => {
    for (const value of [hex("0"), hex("f"), hex("g"), hex("F"), "", 1, null, hex("a").slice(2)]) {
      agreesWithSchema((v) => parseDigest(v, "turn key"), DigestSchema, value);
    }
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
