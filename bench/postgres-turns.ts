/**
 * Read-then-write turns on PostgreSQL through the real middleware (not timed tests: nothing here
 * asserts a time). One server-wide `createDocumentGuardrails` on a `PostgresGuardrailStore`, one
 * `createAgent` whose offline `ScriptedModel` answers every turn from its transcript: read the
 * document, rename it, answer. A turn is `admitTurn` (a fresh turn id, so moderation and the
 * receipt write really run) then `agent.invoke` with the turn in `context`; its latency is both.
 *
 * A worker is an async loop in this process running turns back to back, all loops sharing one
 * store, one pool and one agent: one Node server process serving that many concurrent requests.
 * After the curve, variants at the largest worker count run interleaved with the configuration as
 * shipped: a pool as large as the workers; the loops split across OS processes (one per core, each
 * with its own store and pool, as a deployment with several server processes would), to show
 * whether this process's one JavaScript thread is what limits the curve; and a server with fsync
 * on (also at the smallest worker count). Every run is measured with bench/postgres-load.ts.
 *
 * - distinct turns: each worker its own document (scope), a new turn each time; every turn must
 *   end with its write run (a refused write aborts the run: a refusal is not a speed-up).
 * - one turn: in rounds, every worker admits and runs the same turn at once (the same request
 *   delivered N times, same call ids); exactly one write runs per round (checked), the others
 *   replay its stored result or are refused (`mutation_pending` while it runs).
 *
 * The store is wrapped in a proxy that counts every method call by name, and the pool counts every
 * statement its connections send (`BEGIN` and `COMMIT` included): the store calls and SQL round
 * trips a turn makes are measured, not asserted.
 */
import { fork } from "node:child_process";
import { randomUUID } from "node:crypto";
import { cpus } from "node:os";
import { fileURLToPath } from "node:url";
import { AIMessage, HumanMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import { createAgent, tool } from "langchain";
import pg from "pg";
import { z } from "zod";
import { admitTurn, createDocumentGuardrails, turnContext, type GuardrailStore, type TurnInput } from "arkah-agent-guardrails";
import { PostgresGuardrailStore } from "arkah-agent-guardrails/postgres";
import { ScriptedModel, type ScriptReply } from "arkah-agent-guardrails/testing";
import { INVOKE_CONFIG, USER_MESSAGE } from "./agent.js";
import { log, quantile } from "./harness.js";
import { ActivitySampler, mergeLoads, sampleLoad, type LoadSample, type PoolClock } from "./postgres-load.js";

// ---------------------------------------------------------------------------------------------
// The agent

const DOCUMENT = JSON.stringify({
  id: "doc-1",
  title: "Untitled",
  revision: 0,
  body: "Meeting notes: ship the guardrails, then measure them. ".repeat(8),
});

/** Write tool bodies run in this process (the contended case checks one per round). */
let writes = 0;

const readDocument = tool(() => DOCUMENT, {
  name: "read_document",
  description: "Read the document.",
  schema: z.object({ documentId: z.string() }),
});

const renameDocument = tool(
  ({ documentId, title }) => {
    writes++;
    return JSON.stringify({ id: documentId, title, revision: 1 });
  },
  { name: "rename_document", description: "Rename the document.", schema: z.object({ documentId: z.string(), title: z.string().min(1) }) },
);

const READ_ID = "read-1";
const RENAME_ID = "rename-1";

/** read, then rename, then answer, from the transcript: one model serves every turn. */
function respond(messages: readonly BaseMessage[]): ScriptReply {
  const results = messages.filter(ToolMessage.isInstance).length;
  if (results === 0) return { toolCalls: [{ id: READ_ID, name: "read_document", args: { documentId: "doc-1" } }] };
  if (results === 1) {
    return { toolCalls: [{ id: RENAME_ID, name: "rename_document", args: { documentId: "doc-1", title: "Field notes" } }] };
  }
  return { content: "Renamed the document to Field notes." };
}

function buildServerAgent(store: GuardrailStore) {
  return createAgent({
    model: new ScriptedModel(respond),
    tools: [readDocument, renameDocument],
    middleware: [
      createDocumentGuardrails({
        store,
        userMessageLabel: "user",
        authorize: (_call, turn) => turn.scopeId.startsWith("doc-"),
        tools: { read_document: { kind: "document-read" }, rename_document: { kind: "mutation" } },
      }),
    ],
  });
}

type ServerAgent = ReturnType<typeof buildServerAgent>;

function turnInput(scopeId: string, turnId: string): TurnInput {
  return { scopeId, turnId, policyVersion: "bench-1", segments: [{ label: "user", content: USER_MESSAGE }] };
}

/** "success", or the refusal code the write got. Throws if the read failed or no answer came. */
function writeOutcome(messages: readonly BaseMessage[]): string {
  const last = messages.at(-1);
  if (!AIMessage.isInstance(last) || (last.tool_calls?.length ?? 0) > 0) throw new Error("bench: the turn ended without an answer");
  const results = messages.filter(ToolMessage.isInstance);
  const read = results.find((message) => message.tool_call_id === READ_ID);
  const write = results.find((message) => message.tool_call_id === RENAME_ID);
  if (read === undefined || read.status === "error") throw new Error(`bench: the read failed: ${JSON.stringify(read?.content)}`);
  if (write === undefined) throw new Error("bench: the turn made no write call");
  if (write.status !== "error") return "success";
  try {
    const parsed = JSON.parse(typeof write.content === "string" ? write.content : "") as { guardrail?: unknown };
    return typeof parsed.guardrail === "string" ? parsed.guardrail : "error";
  } catch {
    return "error";
  }
}

// ---------------------------------------------------------------------------------------------
// Counting: store calls by method, SQL statements by connection

export interface Counters {
  /** Store method calls by name. */
  readonly calls: Map<string, number>;
  /** Statements sent on the pool's connections (each a round trip; BEGIN/COMMIT included). */
  statements: number;
}

export function snapshot(counters: Counters): { calls: Map<string, number>; statements: number } {
  return { calls: new Map(counters.calls), statements: counters.statements };
}

/** The counts since `before`, methods with no calls left out. */
export function since(counters: Counters, before: { calls: Map<string, number>; statements: number }) {
  const calls = new Map<string, number>();
  for (const [name, count] of counters.calls) {
    const delta = count - (before.calls.get(name) ?? 0);
    if (delta > 0) calls.set(name, delta);
  }
  return { calls, statements: counters.statements - before.statements };
}

export const totalCalls = (calls: ReadonlyMap<string, number>) => [...calls.values()].reduce((sum, n) => sum + n, 0);

/** A proxy that forwards every method of `store` (with the store as `this`) and counts its calls. */
function countingStore(store: GuardrailStore, counters: Counters): GuardrailStore {
  return new Proxy(store, {
    get(target, property) {
      const value: unknown = Reflect.get(target, property, target);
      if (typeof value !== "function") return value;
      const name = String(property);
      return (...args: unknown[]): unknown => {
        counters.calls.set(name, (counters.calls.get(name) ?? 0) + 1);
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
}

/**
 * The settings of every pool here: those `PostgresGuardrailStore.open({ connectionString })`
 * gives the pool it creates (pg's defaults, max 10 and a 10 s idle timeout, plus a 10 s connection
 * timeout). No statement or query timeout is set on the client side.
 */
export const POOL_SETTINGS = { max: 10, idleTimeoutMillis: 10_000, connectionTimeoutMillis: 10_000 } as const;

export interface PoolChoice {
  /** Connections at most. Default POOL_SETTINGS.max. */
  readonly max?: number;
  /** libpq-style startup options for every connection, e.g. `-c synchronous_commit=on`. */
  readonly sessionOptions?: string;
}

/**
 * A pool with POOL_SETTINGS whose connections count the statements they send, and which keeps the
 * running sums of its checkout times in `clock`.
 */
function countingPool(url: string, counters: Counters, clock: PoolClock, choice: PoolChoice): pg.Pool {
  const pool = new pg.Pool({
    connectionString: url,
    ...POOL_SETTINGS,
    max: choice.max ?? POOL_SETTINGS.max,
    ...(choice.sessionOptions === undefined ? {} : { options: choice.sessionOptions }),
  });
  pool.on("error", () => undefined);
  // pg-pool's own query() goes through this.connect too.
  const connect = pool.connect.bind(pool) as (...args: unknown[]) => unknown;
  (pool as unknown as { connect: (...args: unknown[]) => unknown }).connect = (...args: unknown[]) => {
    clock.requested += process.hrtime.bigint();
    return connect(...args);
  };
  pool.on("acquire", () => {
    clock.acquired += process.hrtime.bigint();
  });
  pool.on("release", () => {
    clock.released += process.hrtime.bigint();
  });
  pool.on("connect", (client) => {
    const target = client as unknown as { query: (...args: unknown[]) => unknown };
    const query = target.query.bind(client);
    target.query = (...args: unknown[]) => {
      counters.statements++;
      return query(...args);
    };
  });
  return pool;
}

export interface Bench {
  readonly store: GuardrailStore;
  readonly pool: pg.Pool;
  /** The pool's checkout sums (see PoolClock). */
  readonly clock: PoolClock;
  readonly agent: ServerAgent;
  readonly counters: Counters;
  close(): Promise<void>;
}

/** A counted store on `schema` (migrated if needed) over a counting pool, and the agent on it. */
export async function openBench(url: string, schema: string, choice: PoolChoice = {}): Promise<Bench> {
  const counters: Counters = { calls: new Map(), statements: 0 };
  const clock: PoolClock = { requested: 0n, acquired: 0n, released: 0n };
  const pool = countingPool(url, counters, clock, choice);
  const postgres = await PostgresGuardrailStore.open({ pool }, { schema });
  const store = countingStore(postgres, counters);
  return {
    store,
    pool,
    clock,
    agent: buildServerAgent(store),
    counters,
    close: async () => {
      await postgres.close();
      await pool.end();
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Runs

export interface RunStats {
  /** Turns completed (distinct) or rounds completed (one turn). */
  readonly turns: number;
  /** Invocations (admitTurn + agent.invoke): turns × workers on one turn, turns otherwise. */
  readonly invocations: number;
  readonly wallNs: number;
  /** Latency of each invocation (admitTurn + agent.invoke), ns. */
  readonly latencies: number[];
  /** How the write calls were answered: `written` (the body ran), `replayed`, or a refusal code. */
  readonly answers: Record<string, number>;
  /** Store calls and statements over the run. */
  readonly storeCalls: number;
  readonly statements: number;
}

async function invokeTurn(bench: Bench, input: TurnInput): Promise<{ ns: number; outcome: string }> {
  const start = process.hrtime.bigint();
  const receipt = await admitTurn({ store: bench.store, input, moderate: () => true });
  if (!receipt.allowed) throw new Error("bench: the turn was not admitted");
  const result = await bench.agent.invoke(
    { messages: [new HumanMessage(USER_MESSAGE)] },
    { ...INVOKE_CONFIG, context: turnContext(input) },
  );
  const ns = Number(process.hrtime.bigint() - start);
  return { ns, outcome: writeOutcome(result.messages) };
}

/** `workers` loops of distinct turns (worker w on scope `${scopePrefix}${w}`) until `durationMs` has passed. */
export async function runDistinct(bench: Bench, workers: number, durationMs: number, scopePrefix = "doc-w"): Promise<RunStats> {
  const before = snapshot(bench.counters);
  const writesBefore = writes;
  const latencies: number[] = [];
  let turns = 0;
  const start = process.hrtime.bigint();
  const deadline = performance.now() + durationMs;
  await Promise.all(
    Array.from({ length: workers }, async (_, worker) => {
      while (performance.now() < deadline) {
        const { ns, outcome } = await invokeTurn(bench, turnInput(`${scopePrefix}${String(worker)}`, randomUUID()));
        if (outcome !== "success") throw new Error(`bench: a distinct turn's write was refused: ${outcome}`);
        latencies.push(ns);
        turns++;
      }
    }),
  );
  const wallNs = Number(process.hrtime.bigint() - start);
  if (writes - writesBefore !== turns) {
    throw new Error(`bench: ${String(turns)} distinct turns ran ${String(writes - writesBefore)} writes`);
  }
  const counted = since(bench.counters, before);
  return {
    turns,
    invocations: turns,
    wallNs,
    latencies,
    answers: { written: turns },
    storeCalls: totalCalls(counted.calls),
    statements: counted.statements,
  };
}

/** Rounds of one turn run by every worker at once, until `durationMs` has passed. */
export async function runContended(bench: Bench, workers: number, durationMs: number): Promise<RunStats> {
  const before = snapshot(bench.counters);
  const latencies: number[] = [];
  const answers: Record<string, number> = {};
  let rounds = 0;
  const start = process.hrtime.bigint();
  const deadline = performance.now() + durationMs;
  while (performance.now() < deadline) {
    const input = turnInput("doc-contended", randomUUID());
    const writesBefore = writes;
    const outcomes = await Promise.all(Array.from({ length: workers }, () => invokeTurn(bench, input)));
    const ran = writes - writesBefore;
    if (ran !== 1) throw new Error(`bench: one turn run by ${String(workers)} workers ran ${String(ran)} writes`);
    let successes = 0;
    for (const { ns, outcome } of outcomes) {
      latencies.push(ns);
      if (outcome === "success") successes++;
      else answers[outcome] = (answers[outcome] ?? 0) + 1;
    }
    answers.written = (answers.written ?? 0) + 1;
    if (successes > 1) answers.replayed = (answers.replayed ?? 0) + successes - 1;
    rounds++;
  }
  const wallNs = Number(process.hrtime.bigint() - start);
  const counted = since(bench.counters, before);
  return {
    turns: rounds,
    invocations: rounds * workers,
    wallNs,
    latencies,
    answers,
    storeCalls: totalCalls(counted.calls),
    statements: counted.statements,
  };
}

/** Merges runs of the same kind (slices of an interleaved comparison) into one. */
function mergeStats(parts: readonly RunStats[]): RunStats {
  const answers: Record<string, number> = {};
  for (const part of parts) for (const [answer, n] of Object.entries(part.answers)) answers[answer] = (answers[answer] ?? 0) + n;
  const sum = (pick: (stats: RunStats) => number) => parts.reduce((total, part) => total + pick(part), 0);
  return {
    turns: sum((s) => s.turns),
    invocations: sum((s) => s.invocations),
    wallNs: sum((s) => s.wallNs),
    latencies: parts.flatMap((s) => s.latencies),
    answers,
    storeCalls: sum((s) => s.storeCalls),
    statements: sum((s) => s.statements),
  };
}

// ---------------------------------------------------------------------------------------------
// Worker processes

/** Messages between this process and bench/postgres-turns-worker.ts. */
export type ToWorker =
  | {
      readonly type: "start";
      readonly url: string;
      readonly schema: string;
      readonly loops: number;
      /** Warm-up: distinct turns until this many have run in the process, or `warmupMaxMs` has passed. */
      readonly warmupTurns: number;
      readonly warmupMaxMs: number;
      readonly scopePrefix: string;
    }
  | { readonly type: "go"; readonly durationMs: number }
  | { readonly type: "stop" };
export type FromWorker =
  | { readonly type: "ready" }
  | { readonly type: "done"; readonly stats: RunStats; readonly cpuNs: number; readonly eventLoop: number }
  | { readonly type: "failed"; readonly message: string };

const WORKER_ENTRY = fileURLToPath(new URL("./postgres-turns-worker.ts", import.meta.url));

export interface WorkerProcesses {
  readonly processes: number;
  /** Runs every process's loops for `durationMs`, all started together. */
  run(durationMs: number): Promise<{ stats: RunStats; cpuNs: number; eventLoop: number }>;
  stop(): Promise<void>;
}

/**
 * `loops` distinct-turn loops split across `processes` OS processes, each with its own store and
 * pool (POOL_SETTINGS) on `schema`, warmed up and waiting for `run`. The warm-up is counted in
 * turns: a fresh process spends CPU compiling until its code is hot (a time budget would warm it
 * less the busier the machine is).
 */
export async function startWorkerProcesses(
  url: string,
  schema: string,
  options: { processes: number; loops: number; warmupTurns: number; warmupMaxMs: number },
): Promise<WorkerProcesses> {
  const children = Array.from({ length: options.processes }, () =>
    fork(WORKER_ENTRY, [], { stdio: ["ignore", "inherit", "inherit", "ipc"] }),
  );
  const next = (child: (typeof children)[number]) =>
    new Promise<FromWorker>((resolve, reject) => {
      const onExit = (code: number | null) => {
        reject(new Error(`bench: worker process exited (${String(code)}) before answering`));
      };
      child.once("exit", onExit);
      child.once("message", (message) => {
        child.off("exit", onExit);
        resolve(message as FromWorker);
      });
    });
  const expect = async <T extends FromWorker["type"]>(type: T): Promise<Extract<FromWorker, { type: T }>[]> => {
    const messages = await Promise.all(children.map(next));
    for (const message of messages) {
      if (message.type === "failed") throw new Error(`bench: worker process failed: ${message.message}`);
      if (message.type !== type) throw new Error(`bench: worker process answered ${message.type}, expected ${type}`);
    }
    return messages as Extract<FromWorker, { type: T }>[];
  };
  const kill = () => {
    for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill();
  };
  try {
    const share = (i: number) => Math.floor(options.loops / options.processes) + (i < options.loops % options.processes ? 1 : 0);
    const ready = expect("ready");
    children.forEach((child, i) => {
      const start: ToWorker = {
        type: "start",
        url,
        schema,
        loops: share(i),
        warmupTurns: options.warmupTurns,
        warmupMaxMs: options.warmupMaxMs,
        scopePrefix: `doc-p${String(i)}-w`,
      };
      child.send(start);
    });
    await ready;
  } catch (error) {
    kill();
    throw error;
  }
  return {
    processes: options.processes,
    run: async (durationMs) => {
      const finished = expect("done");
      for (const child of children) child.send({ type: "go", durationMs } satisfies ToWorker);
      const done = await finished;
      const stats = mergeStats(done.map((m) => m.stats));
      return {
        // The processes ran side by side: the run took the longest of them, not their sum.
        stats: { ...stats, wallNs: Math.max(...done.map((m) => m.stats.wallNs)) },
        cpuNs: done.reduce((sum, m) => sum + m.cpuNs, 0),
        eventLoop: done.reduce((sum, m) => sum + m.eventLoop, 0) / done.length,
      };
    },
    stop: async () => {
      const exited = children.map(
        (child) =>
          new Promise<void>((resolve) => {
            if (child.exitCode !== null || child.signalCode !== null) resolve();
            else child.once("exit", () => resolve());
          }),
      );
      for (const child of children) if (child.connected) child.send({ type: "stop" } satisfies ToWorker);
      const timer = setTimeout(kill, 10_000);
      await Promise.all(exited);
      clearTimeout(timer);
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Figures

export const p50 = (stats: RunStats) => quantile(stats.latencies, 0.5);
export const p99 = (stats: RunStats) => quantile(stats.latencies, 0.99);
export const turnsPerSecond = (stats: RunStats) => (stats.turns * 1e9) / stats.wallNs;
export const invocationsPerSecond = (stats: RunStats) => (stats.invocations * 1e9) / stats.wallNs;

/** One process per core (at least 2), for the OS-process point. */
export const defaultProcesses = () => Math.max(2, cpus().length);

// ---------------------------------------------------------------------------------------------
// The benchmark

export interface Counted {
  readonly calls: Map<string, number>;
  readonly statements: number;
}

/** One turn, sequentially: the store calls and statements of its admission and of the rest. */
async function countTurn(bench: Bench): Promise<{ admission: Counted; turn: Counted }> {
  const input = turnInput("doc-counted", randomUUID());
  const start = snapshot(bench.counters);
  const receipt = await admitTurn({ store: bench.store, input, moderate: () => true });
  if (!receipt.allowed) throw new Error("bench: the turn was not admitted");
  const admission = since(bench.counters, start);
  const admitted = snapshot(bench.counters);
  const result = await bench.agent.invoke(
    { messages: [new HumanMessage(USER_MESSAGE)] },
    { ...INVOKE_CONFIG, context: turnContext(input) },
  );
  const turn = since(bench.counters, admitted);
  const outcome = writeOutcome(result.messages);
  if (outcome !== "success") throw new Error(`bench: the counted turn's write was refused: ${outcome}`);
  return { admission, turn };
}

const sameCounts = (a: Counted, b: Counted) =>
  a.statements === b.statements && a.calls.size === b.calls.size && [...a.calls].every(([name, n]) => b.calls.get(name) === n);

/** Server settings that matter here, read from the server. */
const SETTINGS = [
  "server_version",
  "fsync",
  "synchronous_commit",
  "full_page_writes",
  "wal_sync_method",
  "commit_delay",
  "statement_timeout",
  "max_connections",
  "shared_buffers",
] as const;

async function serverSettings(pool: pg.Pool): Promise<Record<string, string>> {
  const { rows } = await pool.query<{ name: string; setting: string; unit: string | null }>(
    "SELECT name, setting, unit FROM pg_settings WHERE name = ANY($1)",
    [SETTINGS],
  );
  const settings: Record<string, string> = {};
  for (const row of rows) {
    settings[row.name] =
      row.name === "shared_buffers" && row.unit === "8kB"
        ? `${String(Math.round((Number(row.setting) * 8) / 1024))} MB`
        : row.unit === null || row.setting === "0"
          ? row.setting
          : `${row.setting} ${row.unit}`;
  }
  return settings;
}

/** WAL flushes (fsyncs) and their time (when track_wal_io_timing is on), from pg_stat_wal. */
export interface WalStats {
  readonly syncs: number;
  /** ms; 0 when track_wal_io_timing is off. */
  readonly syncMs: number;
  readonly timed: boolean;
}

async function walStats(pool: pg.Pool): Promise<WalStats | undefined> {
  try {
    const { rows } = await pool.query<{ wal_sync: string; wal_sync_time: number; timed: string }>(
      "SELECT wal_sync, wal_sync_time, current_setting('track_wal_io_timing') AS timed FROM pg_stat_wal",
    );
    const row = rows[0];
    return row === undefined ? undefined : { syncs: Number(row.wal_sync), syncMs: row.wal_sync_time, timed: row.timed === "on" };
  } catch {
    return undefined; // PostgreSQL before 14 (no pg_stat_wal) or after 17 (its WAL I/O moved to pg_stat_io)
  }
}

const walDelta = (before: WalStats | undefined, after: WalStats | undefined): WalStats | undefined =>
  before === undefined || after === undefined
    ? undefined
    : { syncs: after.syncs - before.syncs, syncMs: after.syncMs - before.syncMs, timed: after.timed };

export interface SampledRun {
  readonly workers: number;
  readonly stats: RunStats;
  readonly load: LoadSample;
}

export interface TurnPoint {
  readonly workers: number;
  readonly distinct: SampledRun;
  readonly contended: SampledRun;
}

/** Where the run with production durability happens. */
export interface DurableTarget {
  /** What it is, for the report. */
  readonly label: string;
  readonly url: string;
  readonly sessionOptions?: string;
  stop(): Promise<void>;
}

export interface PostgresTurnOptions {
  /** Concurrent worker counts. */
  readonly workers: readonly number[];
  /** Measured time of each run of the curve, and the unmeasured run before it at the same concurrency. */
  readonly durationMs: number;
  readonly warmupMs: number;
  /** Sequential turns whose store calls are counted one by one (after two uncounted ones). */
  readonly countedTurns: number;
  /** The comparisons: measured time of each variant in total, in this many interleaved slices. */
  readonly comparisonMs: number;
  readonly comparisonRounds: number;
  /** OS processes for the process variant, and the turns each runs to warm up (at most 10 s). */
  readonly processes: number;
  readonly processWarmupTurns: number;
  /** Opens the target for the durable comparison. */
  readonly durable: () => Promise<DurableTarget>;
}

/** One variant of the interleaved comparisons, all slices merged. */
export interface VariantRun extends SampledRun {
  /** CPU of the worker processes (process variant), in cores, and their event loops' mean busy share. */
  readonly workerCores?: number;
  readonly workerEventLoop?: number;
  /** WAL flushes over the run (durable variants). */
  readonly wal?: WalStats;
}

export interface PostgresTurnResult {
  readonly pool: { readonly max: number; readonly idleTimeoutMillis: number; readonly connectionTimeoutMillis: number };
  readonly server: Readonly<Record<string, string>>;
  /** Store calls and statements of one turn's admission and of the rest of it. */
  readonly counts: { readonly admission: Counted; readonly turn: Counted; readonly turns: number; readonly varied: boolean };
  readonly points: readonly TurnPoint[];
  /** Interleaved comparisons at the smallest and largest worker counts. */
  readonly comparisons: {
    readonly rounds: number;
    /** As configured: one process, pool max POOL_SETTINGS.max, the benchmark's server; by worker count. */
    readonly base: readonly VariantRun[];
    readonly largePool: VariantRun & { readonly max: number };
    readonly processes: VariantRun & { readonly processes: number };
    readonly durable: {
      readonly label: string;
      readonly server: Readonly<Record<string, string>>;
      /** By worker count, as `base`. */
      readonly runs: readonly VariantRun[];
    };
  };
}

async function sampled(
  url: string,
  sampler: ActivitySampler,
  bench: Bench,
  workers: number,
  run: (bench: Bench, workers: number, ms: number) => Promise<RunStats>,
  options: { warmupMs: number; durationMs: number },
): Promise<SampledRun> {
  await run(bench, workers, options.warmupMs);
  const { result, load } = await sampleLoad({ url, sampler, pool: bench.clock }, () => run(bench, workers, options.durationMs));
  return { workers, stats: result, load };
}

interface Slice {
  readonly stats: RunStats;
  readonly load: LoadSample;
  readonly workerCores?: number;
  readonly workerEventLoop?: number;
  readonly wal?: WalStats;
}

/** A variant of the comparisons: warmed up once, then run slice by slice. */
interface Variant {
  readonly workers: number;
  warm(): Promise<unknown>;
  slice(ms: number): Promise<Slice>;
}

function merge(workers: number, slices: readonly Slice[]): VariantRun {
  const wal = slices.every((slice) => slice.wal !== undefined)
    ? slices.reduce<WalStats>(
        (sum, slice) => ({
          syncs: sum.syncs + (slice.wal?.syncs ?? 0),
          syncMs: sum.syncMs + (slice.wal?.syncMs ?? 0),
          timed: slice.wal?.timed ?? false,
        }),
        { syncs: 0, syncMs: 0, timed: false },
      )
    : undefined;
  const load = mergeLoads(slices.map((slice) => slice.load));
  const workerCores = slices.every((slice) => slice.workerCores !== undefined)
    ? slices.reduce((sum, slice) => sum + (slice.workerCores ?? 0) * slice.load.wallNs, 0) / load.wallNs
    : undefined;
  const workerEventLoop = slices.every((slice) => slice.workerEventLoop !== undefined)
    ? slices.reduce((sum, slice) => sum + (slice.workerEventLoop ?? 0) * slice.load.wallNs, 0) / load.wallNs
    : undefined;
  return {
    workers,
    stats: mergeStats(slices.map((slice) => slice.stats)),
    load,
    ...(workerCores === undefined ? {} : { workerCores }),
    ...(workerEventLoop === undefined ? {} : { workerEventLoop }),
    ...(wal === undefined ? {} : { wal }),
  };
}

/**
 * Makes every connection of an idle pool report its pending statistics: a backend reports at most
 * once a second, and one that goes idle sooner keeps them up to 10 s. `pg_stat_force_next_flush()`
 * (PostgreSQL 15 and later) makes it report when it next goes idle, right after this statement.
 */
async function flushStatistics(pool: pg.Pool): Promise<void> {
  const clients = await Promise.all(Array.from({ length: pool.totalCount }, () => pool.connect()));
  try {
    await Promise.all(clients.map((client) => client.query("SELECT pg_stat_force_next_flush()")));
  } finally {
    for (const client of clients) client.release();
  }
  await new Promise((resolve) => setTimeout(resolve, 50));
}

/** Distinct turns on `bench`, as a comparison variant; `wal`: read pg_stat_wal around each slice. */
function benchVariant(
  url: string,
  sampler: ActivitySampler,
  bench: Bench,
  workers: number,
  options: { warmupMs: number; scopePrefix: string; wal?: boolean },
): Variant {
  return {
    workers,
    warm: () => runDistinct(bench, workers, options.warmupMs, options.scopePrefix),
    slice: async (ms) => {
      const flushed = () =>
        flushStatistics(bench.pool).then(
          () => true,
          () => false, // before PostgreSQL 15: no figures rather than figures from another slice
        );
      const before = options.wal === true && (await flushed()) ? await walStats(bench.pool) : undefined;
      const { result, load } = await sampleLoad({ url, sampler, pool: bench.clock }, () =>
        runDistinct(bench, workers, ms, options.scopePrefix),
      );
      if (options.wal !== true) return { stats: result, load };
      const wal = (await flushed()) ? walDelta(before, await walStats(bench.pool)) : undefined;
      return { stats: result, load, ...(wal === undefined ? {} : { wal }) };
    },
  };
}

export async function benchPostgresTurns(url: string, schema: string, options: PostgresTurnOptions): Promise<PostgresTurnResult> {
  const timing = { warmupMs: options.warmupMs, durationMs: options.durationMs };
  const most = Math.max(...options.workers);
  const least = Math.min(...options.workers);
  // Everything that is opened is closed in reverse order, whatever fails.
  const closers: (() => Promise<void>)[] = [];
  try {
    const sampler = ActivitySampler.start();
    closers.push(() => sampler.stop());
    const bench = await openBench(url, schema);
    closers.push(() => bench.close());
    const server = await serverSettings(bench.pool);

    log("  turns: store calls of one turn");
    await countTurn(bench);
    await countTurn(bench);
    const counted = [];
    for (let i = 0; i < options.countedTurns; i++) counted.push(await countTurn(bench));
    const first = counted[0];
    if (first === undefined) throw new Error("bench: countedTurns must be at least 1");
    const counts = {
      ...first,
      turns: counted.length,
      varied: counted.some((c) => !sameCounts(c.admission, first.admission) || !sameCounts(c.turn, first.turn)),
    };

    // JIT warm-up for the whole curve, at its largest concurrency, so its first point is not run cold.
    await runDistinct(bench, most, 3 * options.warmupMs);
    const points: TurnPoint[] = [];
    for (const workers of options.workers) {
      log(`  turns: ${String(workers)} worker(s), distinct turns, then all on one turn`);
      const distinct = await sampled(url, sampler, bench, workers, (b, w, ms) => runDistinct(b, w, ms), timing);
      const contended = await sampled(url, sampler, bench, workers, runContended, { ...timing, warmupMs: timing.warmupMs / 2 });
      points.push({ workers, distinct, contended });
    }

    log(
      `  turns: interleaved comparisons at ${String(most)} workers (pool of ${String(most)}, ${String(options.processes)} OS processes, ` +
        `durable server) and at ${String(least)}`,
    );
    // Started side by side (nothing is being measured now); whatever started is closed at the end.
    const [largeStart, processesStart, targetStart] = await Promise.allSettled([
      openBench(url, schema, { max: most }),
      startWorkerProcesses(url, schema, {
        processes: options.processes,
        loops: most,
        warmupTurns: options.processWarmupTurns,
        warmupMaxMs: 10_000,
      }),
      options.durable(),
    ]);
    if (largeStart.status === "fulfilled") closers.push(() => largeStart.value.close());
    if (processesStart.status === "fulfilled") closers.push(() => processesStart.value.stop());
    if (targetStart.status === "fulfilled") closers.push(() => targetStart.value.stop());
    for (const start of [largeStart, processesStart, targetStart]) if (start.status === "rejected") throw start.reason;
    const large = (largeStart as PromiseFulfilledResult<Bench>).value;
    const processes = (processesStart as PromiseFulfilledResult<WorkerProcesses>).value;
    const target = (targetStart as PromiseFulfilledResult<DurableTarget>).value;
    const durableBench = await openBench(
      target.url,
      schema,
      target.sessionOptions === undefined ? {} : { sessionOptions: target.sessionOptions },
    );
    closers.push(() => durableBench.close());
    const durableServer = await serverSettings(durableBench.pool);

    const variants = {
      base: benchVariant(url, sampler, bench, most, { warmupMs: options.warmupMs, scopePrefix: "doc-b" }),
      large: benchVariant(url, sampler, large, most, { warmupMs: options.warmupMs, scopePrefix: "doc-l" }),
      processes: {
        workers: most,
        warm: () => processes.run(options.warmupMs),
        slice: async (ms: number): Promise<Slice> => {
          const { result, load } = await sampleLoad({ url, sampler }, () => processes.run(ms));
          return { stats: result.stats, load, workerCores: result.cpuNs / load.wallNs, workerEventLoop: result.eventLoop };
        },
      },
      durable: benchVariant(target.url, sampler, durableBench, most, { warmupMs: options.warmupMs, scopePrefix: "doc-d", wal: true }),
      baseLeast: benchVariant(url, sampler, bench, least, { warmupMs: options.warmupMs, scopePrefix: "doc-b1-" }),
      durableLeast: benchVariant(target.url, sampler, durableBench, least, { warmupMs: options.warmupMs, scopePrefix: "doc-d1-", wal: true }),
    } satisfies Record<string, Variant>;
    const order = Object.keys(variants) as (keyof typeof variants)[];
    for (const name of order) await variants[name].warm();
    const slices = Object.fromEntries(order.map((name) => [name, [] as Slice[]])) as Record<keyof typeof variants, Slice[]>;
    const sliceMs = options.comparisonMs / options.comparisonRounds;
    for (let round = 0; round < options.comparisonRounds; round++) {
      // Rotated every round and reversed every other one, so no variant always runs at the same
      // place in a round or right after the same other variant.
      const rotated = order.map((_, i) => order[(i + round) % order.length] as keyof typeof variants);
      for (const name of round % 2 === 0 ? rotated : rotated.reverse()) slices[name].push(await variants[name].slice(sliceMs));
    }
    const mergeVariant = (name: keyof typeof variants) => merge(variants[name].workers, slices[name]);

    const pool = bench.pool.options as { max: number; idleTimeoutMillis: number; connectionTimeoutMillis: number };
    return {
      pool: { max: pool.max, idleTimeoutMillis: pool.idleTimeoutMillis, connectionTimeoutMillis: pool.connectionTimeoutMillis },
      server,
      counts,
      points,
      comparisons: {
        rounds: options.comparisonRounds,
        base: [mergeVariant("baseLeast"), mergeVariant("base")],
        largePool: { ...mergeVariant("large"), max: most },
        processes: { ...mergeVariant("processes"), processes: options.processes },
        durable: { label: target.label, server: durableServer, runs: [mergeVariant("durableLeast"), mergeVariant("durable")] },
      },
    };
  } finally {
    for (const close of closers.reverse()) await close().catch(() => undefined);
  }
}
