/**
 * Report rows and findings for bench/postgres-turns.ts: turns through the middleware on
 * PostgreSQL, the store calls a turn makes, and what limits the curve (from the sampled load).
 */
import { formatNs, formatRate, type ResultRow } from "./harness.js";
import { describeLoad, formatCores, lockWaiters, percent, type LoadSample } from "./postgres-load.js";
import {
  invocationsPerSecond,
  p50,
  p99,
  totalCalls,
  turnsPerSecond,
  type Counted,
  type PostgresTurnResult,
  type RunStats,
  type SampledRun,
  type VariantRun,
} from "./postgres-turns.js";

const seconds = (ms: number) => `${String(ms / 1000)} s`;

/** The pool settings, read back from the pool. */
export function poolText(result: PostgresTurnResult): string {
  const { pool, server } = result;
  return (
    `pool: max ${String(pool.max)} connections, idle timeout ${seconds(pool.idleTimeoutMillis)}, ` +
    `connection timeout ${seconds(pool.connectionTimeoutMillis)}, no client-side statement or query timeout ` +
    `(server statement_timeout ${server.statement_timeout === "0" ? "0, none" : (server.statement_timeout ?? "?")})`
  );
}

/** The server settings that matter, read from the server. */
export function serverText(server: Readonly<Record<string, string>>): string {
  return (
    `server: PostgreSQL ${server.server_version ?? "?"}, fsync=${server.fsync ?? "?"}, ` +
    `synchronous_commit=${server.synchronous_commit ?? "?"}, full_page_writes=${server.full_page_writes ?? "?"}, ` +
    `wal_sync_method=${server.wal_sync_method ?? "?"}, max_connections ${server.max_connections ?? "?"}, ` +
    `shared_buffers ${server.shared_buffers ?? "?"}`
  );
}

const callsText = (counted: Counted) =>
  [...counted.calls]
    .sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))
    .map(([name, n]) => `${name} ${String(n)}`)
    .join(", ");

const rate = (stats: RunStats) => formatRate(turnsPerSecond(stats));
const latency = (stats: RunStats) => `p50 ${formatNs(p50(stats))}, p99 ${formatNs(p99(stats))}`;

/**
 * CPU ns per invocation of this process and of the server over a run; the server's is undefined
 * when not measurable (not on this host, or under one clock tick in a short run).
 */
function cpuPerInvocation(run: SampledRun): { process: number; server: number | undefined } {
  const perCore = run.load.wallNs / run.stats.invocations;
  return {
    process: run.load.processCores * perCore,
    server: run.load.serverCores === undefined || run.load.serverCores === 0 ? undefined : run.load.serverCores * perCore,
  };
}

function cpuText(run: SampledRun, unit: string): string {
  const cpu = cpuPerInvocation(run);
  return `CPU per ${unit}: this process ${formatNs(cpu.process)}, server ${cpu.server === undefined ? "n/a" : formatNs(cpu.server)}`;
}

function answersText(answers: Readonly<Record<string, number>>): string {
  return Object.entries(answers)
    .sort((a, b) => b[1] - a[1])
    .map(([answer, n]) => `${answer} ${String(n)}`)
    .join(", ");
}

/** Mean backends waiting on WAL (write, flush, its LWLock). */
function walWaiters(load: LoadSample): number {
  return Object.entries(load.backends)
    .filter(([key]) => /wal/i.test(key))
    .reduce((sum, [, mean]) => sum + mean, 0);
}

export function turnRows(result: PostgresTurnResult): ResultRow[] {
  const rows: ResultRow[] = [];
  const { counts } = result;
  const pool = poolText(result);
  rows.push({
    benchmark: "postgres store calls per read-then-write turn (counting proxy on the store)",
    baseline: `admitTurn: ${String(totalCalls(counts.admission.calls))} calls, ${String(counts.admission.statements)} statements`,
    subject: `rest of the turn: ${String(totalCalls(counts.turn.calls))} calls, ${String(counts.turn.statements)} statements`,
    ratio: `${String(totalCalls(counts.turn.calls))} calls after admission`,
    target: "(measured)",
    pass: true,
    note:
      `after admission: ${callsText(counts.turn)}; admitTurn: ${callsText(counts.admission)}; ` +
      `statements = SQL round trips the pool's connections sent, BEGIN and COMMIT included; ` +
      (counts.varied
        ? `the counts varied across ${String(counts.turns)} sequential turns (the first is shown)`
        : `the same in each of ${String(counts.turns)} sequential turns`) +
      `; ${serverText(result.server)}; ${pool}`,
  });

  const one = result.points.find((point) => point.workers === 1);
  for (const point of result.points) {
    const { distinct, contended } = point;
    rows.push({
      benchmark: `postgres turns, ${String(point.workers)} worker(s): distinct turns | all on one turn`,
      baseline: `${rate(distinct.stats)} turns, ${latency(distinct.stats)}`,
      subject: `${rate(contended.stats)} turns (${formatRate(invocationsPerSecond(contended.stats))} runs), ${latency(contended.stats)}`,
      ratio:
        one === undefined ? "n/a" : `${(turnsPerSecond(distinct.stats) / turnsPerSecond(one.distinct.stats)).toFixed(2)}x of 1 worker`,
      target: "(reported)",
      pass: true,
      note:
        `distinct: ${String(distinct.stats.turns)} turns; ${cpuText(distinct, "turn")}; ` +
        `${(distinct.stats.storeCalls / distinct.stats.turns).toFixed(2)} store calls and ` +
        `${(distinct.stats.statements / distinct.stats.turns).toFixed(2)} statements per turn (admission included); ` +
        `${describeLoad(distinct.load)} | one turn: ${String(contended.stats.turns)} rounds of ${String(point.workers)} runs; ` +
        `write calls answered ${answersText(contended.stats.answers)}; ` +
        `${(contended.stats.storeCalls / contended.stats.invocations).toFixed(2)} store calls per run; ${cpuText(contended, "run")}; ` +
        `${describeLoad(contended.load)}; ${pool}`,
    });
  }

  const { comparisons } = result;
  const [baseLeast, baseMost] = comparisons.base;
  const interleaved = `interleaved with the other variants in ${String(comparisons.rounds)} rounds`;
  if (baseMost !== undefined) {
    const large = comparisons.largePool;
    rows.push({
      benchmark: `postgres turns, ${String(large.workers)} workers, distinct: pool max ${String(result.pool.max)} | max ${String(large.max)}`,
      baseline: `${rate(baseMost.stats)} turns, ${latency(baseMost.stats)}`,
      subject: `${rate(large.stats)} turns, ${latency(large.stats)}`,
      ratio: `${(turnsPerSecond(large.stats) / turnsPerSecond(baseMost.stats)).toFixed(2)}x`,
      target: "(reported)",
      pass: true,
      note:
        `${interleaved}; max ${String(result.pool.max)}: ${describeLoad(baseMost.load)} | ` +
        `max ${String(large.max)}: ${describeLoad(large.load)}; other settings as above`,
    });
    const procs = comparisons.processes;
    rows.push({
      benchmark: `postgres turns, ${String(procs.workers)} workers, distinct: one process | ${String(procs.processes)} OS processes`,
      baseline: `${rate(baseMost.stats)} turns, ${latency(baseMost.stats)}`,
      subject: `${rate(procs.stats)} turns, ${latency(procs.stats)}`,
      ratio: `${(turnsPerSecond(procs.stats) / turnsPerSecond(baseMost.stats)).toFixed(2)}x`,
      target: "(reported)",
      pass: true,
      note:
        `${interleaved}; each process its own store and pool (max ${String(result.pool.max)}) and ` +
        `${String(Math.ceil(procs.workers / procs.processes))} or fewer loops; worker processes: ` +
        `${formatCores(procs.workerCores)}, event loops busy ${percent(procs.workerEventLoop ?? 0)} (mean), ` +
        `CPU per turn ${formatNs(((procs.workerCores ?? 0) * procs.load.wallNs) / procs.stats.turns)}; ` +
        describeLoad(procs.load, procs.workerCores ?? 0),
    });
  }
  comparisons.durable.runs.forEach((run, i) => {
    const base = i === 0 ? baseLeast : baseMost;
    if (base === undefined) return;
    rows.push({
      benchmark: `postgres turns, ${String(run.workers)} worker(s), distinct: as configured | ${comparisons.durable.label}`,
      baseline: `${rate(base.stats)} turns, ${latency(base.stats)}`,
      subject: `${rate(run.stats)} turns, ${latency(run.stats)}`,
      ratio: `${(turnsPerSecond(run.stats) / turnsPerSecond(base.stats)).toFixed(2)}x`,
      target: "(reported)",
      pass: true,
      note:
        `${interleaved}; ${serverText(comparisons.durable.server)}; ${walText(run)}; ` +
        `as configured: ${cpuText(base, "turn")}; ${describeLoad(base.load)} | durable: ${cpuText(run, "turn")}; ${describeLoad(run.load)}`,
    });
  });
  return rows;
}

/** Little's law: a mean of `mean` backends in a state over a run is this much of it per turn, ns. */
const perTurn = (mean: number, run: SampledRun) => (mean * run.load.wallNs) / run.stats.turns;

/** WAL flushes per turn and their time, from pg_stat_wal, and the sampled waits on WAL. */
function walText(run: VariantRun): string {
  const turns = run.stats.turns;
  const waiters = walWaiters(run.load);
  return (
    (run.wal === undefined
      ? "WAL flushes: n/a (pg_stat_wal or pg_stat_force_next_flush missing)"
      : `WAL flushes (pg_stat_wal): ${(run.wal.syncs / turns).toFixed(2)} per turn` +
        (run.wal.timed
          ? `, ${formatNs((run.wal.syncMs * 1e6) / turns)} of flush time per turn (${formatNs((run.wal.syncMs * 1e6) / Math.max(run.wal.syncs, 1))} each)`
          : " (track_wal_io_timing off: no times)")) +
    `; backends waiting on WAL (sampled, any wait event naming WAL) ${waiters.toFixed(2)}, ${formatNs(perTurn(waiters, run))} per turn`
  );
}

/**
 * What limits the turn curve, from the measurements: Markdown bullets for docs/benchmarks.md. The
 * last bullet is a verdict drawn by fixed rules from the figures before it.
 */
export function turnFindings(result: PostgresTurnResult): string[] {
  const top = result.points.at(-1);
  const one = result.points[0];
  if (top === undefined || one === undefined) return [];
  const workers = top.workers;
  const run = top.distinct;
  const load = run.load;
  const cpu = cpuPerInvocation(run);
  const lines: string[] = [];

  lines.push(
    `Distinct turns: ${rate(one.distinct.stats)} at ${String(one.workers)} worker(s), ${rate(run.stats)} at ${String(workers)} ` +
      `(${(turnsPerSecond(run.stats) / turnsPerSecond(one.distinct.stats)).toFixed(2)}x); p50 latency ` +
      `${formatNs(p50(one.distinct.stats))} → ${formatNs(p50(run.stats))}.`,
  );
  const serverCeiling = cpu.server === undefined ? undefined : 1e9 / cpu.server;
  lines.push(
    `CPU per turn at ${String(workers)} workers: this process ${formatNs(cpu.process)}, the server ` +
      `${cpu.server === undefined ? "n/a" : formatNs(cpu.server)}. One Node process on a core of its own ` +
      `would top out near ${formatRate(1e9 / cpu.process)} turns; the server near ` +
      `${serverCeiling === undefined ? "n/a" : formatRate(serverCeiling)} turns per core.`,
  );
  const others =
    load.machineCores === undefined ? undefined : Math.max(0, load.machineCores - load.processCores - (load.serverCores ?? 0));
  lines.push(
    `Machine during the ${String(workers)}-worker run: ${formatCores(load.machineCores)} busy of ${String(load.cores)}; ` +
      `this process ${formatCores(load.processCores)}, the server ${formatCores(load.serverCores)}, ` +
      `other processes ${formatCores(others)}.`,
  );
  const lockEvents = (sample: LoadSample) =>
    Object.entries(sample.backends)
      .filter(([key]) => key.startsWith("Lock:"))
      .map(([key, mean]) => `${key} ${mean.toFixed(3)}`)
      .join(", ") || "none seen";
  const durableTop = result.comparisons.durable.runs.at(-1);
  lines.push(
    `Lock waits (pg_stat_activity sampled every 25 ms by a separate process; mean backends with wait_event_type = 'Lock'): ` +
      `${lockWaiters(load).toFixed(3)} at ${String(workers)} workers on distinct turns (${lockEvents(load)}), ` +
      `${lockWaiters(top.contended.load).toFixed(3)} with all ${String(workers)} on one turn (${lockEvents(top.contended.load)})` +
      (durableTop === undefined
        ? ""
        : `, ${lockWaiters(durableTop.load).toFixed(3)} on the durable server at ${String(durableTop.workers)} workers ` +
          `(${lockEvents(durableTop.load)}: ${formatNs(perTurn(lockWaiters(durableTop.load), durableTop))} per turn)`) +
      `; backends running a statement: ${(load.backends.running ?? 0).toFixed(3)}. Lock:advisory is the audit trail's ` +
      `sequence lock (appendAudit holds it to commit, so with synchronous_commit=on it is held through the WAL flush).`,
  );
  const { comparisons } = result;
  const [baseLeast, baseMost] = comparisons.base;
  const large = comparisons.largePool;
  const procs = comparisons.processes;
  const processGain = baseMost === undefined ? Number.NaN : turnsPerSecond(procs.stats) / turnsPerSecond(baseMost.stats);
  const processCpu = ((procs.workerCores ?? 0) * procs.load.wallNs) / procs.stats.turns;
  const baseCpu = baseMost === undefined ? Number.NaN : cpuPerInvocation(baseMost).process;
  if (baseMost !== undefined) {
    lines.push(
      `Pool (interleaved runs): at ${String(workers)} workers ${(baseMost.load.poolBusy ?? 0).toFixed(1)} of ` +
        `${String(result.pool.max)} connections were checked out on average and ${(baseMost.load.poolWaiting ?? 0).toFixed(1)} ` +
        `requests queued for one, while the server ran ${(baseMost.load.backends.running ?? 0).toFixed(2)} statements: a ` +
        `connection stays checked out until this process's event loop gets to the reply. With a pool of ` +
        `${String(large.max)}: ${rate(large.stats)} turns against ${rate(baseMost.stats)} ` +
        `(${(turnsPerSecond(large.stats) / turnsPerSecond(baseMost.stats)).toFixed(2)}x), p99 ${formatNs(p99(large.stats))} ` +
        `against ${formatNs(p99(baseMost.stats))}.`,
    );
    lines.push(
      `${String(workers)} workers in ${String(procs.processes)} OS processes (interleaved runs): ${rate(procs.stats)} turns against ` +
        `${rate(baseMost.stats)} in one (${processGain.toFixed(2)}x); the worker processes used ${formatCores(procs.workerCores)}, ` +
        `their event loops busy ${percent(procs.workerEventLoop ?? 0)}, the machine ${formatCores(procs.load.machineCores)} ` +
        `of ${String(procs.load.cores)}; a turn cost the worker processes ${formatNs(processCpu)} of CPU against ` +
        `${formatNs(baseCpu)} in one process (${(processCpu / baseCpu).toFixed(2)}x).`,
    );
  }
  const durable = comparisons.durable;
  lines.push(
    `Durability (${durable.label}, interleaved runs): ` +
      durable.runs
        .map((d, i) => {
          const base = i === 0 ? baseLeast : baseMost;
          const ratio = base === undefined ? "" : ` against ${rate(base.stats)} (${(turnsPerSecond(d.stats) / turnsPerSecond(base.stats)).toFixed(2)}x)`;
          return `${rate(d.stats)} turns at ${String(d.workers)} worker(s)${ratio}, p50 ${formatNs(p50(d.stats))}; ${walText(d)}`;
        })
        .join("; ") +
      ".",
  );

  // The audit trail's sequence lock is held through each append's commit: with a WAL flush in every
  // commit, appends are serialized one flush apart whatever the number of workers.
  const appends = result.counts.turn.calls.get("appendAudit") ?? 0;
  const durableWal = durableTop?.wal;
  if (appends > 0 && durableWal?.timed === true && durableWal.syncs > 0) {
    const flushMs = durableWal.syncMs / durableWal.syncs;
    lines.push(
      `The audit lock on a durable server: a turn appends ${String(appends)} audit event(s), each in its own commit holding the ` +
        `audit sequence lock until that commit's WAL flush is done (${formatNs(flushMs * 1e6)} per flush at ` +
        `${String(durableTop?.workers ?? 0)} workers here), so appends run one flush apart and cap the store near ` +
        `${formatRate(1000 / (appends * flushMs))} turns, whatever the number of workers or processes.`,
    );
  }

  // The verdict, by fixed rules over the figures above.
  const machineSaturated = load.machineCores !== undefined && load.machineCores >= 0.9 * load.cores;
  const otherCores = others ?? 0;
  const serverSaturated = load.serverCores !== undefined && load.serverCores >= 0.85 * load.cores;
  const heavier = cpu.server === undefined ? "" : `; a turn costs this process ${(cpu.process / cpu.server).toFixed(1)}x the server's CPU`;
  const procsMachineSaturated = procs.load.machineCores !== undefined && procs.load.machineCores >= 0.9 * procs.load.cores;
  const split =
    processGain >= 1.2
      ? `; splitting the workers across ${String(procs.processes)} processes raised it ${processGain.toFixed(2)}x`
      : `; splitting the workers across ${String(procs.processes)} processes did not raise it (${processGain.toFixed(2)}x)` +
        (procsMachineSaturated
          ? `: the machine's ${String(procs.load.cores)} cores were busy` +
            (processCpu >= 1.2 * baseCpu ? ` and a turn cost ${(processCpu / baseCpu).toFixed(2)}x the CPU time with them all busy` : "")
          : "");
  let verdict: string;
  if (lockWaiters(load) >= 0.5) {
    verdict = "lock waits on the server: on average half a backend or more was waiting on a lock";
  } else if (serverSaturated) {
    verdict = `the server's CPU (${formatCores(load.serverCores)} of ${String(load.cores)})`;
  } else if (load.eventLoop >= 0.9 && (load.processCores >= 0.85 || !machineSaturated)) {
    verdict = `this process's JavaScript thread: its event loop was busy ${percent(load.eventLoop)} of the run${heavier}${split}`;
  } else if (machineSaturated) {
    // An event loop that always has work but gets less than a core is waiting for a CPU.
    verdict =
      `the machine's CPU: ${formatCores(load.machineCores)} of ${String(load.cores)} busy, ${formatCores(otherCores)} of it ` +
      `other processes'; this process's event loop was busy ${percent(load.eventLoop)} and got ${formatCores(load.processCores)}` +
      (load.eventLoop >= 0.9 ? " (it always had work: on a core of its own, its JavaScript thread would be the limit)" : "") +
      `${heavier}${split}`;
  } else {
    verdict =
      `round-trip latency: no CPU saturated (event loop busy ${percent(load.eventLoop)}) and no lock waits; more workers ` +
      `would raise it`;
  }
  const durableMost = durable.runs.at(-1);
  if (durableMost !== undefined && baseMost !== undefined) {
    const slowdown = turnsPerSecond(durableMost.stats) / turnsPerSecond(baseMost.stats);
    verdict +=
      slowdown < 0.8
        ? `. With fsync on, WAL flushes cut it to ${slowdown.toFixed(2)}x: on a durable server they are the next limit`
        : `. With fsync on it ran at ${slowdown.toFixed(2)}x: WAL flushes are not what limits it here`;
  }
  lines.push(`Verdict: the ${String(workers)}-worker curve is limited by ${verdict}.`);
  return lines;
}
