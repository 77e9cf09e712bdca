/**
 * examples/http-service driven over real HTTP, on Hono and on Express alike: the same turn
 * service behind both routers, on SQLite files in a temp directory, with the offline model (no
 * API key reaches it).
 *
 * - In the test's process (test/examples/http-servers.ts: Hono through `@hono/node-server`,
 *   Express through its own `listen`, each on a free 127.0.0.1 port, stopped after): a turn, its
 *   refusals, a retry of a finished turn that calls nothing (model calls and writes counted), a
 *   concurrent retry answered 409 `running`, a rejected approval, and `GET /turns/:turnKey`.
 * - As its own OS process (`node --import tsx examples/http-service/server.ts`, `FRAMEWORK=hono`
 *   or `express`): an approval across a `SIGKILL` of the server process; and ChatOpenAI against a
 *   scripted Chat Completions server on loopback (`OPENAI_BASE_URL`), whose retry asks the
 *   provider nothing.
 *
 * Writes are counted in the service's own database (`note_writes`: one row per write the write
 * service executed) and the guardrails' decisions read from their store's audit trail.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import Database from "better-sqlite3";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { turnKey, type PendingApproval } from "arkah-agent-guardrails";
import { type StoredAuditEvent } from "arkah-agent-guardrails/store";
import { SqliteGuardrailStore } from "arkah-agent-guardrails/sqlite";
import { tempDir } from "../processes/support.js";
import { ProviderServer } from "../providers/support/provider-server.js";
import { OPENAI_CALL_ID, openAIWire } from "../providers/support/openai-wire.js";
import { deferred } from "../support/fixtures.js";
import { FRAMEWORKS, startServer, writesIn, type Framework, type Reply, type RunningServer } from "./http-servers.js";

const ROOT = resolve(fileURLToPath(new URL("../..", import.meta.url)));
/** Starting Node, tsx and langchain in a child process: generous on a loaded machine. */
const SLOW = 240_000;

interface ServerProcess {
  readonly url: string;
  readonly child: ChildProcess;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** Starts the service as its own process on `dataDir` and resolves once it printed the address it listens on. */
function spawnServer(dataDir: string, framework: Framework, keys: { OPENAI_API_KEY?: string; OPENAI_BASE_URL?: string } = {}): Promise<ServerProcess> {
  const env: NodeJS.ProcessEnv = { ...process.env, DATA_DIR: dataDir, PORT: "0", HOST: "127.0.0.1", FRAMEWORK: framework };
  // The offline model unless a test says otherwise, whatever the machine running the tests has set.
  delete env.OPENAI_API_KEY;
  delete env.OPENAI_BASE_URL;
  delete env.ANTHROPIC_API_KEY;
  Object.assign(env, keys);
  const child = spawn(process.execPath, ["--import", "tsx", "examples/http-service/server.ts"], {
    cwd: ROOT,
    env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((done) => {
    child.on("exit", (code, signal) => {
      done({ code, signal });
    });
  });
  let output = "";
  return new Promise((resolveServer, reject) => {
    const onData = (chunk: Buffer) => {
      output += chunk.toString("utf8");
      const url = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(output)?.[1];
      if (url !== undefined) resolveServer({ url, child, exited });
    };
    child.stdout.on("data", onData);
    child.stderr.on("data", onData);
    void exited.then(({ code, signal }) => {
      reject(new Error(`the server exited (code ${String(code)}, signal ${String(signal)}) before listening\n${output}`));
    });
  });
}

async function kill(server: ServerProcess): Promise<void> {
  if (server.child.exitCode === null && server.child.signalCode === null) server.child.kill("SIGKILL");
  await server.exited;
}

async function post(url: string, headers: Record<string, string>, body: unknown): Promise<Reply> {
  const response = await fetch(url, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(body) });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

/** The notes as the service's database holds them. */
function notesIn(dataDir: string): Record<string, { body: string; revision: number }> {
  const db = new Database(join(dataDir, "notes.sqlite"), { readonly: true });
  try {
    const rows = db.prepare("SELECT id, body, revision FROM notes").all() as { id: string; body: string; revision: number }[];
    return Object.fromEntries(rows.map((note) => [note.id, { body: note.body, revision: note.revision }]));
  } finally {
    db.close();
  }
}

/** The guardrails' audit trail of one turn, read from their store by another connection. */
async function auditOf(dataDir: string, scopeId: string, turnId: string): Promise<StoredAuditEvent[]> {
  const store = SqliteGuardrailStore.open({ path: join(dataDir, "guardrails.sqlite") });
  try {
    return await store.readAudit({ turnKey: turnKey({ scopeId, turnId }) });
  } finally {
    store.close();
  }
}

const mutationDecisions = (events: readonly StoredAuditEvent[]) =>
  events.filter((event) => event.toolName === "edit_note").map((event) => [event.decision, event.code ?? null]);

const keyOf = (user: string, key: string, noteId: string) => turnKey({ scopeId: noteId, turnId: `${user}/${key}` });

describe.each(FRAMEWORKS)("examples/http-service on %s, in the test's process", (framework) => {
  let server: RunningServer;
  const turn = (user: string, key: string, noteId: string, message: string) => server.post("/turns", user, { noteId, message }, key);

  beforeAll(async () => {
    server = await startServer(framework);
  });
  afterAll(async () => {
    await server.stop();
  });

  it("a turn reads the note, writes it once with the claim's mutationKey, and answers 200", async () => {
    const reply = await turn("alice", "turn-write-0001", "note-7", "Set note-7 to: Buy oat milk");
    expect(reply).toEqual({
      status: 200,
      body: {
        status: "completed",
        turnKey: keyOf("alice", "turn-write-0001", "note-7"),
        replayed: false,
        answer: 'Done: {"noteId":"note-7","body":"Buy oat milk","revision":4}',
        calls: [
          { tool: "read_note", callId: "call-1", status: "success" },
          { tool: "edit_note", callId: "call-2", status: "success" },
        ],
        mutation: expect.objectContaining({ state: "complete", toolName: "edit_note" }) as unknown,
      },
    });
    expect(notesIn(server.dataDir)["note-7"]).toEqual({ body: "Buy oat milk", revision: 4 });
    const writes = server.writes();
    expect(writes).toHaveLength(1);
    // The key the tool passed to its write service is the one the guardrails claimed under.
    const audit = await auditOf(server.dataDir, "note-7", "alice/turn-write-0001");
    const executed = audit.filter((event) => event.decision === "executed" && event.toolName === "edit_note");
    expect(executed).toHaveLength(1);
    expect(writes[0]).toEqual({ mutationKey: executed[0]?.mutationKey, noteId: "note-7", body: "Buy oat milk" });
  });

  it("a retry of a finished turn calls nothing (no model call, no write, no audit event) and answers the same outcome, replayed", async () => {
    const request = ["alice", "turn-retry-0001", "note-8", "Set note-8 to: Call the plumber at 9"] as const;
    const first = await turn(...request);
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({ replayed: false, answer: 'Done: {"noteId":"note-8","body":"Call the plumber at 9","revision":2}' });
    const calls = server.model.calls;
    const writes = server.writes();
    const audit = await auditOf(server.dataDir, "note-8", "alice/turn-retry-0001");

    const second = await turn(...request);
    expect(second).toEqual({ status: 200, body: { ...first.body, replayed: true } });
    expect(server.model.calls).toBe(calls);
    expect(server.writes()).toEqual(writes);
    expect(await auditOf(server.dataDir, "note-8", "alice/turn-retry-0001")).toEqual(audit);
    expect(mutationDecisions(audit)).toEqual([["executed", null]]);

    // The same key with another message is not a retry: 422 input_mismatch (the IETF
    // Idempotency-Key draft's answer to a key reused with another payload), and nothing runs.
    const reused = await turn("alice", "turn-retry-0001", "note-8", "Set note-8 to: something else");
    expect(reused).toEqual({
      status: 422,
      body: { status: "refused", code: "input_mismatch", turnKey: keyOf("alice", "turn-retry-0001", "note-8"), replayed: false },
    });
    expect(server.model.calls).toBe(calls);
    expect(server.writes()).toEqual(writes);
  });

  it("a retry while the turn runs answers 409 running and starts no second run; the first then completes with one write", async () => {
    const request = ["alice", "turn-concurrent-01", "note-7", "Set note-7 to: Buy oat milk and eggs"] as const;
    const gate = deferred();
    const waiting = deferred();
    server.model.gate = gate.promise;
    server.model.onWait = waiting.resolve;
    const writes = server.writes().length;
    try {
      const first = turn(...request);
      await waiting.promise; // the first request's run is inside its first model call
      const calls = server.model.calls;
      const retry = await turn(...request);
      expect(retry).toEqual({ status: 409, body: { status: "running", turnKey: keyOf("alice", "turn-concurrent-01", "note-7") } });
      expect(server.model.calls).toBe(calls);
      server.model.gate = undefined;
      gate.resolve();
      const done = await first;
      expect(done.status).toBe(200);
      expect(done.body).toMatchObject({ status: "completed", replayed: false });
    } finally {
      server.model.gate = undefined;
      server.model.onWait = undefined;
      gate.resolve();
    }
    expect(server.writes()).toHaveLength(writes + 1);
    expect(mutationDecisions(await auditOf(server.dataDir, "note-7", "alice/turn-concurrent-01"))).toEqual([["executed", null]]);
  });

  it("refusals: another user's edit is refused unauthorized, a denied message, a bad request and an unknown approval change nothing", async () => {
    const before = { notes: notesIn(server.dataDir), writes: server.writes() };
    const refused = await turn("bob", "turn-bob-00001", "note-8", "Set note-8 to: Call nobody");
    expect(refused).toEqual({
      status: 200,
      body: {
        status: "completed",
        turnKey: keyOf("bob", "turn-bob-00001", "note-8"),
        replayed: false,
        answer: "note-8 was not changed: unauthorized.",
        calls: [
          { tool: "read_note", callId: "call-1", status: "success" },
          { tool: "edit_note", callId: "call-2", status: "error", refusal: "unauthorized" },
        ],
      },
    });
    expect(mutationDecisions(await auditOf(server.dataDir, "note-8", "bob/turn-bob-00001"))).toEqual([["refused", "unauthorized"]]);

    const denied = await turn("alice", "turn-denied-01", "note-8", "Set note-8 to: my password is hunter2");
    expect(denied).toEqual({
      status: 403,
      body: { status: "refused", code: "denied", turnKey: keyOf("alice", "turn-denied-01", "note-8"), replayed: false },
    });

    const bad = await server.post("/turns", "alice", { noteId: "note-8" }, "short");
    expect(bad.status).toBe(400);
    expect(bad.body.error).toBe("invalid_request");
    expect((bad.body.issues as { path: string }[]).map((issue) => issue.path)).toEqual(["idempotencyKey", "body.message"]);

    const notJson = await fetch(`${server.url}/turns`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-user": "alice", "idempotency-key": "turn-notjson-01" },
      body: "{",
    });
    expect(notJson.status).toBe(400);
    expect(((await notJson.json()) as { error: string }).error).toBe("invalid_request");

    const unknown = await server.post(`/approvals/${"0".repeat(64)}`, "alice", { decision: "approve" });
    expect(unknown).toEqual({ status: 404, body: { status: "not_found" } });
    // An id that is no approval id names no request: 404, as an unknown one.
    const malformed = await server.post("/approvals/not-an-id", "alice", { decision: "approve" });
    expect(malformed).toEqual({ status: 404, body: { status: "not_found" } });

    expect({ notes: notesIn(server.dataDir), writes: server.writes() }).toEqual(before);
  });

  it("a rejected approval: 202 with the request, then 200 with the call refused approval_rejected; nothing written", async () => {
    const before = server.writes();
    const paused = await turn("alice", "turn-reject-001", "note-7", "Clear note-7");
    expect(paused.status).toBe(202);
    expect(paused.body).toMatchObject({ status: "awaiting_approval", replayed: false });
    const [pending] = paused.body.approvals as PendingApproval[];
    expect(pending).toMatchObject({ tool: "edit_note", toolCallId: "call-2", args: { noteId: "note-7", body: "" }, reason: 'Clear "note-7"?' });
    const rejected = await server.post(`/approvals/${pending?.approvalId ?? ""}`, "alice", { decision: "reject", message: "Keep it" });
    expect(rejected).toEqual({
      status: 200,
      body: {
        status: "completed",
        turnKey: keyOf("alice", "turn-reject-001", "note-7"),
        replayed: false,
        answer: "note-7 was not changed: approval_rejected.",
        calls: [
          { tool: "read_note", callId: "call-1", status: "success" },
          { tool: "edit_note", callId: "call-2", status: "error", refusal: "approval_rejected" },
        ],
      },
    });
    expect(server.writes()).toEqual(before);
  });

  it("GET /turns/:turnKey: the turn's own user reads its state, outcome and claim; anyone else gets 404", async () => {
    const done = await turn("alice", "turn-read-00001", "note-8", "Set note-8 to: Water the plants");
    const key = String(done.body.turnKey);
    const view = await server.get(`/turns/${key}`, "alice");
    expect(view.status).toBe(200);
    expect(view.body).toMatchObject({
      status: "found",
      turnKey: key,
      principal: "alice",
      state: "completed",
      outcome: { status: "completed", answer: done.body.answer },
      mutation: { state: "complete", toolName: "edit_note", toolCallId: "call-2" },
    });
    // No tool result (the service's includeToolResults is off): the write's result stays in the store.
    expect(view.body.mutation).not.toHaveProperty("result");
    expect(await server.get(`/turns/${key}`, "bob")).toEqual({ status: 404, body: { status: "not_found" } });
    expect(await server.get(`/turns/${"0".repeat(64)}`, "alice")).toEqual({ status: 404, body: { status: "not_found" } });
  });
});

const turnOver = (server: ServerProcess, user: string, key: string, noteId: string, message: string) =>
  post(`${server.url}/turns`, { "x-user": user, "idempotency-key": key }, { noteId, message });

it(
  "with OPENAI_API_KEY set the service runs ChatOpenAI: against a loopback Chat Completions server, a turn writes once and its retry asks the provider nothing",
  async () => {
    // @langchain/openai is a dev dependency; OPENAI_BASE_URL points the child's client at a
    // scripted server in this process, so no request leaves 127.0.0.1.
    const provider = await ProviderServer.start(openAIWire);
    const dir = tempDir("arkah-http-provider-");
    let server: ServerProcess | undefined;
    try {
      server = await spawnServer(dir.path, "hono", { OPENAI_API_KEY: "sk-test-not-a-real-key", OPENAI_BASE_URL: `${provider.url}/v1` });
      provider.script(
        { toolCalls: [{ name: "read_note", args: { noteId: "note-8" } }] },
        { toolCalls: [{ name: "edit_note", args: { noteId: "note-8", body: "Call the plumber" } }] },
        { content: "Done: note-8 says Call the plumber." },
      );
      const request = ["alice", "turn-openai-001", "note-8", "Set note-8 to: Call the plumber"] as const;
      const first = await turnOver(server, ...request);
      const [readId] = provider.callIds(0);
      const [editId] = provider.callIds(1);
      expect(editId).toMatch(OPENAI_CALL_ID);
      expect(first).toEqual({
        status: 200,
        body: {
          status: "completed",
          turnKey: keyOf("alice", "turn-openai-001", "note-8"),
          replayed: false,
          answer: "Done: note-8 says Call the plumber.",
          calls: [
            { tool: "read_note", callId: readId, status: "success" },
            { tool: "edit_note", callId: editId, status: "success" },
          ],
          mutation: expect.objectContaining({ state: "complete", toolName: "edit_note" }) as unknown,
        },
      });
      // The system prompt and the user's message reached the provider.
      expect(JSON.stringify(provider.requests[0]?.body.messages)).toContain("Set note-8 to: Call the plumber");
      const requests = provider.requests.length;

      // A transport retry: the turn service answers the stored outcome. The provider is not asked
      // again, so it mints no fresh call ids and no edit meets the turn's slot (mutation_conflict).
      expect(await turnOver(server, ...request)).toEqual({ status: 200, body: { ...first.body, replayed: true } });
      expect(provider.requests).toHaveLength(requests);
      expect(writesIn(dir.path).filter((write) => write.noteId === "note-8")).toHaveLength(1);
      expect(provider.problems).toEqual([]);
      expect(provider.remaining).toBe(0);
    } finally {
      if (server !== undefined) await kill(server);
      await provider.close();
      dir.remove();
    }
  },
  SLOW,
);

describe.each(FRAMEWORKS)("an approval across a restart of the server process (%s)", (framework) => {
  const dir = tempDir(`arkah-http-restart-${framework}-`);
  const servers: ServerProcess[] = [];

  afterEach(async () => {
    await Promise.all(servers.map(kill));
  });
  afterAll(() => {
    dir.remove();
  });

  it(
    "202 with the pending request; the process is killed; a new one on the same files resumes it, and the note is cleared once",
    async () => {
      const first = await spawnServer(dir.path, framework);
      servers.push(first);
      const request = ["alice", "turn-clear-0001", "note-7", "Clear note-7"] as const;
      const paused = await turnOver(first, ...request);
      expect(paused.status).toBe(202);
      expect(paused.body).toMatchObject({ status: "awaiting_approval", turnKey: keyOf("alice", "turn-clear-0001", "note-7"), replayed: false });
      const [pending, ...others] = paused.body.approvals as PendingApproval[];
      expect(others).toEqual([]);
      expect(pending).toMatchObject({ tool: "edit_note", toolCallId: "call-2", args: { noteId: "note-7", body: "" }, reason: 'Clear "note-7"?' });
      const approvalId = pending?.approvalId ?? "";
      expect(writesIn(dir.path)).toEqual([]);

      // No goodbye: the pending approval lives only in the SQLite files.
      await kill(first);
      const second = await spawnServer(dir.path, framework);
      servers.push(second);
      expect(second.child.pid).not.toBe(first.child.pid);

      // A retry of the paused turn answers what it waits on, replayed, and runs nothing.
      expect(await turnOver(second, ...request)).toEqual({ status: 202, body: { ...paused.body, replayed: true } });

      // Another user's answer decides nothing (test/security/http-example.test.ts has each attack).
      const forbidden = await post(`${second.url}/approvals/${approvalId}`, { "x-user": "bob" }, { decision: "approve" });
      expect(forbidden).toEqual({ status: 403, body: { status: "forbidden" } });
      expect(writesIn(dir.path)).toEqual([]);

      const resumed = await post(`${second.url}/approvals/${approvalId}`, { "x-user": "alice" }, { decision: "approve" });
      expect(resumed).toEqual({
        status: 200,
        body: {
          status: "completed",
          turnKey: keyOf("alice", "turn-clear-0001", "note-7"),
          replayed: false,
          answer: 'Done: {"noteId":"note-7","body":"","revision":4}',
          calls: [
            { tool: "read_note", callId: "call-1", status: "success" },
            { tool: "edit_note", callId: "call-2", status: "success" },
          ],
          mutation: expect.objectContaining({ state: "complete", toolName: "edit_note" }) as unknown,
        },
      });
      expect(writesIn(dir.path)).toEqual([{ mutationKey: expect.stringMatching(/^[0-9a-f]{64}$/) as string, noteId: "note-7", body: "" }]);
      expect(notesIn(dir.path)["note-7"]).toEqual({ body: "", revision: 4 });

      // The same answer again (a retried POST) resumes nothing: 200 with the turn as it stands.
      const again = await post(`${second.url}/approvals/${approvalId}`, { "x-user": "alice" }, { decision: "approve" });
      expect(again).toEqual({ status: 200, body: { ...resumed.body, replayed: true } });
      expect(writesIn(dir.path)).toHaveLength(1);
      // Another answer is refused: 409 not_pending; a retry of the turn replays its answer.
      const other = await post(`${second.url}/approvals/${approvalId}`, { "x-user": "alice" }, { decision: "reject" });
      expect(other).toEqual({ status: 409, body: { status: "not_pending", approvalStatus: "applied" } });
      expect(await turnOver(second, ...request)).toEqual({ status: 200, body: { ...resumed.body, replayed: true } });
      expect(writesIn(dir.path)).toHaveLength(1);
      expect(mutationDecisions(await auditOf(dir.path, "note-7", "alice/turn-clear-0001"))).toContainEqual(["executed", null]);
    },
    SLOW,
  );
});
