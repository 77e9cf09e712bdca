/**
 * Where the time goes during a PostgreSQL benchmark run (not a timed test: nothing here asserts).
 * `sampleLoad(url, run)` runs `run` and reports, over exactly that interval:
 *
 * - CPU, in cores (CPU seconds per wall-clock second): this process (`process.cpuUsage()`, every
 *   thread, so V8's compiler and GC threads too), and how busy its one JavaScript thread was
 *   (`performance.eventLoopUtilization()`: the share of the time the event loop was not waiting
 *   for I/O or timers; near 1 means that thread is saturated); the PostgreSQL server (when it runs on this host: the postmaster and every process it
 *   forked, from /proc/<pid>/stat, exited backends included through the postmaster's reaped-children
 *   times); the whole machine (/proc/stat: busy = everything but idle and iowait; steal separately).
 * - The server's backends, sampled from `pg_stat_activity` every `intervalMs` by a process of its
 *   own (bench/postgres-sampler.ts, which says why): the mean number running (`active`, no wait
 *   event), waiting on a lock (`wait_event_type = 'Lock'`, by event), on an LWLock or I/O (by
 *   event), or idle inside a transaction (waiting for the client mid-transaction). By Little's law
 *   a mean of n backends in a state is n / (turns per second) seconds of it per turn.
 * - Optionally, for a `pg.Pool`, exactly (from its checkout times, not sampled): the mean number of
 *   connections checked out, and of requests waiting for one.
 */
import { execFileSync, fork, type ChildProcess } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import type { FromSampler, ToSampler } from "./postgres-sampler.js";

export interface LoadSample {
  readonly wallNs: number;
  /** This process's CPU (all threads), in cores. */
  readonly processCores: number;
  /** The share of the time this process's event loop (its JavaScript thread) was busy, 0..1. */
  readonly eventLoop: number;
  /** The server's CPU (postmaster and all its children), in cores; undefined when not on this host. */
  readonly serverCores: number | undefined;
  /** The machine's busy CPU (all processes), in cores, and how many cores it has. */
  readonly machineCores: number | undefined;
  readonly machineStealCores: number | undefined;
  readonly cores: number;
  /** pg_stat_activity samples taken. */
  readonly activitySamples: number;
  /** Mean number of client backends of this database in each state (see the module comment). */
  readonly backends: Readonly<Record<string, number>>;
  /** Mean requests waiting for a connection in the pool given, if one was given. */
  readonly poolWaiting: number | undefined;
  /** Mean connections checked out of that pool. */
  readonly poolBusy: number | undefined;
}

const TICKS_PER_SECOND = clockTicks();

function clockTicks(): number {
  try {
    const ticks = Number.parseInt(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }), 10);
    return Number.isFinite(ticks) && ticks > 0 ? ticks : 100;
  } catch {
    return 100;
  }
}

interface ProcStat {
  readonly comm: string;
  readonly ppid: number;
  /** utime + stime, ticks. */
  readonly own: number;
  /** cutime + cstime (reaped children), ticks. */
  readonly children: number;
}

function procStat(pid: number): ProcStat | undefined {
  let text: string;
  try {
    text = readFileSync(`/proc/${String(pid)}/stat`, "utf8");
  } catch {
    return undefined;
  }
  // The command name is in parentheses and may hold spaces: fields count from the last ')'.
  const close = text.lastIndexOf(")");
  const fields = text.slice(close + 2).split(" ");
  const field = (n: number) => Number.parseInt(fields[n - 3] ?? "0", 10);
  return {
    comm: text.slice(text.indexOf("(") + 1, close),
    ppid: field(4),
    own: field(14) + field(15),
    children: field(16) + field(17),
  };
}

/** The postmaster and its children's CPU ticks (children gone since are in the postmaster's reaped time). */
function serverTicks(postmaster: number): number | undefined {
  const main = procStat(postmaster);
  if (main?.comm !== "postgres") return undefined;
  let ticks = main.own + main.children;
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = procStat(Number(entry));
    if (stat?.ppid === postmaster) ticks += stat.own;
  }
  return ticks;
}

/** Busy and steal ticks of the whole machine (/proc/stat), or undefined off Linux. */
function machineTicks(): { busy: number; steal: number } | undefined {
  try {
    const line = readFileSync("/proc/stat", "utf8").split("\n")[0] ?? "";
    const [, ...values] = line.trim().split(/\s+/);
    const n = values.map(Number);
    // user nice system idle iowait irq softirq steal ... (busy excludes steal: time another guest got)
    const total = n.slice(0, 8).reduce((sum, value) => sum + value, 0);
    const idle = (n[3] ?? 0) + (n[4] ?? 0);
    const steal = n[7] ?? 0;
    return { busy: total - idle - steal, steal };
  } catch {
    return undefined;
  }
}

/** The server's postmaster, if the server runs on this host: the parent of a backend of ours. */
function findPostmaster(url: string, backendPid: number): number | undefined {
  const host = new URL(url).hostname;
  if (!["127.0.0.1", "localhost", "::1", "[::1]"].includes(host)) return undefined;
  const backend = procStat(backendPid);
  if (backend?.comm !== "postgres") return undefined;
  return procStat(backend.ppid)?.comm === "postgres" ? backend.ppid : undefined;
}

const SAMPLER_ENTRY = fileURLToPath(new URL("./postgres-sampler.ts", import.meta.url));

/** The pg_stat_activity sampler process (bench/postgres-sampler.ts): start one, reuse it, stop it. */
export class ActivitySampler {
  readonly #child: ChildProcess;

  private constructor(child: ChildProcess) {
    this.#child = child;
  }

  static start(): ActivitySampler {
    return new ActivitySampler(fork(SAMPLER_ENTRY, [], { stdio: ["ignore", "inherit", "inherit", "ipc"] }));
  }

  #ask<T extends FromSampler["type"]>(message: ToSampler, type: T): Promise<Extract<FromSampler, { type: T }>> {
    return new Promise((resolve, reject) => {
      const onExit = (code: number | null) => {
        reject(new Error(`bench: the sampler process exited (${String(code)})`));
      };
      this.#child.once("exit", onExit);
      this.#child.once("message", (answer: FromSampler) => {
        this.#child.off("exit", onExit);
        if (answer.type === type) resolve(answer as Extract<FromSampler, { type: T }>);
        else reject(new Error(`bench: the sampler answered ${answer.type === "failed" ? answer.message : answer.type}`));
      });
      this.#child.send(message);
    });
  }

  /** Starts sampling `url`'s database; resolves to the pid of the sampler's own backend. */
  async begin(url: string, intervalMs: number): Promise<number> {
    return (await this.#ask({ type: "begin", url, intervalMs }, "begun")).pid;
  }

  async end(): Promise<{ samples: number; totals: Record<string, number> }> {
    return this.#ask({ type: "end" }, "sampled");
  }

  async stop(): Promise<void> {
    if (this.#child.exitCode !== null || this.#child.signalCode !== null) return;
    const exited = new Promise((resolve) => this.#child.once("exit", resolve));
    if (this.#child.connected) this.#child.send({ type: "stop" } satisfies ToSampler);
    const timer = setTimeout(() => this.#child.kill(), 5_000);
    await exited;
    clearTimeout(timer);
  }
}

/**
 * Running sums of a pool's checkouts, in ns of `process.hrtime.bigint()`: when connections were
 * requested, handed out and given back. Over an interval with nothing in flight at either end,
 * (handed out − requested) is the total time requests waited for a connection and (given back −
 * handed out) the total time connections were checked out.
 */
export interface PoolClock {
  requested: bigint;
  acquired: bigint;
  released: bigint;
}

export interface SampleLoadOptions {
  readonly url: string;
  readonly sampler: ActivitySampler;
  /** pg_stat_activity sampling period. Default 25 ms. */
  readonly intervalMs?: number;
  /** A pool's checkout sums (see PoolClock), read at both ends of the run. */
  readonly pool?: PoolClock;
}

/** Runs `run` while measuring; see the module comment. */
export async function sampleLoad<T>(options: SampleLoadOptions, run: () => Promise<T>): Promise<{ result: T; load: LoadSample }> {
  const backendPid = await options.sampler.begin(options.url, options.intervalMs ?? 25);
  const postmaster = findPostmaster(options.url, backendPid);
  const poolStart = options.pool === undefined ? undefined : { ...options.pool };
  const serverStart = postmaster === undefined ? undefined : serverTicks(postmaster);
  const machineStart = machineTicks();
  const cpuStart = process.cpuUsage();
  const loopStart = performance.eventLoopUtilization();
  const start = process.hrtime.bigint();
  let result: T;
  try {
    result = await run();
  } catch (error) {
    await options.sampler.end().catch(() => undefined);
    throw error;
  }
  const wallNs = Number(process.hrtime.bigint() - start);
  const cpu = process.cpuUsage(cpuStart);
  const loop = performance.eventLoopUtilization(loopStart);
  const machineEnd = machineTicks();
  const serverEnd = postmaster === undefined ? undefined : serverTicks(postmaster);
  const poolEnd = options.pool === undefined ? undefined : { ...options.pool };
  const { samples, totals } = await options.sampler.end();

  const seconds = wallNs / 1e9;
  const cores = (ticks: number) => ticks / TICKS_PER_SECOND / seconds;
  const backends: Record<string, number> = {};
  for (const [key, count] of Object.entries(totals).sort((a, b) => b[1] - a[1])) backends[key] = count / Math.max(samples, 1);
  const poolMean = (from: (clock: PoolClock) => bigint, to: (clock: PoolClock) => bigint) =>
    poolStart === undefined || poolEnd === undefined
      ? undefined
      : Number(to(poolEnd) - to(poolStart) - (from(poolEnd) - from(poolStart))) / wallNs;
  return {
    result,
    load: {
      wallNs,
      processCores: (cpu.user + cpu.system) / 1e6 / seconds,
      eventLoop: loop.utilization,
      serverCores: serverStart === undefined || serverEnd === undefined ? undefined : cores(serverEnd - serverStart),
      machineCores: machineStart === undefined || machineEnd === undefined ? undefined : cores(machineEnd.busy - machineStart.busy),
      machineStealCores:
        machineStart === undefined || machineEnd === undefined ? undefined : cores(machineEnd.steal - machineStart.steal),
      cores: cpuCount(),
      activitySamples: samples,
      backends,
      poolWaiting: poolMean((clock) => clock.requested, (clock) => clock.acquired),
      poolBusy: poolMean((clock) => clock.acquired, (clock) => clock.released),
    },
  };
}

function cpuCount(): number {
  try {
    return readFileSync("/proc/stat", "utf8")
      .split("\n")
      .filter((line) => /^cpu\d+ /.test(line)).length;
  } catch {
    return 0;
  }
}

/** Several samples as one: CPU and event loop weighted by time, means by their sample counts. */
export function mergeLoads(loads: readonly LoadSample[]): LoadSample {
  const first = loads[0];
  if (first === undefined) throw new Error("mergeLoads of nothing");
  const wallNs = loads.reduce((sum, load) => sum + load.wallNs, 0);
  const samples = loads.reduce((sum, load) => sum + load.activitySamples, 0);
  const byTime = (pick: (load: LoadSample) => number | undefined) =>
    loads.some((load) => pick(load) === undefined)
      ? undefined
      : loads.reduce((sum, load) => sum + (pick(load) ?? 0) * load.wallNs, 0) / wallNs;
  const bySamples = (pick: (load: LoadSample) => number | undefined) =>
    loads.some((load) => pick(load) === undefined)
      ? undefined
      : loads.reduce((sum, load) => sum + (pick(load) ?? 0) * load.activitySamples, 0) / Math.max(samples, 1);
  const keys = new Set(loads.flatMap((load) => Object.keys(load.backends)));
  const backends: Record<string, number> = {};
  const means = [...keys].map((key) => [key, bySamples((load) => load.backends[key] ?? 0) ?? 0] as const);
  for (const [key, mean] of means.sort((a, b) => b[1] - a[1])) backends[key] = mean;
  return {
    wallNs,
    processCores: byTime((load) => load.processCores) ?? 0,
    eventLoop: byTime((load) => load.eventLoop) ?? 0,
    serverCores: byTime((load) => load.serverCores),
    machineCores: byTime((load) => load.machineCores),
    machineStealCores: byTime((load) => load.machineStealCores),
    cores: first.cores,
    activitySamples: samples,
    backends,
    poolWaiting: bySamples((load) => load.poolWaiting),
    poolBusy: bySamples((load) => load.poolBusy),
  };
}

/** The mean number of backends waiting on a heavyweight lock (any `Lock:*` event). */
export function lockWaiters(load: LoadSample): number {
  return Object.entries(load.backends)
    .filter(([key]) => key.startsWith("Lock:"))
    .reduce((sum, [, mean]) => sum + mean, 0);
}

/** "1.23 cores" style, or "n/a". */
export function formatCores(cores: number | undefined): string {
  return cores === undefined ? "n/a" : `${cores.toFixed(2)} cores`;
}

/** One line: CPU split and the backends' states. `extraCores` is CPU of helper processes (children). */
export function describeLoad(load: LoadSample, extraCores = 0): string {
  const other =
    load.machineCores === undefined
      ? undefined
      : Math.max(0, load.machineCores - load.processCores - extraCores - (load.serverCores ?? 0));
  const states = Object.entries(load.backends)
    .filter(([, mean]) => mean >= 0.005)
    .map(([key, mean]) => `${key} ${mean.toFixed(2)}`)
    .join(", ");
  return (
    `CPU: this process ${formatCores(load.processCores)} (event loop busy ${percent(load.eventLoop)})` +
    (extraCores > 0 ? `, worker processes ${formatCores(extraCores)}` : "") +
    `, server ${formatCores(load.serverCores)}, machine ${formatCores(load.machineCores)} busy of ${String(load.cores)}` +
    (other === undefined ? "" : ` (others ${formatCores(other)}`) +
    (load.machineStealCores !== undefined && load.machineStealCores >= 0.01 ? `, steal ${formatCores(load.machineStealCores)}` : "") +
    (other === undefined ? "" : ")") +
    `; backends (mean of ${String(load.activitySamples)} samples): ${states === "" ? "none active" : states}` +
    (load.poolWaiting === undefined || load.poolBusy === undefined
      ? ""
      : `; pool: ${load.poolBusy.toFixed(2)} connections checked out, ${load.poolWaiting.toFixed(2)} requests queued`)
  );
}

export const percent = (share: number) => `${(share * 100).toFixed(0)}%`;
