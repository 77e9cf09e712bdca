/**
 * The graph module LangGraph Server loads (as `langgraph.json`'s `graphs` would name it): two
 * guarded `createAgent`s over one notes service, `agent` and `approving` (its edits wait for a
 * person). No checkpointer and no fixed turn: the server supplies its own checkpointer, and each
 * run's turn arrives in the run's `context` (`turnContext(turn)`).
 *
 * The guardrail store is a SQLite file the test opens too (it admits turns and reads approvals);
 * every completed write appends one line to a file the test counts. Both live in the directory
 * named by `ARKAH_SERVER_STATE`: the server runs in another process.
 *
 * A third graph, `cancellable`, edits with a body that honours its signal: it tells the test (over
 * the server process's IPC channel) that it started, then waits for the run's abort, when it throws
 * `NoEffectError` (its write service was never called), or for the test's `release-edit`, when it
 * writes. An outer middleware tells the test when the guardrails answered the edit call (its claim
 * settled or released by then).
 *
 * `inbox` pauses its edits in LangChain's approval format (`approvalFormat: "langchain"`), the one
 * Agent Inbox and LangGraph Studio read; `hitl` is the same agent unguarded, paused by LangChain's own
 * `humanInTheLoopMiddleware`, so the test can hold the two interrupts side by side. `fresh` is the
 * plain agent with a model that mints new call ids on every proposal, as a real provider does.
 * `custom` is a graph built by hand (docs/composing.md, "Your own graph"): `guardTools`' twins in a `ToolNode`,
 * and a model node that calls `admittedTurn` before the model.
 */
import { appendFileSync } from "node:fs";
import { HumanMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import { randomUUID } from "node:crypto";
import { createAgent, createMiddleware, humanInTheLoopMiddleware, tool, type AgentMiddleware, type ReactAgent } from "langchain";
import { z } from "zod";
import { END, MessagesAnnotation, START, StateGraph } from "@langchain/langgraph";
import { ToolNode, toolsCondition } from "@langchain/langgraph/prebuilt";
import {
  admittedTurn,
  createDocumentGuardrails,
  guardTools,
  NoEffectError,
  requireApproval,
  type Guardrail,
  type GuardToolsOptions,
  type ToolPolicy,
} from "arkah-agent-guardrails";
import { SqliteGuardrailStore } from "arkah-agent-guardrails/sqlite";
import { ScriptedModel, type ScriptReply } from "arkah-agent-guardrails/testing";
import { EDIT_CALL, NEW_BODY, NOTE_ID, READ_CALL, SAVED, STATE_ENV, storePath, writesPath, type ServerMessage, type TestMessage } from "./shared.js";

export const POLICIES: Record<string, ToolPolicy> = {
  read_note: { kind: "document-read", scope: (args) => args.noteId as string },
  edit_note: { kind: "mutation", scope: (args) => args.noteId as string },
};

/**
 * Answers each model call from the run's own messages (one model serves every thread): read the
 * note, then edit it, then answer. Only the messages after the latest user message count, so a
 * retried turn on the same thread proposes the same calls again.
 */
function respond(messages: readonly BaseMessage[]): ScriptReply {
  return proposeWith(READ_CALL, EDIT_CALL)(messages);
}

/** `respond` with the given call ids: fixed ones, or new ones at every proposal. */
function proposeWith(readId: string | (() => string), editId: string | (() => string)) {
  const id = (given: string | (() => string)) => (typeof given === "string" ? given : given());
  return (messages: readonly BaseMessage[]): ScriptReply => {
    const start = messages.findLastIndex((message) => HumanMessage.isInstance(message));
    const done = new Set(messages.slice(start + 1).flatMap((message) => (ToolMessage.isInstance(message) ? [message.name] : [])));
    if (!done.has("read_note")) return { toolCalls: [{ id: id(readId), name: "read_note", args: { noteId: NOTE_ID } }] };
    if (!done.has("edit_note")) return { toolCalls: [{ id: id(editId), name: "edit_note", args: { noteId: NOTE_ID, body: NEW_BODY } }] };
    return { content: "Done." };
  };
}

/** A provider's ids: new at every call (`call_` and 24 characters, as OpenAI's). */
const freshId = () => `call_${randomUUID().replaceAll("-", "").slice(0, 24)}`;

const dir = process.env[STATE_ENV];
if (dir === undefined) throw new Error(`${STATE_ENV} must name the directory shared with the test`);

const store = SqliteGuardrailStore.open({ path: storePath(dir) });
const writeLog = writesPath(dir);
let body = "Buy milk";

const readNote = tool(({ noteId }) => JSON.stringify({ noteId, body }), {
  name: "read_note",
  description: "Read a note.",
  schema: z.object({ noteId: z.string() }),
});
const editSchema = z.object({ noteId: z.string(), body: z.string() });

function write(noteId: string, next: string): string {
  body = next;
  appendFileSync(writeLog, `${JSON.stringify({ noteId, body: next })}\n`);
  return SAVED;
}

const editNote = tool(({ noteId, body: next }) => write(noteId, next), {
  name: "edit_note",
  description: "Replace a note's body.",
  schema: editSchema,
});

function tell(message: ServerMessage): void {
  process.send?.(message);
}

/** Resolves at the test's next `release-edit`. */
function released(): Promise<void> {
  return new Promise((resolve) => {
    const listen = (message: unknown) => {
      if ((message as Partial<TestMessage> | null)?.type !== "release-edit") return;
      process.off("message", listen);
      resolve();
    };
    process.on("message", listen);
  });
}

const cancellableEdit = tool(
  async ({ noteId, body: next }, config) => {
    const signal = config.signal as AbortSignal | undefined;
    const abortedRun = new Promise<"aborted">((resolve) => {
      if (signal?.aborted === true) resolve("aborted");
      signal?.addEventListener("abort", () => resolve("aborted"), { once: true });
    });
    const go = released().then(() => "released" as const);
    tell({ type: "edit-started" });
    if ((await Promise.race([abortedRun, go])) === "aborted") throw new NoEffectError("the run was cancelled before the write");
    return write(noteId, next);
  },
  { name: "edit_note", description: "Replace a note's body.", schema: editSchema },
);

/** Outside the guardrails: reports when they answered the edit call, and how. */
const editObserver = createMiddleware({
  name: "EditObserver",
  wrapToolCall: async (request, handler) => {
    if (request.toolCall.name !== "edit_note") return handler(request);
    try {
      const result = await handler(request);
      tell({ type: "edit-settled", how: "returned" });
      return result;
    } catch (error) {
      tell({ type: "edit-settled", how: "threw" });
      throw error;
    }
  },
});

function guardedAgent(
  guardrails: readonly Guardrail[],
  edit = editNote,
  outer: AgentMiddleware = createMiddleware({ name: "NoObserver" }),
  { approvalFormat = "arkah", model = new ScriptedModel(respond) }: { approvalFormat?: "arkah" | "langchain"; model?: ScriptedModel } = {},
) {
  return createAgent({
    model,
    tools: [readNote, edit],
    middleware: [
      outer,
      createDocumentGuardrails({
        store,
        userMessageLabel: "user",
        authorize: () => true,
        tools: POLICIES,
        guardrails: [...guardrails],
        approvalFormat,
        logger: { warn: () => undefined },
      }),
    ],
  });
}

export const agent = guardedAgent([]);
export const approving = guardedAgent([requireApproval({ tools: ["edit_note"] })]);
export const cancellable = guardedAgent([], cancellableEdit, editObserver);
export const inbox = guardedAgent([requireApproval({ tools: ["edit_note"] })], editNote, undefined, { approvalFormat: "langchain" });
export const fresh = guardedAgent([], editNote, undefined, { model: new ScriptedModel(proposeWith(freshId, freshId)) });
/** No guardrails: LangChain's own approval middleware, for the shape of its interrupt. */
export const hitl: ReactAgent = createAgent({
  model: new ScriptedModel(respond),
  tools: [readNote, editNote],
  middleware: [humanInTheLoopMiddleware({ interruptOn: { edit_note: true } })],
});

const twinOptions: GuardToolsOptions = { store, userMessageLabel: "user", authorize: () => true, tools: POLICIES, logger: { warn: () => undefined } };
const twins = guardTools([readNote, editNote], twinOptions);
const twinModel = new ScriptedModel(respond).bindTools(twins);
export const custom = new StateGraph(MessagesAnnotation)
  .addNode("agent", async (state, config) => {
    await admittedTurn(state, config, twinOptions);
    return { messages: [await twinModel.invoke(state.messages)] };
  })
  .addNode("tools", new ToolNode(twins, { handleToolErrors: false }))
  .addEdge(START, "agent")
  .addConditionalEdges("agent", toolsCondition, ["tools", END])
  .addEdge("tools", "agent")
  .compile();
