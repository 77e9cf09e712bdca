/**
 * One server process of the turn-service process tests (turn-service-postgres.test.ts): a
 * `PostgresGuardrailStore` and a `PostgresSaver` of its own (its own pools, as a separate host has),
 * the real `createAgent` with a responder `ScriptedModel` (it plans from the transcript, so any
 * worker continues where the checkpoint is), and `createTurnService` over them.
 *
 *   ARKAH_PG_URL=... node --import tsx turn-service-worker.ts '<TurnServiceWorkerSpec as JSON>'
 *
 * parent -> worker: `{ type: "submit", turnId }`, `{ type: "recover" }` (`service.recover()`),
 *   `{ type: "release" }` (unblocks a blocked read), `{ type: "exit" }`.
 * worker -> parent: `{ type: "ready" }`, `{ type: "reading", turnId }` (inside the read tool's body,
 *   before it returns), `{ type: "answer", answer }`, `{ type: "recovered", summary }`,
 *   `{ type: "error", message }`.
 *
 * The edit tool's body inserts one row into `<schema>.writes` (committed before it returns): the
 * durable count of writes, whatever process ran them.
 */
import { ToolMessage, type BaseMessage } from "@langchain/core/messages";
import { PostgresSaver } from "@langchain/langgraph-checkpoint-postgres";
import { createAgent, tool } from "langchain";
import pg from "pg";
import { z } from "zod";
import { createDocumentGuardrails, createTurnService } from "arkah-agent-guardrails";
import { PostgresGuardrailStore } from "arkah-agent-guardrails/postgres";
import { ScriptedModel, type ScriptReply } from "arkah-agent-guardrails/testing";
import { TURN_SCOPE, workerTurn, type TurnServiceWorkerCommand, type TurnServiceWorkerReport, type TurnServiceWorkerSpec } from "./turn-service-protocol.js";

const url = process.env.ARKAH_PG_URL;
const spec = JSON.parse(process.argv[2] ?? "null") as TurnServiceWorkerSpec | null;
if (url === undefined || spec === null) throw new Error("usage: ARKAH_PG_URL=... turn-service-worker.ts '<spec JSON>'");

const send = (report: TurnServiceWorkerReport) => {
  process.send?.(report);
};

const store = await PostgresGuardrailStore.open(
  { connectionString: url },
  { schema: spec.schema, now: () => new Date(Date.now() + spec.clockOffsetMs) },
);
const checkpointer = PostgresSaver.fromConnString(url, { schema: spec.checkpoints });
await checkpointer.setup();
const writes = new pg.Pool({ connectionString: url, max: 1 });
writes.on("error", () => undefined);

let release: () => void = () => undefined;
const released = new Promise<void>((resolve) => {
  release = resolve;
});

const readNote = tool(
  async ({ noteId }, runtime) => {
    const turnId = (runtime.context as { arkahTurn?: { turnId?: string } } | undefined)?.arkahTurn?.turnId ?? "";
    if (spec.blockRead !== undefined) {
      send({ type: "reading", turnId });
      if (spec.blockRead === "forever") await new Promise<never>(() => setInterval(() => undefined, 60_000));
      await released;
    }
    return JSON.stringify({ noteId, body: "Buy milk", revision: 3 });
  },
  { name: "read_note", description: "Read a note.", schema: z.object({ noteId: z.string() }) },
);
const editNote = tool(
  async ({ noteId, body }, runtime) => {
    const turnId = (runtime.context as { arkahTurn?: { turnId?: string } } | undefined)?.arkahTurn?.turnId ?? "";
    await writes.query(`INSERT INTO "${spec.schema}".writes (turn_id, worker, note_id, body) VALUES ($1, $2, $3, $4)`, [
      turnId,
      spec.name,
      noteId,
      body,
    ]);
    return "Saved";
  },
  { name: "edit_note", description: "Replace a note's body.", schema: z.object({ noteId: z.string(), body: z.string() }) },
);

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
      tools: { read_note: { kind: "document-read" }, edit_note: { kind: "mutation" } },
    }),
  ],
});
const service = createTurnService({ agent, store, moderate: () => true, leaseMs: spec.leaseMs });

process.on("message", (command: TurnServiceWorkerCommand) => {
  if (command.type === "exit") {
    void Promise.all([store.close(), checkpointer.end(), writes.end()]).finally(() => {
      process.disconnect();
    });
    return;
  }
  if (command.type === "release") {
    release();
    return;
  }
  if (command.type === "recover") {
    service.recover().then(
      (summary) => {
        send({ type: "recovered", summary });
      },
      (error: unknown) => {
        send({ type: "error", message: error instanceof Error ? (error.stack ?? error.message) : String(error) });
      },
    );
    return;
  }
  service.submit({ turn: workerTurn(command.turnId) }).then(
    (answer) => {
      send({ type: "answer", answer });
    },
    (error: unknown) => {
      send({ type: "error", message: error instanceof Error ? (error.stack ?? error.message) : String(error) });
    },
  );
});

send({ type: "ready" });
