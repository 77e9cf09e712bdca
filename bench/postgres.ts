/**
 * `PostgresGuardrailStore` benchmarks (not timed tests: nothing here asserts). Each reads
 * ARKAH_PG_URL and returns `undefined` when it is absent; `benchPostgres` starts an embedded server
 * when it is not set.
 *
 * 1. `benchPostgresPairs`: claim + settle pairs through the store against the same two statements
 *    issued directly through `pg`: `INSERT ... ON CONFLICT (turn_key) DO NOTHING RETURNING token`
 *    and the compare-and-set `UPDATE ... WHERE turn_key AND token AND state = 'pending'`, on the
 *    store's own `claims` table, as named prepared statements, over a pool with the same settings
 *    (one pair at a time, so one connection). Interleaved rounds (bench/harness.ts); both tables
 *    are emptied before every sample (untimed). The figure is throughput: subject pairs/s divided
 *    by baseline pairs/s; the target is at least 0.9. What the store adds: validation of every
 *    value, the scope row lock in the claim (the scope rule), token and text encoding.
 * 2. `benchPostgresConcurrency`: 1, 2, 4, 8 concurrent workers (async loops in this process, each
 *    with its own connection from the store's pool, as one server's concurrent requests), on
 *    distinct turns: pairs/s and per-pair latency p50/p99; and the contended case beside it, all
 *    workers claiming the same turn at once, round after round: one acquires and settles, the
 *    others are answered `pending` or `replay`.
 * 3. `benchPostgresAudit`: `appendAudit` (sequence numbers taken under a transaction-scoped
 *    advisory lock, so `seq` order is commit order) against the same INSERT with a plain sequence
 *    default and no lock, at 1 and 8 concurrent appenders: what ordered numbering costs.
 * 4. Read-then-write turns through the real middleware and `createAgent` at 1, 2, 4, 8 and 32
 *    workers, the store calls a turn makes, and what limits the curve: bench/postgres-turns.ts
 *    (runs), bench/postgres-load.ts (CPU and wait sampling), bench/postgres-report.ts (rows).
 */
import { randomUUID } from "node:crypto";
import pg from "pg";
import { digest, mutationKey, turnKey, type AuditEvent } from "arkah-agent-guardrails";
import { toolFingerprint, type MutationIdentity } from "arkah-agent-guardrails/store";
import { PostgresGuardrailStore } from "arkah-agent-guardrails/postgres";
import { startEmbeddedPostgres } from "../scripts/postgres/embedded.js";
import { turnFindings, turnRows } from "./postgres-report.js";
import { benchPostgresTurns, defaultProcesses, type DurableTarget } from "./postgres-turns.js";
import {
  formatNs,
  formatRate,
  interleave,
  log,
  measure,
  median,
  per,
  quantile,
  roundOptions,
  type Interleaved,
  type ResultRow,
  type RoundOptions,
} from "./harness.js";

const RESULT_CONTENT = JSON.stringify({ id: "doc-1", title: "Field notes", revision: 1 });

/** The database URL, or undefined (every benchmark here is then skipped). */
export function postgresUrl(): string | undefined {
  const url = process.env.ARKAH_PG_URL;
  return url === undefined || url === "" ? undefined : url;
}

function benchSchema(name: string): string {
  return `arkah_bench_${name}_${randomUUID().replaceAll("-", "").slice(0, 10)}`;
}

let identitySerial = 0;
const RENAME_FINGERPRINT = toolFingerprint({ name: "rename_document" });

/** `count` identities on fresh turns (never used before in this process), over 64 scopes. */
function freshIdentities(count: number): MutationIdentity[] {
  const args = { documentId: "doc-1", title: "Field notes" };
  const argsDigest = digest(args);
  return Array.from({ length: count }, () => {
    const i = identitySerial++;
    const turn = { scopeId: `doc-${String(i % 64)}`, turnId: `turn-${String(i)}` };
    const call = { id: `call-${String(i)}`, name: "rename_document", args };
    return {
      turnKey: turnKey(turn),
      scopeId: turn.scopeId,
      toolCallId: call.id,
      toolName: call.name,
      argsDigest,
      mutationKey: mutationKey(turn, call),
      toolFingerprint: RENAME_FINGERPRINT,
    };
  });
}

async function withSchema<T>(url: string, name: string, run: (schema: string, admin: pg.Pool) => Promise<T>): Promise<T> {
  const schema = benchSchema(name);
  const admin = new pg.Pool({ connectionString: url, max: 1 });
  admin.on("error", () => undefined);
  try {
    return await run(schema, admin);
  } finally {
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => undefined);
    await admin.end();
  }
}

async function claimAndSettle(store: PostgresGuardrailStore, identity: MutationIdentity): Promise<void> {
  const claim = await store.claimMutation(identity);
  if (claim.status !== "acquired") throw new Error(`bench: claim ${claim.status}`);
  const settled = await store.settleMutation({
    turnKey: identity.turnKey,
    token: claim.token,
    outcome: "complete",
    result: { content: RESULT_CONTENT, status: "success" },
  });
  if (!settled) throw new Error("bench: settle rejected");
}

// ---------------------------------------------------------------------------------------------
// 1. The store against the same two statements through pg

export interface PostgresPairsOptions extends RoundOptions {
  /** Claim+settle pairs per timed sample (distinct turns). */
  readonly pairs: number;
}

export interface PostgresPairsResult extends Interleaved {
  readonly baselinePairsPerSecond: number;
  readonly subjectPairsPerSecond: number;
  /** subject pairs/s ÷ baseline pairs/s (= 1 / ratio): the target is ≥ 0.9. */
  readonly throughputRatio: number;
  /** The same in CPU time of this process (the database's CPU is not in it). */
  readonly cpuThroughputRatio: number;
}

export async function benchPostgresPairs(options: PostgresPairsOptions): Promise<PostgresPairsResult | undefined> {
  const url = postgresUrl();
  if (url === undefined) return undefined;
  return withSchema(url, "pairs", async (schema, admin) => {
    const store = await PostgresGuardrailStore.open({ connectionString: url }, { schema });
    // The store's own pool settings (connectionTimeoutMillis 10 s, pg's defaults otherwise).
    const direct = new pg.Pool({ connectionString: url, connectionTimeoutMillis: 10_000 });
    direct.on("error", () => undefined);
    const s = `"${schema}"`;
    const insert = {
      name: "bench_direct_claim",
      text: `INSERT INTO ${s}.claims (turn_key, scope_id, tool_call_id, tool_name, args_digest, mutation_key, token, state, claimed_at, claimed_ms)
             VALUES ($1, $2, $3, $4, $5, $6, $7, 'pending', $8, $9::bigint)
             ON CONFLICT (turn_key) DO NOTHING RETURNING token`,
    };
    const update = {
      name: "bench_direct_settle",
      text: `UPDATE ${s}.claims SET state = 'complete', result_content = $3, result_status = $4, settled_at = $5, settled_ms = $6::bigint
             WHERE turn_key = $1 AND token = $2 AND state = 'pending'`,
    };
    const reset = () => admin.query(`TRUNCATE ${s}.claims, ${s}.scopes`);
    try {
      const subject = async () => {
        const ids = freshIdentities(options.pairs);
        await reset();
        const measured = await measure(async () => {
          for (const identity of ids) await claimAndSettle(store, identity);
        });
        return per(measured, ids.length);
      };
      const baseline = async () => {
        const ids = freshIdentities(options.pairs);
        await reset();
        const measured = await measure(async () => {
          for (const identity of ids) {
            const token = randomUUID();
            const claimedAt = new Date().toISOString();
            const claimed = await direct.query<{ token: string }>({
              ...insert,
              values: [
                identity.turnKey,
                identity.scopeId,
                identity.toolCallId,
                identity.toolName,
                identity.argsDigest,
                identity.mutationKey,
                token,
                claimedAt,
                Date.parse(claimedAt),
              ],
            });
            if (claimed.rowCount !== 1) throw new Error("bench: direct claim not inserted");
            const settledAt = new Date().toISOString();
            const settled = await direct.query({
              ...update,
              values: [identity.turnKey, token, RESULT_CONTENT, "success", settledAt, Date.parse(settledAt)],
            });
            if (settled.rowCount !== 1) throw new Error("bench: direct settle not applied");
          }
        });
        return per(measured, ids.length);
      };
      const result = await interleave({ ...roundOptions(options), baseline, subject });
      return {
        ...result,
        baselinePairsPerSecond: 1e9 / result.baseline,
        subjectPairsPerSecond: 1e9 / result.subject,
        throughputRatio: result.baseline / result.subject,
        cpuThroughputRatio: result.cpu.baseline / result.cpu.subject,
      };
    } finally {
      await store.close();
      await direct.end();
    }
  });
}

// ---------------------------------------------------------------------------------------------
// 2. Concurrency: distinct turns, and everyone on one turn

export interface PostgresConcurrencyOptions {
  /** Concurrent worker counts. Default [1, 2, 4, 8]. */
  readonly workers?: readonly number[];
  /** Distinct-turn pairs each worker runs per measurement. */
  readonly pairsPerWorker: number;
  /** Contended rounds (one turn each, claimed by every worker at once). */
  readonly contendedRounds: number;
  /** Unmeasured pairs / rounds first (prepared statements, JIT). Default 20. */
  readonly warmup?: number;
}

export interface ConcurrencyPoint {
  readonly workers: number;
  /** Distinct turns: claim+settle pairs per second, all workers together. */
  readonly pairsPerSecond: number;
  /** Wall-clock latency of one claim+settle pair, ns. */
  readonly p50: number;
  readonly p99: number;
  /** One turn claimed by every worker at once: turns (each one settled pair) per second. */
  readonly contendedTurnsPerSecond: number;
  /** Claims answered per second in the contended case (workers × turns). */
  readonly contendedClaimsPerSecond: number;
  /** Latency of one claim in the contended case (plus its settlement for the winner), ns. */
  readonly contendedP50: number;
  readonly contendedP99: number;
  /** How the contended claims were answered. */
  readonly contendedAnswers: Readonly<Record<string, number>>;
}

export async function benchPostgresConcurrency(options: PostgresConcurrencyOptions): Promise<ConcurrencyPoint[] | undefined> {
  const url = postgresUrl();
  if (url === undefined) return undefined;
  const counts = options.workers ?? [1, 2, 4, 8];
  const warmup = options.warmup ?? 20;
  return withSchema(url, "concurrency", async (schema) => {
    const store = await PostgresGuardrailStore.open({ connectionString: url }, { schema });
    try {
      for (const identity of freshIdentities(warmup)) await claimAndSettle(store, identity);
      const points: ConcurrencyPoint[] = [];
      for (const workers of counts) {
        log(`  postgres: ${String(workers)} worker(s)`);
        // Distinct turns.
        const batches = Array.from({ length: workers }, () => freshIdentities(options.pairsPerWorker));
        const latencies: number[] = [];
        const started = process.hrtime.bigint();
        await Promise.all(
          batches.map(async (batch) => {
            for (const identity of batch) {
              const begin = process.hrtime.bigint();
              await claimAndSettle(store, identity);
              latencies.push(Number(process.hrtime.bigint() - begin));
            }
          }),
        );
        const distinctNs = Number(process.hrtime.bigint() - started);

        // Everyone on one turn, round after round.
        const answers: Record<string, number> = {};
        const claimLatencies: number[] = [];
        const turns = freshIdentities(options.contendedRounds);
        const contendedStart = process.hrtime.bigint();
        for (const identity of turns) {
          await Promise.all(
            Array.from({ length: workers }, async () => {
              const begin = process.hrtime.bigint();
              const claim = await store.claimMutation(identity);
              if (claim.status === "acquired") {
                await store.settleMutation({
                  turnKey: identity.turnKey,
                  token: claim.token,
                  outcome: "complete",
                  result: { content: RESULT_CONTENT, status: "success" },
                });
              }
              claimLatencies.push(Number(process.hrtime.bigint() - begin));
              answers[claim.status] = (answers[claim.status] ?? 0) + 1;
            }),
          );
        }
        const contendedNs = Number(process.hrtime.bigint() - contendedStart);
        if ((answers.acquired ?? 0) !== turns.length) {
          throw new Error(`bench: ${String(answers.acquired ?? 0)} acquisitions for ${String(turns.length)} contended turns`);
        }
        points.push({
          workers,
          pairsPerSecond: (workers * options.pairsPerWorker * 1e9) / distinctNs,
          p50: median(latencies),
          p99: quantile(latencies, 0.99),
          contendedTurnsPerSecond: (turns.length * 1e9) / contendedNs,
          contendedClaimsPerSecond: (turns.length * workers * 1e9) / contendedNs,
          contendedP50: median(claimLatencies),
          contendedP99: quantile(claimLatencies, 0.99),
          contendedAnswers: answers,
        });
      }
      return points;
    } finally {
      await store.close();
    }
  });
}

// ---------------------------------------------------------------------------------------------
// 3. What ordered audit numbering costs

export interface PostgresAuditOptions {
  /** Events each appender writes per measurement. */
  readonly eventsPerAppender: number;
  /** Concurrent appender counts. Default [1, 8]. */
  readonly appenders?: readonly number[];
}

export interface AuditPoint {
  readonly appenders: number;
  /** `appendAudit` (advisory lock, seq in commit order): events per second. */
  readonly lockedPerSecond: number;
  /** The same INSERT, seq from a plain sequence default, no lock: events per second. */
  readonly unlockedPerSecond: number;
}

export async function benchPostgresAudit(options: PostgresAuditOptions): Promise<AuditPoint[] | undefined> {
  const url = postgresUrl();
  if (url === undefined) return undefined;
  return withSchema(url, "audit", async (schema, admin) => {
    const store = await PostgresGuardrailStore.open({ connectionString: url }, { schema });
    const direct = new pg.Pool({ connectionString: url, connectionTimeoutMillis: 10_000 });
    direct.on("error", () => undefined);
    const s = `"${schema}"`;
    await admin.query(`CREATE TABLE ${s}.audit_unlocked (LIKE ${s}.audit INCLUDING ALL)`);
    await admin.query(`CREATE SEQUENCE ${s}.audit_unlocked_seq`);
    await admin.query(`ALTER TABLE ${s}.audit_unlocked ALTER COLUMN seq SET DEFAULT nextval('${s}.audit_unlocked_seq')`);
    const plain = {
      name: "bench_audit_unlocked",
      text: `INSERT INTO ${s}.audit_unlocked (at, at_ms, decision, turn_key, scope_id, event) VALUES ($1, $2::bigint, $3, $4, $5, $6)`,
    };
    const event = (i: number): AuditEvent => ({
      at: new Date().toISOString(),
      decision: "executed",
      turnKey: digest({ audit: i }),
      scopeId: "doc-1",
      toolCallId: `call-${String(i)}`,
      toolName: "rename_document",
      kind: "mutation",
    });
    const rate = async (appenders: number, append: (e: AuditEvent) => Promise<unknown>) => {
      const started = process.hrtime.bigint();
      await Promise.all(
        Array.from({ length: appenders }, async (_, worker) => {
          for (let i = 0; i < options.eventsPerAppender; i++) await append(event(worker * 1_000_000 + i));
        }),
      );
      return (appenders * options.eventsPerAppender * 1e9) / Number(process.hrtime.bigint() - started);
    };
    const locked = (e: AuditEvent) => store.appendAudit(e);
    const unlocked = (e: AuditEvent) =>
      direct.query({
        ...plain,
        values: [e.at, Date.parse(e.at), e.decision, e.turnKey, e.scopeId, JSON.stringify(e)],
      });
    try {
      await rate(2, locked);
      await rate(2, unlocked);
      const points: AuditPoint[] = [];
      for (const appenders of options.appenders ?? [1, 8]) {
        // Alternate the order so neither side always runs on the warmer (or fuller) table.
        const first = points.length % 2 === 0;
        const a = await rate(appenders, first ? locked : unlocked);
        const b = await rate(appenders, first ? unlocked : locked);
        points.push({ appenders, lockedPerSecond: first ? a : b, unlockedPerSecond: first ? b : a });
      }
      return points;
    } finally {
      await store.close();
      await direct.end();
    }
  });
}

// ---------------------------------------------------------------------------------------------
// Rows for the report

export interface PostgresBenchOptions {
  /** A few rounds of each, to check the benchmarks work. */
  readonly quick?: boolean;
}

export interface PostgresReport {
  readonly rows: ResultRow[];
  /** What limits the turn curve, from the measurements: Markdown bullets (empty when skipped). */
  readonly findings: string[];
}

/** The settings the durable comparison's embedded server runs with (over embedded.ts's defaults). */
const DURABLE_SETTINGS = { fsync: "on", synchronous_commit: "on", full_page_writes: "on", track_wal_io_timing: "on" } as const;

const ratio = (value: number) => `${value.toFixed(3)}x`;

/** The store's claim+settle pairs/s against the same statements through pg: at least this. */
export const PAIRS_TARGET = 0.9;

/**
 * Runs all four and returns report rows and findings: on ARKAH_PG_URL when it is set, otherwise on
 * a throwaway embedded server (scripts/postgres/embedded.ts: loopback, fsync=off,
 * synchronous_commit=off, full_page_writes=off) started for the run.
 */
export async function benchPostgres(options: PostgresBenchOptions = {}): Promise<PostgresReport> {
  if (postgresUrl() !== undefined) return runPostgresBenches(options, false);
  log("postgres: ARKAH_PG_URL is not set; starting an embedded server for the run");
  const server = await startEmbeddedPostgres({ database: "arkah_bench" });
  process.env.ARKAH_PG_URL = server.url;
  try {
    return await runPostgresBenches(options, true);
  } finally {
    delete process.env.ARKAH_PG_URL;
    await server.stop();
  }
}

/**
 * The durable comparison's target: on the embedded server, a second embedded server with
 * DURABLE_SETTINGS (fsync cannot change without a restart, and the first server's command-line
 * settings override ALTER SYSTEM); on a server of yours, the same server with
 * `synchronous_commit=on` per session (its fsync is whatever it is configured with).
 */
function durableTarget(url: string, embedded: boolean): () => Promise<DurableTarget> {
  if (!embedded) {
    return async () => ({
      label: "synchronous_commit=on per session",
      url,
      sessionOptions: "-c synchronous_commit=on",
      stop: async () => undefined,
    });
  }
  return async () => {
    const server = await startEmbeddedPostgres({ database: "arkah_bench_durable", settings: DURABLE_SETTINGS });
    return {
      label: "embedded server with fsync=on, synchronous_commit=on, full_page_writes=on",
      url: server.url,
      stop: () => server.stop(),
    };
  };
}

async function runPostgresBenches(options: PostgresBenchOptions, embedded: boolean): Promise<PostgresReport> {
  const quick = options.quick === true;
  const rows: ResultRow[] = [];

  log("postgres 1/4: claim+settle pairs, store vs direct pg");
  const pairs = await benchPostgresPairs(
    quick
      ? { pairs: 50, rounds: 3, warmup: 1 }
      : { pairs: 200, rounds: 40, minRounds: 10, budgetMs: 30_000, warmup: 3 },
  );
  if (pairs !== undefined) rows.push(pairsRow(pairs));

  log("postgres 2/4: claim+settle pairs at 1, 2, 4, 8 concurrent workers, distinct turns and one contended turn");
  const concurrency = await benchPostgresConcurrency(
    quick ? { pairsPerWorker: 20, contendedRounds: 10, warmup: 5 } : { pairsPerWorker: 250, contendedRounds: 200 },
  );
  if (concurrency !== undefined) rows.push(...concurrencyRows(concurrency));

  log("postgres 3/4: audit appends, ordered (advisory lock) vs plain sequence");
  const audit = await benchPostgresAudit(quick ? { eventsPerAppender: 20 } : { eventsPerAppender: 500 });
  if (audit !== undefined) rows.push(...auditRows(audit));

  log("postgres 4/4: read-then-write turns through the middleware, 1 to 32 workers");
  const url = postgresUrl();
  if (url === undefined) return { rows, findings: [] };
  const turns = await withSchema(url, "turns", (schema) =>
    benchPostgresTurns(url, schema, {
      ...(quick
        ? { workers: [1, 32], durationMs: 300, warmupMs: 150, countedTurns: 2, comparisonMs: 300, comparisonRounds: 1 }
        : { workers: TURN_WORKERS, durationMs: 5_000, warmupMs: 1_000, countedTurns: 10, comparisonMs: 6_000, comparisonRounds: 3 }),
      processes: defaultProcesses(),
      processWarmupTurns: quick ? 20 : 400,
      durable: durableTarget(url, embedded),
    }),
  );
  rows.push(...turnRows(turns));
  return { rows, findings: turnFindings(turns) };
}

/** Concurrent workers of the turn benchmark. */
export const TURN_WORKERS = [1, 2, 4, 8, 32] as const;

export function pairsRow(result: PostgresPairsResult): ResultRow {
  return {
    benchmark: "postgres claim+settle (vs the same two statements through pg)",
    baseline: `${formatRate(result.baselinePairsPerSecond)} (${formatNs(result.baseline)}/pair)`,
    subject: `${formatRate(result.subjectPairsPerSecond)} (${formatNs(result.subject)}/pair)`,
    ratio: ratio(result.throughputRatio),
    cpuRatio: ratio(result.cpuThroughputRatio),
    target: `≥ ${PAIRS_TARGET.toFixed(2)}x pairs/s`,
    pass: result.throughputRatio >= PAIRS_TARGET,
    note:
      `throughput ratio (subject/baseline pairs/s); median of per-round ratios ${ratio(1 / result.pairedRatio)}; ` +
      `store adds ${formatNs(result.pairedDifference)} ± ${formatNs(result.pairedDifferenceError)} per pair; ` +
      `CPU time (this process) ${formatNs(result.cpu.baseline)} → ${formatNs(result.cpu.subject)}; ` +
      `${String(result.baselineSamples.length)} rounds`,
  };
}

export function concurrencyRows(points: readonly ConcurrencyPoint[]): ResultRow[] {
  const one = points.find((point) => point.workers === 1);
  return points.map((point) => ({
    benchmark: `postgres ${String(point.workers)} worker(s): distinct turns | all on one turn`,
    baseline: `${formatRate(point.pairsPerSecond)} pairs, p50 ${formatNs(point.p50)}, p99 ${formatNs(point.p99)}`,
    subject:
      `${formatRate(point.contendedTurnsPerSecond)} turns (${formatRate(point.contendedClaimsPerSecond)} claims), ` +
      `p50 ${formatNs(point.contendedP50)}, p99 ${formatNs(point.contendedP99)}`,
    ratio: one === undefined ? "n/a" : `${(point.pairsPerSecond / one.pairsPerSecond).toFixed(2)}x of 1 worker`,
    target: "(reported)",
    pass: true,
    note: `contended answers ${Object.entries(point.contendedAnswers)
      .map(([status, count]) => `${status} ${String(count)}`)
      .join(", ")}`,
  }));
}

export function auditRows(points: readonly AuditPoint[]): ResultRow[] {
  return points.map((point) => ({
    benchmark: `postgres audit appends, ${String(point.appenders)} appender(s): plain sequence | ordered (lock)`,
    baseline: `${formatRate(point.unlockedPerSecond)} events`,
    subject: `${formatRate(point.lockedPerSecond)} events`,
    ratio: ratio(point.lockedPerSecond / point.unlockedPerSecond),
    target: "(reported)",
    pass: true,
    note: "ordered: seq taken under a transaction-scoped advisory lock, so seq order is commit order",
  }));
}
