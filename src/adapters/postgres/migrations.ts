/**
 * The PostgreSQL store's schema: versioned migrations, applied at open in one transaction under a
 * transaction-scoped advisory lock, so any number of workers may open a schema at once.
 */
import type pg from "pg";
import { ConfigurationError } from "../../errors.js";
import { rollback, watch, lockKey } from "./connection.js";
import { authenticationProblem, redact, errorText, sanitizedCause } from "./errors.js";
import { quoteIdentifier } from "./statements.js";


interface Migration {
  readonly version: number;
  readonly description: string;
  /** Statements, given the quoted schema name. */
  readonly statements: (s: string) => readonly string[];
}

/** @internal Append-only: the tests build older schemas from the first ones, as they shipped. */
export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    description: "receipts, read evidence, scopes, claims, verdicts, approvals, audit trail",
    statements: (s) => [
      `CREATE TABLE ${s}.receipts (
        turn_key text PRIMARY KEY,
        scope_id text NOT NULL,
        turn_id text NOT NULL,
        policy_version text NOT NULL,
        moderation_digest text NOT NULL,
        allowed boolean NOT NULL,
        decided_at text NOT NULL
      )`,
      `CREATE TABLE ${s}.read_evidence (
        turn_key text NOT NULL,
        evidence_digest text NOT NULL,
        PRIMARY KEY (turn_key, evidence_digest)
      )`,
      // One row per scope that ever had a claim. Its row lock serializes every decision and change
      // that the scope rule depends on; unknown_count is how many of its claims are 'unknown'.
      `CREATE TABLE ${s}.scopes (
        scope_id text PRIMARY KEY,
        unknown_count integer NOT NULL DEFAULT 0 CHECK (unknown_count >= 0)
      )`,
      `CREATE TABLE ${s}.claims (
        turn_key text PRIMARY KEY,
        claim_order bigint GENERATED ALWAYS AS IDENTITY,
        scope_id text NOT NULL,
        tool_call_id text NOT NULL,
        tool_name text NOT NULL,
        args_digest text NOT NULL,
        mutation_key text NOT NULL,
        token text NOT NULL,
        state text NOT NULL CHECK (state IN ('pending', 'complete', 'unknown', 'pruned')),
        result_content text,
        result_status text,
        claimed_at text NOT NULL,
        claimed_ms bigint NOT NULL,
        settled_at text,
        settled_ms bigint
      )`,
      `CREATE INDEX claims_unresolved ON ${s}.claims (claimed_ms, claim_order) WHERE state IN ('pending', 'unknown')`,
      `CREATE INDEX claims_complete ON ${s}.claims (settled_ms) WHERE state = 'complete'`,
      `CREATE TABLE ${s}.verdicts (
        turn_key text NOT NULL,
        tool_call_id text NOT NULL,
        guardrail text NOT NULL,
        args_digest text NOT NULL,
        record text NOT NULL,
        PRIMARY KEY (turn_key, tool_call_id, guardrail, args_digest)
      )`,
      `CREATE TABLE ${s}.approvals (
        turn_key text NOT NULL,
        tool_call_id text NOT NULL,
        guardrail text NOT NULL,
        args_digest text NOT NULL,
        record text NOT NULL,
        PRIMARY KEY (turn_key, tool_call_id, guardrail, args_digest)
      )`,
      `CREATE SEQUENCE ${s}.audit_seq AS bigint`,
      // event: the whole AuditEvent as JSON text; the other columns are for filtering and operators.
      `CREATE TABLE ${s}.audit (
        seq bigint PRIMARY KEY,
        at text NOT NULL,
        at_ms bigint,
        decision text NOT NULL,
        turn_key text NOT NULL,
        scope_id text NOT NULL,
        event text NOT NULL
      )`,
      `CREATE INDEX audit_turn ON ${s}.audit (turn_key)`,
    ],
  },
  {
    // The package was unreleased (0.1.0) when this shipped, so the two tables are recreated,
    // not converted.
    version: 2,
    description: "verdicts bound to the tool; approval requests with a lifecycle; audit approval_id",
    statements: (s) => [
      `DROP TABLE ${s}.verdicts`,
      `DROP TABLE ${s}.approvals`,
      `CREATE TABLE ${s}.verdicts (
        turn_key text NOT NULL,
        tool_call_id text NOT NULL,
        tool_name text NOT NULL,
        guardrail text NOT NULL,
        args_digest text NOT NULL,
        record text NOT NULL,
        PRIMARY KEY (turn_key, tool_call_id, tool_name, guardrail, args_digest)
      )`,
      // record: the ApprovalRecord as JSON text; turn_key, status and requested_ms repeat it for
      // queries; approval_order is request order, the tie-break of listApprovals.
      `CREATE TABLE ${s}.approvals (
        approval_id text PRIMARY KEY,
        approval_order bigint GENERATED ALWAYS AS IDENTITY,
        turn_key text NOT NULL,
        status text NOT NULL CHECK (status IN ('pending', 'approved', 'rejected', 'edited', 'applied', 'expired')),
        requested_ms bigint,
        record text NOT NULL
      )`,
      `CREATE INDEX approvals_listed ON ${s}.approvals (requested_ms, approval_order)`,
      `CREATE INDEX approvals_pending ON ${s}.approvals (requested_ms, approval_order) WHERE status = 'pending'`,
      `CREATE INDEX approvals_turn ON ${s}.approvals (turn_key)`,
      `ALTER TABLE ${s}.audit ADD COLUMN approval_id text`,
      `CREATE INDEX audit_approval ON ${s}.audit (approval_id) WHERE approval_id IS NOT NULL`,
    ],
  },
  {
    version: 3,
    description: "receipt principals; tool fingerprints on claims and in verdict keys; audit by turn and scope; audit cursors",
    statements: (s) => [
      // NULL when the turn named no principal (every receipt stored before version 3).
      `ALTER TABLE ${s}.receipts ADD COLUMN principal text`,
      // NULL for a claim made before version 3.
      `ALTER TABLE ${s}.claims ADD COLUMN tool_fingerprint text`,
      // Verdicts are keyed by the tool's fingerprint too. A verdict recorded before version 3 has
      // none, so it can answer no call any more (a replay runs its check again): the table is
      // recreated empty rather than kept unreachable.
      `DROP TABLE ${s}.verdicts`,
      `CREATE TABLE ${s}.verdicts (
        turn_key text NOT NULL,
        tool_call_id text NOT NULL,
        tool_name text NOT NULL,
        tool_fingerprint text NOT NULL,
        guardrail text NOT NULL,
        args_digest text NOT NULL,
        record text NOT NULL,
        PRIMARY KEY (turn_key, tool_call_id, tool_name, tool_fingerprint, guardrail, args_digest)
      )`,
      // readAudit by turn and by scope, in seq order (audit.scope_id is there since version 1).
      `DROP INDEX ${s}.audit_turn`,
      `CREATE INDEX audit_turn_seq ON ${s}.audit (turn_key, seq)`,
      `CREATE INDEX audit_scope_seq ON ${s}.audit (scope_id, seq)`,
      // How far each named sink has been delivered (deliverAudit): forward only.
      `CREATE TABLE ${s}.audit_cursors (
        sink text PRIMARY KEY,
        seq bigint NOT NULL CHECK (seq >= 0)
      )`,
    ],
  },
  {
    version: 4,
    description: "turn records for the turn service",
    statements: (s) => [
      // One row per turn key. record is the whole TurnRecord as JSON text (text, not jsonb: jsonb
      // refuses \u0000); state and updated_ms are copies of two of its fields, for prune.
      `CREATE TABLE ${s}.turns (
        turn_key text PRIMARY KEY,
        state text NOT NULL CHECK (state IN ('running', 'awaiting_approval', 'completed', 'refused', 'failed')),
        updated_ms bigint NOT NULL,
        record text NOT NULL
      )`,
      `CREATE INDEX turns_finished_by_updated ON ${s}.turns (updated_ms) WHERE state IN ('completed', 'refused', 'failed')`,
    ],
  },
  {
    version: 5,
    description: "side-effect claims",
    statements: (s) => [
      // One row per effect key (turn, tool, arguments). A released claim, or one reconciled
      // 'no-effect', is deleted; 'pruned' is a completed effect's tombstone.
      `CREATE TABLE ${s}.effects (
        effect_key text PRIMARY KEY,
        effect_order bigint GENERATED ALWAYS AS IDENTITY,
        turn_key text NOT NULL,
        scope_id text NOT NULL,
        tool_call_id text NOT NULL,
        tool_name text NOT NULL,
        args_digest text NOT NULL,
        tool_fingerprint text NOT NULL,
        token text NOT NULL,
        state text NOT NULL CHECK (state IN ('pending', 'complete', 'unknown', 'pruned')),
        result_content text,
        result_status text,
        claimed_at text NOT NULL,
        claimed_ms bigint NOT NULL,
        settled_at text,
        settled_ms bigint
      )`,
      // maxPerTurn: the turn's effect claims of one tool.
      `CREATE INDEX effects_turn_tool ON ${s}.effects (turn_key, tool_name)`,
      `CREATE INDEX effects_unresolved ON ${s}.effects (claimed_ms, effect_order) WHERE state IN ('pending', 'unknown')`,
      `CREATE INDEX effects_complete ON ${s}.effects (settled_ms) WHERE state = 'complete'`,
    ],
  },
  {
    version: 6,
    description: "approval status orphaned",
    statements: (s) => [
      // The CHECK of version 2 was unnamed: PostgreSQL named it approvals_status_check.
      `ALTER TABLE ${s}.approvals DROP CONSTRAINT approvals_status_check`,
      `ALTER TABLE ${s}.approvals ADD CONSTRAINT approvals_status_check
         CHECK (status IN ('pending', 'approved', 'rejected', 'edited', 'applied', 'expired', 'orphaned'))`,
      // orphanApprovals: the decided requests not yet applied.
      `CREATE INDEX approvals_decided ON ${s}.approvals (requested_ms, approval_order) WHERE status IN ('approved', 'edited')`,
    ],
  },
  {
    version: 7,
    description: "turn request keys; live turns by state, for listTurns",
    statements: (s) => [
      // The turn's request key (a copy of the record's requestKey): one turn per request, so the
      // same idempotency key for another scope is refused. NULL for a turn stored before version 7
      // (a UNIQUE index lets NULLs repeat).
      `ALTER TABLE ${s}.turns ADD COLUMN request_key text`,
      `CREATE UNIQUE INDEX turns_request_key ON ${s}.turns (request_key)`,
      // listTurns (the turn service's recovery): the live turns, by state and key; finished ones
      // (nearly every row) are never walked.
      `CREATE INDEX turns_live ON ${s}.turns (state, turn_key) WHERE state IN ('running', 'awaiting_approval')`,
    ],
  },
];

/** The schema version this code writes and reads: the newest migration's. */
export const POSTGRES_SCHEMA_VERSION = MIGRATIONS.reduce((newest, migration) => Math.max(newest, migration.version), 0);

/**
 * Connects, checks the server answers, and migrates `target.schema` under a transaction-scoped
 * advisory lock. Rejects naming the host and port (never the password) if the server cannot be
 * reached, and with a `ConfigurationError` for a schema migrated by a newer version. With
 * `apply: false` it runs no DDL (a read-only transaction): a schema that is absent or older is a
 * `ConfigurationError` saying to run the migration step.
 */
export async function migrate(
  pool: pg.Pool,
  target: {
    readonly schema: string;
    readonly where: string;
    readonly password: string | undefined;
    readonly timestamp: () => string;
    readonly apply: boolean;
  },
): Promise<void> {
  const s = quoteIdentifier(target.schema);
  let client: pg.PoolClient;
  try {
    client = await pool.connect();
  } catch (error) {
    throw new Error(
      `PostgresGuardrailStore: cannot connect to PostgreSQL at ${target.where}: ${authenticationProblem(error) ?? redact(errorText(error), target.password)}`,
      // The cause is a copy with the password redacted from everything a logger would print.
      // eslint-disable-next-line preserve-caught-error
      { cause: sanitizedCause(error, target.password) },
    );
  }
  const connection = watch(client);
  try {
    // Read only when not applying: the server itself refuses any DDL or write, whatever the role may do.
    await client.query(target.apply ? "BEGIN" : "BEGIN READ ONLY");
    // Serializes concurrent opens of the same schema until this transaction ends (a check waits
    // for a migration under way, then sees its result).
    await client.query("SELECT pg_advisory_xact_lock($1::bigint)", [lockKey(`arkah-agent-guardrails:migrate:${target.schema}`)]);
    const exists = await client.query("SELECT 1 FROM pg_namespace WHERE nspname = $1", [target.schema]);
    const table =
      exists.rowCount === 0
        ? undefined
        : await client.query<{ exists: boolean }>("SELECT to_regclass($1) IS NOT NULL AS exists", [`${s}.schema_migrations`]);
    let version = 0;
    if (table?.rows[0]?.exists === true) {
      const current = await client.query<{ version: number | null }>(`SELECT max(version) AS version FROM ${s}.schema_migrations`);
      version = current.rows[0]?.version ?? 0;
    }
    if (version > POSTGRES_SCHEMA_VERSION) {
      throw new ConfigurationError(
        `PostgresGuardrailStore: schema "${target.schema}" at ${target.where} is at version ${String(version)}, ` +
          `newer than this version of arkah-agent-guardrails supports (${String(POSTGRES_SCHEMA_VERSION)}): ` +
          `upgrade the package on this worker, or use another schema`,
      );
    }
    if (!target.apply) {
      if (version < POSTGRES_SCHEMA_VERSION) {
        const found = exists.rowCount === 0 ? "does not exist" : version === 0 ? "holds no migrated store" : `is at version ${String(version)}`;
        throw new ConfigurationError(
          `PostgresGuardrailStore: schema "${target.schema}" at ${target.where} ${found}; this version of ` +
            `arkah-agent-guardrails needs version ${String(POSTGRES_SCHEMA_VERSION)}, and open was given migrate: false: ` +
            `run the migration step first (PostgresGuardrailStore.open as the schema's owner, without migrate: false)`,
        );
      }
      await client.query("COMMIT");
      return;
    }
    // CREATE SCHEMA IF NOT EXISTS would demand CREATE on the database even when the schema exists.
    if (exists.rowCount === 0) await client.query(`CREATE SCHEMA ${s}`);
    if (table?.rows[0]?.exists !== true) {
      await client.query(
        `CREATE TABLE ${s}.schema_migrations (version integer PRIMARY KEY, description text NOT NULL, applied_at text NOT NULL)`,
      );
    }
    for (const migration of MIGRATIONS) {
      if (migration.version <= version) continue;
      for (const sql of migration.statements(s)) await client.query(sql);
      await client.query(`INSERT INTO ${s}.schema_migrations (version, description, applied_at) VALUES ($1, $2, $3)`, [
        migration.version,
        migration.description,
        target.timestamp(),
      ]);
    }
    await client.query("COMMIT");
  } catch (error) {
    await rollback(client, connection);
    if (ConfigurationError.isInstance(error)) throw error;
    throw new Error(
      `PostgresGuardrailStore: could not ${target.apply ? "migrate" : "check"} schema "${target.schema}" at ${target.where}: ${redact(errorText(error), target.password)}`,
      // The cause is a copy with the password redacted from everything a logger would print.
      // eslint-disable-next-line preserve-caught-error
      { cause: sanitizedCause(error, target.password) },
    );
  } finally {
    connection.release();
  }
}
