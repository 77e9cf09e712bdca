/**
 * LangChain's approval format (`approvalFormat: "langchain"`) through the real `createAgent` loop
 * with a `MemorySaver`: the approval interrupt carries the `HITLRequest` of LangChain's own
 * `humanInTheLoopMiddleware` (one action request per call) and takes its `HITLResponse` (exactly
 * one decision), so the UIs that answer it answer ours. The answers map onto the same decisions:
 * approve runs once, edit is a new call checked before it is recorded (another tool is refused),
 * reject refuses. The protections of resume.ts hold as for the package's own format: a value is
 * judged once, a run invoked without a new answer is not decided, a value refused for one request
 * is not taken for the next one.
 *
 * Writes are counted by the notes service.
 */
import { HumanMessage } from "@langchain/core/messages";
import { Command, MemorySaver } from "@langchain/langgraph";
import type { HITLRequest, HITLResponse } from "langchain";
import { describe, expect, it } from "vitest";
import { ConfigurationError, createDocumentGuardrails, digest, InMemoryGuardrailStore, requireApproval, type ToolPolicy } from "arkah-agent-guardrails";
import { admit, outcomeOf } from "../support/fixtures.js";
import { secureAgent, USER } from "./support.js";

const noteScope = (args: Readonly<Record<string, unknown>>) => (typeof args.noteId === "string" ? args.noteId : undefined);
const SCOPED: Record<string, ToolPolicy> = {
  read_note: { kind: "document-read", scope: noteScope },
  edit_note: { kind: "mutation", scope: noteScope },
};
const READ = { id: "r1", name: "read_note", args: { noteId: "note-7" } };
const EDIT = { id: "e1", name: "edit_note", args: { noteId: "note-7", body: "Buy oat milk" } };

/** A notes agent whose edits need a person's approval, in LangChain's format, on one thread. */
function langchainApprovals() {
  const run = secureAgent({
    script: [{ toolCalls: [READ] }, { toolCalls: [EDIT] }, { content: "done" }],
    policies: SCOPED,
    guardrails: { guardrails: [requireApproval({ tools: ["edit_note"] })], approvalFormat: "langchain" },
    checkpointer: new MemorySaver(),
  });
  const config = { configurable: { thread_id: "t-1" } };
  return {
    ...run,
    start: async () => {
      await admit(run.store, run.input);
      return run.agent.invoke({ messages: [new HumanMessage(USER)] }, config);
    },
    resume: (value: unknown) => run.agent.invoke(new Command({ resume: value }), config),
    again: () => run.agent.invoke(null, config),
  };
}

type Paused = Awaited<ReturnType<ReturnType<typeof langchainApprovals>["start"]>>;

/** The one pending interrupt's payload, as LangChain's middleware would raise it. */
function hitl(result: Paused): HITLRequest {
  const interrupts = result.__interrupt__ ?? [];
  expect(interrupts).toHaveLength(1);
  return interrupts[0]?.value as HITLRequest;
}

const answer = (decisions: HITLResponse["decisions"]): HITLResponse => ({ decisions });

/** The approval steps of the store's audit trail, as [action, code]. */
async function approvalTrail(store: ReturnType<typeof langchainApprovals>["store"]) {
  return (await store.readAudit()).filter((event) => event.decision === "approval").map((event) => [event.action, event.code]);
}

describe("approvalFormat: \"langchain\"", () => {
  it("the interrupt is a HITLRequest: one action request (the call as parsed, the reason), every decision allowed, the tool's schema, the request's approvalId; nothing ran", async () => {
    const turn = langchainApprovals();
    const paused = await turn.start();
    const [stored] = await turn.store.listApprovals();
    expect(hitl(paused)).toEqual({
      actionRequests: [{ name: "edit_note", args: EDIT.args, description: "Approve edit_note?" }],
      reviewConfigs: [
        {
          actionName: "edit_note",
          allowedDecisions: ["approve", "edit", "reject"],
          argsSchema: expect.objectContaining({ type: "object", properties: { noteId: { type: "string" }, body: { type: "string" } } }) as unknown,
        },
      ],
      // This package's addition beside LangChain's fields: the stored request the interrupt asks about.
      approvalId: stored?.approvalId,
    });
    expect(turn.service.writes).toEqual([]);
    expect(stored).toMatchObject({ status: "pending", toolCallId: "e1", argsDigest: digest(EDIT.args) });
  });

  it("approve: { decisions: [{ type: \"approve\" }] } runs the call once; the request is applied", async () => {
    const turn = langchainApprovals();
    await turn.start();
    const done = await turn.resume(answer([{ type: "approve" }]));
    expect(done.__interrupt__ ?? []).toEqual([]);
    expect(outcomeOf(done.messages, "e1").content).toBe("Saved");
    expect(turn.service.writes).toEqual([{ noteId: "note-7", body: "Buy oat milk" }]);
    expect((await turn.store.listApprovals()).map((record) => record.status)).toEqual(["applied"]);
  });

  it("edit: editedAction with the call's tool runs the edited arguments once, as a new call", async () => {
    const turn = langchainApprovals();
    await turn.start();
    const done = await turn.resume(
      answer([{ type: "edit", editedAction: { name: "edit_note", args: { noteId: "note-7", body: "Buy soy milk" } } }]),
    );
    expect(outcomeOf(done.messages, "e1").content).toBe("Saved");
    expect(turn.service.writes).toEqual([{ noteId: "note-7", body: "Buy soy milk" }]);
    const [stored] = await turn.store.listApprovals();
    expect(stored).toMatchObject({ status: "applied", decision: { decision: "edit", args: { noteId: "note-7", body: "Buy soy milk" } } });
  });

  it("an edit naming another tool is refused (edited_tool): the request stays answerable, its problem in the description", async () => {
    const turn = langchainApprovals();
    await turn.start();
    const again = await turn.resume(answer([{ type: "edit", editedAction: { name: "read_note", args: { noteId: "note-7" } } }]));
    expect(hitl(again).actionRequests[0]?.description).toMatch(/not accepted: an edit may change the arguments, not the tool/);
    expect(turn.service.writes).toEqual([]);
    const done = await turn.resume(answer([{ type: "approve" }]));
    expect(outcomeOf(done.messages, "e1").content).toBe("Saved");
    expect(turn.service.writes).toHaveLength(1);
    expect(await approvalTrail(turn.store)).toEqual([
      ["requested", undefined],
      ["answer_refused", "edited_tool"],
      ["approve", undefined],
      ["applied", undefined],
    ]);
  });

  it("an edit is checked like a model's call: arguments out of the turn's scope are refused out_of_scope, nothing written", async () => {
    const turn = langchainApprovals();
    await turn.start();
    const again = await turn.resume(answer([{ type: "edit", editedAction: { name: "edit_note", args: { noteId: "note-8", body: "x" } } }]));
    expect(hitl(again).actionRequests[0]?.description).toMatch(/out_of_scope/);
    expect(turn.service.writes).toEqual([]);
  });

  it("reject: the call is refused approval_rejected with the reviewer's message; nothing written", async () => {
    const turn = langchainApprovals();
    await turn.start();
    const done = await turn.resume(answer([{ type: "reject", message: "Not today." }]));
    const outcome = outcomeOf(done.messages, "e1");
    expect(outcome.code).toBe("approval_rejected");
    expect(JSON.parse(outcome.content)).toMatchObject({ reviewerMessage: "Not today." });
    expect(turn.service.writes).toEqual([]);
  });

  it("not exactly one decision, or the package's own format, is not a decision: refused, the request answerable", async () => {
    const turn = langchainApprovals();
    await turn.start();
    for (const value of [answer([]), answer([{ type: "approve" }, { type: "approve" }]), { decision: "approve" }, { decisions: [{ type: "approve", args: {} }] }]) {
      const again = await turn.resume(value);
      expect(hitl(again).actionRequests[0]?.description).toMatch(/not a decision/);
      expect(turn.service.writes).toEqual([]);
    }
    const done = await turn.resume(answer([{ type: "reject" }]));
    expect(outcomeOf(done.messages, "e1").code).toBe("approval_rejected");
    expect((await approvalTrail(turn.store)).map(([action, code]) => `${String(action)}:${String(code)}`)).toEqual([
      "requested:undefined",
      "answer_refused:not_a_decision",
      "answer_refused:not_a_decision",
      "answer_refused:not_a_decision",
      "answer_refused:not_a_decision",
      "reject:undefined",
    ]);
  });

  it("judged once: a refused value handed in again by invoke(null) is not judged again (repeated_answer), and never outranks the person's reject", async () => {
    const turn = langchainApprovals();
    await turn.start();
    await turn.resume(answer([{ type: "approve" }, { type: "approve" }]));
    const again = await turn.again();
    expect(hitl(again).actionRequests[0]?.description).toMatch(/resumed without a new answer.*decisions: \[decision\], approvalId/);
    expect(turn.service.writes).toEqual([]);
    const done = await turn.resume(answer([{ type: "reject" }]));
    expect(outcomeOf(done.messages, "e1").code).toBe("approval_rejected");
    expect(turn.service.writes).toEqual([]);
    expect(await approvalTrail(turn.store)).toEqual([
      ["requested", undefined],
      ["answer_refused", "not_a_decision"],
      ["answer_refused", "repeated_answer"],
      ["reject", undefined],
    ]);
  });

  it("positional: an answer refused for one request (naming another) is not taken for the task's next request once the first is decided", async () => {
    const turn = langchainApprovals();
    await turn.start();
    const [asked] = await turn.store.listApprovals();
    if (asked === undefined) throw new Error("no request stored");
    const next = digest({
      kind: "arkah.approval",
      v: 1,
      turnKey: asked.turnKey,
      toolName: asked.toolName,
      toolFingerprint: asked.toolFingerprint,
      toolCallId: asked.toolCallId,
      argsDigest: asked.argsDigest,
      execution: 1,
    });
    const again = await turn.resume({ decisions: [{ type: "approve" }], approvalId: next });
    expect(hitl(again).actionRequests[0]?.description).toMatch(/named another approval request/);
    // Another execution decided and used the first request: the re-run call asks the next one.
    await turn.store.decideApproval({ approvalId: asked.approvalId, decision: { decision: "approve" }, decidedAt: new Date().toISOString() });
    expect(await turn.store.applyApproval({ approvalId: asked.approvalId, appliedAt: new Date().toISOString() })).toBe(true);

    const renewed = await turn.resume({ decisions: [{ type: "reject" }], approvalId: asked.approvalId });
    expect(turn.service.writes).toEqual([]);
    expect(hitl(renewed).actionRequests[0]?.name).toBe("edit_note");
    expect(await turn.store.getApproval(next)).toMatchObject({ status: "pending" });
    const done = await turn.resume({ decisions: [{ type: "reject" }], approvalId: next });
    expect(outcomeOf(done.messages, "e1").code).toBe("approval_rejected");
    expect(turn.service.writes).toEqual([]);
  });

  it("an invalid approvalFormat is a ConfigurationError", () => {
    expect(() =>
      createDocumentGuardrails({
        store: new InMemoryGuardrailStore(),
        userMessageLabel: "user",
        authorize: () => true,
        tools: SCOPED,
        approvalFormat: "hitl" as never,
      }),
    ).toThrow(ConfigurationError);
  });
});
