/**
 * 8 OS processes, each with its own `PostgresGuardrailStore` and pool (as 8 hosts would have), race
 * to run the same guarded mutation (same turn, same call id) through the real `createAgent`, for
 * 200 turns against one database. Every process starts turn N on the parent's command, so they
 * really race. The write tool commits a row to `writes` before it returns: the durable count.
 *
 * Exactly one write per turn; every other process is refused `mutation_pending` (the winner had
 * not settled yet) or gets the winner's stored result replayed, never a second run.
 */
import pg from "pg";
import { afterAll, beforeAll, expect, it } from "vitest";
import { PostgresGuardrailStore } from "arkah-agent-guardrails/postgres";
import type { MutationOutcome } from "./workers/postgres-protocol.js";
import { startPostgresWorker, type PostgresWorker } from "../support/postgres-workers.js";
import { adminPool, dropSchema, freshSchema, describePostgres, requirePostgres } from "../support/postgres.js";

requirePostgres();

const PROCESSES = 8;
const TURNS = 200;

describePostgres(`PostgreSQL: ${String(PROCESSES)} processes race for the same mutation`, (url) => {
  const schema = freshSchema("arkah_race");
  let admin: pg.Pool;
  let workers: PostgresWorker[] = [];

  beforeAll(async () => {
    admin = adminPool();
    // Migrated once here; the workers' concurrent opens then find it current.
    const store = await PostgresGuardrailStore.open({ connectionString: url }, { schema });
    await store.close();
    await admin.query(`CREATE TABLE "${schema}".writes (turn_id text NOT NULL, worker text NOT NULL, pid integer NOT NULL)`);
    workers = Array.from({ length: PROCESSES }, (_, index) => startPostgresWorker(schema, `w${String(index)}`));
    await Promise.all(workers.map((worker) => worker.next((report) => report.type === "ready")));
    // Generous: 8 processes load langchain at once, maybe beside another suite doing the same.
  }, 180_000);

  afterAll(async () => {
    await Promise.all(workers.map((worker) => worker.stop()));
    await dropSchema(admin, schema);
    await admin.end();
  });

  it(`runs each of ${String(TURNS)} turns' write exactly once; the others are pending or replayed`, async () => {
    const outcomes: MutationOutcome[][] = [];
    for (let turn = 0; turn < TURNS; turn++) {
      const turnId = `race-${String(turn)}`;
      const reports = await Promise.all(
        workers.map((worker) => {
          const done = worker.next((report) => report.type === "done" || report.type === "error");
          worker.send({ type: "turn", turnId });
          return done;
        }),
      );
      outcomes.push(
        reports.map((report, index) => {
          if (report.type !== "done") {
            throw new Error(`worker ${String(index)} failed on ${turnId}: ${report.type === "error" ? report.message : report.type}`);
          }
          return report.outcome;
        }),
      );
    }

    // The durable count: one committed write per turn, by the process that says it executed.
    const { rows } = await admin.query<{ turn_id: string; writes: string; workers: string[] }>(
      `SELECT turn_id, count(*) AS writes, array_agg(worker) AS workers FROM "${schema}".writes GROUP BY turn_id`,
    );
    expect(rows).toHaveLength(TURNS);
    expect(rows.filter((row) => row.writes !== "1")).toEqual([]);

    const tally = { executed: 0, replayed: 0, pending: 0 };
    for (const [turn, perProcess] of outcomes.entries()) {
      const executed = perProcess.filter((outcome) => outcome.kind === "executed");
      expect(executed, `turn ${String(turn)}`).toHaveLength(1);
      const winner = executed[0] as MutationOutcome;
      expect(winner.status).toBe("success");
      const winnerIndex = perProcess.indexOf(winner);
      expect(rows.find((row) => row.turn_id === winner.turnId)?.workers).toEqual([`w${String(winnerIndex)}`]);
      for (const outcome of perProcess) {
        if (outcome === winner) continue;
        if (outcome.kind === "replayed") {
          expect(outcome).toMatchObject({ status: "success", content: winner.content });
          tally.replayed++;
        } else {
          expect(outcome).toMatchObject({ kind: "refused", code: "mutation_pending", status: "error" });
          tally.pending++;
        }
      }
      tally.executed++;
    }
    expect(tally.executed).toBe(TURNS);
    expect(tally.replayed + tally.pending).toBe(TURNS * (PROCESSES - 1));
    console.info(`postgres race: ${JSON.stringify(tally)}`);

    // Every winner settled: nothing is left pending or unknown.
    const store = await PostgresGuardrailStore.open({ connectionString: url }, { schema });
    try {
      expect(await store.listUnresolved()).toEqual([]);
    } finally {
      await store.close();
    }
  }, 300_000);
});
