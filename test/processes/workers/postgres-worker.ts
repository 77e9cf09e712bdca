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
import pg from "pg";
import { PostgresGuardrailStore } from "arkah-agent-guardrails/postgres";
import { TurnRunner } from "./guarded-turn.js";
import { SCOPE_ID, type PostgresWorkerCommand, type PostgresWorkerReport } from "./postgres-protocol.js";

/** Turns a worker can run: the scripted model has three steps per turn. */
const MAX_TURNS = 1_000;

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
const runner = new TurnRunner(store, MAX_TURNS);
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
  }, SCOPE_ID).then(
    (outcome) => {
      send({ type: "done", outcome });
    },
    (error: unknown) => {
      send({ type: "error", message: error instanceof Error ? (error.stack ?? error.message) : String(error) });
    },
  );
});

send({ type: "ready" });
