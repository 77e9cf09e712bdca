/**
 * A worker process for the PostgreSQL process tests (postgres-race, postgres-crash). Started once
 * with its own `PostgresGuardrailStore` (its own pool, as a separate host would have); runs guarded
 * turns through the real `createAgent` on the parent's command. The write tool records its side
 * effect durably, committed in the `writes` table of the test's schema, before it returns.
 *
 *   ARKAH_PG_URL=... node --import tsx postgres-worker.ts <schema> <worker name>
 *
 * parent -> worker: `{ type: "turn", turnId, hang? }` or `{ type: "exit" }`.
 *   `hang: "after-write"` commits the write, reports `{ type: "wrote" }` and never returns (the
 *   parent SIGKILLs it between the side effect and the settlement); `"before-write"` reports
 *   `{ type: "claimed" }` from inside the tool and never returns, before writing anything.
 * worker -> parent: `{ type: "ready" }`, `{ type: "done", outcome }`, `{ type: "wrote" }`,
 *   `{ type: "claimed" }` or `{ type: "error", message }`.
 */
import { HumanMessage } from "@langchain/core/messages";
import { createAgent, tool } from "langchain";
import pg from "pg";
import { z } from "zod";
import { createDocumentGuardrails, turnContext, type GuardrailStore } from "arkah-agent-guardrails";
import { PostgresGuardrailStore } from "arkah-agent-guardrails/postgres";
import { ScriptedModel, type ScriptStep } from "arkah-agent-guardrails/testing";
import { admit, outcomeOf, read, rename, TOOL_POLICIES, turnInput, userText } from "../../support/fixtures.js";
import {
  SCOPE_ID,
  WRITE_CALL_ID,
  type MutationOutcome,
  type PostgresWorkerCommand,
  type PostgresWorkerReport,
} from "./postgres-protocol.js";

const MAX_TURNS = 1_000;

/**
 * Guarded turns through one compiled agent per process, with the server-wide middleware (each turn
 * passed in `context`), as a server runs it. Every turn the scripted model reads, then renames
 * (the same call ids in every process, so every process claims the same mutation), then answers:
 * three model calls whatever the guard decides. `beforeWrite` runs inside the write tool.
 */
class TurnRunner {
  readonly #store: GuardrailStore;
  readonly #agent;
  #current: { turnId: string; ran: boolean; beforeWrite: () => Promise<void> } | undefined;

  constructor(store: GuardrailStore) {
    this.#store = store;
    const script: ScriptStep[] = [];
    for (let turn = 0; turn < MAX_TURNS; turn++) {
      script.push({ toolCalls: [read("read-1")] }, { toolCalls: [rename(WRITE_CALL_ID)] }, { content: "Renamed." });
    }
    const readDocument = tool(() => JSON.stringify({ title: "Untitled", revision: 0 }), {
      name: "read_document",
      description: "Read the document.",
      schema: z.object({}),
    });
    const renameDocument = tool(
      async () => {
        const current = this.#current;
        if (current === undefined) throw new Error("no turn is running");
        current.ran = true;
        await current.beforeWrite();
        return `renamed in ${current.turnId} by ${String(process.pid)}`;
      },
      {
        name: "rename_document",
        description: "Rename the document.",
        schema: z.object({ title: z.string().min(1), expectedRevision: z.number().int().min(0) }),
      },
    );
    this.#agent = createAgent({
      model: new ScriptedModel(script),
      tools: [readDocument, renameDocument],
      middleware: [
        createDocumentGuardrails({
          store,
          userMessageLabel: "user",
          authorize: () => true,
          tools: { read_document: TOOL_POLICIES.read_document!, rename_document: TOOL_POLICIES.rename_document! },
          logger: { warn: () => undefined },
        }),
      ],
    });
  }

  async run(turnId: string, beforeWrite: () => Promise<void>): Promise<MutationOutcome> {
    const input = turnInput({ scopeId: SCOPE_ID, turnId });
    await admit(this.#store, input);
    const current = { turnId, ran: false, beforeWrite };
    this.#current = current;
    try {
      const { messages } = await this.#agent.invoke(
        { messages: [new HumanMessage(userText(input))] },
        { context: turnContext(input) },
      );
      const outcome = outcomeOf(messages, WRITE_CALL_ID);
      return {
        turnId,
        kind: current.ran ? "executed" : outcome.code === undefined ? "replayed" : "refused",
        code: outcome.code,
        status: outcome.status,
        content: outcome.content,
      };
    } finally {
      this.#current = undefined;
    }
  }
}

const url = process.env.ARKAH_PG_URL;
const [schema, worker] = process.argv.slice(2);
if (url === undefined || schema === undefined || worker === undefined) {
  throw new Error("usage: ARKAH_PG_URL=... postgres-worker.ts <schema> <worker name>");
}

const send = (report: PostgresWorkerReport) => {
  process.send?.(report);
};

const never = () =>
  new Promise<never>(() => {
    // Keeps the process alive until it is killed.
    setInterval(() => undefined, 60_000);
  });

const store = await PostgresGuardrailStore.open({ connectionString: url }, { schema });
const runner = new TurnRunner(store);
const writes = new pg.Pool({ connectionString: url, max: 1 });
writes.on("error", () => undefined);

async function write(turnId: string): Promise<void> {
  // A few ms of jitter widens the window in which other processes find the claim pending.
  await new Promise((resolve) => setTimeout(resolve, Math.floor(Math.random() * 4)));
  await writes.query(`INSERT INTO "${schema}".writes (turn_id, worker, pid) VALUES ($1, $2, $3)`, [
    turnId,
    worker,
    process.pid,
  ]);
}

process.on("message", (command: PostgresWorkerCommand) => {
  if (command.type === "exit") {
    void Promise.all([store.close(), writes.end()]).finally(() => {
      process.disconnect();
    });
    return;
  }
  const { turnId, hang } = command;
  runner.run(turnId, async () => {
    if (hang === "before-write") {
      send({ type: "claimed", turnId });
      await never();
    }
    await write(turnId);
    if (hang === "after-write") {
      send({ type: "wrote", turnId });
      await never();
    }
  }).then(
    (outcome) => {
      send({ type: "done", outcome });
    },
    (error: unknown) => {
      send({ type: "error", message: error instanceof Error ? (error.stack ?? error.message) : String(error) });
    },
  );
});

send({ type: "ready" });
