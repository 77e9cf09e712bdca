/**
 * Approvals through the real `createAgent` loop with a `MemorySaver` checkpointer: an `approve`
 * verdict (and `requireApproval`) stores an approval request (its id binds turn, tool, call id and
 * arguments) and pauses the call with a LangGraph interrupt before any claim; the resume value is
 * validated and submitted as the decision, where the first decision wins; on resume the whole
 * wrap chain re-runs and the stored decision is used, so the person is never asked twice and an
 * approval is never reused for other arguments or another call. `reject`
 * consumes no slot; `edit` is a new call, checked again before it is recorded (a refused edit
 * leaves the request answerable); it composes with
 * LangChain's `humanInTheLoopMiddleware` in either order without its reject bug.
 *
 * Side effects are counted by the tools (`service.writes`); detectors count their own runs.
 */
import { AIMessage, HumanMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import { Command, MemorySaver } from "@langchain/langgraph";
import { createAgent, humanInTheLoopMiddleware, type AgentMiddleware } from "langchain";
import { describe, expect, it } from "vitest";
import {
  ConfigurationError,
  createDocumentGuardrails,
  digest,
  InMemoryGuardrailStore,
  requireApproval,
  turnKey,
  type ApprovalRequest,
  type ApprovalSubmission,
  type Authorize,
  type GuardrailStore,
  type Guardrail,
  type GuardrailContext,
  type GuardrailVerdict,
  type TurnInput,
} from "arkah-agent-guardrails";
import { ScriptedModel, type ScriptStep } from "arkah-agent-guardrails/testing";
import {
  admit,
  DocumentService,
  ForwardingStore,
  documentToolFingerprint,
  documentTools,
  outcomeOf,
  read,
  remember,
  rename,
  search,
  TOOL_POLICIES,
  turnInput,
  USER_MESSAGE,
} from "../support/fixtures.js";

// ---------------------------------------------------------------------------------------------
// Local helpers

const ALLOW: GuardrailVerdict = { action: "allow", outcome: "complete", detections: [] };

/** Wraps a guardrail so its detector counts its own invocations. */
function counted(guardrail: Guardrail) {
  const contexts: GuardrailContext[] = [];
  const wrapped: Guardrail = {
    ...guardrail,
    check: (context) => {
      contexts.push(context);
      return guardrail.check(context);
    },
  };
  return {
    guardrail: wrapped,
    contexts,
    runs: (callId?: string) => contexts.filter((context) => callId === undefined || context.toolCall.id === callId).length,
  };
}

function policy(name: string, verdict: (context: GuardrailContext) => GuardrailVerdict, tools?: string[]) {
  return counted({ name, placements: ["tool-args"], ...(tools === undefined ? {} : { tools }), check: verdict });
}

interface Turn {
  store: InMemoryGuardrailStore;
  service: DocumentService;
  input: TurnInput;
}

async function admittedTurn(): Promise<Turn> {
  const turn = { store: new InMemoryGuardrailStore(), service: new DocumentService(), input: turnInput() };
  await admit(turn.store, turn.input);
  return turn;
}

interface AgentOptions {
  script: readonly ScriptStep[];
  guardrails: readonly Guardrail[];
  authorize?: Authorize;
  /** Other middleware, placed before (outer) or after (inner) the document guardrails. */
  before?: readonly AgentMiddleware[];
  after?: readonly AgentMiddleware[];
  version?: "v1" | "v2";
  threadId?: string;
  /** A view of the turn's store for the middleware (default: the store itself). */
  store?: GuardrailStore;
}

/** A real agent over the turn's store and service, with a checkpointer and a thread. */
function approvalAgent(turn: Turn, options: AgentOptions) {
  const model = new ScriptedModel(options.script);
  const guardrails = createDocumentGuardrails({
    input: turn.input,
    store: options.store ?? turn.store,
    userMessageLabel: "user",
    authorize: options.authorize ?? (() => true),
    tools: TOOL_POLICIES,
    guardrails: options.guardrails,
    logger: { warn: () => undefined },
  });
  const agent = createAgent({
    model,
    tools: documentTools(turn.service).all,
    middleware: [...(options.before ?? []), guardrails, ...(options.after ?? [])],
    checkpointer: new MemorySaver(),
    ...(options.version === undefined ? {} : { version: options.version }),
  });
  const config = { configurable: { thread_id: options.threadId ?? "approvals" } };
  return {
    model,
    start: () => agent.invoke({ messages: [new HumanMessage(USER_MESSAGE)] }, config),
    resume: (value: unknown) => agent.invoke(new Command({ resume: value }), config),
  };
}

type RunResult = Awaited<ReturnType<ReturnType<typeof approvalAgent>["start"]>>;

/** The pending interrupt values of a paused run. */
function pending(result: RunResult): unknown[] {
  return (result.__interrupt__ ?? []).map((entry) => entry.value);
}

function approvalRequests(result: RunResult): ApprovalRequest[] {
  return pending(result).filter(
    (value): value is ApprovalRequest => typeof value === "object" && value !== null && (value as { type?: unknown }).type === "arkah.approval",
  );
}

function body(content: string): Record<string, unknown> {
  return JSON.parse(content) as Record<string, unknown>;
}

/** Every tool call of every AIMessage has exactly one ToolMessage answering it. */
function expectEveryCallAnswered(messages: readonly BaseMessage[]) {
  const answered = messages.filter(ToolMessage.isInstance).map((message) => message.tool_call_id);
  const called = messages.filter(AIMessage.isInstance).flatMap((message) => (message.tool_calls ?? []).map((call) => call.id));
  expect(called.length).toBeGreaterThan(0);
  for (const id of called) expect(answered.filter((candidate) => candidate === id)).toHaveLength(1);
}

/** A script step that records whether every tool call was answered when the model was called. */
function checkingStep(seen: { unanswered: string[][] }, then: { content: string } | { toolCalls: ReturnType<typeof rename>[] }): ScriptStep {
  return (messages) => {
    const answered = new Set(messages.filter(ToolMessage.isInstance).map((message) => message.tool_call_id));
    seen.unanswered.push(
      messages
        .filter(AIMessage.isInstance)
        .flatMap((message) => (message.tool_calls ?? []).map((call) => call.id ?? ""))
        .filter((id) => !answered.has(id)),
    );
    return then;
  };
}

/**
 * Answers every pending approval request, each by its own interrupt id, with `decide(request)`,
 * until the run no longer pauses. Works whether requests come one at a time or together.
 */
async function answerEach(
  run: ReturnType<typeof approvalAgent>,
  first: RunResult,
  decide: (request: ApprovalRequest) => unknown,
): Promise<{ result: RunResult; asked: ApprovalRequest[] }> {
  let result = first;
  const asked: ApprovalRequest[] = [];
  for (let round = 0; round < 6 && (result.__interrupt__?.length ?? 0) > 0; round++) {
    const answers: Record<string, unknown> = {};
    for (const entry of result.__interrupt__ ?? []) {
      const request = entry.value as ApprovalRequest;
      asked.push(request);
      // Keyed twice: by interrupt id, and by approvalId, which requests of one step need.
      const answer = decide(request);
      answers[entry.id ?? ""] = typeof answer === "object" && answer !== null ? { ...answer, approvalId: request.approvalId } : answer;
    }
    result = await run.resume(answers);
  }
  expect(result.__interrupt__ ?? []).toEqual([]);
  return { result, asked };
}

const RENAME_ARGS = rename("w1").args;

/** The approval id the middleware derives for `call` in `input`'s turn. */
function approvalIdOf(input: TurnInput, call: { id: string; name: string; args: unknown }): string {
  return digest({
    kind: "arkah.approval",
    v: 1,
    turnKey: turnKey(input),
    toolName: call.name,
    toolFingerprint: documentToolFingerprint(call.name),
    toolCallId: call.id,
    argsDigest: digest(call.args),
    execution: 0,
  });
}

/** The stored approval request for the rename `w1` of `turn`. */
const renameApproval = (turn: Turn, store: GuardrailStore = turn.store) => store.getApproval(approvalIdOf(turn.input, rename("w1")));

// ---------------------------------------------------------------------------------------------

describe("an approve verdict pauses the call with an interrupt before any claim", () => {
  it("the payload names the tool, its arguments, their digest and the reason; nothing ran or was claimed", async () => {
    const turn = await admittedTurn();
    const approval = counted(
      requireApproval({ tools: ["rename_document"], describe: (call) => `Rename the document to ${JSON.stringify(call.args.title)}?` }),
    );
    const run = approvalAgent(turn, {
      script: [{ toolCalls: [read("r1")] }, { toolCalls: [rename("w1")] }, { content: "done" }],
      guardrails: [approval.guardrail],
    });
    const paused = await run.start();

    expect(approvalRequests(paused)).toEqual([
      {
        type: "arkah.approval",
        approvalId: approvalIdOf(turn.input, rename("w1")),
        guardrails: ["approval"],
        toolCallId: "w1",
        tool: "rename_document",
        args: RENAME_ARGS,
        argsDigest: digest(RENAME_ARGS),
        reason: 'Rename the document to "Field notes"?',
      },
    ]);
    expect(turn.service.writes).toBe(0);
    expect(await turn.store.listUnresolved()).toEqual([]);
    // Only the rename asked: the read ran without approval.
    expect(turn.service.reads).toBe(1);
    expect(approval.contexts.map((context) => context.toolCall.id)).toEqual(["w1"]);
    // The request is stored, pending, before the run pauses.
    expect(await renameApproval(turn)).toMatchObject({
      status: "pending",
      turnKey: turnKey(turn.input),
      scopeId: turn.input.scopeId,
      toolCallId: "w1",
      toolName: "rename_document",
      args: RENAME_ARGS,
      argsDigest: digest(RENAME_ARGS),
      guardrails: ["approval"],
      reason: 'Rename the document to "Field notes"?',
    });
  });

  it("approve: the call runs once; on resume no detector runs again and the person is not asked again", async () => {
    const turn = await admittedTurn();
    const before = policy("before", () => ALLOW, ["rename_document"]);
    const approval = counted(requireApproval({ tools: ["rename_document"] }));
    const run = approvalAgent(turn, {
      script: [{ toolCalls: [read("r1")] }, { toolCalls: [rename("w1")] }, { content: "done" }],
      guardrails: [before.guardrail, approval.guardrail],
    });
    await run.start();
    const resumed = await run.resume({ decision: "approve" });

    expect(resumed.__interrupt__).toBeUndefined();
    expect(outcomeOf(resumed.messages, "w1")).toMatchObject({ status: "success", content: '{"title":"Field notes","revision":1}' });
    expect(turn.service.writes).toBe(1);
    expect(before.runs("w1")).toBe(1);
    expect(approval.runs("w1")).toBe(1);
    // The execution it allowed used it.
    expect(await renameApproval(turn)).toMatchObject({ status: "applied", decision: { decision: "approve" } });
  });

  it("a transport retry of the approved call is not asked again: the recorded decision is used", async () => {
    const turn = await admittedTurn();
    const approval = counted(requireApproval({ tools: ["rename_document"] }));
    const script = (readId: string) => [{ toolCalls: [read(readId)] }, { toolCalls: [rename("w1")] }, { content: "done" }];
    const first = approvalAgent(turn, { script: script("r1"), guardrails: [approval.guardrail], threadId: "first" });
    await first.start();
    await first.resume({ decision: "approve" });
    expect(turn.service.writes).toBe(1);

    // Another thread, same turn, same call: no interrupt, the completed mutation replays.
    const retry = approvalAgent(turn, { script: script("r2"), guardrails: [approval.guardrail], threadId: "retry" });
    const replayed = await retry.start();
    expect(pending(replayed)).toEqual([]);
    expect(outcomeOf(replayed.messages, "w1")).toMatchObject({ status: "success", content: '{"title":"Field notes","revision":1}' });
    expect(turn.service.writes).toBe(1);
    expect(approval.runs("w1")).toBe(1);
  });
});

describe("an approval is never reused for other arguments or another call", () => {
  it("the same call id with other arguments is asked again, under the new digest", async () => {
    const turn = await admittedTurn();
    const approval = requireApproval({ tools: ["rename_document"] });
    const first = approvalAgent(turn, {
      script: [{ toolCalls: [read("r1")] }, { toolCalls: [rename("w1", "Field notes")] }, { content: "done" }],
      guardrails: [approval],
      threadId: "first",
    });
    await first.start();
    await first.resume({ decision: "approve" });

    const changed = approvalAgent(turn, {
      script: [{ toolCalls: [read("r2")] }, { toolCalls: [rename("w1", "Other title", 1)] }, { content: "done" }],
      guardrails: [approval],
      threadId: "changed",
    });
    const paused = await changed.start();
    const otherArgs = rename("w1", "Other title", 1).args;
    expect(approvalRequests(paused)).toMatchObject([{ toolCallId: "w1", args: otherArgs, argsDigest: digest(otherArgs) }]);
    expect(turn.service.writes).toBe(1);
  });

  it("another call with the same arguments is asked again", async () => {
    const turn = await admittedTurn();
    const approval = counted(requireApproval({ tools: ["remember"] }));
    const run = approvalAgent(turn, {
      script: [{ toolCalls: [remember("m1")] }, { toolCalls: [remember("m2")] }, { content: "done" }],
      guardrails: [approval.guardrail],
    });
    const first = await run.start();
    expect(approvalRequests(first).map((request) => request.toolCallId)).toEqual(["m1"]);
    const second = await run.resume({ decision: "approve" });
    expect(approvalRequests(second).map((request) => request.toolCallId)).toEqual(["m2"]);
    const done = await run.resume({ decision: "reject" });
    expect(outcomeOf(done.messages, "m1")).toMatchObject({ status: "success", content: "Preference saved" });
    expect(outcomeOf(done.messages, "m2")).toMatchObject({ status: "error", code: "approval_rejected" });
  });

  it("two approving guardrails on one call ask once, naming both, and a reject stands", async () => {
    const turn = await admittedTurn();
    const manager = counted(requireApproval({ tools: ["rename_document"], name: "manager", describe: () => "Manager sign-off." }));
    const legal = counted(requireApproval({ tools: ["rename_document"], name: "legal", describe: () => "Legal sign-off." }));
    const run = approvalAgent(turn, {
      script: [{ toolCalls: [read("r1")] }, { toolCalls: [rename("w1")] }, { content: "done" }],
      guardrails: [manager.guardrail, legal.guardrail],
    });
    const { result, asked } = await answerEach(run, await run.start(), () => ({
      decision: "reject",
      message: "Legal says no.",
    }));

    // One request for the call: a resume value can only ever answer the request it was given for.
    expect(asked.map((request) => [request.guardrails, request.toolCallId, request.reason])).toEqual([
      [["manager", "legal"], "w1", "Manager sign-off. Legal sign-off."],
    ]);
    expect(outcomeOf(result.messages, "w1")).toMatchObject({ status: "error", code: "approval_rejected" });
    expect(turn.service.writes).toBe(0);
    expect(await renameApproval(turn)).toMatchObject({
      status: "rejected",
      guardrails: ["manager", "legal"],
      decision: { decision: "reject", message: "Legal says no." },
    });
  });

  it("the approval of one call in a step is not reused for its sibling", async () => {
    const turn = await admittedTurn();
    const run = approvalAgent(turn, {
      script: [{ toolCalls: [remember("m1"), search("s1")] }, { content: "done" }],
      guardrails: [requireApproval({ tools: ["remember", "search_sources"] })],
    });
    const { result, asked } = await answerEach(run, await run.start(), (request) =>
      request.toolCallId === "m1" ? { decision: "approve" } : { decision: "reject", message: "not this one" },
    );

    expect(asked.map((request) => request.toolCallId).sort()).toEqual(["m1", "s1"]);
    expect(outcomeOf(result.messages, "m1")).toMatchObject({ status: "success", content: "Preference saved" });
    expect(outcomeOf(result.messages, "s1")).toMatchObject({ status: "error", code: "approval_rejected" });
  });
});

describe("the stored request decides: the first decision wins", () => {
  it("a decision stored while the run is paused wins: on resume the stored decision is used, not the resume value", async () => {
    const turn = await admittedTurn();
    const run = approvalAgent(turn, {
      script: [{ toolCalls: [read("r1")] }, { toolCalls: [rename("w1")] }, { content: "done" }],
      guardrails: [requireApproval({ tools: ["rename_document"] })],
    });
    const [request] = approvalRequests(await run.start());
    // An operator decides through the store while the run is paused.
    const decided = await turn.store.decideApproval({
      approvalId: request?.approvalId ?? "",
      decision: { decision: "approve" },
      operatorRef: "ops-1",
      decidedAt: new Date().toISOString(),
    });
    expect(decided.decided).toBe(true);
    const done = await run.resume({ decision: "reject", message: "too late" });

    expect(outcomeOf(done.messages, "w1")).toMatchObject({ status: "success", content: '{"title":"Field notes","revision":1}' });
    expect(turn.service.writes).toBe(1);
    expect(await renameApproval(turn)).toMatchObject({ status: "applied", operatorRef: "ops-1" });
    // The request was decided when the call re-ran, so nobody was asked and nothing else was submitted.
    const steps = (await turn.store.readAudit()).filter((event) => event.decision === "approval");
    expect(steps.map((event) => [event.action, event.operatorRef])).toEqual([
      ["requested", undefined],
      ["approve", "ops-1"],
      ["applied", undefined],
    ]);
  });

  it("a resume value that loses the race to another decision: the winner's decision is used, the loser audited", async () => {
    const turn = await admittedTurn();
    /** Another reviewer's rejection lands just before the middleware submits the resume value. */
    class RacedStore extends ForwardingStore {
      override async decideApproval(input: Parameters<GuardrailStore["decideApproval"]>[0]) {
        await this.inner.decideApproval({ ...input, decision: { decision: "reject", message: "Beaten to it." }, operatorRef: "reviewer-2" });
        return this.inner.decideApproval(input);
      }
    }
    const run = approvalAgent(turn, {
      script: [{ toolCalls: [read("r1")] }, { toolCalls: [rename("w1")] }, { content: "done" }],
      guardrails: [requireApproval({ tools: ["rename_document"] })],
      store: new RacedStore(turn.store),
    });
    await run.start();
    const done = await run.resume({ decision: "approve" });

    expect(body(outcomeOf(done.messages, "w1").content)).toMatchObject({
      guardrail: "approval_rejected",
      reviewerMessage: "Beaten to it.",
    });
    expect(turn.service.writes).toBe(0);
    const steps = (await turn.store.readAudit()).filter((event) => event.decision === "approval");
    expect(steps.map((event) => [event.action, event.code, event.operatorRef])).toEqual([
      ["requested", undefined, undefined],
      ["reject", undefined, "reviewer-2"],
      ["decision_refused", "already_decided", undefined],
    ]);
  });

  it("a request decided before the call is made is used without asking", async () => {
    const turn = await admittedTurn();
    const submission: ApprovalSubmission = {
      approvalId: approvalIdOf(turn.input, rename("w1")),
      turnKey: turnKey(turn.input),
      scopeId: turn.input.scopeId,
      toolCallId: "w1",
      toolName: "rename_document",
      toolFingerprint: documentToolFingerprint("rename_document"),
      argsDigest: digest(RENAME_ARGS),
      args: structuredClone(RENAME_ARGS) as ApprovalSubmission["args"],
      guardrails: ["approval"],
      requestedAt: new Date().toISOString(),
    };
    await turn.store.requestApproval(submission);
    await turn.store.decideApproval({
      approvalId: submission.approvalId,
      decision: { decision: "reject", message: "Decided ahead." },
      decidedAt: new Date().toISOString(),
    });
    const run = approvalAgent(turn, {
      script: [{ toolCalls: [read("r1")] }, { toolCalls: [rename("w1")] }, { content: "done" }],
      guardrails: [requireApproval({ tools: ["rename_document"] })],
    });
    const done = await run.start();

    expect(pending(done)).toEqual([]);
    expect(body(outcomeOf(done.messages, "w1").content)).toMatchObject({
      guardrail: "approval_rejected",
      reviewerMessage: "Decided ahead.",
    });
    expect(turn.service.writes).toBe(0);
  });

  it("an applied request does not cover another execution: the person is asked again, and that answer decides", async () => {
    const turn = await admittedTurn();
    const first = approvalAgent(turn, {
      script: [{ toolCalls: [read("r1")] }, { toolCalls: [rename("w1")] }, { content: "done" }],
      guardrails: [requireApproval({ tools: ["rename_document"] })],
      threadId: "first",
    });
    const [request] = approvalRequests(await first.start());
    // Someone else's execution used this approval while the run was paused.
    await turn.store.decideApproval({ approvalId: request?.approvalId ?? "", decision: { decision: "approve" }, decidedAt: new Date().toISOString() });
    expect(await turn.store.applyApproval({ approvalId: request?.approvalId ?? "", appliedAt: new Date().toISOString() })).toBe(true);
    const again = await first.resume({ decision: "approve" });

    // The answer meant for the used request is not taken for the new one, which must be keyed.
    const [renewed] = approvalRequests(again);
    expect(renewed?.approvalId).not.toBe(request?.approvalId);
    expect((renewed as { problem?: string } | undefined)?.problem).toMatch(/approvalId/);
    expect(turn.service.writes).toBe(0);
    expect(await turn.store.listUnresolved()).toEqual([]);
    const done = await first.resume({ decision: "reject", approvalId: renewed?.approvalId });
    expect(outcomeOf(done.messages, "w1")).toMatchObject({ status: "error", code: "approval_rejected" });
    expect(turn.service.writes).toBe(0);
  });

  it("an expired request is never put to a person again: the call is refused approval_expired", async () => {
    const turn = await admittedTurn();
    const first = approvalAgent(turn, {
      script: [{ toolCalls: [read("r1")] }, { toolCalls: [rename("w1")] }, { content: "done" }],
      guardrails: [requireApproval({ tools: ["rename_document"] })],
    });
    await first.start();
    expect(await turn.store.expireApprovals({ olderThan: "2999-01-01T00:00:00.000Z" })).toEqual({ expired: 1 });
    const done = await first.resume({ decision: "approve" });

    expect(outcomeOf(done.messages, "w1")).toMatchObject({ status: "error", code: "approval_expired" });
    expect(turn.service.writes).toBe(0);
    expect((await renameApproval(turn))?.status).toBe("expired");
    expect((await turn.store.readAudit()).filter((event) => event.decision === "approval").map((event) => event.action)).toEqual([
      "requested",
      "expired",
    ]);
  });
});

describe("reject", () => {
  it("answers approval_rejected with the reviewer's message and consumes no slot", async () => {
    const turn = await admittedTurn();
    const run = approvalAgent(turn, {
      script: [{ toolCalls: [read("r1")] }, { toolCalls: [rename("w1", "FIELD NOTES")] }, { toolCalls: [rename("w2")] }, { content: "done" }],
      guardrails: [requireApproval({ tools: ["rename_document"] })],
    });
    await run.start();
    const second = await run.resume({ decision: "reject", message: "No capitals, please." });
    expect(approvalRequests(second).map((request) => request.toolCallId)).toEqual(["w2"]);
    const done = await run.resume({ decision: "approve" });

    const rejected = outcomeOf(done.messages, "w1");
    expect(rejected.status).toBe("error");
    expect(body(rejected.content)).toMatchObject({ guardrail: "approval_rejected", reviewerMessage: "No capitals, please." });
    expect(outcomeOf(done.messages, "w2")).toMatchObject({ status: "success", content: '{"title":"Field notes","revision":1}' });
    expect(turn.service.writes).toBe(1);
    expect(turn.service.title).toBe("Field notes");
  });

  it.each(["v1", "v2"] as const)(
    "(%s) a rejected call does not drop or leave unanswered the other calls of its step",
    async (version) => {
      const turn = await admittedTurn();
      const seen = { unanswered: [] as string[][] };
      const run = approvalAgent(turn, {
        script: [{ toolCalls: [read("r1")] }, { toolCalls: [rename("w1"), remember("m1")] }, checkingStep(seen, { content: "done" })],
        guardrails: [requireApproval({ tools: ["rename_document"] })],
        version,
      });
      const paused = await run.start();
      expect(approvalRequests(paused).map((request) => request.toolCallId)).toEqual(["w1"]);
      const done = await run.resume({ decision: "reject" });

      expect(outcomeOf(done.messages, "w1")).toMatchObject({ status: "error", code: "approval_rejected" });
      expect(outcomeOf(done.messages, "m1")).toMatchObject({ status: "success", content: "Preference saved" });
      expectEveryCallAnswered(done.messages);
      expect(seen.unanswered).toEqual([[]]);
      expect(run.model.calls).toBe(3);
      expect(turn.service.writes).toBe(0);
    },
  );
});

describe("edit", () => {
  it("edited arguments are checked again and run; the claim is made for them", async () => {
    const turn = await admittedTurn();
    const titles = policy("titles", () => ALLOW, ["rename_document"]);
    const run = approvalAgent(turn, {
      script: [{ toolCalls: [read("r1")] }, { toolCalls: [rename("w1", "Feild notes")] }, { content: "done" }],
      guardrails: [titles.guardrail, requireApproval({ tools: ["rename_document"] })],
    });
    await run.start();
    const edited = { title: "Field notes (edited)", expectedRevision: 0 };
    const done = await run.resume({ decision: "edit", args: edited });

    expect(outcomeOf(done.messages, "w1")).toMatchObject({
      status: "success",
      content: '{"title":"Field notes (edited)","revision":1}',
    });
    expect(turn.service.writes).toBe(1);
    expect(turn.service.title).toBe("Field notes (edited)");
    // The policy saw the model's arguments once and the person's once.
    expect(titles.contexts.map((context) => context.toolCall.args)).toEqual([rename("w1", "Feild notes").args, edited]);
    const executed = (await turn.store.readAudit()).find((event) => event.decision === "executed" && event.toolCallId === "w1");
    expect(executed?.argsDigest).toBe(digest(edited));
  });

  /** The request asked again after a refused edit: the same request, pending, with the stage's code in its problem. */
  async function refusedEdit(run: ReturnType<typeof approvalAgent>, turn: Turn, args: Record<string, unknown>, code: string) {
    const again = await run.resume({ decision: "edit", args });
    const [reported] = approvalRequests(again);
    expect(reported).toMatchObject({ toolCallId: "w1", approvalId: approvalIdOf(turn.input, rename("w1")) });
    expect((reported as { problem?: string } | undefined)?.problem).toContain(`the edited arguments were refused (${code})`);
    expect(turn.service.writes).toBe(0);
    expect(await renameApproval(turn)).toMatchObject({ status: "pending" });
    expect(await turn.store.listUnresolved()).toEqual([]);
    const trail = (await turn.store.readAudit()).filter((event) => event.decision === "approval").map((event) => [event.action, event.code]);
    expect(trail).toEqual([["requested", undefined], ["answer_refused", code]]);
    // The request stays answerable: an approval of the call as asked runs it.
    const done = await run.resume({ decision: "approve" });
    expect(outcomeOf(done.messages, "w1")).toMatchObject({ status: "success" });
    expect(turn.service.writes).toBe(1);
    expect(turn.service.title).toBe("Field notes");
  }

  it("edited arguments that fail the tool's schema are refused invalid_arguments; the request stays answerable", async () => {
    const turn = await admittedTurn();
    const run = approvalAgent(turn, {
      script: [{ toolCalls: [read("r1")] }, { toolCalls: [rename("w1")] }, { content: "done" }],
      guardrails: [requireApproval({ tools: ["rename_document"] })],
    });
    await run.start();
    await refusedEdit(run, turn, { title: "" }, "invalid_arguments");
  });

  it("edited arguments that a policy guardrail denies are refused with its code; the request stays answerable", async () => {
    const turn = await admittedTurn();
    const secrets = policy(
      "no-secrets",
      (context) =>
        String((context.toolCall.args as { title?: unknown }).title).includes("secret")
          ? { action: "deny", outcome: "complete", code: "secret_title", detections: [{ rule: "secret", detected: true }] }
          : ALLOW,
      ["rename_document"],
    );
    const run = approvalAgent(turn, {
      script: [{ toolCalls: [read("r1")] }, { toolCalls: [rename("w1")] }, { content: "done" }],
      guardrails: [requireApproval({ tools: ["rename_document"] }), secrets.guardrail],
    });
    await run.start();
    // Every guardrail runs before a person is asked: a call a later one denies is never put to them.
    expect(secrets.runs()).toBe(1);
    await refusedEdit(run, turn, { title: "the secret plan", expectedRevision: 0 }, "secret_title");
    expect(secrets.contexts.map((context) => (context.toolCall.args as { title: string }).title)).toEqual([
      "Field notes",
      "the secret plan",
    ]);
  });

  it("edited arguments that authorize refuses are refused unauthorized; the request stays answerable", async () => {
    const turn = await admittedTurn();
    const run = approvalAgent(turn, {
      script: [{ toolCalls: [read("r1")] }, { toolCalls: [rename("w1")] }, { content: "done" }],
      guardrails: [requireApproval({ tools: ["rename_document"] })],
      authorize: (call) => (call.args as { title?: unknown }).title !== "Forbidden",
    });
    await run.start();
    await refusedEdit(run, turn, { title: "Forbidden", expectedRevision: 0 }, "unauthorized");
  });
});

describe("an invalid resume value", () => {
  it.each<[string, unknown]>([
    ["an unknown decision", { decision: "maybe" }],
    ["a bare string", "yes"],
    ["an approve with extra keys", { decision: "approve", args: { title: "x" } }],
    ["an edit without args", { decision: "edit" }],
    ["another request's approvalId", { decision: "approve", approvalId: "0".repeat(64) }],
  ])("%s is reported in a new interrupt; the request stays pending and a valid answer then decides it", async (_name, value) => {
    const turn = await admittedTurn();
    const run = approvalAgent(turn, {
      script: [{ toolCalls: [read("r1")] }, { toolCalls: [rename("w1")] }, { content: "done" }],
      guardrails: [requireApproval({ tools: ["rename_document"] })],
    });
    await run.start();
    const again = await run.resume(value);

    const [reported] = approvalRequests(again);
    expect(reported).toMatchObject({ toolCallId: "w1", approvalId: approvalIdOf(turn.input, rename("w1")) });
    expect((reported as { problem?: string } | undefined)?.problem).toMatch(/decision|approvalId/);
    expect(turn.service.writes).toBe(0);
    const stored = await renameApproval(turn);
    expect(stored?.status).toBe("pending");
    expect(stored).not.toHaveProperty("decision");

    // The thread is not poisoned: the next answer is taken.
    const done = await run.resume({ decision: "approve" });
    expect(outcomeOf(done.messages, "w1")).toMatchObject({ status: "success" });
    expect(turn.service.writes).toBe(1);
    expect((await turn.store.readAudit()).filter((event) => event.decision === "approval").map((event) => event.action)).toEqual([
      "requested",
      "answer_refused",
      "approve",
      "applied",
    ]);
  });

  it("requireApproval with no tools is a ConfigurationError", () => {
    expect(() => requireApproval({ tools: [] })).toThrow(ConfigurationError);
  });
});

describe("requireApproval with when: only the calls it matches wait for a person", () => {
  const URGENT = (args: Readonly<Record<string, unknown>>) => String(args.title).includes("URGENT");

  /** The recorded verdict of the approval guardrail on the rename `call` of `turn`. */
  const approvalVerdict = (turn: Turn, call = rename("w1")) =>
    turn.store.getVerdict({
      turnKey: turnKey(turn.input),
      toolCallId: call.id,
      toolName: call.name,
      toolFingerprint: documentToolFingerprint(call.name),
      guardrail: "approval",
      argsDigest: digest(call.args),
    });

  it("a matching call pauses and runs once approved; the condition got the parsed arguments and the turn", async () => {
    const turn = await admittedTurn();
    const asked: unknown[] = [];
    const approval = requireApproval({
      tools: ["rename_document"],
      when: (args, of) => {
        asked.push({ args, of });
        return URGENT(args);
      },
    });
    const urgent = rename("w1", "URGENT notes");
    const run = approvalAgent(turn, { script: [{ toolCalls: [read("r1")] }, { toolCalls: [urgent] }, { content: "done" }], guardrails: [approval] });

    const paused = await run.start();
    expect(approvalRequests(paused)).toMatchObject([{ toolCallId: "w1", args: urgent.args }]);
    expect(turn.service.writes).toBe(0);
    expect(asked).toEqual([{ args: urgent.args, of: { scopeId: turn.input.scopeId, turnId: turn.input.turnId, turnKey: turnKey(turn.input) } }]);
    expect(await approvalVerdict(turn, urgent)).toMatchObject({ verdict: { action: "approve", outcome: "complete" } });

    const done = await run.resume({ decision: "approve" });
    expect(outcomeOf(done.messages, "w1")).toMatchObject({ status: "success" });
    expect(turn.service.writes).toBe(1);
    // The resumed wrap chain read the recorded verdict: the condition was not asked again.
    expect(asked).toHaveLength(1);
  });

  it("a call it does not match runs without a person: no interrupt, no request, one write", async () => {
    const turn = await admittedTurn();
    const run = approvalAgent(turn, {
      script: [{ toolCalls: [read("r1")] }, { toolCalls: [rename("w1")] }, { content: "done" }],
      guardrails: [requireApproval({ tools: ["rename_document"], when: URGENT })],
    });

    const result = await run.start();
    expect(pending(result)).toEqual([]);
    expect(outcomeOf(result.messages, "w1")).toMatchObject({ status: "success", content: '{"title":"Field notes","revision":1}' });
    expect(turn.service.writes).toBe(1);
    expect(await turn.store.listApprovals()).toEqual([]);
    expect(await approvalVerdict(turn)).toMatchObject({ verdict: { action: "allow", outcome: "complete" } });
  });

  it.each([
    ["throws", () => {
      throw new Error("lookup failed");
    }],
    ["rejects", () => Promise.reject(new Error("lookup failed"))],
    ["answers a string", () => "yes" as unknown as boolean],
    ["answers nothing", () => undefined as unknown as boolean],
  ])("a condition that %s asks a person (a partial verdict); nothing runs until approved", async (_name, when) => {
    const turn = await admittedTurn();
    const run = approvalAgent(turn, {
      script: [{ toolCalls: [read("r1")] }, { toolCalls: [rename("w1")] }, { content: "done" }],
      guardrails: [requireApproval({ tools: ["rename_document"], when })],
    });

    const paused = await run.start();
    expect(approvalRequests(paused)).toMatchObject([{ toolCallId: "w1", guardrails: ["approval"] }]);
    expect(turn.service.writes).toBe(0);
    expect(await approvalVerdict(turn)).toMatchObject({ verdict: { action: "approve", outcome: "partial" } });
    await run.resume({ decision: "approve" });
    expect(turn.service.writes).toBe(1);
  });

  it("a condition that would answer otherwise later does not change the recorded verdict on resume", async () => {
    const turn = await admittedTurn();
    let answers = 0;
    // true the first time, false after: a clock, a feature flag, a service that changed its mind.
    const approval = requireApproval({ tools: ["rename_document"], when: () => answers++ === 0 });
    const run = approvalAgent(turn, { script: [{ toolCalls: [read("r1")] }, { toolCalls: [rename("w1")] }, { content: "done" }], guardrails: [approval] });

    expect(approvalRequests(await run.start())).toHaveLength(1);
    const rejected = await run.resume({ decision: "reject" });
    expect(outcomeOf(rejected.messages, "w1").code).toBe("approval_rejected");
    expect(turn.service.writes).toBe(0);
    expect(answers).toBe(1);
  });

  it("an approver's edit is checked by the condition too, on its parsed arguments, and runs as edited", async () => {
    const turn = await admittedTurn();
    const asked: unknown[] = [];
    const approval = requireApproval({
      tools: ["rename_document"],
      when: (args) => {
        asked.push(args);
        return URGENT(args);
      },
    });
    const urgent = rename("w1", "URGENT notes");
    const run = approvalAgent(turn, { script: [{ toolCalls: [read("r1")] }, { toolCalls: [urgent] }, { content: "done" }], guardrails: [approval] });
    await run.start();
    const edited = { title: "Calm notes", expectedRevision: 0 };

    const done = await run.resume({ decision: "edit", args: edited });
    expect(outcomeOf(done.messages, "w1")).toMatchObject({ status: "success", content: '{"title":"Calm notes","revision":1}' });
    expect(asked).toEqual([urgent.args, edited]);
    expect(turn.service.writes).toBe(1);
  });

  it("when that is not a function is a ConfigurationError", () => {
    expect(() => requireApproval({ tools: ["rename_document"], when: true as never })).toThrow(ConfigurationError);
  });
});

describe("composition with humanInTheLoopMiddleware, in either array order", () => {
  const ORDERS = ["guardrails first", "HITL first"] as const;
  const place = (order: (typeof ORDERS)[number], hitl: AgentMiddleware) =>
    order === "HITL first" ? { before: [hitl] } : { after: [hitl] };

  it.each(ORDERS)("(%s) HITL asks first, then our approval; one write", async (order) => {
    const turn = await admittedTurn();
    const run = approvalAgent(turn, {
      script: [{ toolCalls: [read("r1")] }, { toolCalls: [rename("w1")] }, { content: "done" }],
      guardrails: [requireApproval({ tools: ["rename_document"] })],
      ...place(order, humanInTheLoopMiddleware({ interruptOn: { rename_document: true } })),
    });
    const hitlPaused = await run.start();
    expect(pending(hitlPaused)).toMatchObject([{ actionRequests: [{ name: "rename_document", args: RENAME_ARGS }] }]);
    expect(turn.service.writes).toBe(0);

    const oursPaused = await run.resume({ decisions: [{ type: "approve" }] });
    expect(approvalRequests(oursPaused)).toMatchObject([{ toolCallId: "w1", argsDigest: digest(RENAME_ARGS) }]);
    expect(turn.service.writes).toBe(0);

    const done = await run.resume({ decision: "approve" });
    expect(outcomeOf(done.messages, "w1").status).toBe("success");
    expect(turn.service.writes).toBe(1);
  });

  it.each(ORDERS)("(%s) our approval is asked about the arguments HITL's reviewer edited", async (order) => {
    const turn = await admittedTurn();
    const run = approvalAgent(turn, {
      script: [{ toolCalls: [read("r1")] }, { toolCalls: [rename("w1")] }, { content: "done" }],
      guardrails: [requireApproval({ tools: ["rename_document"] })],
      ...place(order, humanInTheLoopMiddleware({ interruptOn: { rename_document: true } })),
    });
    await run.start();
    const editedArgs = { title: "Reviewed title", expectedRevision: 0 };
    const oursPaused = await run.resume({
      decisions: [{ type: "edit", editedAction: { name: "rename_document", args: editedArgs } }],
    });
    expect(approvalRequests(oursPaused)).toMatchObject([{ toolCallId: "w1", args: editedArgs, argsDigest: digest(editedArgs) }]);
    await run.resume({ decision: "approve" });
    expect(turn.service.writes).toBe(1);
    expect(turn.service.title).toBe("Reviewed title");
  });

  it.each(ORDERS)(
    "(%s) HITL approves one call, we reject its sibling: every call of the step is answered and the loop goes on",
    async (order) => {
      const turn = await admittedTurn();
      const seen = { unanswered: [] as string[][] };
      const run = approvalAgent(turn, {
        script: [{ toolCalls: [read("r1")] }, { toolCalls: [rename("w1"), remember("m1")] }, checkingStep(seen, { content: "done" })],
        guardrails: [requireApproval({ tools: ["rename_document"] })],
        ...place(order, humanInTheLoopMiddleware({ interruptOn: { remember: true } })),
      });
      const hitlPaused = await run.start();
      expect(pending(hitlPaused)).toMatchObject([{ actionRequests: [{ name: "remember" }] }]);
      const oursPaused = await run.resume({ decisions: [{ type: "approve" }] });
      expect(approvalRequests(oursPaused).map((request) => request.toolCallId)).toEqual(["w1"]);
      const done = await run.resume({ decision: "reject", message: "Not today." });

      expect(outcomeOf(done.messages, "w1")).toMatchObject({ status: "error", code: "approval_rejected" });
      expect(outcomeOf(done.messages, "m1")).toMatchObject({ status: "success", content: "Preference saved" });
      expectEveryCallAnswered(done.messages);
      expect(seen.unanswered).toEqual([[]]);
      expect(turn.service.writes).toBe(0);
    },
  );
});
