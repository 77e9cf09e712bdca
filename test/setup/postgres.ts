/**
 * Vitest global setup: every run has a PostgreSQL server. `ARKAH_PG_URL`, when set, is used as it
 * is; otherwise a throwaway embedded server is started for this run and stopped after it. A server
 * that cannot start does not stop the run: the PostgreSQL suites fail with the reason
 * (`ARKAH_PG_UNAVAILABLE`, read by test/support/postgres.ts), the others still run.
 */
import { startEmbeddedPostgres } from "../../scripts/postgres/embedded.js";

export default async function setup(): Promise<(() => Promise<void>) | undefined> {
  if (process.env.ARKAH_PG_URL !== undefined && process.env.ARKAH_PG_URL !== "") {
    process.env.ARKAH_PG_SOURCE = "ARKAH_PG_URL";
    return undefined;
  }
  try {
    const server = await startEmbeddedPostgres();
    // Test workers (and the worker processes they spawn) inherit this environment.
    process.env.ARKAH_PG_URL = server.url;
    process.env.ARKAH_PG_SOURCE = "embedded PostgreSQL";
    return () => server.stop();
  } catch (error) {
    process.env.ARKAH_PG_UNAVAILABLE = error instanceof Error ? error.message : String(error);
    return undefined;
  }
}
