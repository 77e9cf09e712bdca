/**
 * `arkah-agent-guardrails/sqlite`: the SQLite `GuardrailStore` (better-sqlite3, an optional peer
 * dependency that only this entry point loads). One concern a file: store.ts (the class),
 * steps.ts (a turn's atomic steps), transactions.ts (the other transactions), statements.ts,
 * migrations.ts, encoding.ts (values and rows), errors.ts (`SqliteStoreError`).
 *
 * @packageDocumentation
 * @module arkah-agent-guardrails/sqlite
 */
export { SqliteStoreError } from "./errors.js";
export { MIGRATIONS, SQLITE_SCHEMA_VERSION } from "./migrations.js";
export { SqliteGuardrailStore, type SqliteGuardrailStoreOptions } from "./store.js";
