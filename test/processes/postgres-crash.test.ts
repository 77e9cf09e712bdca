/**
 * A worker process is SIGKILLed inside the write tool, between the claim and the settlement: once
 * after committing its write, once before writing anything. After a restart (a fresh process) the
 * turn is refused `mutation_pending`, and nothing runs twice: the durable `writes` table keeps what
 * the killed process did, and no later attempt adds to it. The claim stays pending (closed) until an
 * operator reconciles it; a `completed` reconciliation is then replayed, still without running.
 */
import pg from "pg";
import { afterAll, beforeAll, expect, it } from "vitest";
import { PostgresGuardrailStore } from "arkah-agent-guardrails/postgres";
import { SCOPE_ID, WRITE_CALL_ID } from "./workers/postgres-protocol.js";
import { startPostgresWorker, type PostgresWorker } from "../support/postgres-workers.js";
import { adminPool, dropSchema, freshSchema, describePostgres, requirePostgres } from "../support/postgres.js";

requirePostgres();

describePostgres("PostgreSQL: a worker killed between claim and settlement", (url) => {
  const schema = freshSchema("arkah_crash");
  let admin: pg.Pool;
  let store: PostgresGuardrailStore;
  const started: PostgresWorker[] = [];

  const start = async (name: string) => {
    const worker = startPostgresWorker(schema, name);
    started.push(worker);
    await worker.next((report) => report.type === "ready");
    return worker;
  };

  /** Runs the turn in `worker` to the end and returns its outcome. */
  const runTurn = async (worker: PostgresWorker, turnId: string) => {
    const done = worker.next((report) => report.type === "done" || report.type === "error");
    worker.send({ type: "turn", turnId });
    const report = await done;
    if (report.type !== "done") throw new Error(`worker failed: ${JSON.stringify(report)}`);
    return report.outcome;
  };

  const writesOf = async (turnId: string) =>
    (await admin.query<{ worker: string }>(`SELECT worker FROM "${schema}".writes WHERE turn_id = $1`, [turnId])).rows.map(
      (row) => row.worker,
    );

  beforeAll(async () => {
    admin = adminPool();
    store = await PostgresGuardrailStore.open({ connectionString: url }, { schema });
    await admin.query(`CREATE TABLE "${schema}".writes (turn_id text NOT NULL, worker text NOT NULL, pid integer NOT NULL)`);
  });

  afterAll(async () => {
    await Promise.all(started.map((worker) => worker.stop()));
    await store.close();
    await dropSchema(admin, schema);
    await admin.end();
  });

  it.each([
    ["after its write committed", "after-write", "wrote", ["killed"]],
    ["before it wrote anything", "before-write", "claimed", []],
  ] as const)(
    "killed %s: a restarted worker gets mutation_pending, and the write never runs again",
    async (_when, hang, signal, expectedWrites) => {
      const turnId = `crash-${hang}`;
      const victim = await start("killed");
      const reached = victim.next((report) => report.type === signal || report.type === "error" || report.type === "done");
      victim.send({ type: "turn", turnId, hang });
      expect(await reached).toEqual({ type: signal, turnId });
      victim.child.kill("SIGKILL");
      expect(await victim.exited).toEqual({ code: null, signal: "SIGKILL" });
      expect(await writesOf(turnId)).toEqual(expectedWrites);

      // The claim outlived the process: pending, closed.
      const unresolved = (await store.listUnresolved()).filter((entry) => entry.toolCallId === WRITE_CALL_ID && entry.state === "pending");
      expect(unresolved.map((entry) => entry.scopeId)).toContain(SCOPE_ID);

      // Restarted: refused, and refused again on a retry; nothing runs.
      const restarted = await start("restarted");
      for (let attempt = 0; attempt < 2; attempt++) {
        expect(await runTurn(restarted, turnId)).toMatchObject({ kind: "refused", code: "mutation_pending", status: "error" });
      }
      expect(await writesOf(turnId)).toEqual(expectedWrites);

      // The operator reconciles: the write did or did not happen, as the writes table shows.
      const pending = (await store.listUnresolved()).find((entry) => entry.state === "pending");
      if (pending === undefined) throw new Error("no pending claim");
      if (expectedWrites.length > 0) {
        const result = { content: "renamed (reconciled by an operator)", status: "success" as const };
        expect(
          await store.reconcileMutation({ turnKey: pending.turnKey, resolution: "completed", result, operatorRef: `op-${hang}` }),
        ).toEqual({ reconciled: true, state: "pending" });
        expect(await runTurn(restarted, turnId)).toMatchObject({ kind: "replayed", status: "success", content: result.content });
        expect(await writesOf(turnId)).toEqual(expectedWrites);
      } else {
        expect(
          await store.reconcileMutation({ turnKey: pending.turnKey, resolution: "no-effect", operatorRef: `op-${hang}` }),
        ).toEqual({ reconciled: true, state: "pending" });
        // The slot reopened: the write runs now, once.
        expect(await runTurn(restarted, turnId)).toMatchObject({ kind: "executed", status: "success" });
        expect(await writesOf(turnId)).toEqual(["restarted"]);
      }
      await restarted.stop();
      expect(await store.listUnresolved()).toEqual([]);
    },
    180_000,
  );
});
