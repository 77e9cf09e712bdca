/**
 * examples/http-service driven over real HTTP: the server runs as its own OS process
 * (`node --import tsx examples/http-service/server.ts`) on a free loopback port, on SQLite files in
 * a temp directory, with the offline model (no API key reaches it) except in one test, where
 * ChatOpenAI talks to a scripted Chat Completions server on loopback. Writes are counted in the
 * service's own database (`note_writes`: one row per write the write service executed) and the
 * guardrails' decisions read from their store's audit trail.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import Database from "better-sqlite3";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { turnKey, type ApprovalRequest, type StoredAuditEvent } from "arkah-agent-guardrails";
import { SqliteGuardrailStore } from "arkah-agent-guardrails/sqlite";
import { tempDir } from "../processes/support.js";
import { ProviderServer } from "../providers/support/provider-server.js";
import { OPENAI_CALL_ID, openAIWire } from "../providers/support/openai-wire.js";

const ROOT = resolve(fileURLToPath(new URL("../..", import.meta.url)));
/** Starting Node, tsx and langchain in a child process: generous on a loaded machine. */
const SLOW = 240_000;

interface Server {
  readonly url: string;
  readonly child: ChildProcess;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** Starts the service on `dataDir` and resolves once it printed the address it listens on. */
function startServer(dataDir: string, keys: { OPENAI_API_KEY?: string; OPENAI_BASE_URL?: string } = {}): Promise<Server> {
  const env: NodeJS.ProcessEnv = { ...process.env, DATA_DIR: dataDir, PORT: "0", HOST: "127.0.0.1" };
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

async function kill(server: Server): Promise<void> {
  if (server.child.exitCode === null && server.child.signalCode === null) server.child.kill("SIGKILL");
  await server.exited;
}

interface Reply {
  readonly status: number;
  readonly body: Record<string, unknown>;
}

async function post(url: string, headers: Record<string, string>, body: unknown): Promise<Reply> {
  const response = await fetch(url, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(body) });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

const turn = (server: Server, user: string, key: string, noteId: string, message: string) =>
  post(`${server.url}/turns`, { "x-user": user, "idempotency-key": key }, { noteId, message });

/** What the service's database holds: the writes that executed, and the notes. */
function database(dataDir: string) {
  const db = new Database(join(dataDir, "notes.sqlite"), { readonly: true });
  try {
    return {
      writes: db.prepare("SELECT mutation_key AS mutationKey, note_id AS noteId, body FROM note_writes ORDER BY written_at").all() as {
        mutationKey: string;
        noteId: string;
        body: string;
      }[],
      notes: Object.fromEntries(
        (db.prepare("SELECT id, body, revision FROM notes").all() as { id: string; body: string; revision: number }[]).map((note) => [
          note.id,
          { body: note.body, revision: note.revision },
        ]),
      ),
    };
  } finally {
    db.close();
  }
}

/** The guardrails' audit trail of one turn, read from their store by another process. */
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

describe("examples/http-service over HTTP", () => {
  describe("one server process", () => {
    const dir = tempDir("arkah-http-");
    let server: Server;

    beforeAll(async () => {
      server = await startServer(dir.path);
    }, SLOW);
    afterAll(async () => {
      await kill(server);
      dir.remove();
    });

    it(
      "a turn reads the note, writes it once with the claim's mutationKey, and answers 200",
      async () => {
        const reply = await turn(server, "alice", "turn-write-0001", "note-7", "Set note-7 to: Buy oat milk");
        expect(reply).toEqual({
          status: 200,
          body: {
            status: "completed",
            turnId: "alice/turn-write-0001",
            answer: 'Done: {"noteId":"note-7","body":"Buy oat milk","revision":4}',
            calls: [
              { tool: "read_note", callId: "call-1", status: "success" },
              { tool: "edit_note", callId: "call-2", status: "success" },
            ],
          },
        });
        const { writes, notes } = database(dir.path);
        expect(notes["note-7"]).toEqual({ body: "Buy oat milk", revision: 4 });
        expect(writes).toHaveLength(1);
        // The key the tool passed to its write service is the one the guardrails claimed under.
        const executed = (await auditOf(dir.path, "note-7", "alice/turn-write-0001")).filter((event) => event.decision === "executed" && event.toolName === "edit_note");
        expect(executed).toHaveLength(1);
        expect(writes[0]).toEqual({ mutationKey: executed[0]?.mutationKey, noteId: "note-7", body: "Buy oat milk" });
      },
      SLOW,
    );

    it(
      "refusals: another user's edit is refused unauthorized, a denied message and a bad request change nothing",
      async () => {
        const before = database(dir.path);
        const refused = await turn(server, "bob", "turn-bob-00001", "note-8", "Set note-8 to: Call nobody");
        expect(refused).toEqual({
          status: 200,
          body: {
            status: "completed",
            turnId: "bob/turn-bob-00001",
            answer: "note-8 was not changed: unauthorized.",
            calls: [
              { tool: "read_note", callId: "call-1", status: "success" },
              { tool: "edit_note", callId: "call-2", status: "error", refusal: "unauthorized" },
            ],
          },
        });
        expect(mutationDecisions(await auditOf(dir.path, "note-8", "bob/turn-bob-00001"))).toEqual([["refused", "unauthorized"]]);

        const denied = await turn(server, "alice", "turn-denied-01", "note-8", "Set note-8 to: my password is hunter2");
        expect(denied).toEqual({ status: 403, body: { error: "turn_denied" } });

        const bad = await post(`${server.url}/turns`, { "x-user": "alice", "idempotency-key": "short" }, { noteId: "note-8" });
        expect(bad.status).toBe(400);
        expect(bad.body.error).toBe("invalid_request");
        expect((bad.body.issues as { path: string }[]).map((issue) => issue.path)).toEqual(["idempotencyKey", "message"]);

        const unknown = await post(`${server.url}/approvals/${"0".repeat(64)}`, { "x-user": "alice" }, { decision: "approve" });
        expect(unknown).toEqual({ status: 404, body: { error: "unknown_approval" } });

        expect(database(dir.path)).toEqual(before);
      },
      SLOW,
    );

    it(
      "a transport retry: the same request twice makes one write, and the second answer is the first, replayed",
      async () => {
        const request = ["alice", "turn-retry-0001", "note-8", "Set note-8 to: Call the plumber at 9"] as const;
        const first = await turn(server, ...request);
        const second = await turn(server, ...request);
        expect(first.status).toBe(200);
        expect(first.body.answer).toBe('Done: {"noteId":"note-8","body":"Call the plumber at 9","revision":2}');
        expect(second).toEqual(first);

        const { writes, notes } = database(dir.path);
        expect(writes.filter((write) => write.noteId === "note-8")).toHaveLength(1);
        expect(notes["note-8"]).toEqual({ body: "Call the plumber at 9", revision: 2 });
        expect(mutationDecisions(await auditOf(dir.path, "note-8", "alice/turn-retry-0001"))).toEqual([
          ["executed", null],
          ["replayed", null],
        ]);

        // The same key with another message is not a retry: 409, and nothing runs.
        const reused = await turn(server, "alice", "turn-retry-0001", "note-8", "Set note-8 to: something else");
        expect(reused).toEqual({ status: 409, body: { error: "idempotency_key_reused" } });
        expect(database(dir.path).writes.filter((write) => write.noteId === "note-8")).toHaveLength(1);
      },
      SLOW,
    );

    it(
      "a rejected approval: the model is told approval_rejected and nothing is written",
      async () => {
        const before = database(dir.path);
        const paused = await turn(server, "alice", "turn-reject-001", "note-7", "Clear note-7");
        expect(paused.status).toBe(202);
        const [pending] = paused.body.approvals as ApprovalRequest[];
        const rejected = await post(`${server.url}/approvals/${pending?.approvalId ?? ""}`, { "x-user": "alice" }, { decision: "reject", message: "Keep it" });
        expect(rejected).toEqual({
          status: 200,
          body: {
            status: "completed",
            turnId: "alice/turn-reject-001",
            answer: "note-7 was not changed: approval_rejected.",
            calls: [
              { tool: "read_note", callId: "call-1", status: "success" },
              { tool: "edit_note", callId: "call-2", status: "error", refusal: "approval_rejected" },
            ],
          },
        });
        expect(database(dir.path)).toEqual(before);
      },
      SLOW,
    );
  });

  it(
    "with OPENAI_API_KEY set the service runs ChatOpenAI: against a loopback Chat Completions server, a turn writes once and its retry (fresh call ids) writes nothing",
    async () => {
      // @langchain/openai is a dev dependency; OPENAI_BASE_URL points the child's client at a
      // scripted server in this process, so no request leaves 127.0.0.1.
      const provider = await ProviderServer.start(openAIWire);
      const dir = tempDir("arkah-http-provider-");
      let server: Server | undefined;
      try {
        server = await startServer(dir.path, { OPENAI_API_KEY: "sk-test-not-a-real-key", OPENAI_BASE_URL: `${provider.url}/v1` });
        const script = () =>
          provider.script(
            { toolCalls: [{ name: "read_note", args: { noteId: "note-8" } }] },
            { toolCalls: [{ name: "edit_note", args: { noteId: "note-8", body: "Call the plumber" } }] },
            { content: "Done: note-8 says Call the plumber." },
          );
        const request = ["alice", "turn-openai-001", "note-8", "Set note-8 to: Call the plumber"] as const;
        script();
        const first = await turn(server, ...request);
        const [readId] = provider.callIds(0);
        const [editId] = provider.callIds(1);
        expect(editId).toMatch(OPENAI_CALL_ID);
        expect(first).toEqual({
          status: 200,
          body: {
            status: "completed",
            turnId: "alice/turn-openai-001",
            answer: "Done: note-8 says Call the plumber.",
            calls: [
              { tool: "read_note", callId: readId, status: "success" },
              { tool: "edit_note", callId: editId, status: "success" },
            ],
          },
        });
        // The system prompt and the user's message reached the provider.
        expect(JSON.stringify(provider.requests[0]?.body.messages)).toContain("Set note-8 to: Call the plumber");

        // A transport retry: the provider mints fresh ids, so the edit is a new call of a turn
        // that made its change.
        script();
        const retried = await turn(server, ...request);
        const [retryEdit] = provider.callIds(4);
        expect(retried.status).toBe(200);
        expect(retried.body.calls).toEqual([
          { tool: "read_note", callId: provider.callIds(3)[0], status: "success" },
          { tool: "edit_note", callId: retryEdit, status: "error", refusal: "mutation_conflict" },
        ]);
        expect(database(dir.path).writes.filter((write) => write.noteId === "note-8")).toHaveLength(1);
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

  describe("an approval across a restart of the server process", () => {
    const dir = tempDir("arkah-http-restart-");
    const servers: Server[] = [];

    afterEach(async () => {
      await Promise.all(servers.map(kill));
    });
    afterAll(() => {
      dir.remove();
    });

    it(
      "202 with the pending request; the process is killed; a new one on the same files resumes it, and the note is cleared once",
      async () => {
        const first = await startServer(dir.path);
        servers.push(first);
        const request = ["alice", "turn-clear-0001", "note-7", "Clear note-7"] as const;
        const paused = await turn(first, ...request);
        expect(paused.status).toBe(202);
        expect(paused.body).toMatchObject({ status: "pending_approval", turnId: "alice/turn-clear-0001" });
        const [pending, ...others] = paused.body.approvals as ApprovalRequest[];
        expect(others).toEqual([]);
        expect(pending).toMatchObject({ tool: "edit_note", toolCallId: "call-2", args: { noteId: "note-7", body: "" }, reason: "Clear \"note-7\"?" });
        const approvalId = pending?.approvalId ?? "";
        expect(database(dir.path).writes).toEqual([]);

        // No goodbye: the pending approval lives only in the SQLite files.
        await kill(first);
        const second = await startServer(dir.path);
        servers.push(second);
        expect(second.child.pid).not.toBe(first.child.pid);

        // A retry of the paused turn answers what it waits on, and runs nothing.
        expect(await turn(second, ...request)).toEqual(paused);

        // Another user's answer decides nothing (test/security/http-example.test.ts has each attack).
        const forbidden = await post(`${second.url}/approvals/${approvalId}`, { "x-user": "bob" }, { decision: "approve" });
        expect(forbidden).toEqual({ status: 403, body: { error: "forbidden" } });
        expect(database(dir.path).writes).toEqual([]);

        const resumed = await post(`${second.url}/approvals/${approvalId}`, { "x-user": "alice" }, { decision: "approve" });
        expect(resumed).toEqual({
          status: 200,
          body: {
            status: "completed",
            turnId: "alice/turn-clear-0001",
            answer: 'Done: {"noteId":"note-7","body":"","revision":4}',
            calls: [
              { tool: "read_note", callId: "call-1", status: "success" },
              { tool: "edit_note", callId: "call-2", status: "success" },
            ],
          },
        });
        const { writes, notes } = database(dir.path);
        expect(writes).toEqual([{ mutationKey: expect.stringMatching(/^[0-9a-f]{64}$/) as string, noteId: "note-7", body: "" }]);
        expect(notes["note-7"]).toEqual({ body: "", revision: 4 });

        // Answering again resumes nothing.
        const again = await post(`${second.url}/approvals/${approvalId}`, { "x-user": "alice" }, { decision: "approve" });
        expect(again).toEqual({ status: 409, body: { error: "not_waiting", approvalStatus: "applied" } });
        expect(database(dir.path).writes).toHaveLength(1);
        expect(mutationDecisions(await auditOf(dir.path, "note-7", "alice/turn-clear-0001"))).toContainEqual(["executed", null]);
      },
      SLOW,
    );
  });
});
