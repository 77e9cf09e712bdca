/**
 * The store's default schema and the names it accepts, in a module that loads no driver: the CLI
 * checks `--schema` with them before it loads `pg`.
 */

/** The schema `PostgresGuardrailStore.open` and the CLI use when none is given. */
export const DEFAULT_SCHEMA = "arkah_guardrails";

/** An identifier PostgreSQL takes unquoted (the store quotes it anyway): at most 63 characters. */
export const SCHEMA_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;

/** `pg_` names are reserved by PostgreSQL. */
export function isReservedSchemaName(name: string): boolean {
  return name.toLowerCase().startsWith("pg_");
}
