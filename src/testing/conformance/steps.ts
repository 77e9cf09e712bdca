/**
 * A turn's atomic steps as the middleware takes them: a read recorded together with its audit
 * event, a claim gated by the turn's read evidence (checked first, in the claim's transaction), and
 * a settlement recorded together with its audit event exactly when it applies.
 */
import { expect } from "vitest";
import { MAX_READ_EVIDENCE, type AuditEvent, type ClaimOptions, type GuardrailStore, type MutationSettlement } from "../../contracts/index.js";
import { turnKey } from "../../keys.js";
import {
  acquire,
  auditEvent,
  CALL,
  claim,
  complete,
  ERROR_RESULT,
  evidenceDigest,
  expectBoolean,
  expectContractError,
  identity,
  leaveUnknown,
  readAudit,
  RESULT,
  RIVAL_CALLS,
  SIBLING,
  STRANGER,
  TURN_KEY,
  turn,
  unresolved,
} from "./fixtures.js";
import type { StoreTest } from "./harness.js";

const READ = evidenceDigest("read-1");
const OTHER_READ = evidenceDigest("read-2");
const NEVER_READ = evidenceDigest("never");

const withEvidence = (...digests: string[]): ClaimOptions => ({ readEvidence: digests });

/** Everything a claim could change, read without changing anything. */
async function snapshot(store: GuardrailStore) {
  return { unresolved: await unresolved(store), audit: await readAudit(store) };
}

// ---------------------------------------------------------------------------------------------
// The claim's evidence gate

export function evidenceSuite(test: StoreTest): void {
  test("read_required: a claim naming evidence none of which is recorded changes nothing", async ({ store }) => {
    const before = await snapshot(store);
    expect(await claim(store, identity(), withEvidence(READ)), "await claim(store, identity(), withEvidence(READ)) toEqual").toEqual({ status: "read_required" });
    expect(await claim(store, identity(), withEvidence(READ, OTHER_READ)), "await claim(store, identity(), withEvidence(READ, OTHER_READ)) toEqual").toEqual({ status: "read_required" });
    expect(await snapshot(store), "await snapshot(store) toEqual").toEqual(before);
    // The slot is still free.
    expect((await claim(store)).status, "(await claim(store)).status toBe").toBe("acquired");
  }, ["operator"]);

  test("read_required: an empty evidence list names nothing recorded", async ({ store }) => {
    await store.recordSuccessfulRead({ turnKey: TURN_KEY, evidenceDigest: READ });
    expect(await claim(store, identity(), withEvidence()), "await claim(store, identity(), withEvidence()) toEqual").toEqual({ status: "read_required" });
    expect(await unresolved(store), "await unresolved(store) toEqual").toEqual([]);
  }, ["operator"]);

  test("acquired: one recorded digest among those named is enough, wherever it is in the list", async ({ store }) => {
    await store.recordSuccessfulRead({ turnKey: TURN_KEY, evidenceDigest: OTHER_READ });
    const result = await claim(store, identity(), withEvidence(READ, NEVER_READ, OTHER_READ));
    expect(result.status, "result.status toBe").toBe("acquired");
    expect(await claim(store, identity(), withEvidence(OTHER_READ)), "await claim(store, identity(), withEvidence(OTHER_READ)) toEqual").toEqual({ status: "pending" });
  });

  test("evidence counts for its own turn only: another turn's, or the same turn id in another scope's, does not", async ({ store }) => {
    await store.recordSuccessfulRead({ turnKey: turnKey(SIBLING), evidenceDigest: READ });
    await store.recordSuccessfulRead({ turnKey: turnKey(STRANGER), evidenceDigest: READ });
    expect(await claim(store, identity(), withEvidence(READ)), "await claim(store, identity(), withEvidence(READ)) toEqual").toEqual({ status: "read_required" });
    // The digests swapped: the turn key named as evidence is no evidence.
    await store.recordSuccessfulRead({ turnKey: READ, evidenceDigest: TURN_KEY });
    expect(await claim(store, identity(), withEvidence(TURN_KEY)), "await claim(store, identity(), withEvidence(TURN_KEY)) toEqual").toEqual({ status: "read_required" });
    expect((await claim(store, identity(SIBLING), withEvidence(READ))).status, "(await claim(store, identity(SIBLING), withEvidence(READ))).status toBe").toBe("acquired");
  });

  test("without readEvidence the claim does not look at evidence (as before)", async ({ store }) => {
    expect((await claim(store)).status, "(await claim(store)).status toBe").toBe("acquired");
    expect((await claim(store, identity(SIBLING), { requireResolvedScope: true })).status, "(await claim(store, identity(SIBLING), { requireResolvedScope: true })).status toBe").toBe("acquired");
  });

  test("the evidence comes first: whatever the slot holds, no evidence is read_required and changes nothing", async ({ store, clock }) => {
    const completed = turn("completed");
    const pending = turn("pending");
    const unknown = turn("unknown", "doc-unknown");
    await complete(store, identity(completed), ERROR_RESULT);
    await acquire(store, identity(pending));
    await leaveUnknown(store, identity(unknown));
    clock.advance(1_000);
    const before = await snapshot(store);
    for (const of of [completed, pending, unknown]) {
      expect(await claim(store, identity(of), withEvidence(READ)), of.turnId).toEqual({ status: "read_required" });
      expect(await claim(store, identity(of, RIVAL_CALLS[0]?.[1] ?? CALL), withEvidence(READ)), `${of.turnId}, a rival`).toEqual({
        status: "read_required",
      });
    }
    expect(await snapshot(store), "await snapshot(store) toEqual").toEqual(before);
  }, ["operator"]);

  test("with evidence, the claim answers exactly as without: replay, pending, unknown, conflict", async ({ store }) => {
    const completed = turn("completed");
    const pending = turn("pending");
    const unknown = turn("unknown", "doc-unknown");
    for (const of of [completed, pending, unknown]) await store.recordSuccessfulRead({ turnKey: turnKey(of), evidenceDigest: READ });
    await complete(store, identity(completed), RESULT);
    await acquire(store, identity(pending));
    await leaveUnknown(store, identity(unknown));
    const rival = { ...CALL, id: "call-2" };
    expect(await claim(store, identity(completed), withEvidence(READ)), "await claim(store, identity(completed), withEvidence(READ)) toEqual").toEqual({ status: "replay", result: RESULT });
    expect(await claim(store, identity(completed, rival), withEvidence(READ)), "await claim(store, identity(completed, rival), withEvidence(READ)) toEqual").toEqual({
      status: "conflict",
      completed: { toolName: CALL.name, toolCallId: CALL.id, result: RESULT },
    });
    expect(await claim(store, identity(pending), withEvidence(READ)), "await claim(store, identity(pending), withEvidence(READ)) toEqual").toEqual({ status: "pending" });
    expect(await claim(store, identity(pending, rival), withEvidence(READ)), "await claim(store, identity(pending, rival), withEvidence(READ)) toEqual").toEqual({ status: "conflict" });
    expect(await claim(store, identity(unknown), withEvidence(READ)), "await claim(store, identity(unknown), withEvidence(READ)) toEqual").toEqual({ status: "unknown" });
    expect(await claim(store, identity(unknown, rival), withEvidence(READ)), "await claim(store, identity(unknown, rival), withEvidence(READ)) toEqual").toEqual({ status: "conflict" });
  });

  test("the scope rule comes after the evidence: read_required, then scope_unresolved, then the opt-out", async ({ store }) => {
    await leaveUnknown(store, identity(SIBLING));
    expect(await claim(store, identity(), withEvidence(READ)), "await claim(store, identity(), withEvidence(READ)) toEqual").toEqual({ status: "read_required" });
    await store.recordSuccessfulRead({ turnKey: TURN_KEY, evidenceDigest: READ });
    expect(await claim(store, identity(), withEvidence(READ)), "await claim(store, identity(), withEvidence(READ)) toEqual").toEqual({ status: "scope_unresolved" });
    expect(await claim(store, identity(), { requireResolvedScope: true, readEvidence: [READ] }), "await claim(store, identity(), { requireResolvedScope: true, readEvidence: [READ] }) toEqual").toEqual({ status: "scope_unresolved" });
    expect(await unresolved(store), "await unresolved(store) toHaveLength").toHaveLength(1);
    expect((await claim(store, identity(), { requireResolvedScope: false, readEvidence: [READ] })).status, "(await claim(store, identity(), { requireResolvedScope: false, readEvidence: [READ] })).status toBe").toBe("acquired");
  }, ["operator"]);

  test(`at most ${String(MAX_READ_EVIDENCE)} digests: that many are read, one more is a StoreContractError that changes nothing`, async ({ store }) => {
    const digests = Array.from({ length: MAX_READ_EVIDENCE }, (_, index) => evidenceDigest(`many-${String(index)}`));
    const last = digests.at(-1) ?? READ;
    await store.recordSuccessfulRead({ turnKey: TURN_KEY, evidenceDigest: last });
    const before = await snapshot(store);
    await expectContractError(
      () => store.claimMutation(identity(), { readEvidence: [...digests, evidenceDigest("one too many")] }),
      `claimMutation with ${String(MAX_READ_EVIDENCE + 1)} evidence digests`,
    );
    expect(await snapshot(store), "await snapshot(store) toEqual").toEqual(before);
    expect((await claim(store, identity(), { readEvidence: digests })).status, "(await claim(store, identity(), { readEvidence: digests })).status toBe").toBe("acquired");
  }, ["operator"]);

  test("racing claims that name the turn's evidence have one winner", async ({ store }) => {
    await store.recordSuccessfulRead({ turnKey: TURN_KEY, evidenceDigest: READ });
    const results = await Promise.all(Array.from({ length: 16 }, () => claim(store, identity(), withEvidence(NEVER_READ, READ))));
    const statuses = results.map((result) => result.status);
    expect(statuses.filter((status) => status === "acquired"), "statuses.filter((status) => status === \"acquired\") toHaveLength").toHaveLength(1);
    expect(statuses.filter((status) => status === "pending"), "statuses.filter((status) => status === \"pending\") toHaveLength").toHaveLength(15);
  });

  test("evidence recorded after a read_required answer lets the same claim through", async ({ store }) => {
    expect(await claim(store, identity(), withEvidence(READ)), "await claim(store, identity(), withEvidence(READ)) toEqual").toEqual({ status: "read_required" });
    await store.recordSuccessfulRead({ turnKey: TURN_KEY, evidenceDigest: READ });
    expect((await claim(store, identity(), withEvidence(READ))).status, "(await claim(store, identity(), withEvidence(READ))).status toBe").toBe("acquired");
  });
}

// ---------------------------------------------------------------------------------------------
// Audit events carried by a read and a settlement

const stripSeq = (events: readonly { seq: number }[]) => events.map(({ seq: _seq, ...event }) => event);

export function stepAuditSuite(test: StoreTest): void {
  const READ_EVENT = auditEvent({ decision: "executed", kind: "document-read", toolCallId: "read-1", toolName: "read_document", mutationKey: undefined });

  test("a read appends its event with the evidence, every time the event is given", async ({ store }) => {
    const evidence = { turnKey: TURN_KEY, evidenceDigest: READ };
    await expect(store.recordSuccessfulRead(evidence, { audit: READ_EVENT }), "store.recordSuccessfulRead(evidence, { audit: READ_EVENT }) resolves").resolves.toBeUndefined();
    expectBoolean(await store.hasSuccessfulRead(evidence), true, "the evidence recorded with its event");
    expect(stripSeq(await readAudit(store)), "stripSeq(await readAudit(store)) toEqual").toEqual([READ_EVENT]);
    // The same evidence again: the evidence is unchanged, the event is appended again.
    const again = { ...READ_EVENT, at: "2031-02-03T06:05:07.000+02:00" };
    await store.recordSuccessfulRead(evidence, { audit: again });
    // Without an event, nothing is appended.
    await store.recordSuccessfulRead(evidence);
    await store.recordSuccessfulRead(evidence, {});
    expect(stripSeq(await readAudit(store)), "stripSeq(await readAudit(store)) toEqual").toEqual([READ_EVENT, again]);
  }, ["hasSuccessfulRead"]);

  test("a read's event comes back exactly: values, unicode, a NUL, an offset time", async ({ store }) => {
    const event: AuditEvent = {
      ...READ_EVENT,
      args: { documentId: "doc-1", nested: [1, "ünïcødé ✓", null, { deep: true }] },
      result: 'before\u0000after "quoted" \u{1F680}',
      code: "",
    };
    await store.recordSuccessfulRead({ turnKey: TURN_KEY, evidenceDigest: READ }, { audit: event });
    const [stored] = await readAudit(store);
    expect(stored, "stored toEqual").toEqual({ ...event, seq: 1 });
  });

  test("a settlement that applies appends its event: complete and unknown", async ({ store }) => {
    const completeEvent = auditEvent({ decision: "executed", result: RESULT.content });
    const token = await acquire(store);
    expectBoolean(
      await store.settleMutation({ turnKey: TURN_KEY, token, outcome: "complete", result: RESULT, audit: completeEvent }),
      true,
      "settleMutation complete with an event",
    );
    expect(await claim(store), "await claim(store) toEqual").toEqual({ status: "replay", result: RESULT });
    const other = identity(STRANGER);
    const unknownEvent = auditEvent({ decision: "failed", turnKey: other.turnKey, scopeId: other.scopeId, code: "tool_failed" });
    const otherToken = await acquire(store, other);
    expectBoolean(
      await store.settleMutation({ turnKey: other.turnKey, token: otherToken, outcome: "unknown", audit: unknownEvent }),
      true,
      "settleMutation unknown with an event",
    );
    expect(await claim(store, other), "await claim(store, other) toEqual").toEqual({ status: "unknown" });
    expect(stripSeq(await readAudit(store)), "stripSeq(await readAudit(store)) toEqual").toEqual([completeEvent, unknownEvent]);
  });

  test("a settlement that does not apply appends nothing: no claim, a wrong token, settled, released", async ({ store }) => {
    const event = auditEvent({ decision: "executed" });
    const attempt = (settlement: MutationSettlement) => store.settleMutation({ ...settlement, audit: event });
    expectBoolean(await attempt({ turnKey: TURN_KEY, token: "no-claim", outcome: "complete", result: RESULT }), false, "no claim");
    const token = await acquire(store);
    expectBoolean(await attempt({ turnKey: TURN_KEY, token: `${token}-x`, outcome: "unknown" }), false, "a wrong token");
    expectBoolean(await attempt({ turnKey: TURN_KEY, token, outcome: "complete", result: RESULT }), true, "the claim's token");
    expectBoolean(await attempt({ turnKey: TURN_KEY, token, outcome: "complete", result: ERROR_RESULT }), false, "settled complete");
    expectBoolean(await attempt({ turnKey: TURN_KEY, token, outcome: "unknown" }), false, "settled, then unknown");
    const sibling = identity(SIBLING);
    const released = await acquire(store, sibling);
    expect(await store.releaseMutation({ turnKey: sibling.turnKey, token: released }), "await store.releaseMutation({ turnKey: sibling.turnKey, token: released }) toBe").toBe(true);
    expectBoolean(await attempt({ turnKey: sibling.turnKey, token: released, outcome: "unknown" }), false, "released");
    const events = await readAudit(store);
    expect(events.filter((stored) => stored.decision === "executed"), "events.filter((stored) => stored.decision === \"executed\") toHaveLength").toHaveLength(1);
    expect(events.map((stored) => stored.decision), "events.map((stored) => stored.decision) toEqual").toEqual(["executed", "released"]);
    expect(await claim(store), "await claim(store) toEqual").toEqual({ status: "replay", result: RESULT });
  });

  test("racing settlements that carry events: one applies, one event", async ({ store }) => {
    const token = await acquire(store);
    const results = await Promise.all(
      Array.from({ length: 8 }, (_, index) =>
        store.settleMutation(
          index % 2 === 0
            ? { turnKey: TURN_KEY, token, outcome: "complete", result: RESULT, audit: auditEvent({ toolCallId: `racer-${String(index)}` }) }
            : { turnKey: TURN_KEY, token, outcome: "unknown", audit: auditEvent({ toolCallId: `racer-${String(index)}` }) },
        ),
      ),
    );
    expect(results.filter((applied) => applied), "results.filter((applied) => applied) toHaveLength").toHaveLength(1);
    const winner = results.indexOf(true);
    expect((await readAudit(store)).map((event) => event.toolCallId), "(await readAudit(store)).map((event) => event.toolCallId) toEqual").toEqual([`racer-${String(winner)}`]);
  });

  test("events carried by steps are numbered with appendAudit's, in order", async ({ store }) => {
    await store.appendAudit(auditEvent({ toolCallId: "first" }));
    await store.recordSuccessfulRead({ turnKey: TURN_KEY, evidenceDigest: READ }, { audit: auditEvent({ toolCallId: "second" }) });
    const token = await acquire(store);
    await store.settleMutation({ turnKey: TURN_KEY, token, outcome: "complete", result: RESULT, audit: auditEvent({ toolCallId: "third" }) });
    await store.appendAudit(auditEvent({ toolCallId: "fourth" }));
    const events = await readAudit(store);
    expect(events.map((event) => [event.seq, event.toolCallId]), "events.map((event) => [event.seq, event.toolCallId]) toEqual").toEqual([
      [1, "first"],
      [2, "second"],
      [3, "third"],
      [4, "fourth"],
    ]);
    expect((await readAudit(store, { turnKey: TURN_KEY })).map((event) => event.toolCallId), "(await readAudit(store, { turnKey: TURN_KEY })).map((event) => event.toolCallId) toEqual").toEqual(["first", "second", "third", "fourth"]);
  });

  test("detaches what it stores: changing the caller's events afterwards changes nothing", async ({ store }) => {
    const readEvent = { ...READ_EVENT, args: { list: [1, 2] } } as AuditEvent & { args: { list: number[] } };
    await store.recordSuccessfulRead({ turnKey: TURN_KEY, evidenceDigest: READ }, { audit: readEvent });
    const settleEvent = auditEvent({ toolCallId: "settled" });
    const token = await acquire(store);
    await store.settleMutation({ turnKey: TURN_KEY, token, outcome: "complete", result: RESULT, audit: settleEvent });
    readEvent.args.list.push(3);
    readEvent.toolCallId = "changed";
    settleEvent.toolCallId = "changed";
    expect((await readAudit(store)).map((event) => [event.toolCallId, event.args]), "(await readAudit(store)).map((event) => [event.toolCallId, event.args]) toEqual").toEqual([
      ["read-1", { list: [1, 2] }],
      ["settled", undefined],
    ]);
  });
}
