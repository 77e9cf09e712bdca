/**
 * What the guardrails keep per turn after `prune`, per store (issue 24, item 2). The soak measures
 * the whole process's heap, in which the agent loop's own retention dominates; this measures the
 * store alone, on records exactly as the middleware writes them:
 *
 * 1. one guarded read-then-write turn (bench/soak-turns.ts) runs through the real `createAgent`
 *    loop on a recording store, which keeps a copy of every call that writes (admission receipt,
 *    read evidence and its audit event, claim, settlement and its audit event);
 * 2. those calls are replayed into a fresh store of each kind for N turns, each under its own turn
 *    (every key recomputed, so each turn's records are distinct and as large as real ones);
 * 3. `prune` removes everything it may (a cut-off after the last turn);
 * 4. what remains is measured: the in-memory store by heap used after a full GC, before the first
 *    turn and after the prune (the store is the only thing allocated in between and kept); SQLite
 *    by the pages in use (page_count - freelist_count, times page_size); PostgreSQL by the bytes of
 *    its tables and indexes after VACUUM (pg_total_relation_size; dead tuples are reclaimed).
 *
 * Each divides by N: the bound per turn is what a pruned turn keeps by design (a tombstone, the
 * admission receipt, its audit events: docs/operations.md#retention). Nothing of the guardrails'
 * middleware is kept per turn outside the store: its per-turn state is dropped with the run (the
 * soak's heap figures minus these and the agent-only baseline show what is left).
 *
 *   pnpm tsx --expose-gc bench/guard-memory.ts [TURNS]     default 2,000; PostgreSQL on ARKAH_PG_URL or embedded
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { digest, InMemoryGuardrailStore, turnKey, type GuardrailStore } from "arkah-agent-guardrails";
import { PostgresGuardrailStore } from "arkah-agent-guardrails/postgres";
import { SqliteGuardrailStore } from "arkah-agent-guardrails/sqlite";
import { startEmbeddedPostgres } from "../scripts/postgres/embedded.js";
import { collectGarbage, log, yieldToEventLoop } from "./harness.js";
import { postgresUrl } from "./postgres.js";
import { SoakAgent, soakInput } from "./soak-turns.js";

/** A store call that writes, as the middleware made it. */
interface RecordedCall {
  readonly method: string;
  readonly args: readonly unknown[];
}

const READ_ONLY = /^(get|read|has|list)/;

/** Runs one real guarded turn and returns the store calls that wrote, in order, with their arguments. */
async function recordOneTurn(): Promise<{ calls: RecordedCall[]; scopeId: string; turnId: string }> {
  const inner = new InMemoryGuardrailStore();
  const calls: RecordedCall[] = [];
  const recording = new Proxy(inner, {
    get(target, name, receiver) {
      const value: unknown = Reflect.get(target, name, receiver);
      if (typeof value !== "function" || typeof name !== "string" || READ_ONLY.test(name)) {
        return typeof value === "function" ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      }
      return (...args: unknown[]) => {
        calls.push({ method: name, args: structuredClone(args) });
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
  const input = soakInput("guard-memory-template", "guard-memory-doc");
  const outcome = await new SoakAgent(recording).turn(input);
  if (outcome !== "executed") throw new Error(`guard-memory: the template turn's write was ${outcome}`);
  return { calls, scopeId: input.scopeId, turnId: input.turnId };
}

/**
 * The template's calls, moved to another turn: every string that is the template's turn id, scope
 * id, turn key, or a digest over the turn key (claim and evidence keys) is replaced by the new
 * turn's. Digests other than the turn key are re-derived by hashing the old value with the new turn
 * key: distinct per turn and the same length, which is all the store sees of them.
 */
function moveToTurn(calls: readonly RecordedCall[], from: { scopeId: string; turnId: string }, n: number): RecordedCall[] {
  const turnId = `${from.turnId}-${String(n)}`;
  const scopeId = `${from.scopeId}-${String(n)}`;
  const oldKey = turnKey(from);
  const newKey = turnKey({ scopeId, turnId });
  const moved = new Map<string, string>([
    [from.turnId, turnId],
    [from.scopeId, scopeId],
    [oldKey, newKey],
  ]);
  const move = (value: unknown, field: string | undefined): unknown => {
    if (typeof value === "string") {
      const known = moved.get(value);
      if (known !== undefined) return known;
      // Digests that identify the turn's records; argsDigest, fingerprints and the like stay.
      if (/^[0-9a-f]{64}$/.test(value) && field !== undefined && /^(mutationKey|evidenceDigest|readEvidence|inputDigest|requestKey|moderationDigest)$/.test(field)) {
        const next = digest({ old: value, turnKey: newKey });
        moved.set(value, next);
        return next;
      }
      return value;
    }
    if (Array.isArray(value)) return value.map((item) => move(item, field));
    if (typeof value === "object" && value !== null) {
      return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, move(item, key)]));
    }
    return value;
  };
  return calls.map((call) => ({ method: call.method, args: call.args.map((arg) => move(arg, undefined)) }));
}

/** Replays one turn's calls into `store`; a settlement takes the token its claim was given here. */
async function replayTurn(store: GuardrailStore, calls: readonly RecordedCall[]): Promise<void> {
  let token: string | undefined;
  for (const call of calls) {
    let args = call.args;
    if (call.method === "settleMutation" || call.method === "releaseMutation") {
      if (token === undefined) throw new Error("guard-memory: a settlement before its claim");
      args = [{ ...(args[0] as object), token }];
    }
    const method = (store as unknown as Record<string, (...a: unknown[]) => Promise<unknown>>)[call.method];
    if (method === undefined) throw new Error(`guard-memory: the store has no ${call.method}`);
    const answer = await method.apply(store, [...args]);
    if (call.method === "claimMutation") {
      const claim = answer as { status: string; token?: string };
      if (claim.status !== "acquired" || claim.token === undefined) throw new Error(`guard-memory: a replayed claim answered ${claim.status}`);
      token = claim.token;
    }
  }
}

/**
 * The bound per store, in bytes a pruned turn keeps: its receipt, its tombstone and its audit
 * events (two for a read-then-write turn), as each store encodes them. PostgreSQL's is larger: a
 * row header of 24 bytes, alignment, and a B-tree entry per index for each row.
 */
export const GUARD_MEMORY_TARGETS = { "in-memory": 4_096, SQLite: 4_096, PostgreSQL: 6_144 } as const;

export interface GuardMemoryRow {
  readonly store: keyof typeof GUARD_MEMORY_TARGETS;
  readonly turns: number;
  /** What the store keeps per turn after prune, in bytes. */
  readonly bytesPerTurn: number;
  readonly how: string;
}

async function fill(store: GuardrailStore, template: Awaited<ReturnType<typeof recordOneTurn>>, turns: number): Promise<number> {
  for (let n = 0; n < turns; n++) await replayTurn(store, moveToTurn(template.calls, template, n));
  // Every turn settled before now: a cut-off an hour ahead prunes them all.
  const result = await store.prune({ olderThan: new Date(Date.now() + 3_600_000).toISOString() });
  if (result.turns !== turns) throw new Error(`guard-memory: prune pruned ${String(result.turns)} of ${String(turns)} turns`);
  return result.turns;
}

/**
 * Heap used once whatever an earlier run left is gone: some of it (`AbortSignal.any`'s weak
 * references, docs/operations.md#memory-in-a-long-running-server) is reclaimed only after the
 * event loop turns, so a single GC can leave it to be freed during the measurement.
 */
async function settledHeap(): Promise<number> {
  for (let round = 0; round < 4; round++) {
    collectGarbage();
    await yieldToEventLoop();
  }
  collectGarbage();
  return process.memoryUsage().heapUsed;
}

async function measureMemory(template: Awaited<ReturnType<typeof recordOneTurn>>, turns: number): Promise<GuardMemoryRow> {
  const before = await settledHeap();
  const store = new InMemoryGuardrailStore();
  await fill(store, template, turns);
  const after = await settledHeap();
  // Keep the store reachable until measured.
  if ((await store.readAudit({ limit: 1 })).length === 0) throw new Error("guard-memory: no audit kept");
  return { store: "in-memory", turns, bytesPerTurn: (after - before) / turns, how: "heap used after a full GC" };
}

async function measureSqlite(template: Awaited<ReturnType<typeof recordOneTurn>>, turns: number): Promise<GuardMemoryRow> {
  const dir = mkdtempSync(join(tmpdir(), "arkah-guard-memory-"));
  try {
    const path = join(dir, "guard.db");
    const store = SqliteGuardrailStore.open({ path });
    await fill(store, template, turns);
    store.close();
    // Measured with a plain connection: the store's own handle is private.
    const { default: Database } = await import("better-sqlite3");
    const db = new Database(path, { readonly: true });
    const pageSize = db.pragma("page_size", { simple: true }) as number;
    const pageCount = db.pragma("page_count", { simple: true }) as number;
    const free = db.pragma("freelist_count", { simple: true }) as number;
    db.close();
    // An empty store's pages (schema, indexes) are not per turn.
    const empty = join(dir, "empty.db");
    SqliteGuardrailStore.open({ path: empty }).close();
    const emptyDb = new Database(empty, { readonly: true });
    const emptyPages = (emptyDb.pragma("page_count", { simple: true }) as number) - (emptyDb.pragma("freelist_count", { simple: true }) as number);
    emptyDb.close();
    return { store: "SQLite", turns, bytesPerTurn: ((pageCount - free - emptyPages) * pageSize) / turns, how: "pages in use, less an empty store's" };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function measurePostgres(template: Awaited<ReturnType<typeof recordOneTurn>>, turns: number, url: string): Promise<GuardMemoryRow> {
  const schema = `guard_memory_${String(process.pid)}`;
  const pool = new pg.Pool({ connectionString: url, max: 2 });
  try {
    await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    const size = async () => {
      await pool.query("VACUUM");
      const { rows } = await pool.query<{ bytes: string }>(
        "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::text AS bytes FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relkind = 'r'",
        [schema],
      );
      return Number(rows[0]?.bytes ?? 0);
    };
    const store = await PostgresGuardrailStore.open({ pool }, { schema });
    const empty = await size();
    await fill(store, template, turns);
    const full = await size();
    await store.close();
    return { store: "PostgreSQL", turns, bytesPerTurn: (full - empty) / turns, how: "tables and indexes after VACUUM, less an empty store's" };
  } finally {
    await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`).catch(() => undefined);
    await pool.end();
  }
}

/** Fewer turns than this leave the in-memory figure to the heap's noise (tens of kilobytes). */
export const MIN_GUARD_MEMORY_TURNS = 2_000;

/** The three rows: bytes a pruned turn keeps in each store. */
export async function measureGuardMemory(requested: number): Promise<GuardMemoryRow[]> {
  const turns = Math.max(requested, MIN_GUARD_MEMORY_TURNS);
  const template = await recordOneTurn();
  const rows = [await measureMemory(template, turns), await measureSqlite(template, turns)];
  const configured = postgresUrl();
  if (configured !== undefined) {
    rows.push(await measurePostgres(template, turns, configured));
  } else {
    const server = await startEmbeddedPostgres();
    try {
      rows.push(await measurePostgres(template, turns, server.url));
    } finally {
      await server.stop();
    }
  }
  return rows;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  if (process.argv.includes("--calls")) log(`a turn writes: ${(await recordOneTurn()).calls.map((call) => call.method).join(", ")}`);
  const turns = Number(process.argv.find((arg, index) => index >= 2 && /^\d+$/.test(arg)) ?? 2_000);
  const rows = await measureGuardMemory(turns);
  for (const row of rows) log(`${row.store}: ${row.bytesPerTurn.toFixed(0)} B a pruned turn over ${String(row.turns)} turns (${row.how})`);
}
