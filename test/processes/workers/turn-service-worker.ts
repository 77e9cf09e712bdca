/**
 * One server process of the turn-service process tests (turn-service-postgres.test.ts,
 * turn-service-sqlite.test.ts): a guardrail store and a checkpointer of its own (its own pools or
 * connections, as a separate host has) on PostgreSQL or on SQLite files shared by the processes,
 * the real `createAgent` with a responder `ScriptedModel` (it plans from the transcript, so any
 * worker continues where the checkpoint is), and `createTurnService` over them.
 *
 *   [ARKAH_PG_URL=...] node --import tsx turn-service-worker.ts '<TurnServiceWorkerSpec as JSON>'
 *
 * parent -> worker: `{ type: "submit", turnId }`, `{ type: "recover" }` (`service.recover()`),
 *   `{ type: "release" }` (unblocks a blocked read), `{ type: "exit" }`.
 * worker -> parent: `{ type: "ready" }`, `{ type: "reading", turnId }` (inside the read tool's body,
 *   before it returns), `{ type: "wrote", turnId }` (inside the edit tool's body, its write
 *   committed, when it blocks after the write), `{ type: "answer", answer }`,
 *   `{ type: "recovered", summary }`, `{ type: "error", message }`.
 *
 * The edit tool's body writes through the write service: one row in its `writes` table per
 * `mutationKey` (a key it has seen is not written again), committed before the body returns: the
 * durable count of writes, whatever process ran them. With `confirm`, the tool's policy asks that
 * table by the claim's `mutationKey`.
 */
import { ToolMessage, type BaseMessage } from "@langchain/core/messages";
import type { BaseCheckpointSaver } from "@langchain/langgraph";
import { PostgresSaver } from "@langchain/langgraph-checkpoint-postgres";
import { SqliteSaver } from "@langchain/langgraph-checkpoint-sqlite";
import Database from "better-sqlite3";
import { createAgent, tool, type ToolRuntime } from "langchain";
import pg from "pg";
import { z } from "zod";
import {
  createDocumentGuardrails,
  createTurnService,
  mutationKey,
  TURN_CONTEXT_KEY,
  TurnInputSchema,
  type ConfirmClaim,
  type GuardrailStore,
} from "arkah-agent-guardrails";
import { PostgresGuardrailStore } from "arkah-agent-guardrails/postgres";
import { SqliteGuardrailStore } from "arkah-agent-guardrails/sqlite";
import { ScriptedModel, type ScriptReply } from "arkah-agent-guardrails/testing";
import {
  TURN_SCOPE,
  WRITE_RESULT,
  workerTurn,
  type TurnServiceStoreSpec,
  type TurnServiceWorkerCommand,
  type TurnServiceWorkerReport,
  type TurnServiceWorkerSpec,
} from "./turn-service-protocol.js";

const spec = JSON.parse(process.argv[2] ?? "null") as TurnServiceWorkerSpec | null;
if (spec === null) throw new Error("usage: [ARKAH_PG_URL=...] turn-service-worker.ts '<spec JSON>'");

const send = (report: TurnServiceWorkerReport) => {
  process.send?.(report);
};

/** The write service: records a write once per `mutationKey`, and says whether it has one. */
interface WriteService {
  write(row: { mutationKey: string; turnId: string; noteId: string; body: string }): Promise<void>;
  has(mutationKey: string): Promise<boolean>;
  close(): Promise<void>;
}

interface Backend {
  readonly store: GuardrailStore;
  readonly checkpointer: BaseCheckpointSaver;
  readonly writes: WriteService;
  close(): Promise<void>;
}

async function openBackend(target: TurnServiceStoreSpec, name: string, now: () => Date): Promise<Backend> {
  if (target.kind === "postgres") {
    const url = process.env.ARKAH_PG_URL;
    if (url === undefined) throw new Error("ARKAH_PG_URL is not set");
    const store = await PostgresGuardrailStore.open({ connectionString: url }, { schema: target.schema, now });
    const checkpointer = PostgresSaver.fromConnString(url, { schema: target.checkpoints });
    await checkpointer.setup();
    const pool = new pg.Pool({ connectionString: url, max: 1 });
    pool.on("error", () => undefined);
    const table = `"${target.schema}".writes`;
    const writes: WriteService = {
      async write({ mutationKey: key, turnId, noteId, body }) {
        await pool.query(`INSERT INTO ${table} (mutation_key, turn_id, worker, note_id, body) VALUES ($1, $2, $3, $4, $5) ON CONFLICT (mutation_key) DO NOTHING`, [
          key,
          turnId,
          name,
          noteId,
          body,
        ]);
      },
      async has(key) {
        return (await pool.query(`SELECT 1 FROM ${table} WHERE mutation_key = $1`, [key])).rowCount === 1;
      },
      close: () => pool.end(),
    };
    return {
      store,
      checkpointer,
      writes,
      close: async () => {
        await Promise.all([store.close(), checkpointer.end(), writes.close()]);
      },
    };
  }
  const store = SqliteGuardrailStore.open({ path: target.path, now });
  const checkpointer = SqliteSaver.fromConnString(target.checkpoints);
  const db = new Database(target.writes);
  db.pragma("journal_mode = WAL");
  db.pragma("busy_timeout = 5000");
  const insert = db.prepare("INSERT INTO writes (mutation_key, turn_id, worker, note_id, body) VALUES (?, ?, ?, ?, ?) ON CONFLICT (mutation_key) DO NOTHING");
  const find = db.prepare("SELECT 1 FROM writes WHERE mutation_key = ?");
  const writes: WriteService = {
    write: ({ mutationKey: key, turnId, noteId, body }) => Promise.resolve(void insert.run(key, turnId, name, noteId, body)),
    has: (key) => Promise.resolve(find.get(key) !== undefined),
    close: () => Promise.resolve(void db.close()),
  };
  return {
    store,
    checkpointer,
    writes,
    close: async () => {
      store.close();
      checkpointer.db.close();
      await writes.close();
    },
  };
}

const backend = await openBackend(spec.store, spec.name, () => new Date(Date.now() + spec.clockOffsetMs));
const { store, checkpointer, writes } = backend;

let release: () => void = () => undefined;
const released = new Promise<void>((resolve) => {
  release = resolve;
});
const forever = () => new Promise<never>(() => setInterval(() => undefined, 60_000));

/** The turn this call runs in, from the invocation's `context` (as a server's tools read it). */
const turnOf = (runtime: ToolRuntime) => TurnInputSchema.parse((runtime.context as Record<string, unknown> | undefined)?.[TURN_CONTEXT_KEY]);

const readNote = tool(
  async ({ noteId }, runtime: ToolRuntime) => {
    if (spec.blockRead !== undefined) {
      send({ type: "reading", turnId: turnOf(runtime).turnId });
      if (spec.blockRead === "forever") await forever();
      await released;
    }
    return JSON.stringify({ noteId, body: "Buy milk", revision: 3 });
  },
  { name: "read_note", description: "Read a note.", schema: z.object({ noteId: z.string() }) },
);
const editNote = tool(
  async (args, runtime: ToolRuntime) => {
    const turn = turnOf(runtime);
    // The claim's key: the write service dedupes on it, and `confirm` asks it by it.
    const key = mutationKey(turn, { id: runtime.toolCallId, name: "edit_note", args });
    await writes.write({ mutationKey: key, turnId: turn.turnId, noteId: args.noteId, body: args.body });
    if (spec.blockAfterWrite === true) {
      // The write committed; the reply never comes (the parent SIGKILLs this process now).
      send({ type: "wrote", turnId: turn.turnId });
      await forever();
    }
    return WRITE_RESULT;
  },
  { name: "edit_note", description: "Replace a note's body.", schema: z.object({ noteId: z.string(), body: z.string() }) },
);

/** Answers from the write service's record of the key: written (its result), or never written. */
const confirm: ConfirmClaim = async (claim) => {
  if (claim.kind !== "mutation") return { outcome: "unknown" };
  return (await writes.has(claim.mutationKey)) ? { outcome: "completed", result: WRITE_RESULT } : { outcome: "no-effect" };
};

const responder = (messages: readonly BaseMessage[]): ScriptReply => {
  const done = new Set(messages.filter((message) => ToolMessage.isInstance(message)).map((message) => message.name));
  if (!done.has("read_note")) return { toolCalls: [{ id: "r1", name: "read_note", args: { noteId: TURN_SCOPE } }] };
  if (!done.has("edit_note")) return { toolCalls: [{ id: "w1", name: "edit_note", args: { noteId: TURN_SCOPE, body: "Buy oat milk" } }] };
  return { content: "Done." };
};

const agent = createAgent({
  model: new ScriptedModel(responder),
  tools: [readNote, editNote],
  checkpointer,
  middleware: [
    createDocumentGuardrails({
      store,
      userMessageLabel: "user",
      authorize: () => true,
      tools: { read_note: { kind: "document-read" }, edit_note: { kind: "mutation", ...(spec.confirm === true ? { confirm } : {}) } },
    }),
  ],
});
const service = createTurnService({ agent, store, moderate: () => true, leaseMs: spec.leaseMs });

const failed = (error: unknown) => {
  send({ type: "error", message: error instanceof Error ? (error.stack ?? error.message) : String(error) });
};

process.on("message", (command: TurnServiceWorkerCommand) => {
  if (command.type === "exit") {
    void backend.close().finally(() => {
      process.disconnect();
    });
    return;
  }
  if (command.type === "release") {
    release();
    return;
  }
  if (command.type === "recover") {
    service.recover().then((summary) => {
      send({ type: "recovered", summary });
    }, failed);
    return;
  }
  service.submit({ turn: workerTurn(command.turnId) }).then((answer) => {
    send({ type: "answer", answer });
  }, failed);
});

send({ type: "ready" });
