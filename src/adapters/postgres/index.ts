/**
 * `arkah-agent-guardrails/postgres`: the PostgreSQL `GuardrailStore` (`pg`, an optional peer
 * dependency that only this entry point loads). One concern a file: store.ts (the class), steps.ts
 * (a turn's atomic steps), connection.ts (statements on the pool, transactions, audit appends),
 * statements.ts, migrations.ts, encoding.ts (values and rows), errors.ts (`PostgresStoreError` and
 * redaction), options.ts.
 *
 * @packageDocumentation
 * @module arkah-agent-guardrails/postgres
 */
export { PostgresStoreError } from "./errors.js";
export { MIGRATIONS, POSTGRES_SCHEMA_VERSION } from "./migrations.js";
export { type PostgresConnection, type PostgresGuardrailStoreOptions } from "./options.js";
export { PostgresGuardrailStore } from "./store.js";
