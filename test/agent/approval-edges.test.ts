/**
 * Approval edges through the real `createAgent` loop: what the person is told when an answer is
 * not taken (the interrupt's `problem` and the log), what is logged when a resume value loses to a
 * decision already recorded, a request that expires or disappears while its answer is submitted,
 * an approval another execution used (the call goes straight to its newer request, and the used
 * one is never applied again), an edit approval replayed by a retry, requests of other turns, the
 * store's malformed approval answers, and `createToolGuardrails` without a store.
 *
 * Side effects are counted by the tools (`service.writes`, `writes` of the notes service); store
 * calls are counted through a `FaultPlan` view (no fault) where the test says so.
 */
import { HumanMessage } from "@langchain/core/messages";
import { Command, MemorySaver } from "@langchain/langgraph";
import { createAgent } from "langchain";
import { describe, expect, it } from "vitest";
import {
  allowAllCalls,
  createToolGuardrails,
  InMemoryGuardrailStore,
  requireApproval,
  StoreContractError,
  turnContext,
  type ApprovalDecisionResult,
  type ApprovalRequest,
  type GuardrailStore,
} from "arkah-agent-guardrails";
import {
  type DecideApprovalInput,
} from "arkah-agent-guardrails/store";
import { ScriptedModel } from "arkah-agent-guardrails/testing";
import { FaultPlan, type Fault } from "../support/faults.js";
import { admit, DocumentService, documentTools, ForwardingStore, outcomeOf, rejection, rename, turnInput } from "../support/fixtures.js";
import { noteTurn, secureAgent, USER } from "../security/support.js";

// ---------------------------------------------------------------------------------------------
// Local helpers

const READ = { id: "r1", name: "read_note", args: { noteId: "note-7" } };
const EDIT = { id: "e1", name: "edit_note", args: { noteId: "note-7", body: "Buy oat milk" } };
const SCRIPT = [{ toolCalls: [READ] }, { toolCalls: [EDIT] }, { content: "done" }];

const NOT_ACCEPTED = "an approval answer was not accepted; the request stays pending";
const DISAGREED = "a resume value disagreed with the decision already recorded; the recorded one stands";

/** A checkpointed notes agent whose edit_note calls need approval; `thread` names its thread. */
function approvalTurn(
  options: {
    store?: GuardrailStore;
    thread?: string;
    script?: Parameters<typeof secureAgent>[0]["script"];
    turnId?: string;
    policies?: Parameters<typeof secureAgent>[0]["policies"];
  } = {},
) {
  const run = secureAgent({
    script: options.script ?? SCRIPT,
    ...(options.policies === undefined ? {} : { policies: options.policies }),
    ...(options.store === undefined ? {} : { store: options.store }),
    ...(options.turnId === undefined ? {} : { input: noteTurn({ turnId: options.turnId }) }),
    guardrails: { guardrails: [requireApproval({ tools: ["edit_note"] })] },
    checkpointer: new MemorySaver(),
  });
  const config = { configurable: { thread_id: options.thread ?? "t-1" } };
  return {
    ...run,
    start: async () => {
      await admit(run.store, run.input);
      return run.agent.invoke({ messages: [new HumanMessage(USER)] }, config);
    },
    resume: (value: unknown) => run.agent.invoke(new Command({ resume: value }), config),
  };
}

type Paused = Awaited<ReturnType<ReturnType<typeof approvalTurn>["start"]>>;

function requests(result: Paused): (ApprovalRequest & { problem?: string })[] {
  return (result.__interrupt__ ?? []).map((entry) => entry.value as ApprovalRequest & { problem?: string });
}

/** The approval actions of the store's audit trail, in order. */
async function approvalTrail(store: GuardrailStore) {
  return (await store.readAudit()).filter((event) => event.decision === "approval").map((event) => [event.action, event.code]);
}

/** A store view whose `decideApproval` first lets `before` act on the real store (another reviewer, an expiry job). */
class InterceptedDecisions extends ForwardingStore {
  constructor(
    inner: GuardrailStore,
    private readonly before: (inner: GuardrailStore, input: DecideApprovalInput) => Promise<ApprovalDecisionResult | undefined>,
  ) {
    super(inner);
  }
  override async decideApproval(input: DecideApprovalInput): Promise<ApprovalDecisionResult> {
    return (await this.before(this.inner, input)) ?? this.inner.decideApproval(input);
  }
}

// ---------------------------------------------------------------------------------------------

describe("an answer that is not taken is explained to the person and logged", () => {
  it("the first request has no problem; a malformed answer gets one naming every accepted shape, and a warning with the call", async () => {
    const turn = approvalTurn();
    const first = await turn.start();
    const [asked] = requests(first);
    expect(asked).toBeDefined();
    expect(Object.keys(asked ?? {})).not.toContain("problem");

    const again = await turn.resume({ decision: "yes" });
    const [reported] = requests(again);
    expect(reported?.approvalId).toBe(asked?.approvalId);
    const problem = reported?.problem ?? "";
    expect(problem).toMatch(/the answer was not a decision/);
    expect(problem).toMatch(/\{ decision: "approve" \}, \{ decision: "reject", message\? \}/);
    expect(problem).toMatch(/\{ decision: "edit", args \}, optionally with this request's approvalId/);
    expect(turn.warnings).toEqual([
      { message: NOT_ACCEPTED, fields: { approvalId: asked?.approvalId, toolName: "edit_note", toolCallId: "e1", problem } },
    ]);
    expect(turn.service.writes).toEqual([]);

    // A valid answer decides it and logs nothing (the re-run call meets the earlier, malformed
    // answer again first, LangGraph replaying a task's resume values in order, and skips it: it
    // was judged once already).
    const done = await turn.resume({ decision: "approve" });
    expect(outcomeOf(done.messages, "e1")).toMatchObject({ status: "success", content: "Saved" });
    expect(turn.service.writes).toEqual([{ noteId: "note-7", body: "Buy oat milk" }]);
    expect(turn.warnings.map((warning) => warning.message)).toEqual([NOT_ACCEPTED]);
  });

  it("an unkeyed answer while two calls of a step wait says why it decides none and how to key it", async () => {
    const turn = approvalTurn({
      script: [
        {
          toolCalls: [
            { id: "e1", name: "edit_note", args: { noteId: "note-7", body: "x" } },
            { id: "e2", name: "edit_note", args: { noteId: "note-8", body: "y" } },
          ],
        },
        { content: "done" },
      ],
      store: new InMemoryGuardrailStore(),
      // Auxiliary edits: two mutations of one step are refused (single_mutation, read_required) before anyone is asked.
      policies: { read_note: { kind: "document-read" }, edit_note: { kind: "auxiliary" } },
    });
    await turn.start();
    const again = await turn.resume({ decision: "approve" });

    const reported = requests(again);
    expect(reported.map((request) => request.toolCallId).sort()).toEqual(["e1", "e2"]);
    for (const request of reported) {
      expect(request.problem).toMatch(/^another approval request exists for this call or another call of its step, so an answer without approvalId /);
      expect(request.problem).toMatch(/decides none: answer each request with its approvalId, e\.g\. new Command\(\{ resume: \{ \[interrupt\.id\]: /);
    }
    expect(turn.warnings.map((warning) => [warning.message, warning.fields.toolCallId]).sort()).toEqual([
      [NOT_ACCEPTED, "e1"],
      [NOT_ACCEPTED, "e2"],
    ]);
    expect(turn.service.writes).toEqual([]);
  });

  it("a request of another turn with the same call id does not make an unkeyed answer ambiguous", async () => {
    const store = new InMemoryGuardrailStore();
    // Turn 1 asked about its call e1 and is still waiting.
    const earlier = approvalTurn({ store, thread: "turn-1" });
    expect(requests(await earlier.start())).toHaveLength(1);

    // Turn 2's model reuses the call id e1 (model call ids repeat across turns).
    const later = approvalTurn({ store, thread: "turn-2", turnId: "turn-2" });
    const [asked] = requests(await later.start());
    const done = await later.resume({ decision: "approve" });

    expect(requests(done)).toEqual([]);
    expect(outcomeOf(done.messages, "e1")).toMatchObject({ status: "success", content: "Saved" });
    expect(later.service.writes).toEqual([{ noteId: "note-7", body: "Buy oat milk" }]);
    expect(later.warnings).toEqual([]);
    expect((await store.getApproval(asked?.approvalId ?? ""))?.status).toBe("applied");
  });
});

describe("a resume value that meets a decision already recorded", () => {
  it("loses to another reviewer's different decision: the recorded one stands and the disagreement is logged", async () => {
    const inner = new InMemoryGuardrailStore();
    const store = new InterceptedDecisions(inner, async (real, input) => {
      await real.decideApproval({ ...input, decision: { decision: "reject", message: "Not now." }, operatorRef: "reviewer-2" });
      return undefined;
    });
    const turn = approvalTurn({ store });
    const [asked] = requests(await turn.start());
    const done = await turn.resume({ decision: "approve" });

    expect(outcomeOf(done.messages, "e1")).toMatchObject({ status: "error", code: "approval_rejected" });
    expect(turn.service.writes).toEqual([]);
    expect(turn.warnings).toEqual([
      {
        message: DISAGREED,
        fields: { approvalId: asked?.approvalId, toolName: "edit_note", toolCallId: "e1", recorded: "reject", answered: "approve" },
      },
    ]);
  });

  it("meets the same decision recorded by another reviewer: it goes on, and nothing is logged", async () => {
    const inner = new InMemoryGuardrailStore();
    const store = new InterceptedDecisions(inner, async (real, input) => {
      await real.decideApproval({ ...input, operatorRef: "reviewer-2" });
      return undefined;
    });
    const turn = approvalTurn({ store });
    await turn.start();
    const done = await turn.resume({ decision: "approve" });

    expect(outcomeOf(done.messages, "e1")).toMatchObject({ status: "success", content: "Saved" });
    expect(turn.service.writes).toHaveLength(1);
    expect(turn.warnings).toEqual([]);
    expect(await approvalTrail(inner)).toEqual([
      ["requested", undefined],
      ["approve", undefined],
      ["decision_refused", "already_decided"],
      ["applied", undefined],
    ]);
  });

  it("a request that expired just before its answer was recorded is refused approval_expired; nothing runs", async () => {
    const inner = new InMemoryGuardrailStore();
    const store = new InterceptedDecisions(inner, async (real) => {
      await real.expireApprovals({ olderThan: "2999-01-01T00:00:00.000Z" });
      return undefined;
    });
    const turn = approvalTurn({ store });
    await turn.start();
    const done = await turn.resume({ decision: "approve" });

    expect(outcomeOf(done.messages, "e1")).toMatchObject({ status: "error", code: "approval_expired" });
    expect(turn.service.writes).toEqual([]);
    expect(await inner.listUnresolved()).toEqual([]);
    expect(await approvalTrail(inner)).toEqual([
      ["requested", undefined],
      ["expired", undefined],
      ["decision_refused", "expired"],
    ]);
    expect(turn.warnings).toEqual([]);
  });

  it("a request the store lost before its answer was recorded (not_found) decides nothing: refused, nothing runs", async () => {
    const store = new InterceptedDecisions(new InMemoryGuardrailStore(), () => Promise.resolve({ decided: false, reason: "not_found" }));
    const turn = approvalTurn({ store });
    await turn.start();
    const done = await turn.resume({ decision: "approve" });

    expect(outcomeOf(done.messages, "e1")).toMatchObject({ status: "error", code: "approval_rejected" });
    expect(turn.service.writes).toEqual([]);
    expect(turn.warnings).toEqual([]);
  });
});

describe("an approval another execution used", () => {
  it("once a person was asked again, the call goes straight to the new request: no claim is given back twice, the used approval is never applied again", async () => {
    const inner = new InMemoryGuardrailStore();
    const plan = new FaultPlan(undefined);
    const turn = approvalTurn({ store: plan.store(inner) });
    const [used] = requests(await turn.start());
    const usedId = used?.approvalId ?? "";
    // Someone else's execution used this approval while the run was paused.
    await inner.decideApproval({ approvalId: usedId, decision: { decision: "approve" }, decidedAt: new Date().toISOString() });
    expect(await inner.applyApproval({ approvalId: usedId, appliedAt: new Date().toISOString() })).toBe(true);

    // The mutation's slot is free, so the used approval does not cover it: a person is asked again.
    const again = await turn.resume({ decision: "approve" });
    const [renewed] = requests(again);
    expect(renewed?.approvalId).not.toBe(usedId);
    expect(turn.service.writes).toEqual([]);
    const done = await turn.resume({ decision: "approve", approvalId: renewed?.approvalId });

    expect(outcomeOf(done.messages, "e1")).toMatchObject({ status: "success", content: "Saved" });
    expect(turn.service.writes).toHaveLength(1);
    // One claim was taken and given back while the person was asked, not one per resume.
    expect((await inner.readAudit()).filter((event) => event.decision === "released")).toHaveLength(1);
    // Only the new approval was applied by this run: the used one was never offered to the store again.
    expect(plan.calls.filter((call) => call.startsWith("applyApproval#"))).toEqual(["applyApproval#1"]);
    expect((await inner.getApproval(renewed?.approvalId ?? ""))?.status).toBe("applied");
  });

  it("a retry of a mutation approved with an edit replays the edited change: nobody is asked, nothing runs again", async () => {
    const store = new InMemoryGuardrailStore();
    const first = approvalTurn({ store, thread: "first" });
    await first.start();
    await first.resume({ decision: "edit", args: { noteId: "note-7", body: "Buy oat milk, 2 litres" } });
    expect(first.service.writes).toEqual([{ noteId: "note-7", body: "Buy oat milk, 2 litres" }]);

    // A transport retry: another thread, the same turn and the same model calls.
    const retry = approvalTurn({ store, thread: "retry", script: [{ toolCalls: [{ ...READ, id: "r2" }] }, { toolCalls: [EDIT] }, { content: "done" }] });
    const replayed = await retry.start();

    expect(requests(replayed)).toEqual([]);
    expect(outcomeOf(replayed.messages, "e1")).toMatchObject({ status: "success", content: "Saved" });
    expect(retry.service.writes).toEqual([]);
    expect((await store.readAudit()).filter((event) => event.decision === "replayed").map((event) => event.toolCallId)).toEqual(["e1"]);
  });
});

describe("a malformed approval answer of the store is a StoreContractError naming the method; nothing runs", () => {
  it.each<[Fault["method"], "start" | "resume" | "applied elsewhere"]>([
    ["requestApproval", "start"],
    ["decideApproval", "resume"],
    ["getApproval", "applied elsewhere"],
  ])("%s", async (method, when) => {
    const inner = new InMemoryGuardrailStore();
    const plan = new FaultPlan({ method, occurrence: 1, kind: "malformed" });
    const turn = approvalTurn({ store: plan.store(inner) });
    let error: unknown;
    if (when === "start") {
      error = await rejection(turn.start());
    } else {
      const [asked] = requests(await turn.start());
      if (when === "applied elsewhere") {
        const approvalId = asked?.approvalId ?? "";
        await inner.decideApproval({ approvalId, decision: { decision: "approve" }, decidedAt: new Date().toISOString() });
        await inner.applyApproval({ approvalId, appliedAt: new Date().toISOString() });
      }
      error = await rejection(turn.resume({ decision: "approve", approvalId: asked?.approvalId }));
    }
    expect(StoreContractError.find(error)?.message).toMatch(new RegExp(`^invalid ${method} answer: `));
    expect(turn.service.writes).toEqual([]);
    expect(await inner.listUnresolved()).toEqual([]);
  });
});

describe("createToolGuardrails without a store", () => {
  it("an approved call runs once and the run ends: the decision covers this execution", async () => {
    const service = new DocumentService();
    const input = turnInput();
    const agent = createAgent({
      model: new ScriptedModel([{ toolCalls: [rename("w1")] }, { content: "done" }]),
      tools: documentTools(service).all,
      middleware: [
        createToolGuardrails({
          guardrails: [requireApproval({ tools: ["rename_document"] })],
          tools: ["rename_document"],
          authorize: allowAllCalls,
          logger: { warn: () => undefined },
        }),
      ],
      checkpointer: new MemorySaver(),
    });
    const config = { context: turnContext(input), configurable: { thread_id: "no-store" } };
    const paused = await agent.invoke({ messages: [new HumanMessage("Rename it.")] }, config);
    expect(paused.__interrupt__?.map((entry) => (entry.value as ApprovalRequest).toolCallId)).toEqual(["w1"]);
    expect(service.writes).toBe(0);

    const done = await agent.invoke(new Command({ resume: { decision: "approve" } }), config);
    expect(done.__interrupt__ ?? []).toEqual([]);
    expect(outcomeOf(done.messages, "w1")).toMatchObject({ status: "success", content: '{"title":"Field notes","revision":1}' });
    expect(service.writes).toBe(1);
  });
});
