/** The store module test/processes/race-harness.test.ts hands `raceGuardrailStore` for PostgreSQL: one schema shared by every process. */
import { PostgresGuardrailStore } from "arkah-agent-guardrails/postgres";

export function openStore(options: { url: string; schema: string }): Promise<PostgresGuardrailStore> {
  return PostgresGuardrailStore.open({ connectionString: options.url }, { schema: options.schema });
}
