/**
 * Approval requests: stored once per approval id and never changed by a later request; decided
 * once (the first decision wins, a refused one is audited, the recorded one re-delivered is
 * answered again and not audited); applied once; listed oldest first; expired when nobody decided;
 * orphaned when decided but never applied; each request's history read back by `approvalId`. The
 * store audits every step in the same operation as the change.
 */
import { expect } from "vitest";
import {
  ApprovalDecisionResultSchema,
  ApprovalRecordSchema,
  ExpireApprovalsResultSchema,
  OrphanApprovalsResultSchema,
  type ApprovalDecision,
  type ApprovalDecisionResult,
  type ApprovalQuery,
  type ApprovalRecord,
  type ApprovalSubmission,
  type GuardrailStore,
  type StoredAuditEvent,
} from "../../contracts/index.js";
import { turnKey } from "../../keys.js";
import {
  APPROVAL_ID,
  approvalRequest,
  CALL,
  conform,
  DECISIONS,
  expectBoolean,
  expectInstant,
  getApproval,
  pendingRecord,
  readAudit,
  REDESCRIBED,
  requestApproval,
  SIBLING,
  STRANGER,
  TURN,
  TURN_KEY,
  turn,
} from "./fixtures.js";
import type { StoreTest } from "./harness.js";

const MINUTE = 60 * 1000;
/** A decision time with an offset: stored exactly as given. */
const DECIDED_AT = "2031-02-03T06:00:00.000+01:00";
const APPLIED_AT = "2031-02-03T07:30:00.000+02:00";
const APPROVE: ApprovalDecision = { decision: "approve" };
const REJECT: ApprovalDecision = { decision: "reject", message: "Not this title." };
const EDIT: ApprovalDecision = { decision: "edit", args: { title: "Field notes (edited)" } };

async function decide(
  store: GuardrailStore,
  decision: ApprovalDecision,
  options: { approvalId?: string; operatorRef?: string; decidedAt?: string } = {},
): Promise<ApprovalDecisionResult> {
  const result = await store.decideApproval({
    approvalId: options.approvalId ?? APPROVAL_ID,
    decision: structuredClone(decision),
    ...(options.operatorRef === undefined ? {} : { operatorRef: options.operatorRef }),
    decidedAt: options.decidedAt ?? DECIDED_AT,
  });
  return conform(ApprovalDecisionResultSchema, result, "decideApproval's answer");
}

async function apply(store: GuardrailStore, id: string = APPROVAL_ID, appliedAt: string = APPLIED_AT): Promise<boolean> {
  const applied = await store.applyApproval({ approvalId: id, appliedAt });
  expect(typeof applied, "applyApproval must answer a boolean").toBe("boolean");
  return applied;
}

async function list(store: GuardrailStore, query?: ApprovalQuery): Promise<ApprovalRecord[]> {
  const records = query === undefined ? await store.listApprovals() : await store.listApprovals(query);
  expect(Array.isArray(records), "listApprovals must answer an array").toBe(true);
  records.forEach((record, index) => conform(ApprovalRecordSchema, record, `listApprovals()[${String(index)}]`));
  return records;
}

async function expire(store: GuardrailStore, olderThanMs: number): Promise<number> {
  const result = await store.expireApprovals({ olderThan: new Date(olderThanMs).toISOString() });
  return conform(ExpireApprovalsResultSchema, result, "expireApprovals's answer").expired;
}

async function orphan(store: GuardrailStore, decidedBeforeMs: number): Promise<number> {
  const result = await store.orphanApprovals({ decidedBefore: new Date(decidedBeforeMs).toISOString() });
  return conform(OrphanApprovalsResultSchema, result, "orphanApprovals's answer").orphaned;
}

/** One request's history: `readAudit` filtered by its approval id. */
async function history(store: GuardrailStore, approvalId: string = APPROVAL_ID): Promise<StoredAuditEvent[]> {
  const events = await readAudit(store, { approvalId });
  for (const event of events) expect(event.approvalId, "readAudit({ approvalId }) answers only that request's events").toBe(approvalId);
  return events;
}

const approvalEvents = async (store: GuardrailStore) =>
  (await readAudit(store)).filter((event) => event.decision === "approval");

/** The record a decision leaves. */
function decidedRecord(
  decision: ApprovalDecision,
  status: ApprovalRecord["status"],
  options: { request?: ApprovalSubmission; operatorRef?: string; decidedAt?: string } = {},
): ApprovalRecord {
  return {
    ...pendingRecord(options.request),
    status,
    decision: structuredClone(decision),
    ...(options.operatorRef === undefined ? {} : { operatorRef: options.operatorRef }),
    decidedAt: options.decidedAt ?? DECIDED_AT,
  };
}

/**
 * An approval event: the request's identity and the step, at the store's time; `code` and
 * `operatorRef` exactly when expected; never argument values.
 */
function expectApprovalEvent(
  event: StoredAuditEvent | undefined,
  request: ApprovalSubmission,
  action: string,
  atMs: number,
  extra: { code?: string; operatorRef?: string } = {},
): void {
  expect(event, "event toMatchObject").toMatchObject({
    decision: "approval",
    approvalId: request.approvalId,
    turnKey: request.turnKey,
    scopeId: request.scopeId,
    toolCallId: request.toolCallId,
    toolName: request.toolName,
    toolFingerprint: request.toolFingerprint,
    argsDigest: request.argsDigest,
    action,
  });
  expect(event?.code, `the ${action} event's code`).toBe(extra.code);
  expect(event?.operatorRef, `the ${action} event's operatorRef`).toBe(extra.operatorRef);
  expect(event, "event not.toHaveProperty").not.toHaveProperty("args");
  expect(event, "event not.toHaveProperty").not.toHaveProperty("result");
  expectInstant(event?.at, atMs, `the ${action} event's time`);
}

/** Requests that each differ from the main one in one part of the approval id. */
const OTHER_REQUESTS: readonly (readonly [string, ApprovalSubmission])[] = [
  ["another turn", approvalRequest(SIBLING)],
  ["another scope", approvalRequest(STRANGER)],
  ["another call id", approvalRequest(TURN, { ...CALL, id: "call-2" })],
  ["another tool", approvalRequest(TURN, { ...CALL, name: "delete_document" })],
  ["another tool fingerprint", approvalRequest(TURN, REDESCRIBED)],
  ["other arguments", approvalRequest(TURN, { ...CALL, args: { title: "Other notes" } })],
];

export function approvalsSuite(test: StoreTest): void {
  // -- requests -------------------------------------------------------------------------------

  test("getApproval answers undefined for an id never requested", async ({ store }) => {
    expect(await getApproval(store), "await getApproval(store) toBeUndefined").toBeUndefined();
    await requestApproval(store, OTHER_REQUESTS[0]?.[1]);
    expect(await getApproval(store), "await getApproval(store) toBeUndefined").toBeUndefined();
  });

  test("stores a request as pending, exactly as given, and returns it", async ({ store }) => {
    expect(await requestApproval(store), "await requestApproval(store) toEqual").toEqual(pendingRecord());
    expect(await getApproval(store), "await getApproval(store) toEqual").toEqual(pendingRecord());
    expect((await getApproval(store))?.requestedAt, "(await getApproval(store))?.requestedAt toBe").toBe(approvalRequest().requestedAt);
  });

  test("round-trips a request without a reason, with one guardrail and no arguments", async ({ store }) => {
    const { reason: _reason, ...rest } = approvalRequest();
    const bare: ApprovalSubmission = { ...rest, guardrails: ["approval"], args: {}, requestedAt: "2031-02-03T04:05:06Z" };
    expect(await requestApproval(store, bare), "await requestApproval(store, bare) toEqual").toEqual(pendingRecord(bare));
    expect(await getApproval(store), "await getApproval(store) toEqual").toEqual(pendingRecord(bare));
    expect(await getApproval(store), "await getApproval(store) not.toHaveProperty").not.toHaveProperty("reason");
  });

  test("keeps the first request for an id: a later request with other fields gets it back, unchanged", async ({ store }) => {
    await requestApproval(store);
    const later = approvalRequest(TURN, CALL, {
      args: { title: "Something else" },
      guardrails: ["other"],
      reason: "Another reason.",
      requestedAt: "2031-02-04T00:00:00.000Z",
    });
    expect(await requestApproval(store, later), "await requestApproval(store, later) toEqual").toEqual(pendingRecord());
    expect(await getApproval(store), "await getApproval(store) toEqual").toEqual(pendingRecord());
  });

  test("a request for an id that was decided, applied or expired returns that record: it never reopens", async ({ store, clock }) => {
    await requestApproval(store);
    await decide(store, APPROVE);
    expect(await requestApproval(store), "await requestApproval(store) toEqual").toEqual(decidedRecord(APPROVE, "approved"));
    await apply(store);
    expect((await requestApproval(store)).status, "(await requestApproval(store)).status toBe").toBe("applied");

    const other = approvalRequest(SIBLING);
    await requestApproval(store, other);
    clock.advance(MINUTE);
    await expire(store, Date.parse(other.requestedAt) + 1);
    expect(await requestApproval(store, other), "await requestApproval(store, other) toMatchObject").toMatchObject({ status: "expired" });
  });

  for (const [label, other] of OTHER_REQUESTS) {
    test(`keeps requests apart by approval id: ${label}`, async ({ store }) => {
      expect(other.approvalId, "other.approvalId not.toBe").not.toBe(APPROVAL_ID);
      await requestApproval(store);
      expect(await getApproval(store, other.approvalId), "await getApproval(store, other.approvalId) toBeUndefined").toBeUndefined();
      expect(await requestApproval(store, other), "await requestApproval(store, other) toEqual").toEqual(pendingRecord(other));
      await decide(store, REJECT);
      expect(await getApproval(store, other.approvalId), "await getApproval(store, other.approvalId) toEqual").toEqual(pendingRecord(other));
      expect(await getApproval(store), "await getApproval(store) toEqual").toEqual(decidedRecord(REJECT, "rejected"));
    });
  }

  test("appends one requested event with the request's identity, at the store's time; a repeat appends nothing", async ({ store, clock }) => {
    clock.advance(MINUTE);
    await requestApproval(store);
    const at = clock.ms;
    clock.advance(MINUTE);
    await requestApproval(store);
    await requestApproval(store, approvalRequest(TURN, CALL, { reason: "again" }));
    const events = await readAudit(store);
    expect(events, "events toHaveLength").toHaveLength(1);
    expectApprovalEvent(events[0], approvalRequest(), "requested", at);
  });

  test("16 concurrent first requests for one id: one winner, returned to each, and one requested event", async ({ store }) => {
    const candidates = Array.from({ length: 16 }, (_, index) =>
      approvalRequest(TURN, CALL, { reason: `candidate ${String(index)}` }),
    );
    const winners = await Promise.all(candidates.map((candidate) => requestApproval(store, candidate)));
    const stored = await getApproval(store);
    expect(candidates.map((candidate) => pendingRecord(candidate)), "candidates.map((candidate) => pendingRecord(candidate)) toContainEqual").toContainEqual(stored);
    for (const winner of winners) expect(winner, "winner toEqual").toEqual(stored);
    expect(await approvalEvents(store), "await approvalEvents(store) toHaveLength").toHaveLength(1);
  });

  test("detaches what it returns: changing a returned record changes nothing stored", async ({ store }) => {
    const scribble = (record: ApprovalRecord | undefined) => {
      if (record === undefined) return;
      record.status = "approved";
      record.args.title = "changed";
      (record.args.tags as unknown[]).push("changed");
      record.guardrails.push("changed");
      record.decision = { decision: "approve" };
    };
    scribble(await requestApproval(store));
    scribble(await getApproval(store));
    scribble(await requestApproval(store));
    const [listed] = await list(store);
    scribble(listed);
    expect(await getApproval(store), "await getApproval(store) toEqual").toEqual(pendingRecord());
  });

  test("detaches what it stores: changing the caller's request afterwards changes nothing", async ({ store }) => {
    const input = approvalRequest();
    await requestApproval(store, input);
    input.args.title = "changed";
    (input.args.tags as unknown[]).push("changed");
    input.guardrails.push("changed");
    input.reason = "changed";
    expect(await getApproval(store), "await getApproval(store) toEqual").toEqual(pendingRecord());
  });

  // -- decisions ------------------------------------------------------------------------------

  for (const [label, decision, status] of DECISIONS) {
    test(`decides a pending request with ${label}: ${status}, stored with its time and who decided, audited`, async ({ store, clock }) => {
      await requestApproval(store);
      clock.advance(MINUTE);
      const expected = decidedRecord(decision, status, { operatorRef: "reviewer-7" });
      expect(await decide(store, decision, { operatorRef: "reviewer-7" }), "await decide(store, decision, { operatorRef: \"reviewer-7\" }) toEqual").toEqual({ decided: true, record: expected });
      expect(await getApproval(store), "await getApproval(store) toEqual").toEqual(expected);
      const events = await approvalEvents(store);
      expect(events.map((event) => event.action), "events.map((event) => event.action) toEqual").toEqual(["requested", decision.decision]);
      expectApprovalEvent(events[1], approvalRequest(), decision.decision, clock.ms, { operatorRef: "reviewer-7" });
    });
  }

  test("a decision without an operator reference stores and audits none", async ({ store, clock }) => {
    await requestApproval(store);
    expect(await decide(store, EDIT), "await decide(store, EDIT) toEqual").toEqual({ decided: true, record: decidedRecord(EDIT, "edited") });
    expect(await getApproval(store), "await getApproval(store) not.toHaveProperty").not.toHaveProperty("operatorRef");
    expectApprovalEvent((await approvalEvents(store))[1], approvalRequest(), "edit", clock.ms);
  });

  test("the first decision wins: a later one is refused already_decided, changes nothing, and is audited", async ({ store, clock }) => {
    await requestApproval(store);
    await decide(store, APPROVE, { operatorRef: "reviewer-1" });
    const first = decidedRecord(APPROVE, "approved", { operatorRef: "reviewer-1" });
    clock.advance(MINUTE);
    expect(await decide(store, REJECT, { operatorRef: "reviewer-2", decidedAt: "2031-02-05T00:00:00Z" }), "await decide(store, REJECT, { operatorRef: \"reviewer-2\", decidedAt: \"2031-02-05T00:00:00Z\" }) toE...").toEqual({
      decided: false,
      reason: "already_decided",
      record: first,
    });
    expect(await decide(store, APPROVE), "await decide(store, APPROVE) toEqual").toEqual({ decided: false, reason: "already_decided", record: first });
    expect(await getApproval(store), "await getApproval(store) toEqual").toEqual(first);
    const events = await approvalEvents(store);
    expect(events.map((event) => [event.action, event.code]), "events.map((event) => [event.action, event.code]) toEqual").toEqual([
      ["requested", undefined],
      ["approve", undefined],
      ["decision_refused", "already_decided"],
      ["decision_refused", "already_decided"],
    ]);
    expectApprovalEvent(events[2], approvalRequest(), "decision_refused", clock.ms, {
      code: "already_decided",
      operatorRef: "reviewer-2",
    });
    expectApprovalEvent(events[3], approvalRequest(), "decision_refused", clock.ms, { code: "already_decided" });
  });

  test("16 concurrent decisions of every kind: exactly one decides; the others get its record, refused and audited", async ({ store }) => {
    await requestApproval(store);
    const attempts = Array.from({ length: 16 }, (_, index) => ({
      decision: DECISIONS[index % DECISIONS.length]?.[1] ?? APPROVE,
      operatorRef: `reviewer-${String(index)}`,
    }));
    const results = await Promise.all(attempts.map((attempt) => decide(store, attempt.decision, { operatorRef: attempt.operatorRef })));
    const winners = results.flatMap((result) => (result.decided ? [result.record] : []));
    expect(winners, "winners toHaveLength").toHaveLength(1);
    const winner = winners[0];
    expect(await getApproval(store), "await getApproval(store) toEqual").toEqual(winner);
    for (const result of results.filter((each) => !each.decided)) {
      expect(result, "result toEqual").toEqual({ decided: false, reason: "already_decided", record: winner });
    }
    const events = await approvalEvents(store);
    expect(events.filter((event) => event.action === "decision_refused"), "events.filter((event) => event.action === \"decision_refused\") toHaveLength").toHaveLength(15);
    expect(events.filter((event) => event.action === winner?.decision?.decision), "events.filter((event) => event.action === winner?.decision?.decision) toHaveLength").toHaveLength(1);
  });

  test("an applied request refuses decisions: already_decided, audited", async ({ store }) => {
    await requestApproval(store);
    await decide(store, EDIT);
    await apply(store);
    const applied = await getApproval(store);
    expect(await decide(store, REJECT), "await decide(store, REJECT) toEqual").toEqual({ decided: false, reason: "already_decided", record: applied });
    expect(await getApproval(store), "await getApproval(store) toEqual").toEqual(applied);
    expect((await approvalEvents(store)).at(-1), "(await approvalEvents(store)).at(-1) toMatchObject").toMatchObject({ action: "decision_refused", code: "already_decided" });
  });

  test("an expired request refuses decisions: expired, with the record, audited", async ({ store, clock }) => {
    await requestApproval(store);
    clock.advance(MINUTE);
    await expire(store, clock.ms);
    const expired = await getApproval(store);
    expect(await decide(store, APPROVE, { operatorRef: "late-reviewer" }), "await decide(store, APPROVE, { operatorRef: \"late-reviewer\" }) toEqual").toEqual({
      decided: false,
      reason: "expired",
      record: expired,
    });
    expect(await getApproval(store), "await getApproval(store) toEqual").toEqual(expired);
    expectApprovalEvent((await approvalEvents(store)).at(-1), approvalRequest(), "decision_refused", clock.ms, {
      code: "expired",
      operatorRef: "late-reviewer",
    });
  });

  test("not_found: a decision for an id never requested creates nothing and appends nothing", async ({ store }) => {
    expect(await decide(store, APPROVE), "await decide(store, APPROVE) toEqual").toEqual({ decided: false, reason: "not_found" });
    expect(await getApproval(store), "await getApproval(store) toBeUndefined").toBeUndefined();
    expect(await list(store), "await list(store) toEqual").toEqual([]);
    expect(await readAudit(store), "await readAudit(store) toEqual").toEqual([]);
  });

  test("detaches the decision: changing the caller's edit or the returned record afterwards changes nothing", async ({ store }) => {
    await requestApproval(store);
    const decision = { decision: "edit" as const, args: { title: "Edited", tags: ["a"] } };
    const result = await store.decideApproval({ approvalId: APPROVAL_ID, decision, decidedAt: DECIDED_AT });
    decision.args.title = "changed";
    decision.args.tags.push("changed");
    if (result.record?.decision?.decision === "edit") result.record.decision.args.title = "changed";
    if (result.record !== undefined) result.record.status = "rejected";
    expect(await getApproval(store), "await getApproval(store) toEqual").toEqual(decidedRecord({ decision: "edit", args: { title: "Edited", tags: ["a"] } }, "edited"));
  });

  // -- applying -------------------------------------------------------------------------------

  for (const [decision, status] of [
    [APPROVE, "approved"],
    [EDIT, "edited"],
  ] as const) {
    test(`applies an ${status} request: true, applied at the given time, its decision kept, audited`, async ({ store, clock }) => {
      await requestApproval(store);
      await decide(store, decision, { operatorRef: "reviewer-1" });
      clock.advance(MINUTE);
      expectBoolean(await apply(store), true, `applying an ${status} request`);
      const expected = { ...decidedRecord(decision, status, { operatorRef: "reviewer-1" }), status: "applied", appliedAt: APPLIED_AT };
      expect(await getApproval(store), "await getApproval(store) toEqual").toEqual(expected);
      const events = await approvalEvents(store);
      expect(events.map((event) => event.action), "events.map((event) => event.action) toEqual").toEqual(["requested", decision.decision, "applied"]);
      expectApprovalEvent(events[2], approvalRequest(), "applied", clock.ms);
    });
  }

  test("applies only approved or edited requests: anything else is false, changes nothing and appends nothing", async ({ store, clock }) => {
    const pending = approvalRequest(turn("pending"));
    const rejected = approvalRequest(turn("rejected"));
    const applied = approvalRequest(turn("applied"));
    const expired = approvalRequest(turn("expired"), CALL, { requestedAt: "2031-02-01T00:00:00.000Z" });
    for (const request of [pending, rejected, applied, expired]) await requestApproval(store, request);
    await decide(store, REJECT, { approvalId: rejected.approvalId });
    await decide(store, APPROVE, { approvalId: applied.approvalId });
    await apply(store, applied.approvalId);
    await expire(store, Date.parse("2031-02-02T00:00:00.000Z"));
    const before = { records: await list(store), trail: await readAudit(store) };
    clock.advance(MINUTE);
    for (const [label, id] of [
      ["pending", pending.approvalId],
      ["rejected", rejected.approvalId],
      ["applied", applied.approvalId],
      ["expired", expired.approvalId],
      ["never requested", APPROVAL_ID],
    ] as const) {
      expectBoolean(await apply(store, id, "2031-03-01T00:00:00.000Z"), false, `applying a ${label} request`);
    }
    expect(await list(store), "await list(store) toEqual").toEqual(before.records);
    expect(await readAudit(store), "await readAudit(store) toEqual").toEqual(before.trail);
  });

  test("8 racing applications: exactly one applies and is audited", async ({ store }) => {
    await requestApproval(store);
    await decide(store, APPROVE);
    const applied = await Promise.all(
      Array.from({ length: 8 }, (_, index) => apply(store, APPROVAL_ID, `2031-02-03T08:00:0${String(index)}.000Z`)),
    );
    expect(applied.filter((value) => value), "applied.filter((value) => value) toHaveLength").toHaveLength(1);
    expect((await getApproval(store))?.appliedAt, "(await getApproval(store))?.appliedAt toBe").toBe(`2031-02-03T08:00:0${String(applied.indexOf(true))}.000Z`);
    expect((await approvalEvents(store)).filter((event) => event.action === "applied"), "(await approvalEvents(store)).filter((event) => event.action === \"applied\") toHaveLength").toHaveLength(1);
  });

  // -- listing --------------------------------------------------------------------------------

  test("a fresh store lists nothing", async ({ store }) => {
    expect(await list(store), "await list(store) toEqual").toEqual([]);
    expect(await list(store, {}), "await list(store, {}) toEqual").toEqual([]);
  });

  test("lists oldest requestedAt first, comparing instants rather than text or request order", async ({ store }) => {
    const times = [
      "2031-02-03T05:30:00.000+02:00", // 03:30Z: second, though it sorts last as text
      "2031-02-03T04:00:00.000Z", // fourth
      "2031-02-03T03:00:00.000Z", // first
      "2031-02-03T00:45:00.000-03:00", // 03:45Z: third
    ];
    const requests = times.map((requestedAt, index) => approvalRequest(turn(`listed-${String(index)}`), CALL, { requestedAt }));
    for (const request of requests) await requestApproval(store, request);
    const order = [2, 0, 3, 1];
    expect((await list(store)).map((record) => record.requestedAt), "(await list(store)).map((record) => record.requestedAt) toEqual").toEqual(order.map((index) => times[index]));
  });

  test("requests made at the same instant are listed in the order they were requested", async ({ store }) => {
    // Ids against request order, and one written with an offset: neither may decide the order.
    const requests = Array.from({ length: 5 }, (_, index) =>
      approvalRequest(turn(`tied-${String(index)}`), CALL, {
        requestedAt: index === 2 ? "2031-02-03T06:05:06.789+02:00" : "2031-02-03T04:05:06.789Z",
      }),
    ).sort((a, b) => (a.approvalId < b.approvalId ? 1 : -1));
    for (const request of requests) await requestApproval(store, request);
    expect((await list(store)).map((record) => record.approvalId), "(await list(store)).map((record) => record.approvalId) toEqual").toEqual(requests.map((request) => request.approvalId));
  });

  test("filters by status and by turn key, together, and limits after ordering", async ({ store }) => {
    const at = (minute: number) => new Date(Date.UTC(2031, 1, 3, 4, minute)).toISOString();
    const mine = [0, 1, 2, 3].map((index) => approvalRequest(TURN, { ...CALL, id: `call-${String(index)}` }, { requestedAt: at(10 - index) }));
    const theirs = [0, 1].map((index) => approvalRequest(STRANGER, { ...CALL, id: `call-${String(index)}` }, { requestedAt: at(index) }));
    for (const request of [...mine, ...theirs]) await requestApproval(store, request);
    await decide(store, APPROVE, { approvalId: mine[1]?.approvalId });
    await decide(store, REJECT, { approvalId: theirs[0]?.approvalId });
    const ids = (records: ApprovalRecord[]) => records.map((record) => record.approvalId);

    expect(ids(await list(store, { turnKey: TURN_KEY })), "ids(await list(store, { turnKey: TURN_KEY })) toEqual").toEqual([3, 2, 1, 0].map((index) => mine[index]?.approvalId));
    expect(ids(await list(store, { status: "pending" })), "ids(await list(store, { status: \"pending\" })) toEqual").toEqual(
      [theirs[1], mine[3], mine[2], mine[0]].map((request) => request?.approvalId),
    );
    expect(ids(await list(store, { status: "pending", turnKey: TURN_KEY })), "ids(await list(store, { status: \"pending\", turnKey: TURN_KEY })) toEqual").toEqual(
      [mine[3], mine[2], mine[0]].map((request) => request?.approvalId),
    );
    expect(ids(await list(store, { status: "approved" })), "ids(await list(store, { status: \"approved\" })) toEqual").toEqual([mine[1]?.approvalId]);
    expect(await list(store, { status: "expired" }), "await list(store, { status: \"expired\" }) toEqual").toEqual([]);
    expect(await list(store, { turnKey: turnKey(SIBLING) }), "await list(store, { turnKey: turnKey(SIBLING) }) toEqual").toEqual([]);
    expect(ids(await list(store, { limit: 2 })), "ids(await list(store, { limit: 2 })) toEqual").toEqual([theirs[0], theirs[1]].map((request) => request?.approvalId));
    expect(ids(await list(store, { status: "pending", turnKey: TURN_KEY, limit: 1 })), "ids(await list(store, { status: \"pending\", turnKey: TURN_KEY, limit: 1 })) toEqual").toEqual([mine[3]?.approvalId]);
    expect(await list(store, { limit: 10_000 }), "await list(store, { limit: 10_000 }) toHaveLength").toHaveLength(6);
  });

  test("lists each request as it stands now", async ({ store }) => {
    await requestApproval(store);
    await decide(store, EDIT, { operatorRef: "reviewer-1" });
    expect(await list(store), "await list(store) toEqual").toEqual([decidedRecord(EDIT, "edited", { operatorRef: "reviewer-1" })]);
    await apply(store);
    expect(await list(store), "await list(store) toEqual").toEqual([await getApproval(store)]);
  });

  // -- expiry ---------------------------------------------------------------------------------

  test("expires pending requests made strictly before the cut-off, at the store's time, one event each", async ({ store, clock }) => {
    const cutoff = Date.parse("2031-02-03T04:00:00.000Z");
    const early = approvalRequest(turn("early"), CALL, { requestedAt: "2031-02-03T03:59:59.999Z" });
    const earlyOffset = approvalRequest(turn("early-offset"), CALL, { requestedAt: "2031-02-03T05:30:00.000+02:00" });
    const atCutoff = approvalRequest(turn("at-cutoff"), CALL, { requestedAt: "2031-02-03T06:00:00.000+02:00" });
    const late = approvalRequest(turn("late"), CALL, { requestedAt: "2031-02-03T04:00:00.001Z" });
    const decided = approvalRequest(turn("decided"), CALL, { requestedAt: "2031-02-03T01:00:00.000Z" });
    for (const request of [early, earlyOffset, atCutoff, late, decided]) await requestApproval(store, request);
    await decide(store, APPROVE, { approvalId: decided.approvalId });
    clock.advance(MINUTE);
    const before = (await readAudit(store)).length;

    expect(await expire(store, cutoff), "await expire(store, cutoff) toBe").toBe(2);
    for (const request of [early, earlyOffset]) {
      const record = await getApproval(store, request.approvalId);
      expectInstant(record?.expiredAt, clock.ms, "expiredAt");
      expect(record, "record toEqual").toEqual({ ...pendingRecord(request), status: "expired", expiredAt: record?.expiredAt });
    }
    for (const request of [atCutoff, late]) expect(await getApproval(store, request.approvalId), "await getApproval(store, request.approvalId) toEqual").toEqual(pendingRecord(request));
    expect(await getApproval(store, decided.approvalId), "await getApproval(store, decided.approvalId) toEqual").toEqual(decidedRecord(APPROVE, "approved", { request: decided }));
    const events = (await readAudit(store)).slice(before);
    expect(events.map((event) => event.approvalId).sort(), "events.map((event) => event.approvalId).sort() toEqual").toEqual([early.approvalId, earlyOffset.approvalId].sort());
    for (const event of events) {
      expectApprovalEvent(event, event.approvalId === early.approvalId ? early : earlyOffset, "expired", clock.ms);
    }
  });

  test("expiry is idempotent: a second run finds nothing and appends nothing", async ({ store, clock }) => {
    await requestApproval(store);
    clock.advance(MINUTE);
    expect(await expire(store, clock.ms), "await expire(store, clock.ms) toBe").toBe(1);
    const trail = await readAudit(store);
    const record = await getApproval(store);
    clock.advance(MINUTE);
    expect(await expire(store, clock.ms), "await expire(store, clock.ms) toBe").toBe(0);
    expect(await readAudit(store), "await readAudit(store) toEqual").toEqual(trail);
    expect(await getApproval(store), "await getApproval(store) toEqual").toEqual(record);
  });

  test("a fresh store expires nothing", async ({ store, clock }) => {
    expect(await expire(store, clock.ms + 365 * 24 * 60 * MINUTE), "await expire(store, clock.ms + 365 * 24 * 60 * MINUTE) toBe").toBe(0);
    expect(await readAudit(store), "await readAudit(store) toEqual").toEqual([]);
  });

  test("a decision racing an expiry: exactly one of them changes the request", async ({ store, clock }) => {
    await requestApproval(store);
    clock.advance(MINUTE);
    const [decided, expired] = await Promise.all([decide(store, APPROVE), expire(store, clock.ms)]);
    expect(decided.decided !== (expired === 1), `decided: ${String(decided.decided)}, expired: ${String(expired)}`).toBe(true);
    const record = await getApproval(store);
    if (decided.decided) {
      expect(record?.status, "record?.status toBe").toBe("approved");
    } else {
      expect(decided, "decided toEqual").toEqual({ decided: false, reason: "expired", record });
      expect(record?.status, "record?.status toBe").toBe("expired");
    }
  });

  // -- re-delivered decisions -----------------------------------------------------------------

  for (const [label, decision, status] of DECISIONS) {
    test(`${label} re-delivered is answered as the first time (repeated: true) and appends nothing`, async ({ store, clock }) => {
      await requestApproval(store);
      const first = await decide(store, decision, { operatorRef: "reviewer-7" });
      expect(first.decided, "the first delivery decides").toBe(true);
      const recorded = decidedRecord(decision, status, { operatorRef: "reviewer-7" });
      const trail = await readAudit(store);
      clock.advance(MINUTE);
      // A later decidedAt is the same decision delivered again: the recorded time stands.
      const again = await decide(store, decision, { operatorRef: "reviewer-7", decidedAt: "2031-02-05T00:00:00.000Z" });
      expect(again, "a re-delivered decision answers decided, repeated, with the record as it stands").toEqual({
        decided: true,
        record: recorded,
        repeated: true,
      });
      expect(await getApproval(store), "a re-delivered decision changes nothing").toEqual(recorded);
      expect(await readAudit(store), "a re-delivered decision appends no event (no decision_refused)").toEqual(trail);
    });
  }

  test("the decision re-delivered after its request was applied answers repeated with the applied record, and appends nothing", async ({ store }) => {
    await requestApproval(store);
    await decide(store, EDIT, { operatorRef: "reviewer-1" });
    expectBoolean(await apply(store), true, "applying the edited request");
    const applied = await getApproval(store);
    const trail = await readAudit(store);
    expect(await decide(store, EDIT, { operatorRef: "reviewer-1" }), "the edit re-delivered after apply").toEqual({
      decided: true,
      record: applied,
      repeated: true,
    });
    expect(await readAudit(store), "a re-delivery after apply appends nothing").toEqual(trail);
    expectBoolean(await apply(store), false, "a re-delivery never makes an applied request applicable again");
  });

  test("an edit re-delivered with canonically equal arguments (key order at every depth) is the same decision", async ({ store }) => {
    await requestApproval(store);
    await decide(store, { decision: "edit", args: { title: "T", meta: { b: 1, a: [1.5, { y: null, x: "é" }] } } });
    const trail = await readAudit(store);
    const again = await decide(store, { decision: "edit", args: { meta: { a: [15e-1, { x: "é", y: null }], b: 1.0 }, title: "T" } });
    expect(again.decided && again.repeated, "key order does not make another decision").toBe(true);
    expect(await readAudit(store), "a canonically equal edit appends nothing").toEqual(trail);
  });

  test("a decision that differs in any part from the recorded one is refused already_decided and audited", async ({ store, clock }) => {
    const variants: readonly (readonly [string, ApprovalDecision, string | undefined])[] = [
      ["another kind", APPROVE, "reviewer-1"],
      ["another message", { decision: "reject", message: "Another reason." }, "reviewer-1"],
      ["no message", { decision: "reject" }, "reviewer-1"],
      ["no operatorRef", REJECT, undefined],
      ["another operatorRef", REJECT, "reviewer-2"],
    ];
    await requestApproval(store);
    await decide(store, REJECT, { operatorRef: "reviewer-1" });
    const recorded = decidedRecord(REJECT, "rejected", { operatorRef: "reviewer-1" });
    for (const [label, decision, operatorRef] of variants) {
      clock.advance(MINUTE);
      const before = (await readAudit(store)).length;
      const answer = await decide(store, decision, operatorRef === undefined ? {} : { operatorRef });
      expect(answer, `${label}: refused already_decided with the record`).toEqual({ decided: false, reason: "already_decided", record: recorded });
      const added = (await readAudit(store)).slice(before);
      expect(added, `${label}: exactly one event appended`).toHaveLength(1);
      expectApprovalEvent(added[0], approvalRequest(), "decision_refused", clock.ms, {
        code: "already_decided",
        ...(operatorRef === undefined ? {} : { operatorRef }),
      });
    }
    expect(await getApproval(store), "refused decisions change nothing").toEqual(recorded);
  });

  test("an edit with other arguments than the recorded edit is refused already_decided and audited", async ({ store }) => {
    await requestApproval(store);
    await decide(store, EDIT);
    const answer = await decide(store, { decision: "edit", args: { title: "Another title" } });
    expect(answer.decided, "an edit with other arguments does not decide").toBe(false);
    expect((await approvalEvents(store)).at(-1), "and is audited decision_refused").toMatchObject({ action: "decision_refused", code: "already_decided" });
  });

  test("8 concurrent deliveries of one decision: one decides, the others answer repeated; one decision event, no refusal", async ({ store }) => {
    await requestApproval(store);
    const answers = await Promise.all(Array.from({ length: 8 }, () => decide(store, EDIT, { operatorRef: "reviewer-1" })));
    expect(answers.every((answer) => answer.decided), "every delivery of the same decision answers decided").toBe(true);
    expect(answers.filter((answer) => answer.decided && answer.repeated !== true), "exactly one delivery decided it").toHaveLength(1);
    const actions = (await approvalEvents(store)).map((event) => event.action);
    expect(actions, "one requested and one edit event, and no decision_refused").toEqual(["requested", "edit"]);
  });

  // -- history --------------------------------------------------------------------------------

  test("readAudit by approvalId lists one request's events in order: requested, decision, refusals, applied", async ({ store }) => {
    const other = approvalRequest(SIBLING);
    await requestApproval(store);
    await requestApproval(store, other);
    await decide(store, APPROVE, { approvalId: other.approvalId });
    await decide(store, EDIT, { operatorRef: "reviewer-1" });
    await store.appendAudit({ at: "2031-02-03T04:05:06.000Z", decision: "refused", turnKey: TURN_KEY, scopeId: TURN.scopeId, code: "guardrail_denied" });
    await decide(store, REJECT, { operatorRef: "reviewer-2" });
    await decide(store, EDIT, { operatorRef: "reviewer-1" }); // re-delivered: no event
    expectBoolean(await apply(store), true, "applying the edited request");
    await store.appendAudit({
      at: "2031-02-03T04:05:07.000Z",
      decision: "approval",
      action: "answer_refused",
      code: "other_request",
      approvalId: APPROVAL_ID,
      turnKey: TURN_KEY,
      scopeId: TURN.scopeId,
    });
    const mine = await history(store);
    expect(mine.map((event) => [event.action, event.code, event.operatorRef]), "the request's own events, in order").toEqual([
      ["requested", undefined, undefined],
      ["edit", undefined, "reviewer-1"],
      ["decision_refused", "already_decided", "reviewer-2"],
      ["applied", undefined, undefined],
      ["answer_refused", "other_request", undefined],
    ]);
    const seqs = mine.map((event) => event.seq);
    expect(seqs, "in seq order").toEqual([...seqs].sort((a, b) => a - b));
    expect((await history(store, other.approvalId)).map((event) => event.action), "the other request's history").toEqual(["requested", "approve"]);
    expect(await history(store, "0".repeat(64)), "a request never asked has no history").toEqual([]);
  });

  test("readAudit by approvalId combines with the other filters and pages with afterSeq and limit", async ({ store }) => {
    await requestApproval(store);
    await decide(store, APPROVE);
    expectBoolean(await apply(store), true, "applying the approved request");
    const all = await history(store);
    expect(all.map((event) => event.action), "the whole history").toEqual(["requested", "approve", "applied"]);
    expect((await readAudit(store, { approvalId: APPROVAL_ID, limit: 2 })).map((event) => event.action), "limit").toEqual(["requested", "approve"]);
    expect(
      (await readAudit(store, { approvalId: APPROVAL_ID, afterSeq: all[0]?.seq ?? 0 })).map((event) => event.action),
      "afterSeq",
    ).toEqual(["approve", "applied"]);
    expect(await readAudit(store, { approvalId: APPROVAL_ID, turnKey: TURN_KEY }), "with its own turn key").toEqual(all);
    expect(await readAudit(store, { approvalId: APPROVAL_ID, turnKey: turnKey(SIBLING) }), "with another turn key").toEqual([]);
    expect(await readAudit(store, { approvalId: APPROVAL_ID, scopeId: TURN.scopeId }), "with its own scope").toEqual(all);
    expect(await readAudit(store, { approvalId: APPROVAL_ID, scopeId: STRANGER.scopeId }), "with another scope").toEqual([]);
  });

  // -- orphaning ------------------------------------------------------------------------------

  test("orphans approved and edited requests decided strictly before the cut-off, at the store's time, one event each; nothing else", async ({ store, clock }) => {
    const cutoff = Date.parse("2031-02-03T05:00:00.000Z");
    const approved = approvalRequest(turn("approved-early"));
    const edited = approvalRequest(turn("edited-early"));
    const atCutoff = approvalRequest(turn("at-cutoff"));
    const late = approvalRequest(turn("late"));
    const rejected = approvalRequest(turn("rejected-early"));
    const applied = approvalRequest(turn("applied-early"));
    const pending = approvalRequest(turn("pending"), CALL, { requestedAt: "2031-02-02T00:00:00.000Z" });
    const expired = approvalRequest(turn("expired"), CALL, { requestedAt: "2031-02-01T00:00:00.000Z" });
    for (const request of [approved, edited, atCutoff, late, rejected, applied, pending, expired]) await requestApproval(store, request);
    await expire(store, Date.parse("2031-02-01T00:00:00.001Z"));
    await decide(store, APPROVE, { approvalId: approved.approvalId, decidedAt: "2031-02-03T04:59:59.999Z", operatorRef: "reviewer-1" });
    // 04:30Z, written with an offset: instants are compared, not text.
    await decide(store, EDIT, { approvalId: edited.approvalId, decidedAt: "2031-02-03T06:30:00.000+02:00" });
    await decide(store, APPROVE, { approvalId: atCutoff.approvalId, decidedAt: "2031-02-03T06:00:00.000+01:00" });
    await decide(store, APPROVE, { approvalId: late.approvalId, decidedAt: "2031-02-03T05:00:00.001Z" });
    await decide(store, REJECT, { approvalId: rejected.approvalId, decidedAt: "2031-02-03T01:00:00.000Z" });
    await decide(store, APPROVE, { approvalId: applied.approvalId, decidedAt: "2031-02-03T01:00:00.000Z" });
    expectBoolean(await apply(store, applied.approvalId), true, "applying a request before the sweep");
    const untouched = await Promise.all([atCutoff, late, rejected, applied, pending, expired].map((request) => getApproval(store, request.approvalId)));
    clock.advance(MINUTE);
    const before = (await readAudit(store)).length;

    expect(await orphan(store, cutoff), "orphanApprovals answers how many it orphaned").toBe(2);
    for (const [request, decision, operatorRef] of [
      [approved, APPROVE, "reviewer-1"],
      [edited, EDIT, undefined],
    ] as const) {
      const record = await getApproval(store, request.approvalId);
      expectInstant(record?.orphanedAt, clock.ms, "orphanedAt");
      expect(record?.status, "an orphaned request's status").toBe("orphaned");
      expect(record?.decision, "an orphaned request keeps its decision").toEqual(decision);
      expect(record?.operatorRef, "an orphaned request keeps who decided").toBe(operatorRef);
      expect(record?.appliedAt, "an orphaned request was never applied").toBeUndefined();
    }
    expect(
      await Promise.all([atCutoff, late, rejected, applied, pending, expired].map((request) => getApproval(store, request.approvalId))),
      "requests decided at or after the cut-off, and rejected, applied, pending or expired ones, are not orphaned",
    ).toEqual(untouched);
    const events = (await readAudit(store)).slice(before);
    expect(events.map((event) => event.approvalId).sort(), "one orphaned event per orphaned request").toEqual([approved.approvalId, edited.approvalId].sort());
    for (const event of events) expectApprovalEvent(event, event.approvalId === approved.approvalId ? approved : edited, "orphaned", clock.ms);
  }, ["approvalOrphans"]);

  test("orphaning is idempotent, and a fresh store orphans nothing", async ({ store, clock }) => {
    expect(await orphan(store, clock.ms + 365 * 24 * 60 * MINUTE), "a fresh store orphans nothing").toBe(0);
    expect(await readAudit(store), "a fresh store's orphaning appends nothing").toEqual([]);
    await requestApproval(store);
    await decide(store, APPROVE);
    clock.advance(MINUTE);
    expect(await orphan(store, Date.parse(DECIDED_AT) + 1), "the first sweep orphans the approved request").toBe(1);
    const trail = await readAudit(store);
    const record = await getApproval(store);
    clock.advance(MINUTE);
    expect(await orphan(store, Date.parse(DECIDED_AT) + 1), "a second sweep finds nothing").toBe(0);
    expect(await readAudit(store), "a second sweep appends nothing").toEqual(trail);
    expect(await getApproval(store), "a second sweep changes nothing").toEqual(record);
  }, ["approvalOrphans"]);

  test("an orphaned request is never applied: applyApproval answers false, changing and appending nothing", async ({ store }) => {
    await requestApproval(store);
    await decide(store, EDIT);
    await orphan(store, Date.parse(DECIDED_AT) + 1);
    const record = await getApproval(store);
    const trail = await readAudit(store);
    expectBoolean(await apply(store), false, "applying an orphaned request");
    expect(await getApproval(store), "a refused application changes nothing").toEqual(record);
    expect(await readAudit(store), "a refused application appends nothing").toEqual(trail);
  }, ["approvalOrphans"]);

  test("an orphaned request refuses every decision, its own re-delivered too: orphaned, with the record, audited", async ({ store, clock }) => {
    await requestApproval(store);
    await decide(store, APPROVE, { operatorRef: "reviewer-1" });
    await orphan(store, Date.parse(DECIDED_AT) + 1);
    const orphaned = await getApproval(store);
    for (const [label, decision, operatorRef] of [
      ["the recorded decision", APPROVE, "reviewer-1"],
      ["another decision", REJECT, "reviewer-2"],
    ] as const) {
      clock.advance(MINUTE);
      expect(await decide(store, decision, { operatorRef }), `${label} on an orphaned request`).toEqual({ decided: false, reason: "orphaned", record: orphaned });
      expectApprovalEvent((await approvalEvents(store)).at(-1), approvalRequest(), "decision_refused", clock.ms, { code: "orphaned", operatorRef });
    }
    expect(await getApproval(store), "refused decisions change nothing").toEqual(orphaned);
    expect((await history(store)).map((event) => [event.action, event.code]), "the orphaned request's history").toEqual([
      ["requested", undefined],
      ["approve", undefined],
      ["orphaned", undefined],
      ["decision_refused", "orphaned"],
      ["decision_refused", "orphaned"],
    ]);
  }, ["approvalOrphans"]);

  test("an application racing an orphaning: exactly one of them changes the request", async ({ store }) => {
    await requestApproval(store);
    await decide(store, APPROVE);
    const [applied, orphaned] = await Promise.all([apply(store), orphan(store, Date.parse(DECIDED_AT) + 1)]);
    expect(applied !== (orphaned === 1), `applied: ${String(applied)}, orphaned: ${String(orphaned)}`).toBe(true);
    expect((await getApproval(store))?.status, "the request's status names the winner").toBe(applied ? "applied" : "orphaned");
    const steps = (await approvalEvents(store)).map((event) => event.action);
    expect(steps, "one event for the winner only").toEqual(["requested", "approve", applied ? "applied" : "orphaned"]);
  }, ["approvalOrphans"]);
}
