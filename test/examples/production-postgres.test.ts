/**
 * examples/production-postgres against the real server: an owner role that may create schemas and
 * a runtime role that may only log in; the migration step (setup.ts) as the owner; a worker
 * (app.ts) as the runtime role, on one pool of one connection shared by the guardrail store and
 * LangGraph's `PostgresSaver`. Writes are counted in the example's note service; reads, claims and
 * checkpoints are read back from their schemas as the admin.
 */
import { spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { fileURLToPath } from "node:url";
import { PostgresSaver } from "@langchain/langgraph-checkpoint-postgres";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { ConfigurationError, turnKey } from "arkah-agent-guardrails";
import { POSTGRES_SCHEMA_VERSION } from "arkah-agent-guardrails/postgres";
import { handleTurn, noteTurn, runtimePool, startWorker } from "../../examples/production-postgres/app.js";
import { createRoles, runDemo, urlAs, type DemoNames } from "../../examples/production-postgres/main.js";
import { setupDatabase } from "../../examples/production-postgres/setup.js";
import { rejection } from "../support/fixtures.js";
import { adminPool, describePostgres, freshSchema, requirePostgres } from "../support/postgres.js";

requirePostgres();

const ROOT = fileURLToPath(new URL("../..", import.meta.url));

/** Starting langchain and the CLI's process on a loaded machine. */
const SLOW = 120_000;

const fresh = (prefix: string): DemoNames => {
  const tag = randomBytes(4).toString("hex");
  return {
    ownerRole: `${prefix}_owner_${tag}`,
    runtimeRole: `${prefix}_rt_${tag}`,
    schemas: { guardrails: freshSchema(`${prefix}_g`), checkpoints: freshSchema(`${prefix}_c`) },
  };
};

async function dropRoles(admin: pg.Pool, names: DemoNames): Promise<void> {
  for (const role of [names.runtimeRole, names.ownerRole]) {
    if ((await admin.query("SELECT 1 FROM pg_roles WHERE rolname = $1", [role])).rowCount !== 1) continue;
    // The owner's schemas, and every grant to either role, go with DROP OWNED.
    await admin.query(`DROP OWNED BY ${pg.escapeIdentifier(role)} CASCADE`);
    await admin.query(`DROP ROLE ${pg.escapeIdentifier(role)}`);
  }
}

const errorCode = (error: unknown) => (error as { code?: unknown }).code;

describePostgres("examples/production-postgres", (url) => {
  let admin: pg.Pool;
  const names = fresh("arkah_prod");
  const { guardrails: g, checkpoints: c } = names.schemas;
  let owner: pg.Pool;
  let runtimeUrl: string;

  beforeAll(async () => {
    admin = adminPool({ max: 2 });
    const passwords = await createRoles(admin, names);
    owner = new pg.Pool({ connectionString: urlAs(url, names.ownerRole, passwords.owner), max: 1 });
    owner.on("error", () => undefined);
    runtimeUrl = urlAs(url, names.runtimeRole, passwords.runtime);
  });

  afterAll(async () => {
    await owner.end();
    await dropRoles(admin, names);
    await admin.end();
  });

  it("before the migration step, a worker refuses to start, naming the step", async () => {
    const pool = runtimePool(runtimeUrl, 1);
    try {
      const error = await rejection(startWorker(pool, names.schemas));
      expect(ConfigurationError.isInstance(error)).toBe(true);
      expect((error as Error).message).toContain(`schema "${g}"`);
      expect((error as Error).message).toContain("run the migration step first");
    } finally {
      await pool.end();
    }
  });

  it("the migration step as the owner: both schemas migrated and owned by it; a second run changes nothing", async () => {
    await setupDatabase(owner, names.runtimeRole, names.schemas);
    await setupDatabase(owner, names.runtimeRole, names.schemas);
    const owners = await admin.query<{ nspname: string; owner: string }>(
      "SELECT nspname, pg_get_userbyid(nspowner) AS owner FROM pg_namespace WHERE nspname = ANY($1) ORDER BY nspname",
      [[g, c]],
    );
    expect(owners.rows).toEqual(
      [
        { nspname: g, owner: names.ownerRole },
        { nspname: c, owner: names.ownerRole },
      ].sort((a, b) => (a.nspname < b.nspname ? -1 : 1)),
    );
    const versions = await admin.query<{ version: number }>(`SELECT version FROM "${g}".schema_migrations ORDER BY version`);
    expect(versions.rows.map((row) => row.version)).toEqual(Array.from({ length: POSTGRES_SCHEMA_VERSION }, (_, i) => i + 1));
    const saver = await admin.query<{ n: number }>(`SELECT count(*)::int AS n FROM "${c}".checkpoint_migrations`);
    expect(saver.rows[0]?.n).toBeGreaterThan(0);
    // The runtime role holds no CREATE on either schema, nor on the database.
    const privileges = await admin.query<{ g: boolean; c: boolean; db: boolean }>(
      "SELECT has_schema_privilege($1, $2, 'CREATE') AS g, has_schema_privilege($1, $3, 'CREATE') AS c, has_database_privilege($1, current_database(), 'CREATE') AS db",
      [names.runtimeRole, g, c],
    );
    expect(privileges.rows[0]).toEqual({ g: false, c: false, db: false });
  });

  it(
    "a turn as the runtime role, on one shared pool of one connection: reads, writes once, checkpointed in its schema; its retry writes nothing",
    async () => {
      const pool = runtimePool(runtimeUrl, 1);
      try {
        const worker = await startWorker(pool, names.schemas);
        const turn = noteTurn("req-prod-1", "Buy oat milk");
        expect(await handleTurn(worker, turn)).toBe('Done: note-7 says "Buy oat milk".');
        expect(worker.notes.writes).toBe(1);
        expect(worker.notes.get("note-7")).toEqual({ body: "Buy oat milk", revision: 4 });
        // The worker never opened a second connection: the store and the saver queue on the one.
        expect(pool.totalCount).toBe(1);

        const key = turnKey(turn);
        const reads = await admin.query(`SELECT 1 FROM "${g}".read_evidence WHERE turn_key = $1`, [key]);
        expect(reads.rowCount).toBe(1);
        const claims = await admin.query<{ state: string; tool_name: string }>(`SELECT state, tool_name FROM "${g}".claims WHERE turn_key = $1`, [key]);
        expect(claims.rows).toEqual([{ state: "complete", tool_name: "edit_note" }]);
        const checkpoints = await admin.query<{ n: number }>(`SELECT count(*)::int AS n FROM "${c}".checkpoints WHERE thread_id = $1`, [
          "turn-req-prod-1",
        ]);
        expect(checkpoints.rows[0]?.n).toBeGreaterThan(0);
        // Nowhere else: not in the store's schema, not in public (the saver's default).
        const elsewhere = await admin.query<{ g: string | null; p: string | null }>("SELECT to_regclass($1) AS g, to_regclass('public.checkpoints') AS p", [
          `"${g}".checkpoints`,
        ]);
        expect(elsewhere.rows[0]).toEqual({ g: null, p: null });
        const saved = await new PostgresSaver(pool, undefined, { schema: c }).getTuple({ configurable: { thread_id: "turn-req-prod-1" } });
        expect(saved?.checkpoint.id).toBeDefined();

        expect(await handleTurn(worker, turn)).toBe('Done: note-7 says "Buy oat milk".');
        expect(worker.notes.writes).toBe(1);
        const decisions = await worker.store.readAudit({ turnKey: key });
        expect(decisions.filter((event) => event.decision === "replayed")).toHaveLength(1);
      } finally {
        await pool.end();
      }
    },
    SLOW,
  );

  it("the runtime role cannot run DDL: no table in either schema, no schema, no setup() of its own", async () => {
    const pool = runtimePool(runtimeUrl, 1);
    try {
      expect(errorCode(await rejection(pool.query(`CREATE TABLE "${g}".mine (id int)`)))).toBe("42501");
      expect(errorCode(await rejection(pool.query(`CREATE TABLE "${c}".mine (id int)`)))).toBe("42501");
      expect(errorCode(await rejection(pool.query(`DROP TABLE "${c}".checkpoints`)))).toBe("42501");
      expect(errorCode(await rejection(pool.query(`CREATE SCHEMA "${g}_2"`)))).toBe("42501");
      // LangGraph's setup() starts with CREATE SCHEMA IF NOT EXISTS: only the migration step can run it.
      expect(errorCode(await rejection(new PostgresSaver(pool, undefined, { schema: c }).setup()))).toBe("42501");
    } finally {
      await pool.end();
    }
  });

  it(
    "pnpm example:postgres (main.ts): roles, setup, a turn and its retry, the CLI and the refused DDL, as it prints them",
    async () => {
      const demo = fresh("arkah_demo");
      vi.spyOn(console, "log").mockImplementation(() => undefined);
      try {
        // The CLI as its own process, from the sources (the example's runner reuses its own
        // process's tsx flags, which a vitest worker does not have).
        const cli = (args: readonly string[]) => {
          const child = spawnSync(process.execPath, ["--import", "tsx", "src/cli/index.ts", ...args], { cwd: ROOT, encoding: "utf8" });
          return { code: child.status, stdout: child.stdout, stderr: child.stderr };
        };
        const { trace, failures } = await runDemo(url, demo, cli);
        expect(failures).toEqual([]);
        expect(trace).toEqual([
          `1. roles: ${demo.ownerRole} (may create schemas), ${demo.runtimeRole} (may log in)`,
          `2. setup as ${demo.ownerRole}: migrated ${demo.schemas.guardrails} and ${demo.schemas.checkpoints}, granted ${demo.runtimeRole} DML on them`,
          `3. worker as ${demo.runtimeRole}: Done: note-7 says "Buy oat milk". (writes: 1)`,
          "4. the same turn retried: writes still 1 (the claim replayed its result)",
          `5. the turn's thread has its checkpoints in ${demo.schemas.checkpoints}`,
          `6. arkah-guardrails inspect as ${demo.runtimeRole}: no unresolved mutations`,
          `7. CREATE TABLE as ${demo.runtimeRole}: refused, insufficient privilege`,
        ]);
      } finally {
        vi.restoreAllMocks();
        await dropRoles(admin, demo);
      }
    },
    SLOW,
  );
});

describe("the schema names", () => {
  it("the example's guardrail schema is the store's and the CLI's default", async () => {
    const { SCHEMAS } = await import("../../examples/production-postgres/setup.js");
    const { DEFAULT_SCHEMA } = await import("../../src/adapters/postgres/schema-name.js");
    expect(SCHEMAS.guardrails).toBe(DEFAULT_SCHEMA);
  });
});
