/**
 * Attack class: stale and replayed approvals (SECURITY.md). An approval is one decision for one
 * execution, carried out by the worker that resumes the run. Through the turn service and the real
 * loop, on the in-memory and SQLite stores: a worker that resumes an approval the operator already
 * orphaned (its lease ran out) cannot run the write; a decision delivered again (a retried request,
 * a replayed webhook), one at a time or at once, cannot apply it a second time and is no refusal; a
 * different decision delivered on a decided request is refused and audited.
 */
import { describe, expect, it } from "vitest";
import { turnKey, type GuardrailStore } from "arkah-agent-guardrails";
import { serviceHarness, turnOf } from "../turns/support.js";
import { memoryAndSqliteStores } from "./support.js";

const STORES = memoryAndSqliteStores("arkah-orphan-");

async function pausedTurn(store: GuardrailStore) {
  const harness = serviceHarness({ store, approvals: true });
  const paused = await harness.service.submit({ turn: turnOf() });
  if (paused.status !== "awaiting_approval") throw new Error(`expected a pause, got ${paused.status}`);
  const approvalId = paused.approvals[0]?.approvalId;
  if (approvalId === undefined) throw new Error("no approval request");
  return { ...harness, approvalId };
}

for (const [label, open] of STORES) {
  describe(`stale and replayed approvals (${label} store)`, () => {
    it("a stale worker resuming a long-orphaned approval cannot run the write: refused approval_orphaned, nothing written", async () => {
      const store = open();
      const { service, notes, approvalId } = await pausedTurn(store);
      // The principal's decision was recorded; the worker that was to resume died before it did.
      await store.decideApproval({ approvalId, decision: { decision: "approve" }, operatorRef: "alice", decidedAt: "2020-01-01T00:00:00.000Z" });
      // Hours later the operator's sweep retires it.
      expect(await store.orphanApprovals({ decidedBefore: new Date().toISOString() })).toEqual({ orphaned: 1 });
      // A worker picks the turn up again (a retried submit resumes a decided pause).
      const answer = await service.submit({ turn: turnOf() });
      expect(answer).toMatchObject({ status: "completed" });
      const calls = answer.status === "completed" ? answer.calls : [];
      // The outcome names the request, as the audit trail recorded the refusal.
      expect(calls.find((call) => call.callId === "w1")).toEqual({ tool: "edit_note", callId: "w1", status: "error", refusal: "approval_orphaned", approvalId });
      expect(notes.writes, "the write never ran").toEqual([]);
      expect(await store.getMutation(turnKey(turnOf())), "no claim holds the turn's write").toBeUndefined();
      expect((await store.getApproval(approvalId))?.status).toBe("orphaned");
      // The principal answering again changes nothing: the request is dead, and says so in the trail.
      expect(await service.decide({ approvalId, principal: "alice", decision: { decision: "approve" } })).toEqual({
        status: "not_pending",
        approvalStatus: "orphaned",
      });
      expect(notes.writes).toEqual([]);
      expect((await store.readAudit({ approvalId })).map((event) => [event.action ?? event.decision, event.code])).toEqual([
        ["requested", undefined],
        ["approve", undefined],
        ["orphaned", undefined],
        ["refused", "approval_orphaned"],
        ["decision_refused", "orphaned"],
      ]);
    });

    it("a replayed identical decision cannot trigger a second apply, one at a time or eight at once; it is no refusal", async () => {
      const store = open();
      const { service, notes, model, approvalId } = await pausedTurn(store);
      const decision = { approvalId, principal: "alice", decision: { decision: "approve" } } as const;
      const first = await service.decide(decision);
      expect(first).toMatchObject({ status: "completed", replayed: false });
      expect(notes.writes).toHaveLength(1);
      const calls = model.calls;
      const replays = [await service.decide(decision), ...(await Promise.all(Array.from({ length: 8 }, () => service.decide(decision))))];
      for (const replay of replays) expect(replay, "a replay answers the turn as it stands").toEqual({ ...first, replayed: true });
      expect(notes.writes, "written once").toHaveLength(1);
      expect(model.calls, "the run never resumed again").toBe(calls);
      const history = await store.readAudit({ approvalId });
      expect(history.map((event) => event.action)).toEqual(["requested", "approve", "applied"]);
    });

    it("identical decisions racing on the pending request: one decides, the run resumes once, one write, no refusal", async () => {
      const store = open();
      const { service, notes, approvalId } = await pausedTurn(store);
      const decision = { approvalId, principal: "alice", decision: { decision: "approve" } } as const;
      const answers = await Promise.all([service.decide(decision), service.decide(decision), service.decide(decision)]);
      for (const answer of answers) expect(["completed", "running"], JSON.stringify(answer)).toContain(answer.status);
      expect(notes.writes, "written once").toHaveLength(1);
      expect((await store.readAudit({ approvalId })).map((event) => event.action)).toEqual(["requested", "approve", "applied"]);
    });

    it("a different decision re-delivered on a decided request is refused and audited; nothing runs again", async () => {
      const store = open();
      const { service, notes, approvalId } = await pausedTurn(store);
      await service.decide({ approvalId, principal: "alice", decision: { decision: "approve" } });
      expect(notes.writes).toHaveLength(1);
      for (const decision of [{ decision: "reject", message: "no" }, { decision: "edit", args: { noteId: "note-7", body: "x" } }] as const) {
        expect(await service.decide({ approvalId, principal: "alice", decision })).toEqual({ status: "not_pending", approvalStatus: "applied" });
      }
      expect(notes.writes, "nothing ran again").toHaveLength(1);
      const refused = (await store.readAudit({ approvalId })).filter((event) => event.action === "decision_refused");
      expect(refused.map((event) => [event.code, event.operatorRef])).toEqual([
        ["already_decided", "alice"],
        ["already_decided", "alice"],
      ]);
      expect(await store.getApproval(approvalId)).toMatchObject({ status: "applied", decision: { decision: "approve" } });
    });
  });
}
