/**
 * Approvals in LangChain's format (`approvalFormat: "langchain"`) on LangGraph Server, read and
 * answered as Agent Inbox and LangGraph Studio do it through `@langchain/langgraph-sdk`: the pause
 * from the thread (`threads.get(...).interrupts`, `threads.search({ status: "interrupted" })`), from
 * its state (`getState(...).tasks[].interrupts`) and from the run's stream (`updates` and `values`
 * events), answered by a run whose `command.resume` is LangChain's `HITLResponse`. Beside it, the same
 * agent paused by LangChain's own `humanInTheLoopMiddleware` (graph `hitl`): the two interrupts have
 * one shape. Writes are counted from the notes service's log; approvals are read from the store.
 *
 * Also here, the facts docs/deploying.md states about a server: a retried run whose model mints
 * fresh call ids (graph `fresh`), a graph built by hand with `admittedTurn` in its model node
 * (graph `custom`), and a paused thread across a graceful restart of the server.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "@langchain/langgraph-sdk";
import type { HITLRequest } from "langchain";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { admitTurn, turnContext, type TurnInput } from "arkah-agent-guardrails";
import { SqliteGuardrailStore } from "arkah-agent-guardrails/sqlite";
import { launchServer, type LaunchedServer } from "./support/launch.js";
import { EDIT_CALL, NEW_BODY, NOTE_ID, SAVED, storePath, writesIn } from "./support/shared.js";

const USER = "Change my shopping note to oat milk.";
const EDIT_ARGS = { noteId: NOTE_ID, body: NEW_BODY };

interface WireMessage {
  readonly type: string;
  readonly content: unknown;
  readonly status?: string;
  readonly tool_call_id?: string;
  readonly tool_calls?: readonly { readonly id: string; readonly name: string }[];
}

/** An interrupt as the server sends it: the payload and the interrupt's id. */
interface WireInterrupt {
  readonly value: unknown;
  readonly id?: string;
}

let stateDir: string;
let server: LaunchedServer;
let client: Client;
let store: SqliteGuardrailStore;

beforeAll(async () => {
  stateDir = mkdtempSync(join(tmpdir(), "arkah-lgserver-inbox-"));
  server = await launchServer(stateDir);
  client = new Client({ apiUrl: server.url });
  store = SqliteGuardrailStore.open({ path: storePath(stateDir) });
}, 60_000);

afterAll(async () => {
  store.close();
  await server.stop();
  rmSync(stateDir, { recursive: true, force: true });
}, 30_000);

function turn(turnId: string): TurnInput {
  return { scopeId: NOTE_ID, turnId, policyVersion: "v1", segments: [{ label: "user", content: USER }] };
}

/** Admits a new turn and creates a thread for it, as the API layer in front of the server does. */
async function admitted(turnId: string) {
  const input = turn(turnId);
  await admitTurn({ store, input, moderate: () => true });
  const thread = await client.threads.create();
  return { input, threadId: thread.thread_id };
}

const runInput = () => ({ messages: [{ role: "user", content: USER }] });
const messagesOf = (values: unknown) => (values as { messages: WireMessage[] }).messages;
const editResults = (messages: readonly WireMessage[]) =>
  messages.filter((message) => message.type === "tool" && message.tool_call_id === EDIT_CALL).map((message) => [message.status, message.content]);

/** Runs the turn on `graph` until its pause; returns the paused thread's interrupts as a UI reads them. */
async function pause(graph: string, turnId: string) {
  const { input, threadId } = await admitted(turnId);
  await client.runs.wait(threadId, graph, { input: runInput(), context: turnContext(input) });
  const state = await client.threads.getState(threadId);
  const interrupts = state.tasks.flatMap((task) => task.interrupts as WireInterrupt[]);
  expect(interrupts).toHaveLength(1);
  return { input, threadId, request: interrupts[0]?.value as HITLRequest & { approvalId: string } };
}

/** A resume run as Agent Inbox and Studio send it: the same thread and graph, the answer as `command.resume`; the turn again. */
async function answer(graph: string, threadId: string, input: TurnInput, resume: unknown) {
  return messagesOf(await client.runs.wait(threadId, graph, { command: { resume }, context: turnContext(input) }));
}

describe("approvalFormat: \"langchain\" on LangGraph Server, as Agent Inbox and LangGraph Studio read it", () => {
  it("the pause is LangChain's HITLRequest in the thread's interrupts, its state's tasks and the run's stream; shaped as humanInTheLoopMiddleware's own", async () => {
    const before = writesIn(stateDir).length;
    const { input, threadId } = await admitted("inbox-read");

    // A UI that starts the run reads the pause from the stream.
    const streamed: { event: string; data: unknown }[] = [];
    for await (const chunk of client.runs.stream(threadId, "inbox", {
      input: runInput(),
      context: turnContext(input),
      streamMode: ["updates", "values"],
    })) {
      streamed.push({ event: chunk.event, data: chunk.data });
    }
    const [stored] = (await store.listApprovals()).filter((record) => record.status === "pending");
    expect(stored).toMatchObject({ toolName: "edit_note", toolCallId: EDIT_CALL });
    const expected = {
      actionRequests: [{ name: "edit_note", args: EDIT_ARGS, description: "Approve edit_note?" }],
      reviewConfigs: [
        {
          actionName: "edit_note",
          allowedDecisions: ["approve", "edit", "reject"],
          argsSchema: expect.objectContaining({ type: "object", properties: { noteId: { type: "string" }, body: { type: "string" } } }) as unknown,
        },
      ],
      approvalId: stored?.approvalId,
    };
    const fromStream = (event: string) =>
      streamed.flatMap((chunk) => (chunk.event === event ? ((chunk.data as { __interrupt__?: WireInterrupt[] }).__interrupt__ ?? []) : []));
    expect(fromStream("updates").map((interrupt) => interrupt.value)).toEqual([expected]);
    expect(fromStream("values").at(-1)?.value).toEqual(expected);

    // Agent Inbox lists interrupted threads and reads `thread.interrupts`; Studio reads the state's tasks.
    const thread = await client.threads.get(threadId);
    expect(thread.status).toBe("interrupted");
    expect(Object.values(thread.interrupts).flat().map((interrupt) => (interrupt as WireInterrupt).value)).toEqual([expected]);
    const listed = await client.threads.search({ status: "interrupted", metadata: { graph_id: "inbox" } });
    expect(listed.map((found) => found.thread_id)).toContain(threadId);
    const state = await client.threads.getState(threadId);
    expect(state.tasks.flatMap((task) => task.interrupts as WireInterrupt[]).map((interrupt) => interrupt.value)).toEqual([expected]);
    expect(state.next).toEqual(["tools"]);

    // LangChain's own middleware, pausing the same call on the same server: the fields a UI reads
    // (the action request's name, args and description; the review config's action and decisions) are the same.
    const theirs = (await pause("hitl", "inbox-read-langchain")).request;
    expect(Object.keys(theirs).sort()).toEqual(["actionRequests", "reviewConfigs"]);
    expect(theirs.actionRequests).toEqual([{ name: "edit_note", args: EDIT_ARGS, description: expect.any(String) as unknown }]);
    expect(theirs.reviewConfigs).toEqual([{ actionName: "edit_note", allowedDecisions: ["approve", "edit", "reject"] }]);
    expect(writesIn(stateDir)).toHaveLength(before);
  });

  it("approve: { decisions: [{ type: \"approve\" }] } resumes the run; the call writes once, the request is applied, the thread is idle", async () => {
    const before = writesIn(stateDir).length;
    const { input, threadId, request } = await pause("inbox", "inbox-approve");

    const messages = await answer("inbox", threadId, input, { decisions: [{ type: "approve" }] });
    expect(editResults(messages)).toEqual([["success", SAVED]]);
    expect(messages.at(-1)?.content).toBe("Done.");
    expect(writesIn(stateDir).slice(before)).toEqual([EDIT_ARGS]);
    expect((await store.getApproval(request.approvalId))?.status).toBe("applied");
    const thread = await client.threads.get(threadId);
    expect(thread.status).toBe("idle");
    expect(Object.values(thread.interrupts).flat()).toEqual([]);
  });

  it("edit: editedAction with the call's tool writes the edited arguments, once", async () => {
    const before = writesIn(stateDir).length;
    const { input, threadId, request } = await pause("inbox", "inbox-edit");
    const edited = { noteId: NOTE_ID, body: "Buy soy milk" };

    const messages = await answer("inbox", threadId, input, { decisions: [{ type: "edit", editedAction: { name: "edit_note", args: edited } }] });
    expect(editResults(messages)).toEqual([["success", SAVED]]);
    expect(writesIn(stateDir).slice(before)).toEqual([edited]);
    expect(await store.getApproval(request.approvalId)).toMatchObject({ status: "applied", decision: { decision: "edit", args: edited } });
  });

  it("reject: the call is refused with the person's message and nothing is written; the run answers", async () => {
    const before = writesIn(stateDir).length;
    const { input, threadId, request } = await pause("inbox", "inbox-reject");

    const messages = await answer("inbox", threadId, input, { decisions: [{ type: "reject", message: "Keep it as it is." }] });
    const [result] = messages.filter((message) => message.type === "tool" && message.tool_call_id === EDIT_CALL);
    expect(result?.status).toBe("error");
    expect(JSON.parse(String(result?.content))).toMatchObject({ guardrail: "approval_rejected", reviewerMessage: "Keep it as it is." });
    expect(messages.at(-1)?.content).toBe("Done.");
    expect(writesIn(stateDir)).toHaveLength(before);
    expect((await store.getApproval(request.approvalId))?.status).toBe("rejected");
  });

  it("Agent Inbox's own answers (approve with args, ignore) are not LangChain's: refused, nothing written, the request still answerable", async () => {
    const before = writesIn(stateDir).length;
    const { input, threadId, request } = await pause("inbox", "inbox-dialect");

    // What Agent Inbox sends for "accept" on an interrupt it took for the middleware's (its own
    // response with the type renamed, `args` beside it; LangChain's HITLResponse has no `args`), and
    // for "ignore" on one it did not recognise (its own response as is).
    for (const resume of [{ decisions: [{ type: "approve", args: { action: "edit_note", args: EDIT_ARGS } }] }, [{ type: "ignore", args: null }]]) {
      await answer("inbox", threadId, input, resume);
      const state = await client.threads.getState(threadId);
      const [again] = state.tasks.flatMap((task) => task.interrupts as WireInterrupt[]).map((interrupt) => interrupt.value as HITLRequest);
      expect(again?.actionRequests[0]?.description).toMatch(/The last answer was not accepted: the answer was not a decision/);
      expect(writesIn(stateDir)).toHaveLength(before);
      expect((await store.getApproval(request.approvalId))?.status).toBe("pending");
    }

    expect(editResults(await answer("inbox", threadId, input, { decisions: [{ type: "approve" }] }))).toEqual([["success", SAVED]]);
    expect(writesIn(stateDir)).toHaveLength(before + 1);
  });

  it("approved twice, and on a copy of the paused thread: the call still writes once", async () => {
    const before = writesIn(stateDir).length;
    const { input, threadId, request } = await pause("inbox", "inbox-twice");
    // A copy of the paused thread (Studio's "fork"): its checkpoint holds the same pause.
    const copy = await client.threads.copy(threadId);

    const approve = { decisions: [{ type: "approve" }] };
    expect(editResults(await answer("inbox", threadId, input, approve))).toEqual([["success", SAVED]]);
    // A second resume of the answered thread (a double click) runs nothing new.
    await answer("inbox", threadId, input, approve);
    // The copy is answered too: the store replays the call's stored result instead of writing again.
    expect(editResults(await answer("inbox", copy.thread_id, input, approve))).toEqual([["success", SAVED]]);

    expect(writesIn(stateDir).slice(before)).toEqual([EDIT_ARGS]);
    expect((await store.getApproval(request.approvalId))?.status).toBe("applied");
  });
});

describe("what docs/deploying.md says of a server", () => {
  it("a retried run whose model mints fresh call ids: the new edit is mutation_conflict naming the completed change; one write", async () => {
    const before = writesIn(stateDir).length;
    const { input, threadId } = await admitted("fresh-ids");
    const edits = (messages: readonly WireMessage[]) => {
      const ids = new Set(messages.flatMap((message) => (message.tool_calls ?? []).filter((call) => call.name === "edit_note").map((call) => call.id)));
      return messages.filter((message) => message.type === "tool" && ids.has(message.tool_call_id ?? ""));
    };

    const first = edits(messagesOf(await client.runs.wait(threadId, "fresh", { input: runInput(), context: turnContext(input) })));
    expect(first.map((message) => [message.status, message.content])).toEqual([["success", SAVED]]);
    // The client lost the answer and runs the turn again, on a new thread: the provider mints new ids.
    const elsewhere = await client.threads.create();
    const again = edits(messagesOf(await client.runs.wait(elsewhere.thread_id, "fresh", { input: runInput(), context: turnContext(input) })));

    expect(again).toHaveLength(1);
    expect(again[0]?.tool_call_id).not.toBe(first[0]?.tool_call_id);
    expect(again[0]?.status).toBe("error");
    expect(JSON.parse(String(again[0]?.content))).toMatchObject({
      guardrail: "mutation_conflict",
      completed: { tool: "edit_note", status: "success", result: SAVED },
    });
    expect(writesIn(stateDir)).toHaveLength(before + 1);
  });

  it("a graph built by hand (guardTools' twins, admittedTurn in its model node): a run nobody admitted fails before the model; an admitted one writes once", async () => {
    const before = writesIn(stateDir).length;
    const stranger = turn("custom-unadmitted");
    const thread = await client.threads.create();
    const failed = await client.runs.wait(thread.thread_id, "custom", { input: runInput(), context: turnContext(stranger), raiseError: false });
    expect(JSON.parse((failed as { __error__?: { message?: string } }).__error__?.message ?? "null")).toEqual({
      error: "AdmissionError",
      message: "this turn has no admission receipt; call admitTurn first",
    });
    // The model node failed at admittedTurn: no model message, no tool call.
    expect(messagesOf((await client.threads.getState(thread.thread_id)).values).map((message) => message.type)).toEqual(["human"]);

    const { input, threadId } = await admitted("custom-admitted");
    const messages = messagesOf(await client.runs.wait(threadId, "custom", { input: runInput(), context: turnContext(input) }));
    expect(editResults(messages)).toEqual([["success", SAVED]]);
    expect(writesIn(stateDir).slice(before)).toEqual([EDIT_ARGS]);
  });

  it("a thread paused for approval outlives a graceful restart of the server: answered after it, the call writes once", async () => {
    const before = writesIn(stateDir).length;
    const { input, threadId, request } = await pause("inbox", "inbox-restart");

    // The graceful stop `langgraph dev` makes on Ctrl-C: the server writes its storage files.
    await server.stop();
    server = await launchServer(stateDir);
    client = new Client({ apiUrl: server.url });

    const state = await client.threads.getState(threadId);
    expect(state.tasks.flatMap((task) => task.interrupts as WireInterrupt[]).map((interrupt) => interrupt.value)).toEqual([request]);
    const messages = await answer("inbox", threadId, input, { decisions: [{ type: "approve" }] });
    expect(editResults(messages)).toEqual([["success", SAVED]]);
    expect(writesIn(stateDir).slice(before)).toEqual([EDIT_ARGS]);
    expect((await store.getApproval(request.approvalId))?.status).toBe("applied");
  }, 60_000);
});
