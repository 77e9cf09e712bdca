/**
 * The guarded agent on LangGraph Server: `@langchain/langgraph-api`'s in-memory server, started
 * the way `langgraph dev` starts it (`startServer` in a child process under tsx), serving
 * `support/graph.ts`, driven over HTTP by `@langchain/langgraph-sdk`'s `Client`. The test is the
 * API layer in front of the server: it admits each turn (`admitTurn`) before it creates a run and
 * passes the turn in the run's `context`. Writes are counted from the notes service's own log;
 * approvals and claims are read from the guardrail store the server's graph writes. The
 * `cancellable` graph's edit reports over IPC when its body started and when the guardrails
 * answered it, so a cancel lands inside the body and its claim is read only once settled.
 */
import { fork, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { Client } from "@langchain/langgraph-sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { admitTurn, turnContext, turnKey, turnThreadId, type ApprovalRequest, type TurnInput } from "arkah-agent-guardrails";
import { SqliteGuardrailStore } from "arkah-agent-guardrails/sqlite";
import { EDIT_CALL, NEW_BODY, NOTE_ID, SAVED, STATE_ENV, storePath, writesIn, type ServerMessage, type TestMessage } from "./support/shared.js";

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, "../..");
const USER = "Change my shopping note to oat milk.";

interface WireMessage {
  readonly type: string;
  readonly content: unknown;
  readonly name?: string;
  readonly status?: string;
  readonly tool_call_id?: string;
}

let stateDir: string;
let server: ChildProcess;
let serverLog = "";
let client: Client;
let store: SqliteGuardrailStore;

/** What the graph module told the test and nobody took yet, in order. */
const inbox: ServerMessage[] = [];
let delivered: (() => void) | undefined;

function receive(message: unknown): void {
  if (typeof message !== "object" || message === null || !("type" in message)) return;
  inbox.push(message as ServerMessage);
  delivered?.();
}

/** The graph module's next message of this type (taken from the inbox), when it comes. */
async function nextMessage<T extends ServerMessage["type"]>(type: T): Promise<Extract<ServerMessage, { type: T }>> {
  for (;;) {
    const at = inbox.findIndex((message) => message.type === type);
    if (at >= 0) return inbox.splice(at, 1)[0] as Extract<ServerMessage, { type: T }>;
    await new Promise<void>((resolve) => {
      delivered = resolve;
    });
  }
}

function tellServer(message: TestMessage): void {
  server.send(message);
}

/** Starts the server; rejects (the suite fails) if the process exits before it listens. */
function startServer(): Promise<string> {
  server = fork(join(here, "support", "serve.ts"), [stateDir], {
    cwd: root,
    execArgv: ["--import", "tsx"],
    env: { ...process.env, [STATE_ENV]: stateDir, LOG_LEVEL: "warn", LANGSMITH_TRACING: "false", LANGCHAIN_TRACING_V2: "false" },
    stdio: ["ignore", "pipe", "pipe", "ipc"],
  });
  const collect = (chunk: Buffer) => {
    serverLog += chunk.toString("utf8");
  };
  server.stdout?.on("data", collect);
  server.stderr?.on("data", collect);
  server.on("message", receive);
  return new Promise((resolveUrl, reject) => {
    server.once("message", (message) => {
      resolveUrl((message as { url: string }).url);
    });
    server.once("exit", (code, signal) => {
      reject(new Error(`LangGraph Server exited (code ${String(code)}, signal ${String(signal)}) before listening\n${serverLog}`));
    });
  });
}

beforeAll(async () => {
  stateDir = mkdtempSync(join(tmpdir(), "arkah-lgserver-"));
  const url = await startServer();
  client = new Client({ apiUrl: url });
  store = SqliteGuardrailStore.open({ path: storePath(stateDir) });
}, 60_000);

afterAll(async () => {
  store.close();
  if (server.exitCode === null && server.signalCode === null) {
    const exited = new Promise((resolveExit) => server.once("exit", resolveExit));
    server.send("stop");
    await exited;
  }
  rmSync(stateDir, { recursive: true, force: true });
}, 30_000);

function turn(turnId: string): TurnInput {
  return { scopeId: NOTE_ID, turnId, policyVersion: "v1", segments: [{ label: "user", content: USER }] };
}

/** What the API layer does before it creates a run: admission, once per turn. */
async function admit(input: TurnInput): Promise<void> {
  await admitTurn({ store, input, moderate: () => true });
}

function runInput() {
  return { messages: [{ role: "user", content: USER }] };
}

function messagesOf(values: unknown): WireMessage[] {
  return (values as { messages: WireMessage[] }).messages;
}

function editResults(messages: readonly WireMessage[]): WireMessage[] {
  return messages.filter((message) => message.type === "tool" && message.tool_call_id === EDIT_CALL);
}

describe("the guarded agent on LangGraph Server, driven by the SDK", () => {
  it("a run with the turn in its context reads, then writes once; retried runs of the turn replay and write nothing", async () => {
    const input = turn("turn-write");
    await admit(input);
    const thread = await client.threads.create();

    const first = messagesOf(await client.runs.wait(thread.thread_id, "agent", { input: runInput(), context: turnContext(input) }));
    expect(first.map((message) => message.type)).toEqual(["human", "ai", "tool", "ai", "tool", "ai"]);
    expect(editResults(first).map((message) => [message.status, message.content])).toEqual([["success", SAVED]]);
    expect(first.at(-1)?.content).toBe("Done.");
    expect(writesIn(stateDir)).toEqual([{ noteId: NOTE_ID, body: NEW_BODY }]);

    // The client lost the answer and runs the turn again on its thread: the model proposes the
    // same write, the store answers it with the stored result.
    const again = messagesOf(await client.runs.wait(thread.thread_id, "agent", { input: runInput(), context: turnContext(input) }));
    expect(editResults(again).map((message) => [message.status, message.content])).toEqual([
      ["success", SAVED],
      ["success", SAVED],
    ]);
    // ...or on a new thread: nothing of the first run is in its checkpoint, the store still knows.
    const elsewhere = await client.threads.create();
    const fresh = messagesOf(await client.runs.wait(elsewhere.thread_id, "agent", { input: runInput(), context: turnContext(input) }));
    expect(editResults(fresh).map((message) => [message.status, message.content])).toEqual([["success", SAVED]]);

    expect(writesIn(stateDir)).toHaveLength(1);
    expect(await store.getMutation(turnKey(input))).toMatchObject({ state: "complete", toolName: "edit_note", toolCallId: EDIT_CALL });
  });

  it("the turn's own thread: turnThreadId is a thread id the server takes; created again it is the same thread, and the turn writes once", async () => {
    const before = writesIn(stateDir).length;
    const input = turn("turn-own-thread");
    await admit(input);
    const threadId = turnThreadId(turnKey(input));

    // The API layer needs no turn -> thread table: each attempt creates the turn's thread, idempotently.
    const created = await client.threads.create({ threadId, ifExists: "do_nothing" });
    expect(created.thread_id).toBe(threadId);
    const first = messagesOf(await client.runs.wait(threadId, "agent", { input: runInput(), context: turnContext(input) }));
    expect(editResults(first).map((message) => [message.status, message.content])).toEqual([["success", SAVED]]);

    const again = await client.threads.create({ threadId, ifExists: "do_nothing" });
    expect(again.thread_id).toBe(threadId);
    expect(messagesOf((await client.threads.getState(threadId)).values)).toHaveLength(first.length);
    expect((await client.runs.list(threadId)).map((run) => run.status)).toEqual(["success"]);
    expect(writesIn(stateDir)).toHaveLength(before + 1);
  });

  it("an approval interrupt surfaces in the thread state; answered through the SDK, the run resumes and writes once", async () => {
    const before = writesIn(stateDir).length;
    const input = turn("turn-approval");
    await admit(input);
    const thread = await client.threads.create();

    await client.runs.wait(thread.thread_id, "approving", { input: runInput(), context: turnContext(input) });
    const paused = await client.threads.getState(thread.thread_id);
    const interrupts = paused.tasks.flatMap((task) => task.interrupts);
    expect(interrupts).toHaveLength(1);
    const request = interrupts[0]?.value as ApprovalRequest;
    expect(request).toMatchObject({ type: "arkah.approval", tool: "edit_note", toolCallId: EDIT_CALL, args: { noteId: NOTE_ID, body: NEW_BODY } });
    expect((await store.getApproval(request.approvalId))?.status).toBe("pending");
    expect(writesIn(stateDir)).toHaveLength(before);

    // The resume is a new run: the same thread, the decision as the command, the turn again.
    const resumed = messagesOf(
      await client.runs.wait(thread.thread_id, "approving", {
        command: { resume: { decision: "approve", approvalId: request.approvalId } },
        context: turnContext(input),
      }),
    );
    expect(editResults(resumed).map((message) => [message.status, message.content])).toEqual([["success", SAVED]]);
    expect(resumed.at(-1)?.content).toBe("Done.");
    expect((await client.threads.getState(thread.thread_id)).tasks).toEqual([]);
    expect((await store.getApproval(request.approvalId))?.status).toBe("applied");
    expect(writesIn(stateDir)).toHaveLength(before + 1);
  });

  it("a run of a turn nobody admitted fails before any tool runs", async () => {
    const before = writesIn(stateDir).length;
    const input = turn("turn-unadmitted");
    const thread = await client.threads.create();
    const failed = await client.runs.wait(thread.thread_id, "agent", { input: runInput(), context: turnContext(input), raiseError: false });

    // The server reports the graph's error as the run's outcome: the guardrails' typed refusal.
    const error = (failed as { __error__?: { message?: string } }).__error__;
    expect(JSON.parse(error?.message ?? "null")).toEqual({
      error: "AdmissionError",
      message: "this turn has no admission receipt; call admitTurn first",
    });
    expect((await client.runs.list(thread.thread_id)).map((run) => run.status)).toEqual(["error"]);
    const state = await client.threads.getState(thread.thread_id);
    expect(messagesOf(state.values).filter((message) => message.type === "tool")).toEqual([]);
    expect(writesIn(stateDir)).toHaveLength(before);
  });
});

describe("a cancelled run on LangGraph Server: what becomes of the edit's claim", () => {
  /** Admits the turn and starts a `cancellable` run on a new thread; resolves once its edit's body started. */
  async function startEdit(turnId: string) {
    const input = turn(turnId);
    await admit(input);
    const thread = await client.threads.create();
    const run = await client.runs.create(thread.thread_id, "cancellable", { input: runInput(), context: turnContext(input) });
    await nextMessage("edit-started");
    return { input, threadId: thread.thread_id, runId: run.run_id };
  }

  /** The next turn on the note, on the plain `agent` graph: its edit's result and the writes it made. */
  async function nextTurn(turnId: string, threadId?: string) {
    const input = turn(turnId);
    await admit(input);
    const thread = threadId ?? (await client.threads.create()).thread_id;
    const before = writesIn(stateDir).length;
    const messages = messagesOf(await client.runs.wait(thread, "agent", { input: runInput(), context: turnContext(input) }));
    return { input, edits: editResults(messages).map((message) => [message.status, message.content]), writes: writesIn(stateDir).length - before };
  }

  it.each(["interrupt", "rollback"] as const)(
    "the cancel endpoint (action %s) during the edit: the body throws NoEffectError, the claim is released, the next turn writes",
    async (action) => {
      const before = writesIn(stateDir).length;
      const edit = await startEdit(`turn-cancel-${action}`);

      await client.runs.cancel(edit.threadId, edit.runId, true, action);
      expect(await nextMessage("edit-settled")).toEqual({ type: "edit-settled", how: "threw" });
      expect(writesIn(stateDir)).toHaveLength(before);
      // Released: no claim left for anyone to reconcile, nothing blocks the note.
      expect(await store.getMutation(turnKey(edit.input))).toBeUndefined();
      expect((await store.listUnresolved()).filter((claim) => claim.scopeId === NOTE_ID)).toEqual([]);

      const next = await nextTurn(`turn-after-cancel-${action}`);
      expect(next.edits).toEqual([["success", SAVED]]);
      expect(next.writes).toBe(1);
    },
  );

  it.each(["interrupt", "rollback"] as const)(
    "a new run on the thread with multitaskStrategy %s cancels the running edit: released, and the new run's turn writes once",
    async (multitaskStrategy) => {
      const before = writesIn(stateDir).length;
      const edit = await startEdit(`turn-${multitaskStrategy}-first`);
      const second = turn(`turn-${multitaskStrategy}-second`);
      await admit(second);

      const run = await client.runs.create(edit.threadId, "agent", { input: runInput(), context: turnContext(second), multitaskStrategy });
      expect(await nextMessage("edit-settled")).toEqual({ type: "edit-settled", how: "threw" });
      const messages = messagesOf(await client.runs.join(edit.threadId, run.run_id));

      expect(editResults(messages).at(-1)).toMatchObject({ status: "success", content: SAVED });
      expect(writesIn(stateDir)).toHaveLength(before + 1);
      expect(await store.getMutation(turnKey(edit.input))).toBeUndefined();
      expect(await store.getMutation(turnKey(second))).toMatchObject({ state: "complete" });
    },
  );

  it("enqueue: the running edit is not cancelled and writes; the queued run's turn then writes once", async () => {
    const before = writesIn(stateDir).length;
    const edit = await startEdit("turn-enqueue-first");
    const second = turn("turn-enqueue-second");
    await admit(second);

    const run = await client.runs.create(edit.threadId, "agent", { input: runInput(), context: turnContext(second), multitaskStrategy: "enqueue" });
    tellServer({ type: "release-edit" });
    expect(await nextMessage("edit-settled")).toEqual({ type: "edit-settled", how: "returned" });
    await client.runs.join(edit.threadId, run.run_id);

    expect(writesIn(stateDir)).toHaveLength(before + 2);
    expect(await store.getMutation(turnKey(edit.input))).toMatchObject({ state: "complete" });
    expect(await store.getMutation(turnKey(second))).toMatchObject({ state: "complete" });
  });

  it("reject: the second run is refused; the running edit writes once", async () => {
    const before = writesIn(stateDir).length;
    const edit = await startEdit("turn-reject-first");
    const second = turn("turn-reject-second");
    await admit(second);

    await expect(
      client.runs.create(edit.threadId, "agent", { input: runInput(), context: turnContext(second), multitaskStrategy: "reject" }),
    ).rejects.toThrow();
    tellServer({ type: "release-edit" });
    expect(await nextMessage("edit-settled")).toEqual({ type: "edit-settled", how: "returned" });
    await client.runs.join(edit.threadId, edit.runId);

    expect(writesIn(stateDir)).toHaveLength(before + 1);
    expect(await store.getMutation(turnKey(edit.input))).toMatchObject({ state: "complete" });
    expect(await store.getMutation(turnKey(second))).toBeUndefined();
  });
});
