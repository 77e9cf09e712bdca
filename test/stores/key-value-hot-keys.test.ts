/**
 * No hot keys in the key-value base (issue 40, item 3): concurrent claims of turns in different
 * scopes never write one key, measured by the base's `onStep` footprints on the JSON adapter and
 * the file store (bench/key-value-conflicts.ts prints the same numbers), and neither do the
 * audited steps: an event waits under its own key until `readAudit` numbers it, so `seq` stays one
 * total order with one writer of the counter. Expiry, orphaning, `prune`, `listApprovals` and
 * `readAudit({ turnKey })` read indexes, never the whole collections. A store written in layout 1 (the shared `claim` and
 * `effect` counters, no indexes) or 2 (events numbered as appended, no time indexes) is migrated by
 * the first step; one written by a newer layout is refused and left as it is.
 */
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { digest, effectKey, mutationKey, StoreContractError, turnKey, type AuditEvent, type TurnRef } from "arkah-agent-guardrails";
import {
  KEY_VALUE_COLLECTIONS as C,
  toolFingerprint,
  type ApprovalSubmission,
  type EffectIdentity,
  type KeyValueKeyRef,
  type KeyValueStepFootprint,
  type KeyValueTransaction,
  type MutationIdentity,
  type StoredApproval,
  type StoredClaim,
  type StoredEffect,
  instantKey,
  sequenceKey,
} from "arkah-agent-guardrails/store";
import { FileGuardrailStore } from "../../examples/file-store/store.js";
import { JsonKeyValueStore } from "../support/json-key-value-store.js";
import { measureStepConflicts, type ObservedStoreFactory, type StepConflicts } from "../support/step-conflicts.js";
import { turnStartOf } from "../support/fixtures.js";

const root = mkdtempSync(join(existsSync("/dev/shm") ? "/dev/shm" : tmpdir(), "arkah-hot-keys-"));
afterAll(() => {
  rmSync(root, { recursive: true, force: true });
});

const WORKERS = 8;
let directories = 0;
const adapters: readonly (readonly [string, ObservedStoreFactory])[] = [
  ["the JSON adapter", (onStep) => new JsonKeyValueStore({ onStep })],
  ["the file store", (onStep) => FileGuardrailStore.open({ directory: join(root, `store-${String(++directories)}`), onStep })],
];

const byStep = (rows: readonly StepConflicts[]) => Object.fromEntries(rows.map((row) => [row.step, row]));

describe("KeyValueGuardrailStore: steps of turns in different scopes", () => {
  it("onStep that is not a function is refused at construction", () => {
    expect(() => new JsonKeyValueStore({ onStep: "log" as unknown as () => void })).toThrow(new TypeError("JsonKeyValueStore: onStep must be a function"));
  });


  for (const [name, open] of adapters) {
    it(`${name}: ${String(WORKERS)} concurrent claims (mutation and side effect) and effect settlements write no key another one touches`, async () => {
      const rows = byStep(await measureStepConflicts(open, WORKERS));
      for (const step of ["claimMutation", "claimEffect", "settleEffect"] as const) {
        expect({ step, steps: rows[step]?.steps, conflicting: rows[step]?.conflicting, hotKeys: rows[step]?.hotKeys }, step).toEqual({
          step,
          steps: WORKERS,
          conflicting: 0,
          hotKeys: [],
        });
      }
    });

    it(`${name}: ${String(WORKERS)} concurrent audited steps (a read with its event, a settlement with its event, an event, an approval request and its decision) write no key another one touches: no audit or approval counter`, async () => {
      const rows = byStep(await measureStepConflicts(open, WORKERS));
      for (const step of ["recordSuccessfulRead", "settleMutation", "appendAudit", "requestApproval", "decideApproval"] as const) {
        expect({ step, steps: rows[step]?.steps, conflicting: rows[step]?.conflicting, hotKeys: rows[step]?.hotKeys }, step).toEqual({
          step,
          steps: WORKERS,
          conflicting: 0,
          hotKeys: [],
        });
      }
    });
  }
});

const auditEvent = (toolCallId: string, scopeId: string): AuditEvent => ({
  at: "2031-02-03T04:05:06.000Z",
  decision: "executed",
  turnKey: turnKey({ scopeId, turnId: "t" }),
  scopeId,
  toolCallId,
});

describe("KeyValueGuardrailStore: audit events wait unnumbered until a reader numbers them", () => {
  it("an event appended by a store object whose clock is behind, after a reader passed the trail, is numbered above what the reader saw (afterSeq never skips it)", async () => {
    const directory = join(root, `store-${String(++directories)}`);
    const ahead = await FileGuardrailStore.open({ directory, now: () => new Date(CLAIMED_AT + 60_000) });
    const behind = await FileGuardrailStore.open({ directory, now: () => new Date(CLAIMED_AT) });
    try {
      await ahead.appendAudit(auditEvent("first", "doc-a"));
      const seen = await ahead.readAudit();
      expect(seen.map((event) => [event.toolCallId, event.seq])).toEqual([["first", 1]]);
      // Keyed earlier than "first" (its clock is a minute behind), appended after the reader passed seq 1.
      await behind.appendAudit(auditEvent("late", "doc-b"));
      await ahead.appendAudit(auditEvent("third", "doc-a"));
      expect((await behind.readAudit({ afterSeq: 1 })).map((event) => [event.toolCallId, event.seq]), "both, above the cursor").toEqual([
        ["late", 2],
        ["third", 3],
      ]);
      expect((await ahead.readAudit()).map((event) => event.seq), "one total order, gapless").toEqual([1, 2, 3]);
    } finally {
      await ahead.close();
      await behind.close();
    }
  });

  it("appending writes only the event's own pending key; reading numbers the pending events in one step, the only writer of the audit counter", async () => {
    const footprints: KeyValueStepFootprint[] = [];
    const store = new JsonKeyValueStore({ now: () => new Date(CLAIMED_AT), onStep: (footprint) => footprints.push(footprint) });
    await store.getAuditCursor("warm-up");
    footprints.length = 0;
    await store.appendAudit(auditEvent("a", "doc-a"));
    await store.appendAudit(auditEvent("b", "doc-b"));
    const [first, second] = footprints;
    expect(first?.reads, "an append reads nothing").toEqual([]);
    expect(first?.writes.map((ref) => ref.collection), "and writes one pending key, and its entry in the turn's audit index").toEqual([C.auditPending, C.turnAudit]);
    expect(second?.writes[0]?.key, "a key of its own").not.toBe(first?.writes[0]?.key);
    expect(store.data.get(C.audit)?.size ?? 0, "nothing numbered yet").toBe(0);
    footprints.length = 0;
    expect((await store.readAudit()).map((event) => [event.toolCallId, event.seq]), "numbered in this object's append order").toEqual([
      ["a", 1],
      ["b", 2],
    ]);
    expect(store.readRaw(C.counters, "audit")).toBe(2);
    expect(store.data.get(C.auditPending)?.size ?? 0, "moved out of pending").toBe(0);
    footprints.length = 0;
    await store.readAudit();
    expect(footprints[0]?.writes, "a read with nothing pending writes nothing").toEqual([]);
  });

  it("readAudit({ turnKey }) reads that turn's index entries and events alone, never the trail or another turn's audit keys; in seq order when a slow-clock writer's event is keyed before older ones", async () => {
    const directory = join(root, `store-${String(++directories)}`);
    const footprints: KeyValueStepFootprint[] = [];
    const ahead = await FileGuardrailStore.open({ directory, now: () => new Date(CLAIMED_AT + 60_000), onStep: (footprint) => footprints.push(footprint) });
    const behind = await FileGuardrailStore.open({ directory, now: () => new Date(CLAIMED_AT) });
    const mine = turnKey({ scopeId: "doc-a", turnId: "t" });
    try {
      await ahead.appendAudit(auditEvent("a1", "doc-a"));
      await ahead.appendAudit(auditEvent("b1", "doc-b"));
      await ahead.readAudit();
      // Keyed a minute before a1, numbered after it: the turn's index order is not its seq order.
      await behind.appendAudit(auditEvent("a2", "doc-a"));
      await ahead.appendAudit(auditEvent("b2", "doc-b"));
      await ahead.appendAudit(auditEvent("a3", "doc-a"));
      await ahead.readAudit();
      const all = await ahead.readAudit();
      const seqOf = (toolCallId: string) => all.find((event) => event.toolCallId === toolCallId)?.seq ?? 0;
      expect(all.map((event) => event.toolCallId)).toEqual(["a1", "b1", "a2", "b2", "a3"]);

      footprints.length = 0;
      expect((await ahead.readAudit({ turnKey: mine })).map((event) => [event.toolCallId, event.seq]), "the turn's events, in seq order").toEqual([
        ["a1", 1],
        ["a2", 3],
        ["a3", 5],
      ]);
      const [step] = footprints;
      expect(step?.scans, "the pending events and the turn's index, never the trail").not.toContain(C.audit);
      expect(step?.reads.filter((ref) => ref.collection === C.audit).map((ref) => ref.key), "that turn's events alone").toEqual(["a1", "a2", "a3"].map((id) => sequenceKey(seqOf(id))));

      footprints.length = 0;
      expect((await ahead.readAudit({ turnKey: mine, afterSeq: seqOf("a1"), limit: 1 })).map((event) => event.toolCallId)).toEqual(["a2"]);
      expect(footprints[0]?.reads.filter((ref) => ref.collection === C.audit).map((ref) => ref.key), "nothing at or below afterSeq, nothing past the limit").toEqual([sequenceKey(seqOf("a2"))]);
    } finally {
      await ahead.close();
      await behind.close();
    }
  });
});

function mutation(turn: TurnRef): MutationIdentity {
  const call = { id: "w1", name: "rename_document", args: { title: "Field notes" } };
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

function sideEffect(turn: TurnRef, callId = "m1"): EffectIdentity {
  const call = { id: callId, name: "send_mail", args: { to: "ops@example.com", ref: callId } };
  return {
    effectKey: effectKey(turn, call),
    turnKey: turnKey(turn),
    scopeId: turn.scopeId,
    toolCallId: call.id,
    toolName: call.name,
    argsDigest: digest(call.args),
    toolFingerprint: toolFingerprint({ name: call.name }),
  };
}

/**
 * The JSON adapter counting every `get` its steps make, repeats included (a step's footprint names
 * each key once, so it cannot show a key read twice).
 */
class GetCountingStore extends JsonKeyValueStore {
  readonly gets: KeyValueKeyRef[] = [];

  protected override atomic<T>(step: (tx: KeyValueTransaction) => Promise<T>): Promise<T> {
    return super.atomic((tx) =>
      step({
        get: (collection, key) => {
          this.gets.push({ collection, key });
          return tx.get(collection, key);
        },
        put: (collection, key, value) => {
          tx.put(collection, key, value);
        },
        delete: (collection, key) => {
          tx.delete(collection, key);
        },
        scan: (collection, options) => tx.scan(collection, options),
      }),
    );
  }
}

const CLAIMED_AT = Date.UTC(2031, 1, 3, 4, 5, 6);
const snapshot = (store: JsonKeyValueStore) => JSON.stringify([...store.data].map(([name, entries]) => [name, [...entries].sort()]));

describe("KeyValueGuardrailStore: a store written in an older or newer layout", () => {
  it("layout 1 (shared counters, no unresolved indexes): the first step indexes its unresolved claims and effects, and they list, settle and drop out", async () => {
    const store = new JsonKeyValueStore({ now: () => new Date(CLAIMED_AT) });
    const pending = mutation({ scopeId: "doc-old", turnId: "pending" });
    const unknown = mutation({ scopeId: "doc-old-2", turnId: "unknown" });
    const done = mutation({ scopeId: "doc-old-3", turnId: "done" });
    const effect = sideEffect({ scopeId: "doc-old", turnId: "pending" });
    // As the previous base wrote them: numbered by the shared counters, found by a scan.
    const claims: StoredClaim[] = [
      { identity: unknown, token: "t-unknown", seq: 41, claimedAtMs: CLAIMED_AT, state: "unknown", settledAtMs: CLAIMED_AT },
      { identity: pending, token: "t-pending", seq: 42, claimedAtMs: CLAIMED_AT, state: "pending" },
      { identity: done, token: "t-done", seq: 43, claimedAtMs: CLAIMED_AT, state: "complete", result: { content: "ok", status: "success" }, settledAtMs: CLAIMED_AT },
    ];
    for (const claim of claims) store.writeRaw(C.claims, claim.identity.turnKey, claim);
    store.writeRaw(C.unknownScopes, unknown.scopeId, { scopeId: unknown.scopeId, turnKeys: [unknown.turnKey] });
    const stored: StoredEffect = { identity: effect, token: "t-effect", seq: 7, claimedAtMs: CLAIMED_AT, state: "pending" };
    store.writeRaw(C.effects, effect.effectKey, stored);
    store.writeRaw(C.effectGroups, JSON.stringify([effect.turnKey, effect.toolName]), { turnKey: effect.turnKey, toolName: effect.toolName, effectKeys: [effect.effectKey] });
    store.writeRaw(C.counters, "claim", 43);
    store.writeRaw(C.counters, "effect", 7);

    expect((await store.listUnresolved()).map((entry) => [entry.turnKey, entry.state]), "old claims, in their old claim order").toEqual([
      [unknown.turnKey, "unknown"],
      [pending.turnKey, "pending"],
    ]);
    expect(store.readRaw(C.meta, "layout"), "migrated once, in the first step").toBe(3);
    expect([...(store.data.get(C.unresolvedClaims)?.keys() ?? [])].sort()).toEqual([pending.turnKey, unknown.turnKey].sort());
    expect((await store.listUnresolvedEffects()).map((entry) => entry.effectKey)).toEqual([effect.effectKey]);

    expect(await store.settleMutation({ turnKey: pending.turnKey, token: "t-pending", outcome: "complete", result: { content: "done", status: "success" } })).toBe(true);
    expect(await store.settleEffect({ effectKey: effect.effectKey, token: "t-effect", outcome: "complete", result: { content: "sent", status: "success" } })).toBe(true);
    expect((await store.listUnresolved()).map((entry) => entry.turnKey), "a settled old claim leaves the index").toEqual([unknown.turnKey]);
    expect(await store.listUnresolvedEffects()).toEqual([]);
    expect(store.readRaw(C.counters, "claim"), "the old counter is left as it was, and never written again").toBe(43);
  });

  it("layout 2 (events numbered by the audit counter as appended, no time indexes): the first step indexes the settled claims and the requests; old events keep their numbers, new ones follow them, a cursor stays valid; prune and listApprovals find the old records", async () => {
    const store = new JsonKeyValueStore({ now: () => new Date(CLAIMED_AT) });
    const pending = mutation({ scopeId: "doc-two", turnId: "pending" });
    const done = mutation({ scopeId: "doc-two-2", turnId: "done" });
    // As layout 2 wrote them: numbered in the appending step, requests by the shared counter, no time or turn index.
    store.writeRaw(C.meta, "layout", 2);
    const old = [auditEvent("old-1", "doc-two"), auditEvent("old-2", "doc-other")].map((event, index) => ({ ...event, seq: index + 1 }));
    for (const event of old) store.writeRaw(C.audit, sequenceKey(event.seq), event);
    store.writeRaw(C.counters, "audit", 2);
    store.writeRaw(C.cursors, "siem", { sink: "siem", seq: 2 });
    store.writeRaw(C.claims, pending.turnKey, { identity: pending, token: "t-pending", seq: 5, claimedAtMs: CLAIMED_AT, state: "pending" } satisfies StoredClaim);
    store.writeRaw(C.unresolvedClaims, pending.turnKey, { turnKey: pending.turnKey });
    const settled: StoredClaim = { identity: done, token: "t-done", seq: 6, claimedAtMs: CLAIMED_AT, state: "complete", result: { content: "ok", status: "success" }, settledAtMs: CLAIMED_AT };
    store.writeRaw(C.claims, done.turnKey, settled);
    const request = { ...submission(30, "2031-02-03T00:00:00.000Z"), turnKey: done.turnKey, scopeId: done.scopeId };
    store.writeRaw(C.approvals, request.approvalId, { seq: 9, record: { ...request, status: "rejected", decision: { decision: "reject" }, decidedAt: "2031-02-03T01:00:00.000Z" } });
    store.writeRaw(C.counters, "approval", 9);

    expect(await store.getAuditCursor("siem"), "the first step").toBe(2);
    expect(store.readRaw(C.meta, "layout"), "layout 3").toBe(3);
    expect([...(store.data.get(C.settledClaims)?.keys() ?? [])], "the complete claim, by its settlement time").toEqual([`${instantKey(CLAIMED_AT)}.${done.turnKey}`]);
    expect([...(store.data.get(C.turnApprovals)?.keys() ?? [])]).toEqual([`${done.turnKey}.${request.approvalId}`]);
    expect((await store.listApprovals({ turnKey: done.turnKey })).map((record) => record.approvalId), "found through the new index").toEqual([request.approvalId]);
    expect(store.data.get(C.audit)?.size, "the numbered events stay where they are").toBe(2);
    expect([...(store.data.get(C.turnAudit)?.keys() ?? [])].sort(), "and each gets its entry in its turn's audit index").toEqual(
      old.map((event) => `${event.turnKey ?? ""}.${sequenceKey(event.seq)}`).sort(),
    );
    expect((await store.readAudit({ turnKey: old[0]?.turnKey ?? "" })).map((event) => event.toolCallId), "found through it").toEqual(["old-1"]);

    expect(await store.releaseMutation({ turnKey: pending.turnKey, token: "t-pending" })).toBe(true);
    expect((await store.readAudit()).map((event) => [event.toolCallId ?? event.decision, event.seq]), "old numbers kept; the new event after them").toEqual([
      ["old-1", 1],
      ["old-2", 2],
      ["w1", 3],
    ]);
    expect((await store.readAudit({ afterSeq: await store.getAuditCursor("siem") })).map((event) => event.decision), "the sink's cursor reads on from where it was").toEqual(["released"]);
    expect(await store.listUnresolved(), "the claim left its layout-2 index").toEqual([]);
    expect(await store.prune({ olderThan: "2031-02-04T00:00:00.000Z" }), "the old settled claim is pruned through the index").toEqual({ turns: 1, effects: 0 });
    expect(await store.listApprovals(), "and its request with it").toEqual([]);
  });

  it("a layout newer than this version's is refused with a clear error, and nothing is written", async () => {
    const store = new JsonKeyValueStore();
    store.writeRaw(C.meta, "layout", 4);
    const before = snapshot(store);
    const error = await store.claimMutation(mutation({ scopeId: "doc-new", turnId: "t" })).then(
      () => undefined,
      (reason: unknown) => reason,
    );
    expect(StoreContractError.isInstance(error), `expected a StoreContractError, got ${String(error)}`).toBe(true);
    expect(String(error)).toMatch(/key-value layout 4, written by a newer arkah-agent-guardrails; this version reads layout 3 and older/);
    await expect(store.listUnresolved(), "every later operation is refused too").rejects.toThrow(/layout 4/);
    expect(snapshot(store), "nothing written").toBe(before);
  });
});

function submission(index: number, requestedAt: string): ApprovalSubmission {
  const turn = { scopeId: `doc-approval-${String(index)}`, turnId: `t-${String(index)}` };
  return {
    approvalId: digest({ kind: "hot-keys.approval", index }),
    turnKey: turnKey(turn),
    scopeId: turn.scopeId,
    toolCallId: "c1",
    toolName: "rename_document",
    toolFingerprint: toolFingerprint({ name: "rename_document" }),
    argsDigest: digest({ index }),
    args: { index },
    guardrails: ["manager"],
    requestedAt,
  };
}

describe("KeyValueGuardrailStore: expiry and orphaning read the approval indexes", () => {
  it("expireApprovals and orphanApprovals read only the pending and the decided requests, and retire the right ones", async () => {
    const footprints: KeyValueStepFootprint[] = [];
    const store = new JsonKeyValueStore({ now: () => new Date(CLAIMED_AT), onStep: (footprint) => footprints.push(footprint) });
    const old = "2031-02-03T00:00:00.000Z";
    const requests = [0, 1, 2, 3].map((index) => submission(index, old));
    for (const request of requests) await store.requestApproval(request);
    const [pending, approved, rejected, applied] = requests.map((request) => request.approvalId);
    const decidedAt = "2031-02-03T01:00:00.000Z";
    await store.decideApproval({ approvalId: approved ?? "", decision: { decision: "approve" }, decidedAt });
    await store.decideApproval({ approvalId: rejected ?? "", decision: { decision: "reject" }, decidedAt });
    await store.decideApproval({ approvalId: applied ?? "", decision: { decision: "approve" }, decidedAt });
    expect(await store.applyApproval({ approvalId: applied ?? "", appliedAt: decidedAt })).toBe(true);
    expect([...(store.data.get(C.pendingApprovals)?.keys() ?? [])], "pending index").toEqual([pending]);
    expect([...(store.data.get(C.decidedApprovals)?.keys() ?? [])], "decided, not applied").toEqual([approved]);

    footprints.length = 0;
    expect(await store.expireApprovals({ olderThan: "2031-02-04T00:00:00.000Z" })).toEqual({ expired: 1 });
    expect(await store.orphanApprovals({ decidedBefore: "2031-02-04T00:00:00.000Z" })).toEqual({ orphaned: 1 });
    const statuses = await Promise.all(requests.map(async (request) => (await store.getApproval(request.approvalId))?.status));
    expect(statuses).toEqual(["expired", "orphaned", "rejected", "applied"]);
    const [expiry, orphaning] = footprints;
    expect(expiry?.scans, "expiry scans the pending index, not the requests").toEqual([C.pendingApprovals]);
    expect(orphaning?.scans, "orphaning scans the decided index, not the requests").toEqual([C.decidedApprovals]);
    expect(expiry?.reads.filter((ref) => ref.collection === C.approvals).map((ref) => ref.key), "expiry reads the pending request alone").toEqual([pending]);
    expect(store.data.get(C.pendingApprovals)?.size ?? 0, "both indexes emptied").toBe(0);
    expect(store.data.get(C.decidedApprovals)?.size ?? 0).toBe(0);
  });

  it("layout 1: the first step indexes the pending and the decided requests, which then expire and orphan", async () => {
    const store = new JsonKeyValueStore({ now: () => new Date(CLAIMED_AT) });
    const old = "2031-02-03T00:00:00.000Z";
    const [waiting, decided, done] = [0, 1, 2].map((index) => submission(index, old));
    const stored = (seq: number, record: StoredApproval["record"]): StoredApproval => ({ seq, record });
    const decision = { decision: { decision: "approve" as const }, decidedAt: "2031-02-03T01:00:00.000Z" };
    if (waiting === undefined || decided === undefined || done === undefined) throw new Error("three requests");
    store.writeRaw(C.approvals, waiting.approvalId, stored(1, { ...waiting, status: "pending" }));
    store.writeRaw(C.approvals, decided.approvalId, stored(2, { ...decided, status: "approved", ...decision }));
    store.writeRaw(C.approvals, done.approvalId, stored(3, { ...done, status: "applied", ...decision, appliedAt: "2031-02-03T02:00:00.000Z" }));
    store.writeRaw(C.counters, "approval", 3);

    expect(await store.expireApprovals({ olderThan: "2031-02-04T00:00:00.000Z" })).toEqual({ expired: 1 });
    expect(await store.orphanApprovals({ decidedBefore: "2031-02-04T00:00:00.000Z" })).toEqual({ orphaned: 1 });
    expect((await store.listApprovals()).map((record) => record.status)).toEqual(["expired", "orphaned", "applied"]);
  });
});

describe("KeyValueGuardrailStore: prune and listApprovals read indexes", () => {
  it("prune reads the settled-claim and settled-effect indexes up to the cut-off, never the claims, effects, turns or requests collections; a turn with a pending request keeps everything", async () => {
    let now = CLAIMED_AT;
    const footprints: KeyValueStepFootprint[] = [];
    const store = new JsonKeyValueStore({ now: () => new Date(now), onStep: (footprint) => footprints.push(footprint) });
    const settle = async (identity: MutationIdentity) => {
      const claimed = await store.claimMutation(identity);
      if (claimed.status !== "acquired") throw new Error(claimed.status);
      await store.settleMutation({ turnKey: identity.turnKey, token: claimed.token, outcome: "complete", result: { content: "ok", status: "success" } });
    };
    const done = mutation({ scopeId: "doc-prune", turnId: "done" });
    const waiting = mutation({ scopeId: "doc-prune-2", turnId: "waiting" });
    const recent = mutation({ scopeId: "doc-prune-3", turnId: "recent" });
    await settle(done);
    await settle(waiting);
    const effect = sideEffect({ scopeId: "doc-prune", turnId: "done" });
    const effectClaim = await store.claimEffect(effect);
    if (effectClaim.status !== "acquired") throw new Error(effectClaim.status);
    await store.settleEffect({ effectKey: effect.effectKey, token: effectClaim.token, outcome: "complete", result: { content: "sent", status: "success" } });
    const decided = { ...submission(10, new Date(now).toISOString()), turnKey: done.turnKey, scopeId: done.scopeId };
    const pending = { ...submission(11, new Date(now).toISOString()), turnKey: waiting.turnKey, scopeId: waiting.scopeId };
    await store.requestApproval(decided);
    await store.requestApproval(pending);
    await store.decideApproval({ approvalId: decided.approvalId, decision: { decision: "reject" }, decidedAt: new Date(now).toISOString() });
    now += 60_000;
    await settle(recent);

    footprints.length = 0;
    expect(await store.prune({ olderThan: new Date(now).toISOString() })).toEqual({ turns: 1, effects: 1 });
    const [step] = footprints;
    // (`verdicts` is scanned only over a pruned turn's key range, which the footprint names as the collection.)
    for (const collection of [C.claims, C.effects, C.turns, C.approvals]) expect(step?.scans, `prune scans no ${collection}`).not.toContain(collection);
    expect(step?.reads.filter((ref) => ref.collection === C.claims).map((ref) => ref.key), "the claims before the cut-off alone, the waiting turn's not even read").toEqual([done.turnKey]);
    expect((await store.getMutation(done.turnKey))?.state).toBe("pruned");
    expect((await store.getMutation(waiting.turnKey))?.state, "a pending request keeps its turn").toBe("complete");
    expect((await store.getMutation(recent.turnKey))?.state, "settled at the cut-off: kept").toBe("complete");
    expect((await store.getEffect(effect.effectKey))?.state).toBe("pruned");
    expect(await store.getApproval(decided.approvalId), "the pruned turn's request goes, with its index entries").toBeUndefined();
    expect([...(store.data.get(C.approvalsByTime)?.keys() ?? [])].some((key) => key.endsWith(decided.approvalId))).toBe(false);
    expect([...(store.data.get(C.settledClaims)?.values() ?? [])].length, "the kept claims stay indexed for a later prune").toBe(2);
    expect(await store.prune({ olderThan: new Date(now).toISOString() }), "nothing left to prune").toEqual({ turns: 0, effects: 0 });
  });

  it("prune reads a turn's live-turn entry once per step, however many settled effects the turn has", async () => {
    let now = CLAIMED_AT;
    const store = new GetCountingStore({ now: () => new Date(now) });
    const settleEffects = async (turn: TurnRef, count: number) => {
      for (let index = 0; index < count; index++) {
        const identity = sideEffect(turn, `m${String(index)}`);
        const claimed = await store.claimEffect(identity);
        if (claimed.status !== "acquired") throw new Error(claimed.status);
        await store.settleEffect({ effectKey: identity.effectKey, token: claimed.token, outcome: "complete", result: { content: "sent", status: "success" } });
      }
    };
    const done = { scopeId: "doc-prune-once", turnId: "done" };
    const running = { scopeId: "doc-prune-once-2", turnId: "running" };
    // The running turn's record is in `liveTurns`: prune keeps its effects.
    expect((await store.beginTurn({ turn: turnStartOf(running.scopeId, running.turnId, "Send it."), leaseMs: 3_600_000 })).status).toBe("started");
    await settleEffects(done, 3);
    await settleEffects(running, 2);
    now += 60_000;

    store.gets.length = 0;
    expect(await store.prune({ olderThan: new Date(now).toISOString() }), "the finished turn's three effects, not the running turn's two").toEqual({ turns: 0, effects: 3 });
    const liveReads = store.gets.filter((ref) => ref.collection === C.liveTurns).map((ref) => ref.key);
    expect(liveReads.sort(), "one get of liveTurns/<turnKey> per turn, not one per effect").toEqual([turnKey(done), turnKey(running)].sort());
    expect((await store.getEffect(sideEffect(running, "m0").effectKey))?.state, "the running turn's effects stay").toBe("complete");
  });

  it("listApprovals walks the by-time index and stops at the limit; by turn it reads that turn's entries alone", async () => {
    const footprints: KeyValueStepFootprint[] = [];
    const store = new JsonKeyValueStore({ now: () => new Date(CLAIMED_AT), onStep: (footprint) => footprints.push(footprint) });
    const times = ["2031-02-03T00:00:03.000Z", "2031-02-03T00:00:01.000Z", "2031-02-03T00:00:02.000Z", "2031-02-03T00:00:01.000Z"];
    const requests = times.map((at, index) => submission(20 + index, at));
    for (const request of requests) await store.requestApproval(request);
    const ids = (records: readonly { approvalId: string }[]) => records.map((record) => requests.findIndex((request) => request.approvalId === record.approvalId));

    footprints.length = 0;
    expect(ids(await store.listApprovals({ limit: 2 })), "time order, ties in request order").toEqual([1, 3]);
    expect(footprints[0]?.scans).toEqual([C.approvalsByTime]);
    expect(footprints[0]?.reads.filter((ref) => ref.collection === C.approvals), "two requests read, not four").toHaveLength(2);
    expect(ids(await store.listApprovals()), "all of them").toEqual([1, 3, 2, 0]);

    footprints.length = 0;
    const [, second] = requests;
    expect(ids(await store.listApprovals({ turnKey: second?.turnKey ?? "" }))).toEqual([1]);
    expect(footprints[0]?.scans).toEqual([C.turnApprovals]);
    expect(footprints[0]?.reads.filter((ref) => ref.collection === C.approvals), "that turn's request alone").toHaveLength(1);
    expect(ids(await store.listApprovals({ status: "pending", limit: 3 }))).toEqual([1, 3, 2]);
  });
});
