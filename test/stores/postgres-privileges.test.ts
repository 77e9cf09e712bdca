/**
 * The PostgreSQL store under a least-privilege runtime role, and `open`'s `migrate: false`.
 *
 * The runtime role has exactly the grants docs/production-postgres.md gives it (the example's
 * `guardrailGrants`: USAGE on the schema, DML on the tables, USAGE on the sequences, the migration
 * table read-only, the audit trail append-only) on a schema migrated by another role. The whole
 * conformance kit runs as that role, each test opening the store with `migrate: false`: every
 * store operation works with DML only. With
 * `migrate: false`, `open` runs no DDL even as a role that could (it checks the version in a
 * read-only transaction), and says to run the migration step when the schema is absent or older.
 */
import { createHash, randomBytes } from "node:crypto";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ConfigurationError } from "arkah-agent-guardrails";
import { MIGRATIONS, POSTGRES_SCHEMA_VERSION, PostgresGuardrailStore } from "arkah-agent-guardrails/postgres";
import { validateGuardrailStore } from "arkah-agent-guardrails/testing";
import { guardrailGrants } from "../../examples/production-postgres/setup.js";
import { rejection } from "../support/fixtures.js";
import { adminPool, blockedBackend, describePostgres, dropSchema, freshSchema, PG_URL, requirePostgres } from "../support/postgres.js";

requirePostgres();

/** A login role with a fresh name and password, and a pool connected as it. */
interface Role {
  readonly name: string;
  readonly pool: (options?: pg.PoolConfig) => pg.Pool;
}

async function createLoginRole(admin: pg.Pool, prefix: string): Promise<Role> {
  const name = `${prefix}_${randomBytes(5).toString("hex")}`;
  const password = randomBytes(12).toString("hex");
  await admin.query(`CREATE ROLE ${pg.escapeIdentifier(name)} LOGIN PASSWORD ${pg.escapeLiteral(password)}`);
  const url = new URL(PG_URL ?? "");
  url.username = name;
  url.password = password;
  return {
    name,
    pool: (options = {}) => {
      const pool = new pg.Pool({ connectionString: url.href, max: 4, ...options });
      pool.on("error", () => undefined);
      return pool;
    },
  };
}

async function dropRole(admin: pg.Pool, role: Role): Promise<void> {
  // Its grants go with DROP OWNED; it owns nothing else.
  await admin.query(`DROP OWNED BY ${pg.escapeIdentifier(role.name)}`);
  await admin.query(`DROP ROLE ${pg.escapeIdentifier(role.name)}`);
}

/** A schema migrated by the admin (the owner), with the runtime role's grants. */
async function migratedFor(admin: pg.Pool, role: Role, schema = freshSchema("arkah_priv")): Promise<string> {
  const owner = await PostgresGuardrailStore.open({ pool: admin }, { schema });
  await owner.close();
  for (const statement of guardrailGrants(role.name, schema)) await admin.query(statement);
  return schema;
}

/** A schema at version 2, as it shipped, built by the admin. */
async function versionTwo(admin: pg.Pool, schema: string): Promise<void> {
  const s = `"${schema}"`;
  await admin.query(`CREATE SCHEMA ${s}`);
  for (const statement of MIGRATIONS.filter((m) => m.version <= 2).flatMap((m) => m.statements(s))) await admin.query(statement);
  await admin.query(`CREATE TABLE ${s}.schema_migrations (version integer PRIMARY KEY, description text NOT NULL, applied_at text NOT NULL)`);
  await admin.query(`INSERT INTO ${s}.schema_migrations VALUES (1, 'v1', '2031-01-01T00:00:00.000Z'), (2, 'v2', '2031-01-02T00:00:00.000Z')`);
}

async function versionOf(admin: pg.Pool, schema: string): Promise<number | null> {
  const { rows } = await admin.query<{ v: number | null }>(`SELECT max(version) AS v FROM "${schema}".schema_migrations`);
  return rows[0]?.v ?? null;
}

const schemaExists = async (admin: pg.Pool, schema: string) =>
  (await admin.query("SELECT 1 FROM pg_namespace WHERE nspname = $1", [schema])).rowCount === 1;

describePostgres("PostgreSQL store as a DML-only runtime role: the conformance kit", async () => {
  let admin: pg.Pool | undefined;
  let runtime: Role | undefined;
  let pool: pg.Pool | undefined;
  // One schema, migrated once by the owner and emptied after each test: a fresh migration per
  // test would double this file's time, and the grants, not a fresh schema, are under test here.
  const schema = freshSchema("arkah_priv_conf");

  await validateGuardrailStore({
    storeName: "postgres (runtime role, migrate: false)",
    beforeAll: async () => {
      admin = adminPool({ max: 2 });
      runtime = await createLoginRole(admin, "arkah_rt");
      pool = runtime.pool({ max: 8 });
      await migratedFor(admin, runtime, schema);
    },
    afterAll: async () => {
      await pool?.end();
      if (admin !== undefined) await dropSchema(admin, schema);
      if (admin !== undefined && runtime !== undefined) await dropRole(admin, runtime);
      await admin?.end();
    },
    createStore: ({ now }) => {
      if (pool === undefined) throw new Error("beforeAll did not run");
      return PostgresGuardrailStore.open({ pool }, { schema, now, migrate: false });
    },
    destroyStore: async (store) => {
      await store.close();
      if (admin === undefined) return;
      // Every table but the version, whatever tables a later migration adds (DELETE: much cheaper
      // than TRUNCATE on tables this small); the audit numbers restart.
      const { rows } = await admin.query<{ t: string }>(
        "SELECT tablename AS t FROM pg_tables WHERE schemaname = $1 AND tablename <> 'schema_migrations'",
        [schema],
      );
      const s = pg.escapeIdentifier(schema);
      for (const { t } of rows) await admin.query(`DELETE FROM ${s}.${pg.escapeIdentifier(t)}`);
      await admin.query(`ALTER SEQUENCE ${s}.audit_seq RESTART`);
    },
  });
});

describePostgres("PostgresGuardrailStore.open: migrate and the runtime role", () => {
  let admin: pg.Pool;
  let runtime: Role;
  const schemas: string[] = [];
  const fresh = () => {
    const schema = freshSchema("arkah_priv");
    schemas.push(schema);
    return schema;
  };

  beforeAll(async () => {
    admin = adminPool();
    runtime = await createLoginRole(admin, "arkah_rt");
  });

  afterAll(async () => {
    for (const schema of schemas) await dropSchema(admin, schema);
    await dropRole(admin, runtime);
    await admin.end();
  });

  describe("migrate: false", () => {
    it("an absent schema is refused, and not created, even for a role that could create it", async () => {
      const schema = fresh();
      const error = await rejection(PostgresGuardrailStore.open({ pool: admin }, { schema, migrate: false }));
      expect(ConfigurationError.isInstance(error)).toBe(true);
      expect((error as Error).message).toContain(`schema "${schema}"`);
      expect((error as Error).message).toContain(`does not exist; this version of arkah-agent-guardrails needs version ${String(POSTGRES_SCHEMA_VERSION)}`);
      expect((error as Error).message).toContain("run the migration step first");
      expect(await schemaExists(admin, schema)).toBe(false);
    });

    it("a schema without the store's tables is refused, and no table is created in it", async () => {
      const schema = fresh();
      await admin.query(`CREATE SCHEMA "${schema}"`);
      const error = await rejection(PostgresGuardrailStore.open({ pool: admin }, { schema, migrate: false }));
      expect(ConfigurationError.isInstance(error)).toBe(true);
      expect((error as Error).message).toContain("holds no migrated store");
      const { rowCount } = await admin.query("SELECT 1 FROM pg_tables WHERE schemaname = $1", [schema]);
      expect(rowCount).toBe(0);
    });

    it("an older schema is refused naming both versions, and stays at its version", async () => {
      const schema = fresh();
      await versionTwo(admin, schema);
      const error = await rejection(PostgresGuardrailStore.open({ pool: admin }, { schema, migrate: false }));
      expect(ConfigurationError.isInstance(error)).toBe(true);
      expect((error as Error).message).toContain(`is at version 2; this version of arkah-agent-guardrails needs version ${String(POSTGRES_SCHEMA_VERSION)}`);
      expect(await versionOf(admin, schema)).toBe(2);
    });

    it("a newer schema is refused as with migrations", async () => {
      const schema = await migratedFor(admin, runtime, fresh());
      await admin.query(`INSERT INTO "${schema}".schema_migrations VALUES ($1, 'future', '2031-01-01T00:00:00.000Z')`, [POSTGRES_SCHEMA_VERSION + 1]);
      const error = await rejection(PostgresGuardrailStore.open({ pool: runtime.pool({ max: 1 }) }, { schema, migrate: false }));
      expect(ConfigurationError.isInstance(error)).toBe(true);
      expect((error as Error).message).toContain(`is at version ${String(POSTGRES_SCHEMA_VERSION + 1)}, newer than this version`);
    });

    it("a value other than a boolean is a ConfigurationError", async () => {
      const error = await rejection(PostgresGuardrailStore.open({ pool: admin }, { schema: fresh(), migrate: "no" as never }));
      expect(ConfigurationError.isInstance(error)).toBe(true);
      expect((error as Error).message).toMatch(/invalid PostgresGuardrailStore options: .*migrate/s);
    });

    it("a worker started during the migration step waits for it, then opens the migrated schema", async () => {
      const schema = fresh();
      const owner = await admin.connect();
      const pool = runtime.pool({ max: 1, application_name: `arkah_priv_wait_${schema}` });
      try {
        await owner.query("BEGIN");
        // The migration step's transaction, as the store runs it: its advisory lock, then the DDL.
        const key = createHash("sha256").update(`arkah-agent-guardrails:migrate:${schema}`).digest().readBigInt64BE(0).toString();
        await owner.query("SELECT pg_advisory_xact_lock($1::bigint)", [key]);
        const opening = PostgresGuardrailStore.open({ pool }, { schema, migrate: false });
        opening.catch(() => undefined);
        await blockedBackend(admin, `arkah_priv_wait_${schema}`);
        const s = `"${schema}"`;
        await owner.query(`CREATE SCHEMA ${s}`);
        for (const statement of MIGRATIONS.flatMap((m) => m.statements(s))) await owner.query(statement);
        await owner.query(`CREATE TABLE ${s}.schema_migrations (version integer PRIMARY KEY, description text NOT NULL, applied_at text NOT NULL)`);
        for (const m of MIGRATIONS) await owner.query(`INSERT INTO ${s}.schema_migrations VALUES ($1, $2, 'x')`, [m.version, m.description]);
        for (const statement of guardrailGrants(runtime.name, schema)) await owner.query(statement);
        await owner.query("COMMIT");
        const store = await opening;
        expect(await store.getReceipt("0".repeat(64))).toBeUndefined();
        await store.close();
      } finally {
        owner.release();
        await pool.end();
      }
    });
  });

  describe("as the runtime role (DML only)", () => {
    it("opens a migrated schema without migrate: false too: open runs no DDL on a current schema", async () => {
      const schema = await migratedFor(admin, runtime, fresh());
      const pool = runtime.pool({ max: 1 });
      try {
        const store = await PostgresGuardrailStore.open({ pool }, { schema });
        expect(await store.listUnresolved()).toEqual([]);
        await store.close();
      } finally {
        await pool.end();
      }
    });

    it("cannot upgrade an older schema: open rejects and the schema stays at its version", async () => {
      const schema = fresh();
      await versionTwo(admin, schema);
      for (const statement of guardrailGrants(runtime.name, schema)) await admin.query(statement);
      const pool = runtime.pool({ max: 1 });
      try {
        const error = await rejection(PostgresGuardrailStore.open({ pool }, { schema }));
        expect((error as Error).message).toMatch(new RegExp(`could not migrate schema "${schema}" at .*: (must be owner|permission denied)`));
        expect(await versionOf(admin, schema)).toBe(2);
      } finally {
        await pool.end();
      }
    });

    it("cannot run DDL in the schema, rewrite the audit trail or the migration table", async () => {
      const schema = await migratedFor(admin, runtime, fresh());
      const pool = runtime.pool({ max: 1 });
      const code = async (sql: string) => ((await rejection(pool.query(sql))) as { code?: unknown }).code;
      try {
        const s = `"${schema}"`;
        expect(await code(`CREATE TABLE ${s}.mine (id int)`)).toBe("42501");
        expect(await code(`DROP TABLE ${s}.claims`)).toBe("42501");
        expect(await code(`ALTER TABLE ${s}.claims ADD COLUMN x int`)).toBe("42501");
        expect(await code(`CREATE SCHEMA arkah_priv_not_${randomBytes(3).toString("hex")}`)).toBe("42501");
        expect(await code(`DELETE FROM ${s}.audit`)).toBe("42501");
        expect(await code(`UPDATE ${s}.audit SET decision = 'x'`)).toBe("42501");
        expect(await code(`INSERT INTO ${s}.schema_migrations VALUES (99, 'x', 'x')`)).toBe("42501");
        expect(await code(`TRUNCATE ${s}.claims`)).toBe("42501");
      } finally {
        await pool.end();
      }
    });
  });
});
