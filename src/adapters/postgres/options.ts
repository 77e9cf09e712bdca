/** How the PostgreSQL store is reached and configured: its arguments, checked before anything connects. */
import pg, { type ClientConfig, type Pool } from "pg";
import { z } from "zod";
import { ConfigurationError } from "../../errors.js";
import { redact } from "./errors.js";
import { isReservedSchemaName, SCHEMA_NAME } from "./schema-name.js";

/** How to reach the database: a connection string (the store owns its pool), or your own pool. */
export type PostgresConnection = { readonly connectionString: string } | { readonly pool: Pool };

/** `PostgresGuardrailStore.open`'s options, besides the connection. */
export interface PostgresGuardrailStoreOptions {
  /** The schema holding the store's tables, created if absent. Default `arkah_guardrails`. */
  readonly schema?: string;
  /**
   * Whether `open` runs the missing migrations (DDL: it needs CREATE on the database for a new
   * schema, and ownership of the tables for an upgrade). Default `true`. With `false`, `open` never
   * runs DDL: it only checks that the schema is at the version this package writes, and rejects
   * with a `ConfigurationError` if it is absent or older. Use `false` for a runtime role granted
   * DML only, with the migrations run by a separate step as the schema's owner
   * (docs/production-postgres.md).
   */
  readonly migrate?: boolean;
  /** Clock for claim, settlement, reconciliation and migration times. Default: the system clock. */
  readonly now?: () => Date;
}

/** An unquoted-safe identifier (it is quoted anyway); `pg_` names are reserved by PostgreSQL. */
const SchemaNameSchema = z
  .string()
  .regex(SCHEMA_NAME, "must be an identifier: a letter or _, then letters, digits or _, at most 63")
  .refine((name) => !isReservedSchemaName(name), "names starting with pg_ are reserved by PostgreSQL");

const ConnectionStringSchema = z.strictObject({ connectionString: z.string().min(1, "must not be empty") });
const PoolConnectionSchema = z.strictObject({
  pool: z.custom<Pool>(isPool, "must be a pg.Pool (with connect, query, on and options)"),
});

/**
 * The schema of the form `connection` takes: the pool form if it has a `pool` key, else the
 * connection-string form. Not a union: zod reports a union that no branch matches as "Invalid
 * input", which hid why a pool was refused.
 */
export function connectionSchema(connection: unknown): typeof ConnectionStringSchema | typeof PoolConnectionSchema {
  return typeof connection === "object" && connection !== null && "pool" in connection ? PoolConnectionSchema : ConnectionStringSchema;
}

/** A `pg.Pool`, by shape: the application's copy of pg may not be this module's. */
function isPool(value: unknown): boolean {
  if (typeof value !== "object" || value === null) return false;
  const pool = value as Record<string, unknown>;
  return (
    typeof pool.connect === "function" &&
    typeof pool.query === "function" &&
    typeof pool.on === "function" &&
    typeof pool.options === "object" &&
    pool.options !== null
  );
}

export const OptionsSchema = z.strictObject({
  schema: SchemaNameSchema.optional(),
  migrate: z.boolean().optional(),
  now: z.custom<() => Date>((value) => typeof value === "function", "must be a function returning a Date").optional(),
});

/**
 * Rejects anything but a `postgres://` / `postgresql://` URL or a socket path: the driver would
 * otherwise take "not a url" for a host name. The string itself is never echoed (it may hold a
 * password).
 */
export function checkConnectionString(connectionString: string): string {
  if (connectionString.startsWith("/")) return connectionString;
  let url: URL;
  try {
    url = new URL(connectionString);
  } catch {
    throw new ConfigurationError(
      `invalid PostgreSQL connection string ${redact(JSON.stringify(connectionString), undefined)}: not a URL; expected postgres://user:password@host:port/database`,
    );
  }
  if (url.protocol !== "postgres:" && url.protocol !== "postgresql:" && url.protocol !== "socket:") {
    throw new ConfigurationError(
      `invalid PostgreSQL connection string: protocol "${url.protocol}"; expected postgres://user:password@host:port/database`,
    );
  }
  return connectionString;
}

/** `host:port/database (user "u")` for messages, and the password to redact, from the driver's own parse. */
export function describeTarget(config: ClientConfig): { where: string; password: string | undefined } {
  const client = new pg.Client(config);
  const password = typeof client.password === "string" ? client.password : undefined;
  const host = client.host.includes(":") ? `[${client.host}]` : client.host;
  return { where: `${host}:${String(client.port)}/${client.database ?? ""} (user "${client.user ?? ""}")`, password };
}
