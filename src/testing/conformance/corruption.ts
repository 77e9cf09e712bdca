/**
 * Fail-closed reads: a record the backend holds that does not parse, or that describes another
 * key than the one it is stored under, is never taken for a record. Every read of it is a
 * `StoreContractError`, nothing changes, and a corrupt claim is never reopened. Runs only with the
 * initializer's `corruptRecord`, which writes the raw record in the backend's own way.
 */
import { expect } from "vitest";
import type { GuardrailStore, TurnInput, TurnStart } from "../../contracts/index.js";
import { digest } from "../../digest.js";
import { StoreContractError } from "../../errors.js";
import { turnKey } from "../../keys.js";
import { verdictStorageKey } from "../../store/records.js";
import { acquire, approvalRequest, complete, DENY, expectContractError, identity, receipt, SIBLING, TURN, TURN_KEY, VERDICT_KEY, verdictRecord } from "./fixtures.js";
import { effect, MAIL } from "./effects.js";
import type { CorruptionTarget, StoreTest } from "./harness.js";

const MODES = ["invalid", "wrong_key"] as const;
const SIBLING_KEY = turnKey(SIBLING);
const LEASE_MS = 30_000;

/** The key a verdict is stored under, as `corruptRecord` receives it: the key-value base's, one description of it. */
export const verdictKeyText = (key: typeof VERDICT_KEY): string => verdictStorageKey(key);

function turnStart(turnId: string): TurnStart {
  const input: TurnInput = { scopeId: "doc-1", turnId, policyVersion: "policy-1", segments: [{ label: "user", content: "Rename it." }] };
  const key = turnKey(input);
  return {
    turnKey: key,
    scopeId: input.scopeId,
    input,
    inputDigest: digest({ kind: "conformance.turn-input", input }),
    requestKey: digest({ kind: "conformance.turn-request", turnKey: key }),
    threadId: `turn:${key}`,
  };
}

/** Everything the corrupted reads could have changed, read through the calls that do not touch the corrupt record. */
async function untouched(store: GuardrailStore): Promise<unknown> {
  return { audit: await store.readAudit(), sibling: await store.getMutation(SIBLING_KEY) };
}

/**
 * A write step on a corrupt record: a `StoreContractError`, or an answer that leaves the record as
 * it was for the reads after it (the test checks they still fail closed). Any other error fails.
 */
async function rejectsOrKeepsClosed(run: () => Promise<unknown>, what: string): Promise<void> {
  try {
    await run();
  } catch (error) {
    expect(StoreContractError.isInstance(error), `${what}: a failure must be a StoreContractError, got ${String(error)}`).toBe(true);
  }
}

export function corruptionSuite(test: StoreTest): void {
  for (const mode of MODES) {
    const target = (record: CorruptionTarget["record"], key: string, otherKey: string): CorruptionTarget => ({ record, key, mode, otherKey });

    test(`a receipt stored ${mode}: getReceipt and putReceiptIfAbsent fail closed`, async ({ store, corrupt }) => {
      await store.putReceiptIfAbsent(receipt(TURN));
      await store.putReceiptIfAbsent(receipt(SIBLING));
      if (!(await corrupt(target("receipt", TURN_KEY, SIBLING_KEY)))) return; // not a corruption this backend can hold
      const before = await untouched(store);
      await expectContractError(() => store.getReceipt(TURN_KEY), `getReceipt of a receipt stored ${mode}`);
      await expectContractError(() => store.putReceiptIfAbsent(receipt(TURN)), `putReceiptIfAbsent over a receipt stored ${mode}`);
      expect(await store.getReceipt(SIBLING_KEY), "the other turn's receipt is intact").toEqual(receipt(SIBLING));
      expect(await untouched(store), "a failed read changes nothing").toEqual(before);
    });

    test(`a claim stored ${mode}: every read fails closed and the slot is never reopened`, async ({ store, corrupt }) => {
      const token = await acquire(store, identity(TURN));
      await complete(store, identity(SIBLING));
      if (!(await corrupt(target("claim", TURN_KEY, SIBLING_KEY)))) return; // not a corruption this backend can hold
      const before = await untouched(store);
      await expectContractError(() => store.getMutation(TURN_KEY), `getMutation of a claim stored ${mode}`);
      await expectContractError(() => store.claimMutation(identity(TURN)), `claimMutation over a claim stored ${mode}: never acquired`);
      // A compare-and-set by token may reject, or settle without parsing the rest: the claim stays closed either way.
      await rejectsOrKeepsClosed(() => store.settleMutation({ turnKey: TURN_KEY, token, outcome: "unknown" }), `settleMutation of a claim stored ${mode}`);
      await expectContractError(() => store.releaseMutation({ turnKey: TURN_KEY, token }), `releaseMutation of a claim stored ${mode}`);
      await expectContractError(() => store.claimMutation(identity(TURN)), `claimMutation after the failed steps: still never acquired`);
      expect(await untouched(store), "failed reads change nothing; the other turn's claim is intact").toEqual(before);
    });

    test(`a side effect stored ${mode}: every read fails closed and the effect never runs again`, async ({ store, corrupt }) => {
      const mine = effect(TURN);
      const other = effect(SIBLING);
      const claimed = await store.claimEffect(mine);
      const token = claimed.status === "acquired" ? claimed.token : "t";
      const otherClaim = await store.claimEffect(other);
      if (otherClaim.status === "acquired") {
        await store.settleEffect({ effectKey: other.effectKey, token: otherClaim.token, outcome: "complete", result: { content: "sent", status: "success" } });
      }
      if (!(await corrupt(target("effect", mine.effectKey, other.effectKey)))) return; // not a corruption this backend can hold
      const before = { audit: await store.readAudit(), other: await store.getEffect(other.effectKey) };
      await expectContractError(() => store.getEffect(mine.effectKey), `getEffect of an effect stored ${mode}`);
      await expectContractError(() => store.claimEffect(mine), `claimEffect over an effect stored ${mode}: never acquired`);
      await expectContractError(() => store.claimEffect({ ...mine, toolCallId: `${MAIL.id}-again` }, { maxPerTurn: 5 }), `a limited claimEffect over an effect stored ${mode}`);
      await expectContractError(() => store.listUnresolvedEffects(), `listUnresolvedEffects over an effect stored ${mode}`);
      // A compare-and-set by token may reject, or settle without parsing the rest: the effect stays closed either way.
      await rejectsOrKeepsClosed(() => store.settleEffect({ effectKey: mine.effectKey, token, outcome: "unknown" }), `settleEffect of an effect stored ${mode}`);
      // After a settlement that applied, the effect is no longer pending: a release may answer false, never true.
      await rejectsOrKeepsClosed(async () => {
        expect(await store.releaseEffect({ effectKey: mine.effectKey, token }), `releaseEffect of an effect stored ${mode} never releases it`).toBe(false);
      }, `releaseEffect of an effect stored ${mode}`);
      await expectContractError(
        () => store.reconcileEffect({ effectKey: mine.effectKey, resolution: "no-effect", operatorRef: "ops" }),
        `reconcileEffect of an effect stored ${mode}`,
      );
      await expectContractError(() => store.claimEffect(mine), `claimEffect after the failed steps: still never acquired`);
      expect({ audit: await store.readAudit(), other: await store.getEffect(other.effectKey) }, "failed reads change nothing; the other effect is intact").toEqual(before);
    }, ["effects"]);

    test(`a verdict stored ${mode}: getVerdict and recordVerdict fail closed`, async ({ store, corrupt }) => {
      const otherKey = { ...VERDICT_KEY, turnKey: SIBLING_KEY };
      await store.recordVerdict(verdictRecord(VERDICT_KEY, DENY));
      await store.recordVerdict(verdictRecord(otherKey, DENY));
      if (!(await corrupt(target("verdict", verdictKeyText(VERDICT_KEY), verdictKeyText(otherKey))))) return; // not a corruption this backend can hold
      const before = await untouched(store);
      await expectContractError(() => store.getVerdict(VERDICT_KEY), `getVerdict of a verdict stored ${mode}`);
      await expectContractError(() => store.recordVerdict(verdictRecord(VERDICT_KEY, DENY)), `recordVerdict over a verdict stored ${mode}`);
      expect(await store.getVerdict(otherKey), "the other verdict is intact").toEqual(verdictRecord(otherKey, DENY));
      expect(await untouched(store), "a failed read changes nothing").toEqual(before);
    }, ["approvals"]);

    test(`an approval stored ${mode}: every read fails closed`, async ({ store, clock, corrupt }) => {
      const request = approvalRequest(TURN);
      const other = approvalRequest(SIBLING);
      await store.requestApproval(request);
      await store.requestApproval(other);
      if (!(await corrupt(target("approval", request.approvalId, other.approvalId)))) return; // not a corruption this backend can hold
      const before = await untouched(store);
      await expectContractError(() => store.getApproval(request.approvalId), `getApproval of a request stored ${mode}`);
      await expectContractError(() => store.requestApproval(request), `requestApproval over a request stored ${mode}`);
      await expectContractError(
        () => store.decideApproval({ approvalId: request.approvalId, decision: { decision: "approve" }, decidedAt: clock.iso() }),
        `decideApproval of a request stored ${mode}`,
      );
      await expectContractError(() => store.applyApproval({ approvalId: request.approvalId, appliedAt: clock.iso() }), `applyApproval of a request stored ${mode}`);
      await expectContractError(() => store.listApprovals(), `listApprovals over a request stored ${mode}`);
      expect(await untouched(store), "failed reads change nothing (no approval event)").toEqual(before);
    }, ["approvals"]);

    test(`an audit cursor stored ${mode}: getAuditCursor and advanceAuditCursor fail closed`, async ({ store, corrupt }) => {
      await store.advanceAuditCursor({ sink: "siem", seq: 3 });
      await store.advanceAuditCursor({ sink: "archive", seq: 5 });
      if (!(await corrupt(target("auditCursor", "siem", "archive")))) return; // not a corruption this backend can hold
      await expectContractError(() => store.getAuditCursor("siem"), `getAuditCursor of a cursor stored ${mode}`);
      await rejectsOrKeepsClosed(() => store.advanceAuditCursor({ sink: "siem", seq: 9 }), `advanceAuditCursor of a cursor stored ${mode}`);
      await expectContractError(() => store.getAuditCursor("siem"), `getAuditCursor after the advance: the corrupt cursor was not taken for a position`);
      expect(await store.getAuditCursor("archive"), "the other sink's cursor is intact").toBe(5);
    }, ["auditDelivery"]);

    test(`a turn record stored ${mode}: every read fails closed`, async ({ store, corrupt }) => {
      const first = turnStart("turn-1");
      const second = turnStart("turn-2");
      const begun = await store.beginTurn({ turn: first, leaseMs: LEASE_MS });
      await store.beginTurn({ turn: second, leaseMs: LEASE_MS });
      if (!(await corrupt(target("turn", first.turnKey, second.turnKey)))) return; // not a corruption this backend can hold
      await expectContractError(() => store.getTurn(first.turnKey), `getTurn of a turn stored ${mode}`);
      await expectContractError(() => store.beginTurn({ turn: first, leaseMs: LEASE_MS }), `beginTurn over a turn stored ${mode}: never started again`);
      const token = begun.status === "started" ? begun.token : "t";
      await expectContractError(() => store.finishTurn({ turnKey: first.turnKey, token, state: "completed", outcome: null }), `finishTurn of a turn stored ${mode}`);
      await expectContractError(() => store.resumeTurn({ turnKey: first.turnKey, leaseMs: LEASE_MS }), `resumeTurn of a turn stored ${mode}`);
      await expectContractError(() => store.renewTurn({ turnKey: first.turnKey, token, leaseMs: LEASE_MS }), `renewTurn of a turn stored ${mode}`);
      await expectContractError(() => store.listTurns({ state: "running" }), `listTurns over a turn stored ${mode}: never listed as something it is not`);
      expect((await store.getTurn(second.turnKey))?.turnKey, "the other turn's record is intact").toBe(second.turnKey);
    }, ["turns"]);
  }
}
