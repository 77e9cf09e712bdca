/**
 * Model-based property tests of the store contract: random programs of admissions, reads, claims,
 * settlements, releases, reconciliations, approvals, expiries, prunes, audit appends and side-effect
 * claims, settlements, releases and reconciliations (with and without maxPerTurn), with
 * several workers' operations in flight at once, against each shipped store and a reference model
 * (support/store-model.ts). Compared after every command. See docs/reliability.md, "Property tests".
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "@fast-check/vitest";
import type pg from "pg";
import { afterAll, beforeAll, describe } from "vitest";
import { InMemoryGuardrailStore } from "arkah-agent-guardrails";
import { PostgresGuardrailStore } from "arkah-agent-guardrails/postgres";
import { SqliteGuardrailStore } from "arkah-agent-guardrails/sqlite";
import { adminPool, describePostgres, dropSchema, freshSchema, requirePostgres } from "../support/postgres.js";
import { propertyParameters, propertyTimeout } from "./support/runs.js";
import { programArbitrary, runProgram } from "./support/store-program.js";

/** Commands per program: enough to claim, settle, reconcile, prune and claim again. */
const MAX_COMMANDS = 40;

/** CI's budget: the whole file in well under a minute on two busy cores (docs/reliability.md). */
const MEMORY_RUNS = 150;
const SQLITE_RUNS = 60;
const POSTGRES_RUNS = 25;

describe("memory store against the model", () => {
  test.prop([programArbitrary(MAX_COMMANDS)], propertyParameters(MEMORY_RUNS))(
    "every program of concurrent workers' operations matches the contract",
    (commands) =>
      runProgram(
        commands,
        (now) => new InMemoryGuardrailStore({ now }),
        () => undefined,
      ),
    propertyTimeout(MEMORY_RUNS, 1_000),
  );
});

describe("SQLite store against the model", () => {
  let dir = "";
  let files = 0;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), "arkah-sqlite-model-"));
  });
  afterAll(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  test.prop([programArbitrary(MAX_COMMANDS)], propertyParameters(SQLITE_RUNS))(
    "every program of concurrent workers' operations matches the contract",
    (commands) =>
      runProgram(
        commands,
        (now) => {
          files += 1;
          return SqliteGuardrailStore.open({ path: join(dir, `model-${String(files)}.sqlite`), now });
        },
        (store) => {
          store.close();
        },
      ),
    propertyTimeout(SQLITE_RUNS, 3_000),
  );
});

requirePostgres();

describePostgres("PostgreSQL store against the model", () => {
  let admin: pg.Pool | undefined;
  let pool: pg.Pool | undefined;
  beforeAll(() => {
    admin = adminPool({ max: 2 });
    // Several connections, so a batch's operations really run in parallel on the server.
    pool = adminPool({ max: 4, maxUses: 500 });
  });
  afterAll(async () => {
    await pool?.end();
    await admin?.end();
  });

  test.prop([programArbitrary(MAX_COMMANDS)], propertyParameters(POSTGRES_RUNS))(
    "every program of concurrent workers' operations matches the contract",
    (commands) =>
      runProgram(
        commands,
        (now) => {
          if (pool === undefined) throw new Error("no pool: beforeAll did not run");
          return PostgresGuardrailStore.open({ pool }, { schema: freshSchema("arkah_model"), now });
        },
        async (store) => {
          await store.close();
          if (admin !== undefined) await dropSchema(admin, store.schema);
        },
      ),
    propertyTimeout(POSTGRES_RUNS, 6_000),
  );
});
