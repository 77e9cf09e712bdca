/**
 * What happens after an ambiguous outcome: listing and reconciling unresolved mutations, the scope
 * rule that makes reconciliation a duty, and retention that never reopens a turn.
 */
import { expect } from "vitest";
import {
  BeginTurnResultSchema,
  PruneResultSchema,
  ReconcileResultSchema,
  type GuardrailStore,
  type JsonValue,
  type MutationIdentity,
  type ReadEvidence,
  type Reconciliation,
  type ReconcileResult,
  type TurnStart,
} from "../../contracts/index.js";
import { turnKey } from "../../keys.js";
import {
  acquire,
  approvalRequest,
  auditEvent,
  CALL,
  claim,
  complete,
  conform,
  DENY,
  ERROR_RESULT,
  evidenceDigest,
  expectBoolean,
  expectContractError,
  expectInstant,
  identity,
  leaveUnknown,
  OFFSET_TIME,
  OPERATOR_RESULT,
  receipt,
  readAudit,
  RESULT,
  RIVAL_CALLS,
  SCOPE,
  SIBLING,
  STRANGER,
  TURN,
  TURN_KEY,
  turn,
  turnsAgainstKeyOrder,
  unresolved,
  VERDICT_KEY,
  verdictRecord,
} from "./fixtures.js";
import { effect, MAIL } from "./effects.js";
import type { StoreTest } from "./harness.js";
import { start, turnInput } from "./turns.js";

/** Turn outcomes, as the turn service would store them: paused on one request, and finished. */
const PAUSED: JsonValue = { status: "awaiting_approval" };
const FINISHED: JsonValue = { status: "done" };

/** Begins `of` as the turn service does, answering its lease token. */
async function begun(store: GuardrailStore, of: TurnStart): Promise<string> {
  const answer = conform(BeginTurnResultSchema, await store.beginTurn({ turn: of, leaseMs: DAY }), "beginTurn's answer");
  if (answer.status !== "started") throw new Error(`expected the turn to start, got ${answer.status}`);
  return answer.token;
}

const MINUTE = 60 * 1000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

async function reconcile(store: GuardrailStore, reconciliation: Reconciliation): Promise<ReconcileResult> {
  return conform(ReconcileResultSchema, await store.reconcileMutation(reconciliation), "reconcileMutation's answer");
}

const completed = (key: string = TURN_KEY, operatorRef = "INC-1", result = OPERATOR_RESULT): Reconciliation => ({
  turnKey: key,
  resolution: "completed",
  result,
  operatorRef,
});

const noEffect = (key: string = TURN_KEY, operatorRef = "INC-1"): Reconciliation => ({
  turnKey: key,
  resolution: "no-effect",
  operatorRef,
});

const reconciledEvents = async (store: GuardrailStore) =>
  (await readAudit(store)).filter((event) => event.decision === "reconciled");

/** The audit event a reconciliation must leave: who, what, and which call. */
function expectReconciledEvent(
  event: unknown,
  id: MutationIdentity,
  action: Reconciliation["resolution"],
  operatorRef: string,
  atMs: number,
): void {
  expect(event, "event toMatchObject").toMatchObject({
    decision: "reconciled",
    turnKey: id.turnKey,
    scopeId: id.scopeId,
    toolCallId: id.toolCallId,
    toolName: id.toolName,
    toolFingerprint: id.toolFingerprint,
    kind: "mutation",
    argsDigest: id.argsDigest,
    mutationKey: id.mutationKey,
    action,
    operatorRef,
  });
  expectInstant((event as { at?: string } | undefined)?.at, atMs, "the reconciled event's time");
}

// ---------------------------------------------------------------------------------------------
// Listing and reconciling

export function reconciliationSuite(test: StoreTest): void {
  test("listUnresolved: a fresh store has nothing unresolved", async ({ store }) => {
    expect(await unresolved(store), "await unresolved(store) toEqual").toEqual([]);
  });

  test("listUnresolved: pending and unknown claims, with identity, state and claim time from the clock", async ({ store, clock }) => {
    const pendingAt = clock.ms;
    await acquire(store, identity(TURN));
    clock.advance(MINUTE);
    const unknownAt = clock.ms;
    await leaveUnknown(store, identity(STRANGER));
    const list = await unresolved(store);
    expect(list.map(({ claimedAt: _claimedAt, ...rest }) => rest), "list.map(({ claimedAt: _claimedAt, ...rest }) => rest) toEqual").toEqual([
      { ...identity(TURN), state: "pending" },
      { ...identity(STRANGER), state: "unknown" },
    ]);
    expectInstant(list[0]?.claimedAt, pendingAt, "the pending claim's claimedAt");
    expectInstant(list[1]?.claimedAt, unknownAt, "the unknown claim's claimedAt (the claim, not the settlement)");
  });

  test("listUnresolved: oldest claim first, whatever the turn keys", async ({ store, clock }) => {
    const turns = turnsAgainstKeyOrder(5);
    const times: number[] = [];
    for (const [index, each] of turns.entries()) {
      times.push(clock.ms);
      if (index % 2 === 0) await acquire(store, identity(each));
      else await leaveUnknown(store, identity(each));
      clock.advance(MINUTE);
    }
    const list = await unresolved(store);
    expect(list.map((entry) => entry.turnKey), "list.map((entry) => entry.turnKey) toEqual").toEqual(turns.map((each) => turnKey(each)));
    list.forEach((entry, index) => {
      expectInstant(entry.claimedAt, times[index] ?? Number.NaN, `claimedAt of entry ${String(index)}`);
    });
  });

  // Clocks step back (NTP, a VM resumed): the order is the claim times', not insertion order.
  test("listUnresolved: oldest claim time first, even when the clock stepped back between claims", async ({ store, clock }) => {
    const first = clock.ms;
    await acquire(store, identity(TURN));
    clock.advance(-MINUTE);
    const stepBack = clock.ms;
    await leaveUnknown(store, identity(SIBLING));
    clock.advance(2 * MINUTE);
    const last = clock.ms;
    await acquire(store, identity(STRANGER));
    const list = await unresolved(store);
    expect(list.map((entry) => entry.turnKey), "list.map((entry) => entry.turnKey) toEqual").toEqual([turnKey(SIBLING), turnKey(TURN), turnKey(STRANGER)]);
    [stepBack, first, last].forEach((ms, index) => {
      expectInstant(list[index]?.claimedAt, ms, `claimedAt of entry ${String(index)}`);
    });
  });

  test("listUnresolved: completed and reconciled claims are not listed", async ({ store }) => {
    await complete(store, identity(TURN));
    await leaveUnknown(store, identity(SIBLING));
    await reconcile(store, completed(turnKey(SIBLING)));
    await acquire(store, identity(STRANGER));
    await reconcile(store, noEffect(turnKey(STRANGER)));
    expect(await unresolved(store), "await unresolved(store) toEqual").toEqual([]);
  });

  test("listUnresolved: detaches what it returns", async ({ store }) => {
    await acquire(store);
    const [entry] = await unresolved(store);
    if (entry !== undefined) {
      entry.state = "unknown";
      entry.mutationKey = "0".repeat(64);
    }
    expect(await unresolved(store), "await unresolved(store) toMatchObject").toMatchObject([{ ...identity(), state: "pending" }]);
  });

  test("completed, from unknown: replays return the operator's result; audited with its reference", async ({ store, clock }) => {
    await leaveUnknown(store);
    clock.advance(HOUR);
    expect(await reconcile(store, completed(TURN_KEY, "INC-42")), "await reconcile(store, completed(TURN_KEY, \"INC-42\")) toEqual").toEqual({ reconciled: true, state: "unknown" });
    expect(await claim(store), "await claim(store) toEqual").toEqual({ status: "replay", result: OPERATOR_RESULT });
    expect(await claim(store), "await claim(store) toEqual").toEqual({ status: "replay", result: OPERATOR_RESULT });
    // Another call is told what was done: the reconciled call, with the operator's result.
    const completedByOperator = { toolName: CALL.name, toolCallId: CALL.id, result: OPERATOR_RESULT };
    for (const [label, call] of RIVAL_CALLS) {
      expect(await claim(store, identity(TURN, call)), label).toEqual({ status: "conflict", completed: completedByOperator });
    }
    expect(await unresolved(store), "await unresolved(store) toEqual").toEqual([]);
    const events = await reconciledEvents(store);
    expect(events, "events toHaveLength").toHaveLength(1);
    expectReconciledEvent(events[0], identity(), "completed", "INC-42", clock.ms);
  });

  test("completed, from pending: the claim's token can no longer settle it", async ({ store, clock }) => {
    const token = await acquire(store);
    expect(await reconcile(store, completed(TURN_KEY, "INC-1", ERROR_RESULT)), "await reconcile(store, completed(TURN_KEY, \"INC-1\", ERROR_RESULT)) toEqual").toEqual({ reconciled: true, state: "pending" });
    expect(await store.settleMutation({ turnKey: TURN_KEY, token, outcome: "complete", result: RESULT }), "await store.settleMutation({ turnKey: TURN_KEY, token, outcome: \"complete\", result: RESULT }) toBe").toBe(false);
    expect(await store.settleMutation({ turnKey: TURN_KEY, token, outcome: "unknown" }), "await store.settleMutation({ turnKey: TURN_KEY, token, outcome: \"unknown\" }) toBe").toBe(false);
    expect(await claim(store), "await claim(store) toEqual").toEqual({ status: "replay", result: ERROR_RESULT });
    expectReconciledEvent((await reconciledEvents(store))[0], identity(), "completed", "INC-1", clock.ms);
  });

  test("no-effect, from unknown: the slot reopens for the same call, with a new token", async ({ store, clock }) => {
    const oldToken = await leaveUnknown(store);
    clock.advance(HOUR);
    expect(await reconcile(store, noEffect(TURN_KEY, "INC-7")), "await reconcile(store, noEffect(TURN_KEY, \"INC-7\")) toEqual").toEqual({ reconciled: true, state: "unknown" });
    expect(await unresolved(store), "await unresolved(store) toEqual").toEqual([]);
    const events = await reconciledEvents(store);
    expect(events, "events toHaveLength").toHaveLength(1);
    expectReconciledEvent(events[0], identity(), "no-effect", "INC-7", clock.ms);
    const newToken = await acquire(store);
    expect(newToken, "newToken not.toBe").not.toBe(oldToken);
    expect(await store.settleMutation({ turnKey: TURN_KEY, token: oldToken, outcome: "complete", result: RESULT }), "await store.settleMutation({ turnKey: TURN_KEY, token: oldToken, outcome: \"complete\", result: RES...").toBe(false);
    expect(await claim(store), "await claim(store) toEqual").toEqual({ status: "pending" });
    expect(await store.settleMutation({ turnKey: TURN_KEY, token: newToken, outcome: "complete", result: RESULT }), "await store.settleMutation({ turnKey: TURN_KEY, token: newToken, outcome: \"complete\", result: RES...").toBe(true);
    expect(await claim(store), "await claim(store) toEqual").toEqual({ status: "replay", result: RESULT });
  });

  test("no-effect: the reopened slot may go to another call of the turn", async ({ store }) => {
    await leaveUnknown(store);
    await reconcile(store, noEffect());
    const rival = identity(TURN, { ...CALL, id: "call-2" });
    await acquire(store, rival);
    expect(await claim(store), "await claim(store) toEqual").toEqual({ status: "conflict" });
  });

  // A resolver that read the claim, then asked the write service (a tool's confirm, `reconcile
  // --auto`), names the call it asked about: the slot may have reopened and gone to another call.
  test("mutationKey naming another call's claim: other_call, the claim and its holder untouched, no event", async ({ store }) => {
    const asked = identity();
    await leaveUnknown(store, asked);
    await reconcile(store, noEffect());
    const rival = identity(TURN, { ...CALL, id: "call-2" });
    const token = await acquire(store, rival);
    const trail = await readAudit(store);
    for (const late of [completed(), noEffect()]) {
      expect(await reconcile(store, { ...late, mutationKey: asked.mutationKey }), `${late.resolution} for the earlier call`).toEqual({
        reconciled: false,
        reason: "other_call",
      });
    }
    expect(await readAudit(store), "no reconciled event").toEqual(trail);
    expect(await unresolved(store), "the new call's claim is still listed").toMatchObject([{ ...rival, state: "pending" }]);
    expect(await claim(store, rival), "the new call's claim").toEqual({ status: "pending" });
    expect(await store.settleMutation({ turnKey: TURN_KEY, token, outcome: "complete", result: RESULT }), "its holder's token still settles it").toBe(true);
    expect(await claim(store, rival), "with its own result").toEqual({ status: "replay", result: RESULT });
  });

  test("mutationKey naming another call: an unknown claim stays unknown and keeps its scope blocked", async ({ store }) => {
    await leaveUnknown(store);
    for (const [label, call] of RIVAL_CALLS) {
      expect(await reconcile(store, { ...noEffect(), mutationKey: identity(TURN, call).mutationKey }), label).toEqual({ reconciled: false, reason: "other_call" });
    }
    expect(await claim(store), "the claim").toEqual({ status: "unknown" });
    expect(await claim(store, identity(SIBLING)), "its scope").toEqual({ status: "scope_unresolved" });
    expect(await reconciledEvents(store), "no reconciled event").toEqual([]);
  });

  test("mutationKey naming the claim's own call reconciles it, as without one", async ({ store, clock }) => {
    await leaveUnknown(store);
    expect(await reconcile(store, { ...completed(TURN_KEY, "INC-5"), mutationKey: identity().mutationKey }), "completed, from unknown").toEqual({
      reconciled: true,
      state: "unknown",
    });
    expect(await claim(store), "replays the operator's result").toEqual({ status: "replay", result: OPERATOR_RESULT });
    expectReconciledEvent((await reconciledEvents(store))[0], identity(), "completed", "INC-5", clock.ms);
    const sibling = identity(SIBLING);
    await acquire(store, sibling);
    expect(await reconcile(store, { ...noEffect(turnKey(SIBLING)), mutationKey: sibling.mutationKey }), "no-effect, from pending").toEqual({
      reconciled: true,
      state: "pending",
    });
    await acquire(store, sibling);
  });

  test("mutationKey on a resolved or absent claim: not_unresolved for its own call, other_call for another, not_found without a claim", async ({ store }) => {
    const rivalKey = identity(TURN, { ...CALL, id: "call-2" }).mutationKey;
    expect(await reconcile(store, { ...noEffect(), mutationKey: identity().mutationKey }), "no claim").toEqual({ reconciled: false, reason: "not_found" });
    await complete(store);
    expect(await reconcile(store, { ...completed(), mutationKey: identity().mutationKey }), "its own, completed").toEqual({ reconciled: false, reason: "not_unresolved" });
    expect(await reconcile(store, { ...noEffect(), mutationKey: rivalKey }), "another call's").toEqual({ reconciled: false, reason: "other_call" });
    expect(await claim(store), "the result kept").toEqual({ status: "replay", result: RESULT });
    expect(await readAudit(store), "no event").toEqual([]);
  });

  test("a mutationKey that is not a digest is rejected, changing nothing", async ({ store }) => {
    await leaveUnknown(store);
    await expectContractError(() => store.reconcileMutation({ ...noEffect(), mutationKey: "call-1" }), "a mutationKey that is not a digest");
    expect(await claim(store), "the claim").toEqual({ status: "unknown" });
    expect(await readAudit(store), "no event").toEqual([]);
  });

  test("no-effect, from pending: the old token cannot settle, before or after the slot is claimed again", async ({ store }) => {
    const oldToken = await acquire(store);
    expect(await reconcile(store, noEffect()), "await reconcile(store, noEffect()) toEqual").toEqual({ reconciled: true, state: "pending" });
    expect(await store.settleMutation({ turnKey: TURN_KEY, token: oldToken, outcome: "complete", result: RESULT }), "await store.settleMutation({ turnKey: TURN_KEY, token: oldToken, outcome: \"complete\", result: RES...").toBe(false);
    expect(await unresolved(store), "await unresolved(store) toEqual").toEqual([]);
    await acquire(store);
    expect(await store.settleMutation({ turnKey: TURN_KEY, token: oldToken, outcome: "unknown" }), "await store.settleMutation({ turnKey: TURN_KEY, token: oldToken, outcome: \"unknown\" }) toBe").toBe(false);
    expect(await claim(store), "await claim(store) toEqual").toEqual({ status: "pending" });
  });

  test("repeated or conflicting reconciliation after completed fails closed: not_unresolved, no event", async ({ store }) => {
    await leaveUnknown(store);
    await reconcile(store, completed(TURN_KEY, "INC-1"));
    const trail = await readAudit(store);
    expect(await reconcile(store, completed(TURN_KEY, "INC-1")), "await reconcile(store, completed(TURN_KEY, \"INC-1\")) toEqual").toEqual({ reconciled: false, reason: "not_unresolved" });
    expect(await reconcile(store, completed(TURN_KEY, "INC-2", ERROR_RESULT)), "await reconcile(store, completed(TURN_KEY, \"INC-2\", ERROR_RESULT)) toEqual").toEqual({ reconciled: false, reason: "not_unresolved" });
    expect(await reconcile(store, noEffect(TURN_KEY, "INC-3")), "await reconcile(store, noEffect(TURN_KEY, \"INC-3\")) toEqual").toEqual({ reconciled: false, reason: "not_unresolved" });
    expect(await claim(store), "await claim(store) toEqual").toEqual({ status: "replay", result: OPERATOR_RESULT });
    expect(await readAudit(store), "await readAudit(store) toEqual").toEqual(trail);
  });

  test("repeated or conflicting reconciliation after no-effect fails closed: not_found (the slot is open), no event", async ({ store }) => {
    await leaveUnknown(store);
    await reconcile(store, noEffect(TURN_KEY, "INC-1"));
    const trail = await readAudit(store);
    expect(await reconcile(store, noEffect(TURN_KEY, "INC-1")), "await reconcile(store, noEffect(TURN_KEY, \"INC-1\")) toEqual").toEqual({ reconciled: false, reason: "not_found" });
    expect(await reconcile(store, completed(TURN_KEY, "INC-2")), "await reconcile(store, completed(TURN_KEY, \"INC-2\")) toEqual").toEqual({ reconciled: false, reason: "not_found" });
    // The late "completed" did not write a result into the reopened slot.
    await acquire(store);
    expect(await readAudit(store), "await readAudit(store) toEqual").toEqual(trail);
  });

  test("a completed (settled) claim cannot be reconciled: not_unresolved, result kept, no event", async ({ store }) => {
    await complete(store);
    expect(await reconcile(store, completed()), "await reconcile(store, completed()) toEqual").toEqual({ reconciled: false, reason: "not_unresolved" });
    expect(await reconcile(store, noEffect()), "await reconcile(store, noEffect()) toEqual").toEqual({ reconciled: false, reason: "not_unresolved" });
    expect(await claim(store), "await claim(store) toEqual").toEqual({ status: "replay", result: RESULT });
    expect(await readAudit(store), "await readAudit(store) toEqual").toEqual([]);
  });

  test("a turn without a claim: not_found, nothing created, no event", async ({ store }) => {
    expect(await reconcile(store, completed()), "await reconcile(store, completed()) toEqual").toEqual({ reconciled: false, reason: "not_found" });
    expect(await reconcile(store, noEffect()), "await reconcile(store, noEffect()) toEqual").toEqual({ reconciled: false, reason: "not_found" });
    expect(await unresolved(store), "await unresolved(store) toEqual").toEqual([]);
    await acquire(store);
    expect(await readAudit(store), "await readAudit(store) toEqual").toEqual([]);
  });

  test("an operator reference is required: without one the store rejects and changes nothing", async ({ store }) => {
    await leaveUnknown(store);
    const { operatorRef: _missing, ...withoutRef } = completed();
    await expectContractError(() => store.reconcileMutation(withoutRef as never), "completed without operatorRef");
    await expectContractError(() => store.reconcileMutation({ ...noEffect(), operatorRef: "" }), "no-effect with an empty operatorRef");
    expect(await claim(store), "await claim(store) toEqual").toEqual({ status: "unknown" });
    expect(await readAudit(store), "await readAudit(store) toEqual").toEqual([]);
  });

  test("reconciling one turn leaves every other turn as it was", async ({ store }) => {
    await leaveUnknown(store, identity(TURN));
    await leaveUnknown(store, identity(STRANGER));
    await acquire(store, identity(turn("other", "doc-3")));
    await reconcile(store, completed(TURN_KEY));
    expect((await unresolved(store)).map((entry) => entry.turnKey), "(await unresolved(store)).map((entry) => entry.turnKey) toEqual").toEqual([turnKey(STRANGER), turnKey(turn("other", "doc-3"))]);
    expect(await claim(store, identity(STRANGER)), "await claim(store, identity(STRANGER)) toEqual").toEqual({ status: "unknown" });
  });

  test("reconciliation events follow earlier events in the trail", async ({ store, clock }) => {
    await store.appendAudit(auditEvent({ decision: "failed" }));
    await leaveUnknown(store);
    clock.advance(DAY);
    await reconcile(store, noEffect(TURN_KEY, "INC-9"));
    await store.appendAudit(auditEvent({ decision: "executed" }));
    const trail = await readAudit(store);
    expect(trail.map((event) => event.decision), "trail.map((event) => event.decision) toEqual").toEqual(["failed", "reconciled", "executed"]);
    expect(trail.map((event) => event.seq), "trail.map((event) => event.seq) toEqual").toEqual([...trail.map((event) => event.seq)].sort((a, b) => a - b));
    expectReconciledEvent(trail[1], identity(), "no-effect", "INC-9", clock.ms);
  });

  test("8 racing reconciliations: exactly one applies and is audited; the others fail closed", async ({ store }) => {
    await leaveUnknown(store);
    const attempts = Array.from({ length: 8 }, (_, index) =>
      index % 2 === 0
        ? completed(TURN_KEY, `INC-${String(index)}`, { content: `operator ${String(index)}`, status: "success" })
        : noEffect(TURN_KEY, `INC-${String(index)}`),
    );
    const results = await Promise.all(attempts.map((attempt) => reconcile(store, attempt)));
    const winners = results.flatMap((result, index) => (result.reconciled ? [attempts[index]] : []));
    expect(winners, "winners toHaveLength").toHaveLength(1);
    const winner = winners[0];
    // The losers come after the winner: a completed turn is not unresolved; a reopened one has no claim.
    const reason = winner?.resolution === "completed" ? "not_unresolved" : "not_found";
    expect(results.filter((result) => !result.reconciled), "results.filter((result) => !result.reconciled) toEqual").toEqual(Array.from({ length: 7 }, () => ({ reconciled: false, reason })));
    const events = await reconciledEvents(store);
    expect(events, "events toHaveLength").toHaveLength(1);
    expect(events[0]?.operatorRef, "events[0]?.operatorRef toBe").toBe(winner?.operatorRef);
    if (winner?.resolution === "completed") {
      expect(await claim(store), "await claim(store) toEqual").toEqual({ status: "replay", result: winner.result });
    } else {
      await acquire(store);
    }
  });

  test("a racing settlement and reconciliation: exactly one of them applies", async ({ store }) => {
    const token = await acquire(store);
    const [settled, reconciled] = await Promise.all([
      store.settleMutation({ turnKey: TURN_KEY, token, outcome: "complete", result: RESULT }),
      reconcile(store, completed()),
    ]);
    expect(settled !== reconciled.reconciled, `settled: ${String(settled)}, reconciled: ${String(reconciled.reconciled)}`).toBe(true);
    expect(await claim(store), "await claim(store) toEqual").toEqual({ status: "replay", result: settled ? RESULT : OPERATOR_RESULT });
    expect(await reconciledEvents(store), "await reconciledEvents(store) toHaveLength").toHaveLength(settled ? 0 : 1);
  });

  test("detaches what it stores: changing the operator's result object afterwards changes nothing", async ({ store }) => {
    await leaveUnknown(store);
    const result = { ...OPERATOR_RESULT };
    await reconcile(store, completed(TURN_KEY, "INC-1", result));
    result.content = "changed";
    expect(await claim(store), "await claim(store) toEqual").toEqual({ status: "replay", result: OPERATOR_RESULT });
  });
}

// ---------------------------------------------------------------------------------------------
// The scope rule

export function scopeSuite(test: StoreTest): void {
  const sibling = identity(SIBLING);

  test("on by default: another turn of a scope with an unknown mutation gets scope_unresolved", async ({ store }) => {
    await leaveUnknown(store);
    expect(await claim(store, sibling), "await claim(store, sibling) toEqual").toEqual({ status: "scope_unresolved" });
    expect(await claim(store, sibling, {}), "await claim(store, sibling, {}) toEqual").toEqual({ status: "scope_unresolved" });
    expect(await claim(store, sibling, { requireResolvedScope: true }), "await claim(store, sibling, { requireResolvedScope: true }) toEqual").toEqual({ status: "scope_unresolved" });
  });

  test("scope ids are compared exactly: an unknown mutation in a scope differing only in a lone surrogate blocks nothing", async ({ store }) => {
    // A backend that stores text as UTF-8 replaces a lone surrogate (U+FFFD): both scopes would be one.
    // turnKey cannot digest a lone surrogate; the store takes the scope id as given, so the keys come from stand-ins.
    const inScope = (turnId: string, scopeId: string) => ({ ...identity(turn(turnId, `stand-in ${turnId}`)), scopeId });
    await leaveUnknown(store, inScope("turn-1", "s\uD800"));
    expect(await claim(store, inScope("turn-2", "s\uDC00")), "another scope, equal only once encoded lossily").toMatchObject({ status: "acquired" });
    expect(await claim(store, inScope("turn-3", "s\uD800")), "the same scope is blocked").toEqual({ status: "scope_unresolved" });
  });

  test("off with requireResolvedScope: false: the other turn acquires", async ({ store }) => {
    await leaveUnknown(store);
    expect(await claim(store, sibling, { requireResolvedScope: false }), "await claim(store, sibling, { requireResolvedScope: false }) toMatchObject").toMatchObject({ status: "acquired" });
    expect(await claim(store, sibling), "await claim(store, sibling) toEqual").toEqual({ status: "pending" });
  });

  test("scope_unresolved claims nothing: the refused turn's slot stays free", async ({ store }) => {
    await leaveUnknown(store);
    await claim(store, sibling);
    expect(await unresolved(store), "await unresolved(store) toHaveLength").toHaveLength(1);
    const rival = identity(SIBLING, { ...CALL, id: "call-2" });
    expect(await claim(store, rival, { requireResolvedScope: false }), "await claim(store, rival, { requireResolvedScope: false }) toMatchObject").toMatchObject({ status: "acquired" });
  }, ["operator"]);

  test("the unknown turn itself answers unknown and conflict, not scope_unresolved", async ({ store }) => {
    await leaveUnknown(store);
    expect(await claim(store), "await claim(store) toEqual").toEqual({ status: "unknown" });
    for (const [label, call] of RIVAL_CALLS) expect(await claim(store, identity(TURN, call)), label).toEqual({ status: "conflict" });
  });

  test("turns claimed before the scope became unresolved keep their answers (replay, pending)", async ({ store }) => {
    const done = identity(turn("done"));
    const running = identity(turn("running"));
    await complete(store, done);
    await acquire(store, running);
    await leaveUnknown(store);
    expect(await claim(store, done), "await claim(store, done) toEqual").toEqual({ status: "replay", result: RESULT });
    expect(await claim(store, running), "await claim(store, running) toEqual").toEqual({ status: "pending" });
    expect(await claim(store, identity(turn("done"), { ...CALL, id: "call-2" })), "await claim(store, identity(turn(\"done\"), { ...CALL, id: \"call-2\" })) toEqual").toEqual({
      status: "conflict",
      completed: { toolName: CALL.name, toolCallId: CALL.id, result: RESULT },
    });
  });

  test("only unknown blocks: pending and completed mutations in the scope do not", async ({ store }) => {
    await acquire(store, identity(turn("running")));
    await complete(store, identity(turn("done")));
    await acquire(store, sibling);
  });

  test("other scopes are unaffected", async ({ store }) => {
    await leaveUnknown(store);
    await acquire(store, identity(STRANGER));
    await acquire(store, identity(turn("turn-2", "doc-3")));
  });

  test("a scope id is matched exactly, not by prefix or case", async ({ store }) => {
    await leaveUnknown(store);
    for (const scopeId of [`${SCOPE}0`, SCOPE.slice(0, -1), SCOPE.toUpperCase(), ` ${SCOPE}`]) {
      await acquire(store, identity(turn("turn-2", scopeId)));
    }
  });

  for (const resolution of ["completed", "no-effect"] as const) {
    test(`cleared by reconciliation (${resolution})`, async ({ store }) => {
      await leaveUnknown(store);
      expect(await claim(store, sibling), "await claim(store, sibling) toEqual").toEqual({ status: "scope_unresolved" });
      await reconcile(store, resolution === "completed" ? completed() : noEffect());
      await acquire(store, sibling);
    }, ["operator"]);
  }

  test("blocked until every unknown mutation of the scope is reconciled", async ({ store }) => {
    const third = identity(turn("turn-3"));
    const tokens = [await acquire(store, identity(TURN)), await acquire(store, third)];
    await store.settleMutation({ turnKey: TURN_KEY, token: tokens[0] ?? "", outcome: "unknown" });
    await store.settleMutation({ turnKey: third.turnKey, token: tokens[1] ?? "", outcome: "unknown" });
    await reconcile(store, noEffect(TURN_KEY));
    expect(await claim(store, sibling), "await claim(store, sibling) toEqual").toEqual({ status: "scope_unresolved" });
    await reconcile(store, completed(third.turnKey));
    await acquire(store, sibling);
  }, ["operator"]);

  test("an unknown mutation reached with requireResolvedScope: false blocks the scope as well", async ({ store }) => {
    await leaveUnknown(store);
    const third = identity(turn("turn-3"));
    const claimed = await claim(store, third, { requireResolvedScope: false });
    if (claimed.status !== "acquired") throw new Error(`expected acquired, got ${claimed.status}`);
    await store.settleMutation({ turnKey: third.turnKey, token: claimed.token, outcome: "unknown" });
    await reconcile(store, noEffect(TURN_KEY));
    expect(await claim(store, sibling), "await claim(store, sibling) toEqual").toEqual({ status: "scope_unresolved" });
    await reconcile(store, completed(third.turnKey));
    await acquire(store, sibling);
  }, ["operator"]);

  test("a tombstone (pruned turn) does not block the scope", async ({ store, clock }) => {
    await complete(store);
    clock.advance(DAY);
    await store.prune({ olderThan: clock.iso() });
    await acquire(store, sibling);
  }, ["operator"]);
}

// ---------------------------------------------------------------------------------------------
// Retention

export function retentionSuite(test: StoreTest): void {
  // The turns it counts (a store with the effects part also counts effects: the effects suite checks those).
  const prune = async (store: GuardrailStore, olderThanMs: number) => ({
    turns: conform(PruneResultSchema, await store.prune({ olderThan: new Date(olderThanMs).toISOString() }), "prune's answer").turns,
  });

  test("a fresh store prunes nothing", async ({ store, clock }) => {
    expect(await prune(store, clock.ms + DAY), "await prune(store, clock.ms + DAY) toEqual").toEqual({ turns: 0 });
  });

  test("a pruned turn is never reopened: its call and any other call answer conflict", async ({ store, clock }) => {
    await complete(store);
    clock.advance(DAY);
    expect(await prune(store, clock.ms), "await prune(store, clock.ms) toEqual").toEqual({ turns: 1 });
    expect(await claim(store), "await claim(store) toEqual").toEqual({ status: "conflict" });
    expect(await claim(store, identity(), { requireResolvedScope: false }), "await claim(store, identity(), { requireResolvedScope: false }) toEqual").toEqual({ status: "conflict" });
    for (const [label, call] of RIVAL_CALLS) expect(await claim(store, identity(TURN, call)), label).toEqual({ status: "conflict" });
    expect(await unresolved(store), "await unresolved(store) toEqual").toEqual([]);
  });

  test("a tombstone cannot be settled or reconciled", async ({ store, clock }) => {
    const token = await acquire(store);
    await store.settleMutation({ turnKey: TURN_KEY, token, outcome: "complete", result: RESULT });
    clock.advance(DAY);
    await prune(store, clock.ms);
    expect(await store.settleMutation({ turnKey: TURN_KEY, token, outcome: "complete", result: RESULT }), "await store.settleMutation({ turnKey: TURN_KEY, token, outcome: \"complete\", result: RESULT }) toBe").toBe(false);
    expect(await reconcile(store, completed()), "await reconcile(store, completed()) toEqual").toEqual({ reconciled: false, reason: "not_unresolved" });
    expect(await reconcile(store, noEffect()), "await reconcile(store, noEffect()) toEqual").toEqual({ reconciled: false, reason: "not_unresolved" });
    expect(await claim(store), "await claim(store) toEqual").toEqual({ status: "conflict" });
  });

  test("removes only mutations settled strictly before the cutoff, by settlement time", async ({ store, clock }) => {
    const early = identity(turn("early"));
    const atCutoff = identity(turn("at-cutoff"));
    const lateSettled = identity(turn("claimed-early-settled-late"));
    await complete(store, early);
    const lateToken = await acquire(store, lateSettled);
    clock.advance(HOUR);
    const cutoff = clock.ms;
    await complete(store, atCutoff);
    clock.advance(HOUR);
    await store.settleMutation({ turnKey: lateSettled.turnKey, token: lateToken, outcome: "complete", result: RESULT });
    expect(await prune(store, cutoff), "await prune(store, cutoff) toEqual").toEqual({ turns: 1 });
    expect(await claim(store, early), "await claim(store, early) toEqual").toEqual({ status: "conflict" });
    expect(await claim(store, atCutoff), "await claim(store, atCutoff) toEqual").toEqual({ status: "replay", result: RESULT });
    expect(await claim(store, lateSettled), "await claim(store, lateSettled) toEqual").toEqual({ status: "replay", result: RESULT });
  });

  test("a mutation completed by reconciliation ages from the reconciliation", async ({ store, clock }) => {
    await leaveUnknown(store);
    clock.advance(DAY);
    const reconciledAt = clock.ms;
    await reconcile(store, completed());
    expect(await prune(store, reconciledAt), "await prune(store, reconciledAt) toEqual").toEqual({ turns: 0 });
    expect(await claim(store), "await claim(store) toEqual").toEqual({ status: "replay", result: OPERATOR_RESULT });
    expect(await prune(store, reconciledAt + 1), "await prune(store, reconciledAt + 1) toEqual").toEqual({ turns: 1 });
    expect(await claim(store), "await claim(store) toEqual").toEqual({ status: "conflict" });
  });

  test("keeps unresolved claims however old, still listed and still closed", async ({ store, clock }) => {
    await acquire(store, identity(TURN));
    await leaveUnknown(store, identity(STRANGER));
    const before = await unresolved(store);
    clock.advance(365 * DAY);
    expect(await prune(store, clock.ms + DAY), "await prune(store, clock.ms + DAY) toEqual").toEqual({ turns: 0 });
    expect(await unresolved(store), "await unresolved(store) toEqual").toEqual(before);
    expect(await claim(store, identity(TURN)), "await claim(store, identity(TURN)) toEqual").toEqual({ status: "pending" });
    expect(await claim(store, identity(STRANGER)), "await claim(store, identity(STRANGER)) toEqual").toEqual({ status: "unknown" });
  });

  test("removes the pruned turns' read evidence, verdicts and approval requests, and only theirs", async ({ store, clock }) => {
    const kept = [SIBLING, STRANGER, turn("reads-only")];
    const evidence = (of: typeof TURN): ReadEvidence => ({ turnKey: turnKey(of), evidenceDigest: evidenceDigest(of.turnId) });
    const keyOf = (of: typeof TURN) => ({ ...VERDICT_KEY, turnKey: turnKey(of) });
    for (const each of [TURN, ...kept]) {
      await store.recordSuccessfulRead(evidence(each));
      await store.recordVerdict(verdictRecord(keyOf(each), DENY));
      await store.requestApproval(approvalRequest(each));
    }
    await store.decideApproval({ approvalId: approvalRequest(TURN).approvalId, decision: { decision: "approve" }, decidedAt: clock.iso() });
    await complete(store, identity(TURN));
    clock.advance(DAY);
    await complete(store, identity(SIBLING)); // settled at the cutoff: kept
    await acquire(store, identity(STRANGER)); // pending: kept
    const trail = await readAudit(store);
    expect(await prune(store, clock.ms), "await prune(store, clock.ms) toEqual").toEqual({ turns: 1 });
    expect(await store.hasSuccessfulRead(evidence(TURN)), "await store.hasSuccessfulRead(evidence(TURN)) toBe").toBe(false);
    expect(await store.getVerdict(keyOf(TURN)), "await store.getVerdict(keyOf(TURN)) toBeUndefined").toBeUndefined();
    expect(await store.getApproval(approvalRequest(TURN).approvalId), "await store.getApproval(approvalRequest(TURN).approvalId) toBeUndefined").toBeUndefined();
    expect(await store.listApprovals({ turnKey: TURN_KEY }), "await store.listApprovals({ turnKey: TURN_KEY }) toEqual").toEqual([]);
    for (const each of kept) {
      expect(await store.hasSuccessfulRead(evidence(each)), each.turnId).toBe(true);
      expect(await store.getVerdict(keyOf(each)), each.turnId).toEqual(verdictRecord(keyOf(each), DENY));
      expect(await store.getApproval(approvalRequest(each).approvalId), each.turnId).toEqual({
        ...approvalRequest(each),
        status: "pending",
      });
    }
    expect((await store.listApprovals()).map((record) => record.turnKey), "(await store.listApprovals()).map((record) => record.turnKey) toEqual").toEqual(kept.map((each) => turnKey(each)));
    // Pruning is not an approval step: the trail is unchanged.
    expect(await readAudit(store), "await readAudit(store) toEqual").toEqual(trail);
  }, ["approvals", "hasSuccessfulRead"]);

  // A live turn is one that may still read or write its records: its turn record is running or
  // paused on approval, or it has a pending approval request. Pruning one would, for a paused turn,
  // delete the request its `decide` needs (`not_found`) and the verdicts and claims its resume reads.
  test("a running or paused turn is never pruned, however old; its records go once it finished", async ({ store, clock }) => {
    const running = start(turnInput(SIBLING.turnId));
    const paused = start(turnInput(TURN.turnId));
    const runningToken = await begun(store, running);
    const pausedToken = await begun(store, paused);
    await complete(store, identity(SIBLING));
    await complete(store, identity(TURN));
    expectBoolean(await store.finishTurn({ turnKey: TURN_KEY, token: pausedToken, state: "awaiting_approval", outcome: PAUSED }), true, "paused");
    clock.advance(365 * DAY);
    expect(await prune(store, clock.ms + DAY), "nothing of a live turn is pruned").toEqual({ turns: 0 });
    for (const of of [TURN, SIBLING]) {
      expect(await claim(store, identity(of)), `${of.turnId}: its claim still replays`).toEqual({ status: "replay", result: RESULT });
    }
    expect((await store.getTurn(running.turnKey))?.state, "the running turn").toBe("running");
    expect((await store.getTurn(TURN_KEY))?.state, "the paused turn").toBe("awaiting_approval");
    const resumed = await store.resumeTurn({ turnKey: TURN_KEY, leaseMs: DAY });
    if (!resumed.resumed) throw new Error("expected the paused turn to resume");
    expectBoolean(await store.finishTurn({ turnKey: TURN_KEY, token: resumed.token, state: "completed", outcome: FINISHED }), true, "completed");
    expect(await prune(store, clock.ms + DAY), "a finished turn's claim, settled long ago, is pruned").toEqual({ turns: 1 });
    expect(await claim(store, identity(TURN)), "the finished turn's tombstone").toEqual({ status: "conflict" });
    expect(await claim(store, identity(SIBLING)), "the running turn's claim").toEqual({ status: "replay", result: RESULT });
    expectBoolean(await store.finishTurn({ turnKey: running.turnKey, token: runningToken, state: "failed", outcome: FINISHED }), true, "failed");
    expect(await prune(store, clock.ms + DAY), "and the other, once it failed").toEqual({ turns: 1 });
    expect(await store.getTurn(running.turnKey), "its record, updated before the cutoff").toBeUndefined();
  }, ["turns"]);

  test("a pending approval request is never pruned, however old, nor anything of its turn: decide still finds it", async ({ store, clock }) => {
    // No turn record: a store used without the turn service. The request itself is what is live.
    const verdictKey = { ...VERDICT_KEY, turnKey: TURN_KEY };
    const request = approvalRequest(TURN);
    await store.recordVerdict(verdictRecord(verdictKey, DENY));
    await store.requestApproval(request);
    await complete(store, identity(TURN));
    // Another turn's request, made earlier and expired (closed): that turn is pruned as before.
    const closed = approvalRequest(SIBLING, CALL, { requestedAt: "2031-02-03T00:00:00.000Z" });
    await store.requestApproval(closed);
    await complete(store, identity(SIBLING));
    clock.advance(365 * DAY);
    await store.expireApprovals({ olderThan: OFFSET_TIME });
    expect(await store.getApproval(closed.approvalId), "expired: no longer pending").toMatchObject({ status: "expired" });
    expect(await prune(store, clock.ms + DAY), "only the turn whose request is closed").toEqual({ turns: 1 });
    expect(await store.getApproval(closed.approvalId), "the closed request went with its turn").toBeUndefined();
    expect(await store.getApproval(request.approvalId), "the pending request").toEqual({ ...request, status: "pending" });
    expect(await store.listApprovals({ turnKey: TURN_KEY }), "still listed").toEqual([{ ...request, status: "pending" }]);
    expect(await store.getVerdict(verdictKey), "its turn's verdict").toEqual(verdictRecord(verdictKey, DENY));
    expect(await claim(store, identity(TURN)), "its turn's claim").toEqual({ status: "replay", result: RESULT });
    const decided = await store.decideApproval({ approvalId: request.approvalId, decision: { decision: "approve" }, decidedAt: clock.iso() });
    expect(decided.decided, "decide finds the request after prune").toBe(true);
    expectBoolean(await store.applyApproval({ approvalId: request.approvalId, appliedAt: clock.iso() }), true, "applied");
    expect(await prune(store, clock.ms + DAY), "once the request is not pending, the turn is pruned").toEqual({ turns: 1 });
    expect(await store.getApproval(request.approvalId), "the applied request").toBeUndefined();
    expect(await store.getVerdict(verdictKey), "the verdict").toBeUndefined();
  }, ["approvals"]);

  test("a paused turn whose mutation completed keeps every record through prune: decide, resume, then pruned whole", async ({ store, clock }) => {
    const paused = start(turnInput(TURN.turnId));
    const token = await begun(store, paused);
    const evidence: ReadEvidence = { turnKey: TURN_KEY, evidenceDigest: evidenceDigest(TURN.turnId) };
    const verdictKey = { ...VERDICT_KEY, turnKey: TURN_KEY };
    const sent = effect(TURN, MAIL);
    const asked = { ...MAIL, id: "mail-2", args: { ...MAIL.args, subject: "Approved" } };
    const request = approvalRequest(TURN, asked);
    await store.putReceiptIfAbsent(receipt(TURN));
    await store.recordSuccessfulRead(evidence);
    await store.recordVerdict(verdictRecord(verdictKey, DENY));
    await complete(store, identity(TURN));
    const effectToken = await store.claimEffect(sent);
    if (effectToken.status !== "acquired") throw new Error(`expected the effect to be acquired, got ${effectToken.status}`);
    expectBoolean(await store.settleEffect({ effectKey: sent.effectKey, token: effectToken.token, outcome: "complete", result: RESULT }), true, "effect settled");
    await store.requestApproval(request);
    expectBoolean(await store.finishTurn({ turnKey: TURN_KEY, token, state: "awaiting_approval", outcome: PAUSED }), true, "paused");
    clock.advance(365 * DAY);
    const everything = async (what: string) => {
      expect(await store.hasSuccessfulRead(evidence), `${what}: read evidence`).toBe(true);
      expect(await store.getVerdict(verdictKey), `${what}: verdict`).toEqual(verdictRecord(verdictKey, DENY));
      expect(await store.getMutation(TURN_KEY), `${what}: mutation`).toMatchObject({ state: "complete", result: RESULT });
      expect(await store.getEffect(sent.effectKey), `${what}: effect`).toMatchObject({ state: "complete", result: RESULT });
      expect(await store.getReceipt(TURN_KEY), `${what}: receipt`).toEqual(receipt(TURN));
    };
    const pruneAll = async () => conform(PruneResultSchema, await store.prune({ olderThan: new Date(clock.ms + DAY).toISOString() }), "prune's answer");
    expect(await pruneAll(), "paused: nothing pruned").toEqual({ turns: 0, effects: 0 });
    await everything("paused");
    expect(await store.getApproval(request.approvalId), "the request").toEqual({ ...request, status: "pending" });
    const decided = await store.decideApproval({ approvalId: request.approvalId, decision: { decision: "approve" }, decidedAt: clock.iso() });
    expect(decided.decided, "decide finds the request after prune").toBe(true);
    const resumed = await store.resumeTurn({ turnKey: TURN_KEY, leaseMs: DAY });
    if (!resumed.resumed) throw new Error("expected the paused turn to resume");
    expect(await pruneAll(), "running again, its request decided: nothing pruned").toEqual({ turns: 0, effects: 0 });
    await everything("running");
    expect(await store.getApproval(request.approvalId), "the decided request").toMatchObject({ status: "approved" });
    expectBoolean(await store.applyApproval({ approvalId: request.approvalId, appliedAt: clock.iso() }), true, "applied");
    expectBoolean(await store.finishTurn({ turnKey: TURN_KEY, token: resumed.token, state: "completed", outcome: FINISHED }), true, "completed");
    expect(await pruneAll(), "finished: pruned by the usual rule").toEqual({ turns: 1, effects: 1 });
    expect(await store.hasSuccessfulRead(evidence), "read evidence").toBe(false);
    expect(await store.getVerdict(verdictKey), "verdict").toBeUndefined();
    expect(await store.getApproval(request.approvalId), "request").toBeUndefined();
    expect(await store.getMutation(TURN_KEY), "mutation").toMatchObject({ state: "pruned" });
    expect(await store.getEffect(sent.effectKey), "effect").toMatchObject({ state: "pruned" });
    expect(await store.getTurn(TURN_KEY), "turn record").toBeUndefined();
    expect(await store.getReceipt(TURN_KEY), "the receipt stays").toEqual(receipt(TURN));
  }, ["turns", "approvals", "effects", "hasSuccessfulRead"]);

  test("keeps receipts and the audit trail", async ({ store, clock }) => {
    await store.putReceiptIfAbsent(receipt(TURN));
    await store.appendAudit(auditEvent({ decision: "executed" }));
    await leaveUnknown(store);
    await reconcile(store, completed());
    const trail = await readAudit(store);
    clock.advance(DAY);
    expect(await prune(store, clock.ms), "await prune(store, clock.ms) toEqual").toEqual({ turns: 1 });
    expect(await store.getReceipt(TURN_KEY), "await store.getReceipt(TURN_KEY) toEqual").toEqual(receipt(TURN));
    expect(await readAudit(store), "await readAudit(store) toEqual").toEqual(trail);
  });

  test("is idempotent: tombstones are counted once", async ({ store, clock }) => {
    await complete(store, identity(TURN));
    await complete(store, identity(STRANGER));
    clock.advance(DAY);
    expect(await prune(store, clock.ms), "await prune(store, clock.ms) toEqual").toEqual({ turns: 2 });
    expect(await prune(store, clock.ms), "await prune(store, clock.ms) toEqual").toEqual({ turns: 0 });
    expect(await prune(store, clock.ms + 365 * DAY), "await prune(store, clock.ms + 365 * DAY) toEqual").toEqual({ turns: 0 });
    expect(await claim(store, identity(TURN)), "await claim(store, identity(TURN)) toEqual").toEqual({ status: "conflict" });
  });

  test("counts every pruned turn across scopes, and leaves newer ones", async ({ store, clock }) => {
    const old = Array.from({ length: 5 }, (_, index) => identity(turn(`old-${String(index)}`, `doc-${String(index % 2)}`)));
    for (const id of old) await complete(store, id);
    clock.advance(DAY);
    const cutoff = clock.ms;
    await complete(store, identity(turn("new")));
    expect(await prune(store, cutoff), "await prune(store, cutoff) toEqual").toEqual({ turns: 5 });
    for (const id of old) expect(await claim(store, id), "await claim(store, id) toEqual").toEqual({ status: "conflict" });
    expect(await claim(store, identity(turn("new"))), "await claim(store, identity(turn(\"new\"))) toEqual").toEqual({ status: "replay", result: RESULT });
  });
}
