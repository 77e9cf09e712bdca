/**
 * PostgreSQL test support. Every PostgreSQL test reads `ARKAH_PG_URL`, which the global setup
 * (test/setup/postgres.ts) always provides: the caller's own URL, or a throwaway embedded server it
 * started for the run. PostgreSQL suites never skip: where no server could be had, `describePostgres`
 * registers one failing test that says why and how to fix it. Each suite works in its own randomly
 * named schema and drops it after.
 */
import { randomBytes } from "node:crypto";
import { createServer } from "node:net";
import pg from "pg";
import { describe, expect, it } from "vitest";
import { digest, mutationKey, turnKey } from "arkah-agent-guardrails";
import { toolFingerprint, type MutationIdentity } from "arkah-agent-guardrails/store";

/** The database URL, or undefined when no server could be had (then PG suites fail). */
export const PG_URL: string | undefined = process.env.ARKAH_PG_URL === "" ? undefined : process.env.ARKAH_PG_URL;

/** Where the server came from, for suite names. */
export const PG_SUITE = `(${process.env.ARKAH_PG_SOURCE ?? "ARKAH_PG_URL"})`;

/** Why there is no server, and how to get one. */
export const PG_UNAVAILABLE =
  process.env.ARKAH_PG_UNAVAILABLE ??
  "ARKAH_PG_URL is not set and no embedded server was started: run the tests with `pnpm test` (its global setup starts one), or set ARKAH_PG_URL";

/**
 * `describe` for a suite that needs PostgreSQL: with a server, `factory` gets its URL; without one,
 * the suite holds a single test that fails with the reason, so a missing server is never a pass.
 */
export function describePostgres(name: string, factory: (url: string) => void | Promise<void>): void {
  const url = PG_URL;
  if (url === undefined) {
    describe(name, () => {
      it("needs a PostgreSQL server", () => {
        throw new Error(PG_UNAVAILABLE);
      });
    });
    return;
  }
  describe(`${name} ${PG_SUITE}`, () => factory(url));
}

/** Checks that the server answers on `ARKAH_PG_URL`; fails with the reason when there is none. */
export function requirePostgres(): void {
  it("has a reachable PostgreSQL server", async () => {
    if (PG_URL === undefined) throw new Error(PG_UNAVAILABLE);
    const url = new URL(PG_URL);
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
    toolFingerprint: toolFingerprint({ name: call.name }),
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

/**
 * How many backends of `applicationName` are left once ended connections have gone: an ended
 * client has sent Terminate, but its backend leaves pg_stat_activity only when it has exited, a
 * moment later. Polls until none is left, for at most `attempts` polls, and returns the last count.
 */
export async function remainingBackends(pool: pg.Pool, applicationName: string, attempts = 200): Promise<number> {
  let count = Number.NaN;
  for (let attempt = 0; attempt < attempts; attempt++) {
    const { rows } = await pool.query<{ n: string }>("SELECT count(*) AS n FROM pg_stat_activity WHERE application_name = $1", [applicationName]);
    count = Number(rows[0]?.n);
    if (count === 0) return count;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  return count;
}

/** A local TCP port nothing listens on (bound, then released). */
export async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (address === null || typeof address === "string") throw new Error("no port");
  return address.port;
}
