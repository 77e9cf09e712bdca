/**
 * The turn service across worker processes on one real PostgreSQL: separate OS processes, each with
 * its own store and checkpointer pools, submit the same turn.
 * - Two workers at once: one runs the turn, the other answers `running` and starts nothing; after
 *   it finished, a retry on the other worker answers the stored outcome, replayed.
 * - A worker SIGKILLed mid-run (blocked inside the read tool's body, before the write) holds the
 *   turn only until its lease expires: another worker (whose clock is past the lease) takes it
 *   over, resumes from the checkpoint and completes it with exactly one write.
 * - Leases that track liveness (real clocks, a short lease): a run three leases long, its worker
 *   renewing, is never taken over by other workers' `submit` or `recover`; a SIGKILLed worker's
 *   turn is recovered by one of three workers calling `recover()` once its lease ran out, with one
 *   write.
 * - A worker SIGKILLed inside the write body, after its write committed: a restarted worker's
 *   `recover()` completes the turn through the tool's `confirm`, with that one write and no
 *   operator (turn-service-support.ts; the same scenario runs on SQLite).
 */
import { PostgresSaver } from "@langchain/langgraph-checkpoint-postgres";
import type pg from "pg";
import { afterAll, beforeAll, expect, it } from "vitest";
import { PostgresGuardrailStore } from "arkah-agent-guardrails/postgres";
import { turnKey } from "arkah-agent-guardrails";
import { killInWriteThenRecover, recoverOn as recover, submitTo as submit, turnServiceWorkers, type TurnServiceWorker } from "./turn-service-support.js";
import { workerTurn } from "./workers/turn-service-protocol.js";
import { adminPool, dropSchema, freshSchema, describePostgres, requirePostgres } from "../support/postgres.js";

requirePostgres();

const LEASE_MS = 600_000;
/** The lease of the liveness tests, on the real clock: renewed every second. */
const SHORT_LEASE_MS = 3_000;

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describePostgres("PostgreSQL: the turn service across worker processes", (url) => {
  const schema = freshSchema("arkah_turnsvc");
  const checkpoints = `${schema}_lg`;
  let admin: pg.Pool;
  let store: PostgresGuardrailStore;
  const workers = turnServiceWorkers({ kind: "postgres", schema, checkpoints }, LEASE_MS);
  const start = workers.start;

  const writesOf = async (turnId: string) =>
    (await admin.query<{ worker: string }>(`SELECT worker FROM "${schema}".writes WHERE turn_id = $1`, [turnId])).rows.map((row) => row.worker);

  beforeAll(async () => {
    admin = adminPool();
    store = await PostgresGuardrailStore.open({ connectionString: url }, { schema });
    // The write service's table: one row per mutationKey (a key it has seen is not written again).
    await admin.query(
      `CREATE TABLE "${schema}".writes (mutation_key text PRIMARY KEY, turn_id text NOT NULL, worker text NOT NULL, note_id text NOT NULL, body text NOT NULL)`,
    );
    // The checkpointer's tables once, before the workers open it.
    const saver = PostgresSaver.fromConnString(url, { schema: checkpoints });
    await saver.setup();
    await saver.end();
  }, 60_000);

  afterAll(async () => {
    await workers.stopAll();
    await store.close();
    await dropSchema(admin, schema);
    await dropSchema(admin, checkpoints);
    await admin.end();
  });

  it("two workers submit one turn: one runs it, the other answers running; a later retry replays the outcome", async () => {
    const turnId = "race-1";
    const runner = await start("runner", { blockRead: "until-release" });
    const other = await start("other");
    const reading = runner.next((report) => report.type === "reading" || report.type === "error");
    const answered = runner.next((report) => report.type === "answer" || report.type === "error");
    runner.child.send({ type: "submit", turnId });
    expect(await reading).toEqual({ type: "reading", turnId });

    expect(await submit(other, turnId)).toEqual({ status: "running", turnKey: turnKey(workerTurn(turnId)) });
    runner.child.send({ type: "release" });
    const report = await answered;
    if (report.type !== "answer") throw new Error(JSON.stringify(report));
    expect(report.answer).toMatchObject({ status: "completed", replayed: false, answer: "Done." });
    expect(await writesOf(turnId)).toEqual(["runner"]);

    expect(await submit(other, turnId)).toEqual({ ...report.answer, replayed: true });
    expect(await writesOf(turnId)).toEqual(["runner"]);
  }, 120_000);

  it("a worker SIGKILLed mid-run is taken over after its lease: the turn completes from the checkpoint with one write", async () => {
    const turnId = "killed-1";
    const victim = await start("victim", { blockRead: "forever" });
    const reading = victim.next((report) => report.type === "reading" || report.type === "error");
    victim.child.send({ type: "submit", turnId });
    expect(await reading).toEqual({ type: "reading", turnId });
    victim.child.kill("SIGKILL");
    expect(await victim.exited).toEqual({ code: null, signal: "SIGKILL" });
    expect((await store.getTurn(turnKey(workerTurn(turnId))))?.state).toBe("running");

    // Within the lease another worker answers running and runs nothing.
    const early = await start("early");
    expect(await submit(early, turnId)).toMatchObject({ status: "running" });
    // A worker whose clock is past the lease takes the turn over.
    const later = await start("later", { clockOffsetMs: LEASE_MS + 1_000 });
    const answer = await submit(later, turnId);
    expect(answer).toMatchObject({ status: "completed", replayed: false });
    expect(answer.status === "completed" ? answer.calls.map((call) => [call.tool, call.status]) : []).toEqual([
      ["read_note", "success"],
      ["edit_note", "success"],
    ]);
    expect(await writesOf(turnId)).toEqual(["later"]);
    // One admission: the receipt the killed worker stored was reused.
    expect((await store.getReceipt(turnKey(workerTurn(turnId))))?.allowed).toBe(true);
    expect(await submit(early, turnId)).toEqual({ ...answer, replayed: true });
    expect(await writesOf(turnId)).toEqual(["later"]);
  }, 120_000);

  it("a run three leases long, its worker renewing, is never taken over by other workers' submit or recover", async () => {
    const turnId = "long-1";
    const key = turnKey(workerTurn(turnId));
    const runner = await start("long-runner", { blockRead: "until-release", leaseMs: SHORT_LEASE_MS });
    const others = [await start("long-other-1", { leaseMs: SHORT_LEASE_MS }), await start("long-other-2", { leaseMs: SHORT_LEASE_MS })];
    const reading = runner.next((report) => report.type === "reading" || report.type === "error");
    const answered = runner.next((report) => report.type === "answer" || report.type === "error");
    runner.child.send({ type: "submit", turnId });
    expect(await reading).toEqual({ type: "reading", turnId });
    const firstExpiry = Date.parse((await store.getTurn(key))?.lease?.expiresAt ?? "");
    // Until the runner's renewals carried its lease two more leases past the first: all that
    // time, the others find it running, and recovery finds nothing to take.
    for (;;) {
      for (const other of others) {
        expect(await recover(other)).toEqual({ turns: [], counts: {} });
        expect(await submit(other, turnId)).toEqual({ status: "running", turnKey: key });
      }
      const record = await store.getTurn(key);
      expect(record?.state).toBe("running");
      if (Date.parse(record?.lease?.expiresAt ?? "") >= firstExpiry + 2 * SHORT_LEASE_MS) break;
      await pause(250);
    }
    runner.child.send({ type: "release" });
    const report = await answered;
    if (report.type !== "answer") throw new Error(JSON.stringify(report));
    expect(report.answer).toMatchObject({ status: "completed", replayed: false });
    expect(await writesOf(turnId)).toEqual(["long-runner"]);
  }, 120_000);

  it("a SIGKILLed worker's turn is recovered by one of three workers calling recover once its lease ran out: one write", async () => {
    const turnId = "recovered-1";
    const key = turnKey(workerTurn(turnId));
    const victim = await start("doomed", { blockRead: "forever", leaseMs: SHORT_LEASE_MS });
    const reading = victim.next((report) => report.type === "reading" || report.type === "error");
    victim.child.send({ type: "submit", turnId });
    expect(await reading).toEqual({ type: "reading", turnId });
    victim.child.kill("SIGKILL");
    expect(await victim.exited).toEqual({ code: null, signal: "SIGKILL" });
    const sweepers = [
      await start("sweeper-1", { leaseMs: SHORT_LEASE_MS }),
      await start("sweeper-2", { leaseMs: SHORT_LEASE_MS }),
      await start("sweeper-3", { leaseMs: SHORT_LEASE_MS }),
    ];
    // Every sweeper calls recover on its own interval until the turn is finished.
    const seen: { worker: string; status: string }[] = [];
    const sweep = async (worker: TurnServiceWorker, name: string) => {
      while ((await store.getTurn(key))?.state === "running") {
        for (const turn of (await recover(worker)).turns) seen.push({ worker: name, status: turn.status });
        await pause(200);
      }
    };
    await Promise.all(sweepers.map((worker, i) => sweep(worker, `sweeper-${String(i + 1)}`)));
    const record = await store.getTurn(key);
    expect(record?.state).toBe("completed");
    const completers = seen.filter((entry) => entry.status === "completed").map((entry) => entry.worker);
    expect(completers.length).toBeGreaterThanOrEqual(1);
    expect(seen.every((entry) => entry.status === "completed" || entry.status === "running")).toBe(true);
    // Exactly one write, by a sweeper that recovered the turn; the killed worker wrote nothing.
    const writes = await writesOf(turnId);
    expect(writes).toHaveLength(1);
    expect(completers).toContain(writes[0]);
    expect(await submit(sweepers[0] as TurnServiceWorker, turnId)).toMatchObject({ status: "completed", replayed: true });
    expect(await writesOf(turnId)).toEqual(writes);
  }, 120_000);

  it("a worker SIGKILLed inside the write body, after its write committed: a restarted worker's recover() with confirm completes the turn with that one write, no operator", async () => {
    await killInWriteThenRecover({ workers, store, leaseMs: LEASE_MS, writesOf }, "killed-in-write-1");
  }, 120_000);
});
