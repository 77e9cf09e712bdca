/**
 * The turn-service process tests' shared part (turn-service-postgres.test.ts,
 * turn-service-sqlite.test.ts): starting turn-service worker processes on one backend, asking
 * them to submit or recover, and the crash-inside-the-write scenario both backends run.
 */
import { expect } from "vitest";
import { turnKey, type GuardrailStore, type TurnAnswer, type RecoverySummary } from "arkah-agent-guardrails";
import { startWorker, type Worker } from "./support.js";
import { workerTurn, WRITE_RESULT, type TurnServiceStoreSpec, type TurnServiceWorkerReport, type TurnServiceWorkerSpec } from "./workers/turn-service-protocol.js";

export type TurnServiceWorker = Worker<TurnServiceWorkerReport>;

/** Worker processes on `store`; `stopAll` SIGKILLs the ones still alive and waits for every exit. */
export function turnServiceWorkers(store: TurnServiceStoreSpec, leaseMs: number) {
  const started: TurnServiceWorker[] = [];
  return {
    async start(name: string, options: Partial<Omit<TurnServiceWorkerSpec, "store" | "name">> = {}): Promise<TurnServiceWorker> {
      const spec: TurnServiceWorkerSpec = { store, name, clockOffsetMs: 0, leaseMs, ...options };
      const worker = startWorker<TurnServiceWorkerReport>("turn-service-worker.ts", [JSON.stringify(spec)]);
      started.push(worker);
      const ready = await worker.next((report) => report.type === "ready" || report.type === "error");
      if (ready.type !== "ready") throw new Error(`worker ${name} failed to start: ${JSON.stringify(ready)}`);
      return worker;
    },
    async stopAll(): Promise<void> {
      for (const worker of started) if (worker.child.exitCode === null && worker.child.signalCode === null) worker.child.kill("SIGKILL");
      await Promise.all(started.map((worker) => worker.exited));
    },
  };
}

/** The worker's answer to a `submit` of the turn. */
export async function submitTo(worker: TurnServiceWorker, turnId: string): Promise<TurnAnswer> {
  const answered = worker.next((report) => report.type === "answer" || report.type === "error");
  worker.child.send({ type: "submit", turnId });
  const report = await answered;
  if (report.type !== "answer") throw new Error(`worker failed: ${JSON.stringify(report)}`);
  return report.answer;
}

/** What the worker's `service.recover()` did. */
export async function recoverOn(worker: TurnServiceWorker): Promise<RecoverySummary> {
  const answered = worker.next((report) => report.type === "recovered" || report.type === "error");
  worker.child.send({ type: "recover" });
  const report = await answered;
  if (report.type !== "recovered") throw new Error(`worker failed: ${JSON.stringify(report)}`);
  return report.summary;
}

/** What the crash scenario needs of a backend. */
export interface CrashWorld {
  readonly workers: ReturnType<typeof turnServiceWorkers>;
  /** The test's own view of the guardrail store the workers use. */
  readonly store: GuardrailStore;
  /** The workers' lease, in ms: the restarted worker's clock is past it. */
  readonly leaseMs: number;
  /** The write service's rows for the turn: the worker that wrote each. */
  writesOf(turnId: string): Promise<string[]>;
}

/**
 * A worker is SIGKILLed inside the edit tool's body after its write committed, before the tool
 * returned: the claim stays `pending`, the turn `running`. A worker restarted on the same store and
 * checkpointer calls `recover()`: within the lease it takes nothing; once the lease expired (its
 * clock is past it) it takes the turn over and resumes it from the checkpoint; the edit call meets
 * its own pending claim, the tool's `confirm` asks the write service by `mutationKey`, which has
 * the write: the claim is settled `complete` by `confirm:edit_note` and replayed. The turn ends
 * completed with the one write, no operator reconciled anything, and a retry of the key replays.
 */
export async function killInWriteThenRecover(world: CrashWorld, turnId: string): Promise<void> {
  const key = turnKey(workerTurn(turnId));
  const victim = await world.workers.start("victim", { blockAfterWrite: true, confirm: true });
  const wrote = victim.next((report) => report.type === "wrote" || report.type === "error");
  victim.child.send({ type: "submit", turnId });
  expect(await wrote).toEqual({ type: "wrote", turnId });
  expect(victim.child.kill("SIGKILL")).toBe(true);
  expect(await victim.exited).toEqual({ code: null, signal: "SIGKILL" });
  expect((await world.store.getTurn(key))?.state).toBe("running");
  expect((await world.store.getMutation(key))?.state, "the write's claim is left pending by the crash").toBe("pending");
  expect(await world.writesOf(turnId)).toEqual(["victim"]);

  // Restarted within the lease: nothing to recover yet (the dead worker's lease still holds).
  const early = await world.workers.start("early", { confirm: true });
  expect(await recoverOn(early)).toEqual({ turns: [], counts: {} });
  // Restarted once the lease expired: recover takes the turn over and completes it.
  const restarted = await world.workers.start("restarted", { confirm: true, clockOffsetMs: world.leaseMs + 1_000 });
  expect(await recoverOn(restarted)).toEqual({ turns: [{ turnKey: key, status: "completed" }], counts: { completed: 1 } });

  const record = await world.store.getTurn(key);
  expect(record?.state).toBe("completed");
  expect(record?.outcome).toMatchObject({
    status: "completed",
    answer: "Done.",
    calls: [
      { tool: "read_note", callId: "r1", status: "success" },
      { tool: "edit_note", callId: "w1", status: "success" },
    ],
    mutation: { state: "complete", toolName: "edit_note", toolCallId: "w1" },
  });
  expect(await world.store.getMutation(key)).toMatchObject({ state: "complete", result: { content: WRITE_RESULT, status: "success" } });
  expect(await world.store.listUnresolved()).toEqual([]);
  // Settled by the tool's confirm, once; no operator reconciled anything.
  const reconciled = (await world.store.readAudit({ turnKey: key })).filter((event) => event.decision === "reconciled");
  expect(reconciled).toMatchObject([{ action: "completed", operatorRef: "confirm:edit_note" }]);
  expect(await world.writesOf(turnId)).toEqual(["victim"]);

  // A retry of the key, on any worker, replays the outcome and writes nothing.
  expect(await submitTo(early, turnId)).toMatchObject({ status: "completed", replayed: true, mutation: { state: "complete" } });
  expect(await world.writesOf(turnId)).toEqual(["victim"]);
}
