/**
 * The turn service across worker processes on SQLite: separate OS processes, each opening the same
 * files (WAL mode) for the guardrail store, the `SqliteSaver` checkpointer and the write service.
 * A worker SIGKILLed inside the write body, after its write committed, leaves the claim `pending`
 * and the turn `running`; a restarted worker's `recover()` takes the turn over once the lease
 * expired and completes it through the tool's `confirm`: one write, no operator
 * (turn-service-support.ts; the same scenario runs on PostgreSQL).
 */
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, it } from "vitest";
import { SqliteGuardrailStore } from "arkah-agent-guardrails/sqlite";
import { tempDir } from "./support.js";
import { killInWriteThenRecover, turnServiceWorkers } from "./turn-service-support.js";

const LEASE_MS = 600_000;

describe("SQLite: the turn service across worker processes", () => {
  const dir = tempDir("arkah-turnsvc-sqlite-");
  const files = { path: join(dir.path, "guardrails.sqlite"), checkpoints: join(dir.path, "checkpoints.sqlite"), writes: join(dir.path, "writes.sqlite") };
  const workers = turnServiceWorkers({ kind: "sqlite", ...files }, LEASE_MS);
  let store: SqliteGuardrailStore;
  let writes: Database.Database;

  beforeAll(() => {
    store = SqliteGuardrailStore.open({ path: files.path });
    // The write service's table: one row per mutationKey (a key it has seen is not written again).
    writes = new Database(files.writes);
    writes.pragma("journal_mode = WAL");
    writes.exec("CREATE TABLE writes (mutation_key text PRIMARY KEY, turn_id text NOT NULL, worker text NOT NULL, note_id text NOT NULL, body text NOT NULL)");
  });

  afterAll(async () => {
    await workers.stopAll();
    store.close();
    writes.close();
    dir.remove();
  });

  const writesOf = (turnId: string) =>
    Promise.resolve((writes.prepare("SELECT worker FROM writes WHERE turn_id = ?").all(turnId) as { worker: string }[]).map((row) => row.worker));

  it("a worker SIGKILLed inside the write body, after its write committed: a restarted worker's recover() with confirm completes the turn with that one write, no operator", async () => {
    await killInWriteThenRecover({ workers, store, leaseMs: LEASE_MS, writesOf }, "killed-in-write-1");
  }, 120_000);
});
