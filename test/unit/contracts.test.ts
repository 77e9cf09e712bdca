import { describe, expect, it } from "vitest";
import {
  digest,
  DigestSchema,
  TurnInputSchema,
  type TurnInput,
} from "arkah-agent-guardrails";
import {
  AdmissionReceiptSchema,
  ApprovalDecisionResultSchema,
  ApprovalRecordSchema,
  AUDIT_DECISIONS,
  ClaimOptionsSchema,
  ClaimResultSchema,
  MutationResultSchema,
  MutationSettlementSchema,
  ReadEvidenceSchema,
  SegmentSchema,
  TOOL_KINDS,
  ToolKindSchema,
} from "arkah-agent-guardrails/store";
import { RetryPolicySchema, ToolPolicySchema } from "../../src/contracts/policy.js";

const D = digest("x");

function turn(overrides: Record<string, unknown> = {}): TurnInput {
  return {
    scopeId: "doc-1",
    turnId: "turn-1",
    policyVersion: "v1",
    segments: [{ label: "user", content: "Rename it." }],
    ...overrides,
  };
}

function issuePaths(result: { success: boolean; error?: { issues: { path: PropertyKey[] }[] } }): PropertyKey[][] {
  return result.error?.issues.map((issue) => issue.path) ?? [];
}

describe("TurnInputSchema", () => {
  it("accepts a valid turn and returns it unchanged", () => {
    const input = turn({
      segments: [
        { label: "user", content: "Rename it." },
        { label: "quote", content: "" },
      ],
    });
    expect(TurnInputSchema.parse(input)).toEqual(input);
  });

  it("keeps whitespace in content verbatim", () => {
    const content = "  Rename\tit.\r\n\n  ";
    const parsed = TurnInputSchema.parse(turn({ segments: [{ label: "user", content }] }));
    expect(parsed.segments[0]!.content).toBe(content);
  });

  it("keeps whitespace in ids verbatim", () => {
    const parsed = TurnInputSchema.parse(turn({ scopeId: " doc-1 ", turnId: "turn-1\n" }));
    expect([parsed.scopeId, parsed.turnId]).toEqual([" doc-1 ", "turn-1\n"]);
  });

  it("rejects duplicate labels with the path of the repeated label", () => {
    const result = TurnInputSchema.safeParse(
      turn({
        segments: [
          { label: "user", content: "a" },
          { label: "quote", content: "b" },
          { label: "user", content: "c" },
        ],
      }),
    );
    expect(result.success).toBe(false);
    expect(issuePaths(result)).toEqual([["segments", 2, "label"]]);
    expect(result.error?.issues[0]?.message).toContain("user");
  });

  it("reports every repeated label", () => {
    const result = TurnInputSchema.safeParse(
      turn({
        segments: [
          { label: "a", content: "" },
          { label: "a", content: "" },
          { label: "a", content: "" },
        ],
      }),
    );
    expect(issuePaths(result)).toEqual([
      ["segments", 1, "label"],
      ["segments", 2, "label"],
    ]);
  });

  it("treats labels that differ only in case or whitespace as distinct", () => {
    expect(
      TurnInputSchema.safeParse(
        turn({
          segments: [
            { label: "user", content: "" },
            { label: "User", content: "" },
            { label: "user ", content: "" },
          ],
        }),
      ).success,
    ).toBe(true);
  });

  it("takes an optional principal, kept verbatim; an empty or non-string one is rejected", () => {
    expect(TurnInputSchema.parse(turn({ principal: " user-1 " })).principal).toBe(" user-1 ");
    expect(TurnInputSchema.parse(turn())).not.toHaveProperty("principal");
    expect(issuePaths(TurnInputSchema.safeParse(turn({ principal: "" })))).toEqual([["principal"]]);
    expect(TurnInputSchema.safeParse({ ...turn(), principal: 7 }).success).toBe(false);
  });

  it.each(["scopeId", "turnId", "policyVersion"])("rejects an empty %s", (field) => {
    const result = TurnInputSchema.safeParse(turn({ [field]: "" }));
    expect(result.success).toBe(false);
    expect(issuePaths(result)).toEqual([[field]]);
  });

  it("rejects an empty segment label", () => {
    const result = TurnInputSchema.safeParse(turn({ segments: [{ label: "", content: "x" }] }));
    expect(issuePaths(result)).toEqual([["segments", 0, "label"]]);
  });

  it("rejects a turn without segments", () => {
    expect(issuePaths(TurnInputSchema.safeParse(turn({ segments: [] })))).toEqual([["segments"]]);
  });

  it("rejects unknown keys on the turn and on segments", () => {
    expect(TurnInputSchema.safeParse({ ...turn(), trusted: true }).success).toBe(false);
    expect(TurnInputSchema.safeParse(turn({ segments: [{ label: "user", content: "x", role: "system" }] })).success).toBe(false);
  });

  it("rejects missing fields and non-string content", () => {
    const { policyVersion: _policyVersion, ...withoutPolicy } = turn();
    expect(TurnInputSchema.safeParse(withoutPolicy).success).toBe(false);
    expect(TurnInputSchema.safeParse(turn({ segments: [{ label: "user", content: 1 }] })).success).toBe(false);
    expect(SegmentSchema.safeParse({ label: "user" }).success).toBe(false);
  });
});

describe("RetryPolicySchema", () => {
  it("accepts an empty policy and every field", () => {
    expect(RetryPolicySchema.parse({})).toEqual({});
    const full = { owner: "middleware", maxAttempts: 3, delayMs: 250, idempotent: true } as const;
    expect(RetryPolicySchema.parse(full)).toEqual(full);
    expect(RetryPolicySchema.parse({ owner: "tool" })).toEqual({ owner: "tool" });
  });

  it.each([1, 2, 3, 4, 5])("accepts maxAttempts %d", (maxAttempts) => {
    expect(RetryPolicySchema.safeParse({ maxAttempts }).success).toBe(true);
  });

  it.each([0, 6, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, "3"])("rejects maxAttempts %o", (maxAttempts) => {
    expect(RetryPolicySchema.safeParse({ maxAttempts }).success).toBe(false);
  });

  it.each([0, 1, 200, 60_000])("accepts delayMs %d", (delayMs) => {
    expect(RetryPolicySchema.safeParse({ delayMs }).success).toBe(true);
  });

  it.each([-1, 60_001, 0.5, Number.NaN, "200"])("rejects delayMs %o", (delayMs) => {
    expect(RetryPolicySchema.safeParse({ delayMs }).success).toBe(false);
  });

  it("rejects an unknown owner, a non-boolean idempotent and unknown keys", () => {
    expect(RetryPolicySchema.safeParse({ owner: "both" }).success).toBe(false);
    expect(RetryPolicySchema.safeParse({ idempotent: "yes" }).success).toBe(false);
    expect(RetryPolicySchema.safeParse({ retries: 3 }).success).toBe(false);
    expect(RetryPolicySchema.safeParse({ maxAttempts: 2, backoff: "exponential" }).success).toBe(false);
  });
});

describe("ToolPolicySchema", () => {
  it.each(TOOL_KINDS)("accepts kind %s", (kind) => {
    expect(ToolPolicySchema.parse({ kind })).toEqual({ kind });
  });

  it("has exactly the five documented kinds", () => {
    expect([...TOOL_KINDS]).toEqual(["document-read", "source-read", "mutation", "side-effect", "auxiliary"]);
    expect(ToolKindSchema.options).toEqual([...TOOL_KINDS]);
  });

  it("accepts a retry policy", () => {
    const policy = { kind: "mutation", retry: { maxAttempts: 2, idempotent: true } } as const;
    expect(ToolPolicySchema.parse(policy)).toEqual(policy);
  });

  it("rejects an unknown kind or a missing kind", () => {
    expect(ToolPolicySchema.safeParse({ kind: "write" }).success).toBe(false);
    expect(ToolPolicySchema.safeParse({}).success).toBe(false);
  });

  it("rejects unknown keys, at the top and inside retry", () => {
    const top = ToolPolicySchema.safeParse({ kind: "mutation", idempotent: true });
    expect(top.success).toBe(false);
    expect(top.error?.issues[0]?.code).toBe("unrecognized_keys");
    const nested = ToolPolicySchema.safeParse({ kind: "mutation", retry: { attempts: 2 } });
    expect(nested.success).toBe(false);
    expect(issuePaths(nested)).toEqual([["retry"]]);
  });

  it("rejects an invalid retry policy", () => {
    expect(ToolPolicySchema.safeParse({ kind: "auxiliary", retry: { maxAttempts: 9 } }).success).toBe(false);
  });
});

describe("ClaimResultSchema", () => {
  it.each([
    { status: "acquired", token: "tok" },
    { status: "replay", result: { content: "done", status: "success" } },
    { status: "replay", result: { content: "", status: "error" } },
    { status: "pending" },
    { status: "unknown" },
    { status: "conflict" },
    { status: "conflict", completed: { toolName: "rename_document", toolCallId: "w1", result: { content: "", status: "error" } } },
    { status: "scope_unresolved" },
  ])("accepts %o", (value) => {
    expect(ClaimResultSchema.parse(value)).toEqual(value);
  });

  it.each([
    ["an unknown status", { status: "granted" }],
    ["a missing status", {}],
    ["acquired without a token", { status: "acquired" }],
    ["acquired with an empty token", { status: "acquired", token: "" }],
    ["replay without a result", { status: "replay" }],
    ["replay with a non-text result", { status: "replay", result: { content: 1, status: "success" } }],
    ["replay with a bad result status", { status: "replay", result: { content: "x", status: "ok" } }],
    ["pending with a token", { status: "pending", token: "tok" }],
    ["conflict with a result", { status: "conflict", result: { content: "x", status: "success" } }],
    ["conflict with a completed call missing its result", { status: "conflict", completed: { toolName: "t", toolCallId: "w1" } }],
    ["conflict with a completed call without a tool", { status: "conflict", completed: { toolCallId: "w1", result: { content: "x", status: "success" } } }],
    ["conflict with an empty completed call id", { status: "conflict", completed: { toolName: "t", toolCallId: "", result: { content: "x", status: "success" } } }],
    ["conflict with an extra key in the completed call", { status: "conflict", completed: { toolName: "t", toolCallId: "w1", result: { content: "x", status: "success" }, args: {} } }],
    ["pending with a completed call", { status: "pending", completed: { toolName: "t", toolCallId: "w1", result: { content: "x", status: "success" } } }],
    ["a token on unknown", { status: "unknown", token: "t" }],
  ])("rejects %s", (_label, value) => {
    expect(ClaimResultSchema.safeParse(value).success).toBe(false);
  });
});

describe("MutationSettlementSchema", () => {
  it("accepts complete with a result and unknown without one", () => {
    const complete = { turnKey: D, token: "t", outcome: "complete", result: { content: "ok", status: "success" } };
    const unknown = { turnKey: D, token: "t", outcome: "unknown" };
    expect(MutationSettlementSchema.parse(complete)).toEqual(complete);
    expect(MutationSettlementSchema.parse(unknown)).toEqual(unknown);
  });

  it.each([
    ["complete without a result", { turnKey: D, token: "t", outcome: "complete" }],
    ["unknown with a result", { turnKey: D, token: "t", outcome: "unknown", result: { content: "", status: "success" } }],
    ["an unknown outcome", { turnKey: D, token: "t", outcome: "failed" }],
    ["an empty token", { turnKey: D, token: "", outcome: "unknown" }],
    ["a bad turn key", { turnKey: "abc", token: "t", outcome: "unknown" }],
    ["an unknown key", { turnKey: D, token: "t", outcome: "unknown", reason: "crash" }],
  ])("rejects %s", (_label, value) => {
    expect(MutationSettlementSchema.safeParse(value).success).toBe(false);
  });
});

describe("store record schemas", () => {
  it("DigestSchema takes lowercase 64-hex only", () => {
    expect(DigestSchema.safeParse(D).success).toBe(true);
    expect(DigestSchema.safeParse(D.toUpperCase()).success).toBe(false);
    expect(DigestSchema.safeParse(D.slice(1)).success).toBe(false);
    expect(DigestSchema.safeParse(`${D}\n`).success).toBe(false);
  });

  it("AdmissionReceiptSchema takes ISO timestamps with Z or an offset", () => {
    const base = {
      turnKey: D,
      scopeId: "s",
      turnId: "t",
      policyVersion: "v",
      moderationDigest: D,
      allowed: false,
    };
    expect(AdmissionReceiptSchema.safeParse({ ...base, decidedAt: "2025-01-01T00:00:00.000Z" }).success).toBe(true);
    expect(AdmissionReceiptSchema.safeParse({ ...base, decidedAt: "2025-01-01T00:00:00+02:00" }).success).toBe(true);
    expect(AdmissionReceiptSchema.safeParse({ ...base, decidedAt: "2025-01-01" }).success).toBe(false);
  });

  it("ReadEvidenceSchema, MutationResultSchema and ClaimOptionsSchema are strict", () => {
    expect(ReadEvidenceSchema.safeParse({ turnKey: D, evidenceDigest: D, extra: 1 }).success).toBe(false);
    expect(MutationResultSchema.safeParse({ content: "", status: "success", extra: 1 }).success).toBe(false);
    expect(ClaimOptionsSchema.parse({})).toEqual({});
    expect(ClaimOptionsSchema.safeParse({ requireResolvedScope: false, extra: 1 }).success).toBe(false);
  });
});

describe("approval records: fields agree with the status", () => {
  const request = {
    approvalId: D,
    turnKey: D,
    scopeId: "doc-1",
    toolCallId: "w1",
    toolName: "rename_document",
    argsDigest: D,
    args: { title: "x" },
    guardrails: ["approval"],
    requestedAt: "2031-01-01T00:00:00Z",
  };
  const at = "2031-01-02T00:00:00Z";
  const approve = { decision: "approve" };
  const reject = { decision: "reject", message: "no" };
  const edit = { decision: "edit", args: { title: "y" } };

  it.each<[string, Record<string, unknown>]>([
    ["pending", { status: "pending" }],
    ["approved", { status: "approved", decision: approve, decidedAt: at }],
    ["approved by someone", { status: "approved", decision: approve, operatorRef: "op-1", decidedAt: at }],
    ["rejected", { status: "rejected", decision: reject, decidedAt: at }],
    ["edited", { status: "edited", decision: edit, decidedAt: at }],
    ["applied after approve", { status: "applied", decision: approve, decidedAt: at, appliedAt: at }],
    ["applied after edit", { status: "applied", decision: edit, decidedAt: at, appliedAt: at }],
    ["expired", { status: "expired", expiredAt: at }],
  ])("accepts %s", (_label, fields) => {
    expect(ApprovalRecordSchema.safeParse({ ...request, ...fields }).success).toBe(true);
  });

  it.each<[string, Record<string, unknown>]>([
    ["pending with a decision", { status: "pending", decision: approve, decidedAt: at }],
    ["pending with an operator", { status: "pending", operatorRef: "op-1" }],
    ["approved without a decision", { status: "approved", decidedAt: at }],
    ["approved without decidedAt", { status: "approved", decision: approve }],
    ["approved by a rejection", { status: "approved", decision: reject, decidedAt: at }],
    ["rejected by an edit", { status: "rejected", decision: edit, decidedAt: at }],
    ["edited by an approval", { status: "edited", decision: approve, decidedAt: at }],
    ["applied after a rejection", { status: "applied", decision: reject, decidedAt: at, appliedAt: at }],
    ["applied without appliedAt", { status: "applied", decision: approve, decidedAt: at }],
    ["approved with appliedAt", { status: "approved", decision: approve, decidedAt: at, appliedAt: at }],
    ["expired without expiredAt", { status: "expired" }],
    ["expired with a decision", { status: "expired", decision: approve, decidedAt: at, expiredAt: at }],
    ["pending with expiredAt", { status: "pending", expiredAt: at }],
    ["an unknown status", { status: "open" }],
  ])("rejects %s", (_label, fields) => {
    expect(ApprovalRecordSchema.safeParse({ ...request, ...fields }).success).toBe(false);
  });

  it("a decision result names its reason; not_found carries no record in practice, but the schema allows one", () => {
    const record = { ...request, status: "approved", decision: approve, decidedAt: at };
    expect(ApprovalDecisionResultSchema.safeParse({ decided: true, record }).success).toBe(true);
    expect(ApprovalDecisionResultSchema.safeParse({ decided: true }).success).toBe(false);
    expect(ApprovalDecisionResultSchema.safeParse({ decided: false, reason: "already_decided", record }).success).toBe(true);
    expect(ApprovalDecisionResultSchema.safeParse({ decided: false, reason: "not_found" }).success).toBe(true);
    expect(ApprovalDecisionResultSchema.safeParse({ decided: false, reason: "gone" }).success).toBe(false);
  });

  it("the audit trail has a released decision", () => {
    expect(AUDIT_DECISIONS).toContain("released");
  });
});
