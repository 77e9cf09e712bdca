/**
 * A worker: one `pg.Pool`, connected as the runtime role (DML only), shared by the guardrail store
 * and LangGraph's `PostgresSaver`; one compiled agent; each request a turn. Neither opens with DDL:
 * the store is opened with `migrate: false` (it checks the schema's version and runs nothing else),
 * and the saver's `setup()` is never called here (setup.ts ran both migrations as the owner).
 *
 *   DATABASE_URL=postgres://app_runtime@db/app tsx examples/production-postgres/app.ts
 *
 * The model is the offline `ScriptedModel`, answering "Set NOTE to: TEXT" by reading the note and
 * then editing it; swap in any tool-calling chat model.
 */
import { pathToFileURL } from "node:url";
import { AIMessage, HumanMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import { PostgresSaver } from "@langchain/langgraph-checkpoint-postgres";
import { createAgent, tool } from "langchain";
import pg from "pg";
import { z } from "zod";
import { admitTurn, createDocumentGuardrails, turnContext, type TurnInput } from "arkah-agent-guardrails";
import { PostgresGuardrailStore } from "arkah-agent-guardrails/postgres";
import { ScriptedModel, type ScriptReply } from "arkah-agent-guardrails/testing";
import { SCHEMAS, type Schemas } from "./setup.js";

/** The pool a worker runs on. `max` bounds this worker's connections (see the doc's sizing). */
export function runtimePool(connectionString: string, max = 10): pg.Pool {
  const pool = new pg.Pool({
    connectionString,
    max,
    connectionTimeoutMillis: 10_000,
    // Server-side limits, set per connection: a statement or a lock wait that runs away is
    // cancelled by the server, and a transaction left idle (a stalled worker holding a row lock)
    // is ended, releasing its locks.
    statement_timeout: 15_000,
    lock_timeout: 10_000,
    idle_in_transaction_session_timeout: 30_000,
    application_name: "notes-worker",
  });
  // An idle connection the server drops emits 'error' on the pool; the next query gets a new one.
  pool.on("error", () => undefined);
  return pool;
}

/** The document service the tools call: an in-memory map that counts the writes it executed. */
export class Notes {
  readonly #notes = new Map<string, { body: string; revision: number }>([["note-7", { body: "Buy milk", revision: 3 }]]);
  writes = 0;

  get(noteId: string) {
    return this.#notes.get(noteId);
  }

  set(noteId: string, body: string) {
    const note = this.#notes.get(noteId);
    if (note === undefined) throw new Error("no such note");
    this.writes += 1;
    this.#notes.set(noteId, { body, revision: note.revision + 1 });
  }
}

/** The offline model: reads the note named in the user's "Set NOTE to: TEXT", then edits it. */
function responder(messages: readonly BaseMessage[]): ScriptReply {
  const start = messages.findLastIndex((message) => HumanMessage.isInstance(message));
  const request = /^Set ([\w-]+) to: (.*)$/s.exec(messages[start]?.text ?? "");
  if (request === null) return { content: 'Say "Set NOTE to: TEXT".' };
  const [, noteId = "", body = ""] = request;
  const turn = messages.slice(start + 1);
  const step = turn.filter((message) => AIMessage.isInstance(message)).length + 1;
  const results = turn.filter((message) => ToolMessage.isInstance(message));
  if (results.length === 0) return { toolCalls: [{ id: `call-${String(step)}`, name: "read_note", args: { noteId } }] };
  if (results.length === 1) return { toolCalls: [{ id: `call-${String(step)}`, name: "edit_note", args: { noteId, body } }] };
  return { content: results[1]?.status === "error" ? `Not changed: ${results[1].text}` : `Done: ${noteId} says "${body}".` };
}

/** Everything one worker process holds open. */
export interface Worker {
  readonly agent: ReturnType<typeof buildAgent>;
  readonly store: PostgresGuardrailStore;
  readonly notes: Notes;
}

function buildAgent(store: PostgresGuardrailStore, checkpointer: PostgresSaver, notes: Notes) {
  const readNote = tool(({ noteId }) => JSON.stringify(notes.get(noteId) ?? null), {
    name: "read_note",
    description: "Read a note.",
    schema: z.object({ noteId: z.string() }),
  });
  const editNote = tool(
    ({ noteId, body }) => {
      notes.set(noteId, body);
      return "Saved";
    },
    { name: "edit_note", description: "Replace a note's body.", schema: z.object({ noteId: z.string(), body: z.string() }) },
  );
  return createAgent({
    model: new ScriptedModel(responder),
    tools: [readNote, editNote],
    checkpointer,
    middleware: [
      createDocumentGuardrails({
        store,
        userMessageLabel: "user",
        authorize: (_call, turn) => turn.scopeId === "note-7",
        tools: {
          read_note: { kind: "document-read", scope: (args) => args.noteId as string },
          edit_note: { kind: "mutation", scope: (args) => args.noteId as string },
        },
      }),
    ],
  });
}

/** Opens the store and the checkpointer on `pool` (no DDL) and builds the agent. */
export async function startWorker(pool: pg.Pool, schemas: Schemas = SCHEMAS, notes = new Notes()): Promise<Worker> {
  // Rejects with a ConfigurationError if setup.ts has not migrated the schema to this version.
  const store = await PostgresGuardrailStore.open({ pool }, { schema: schemas.guardrails, migrate: false });
  const checkpointer = new PostgresSaver(pool, undefined, { schema: schemas.checkpoints });
  return { agent: buildAgent(store, checkpointer, notes), store, notes };
}

/** One request: admit the turn once, run it on its own thread, answer the model's last text. */
export async function handleTurn(worker: Worker, turn: TurnInput): Promise<string> {
  const receipt = await admitTurn({ store: worker.store, input: turn, moderate: () => true });
  if (!receipt.allowed) return "refused by moderation";
  const message = turn.segments[0]?.content ?? "";
  const result = await worker.agent.invoke(
    { messages: [new HumanMessage(message)] },
    { configurable: { thread_id: `turn-${turn.turnId}` }, context: turnContext(turn) },
  );
  return result.messages.at(-1)?.text ?? "";
}

/** A turn of the user's request to set `note-7`. */
export function noteTurn(turnId: string, body: string): TurnInput {
  return { scopeId: "note-7", turnId, policyVersion: "2026-11", segments: [{ label: "user", content: `Set note-7 to: ${body}` }] };
}

// `tsx examples/production-postgres/app.ts`: one worker serving one turn.
if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  const url = process.env.DATABASE_URL;
  if (url === undefined) throw new Error("set DATABASE_URL (the runtime role's connection)");
  const pool = runtimePool(url);
  try {
    const worker = await startWorker(pool);
    console.log(await handleTurn(worker, noteTurn(`req-${String(Date.now())}`, "Buy oat milk")));
  } finally {
    // The store does not end a pool it was given: the pool is the application's.
    await pool.end();
  }
}
