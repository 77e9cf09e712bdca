/**
 * PostgreSQL test support. Every PostgreSQL test reads `ARKAH_PG_URL` (`.ci/run` starts a
 * throwaway cluster and sets it). Without it the PostgreSQL suites are skipped (`describe.runIf`),
 * except under `CI=true`, where `requirePostgresUnderCi` registers a test that fails: CI must never
 * pass by not running them. Each suite works in its own randomly named schema and drops it after.
 */
import { randomBytes } from "node:crypto";
import pg from "pg";
import { expect, it } from "vitest";
import { digest, mutationKey, turnKey, type MutationIdentity } from "arkah-agent-guardrails";

/** The database URL, or undefined when PostgreSQL tests cannot run here. */
export const PG_URL: string | undefined = process.env.ARKAH_PG_URL === "" ? undefined : process.env.ARKAH_PG_URL;

export const UNDER_CI = process.env.CI === "true";

/** The reason shown in suite names when they are skipped. */
export const PG_SUITE = PG_URL === undefined ? "(skipped: ARKAH_PG_URL is not set)" : "(ARKAH_PG_URL)";

/**
 * Registers a test that fails under CI=true when ARKAH_PG_URL is missing, and otherwise (when a URL
 * is set) checks that it is a postgres URL the server answers on. It is not registered at all when
 * there is neither CI nor a URL, so it never passes without checking something.
 */
export function requirePostgresUnderCi(): void {
  it.runIf(UNDER_CI || PG_URL !== undefined)("has a reachable ARKAH_PG_URL (required when CI=true)", async () => {
    expect(PG_URL, "CI=true but ARKAH_PG_URL is not set: .ci/run must start PostgreSQL").toBeDefined();
    const url = new URL(PG_URL ?? "");
    expect(["postgres:", "postgresql:"]).toContain(url.protocol);
    const client = new pg.Client({ connectionString: PG_URL });
    await client.connect();
    try {
      const { rows } = await client.query<{ one: number }>("SELECT 1 AS one");
      expect(rows).toEqual([{ one: 1 }]);
    } finally {
      await client.end();
    }
  });
}

/** A fresh schema name, unique per call. */
export function freshSchema(prefix = "arkah_test"): string {
  return `${prefix}_${randomBytes(6).toString("hex")}`;
}

/** A pool on ARKAH_PG_URL, for test bookkeeping (not the store's connection). */
export function adminPool(options: pg.PoolConfig = {}): pg.Pool {
  if (PG_URL === undefined) throw new Error("ARKAH_PG_URL is not set");
  const pool = new pg.Pool({ connectionString: PG_URL, max: 4, ...options });
  pool.on("error", () => undefined);
  return pool;
}

/** Drops a test schema and everything in it. */
export async function dropSchema(pool: pg.Pool, schema: string): Promise<void> {
  await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
}

/** The identity a claim is made under, as the middleware computes it. */
export function claimIdentity(
  turn: { scopeId: string; turnId: string },
  call: { id: string; name: string; args: Record<string, unknown> } = {
    id: "w1",
    name: "rename_document",
    args: { title: "Field notes", expectedRevision: 0 },
  },
): MutationIdentity {
  return {
    turnKey: turnKey(turn),
    scopeId: turn.scopeId,
    toolCallId: call.id,
    toolName: call.name,
    argsDigest: digest(call.args),
    mutationKey: mutationKey(turn, call),
  };
}

/**
 * Waits until a backend of `applicationName` is blocked on a lock (`wait_event_type = 'Lock'`)
 * and returns its pid. Polls pg_stat_activity; fails after `attempts` polls.
 */
export async function blockedBackend(pool: pg.Pool, applicationName: string, attempts = 400): Promise<number> {
  for (let attempt = 0; attempt < attempts; attempt++) {
    const { rows } = await pool.query<{ pid: number }>(
      "SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'",
      [applicationName],
    );
    if (rows[0] !== undefined) return rows[0].pid;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  throw new Error(`no backend of ${applicationName} became blocked on a lock`);
}
