import { describe, expect, it } from "vitest";
import {
  digest,
  InMemoryGuardrailStore,
  mutationKey,
  StoreContractError,
  turnKey,
  type AdmissionReceipt,
  type GuardrailStore,
  type TurnRef,
} from "arkah-agent-guardrails";
import {
  toolFingerprint,
  type MutationIdentity,
  type MutationResult,
} from "arkah-agent-guardrails/store";
import { isTrustedStore } from "../../src/store/validate.js";

const TURN: TurnRef = { scopeId: "doc-1", turnId: "turn-1" };
const TURN_KEY = turnKey(TURN);
const EVIDENCE = digest({ read: "r1" });

function receipt(overrides: Partial<AdmissionReceipt> = {}): AdmissionReceipt {
  return {
    turnKey: TURN_KEY,
    scopeId: TURN.scopeId,
    turnId: TURN.turnId,
    policyVersion: "v1",
    moderationDigest: digest({ segments: "user" }),
    allowed: true,
    decidedAt: "2025-01-02T03:04:05.000Z",
    ...overrides,
  };
}

function identity(
  turn: TurnRef = TURN,
  call: { id: string; name: string; args: Record<string, unknown> } = {
    id: "w1",
    name: "rename_document",
    args: { title: "Field notes" },
  },
): MutationIdentity {
  return {
    turnKey: turnKey(turn),
    scopeId: turn.scopeId,
    toolCallId: call.id,
    toolName: call.name,
    argsDigest: digest(call.args),
    mutationKey: mutationKey(turn, call),
    toolFingerprint: toolFingerprint({ name: call.name }),
  };
}

const RESULT: MutationResult = { content: '{"title":"Field notes"}', status: "success" };

/** Calls `run` synchronously: a sync throw fails the test; the promise must reject with StoreContractError. */
async function expectContractRejection(run: () => Promise<unknown>): Promise<void> {
  let promise: Promise<unknown> | undefined;
  expect(() => {
    promise = run();
  }).not.toThrow();
  expect(promise).toBeInstanceOf(Promise);
  const error = await promise!.then(
    () => undefined,
    (reason: unknown) => reason,
  );
  expect(StoreContractError.isInstance(error), `expected a StoreContractError, got ${String(error)}`).toBe(true);
}

async function acquire(store: GuardrailStore, id: MutationIdentity = identity()): Promise<string> {
  const claim = await store.claimMutation(id);
  if (claim.status !== "acquired") throw new Error(`expected acquired, got ${claim.status}`);
  return claim.token;
}

/** Lets a test pass a value the types forbid, as an untyped caller could. */
const untyped = (value: unknown): never => value as never;

describe("InMemoryGuardrailStore: input validation", () => {
  const badTurnKeys: unknown[] = ["", "abc", TURN_KEY.toUpperCase(), `${TURN_KEY}0`, TURN_KEY.slice(1), ` ${TURN_KEY.slice(1)}`, 42, null, undefined, {}];

  it.each(badTurnKeys)("getReceipt rejects turn key %o", async (key) => {
    const store = new InMemoryGuardrailStore();
    await expectContractRejection(() => store.getReceipt(untyped(key)));
  });

  const badReceipts: [string, unknown][] = [
    ["not an object", "receipt"],
    ["null", null],
    ["a bad turn key", receipt({ turnKey: "nope" })],
    ["an empty scopeId", receipt({ scopeId: "" })],
    ["an empty turnId", receipt({ turnId: "" })],
    ["an empty policyVersion", receipt({ policyVersion: "" })],
    ["a bad moderation digest", receipt({ moderationDigest: "x".repeat(64) })],
    ["a non-boolean allowed", { ...receipt(), allowed: "true" }],
    ["a bad timestamp", receipt({ decidedAt: "yesterday" })],
    ["a missing field", (({ allowed: _allowed, ...rest }) => rest)(receipt())],
    ["an unknown field", { ...receipt(), trusted: true }],
  ];

  it.each(badReceipts)("putReceiptIfAbsent rejects a receipt with %s and stores nothing", async (_label, value) => {
    const store = new InMemoryGuardrailStore();
    await expectContractRejection(() => store.putReceiptIfAbsent(untyped(value)));
    expect(await store.getReceipt(TURN_KEY)).toBeUndefined();
    // The slot is still free for a valid receipt.
    expect(await store.putReceiptIfAbsent(receipt({ policyVersion: "v2" }))).toEqual(receipt({ policyVersion: "v2" }));
  });

  const badEvidence: [string, unknown][] = [
    ["null", null],
    ["a bad turn key", { turnKey: "x", evidenceDigest: EVIDENCE }],
    ["a bad digest", { turnKey: TURN_KEY, evidenceDigest: EVIDENCE.toUpperCase() }],
    ["a missing digest", { turnKey: TURN_KEY }],
    ["an unknown field", { turnKey: TURN_KEY, evidenceDigest: EVIDENCE, ok: true }],
  ];

  it.each(badEvidence)("recordSuccessfulRead rejects evidence with %s and records nothing", async (_label, value) => {
    const store = new InMemoryGuardrailStore();
    await expectContractRejection(() => store.recordSuccessfulRead(untyped(value)));
    expect(await store.hasSuccessfulRead({ turnKey: TURN_KEY, evidenceDigest: EVIDENCE })).toBe(false);
  });

  it.each(badEvidence)("hasSuccessfulRead rejects evidence with %s", async (_label, value) => {
    const store = new InMemoryGuardrailStore();
    await store.recordSuccessfulRead({ turnKey: TURN_KEY, evidenceDigest: EVIDENCE });
    await expectContractRejection(() => store.hasSuccessfulRead(untyped(value)));
    expect(await store.hasSuccessfulRead({ turnKey: TURN_KEY, evidenceDigest: EVIDENCE })).toBe(true);
  });

  const badIdentities: [string, unknown][] = [
    ["null", null],
    ["a bad turn key", { ...identity(), turnKey: "t" }],
    ["an empty scopeId", { ...identity(), scopeId: "" }],
    ["an empty toolCallId", { ...identity(), toolCallId: "" }],
    ["an empty toolName", { ...identity(), toolName: "" }],
    ["a bad args digest", { ...identity(), argsDigest: "{}" }],
    ["a bad mutation key", { ...identity(), mutationKey: 7 }],
    ["a missing mutation key", (({ mutationKey: _key, ...rest }) => rest)(identity())],
    ["an unknown field", { ...identity(), token: "mine" }],
  ];

  it.each(badIdentities)("claimMutation rejects an identity with %s and claims nothing", async (_label, value) => {
    const store = new InMemoryGuardrailStore();
    await expectContractRejection(() => store.claimMutation(untyped(value)));
    expect((await store.claimMutation(identity())).status).toBe("acquired");
  });

  const badOptions: [string, unknown][] = [
    ["a non-boolean requireResolvedScope", { requireResolvedScope: "no" }],
    ["an unknown option", { requireResolvedScope: false, force: true }],
    ["a non-object", "fast"],
  ];

  it.each(badOptions)("claimMutation rejects options with %s and claims nothing", async (_label, value) => {
    const store = new InMemoryGuardrailStore();
    await expectContractRejection(() => store.claimMutation(identity(), untyped(value)));
    expect((await store.claimMutation(identity())).status).toBe("acquired");
  });

  it("claimMutation validates options even when the claim would be refused anyway", async () => {
    const store = new InMemoryGuardrailStore();
    await acquire(store);
    await expectContractRejection(() => store.claimMutation(identity(), untyped({ nope: 1 })));
  });

  const badSettlements = (token: string): [string, unknown][] => [
    ["null", null],
    ["a bad turn key", { turnKey: "t", token, outcome: "complete", result: RESULT }],
    ["an empty token", { turnKey: TURN_KEY, token: "", outcome: "complete", result: RESULT }],
    ["a missing token", { turnKey: TURN_KEY, outcome: "unknown" }],
    ["an unknown outcome", { turnKey: TURN_KEY, token, outcome: "failed" }],
    ["complete without a result", { turnKey: TURN_KEY, token, outcome: "complete" }],
    ["unknown with a result", { turnKey: TURN_KEY, token, outcome: "unknown", result: RESULT }],
    ["a result with a bad status", { turnKey: TURN_KEY, token, outcome: "complete", result: { content: "x", status: "ok" } }],
    ["a non-text result", { turnKey: TURN_KEY, token, outcome: "complete", result: { content: ["x"], status: "success" } }],
    ["a result with an unknown field", { turnKey: TURN_KEY, token, outcome: "complete", result: { ...RESULT, raw: 1 } }],
  ];

  it("settleMutation rejects every invalid settlement and leaves the claim pending", async () => {
    const store = new InMemoryGuardrailStore();
    const token = await acquire(store);
    for (const [label, value] of badSettlements(token)) {
      await expectContractRejection(() => store.settleMutation(untyped(value)));
      expect((await store.claimMutation(identity())).status, label).toBe("pending");
    }
    expect(await store.settleMutation({ turnKey: TURN_KEY, token, outcome: "complete", result: RESULT })).toBe(true);
  });

  const badReleases = (token: string): [string, unknown][] => [
    ["null", null],
    ["a string", token],
    ["a bad turn key", { turnKey: "t", token }],
    ["an empty token", { turnKey: TURN_KEY, token: "" }],
    ["a missing token", { turnKey: TURN_KEY }],
    ["a numeric token", { turnKey: TURN_KEY, token: 7 }],
    ["an unknown field", { turnKey: TURN_KEY, token, outcome: "unknown" }],
  ];

  it("releaseMutation rejects every invalid release, leaving the claim pending and the trail empty", async () => {
    const store = new InMemoryGuardrailStore();
    const token = await acquire(store);
    for (const [label, value] of badReleases(token)) {
      await expectContractRejection(() => store.releaseMutation(untyped(value)));
      expect((await store.claimMutation(identity())).status, label).toBe("pending");
    }
    expect(await store.readAudit()).toEqual([]);
    expect(await store.releaseMutation({ turnKey: TURN_KEY, token })).toBe(true);
  });
});

describe("InMemoryGuardrailStore: admission receipts", () => {
  it("returns undefined for a turn without a receipt", async () => {
    expect(await new InMemoryGuardrailStore().getReceipt(TURN_KEY)).toBeUndefined();
  });

  it("stores the first receipt and returns it", async () => {
    const store = new InMemoryGuardrailStore();
    expect(await store.putReceiptIfAbsent(receipt())).toEqual(receipt());
    expect(await store.getReceipt(TURN_KEY)).toEqual(receipt());
  });

  it.each([true, false])("keeps the winner (allowed: %s) immutable", async (allowed) => {
    const store = new InMemoryGuardrailStore();
    const first = receipt({ allowed });
    await store.putReceiptIfAbsent(first);
    const second = receipt({ allowed: !allowed, policyVersion: "v2", decidedAt: "2030-01-01T00:00:00+02:00" });
    expect(await store.putReceiptIfAbsent(second)).toEqual(first);
    expect(await store.getReceipt(TURN_KEY)).toEqual(first);
  });

  it("keeps receipts of different turns apart", async () => {
    const store = new InMemoryGuardrailStore();
    const otherKey = turnKey({ ...TURN, turnId: "turn-2" });
    await store.putReceiptIfAbsent(receipt({ allowed: false }));
    const other = receipt({ turnKey: otherKey, turnId: "turn-2" });
    expect(await store.putReceiptIfAbsent(other)).toEqual(other);
    expect(await store.getReceipt(otherKey)).toEqual(other);
    expect((await store.getReceipt(TURN_KEY))?.allowed).toBe(false);
  });

  it("gives every concurrent first admission the same winner", async () => {
    const store = new InMemoryGuardrailStore();
    const candidates = Array.from({ length: 16 }, (_, index) => receipt({ policyVersion: `v${index}`, allowed: index % 2 === 0 }));
    const winners = await Promise.all(candidates.map((candidate) => store.putReceiptIfAbsent(candidate)));
    const stored = await store.getReceipt(TURN_KEY);
    expect(stored).toBeDefined();
    for (const winner of winners) expect(winner).toEqual(stored);
  });

  it("detaches returned receipts from the store", async () => {
    const store = new InMemoryGuardrailStore();
    const returned = await store.putReceiptIfAbsent(receipt());
    returned.allowed = false;
    returned.policyVersion = "hacked";
    const read = await store.getReceipt(TURN_KEY);
    read!.allowed = false;
    const again = await store.putReceiptIfAbsent(receipt({ policyVersion: "v2" }));
    again.allowed = false;
    expect(await store.getReceipt(TURN_KEY)).toEqual(receipt());
  });

  it("detaches the stored receipt from the caller's input", async () => {
    const store = new InMemoryGuardrailStore();
    const input = receipt({ allowed: false });
    await store.putReceiptIfAbsent(input);
    input.allowed = true;
    input.policyVersion = "v9";
    expect(await store.getReceipt(TURN_KEY)).toEqual(receipt({ allowed: false }));
  });
});

describe("InMemoryGuardrailStore: read evidence", () => {
  const evidence = { turnKey: TURN_KEY, evidenceDigest: EVIDENCE };

  it("has no evidence until it is recorded", async () => {
    expect(await new InMemoryGuardrailStore().hasSuccessfulRead(evidence)).toBe(false);
  });

  it("confirms recorded evidence and nothing else", async () => {
    const store = new InMemoryGuardrailStore();
    await store.recordSuccessfulRead(evidence);
    expect(await store.hasSuccessfulRead(evidence)).toBe(true);
    expect(await store.hasSuccessfulRead({ turnKey: turnKey({ ...TURN, turnId: "turn-2" }), evidenceDigest: EVIDENCE })).toBe(false);
    expect(await store.hasSuccessfulRead({ turnKey: TURN_KEY, evidenceDigest: digest({ read: "r2" }) })).toBe(false);
    // Swapping the two digests is not the same evidence.
    expect(await store.hasSuccessfulRead({ turnKey: EVIDENCE, evidenceDigest: TURN_KEY })).toBe(false);
  });

  it("is idempotent", async () => {
    const store = new InMemoryGuardrailStore();
    await store.recordSuccessfulRead(evidence);
    await expect(store.recordSuccessfulRead({ ...evidence })).resolves.toBeUndefined();
    expect(await store.hasSuccessfulRead(evidence)).toBe(true);
  });

  it("is not fooled by mutating the recorded input afterwards", async () => {
    const store = new InMemoryGuardrailStore();
    const input = { ...evidence };
    await store.recordSuccessfulRead(input);
    input.evidenceDigest = digest({ read: "other" });
    expect(await store.hasSuccessfulRead(evidence)).toBe(true);
    expect(await store.hasSuccessfulRead(input)).toBe(false);
  });
});

describe("InMemoryGuardrailStore: mutation claims", () => {
  it("acquires a free slot with a token", async () => {
    const claim = await new InMemoryGuardrailStore().claimMutation(identity());
    expect(claim.status).toBe("acquired");
    expect(claim.status === "acquired" && claim.token.length > 0).toBe(true);
  });

  it("answers pending to the same identity while the claim is open", async () => {
    const store = new InMemoryGuardrailStore();
    await acquire(store);
    expect(await store.claimMutation(identity())).toEqual({ status: "pending" });
    expect(await store.claimMutation({ ...identity() })).toEqual({ status: "pending" });
  });

  it.each([
    ["another call id", { id: "w2", name: "rename_document", args: { title: "Field notes" } }],
    ["another tool", { id: "w1", name: "delete_document", args: { title: "Field notes" } }],
    ["other arguments", { id: "w1", name: "rename_document", args: { title: "Other" } }],
  ])("answers conflict to %s in the same turn", async (_label, call) => {
    const store = new InMemoryGuardrailStore();
    await acquire(store);
    expect(await store.claimMutation(identity(TURN, call))).toEqual({ status: "conflict" });
  });

  it("settles complete only with the exact token", async () => {
    const store = new InMemoryGuardrailStore();
    const token = await acquire(store);
    expect(await store.settleMutation({ turnKey: TURN_KEY, token: `${token}x`, outcome: "complete", result: RESULT })).toBe(false);
    expect(await store.settleMutation({ turnKey: TURN_KEY, token: "other", outcome: "unknown" })).toBe(false);
    expect(await store.claimMutation(identity())).toEqual({ status: "pending" });
    expect(await store.settleMutation({ turnKey: TURN_KEY, token, outcome: "complete", result: RESULT })).toBe(true);
    expect(await store.claimMutation(identity())).toEqual({ status: "replay", result: RESULT });
  });

  it("does not settle a token against another turn", async () => {
    const store = new InMemoryGuardrailStore();
    const token = await acquire(store);
    const otherTurn = { ...TURN, turnId: "turn-2" };
    await acquire(store, identity(otherTurn));
    expect(await store.settleMutation({ turnKey: turnKey(otherTurn), token, outcome: "complete", result: RESULT })).toBe(false);
    expect(await store.claimMutation(identity(otherTurn))).toEqual({ status: "pending" });
  });

  it("returns false for a turn without a claim", async () => {
    const store = new InMemoryGuardrailStore();
    expect(await store.settleMutation({ turnKey: TURN_KEY, token: "t", outcome: "complete", result: RESULT })).toBe(false);
    expect(await store.claimMutation(identity())).toMatchObject({ status: "acquired" });
  });

  it("settles only from pending: a second settle is false and changes nothing", async () => {
    const store = new InMemoryGuardrailStore();
    const token = await acquire(store);
    expect(await store.settleMutation({ turnKey: TURN_KEY, token, outcome: "complete", result: RESULT })).toBe(true);
    expect(
      await store.settleMutation({ turnKey: TURN_KEY, token, outcome: "complete", result: { content: "second", status: "error" } }),
    ).toBe(false);
    expect(await store.settleMutation({ turnKey: TURN_KEY, token, outcome: "unknown" })).toBe(false);
    expect(await store.claimMutation(identity())).toEqual({ status: "replay", result: RESULT });
  });

  it("replays the stored result, error results included, every time", async () => {
    const store = new InMemoryGuardrailStore();
    const token = await acquire(store);
    const failed: MutationResult = { content: "revision conflict", status: "error" };
    await store.settleMutation({ turnKey: TURN_KEY, token, outcome: "complete", result: failed });
    expect(await store.claimMutation(identity())).toEqual({ status: "replay", result: failed });
    expect(await store.claimMutation(identity())).toEqual({ status: "replay", result: failed });
  });

  it("still answers conflict to another call after completion, saying what was done", async () => {
    const store = new InMemoryGuardrailStore();
    const token = await acquire(store);
    await store.settleMutation({ turnKey: TURN_KEY, token, outcome: "complete", result: RESULT });
    expect(await store.claimMutation(identity(TURN, { id: "w2", name: "rename_document", args: {} }))).toEqual({
      status: "conflict",
      completed: { toolName: "rename_document", toolCallId: "w1", result: RESULT },
    });
  });

  it("detaches the replayed result from the store", async () => {
    const store = new InMemoryGuardrailStore();
    const token = await acquire(store);
    const input = { ...RESULT };
    await store.settleMutation({ turnKey: TURN_KEY, token, outcome: "complete", result: input });
    input.content = "mutated input";
    const replay = await store.claimMutation(identity());
    if (replay.status !== "replay") throw new Error("expected replay");
    replay.result.content = "mutated output";
    expect(await store.claimMutation(identity())).toEqual({ status: "replay", result: RESULT });
  });

  it("detaches the stored identity from the caller's input", async () => {
    const store = new InMemoryGuardrailStore();
    const input = identity();
    await acquire(store, input);
    input.mutationKey = identity(TURN, { id: "w9", name: "x", args: {} }).mutationKey;
    expect(await store.claimMutation(identity())).toEqual({ status: "pending" });
  });

  describe("unknown outcomes", () => {
    const sameScopeTurn = { scopeId: TURN.scopeId, turnId: "turn-2" };
    const otherScopeTurn = { scopeId: "doc-2", turnId: "turn-1" };

    async function storeWithUnknown(): Promise<InMemoryGuardrailStore> {
      const store = new InMemoryGuardrailStore();
      const token = await acquire(store);
      expect(await store.settleMutation({ turnKey: TURN_KEY, token, outcome: "unknown" })).toBe(true);
      return store;
    }

    it("answers unknown to the same identity, and conflict to another call of the turn", async () => {
      const store = await storeWithUnknown();
      expect(await store.claimMutation(identity())).toEqual({ status: "unknown" });
      expect(await store.claimMutation(identity(TURN, { id: "w2", name: "rename_document", args: {} }))).toEqual({
        status: "conflict",
      });
    });

    it("cannot be settled again, not even with the token", async () => {
      const store = new InMemoryGuardrailStore();
      const token = await acquire(store);
      await store.settleMutation({ turnKey: TURN_KEY, token, outcome: "unknown" });
      expect(await store.settleMutation({ turnKey: TURN_KEY, token, outcome: "complete", result: RESULT })).toBe(false);
      expect(await store.claimMutation(identity())).toEqual({ status: "unknown" });
    });

    it("blocks other turns in the same scope with scope_unresolved", async () => {
      const store = await storeWithUnknown();
      expect(await store.claimMutation(identity(sameScopeTurn))).toEqual({ status: "scope_unresolved" });
      expect(await store.claimMutation(identity(sameScopeTurn), { requireResolvedScope: true })).toEqual({
        status: "scope_unresolved",
      });
    });

    it("lets another turn in the scope claim with requireResolvedScope: false", async () => {
      const store = await storeWithUnknown();
      expect(await store.claimMutation(identity(sameScopeTurn), { requireResolvedScope: false })).toMatchObject({
        status: "acquired",
      });
    });

    it("does not claim anything when answering scope_unresolved", async () => {
      const store = await storeWithUnknown();
      await store.claimMutation(identity(sameScopeTurn));
      expect(
        await store.claimMutation(identity(sameScopeTurn, { id: "other", name: "rename_document", args: {} }), {
          requireResolvedScope: false,
        }),
      ).toMatchObject({ status: "acquired" });
    });

    it("leaves other scopes unaffected", async () => {
      const store = await storeWithUnknown();
      expect(await store.claimMutation(identity(otherScopeTurn))).toMatchObject({ status: "acquired" });
    });

    it("is not triggered by a pending or completed claim in the scope", async () => {
      const store = new InMemoryGuardrailStore();
      const token = await acquire(store);
      expect(await store.claimMutation(identity(sameScopeTurn))).toMatchObject({ status: "acquired" });
      await store.settleMutation({ turnKey: TURN_KEY, token, outcome: "complete", result: RESULT });
      expect(await store.claimMutation(identity({ ...TURN, turnId: "turn-3" }))).toMatchObject({ status: "acquired" });
    });
  });

  it("issues a different token per acquired claim", async () => {
    const store = new InMemoryGuardrailStore();
    const a = await acquire(store);
    const b = await acquire(store, identity({ ...TURN, turnId: "turn-2" }));
    expect(a).not.toBe(b);
  });

  it("lets exactly one of 32 racing claims of the same call acquire", async () => {
    const store = new InMemoryGuardrailStore();
    const claims = await Promise.all(Array.from({ length: 32 }, () => store.claimMutation(identity())));
    const statuses = claims.map((claim) => claim.status);
    expect(statuses.filter((status) => status === "acquired")).toHaveLength(1);
    expect(statuses.filter((status) => status === "pending")).toHaveLength(31);
  });

  it("lets exactly one of 32 racing claims of different calls in one turn acquire", async () => {
    const store = new InMemoryGuardrailStore();
    const claims = await Promise.all(
      Array.from({ length: 32 }, (_, index) =>
        store.claimMutation(identity(TURN, { id: `w${index}`, name: "rename_document", args: { index } })),
      ),
    );
    const statuses = claims.map((claim) => claim.status);
    expect(statuses.filter((status) => status === "acquired")).toHaveLength(1);
    expect(statuses.filter((status) => status === "conflict")).toHaveLength(31);
  });

  it("lets each of 32 racing claims in 32 turns acquire", async () => {
    const store = new InMemoryGuardrailStore();
    const claims = await Promise.all(
      Array.from({ length: 32 }, (_, index) => store.claimMutation(identity({ ...TURN, turnId: `t${index}` }))),
    );
    expect(claims.every((claim) => claim.status === "acquired")).toBe(true);
  });
});

describe("InMemoryGuardrailStore: approval requests", () => {
  const request = (turnId: string, requestedAt: string) => {
    const args = { title: "Field notes" };
    const key = turnKey({ ...TURN, turnId });
    return {
      approvalId: digest({ kind: "arkah.approval", v: 1, turnKey: key, toolName: "rename_document", toolCallId: "w1", argsDigest: digest(args) }),
      turnKey: key,
      scopeId: TURN.scopeId,
      toolCallId: "w1",
      toolName: "rename_document",
      toolFingerprint: toolFingerprint({ name: "rename_document" }),
      argsDigest: digest(args),
      args,
      guardrails: ["approval"],
      requestedAt,
    };
  };

  it("takes every step's time from its clock, and keeps the caller's own times exactly", async () => {
    let now = Date.parse("2031-02-03T04:00:00.000Z");
    const store = new InMemoryGuardrailStore({ now: () => new Date(now) });
    const first = request("t1", "2031-02-03T05:00:00.000+02:00");
    const second = request("t2", "2031-02-03T03:30:00.000Z");
    await store.requestApproval(first);
    await store.requestApproval(second);
    now += 60_000;
    await store.decideApproval({ approvalId: first.approvalId, decision: { decision: "approve" }, decidedAt: "2031-01-01T00:00:00+01:00" });
    expect(await store.applyApproval({ approvalId: first.approvalId, appliedAt: "2031-01-02T00:00:00+01:00" })).toBe(true);
    now += 60_000;
    expect(await store.expireApprovals({ olderThan: "2031-02-03T04:00:00.000Z" })).toEqual({ expired: 1 });

    expect(await store.getApproval(first.approvalId)).toEqual({
      ...first,
      status: "applied",
      decision: { decision: "approve" },
      decidedAt: "2031-01-01T00:00:00+01:00",
      appliedAt: "2031-01-02T00:00:00+01:00",
    });
    expect(await store.getApproval(second.approvalId)).toEqual({ ...second, status: "expired", expiredAt: "2031-02-03T04:02:00.000Z" });
    // 03:00Z (first, written with an offset) before 03:30Z (second).
    expect((await store.listApprovals()).map((record) => record.approvalId)).toEqual([first.approvalId, second.approvalId]);
    expect((await store.readAudit()).map((event) => [event.action, event.at])).toEqual([
      ["requested", "2031-02-03T04:00:00.000Z"],
      ["requested", "2031-02-03T04:00:00.000Z"],
      ["approve", "2031-02-03T04:01:00.000Z"],
      ["applied", "2031-02-03T04:01:00.000Z"],
      ["expired", "2031-02-03T04:02:00.000Z"],
    ]);
  });

  it("rejects a request that tries to choose its own status, and stores nothing", async () => {
    const store = new InMemoryGuardrailStore();
    const value = { ...request("t1", "2031-02-03T04:00:00.000Z"), status: "approved", decision: { decision: "approve" } };
    await expectContractRejection(() => store.requestApproval(untyped(value)));
    expect(await store.listApprovals()).toEqual([]);
    expect(await store.readAudit()).toEqual([]);
  });
});

describe("InMemoryGuardrailStore: what its errors name, its clock, and whom it trusts", () => {
  const store = new InMemoryGuardrailStore();
  // Each method's invalid input is a StoreContractError that names what was invalid.
  const namedInputs: [string, () => Promise<unknown>, string][] = [
    ["getReceipt", () => store.getReceipt(untyped("nope")), "invalid turn key"],
    ["putReceiptIfAbsent", () => store.putReceiptIfAbsent(untyped({})), "invalid admission receipt"],
    ["recordVerdict", () => store.recordVerdict(untyped({})), "invalid verdict record"],
    ["getVerdict", () => store.getVerdict(untyped({})), "invalid verdict key"],
    ["requestApproval", () => store.requestApproval(untyped({})), "invalid approval request"],
    ["getApproval", () => store.getApproval(untyped("nope")), "invalid approval id"],
    ["decideApproval", () => store.decideApproval(untyped({})), "invalid approval decision"],
    ["applyApproval", () => store.applyApproval(untyped({})), "invalid approval application"],
    ["listApprovals", () => store.listApprovals(untyped({ limit: -1 })), "invalid approval query"],
    ["expireApprovals", () => store.expireApprovals(untyped({})), "invalid approval expiry"],
    ["readAudit", () => store.readAudit(untyped({ limit: -1 })), "invalid audit query"],
    ["getAuditCursor", () => store.getAuditCursor(untyped("")), "invalid audit sink name"],
    ["advanceAuditCursor", () => store.advanceAuditCursor(untyped({})), "invalid audit cursor advance"],
    ["reconcileMutation", () => store.reconcileMutation(untyped({})), "invalid reconciliation"],
    ["prune", () => store.prune(untyped({})), "invalid prune options"],
  ];

  it.each(namedInputs)("%s: invalid input is a StoreContractError naming it", async (_method, run, named) => {
    const error = await run().then(
      () => undefined,
      (reason: unknown) => reason,
    );
    expect(StoreContractError.isInstance(error)).toBe(true);
    expect((error as Error).message.startsWith(`${named}: `), (error as Error).message).toBe(true);
  });

  it("a clock that answers an invalid date fails the claim with a RangeError, and claims nothing", async () => {
    let broken = false;
    const clocked = new InMemoryGuardrailStore({ now: () => (broken ? new Date(Number.NaN) : new Date("2026-01-01T00:00:00Z")) });
    broken = true;
    await expect(clocked.claimMutation(identity())).rejects.toThrow(new RangeError("Invalid time value"));
    broken = false;
    expect(await clocked.listUnresolved()).toEqual([]);
    expect((await clocked.claimMutation(identity())).status).toBe("acquired");
  });

  it("listUnresolved is oldest claim first by the clock, even when the clock stepped back between claims", async () => {
    let now = Date.parse("2026-01-01T12:00:00Z");
    const clocked = new InMemoryGuardrailStore({ now: () => new Date(now) });
    const later = { scopeId: "doc-1", turnId: "turn-later" };
    const earlier = { scopeId: "doc-2", turnId: "turn-earlier" };
    await acquire(clocked, identity(later));
    now -= 60_000; // NTP stepped the clock back a minute
    await acquire(clocked, identity(earlier));
    expect((await clocked.listUnresolved()).map((entry) => entry.scopeId)).toEqual(["doc-2", "doc-1"]);
  });

  it("is trusted (its answers skip re-validation) only as itself: a subclass may answer otherwise", () => {
    class Subclass extends InMemoryGuardrailStore {}
    expect(isTrustedStore(new InMemoryGuardrailStore())).toBe(true);
    expect(isTrustedStore(new Subclass())).toBe(false);
  });
});
