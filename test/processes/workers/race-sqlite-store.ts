/** The store module test/processes/race-harness.test.ts hands `raceGuardrailStore`: one SQLite file shared by every process. */
import { SqliteGuardrailStore } from "arkah-agent-guardrails/sqlite";

export function openStore(options: { path: string }): SqliteGuardrailStore {
  return SqliteGuardrailStore.open({ path: options.path, busyTimeoutMs: 30_000 });
}
