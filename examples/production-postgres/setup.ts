/**
 * The migration step: run once per deploy, before the new workers start, as the role that owns
 * the schemas (it may run DDL). It migrates the guardrail store's schema and LangGraph's
 * checkpoint schema, then grants the runtime role what the workers need: DML, never DDL.
 *
 *   OWNER_DATABASE_URL=postgres://owner@db/app RUNTIME_ROLE=app_runtime tsx examples/production-postgres/setup.ts
 *
 * Idempotent: a second run migrates nothing and grants the same privileges again (so a table a
 * new version of either package adds is granted too). docs/production-postgres.md explains each step.
 */
import { pathToFileURL } from "node:url";
import { PostgresSaver } from "@langchain/langgraph-checkpoint-postgres";
import pg from "pg";
import { PostgresGuardrailStore } from "arkah-agent-guardrails/postgres";

/** Where each part lives: the store's default schema, and a schema of its own for the checkpoints. */
export interface Schemas {
  readonly guardrails: string;
  readonly checkpoints: string;
}

export const SCHEMAS: Schemas = { guardrails: "arkah_guardrails", checkpoints: "langgraph" };

/** Migrates both schemas as their owner (the pool's role), then grants `runtimeRole` DML on them. */
export async function setupDatabase(ownerPool: pg.Pool, runtimeRole: string, schemas: Schemas = SCHEMAS): Promise<void> {
  // The store's migrations, in one transaction under an advisory lock (creates the schema if absent).
  const store = await PostgresGuardrailStore.open({ pool: ownerPool }, { schema: schemas.guardrails });
  await store.close();
  // LangGraph's: setup() takes no lock and no transaction, so it runs here, once, never in the workers.
  await new PostgresSaver(ownerPool, undefined, { schema: schemas.checkpoints }).setup();
  await grantRuntime(ownerPool, runtimeRole, schemas);
}

/**
 * The store's grants to the runtime role: USAGE on the schema (not CREATE), DML on its tables,
 * USAGE on its sequences (the audit trail's numbers). Then two revokes: `schema_migrations` is
 * read-only to it (`open` only reads the version), and the audit trail is append-only (the store
 * only inserts and reads events), so a compromised worker cannot rewrite the trail.
 */
export function guardrailGrants(runtimeRole: string, schema: string): string[] {
  const role = pg.escapeIdentifier(runtimeRole);
  const s = pg.escapeIdentifier(schema);
  return [
    `GRANT USAGE ON SCHEMA ${s} TO ${role}`,
    `GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA ${s} TO ${role}`,
    `GRANT USAGE ON ALL SEQUENCES IN SCHEMA ${s} TO ${role}`,
    `REVOKE INSERT, UPDATE, DELETE ON ${s}.schema_migrations FROM ${role}`,
    `REVOKE UPDATE, DELETE ON ${s}.audit FROM ${role}`,
  ];
}

/** The checkpointer's grants: USAGE on the schema, DML on its tables; its migrations table read-only. */
export function checkpointGrants(runtimeRole: string, schema: string): string[] {
  const role = pg.escapeIdentifier(runtimeRole);
  const s = pg.escapeIdentifier(schema);
  return [
    `GRANT USAGE ON SCHEMA ${s} TO ${role}`,
    `GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA ${s} TO ${role}`,
    `REVOKE INSERT, UPDATE, DELETE ON ${s}.checkpoint_migrations FROM ${role}`,
  ];
}

/** Both schemas' grants, in one transaction. */
export async function grantRuntime(ownerPool: pg.Pool, runtimeRole: string, schemas: Schemas = SCHEMAS): Promise<void> {
  const client = await ownerPool.connect();
  try {
    await client.query("BEGIN");
    for (const statement of [...guardrailGrants(runtimeRole, schemas.guardrails), ...checkpointGrants(runtimeRole, schemas.checkpoints)]) {
      await client.query(statement);
    }
    await client.query("COMMIT");
  } catch (error) {
    await client.query("ROLLBACK").catch(() => undefined);
    throw error;
  } finally {
    client.release();
  }
}

// `tsx examples/production-postgres/setup.ts`: the step as a deploy job runs it.
if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  const url = process.env.OWNER_DATABASE_URL;
  const runtimeRole = process.env.RUNTIME_ROLE;
  if (url === undefined || runtimeRole === undefined) {
    throw new Error("set OWNER_DATABASE_URL (the schemas' owner) and RUNTIME_ROLE (the role the workers connect as)");
  }
  const pool = new pg.Pool({ connectionString: url, max: 1 });
  pool.on("error", () => undefined);
  try {
    await setupDatabase(pool, runtimeRole);
    console.log(`migrated ${SCHEMAS.guardrails} and ${SCHEMAS.checkpoints}; granted DML to ${runtimeRole}`);
  } finally {
    await pool.end();
  }
}
