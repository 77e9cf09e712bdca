/**
 * The soak (issue 12, item 4): many guarded read-then-write turns through the real middleware, to
 * see what a long run does to memory, speed and correctness. Not a test: nothing here is timed in
 * the test suite; it runs in `pnpm bench` (a shorter final stage) and alone:
 *
 *   pnpm bench:soak            full counts: 100,000 in-memory turns, 10,000 on SQLite, 10,000 on PostgreSQL
 *   pnpm bench:soak --stage    the counts of pnpm bench's final stage: 20,000 / 2,000 / 2,000
 *   pnpm bench:soak --quick    a few hundred of each, to check the soak runs
 *
 * - in-memory: one process, one agent, turns back to back on an `InMemoryGuardrailStore` whose
 *   clock advances one second a turn; `prune` runs every PRUNE_EVERY turns with a retention of
 *   RETENTION_TURNS turns. Heap used and RSS are sampled after a full GC at every prune.
 * - SQLite (synchronous=FULL, the default) and PostgreSQL: WORKERS OS processes, each with its
 *   own store (and pool), run their share of distinct turns back to back; then each re-runs every
 *   tenth turn another worker wrote, which must replay the stored result and write nothing.
 *   Reported: turns/s, latency p50/p99 (admitTurn + invoke), errors (must be 0) and writes (each
 *   turn's write ran exactly once, counted where it ran).
 *
 * PostgreSQL runs on ARKAH_PG_URL when set, otherwise on a throwaway embedded server.
 */
import { fork, type ChildProcess } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { InMemoryGuardrailStore } from "arkah-agent-guardrails";
import { PostgresGuardrailStore } from "arkah-agent-guardrails/postgres";
import { SqliteGuardrailStore } from "arkah-agent-guardrails/sqlite";
import { startEmbeddedPostgres } from "../scripts/postgres/embedded.js";
import { GUARD_MEMORY_TARGETS, measureGuardMemory, MIN_GUARD_MEMORY_TURNS, type GuardMemoryRow } from "./guard-memory.js";
import { collectGarbage, log, quantile, type ResultRow } from "./harness.js";
import { postgresUrl } from "./postgres.js";
import { plainAgent, SoakAgent, soakInput, soakTurnId, type SoakCommand, type SoakReport } from "./soak-turns.js";

export interface SoakProfile {
  readonly memoryTurns: number;
  readonly sqliteTurns: number;
  readonly postgresTurns: number;
}

/** `pnpm bench:soak`: the issue's counts. */
export const FULL: SoakProfile = { memoryTurns: 100_000, sqliteTurns: 10_000, postgresTurns: 10_000 };
/** The final stage of `pnpm bench`: a few minutes at most on 2 cores. */
export const STAGE: SoakProfile = { memoryTurns: 20_000, sqliteTurns: 2_000, postgresTurns: 2_000 };
/** `--quick`: checks the soak runs. */
export const QUICK: SoakProfile = { memoryTurns: 2_000, sqliteTurns: 200, postgresTurns: 200 };

export const WORKERS = 4;
const PRUNE_EVERY = 1_000;
const RETENTION_TURNS = 600;
const REPLAY_EVERY = 10;

export interface MemoryPoint {
  readonly turns: number;
  readonly heapUsedMb: number;
  readonly rssMb: number;
}

export interface MemorySoak {
  readonly turns: number;
  readonly turnsPerSecond: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly errors: number;
  readonly writesExactlyOnce: boolean;
  readonly pruned: number;
  readonly auditEvents: number;
  readonly points: readonly MemoryPoint[];
  /** Heap growth per turn between the first sample after warm-up and the last, in bytes. */
  readonly heapBytesPerTurn: number;
  /** The same growth for the same agent without the guardrails, over `baselineTurns` invokes. */
  readonly baselineHeapBytesPerTurn: number;
  readonly baselineTurns: number;
}

/** Heap growth per invoke of the agent without the guardrails (run first, in the same process). */
async function baselineGrowth(turns: number): Promise<number> {
  const agent = plainAgent();
  const warmup = Math.max(1, Math.round(turns / 4));
  for (let n = 0; n < warmup; n++) await agent.turn();
  collectGarbage();
  const before = process.memoryUsage().heapUsed;
  for (let n = 0; n < turns; n++) await agent.turn();
  collectGarbage();
  return (process.memoryUsage().heapUsed - before) / turns;
}

export interface WorkersSoak {
  readonly store: string;
  readonly turns: number;
  readonly workers: number;
  readonly turnsPerSecond: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly errors: number;
  readonly errorSamples: readonly string[];
  /** Turns whose write ran exactly once / more than once / never. */
  readonly writtenOnce: number;
  readonly writtenTwice: number;
  readonly neverWritten: number;
  readonly replays: number;
  readonly replayWrites: number;
  readonly replayOutcomes: Record<string, number>;
}

export interface SoakResult {
  readonly memory: MemorySoak;
  readonly sqlite: WorkersSoak;
  readonly postgres: WorkersSoak;
  /** What each store keeps per turn after prune (bench/guard-memory.ts). */
  readonly guardMemory: readonly GuardMemoryRow[];
  readonly seconds: number;
}

const mb = (bytes: number) => bytes / 1_048_576;

/** 100,000 turns (or the profile's) on the in-memory store, pruned on a schedule. */
export async function soakMemory(turns: number): Promise<MemorySoak> {
  const baselineTurns = Math.min(5_000, Math.max(500, Math.round(turns / 10)));
  const baselineHeapBytesPerTurn = await baselineGrowth(baselineTurns);
  let clock = Date.parse("2031-01-01T00:00:00.000Z");
  const store = new InMemoryGuardrailStore({ now: () => new Date(clock) });
  const agent = new SoakAgent(store);
  const latencies = new Float64Array(turns);
  const points: MemoryPoint[] = [];
  const sample = (done: number) => {
    collectGarbage();
    const usage = process.memoryUsage();
    points.push({ turns: done, heapUsedMb: mb(usage.heapUsed), rssMb: mb(usage.rss) });
  };
  let errors = 0;
  let pruned = 0;
  sample(0);
  const started = performance.now();
  for (let n = 0; n < turns; n++) {
    clock += 1_000;
    const turnId = `mem-t${String(n)}`;
    const begin = performance.now();
    try {
      const outcome = await agent.turn(soakInput(turnId, `doc-${String(n % 64)}`));
      if (outcome !== "executed") errors++;
    } catch {
      errors++;
    }
    latencies[n] = performance.now() - begin;
    if ((n + 1) % PRUNE_EVERY === 0) {
      pruned += (await store.prune({ olderThan: new Date(clock - RETENTION_TURNS * 1_000).toISOString() })).turns;
      // The turn ids seen so far are kept only to count writes; drop those already checked.
      for (const count of agent.writes.values()) if (count !== 1) errors++;
      agent.writes.clear();
      if ((n + 1) % Math.max(PRUNE_EVERY, turns / 20) === 0 || n + 1 === turns) sample(n + 1);
    }
  }
  const seconds = (performance.now() - started) / 1000;
  const writesExactlyOnce = [...agent.writes.values()].every((count) => count === 1) && errors === 0;
  let auditEvents = 0;
  for (let page = await store.readAudit({ limit: 10_000 }); page.length > 0; ) {
    auditEvents += page.length;
    page = await store.readAudit({ afterSeq: page.at(-1)?.seq ?? 0, limit: 10_000 });
  }
  const values = [...latencies];
  const warm = points.find((point) => point.turns >= turns / 5) ?? points[0];
  const last = points.at(-1);
  const heapBytesPerTurn =
    warm === undefined || last === undefined || last.turns === warm.turns
      ? 0
      : ((last.heapUsedMb - warm.heapUsedMb) * 1_048_576) / (last.turns - warm.turns);
  return {
    turns,
    turnsPerSecond: turns / seconds,
    p50Ms: quantile(values, 0.5),
    p99Ms: quantile(values, 0.99),
    errors,
    writesExactlyOnce,
    pruned,
    auditEvents,
    points,
    heapBytesPerTurn,
    baselineHeapBytesPerTurn,
    baselineTurns,
  };
}

const WORKER_ENTRY = fileURLToPath(new URL("./soak-worker.ts", import.meta.url));

interface Child {
  readonly process: ChildProcess;
  next(): Promise<SoakReport>;
  send(command: SoakCommand): void;
}

function startChild(): Child {
  const child = fork(WORKER_ENTRY, [], { stdio: ["ignore", "inherit", "inherit", "ipc"] });
  const queue: SoakReport[] = [];
  const waiting: ((report: SoakReport) => void)[] = [];
  child.on("message", (message) => {
    const report = message as SoakReport;
    const waiter = waiting.shift();
    if (waiter === undefined) queue.push(report);
    else waiter(report);
  });
  return {
    process: child,
    send: (command) => child.send(command),
    next: () =>
      new Promise<SoakReport>((resolve, reject) => {
        const queued = queue.shift();
        if (queued !== undefined) {
          resolve(queued);
          return;
        }
        const onExit = (code: number | null) => {
          reject(new Error(`soak: worker process exited (${String(code)}) before answering`));
        };
        child.once("exit", onExit);
        waiting.push((report) => {
          child.off("exit", onExit);
          resolve(report);
        });
      }),
  };
}

function expectReport<T extends SoakReport["type"]>(report: SoakReport, type: T): Extract<SoakReport, { type: T }> {
  if (report.type === "failed") throw new Error(`soak: a worker failed: ${report.message}`);
  if (report.type !== type) throw new Error(`soak: expected ${type}, got ${report.type}`);
  return report as Extract<SoakReport, { type: T }>;
}

/** `turns` distinct turns over WORKERS processes on one store, then every tenth replayed by another worker. */
async function soakWorkers(label: string, kind: "sqlite" | "postgres", target: string, schema: string, turns: number): Promise<WorkersSoak> {
  const children = Array.from({ length: WORKERS }, () => startChild());
  try {
    const share = Math.ceil(turns / WORKERS);
    const started = performance.now();
    children.forEach((child, worker) => {
      child.send({ type: "run", kind, target, schema, worker, turns: Math.min(share, turns - worker * share) });
    });
    const ran = await Promise.all(children.map(async (child) => expectReport(await child.next(), "ran")));
    const seconds = (performance.now() - started) / 1000;

    const writes = new Map<string, number>();
    for (const report of ran) for (const [turnId, count] of report.writes) writes.set(turnId, (writes.get(turnId) ?? 0) + count);
    let writtenOnce = 0;
    let writtenTwice = 0;
    let neverWritten = 0;
    for (let worker = 0; worker < WORKERS; worker++) {
      for (let n = 0; n < Math.min(share, turns - worker * share); n++) {
        const count = writes.get(soakTurnId(worker, n)) ?? 0;
        if (count === 1) writtenOnce++;
        else if (count === 0) neverWritten++;
        else writtenTwice++;
      }
    }

    // Every tenth turn of worker w is retried by worker w+1: a replay, never a second write.
    const replaying = children.map((child, worker) => {
      const owner = (worker + WORKERS - 1) % WORKERS;
      const turnIds: string[] = [];
      for (let n = 0; n < Math.min(share, turns - owner * share); n += REPLAY_EVERY) turnIds.push(soakTurnId(owner, n));
      child.send({ type: "replay", turnIds });
      return turnIds.length;
    });
    const replayed = await Promise.all(children.map(async (child) => expectReport(await child.next(), "replayed")));
    const replayOutcomes: Record<string, number> = {};
    for (const report of replayed) {
      for (const [outcome, count] of Object.entries(report.outcomes)) replayOutcomes[outcome] = (replayOutcomes[outcome] ?? 0) + count;
    }
    const latencies = ran.flatMap((report) => report.latenciesMs);
    return {
      store: label,
      turns,
      workers: WORKERS,
      turnsPerSecond: turns / seconds,
      p50Ms: quantile(latencies, 0.5),
      p99Ms: quantile(latencies, 0.99),
      errors: ran.reduce((sum, report) => sum + report.errors, 0) + replayed.reduce((sum, report) => sum + report.errors, 0),
      errorSamples: ran.flatMap((report) => report.errorSamples).slice(0, 5),
      writtenOnce,
      writtenTwice,
      neverWritten,
      replays: replaying.reduce((sum, n) => sum + n, 0),
      replayWrites: replayed.reduce((sum, report) => sum + report.writes, 0),
      replayOutcomes,
    };
  } finally {
    for (const child of children) {
      if (child.process.connected) child.send({ type: "exit" });
    }
    await Promise.all(
      children.map(
        (child) =>
          new Promise<void>((resolve) => {
            if (child.process.exitCode !== null || child.process.signalCode !== null) resolve();
            else child.process.once("exit", () => resolve());
          }),
      ),
    );
  }
}

export async function soakSqlite(turns: number): Promise<WorkersSoak> {
  const dir = mkdtempSync(join(tmpdir(), "arkah-soak-"));
  const path = join(dir, "guardrails.sqlite");
  try {
    // Migrated once here, so the workers only open it.
    SqliteGuardrailStore.open({ path }).close();
    return await soakWorkers("SQLite (synchronous=FULL)", "sqlite", path, "", turns);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export async function soakPostgres(turns: number): Promise<WorkersSoak> {
  const own = postgresUrl();
  const server = own === undefined ? await startEmbeddedPostgres({ database: "arkah_soak" }) : undefined;
  const url = own ?? server?.url ?? "";
  const schema = `arkah_soak_${randomUUID().replaceAll("-", "").slice(0, 10)}`;
  try {
    const store = await PostgresGuardrailStore.open({ connectionString: url }, { schema });
    await store.close();
    const label = server === undefined ? "PostgreSQL (ARKAH_PG_URL)" : "PostgreSQL (embedded, fsync=off)";
    return await soakWorkers(label, "postgres", url, schema, turns);
  } finally {
    await server?.stop();
  }
}

export async function runSoak(profile: SoakProfile): Promise<SoakResult> {
  const started = performance.now();
  log(`soak: ${profile.memoryTurns.toLocaleString("en-US")} turns on the in-memory store, pruned every ${String(PRUNE_EVERY)}`);
  const memory = await soakMemory(profile.memoryTurns);
  log(`soak: ${profile.sqliteTurns.toLocaleString("en-US")} turns on SQLite, ${String(WORKERS)} worker processes`);
  const sqlite = await soakSqlite(profile.sqliteTurns);
  log(`soak: ${profile.postgresTurns.toLocaleString("en-US")} turns on PostgreSQL, ${String(WORKERS)} worker processes`);
  const postgres = await soakPostgres(profile.postgresTurns);
  log(`soak: what a pruned turn keeps in each store, over ${Math.max(profile.sqliteTurns, MIN_GUARD_MEMORY_TURNS).toLocaleString("en-US")} turns`);
  const guardMemory = await measureGuardMemory(profile.sqliteTurns);
  return { memory, sqlite, postgres, guardMemory, seconds: (performance.now() - started) / 1000 };
}

/** Whether every correctness figure holds: no error, each write exactly once, replays write nothing. */
export function soakPassed(result: SoakResult): boolean {
  return (
    result.memory.errors === 0 &&
    result.memory.writesExactlyOnce &&
    workersPassed(result.sqlite) &&
    workersPassed(result.postgres) &&
    result.guardMemory.every(guardMemoryPassed)
  );
}

const guardMemoryPassed = (row: GuardMemoryRow) => row.bytesPerTurn <= GUARD_MEMORY_TARGETS[row.store];

function workersPassed(soak: WorkersSoak): boolean {
  return (
    soak.errors === 0 &&
    soak.writtenTwice === 0 &&
    soak.neverWritten === 0 &&
    soak.replayWrites === 0 &&
    (soak.replayOutcomes.replayed ?? 0) === soak.replays
  );
}

/** The soak as rows of `pnpm bench`'s table: correctness is the target, speed and memory are reported. */
export function soakRows(result: SoakResult): ResultRow[] {
  const { memory } = result;
  const last = memory.points.at(-1);
  const rows: ResultRow[] = [
    {
      benchmark: `soak: ${count(memory.turns)} turns, in-memory store, prune every ${count(PRUNE_EVERY)}`,
      baseline: `heap ${fixed(memory.points[0]?.heapUsedMb ?? 0)} MB at 0`,
      subject: `heap ${fixed(last?.heapUsedMb ?? 0)} MB, RSS ${fixed(last?.rssMb ?? 0)} MB at ${count(last?.turns ?? 0)}`,
      ratio: `${count(Math.round(memory.turnsPerSecond))} turns/s`,
      target: "errors 0, each write once",
      pass: memory.errors === 0 && memory.writesExactlyOnce,
      note:
        `p50 ${fixed(memory.p50Ms, 2)} ms, p99 ${fixed(memory.p99Ms, 2)} ms; heap grows ${fixed(memory.heapBytesPerTurn, 0)} B/turn after warm-up, ` +
        `${fixed(memory.baselineHeapBytesPerTurn, 0)} B/invoke without the guardrails (docs/reliability.md#soak: the agent loop retains runs; ` +
        "prune keeps receipts, tombstones and audit events)",
    },
  ];
  for (const soak of [result.sqlite, result.postgres]) {
    rows.push({
      benchmark: `soak: ${count(soak.turns)} turns, ${soak.store}, ${String(soak.workers)} processes`,
      baseline: `p50 ${fixed(soak.p50Ms, 2)} ms`,
      subject: `p99 ${fixed(soak.p99Ms, 2)} ms`,
      ratio: `${count(Math.round(soak.turnsPerSecond))} turns/s`,
      target: "errors 0, each write once, replays write nothing",
      pass: workersPassed(soak),
      note: `${String(soak.errors)} errors; writes: ${count(soak.writtenOnce)} once, ${count(soak.writtenTwice)} more, ${count(soak.neverWritten)} never; ${count(soak.replays)} retries by another worker, ${String(soak.replayWrites)} writes`,
    });
  }
  for (const row of result.guardMemory) {
    rows.push({
      benchmark: `guard memory: what a pruned turn keeps, ${row.store}`,
      baseline: `${count(row.turns)} turns`,
      subject: `${count(Math.round(row.bytesPerTurn))} B/turn`,
      ratio: "—",
      target: `≤ ${count(GUARD_MEMORY_TARGETS[row.store])} B/turn`,
      pass: guardMemoryPassed(row),
      note: `${row.how}; receipt, tombstone and two audit events (bench/guard-memory.ts)`,
    });
  }
  return rows;
}

const fixed = (value: number, digits = 1) => value.toFixed(digits);
const count = (value: number) => value.toLocaleString("en-US");

/** The soak's figures as Markdown (printed, and pasted into docs/reliability.md). */
export function renderSoak(result: SoakResult): string {
  const { memory } = result;
  const lines = [
    `| store | turns | workers | turns/s | p50 | p99 | errors | writes | replays |`,
    `|---|---:|---:|---:|---:|---:|---:|---|---|`,
    `| in-memory, prune every ${count(PRUNE_EVERY)} | ${count(memory.turns)} | 1 | ${count(Math.round(memory.turnsPerSecond))} | ${fixed(memory.p50Ms, 2)} ms | ${fixed(memory.p99Ms, 2)} ms | ${String(memory.errors)} | ${memory.writesExactlyOnce ? "each exactly once" : "NOT exactly once"} | — |`,
  ];
  for (const soak of [result.sqlite, result.postgres]) {
    const writes =
      soak.writtenTwice === 0 && soak.neverWritten === 0
        ? `each exactly once (${count(soak.writtenOnce)})`
        : `${count(soak.writtenOnce)} once, ${count(soak.writtenTwice)} twice or more, ${count(soak.neverWritten)} never`;
    const replays = `${count(soak.replays)}: ${Object.entries(soak.replayOutcomes).map(([outcome, n]) => `${outcome} ${count(n)}`).join(", ")}; ${String(soak.replayWrites)} writes`;
    lines.push(
      `| ${soak.store} | ${count(soak.turns)} | ${String(soak.workers)} processes | ${count(Math.round(soak.turnsPerSecond))} | ${fixed(soak.p50Ms, 2)} ms | ${fixed(soak.p99Ms, 2)} ms | ${String(soak.errors)} | ${writes} | ${replays} |`,
    );
  }
  const memoryRows = memory.points.map((point) => `| ${count(point.turns)} | ${fixed(point.heapUsedMb)} MB | ${fixed(point.rssMb)} MB |`);
  return [
    lines.join("\n"),
    "",
    `In-memory store, heap used and RSS after a full GC (prune every ${count(PRUNE_EVERY)} turns, retention ${count(RETENTION_TURNS)} turns; ` +
      `${count(memory.pruned)} turns pruned to tombstones; ${count(memory.auditEvents)} audit events kept):`,
    "",
    "| turns | heap used | RSS |",
    "|---:|---:|---:|",
    ...memoryRows,
    "",
    `Heap growth after warm-up: ${fixed(memory.heapBytesPerTurn, 0)} bytes per turn; the same agent without the guardrails ` +
      `(${count(memory.baselineTurns)} invokes, run first): ${fixed(memory.baselineHeapBytesPerTurn, 0)} bytes per invoke; ` +
      `the guardrails' share: ${fixed(memory.heapBytesPerTurn - memory.baselineHeapBytesPerTurn, 0)} bytes per turn.`,
    "",
    "What a pruned turn keeps in each store (bench/guard-memory.ts: one real turn's store writes replayed for each turn, then pruned):",
    "",
    "| store | turns | kept per turn | bound | measured as |",
    "|---|---:|---:|---:|---|",
    ...result.guardMemory.map(
      (row) =>
        `| ${row.store} | ${count(row.turns)} | ${count(Math.round(row.bytesPerTurn))} B | ${count(GUARD_MEMORY_TARGETS[row.store])} B | ${row.how} |`,
    ),
  ].join("\n");
}

async function main(): Promise<void> {
  const quick = process.argv.includes("--quick");
  const result = await runSoak(quick ? QUICK : process.argv.includes("--stage") ? STAGE : FULL);
  console.log(`\n${renderSoak(result)}\n`);
  for (const sample of [...result.sqlite.errorSamples, ...result.postgres.errorSamples]) console.log(`error: ${sample}`);
  const passed = soakPassed(result);
  console.log(`soak ${passed ? "passed" : "FAILED"} in ${fixed(result.seconds, 0)} s`);
  if (!passed) process.exitCode = 1;
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) await main();
