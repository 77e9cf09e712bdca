/**
 * `PostgresGuardrailStore`: a `GuardrailStore` in PostgreSQL (the `pg` driver, an optional peer
 * dependency imported only by this module), safe for any number of workers on any number of hosts.
 *
 * Semantics are exactly `InMemoryGuardrailStore`'s; docs/storage-adapters.md ("PostgreSQL") states
 * the schema and the locking, and why. In short:
 *
 * - Claims: one statement upserts the scope's row in `scopes` (taking its row lock and reading its
 *   latest `unknown_count`) and inserts the claim `ON CONFLICT (turn_key) DO NOTHING`. Every change
 *   that makes a claim `unknown` or un-`unknown` takes the same scope row lock first, so the scope
 *   rule is decided under the lock against the latest committed state: linearizable, not a
 *   snapshot read that a concurrent `unknown` settlement could slip past.
 * - Settlement: a compare-and-set `UPDATE ... WHERE turn_key AND token AND state = 'pending'`;
 *   a release is the same compare-and-set as a `DELETE`, with its audit event.
 * - Audit: sequence numbers are taken under a transaction-scoped advisory lock held until commit,
 *   so `seq` order is commit order and paging with `afterSeq` never skips an event.
 * - Every row read back is parsed with the exported zod schemas; a corrupt row is a
 *   `StoreContractError` (fail closed).
 */
import { createHash, randomUUID } from "node:crypto";
import pg from "pg";
import { z } from "zod";
import {
  AdmissionReceiptSchema,
  AdvanceAuditCursorInputSchema,
  ApplyApprovalInputSchema,
  ApprovalQuerySchema,
  ApprovalRecordSchema,
  ApprovalRequestSchema,
  AuditEventSchema,
  AuditCursorSchema,
  AuditQuerySchema,
  AuditSinkNameSchema,
  DecideApprovalInputSchema,
  DigestSchema,
  ExpireApprovalsInputSchema,
  ClaimedIdentitySchema,
  MutationResultSchema,
  PruneOptionsSchema,
  ReconciliationSchema,
  StoredAuditEventSchema,
  UnresolvedMutationSchema,
  VerdictKeySchema,
  VerdictRecordSchema,
  type AdmissionReceipt,
  type AdvanceAuditCursorInput,
  type ApplyApprovalInput,
  type ApprovalDecisionResult,
  type ApprovalQuery,
  type ApprovalRecord,
  type ApprovalSubmission,
  type AuditEvent,
  type AuditQuery,
  type ClaimOptions,
  type ClaimResult,
  type DecideApprovalInput,
  type ExpireApprovalsInput,
  type ExpireApprovalsResult,
  type GuardrailStore,
  type MutationIdentity,
  type MutationRelease,
  type MutationSettlement,
  type PruneOptions,
  type PruneResult,
  type ReadEvidence,
  type Reconciliation,
  type ReconcileResult,
  type StoredAuditEvent,
  type UnresolvedMutation,
  type VerdictKey,
  type VerdictRecord,
} from "../contracts.js";
import {
  appliedRecord,
  approvalEvent,
  decideOutcome,
  expiredRecord,
  reconciledEvent,
  releasedEvent,
} from "./events.js";
import { ConfigurationError, errorBrand, StoreContractError } from "../errors.js";
import {
  parseClaimResult,
  parseDigest,
  parseEvidence,
  parseIdentity,
  parseRelease,
  parseSettlement,
  parseStoreValue,
  requiresResolvedScope,
} from "./validate.js";

// ---------------------------------------------------------------------------------------------
// Options

/** How to reach the database: a connection string (the store owns its pool), or your own pool. */
export type PostgresConnection = { readonly connectionString: string } | { readonly pool: pg.Pool };

export interface PostgresGuardrailStoreOptions {
  /** The schema holding the store's tables, created if absent. Default `arkah_guardrails`. */
  readonly schema?: string;
  /** Clock for claim, settlement, reconciliation and migration times. Default: the system clock. */
  readonly now?: () => Date;
}

const DEFAULT_SCHEMA = "arkah_guardrails";

/** An unquoted-safe identifier (it is quoted anyway); `pg_` names are reserved by PostgreSQL. */
const SchemaNameSchema = z
  .string()
  .regex(/^[A-Za-z_][A-Za-z0-9_]{0,62}$/, "must be an identifier: a letter or _, then letters, digits or _, at most 63")
  .refine((name) => !name.toLowerCase().startsWith("pg_"), "names starting with pg_ are reserved by PostgreSQL");

const ConnectionSchema = z.union([
  z.strictObject({ connectionString: z.string().min(1, "must not be empty") }),
  z.strictObject({
    pool: z.custom<pg.Pool>(isPool, "must be a pg.Pool (with connect, query, on and options)"),
  }),
]);

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

const OptionsSchema = z.strictObject({
  schema: SchemaNameSchema.optional(),
  now: z.custom<() => Date>((value) => typeof value === "function", "must be a function returning a Date").optional(),
});

// ---------------------------------------------------------------------------------------------
// Errors

/**
 * The database failed during a store operation (unreachable, connection terminated, a server
 * error). The message names the operation, where the database is (never the password), and what
 * state the operation may have left; the driver's error is the `cause`.
 */
export class PostgresStoreError extends Error {
  /** The store method, e.g. `claimMutation`. */
  readonly operation: string;
  /** The PostgreSQL SQLSTATE or the system error code (`ECONNREFUSED`), when there is one. */
  readonly code: string | undefined;

  constructor(operation: string, message: string, options: { cause: unknown; code?: string | undefined }) {
    super(message, { cause: options.cause });
    this.operation = operation;
    this.code = options.code;
    errorBrand.brand(this, "PostgresStoreError");
  }

  static isInstance(error: unknown): error is PostgresStoreError {
    return errorBrand.hasBrand(error, "PostgresStoreError");
  }

  /** The `PostgresStoreError` behind a caught error (LangChain wraps it in `MiddlewareError`). */
  static find(error: unknown): PostgresStoreError | undefined {
    return errorBrand.findBranded(error, "PostgresStoreError") as PostgresStoreError | undefined;
  }
}

/** What each operation may have left behind when the database fails under it. */
const FAILURE_STATE: Readonly<Record<string, string>> = {
  claimMutation:
    "the claim was not acquired: it is absent, or pending (closed) if the database committed it before the failure; " +
    "a pending claim never runs until an operator reconciles it",
  settleMutation:
    "the settlement may not have been recorded: the claim stays pending (closed) unless the database committed it, " +
    "and it never runs again until an operator reconciles it",
  releaseMutation:
    "the release and its audit event were applied together or not at all: the claim stays pending (closed) " +
    "unless the release committed",
  reconcileMutation: "the reconciliation and its audit event were applied together or not at all; check listUnresolved",
  requestApproval: "the request and its audit event were stored together or not at all; check getApproval",
  decideApproval: "the decision and its audit event were applied together or not at all; check getApproval",
  applyApproval: "the change to applied and its audit event were made together or not at all; check getApproval",
  expireApprovals: "the expiry was applied whole, with its audit events, or not at all",
  advanceAuditCursor: "the cursor moved or did not (one statement); check getAuditCursor",
  prune: "the prune was applied whole or not at all",
};

function errorCode(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === "string" ? code : undefined;
}

function errorText(error: unknown): string {
  if (error instanceof Error) return error.message;
  return String(error);
}

/** `user:password@` → `user:***@` in anything that might echo a connection string. */
function redact(text: string, password: string | undefined): string {
  let out = text
    .replace(/(\b[a-z][a-z0-9+.-]*:\/\/[^:/?#@\s]*:)[^/?#\s]*@/gi, "$1***@")
    .replace(/(\bpassword\s*=\s*)('[^']*'|[^\s&]*)/gi, "$1***");
  if (password !== undefined && password.length > 0) out = out.split(password).join("***");
  return out;
}

// ---------------------------------------------------------------------------------------------
// Text encoding

/**
 * PostgreSQL `text` cannot hold U+0000, and a lone UTF-16 surrogate would be replaced on the wire:
 * either would break the exact round trip every string crossing the store gets. Such strings (and
 * strings starting with the marker) are stored as the marker + their JSON form; every other string
 * is stored as itself, so the tables stay readable. The mapping is injective and deterministic, so
 * equality on stored values is equality on the strings.
 */
const MARKER = "\u0001";
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

function encodeText(value: string): string {
  return value.startsWith(MARKER) || value.includes("\u0000") || LONE_SURROGATE.test(value)
    ? MARKER + JSON.stringify(value)
    : value;
}

function decodeText(value: unknown, what: string): string {
  if (typeof value !== "string") throw new StoreContractError(`corrupt ${what}: expected text, got ${typeof value}`);
  if (!value.startsWith(MARKER)) return value;
  try {
    const decoded: unknown = JSON.parse(value.slice(1));
    if (typeof decoded === "string") return decoded;
  } catch {
    // Reported below.
  }
  throw new StoreContractError(`corrupt ${what}: an escaped string that does not decode`);
}

function decodeOptionalText(value: unknown, what: string): string | undefined {
  return value === null || value === undefined ? undefined : decodeText(value, what);
}

/** A JSON document stored as text (not jsonb: jsonb rejects \u0000 and reorders keys). */
function decodeJson(value: unknown, what: string): unknown {
  if (typeof value !== "string") throw new StoreContractError(`corrupt ${what}: expected JSON text`);
  try {
    return JSON.parse(value) as unknown;
  } catch {
    throw new StoreContractError(`corrupt ${what}: not JSON`);
  }
}

/** Milliseconds since the epoch as `Date.parse` gives them (what the in-memory store compares), or null. */
function epochMs(timestamp: string): number | null {
  const ms = Date.parse(timestamp);
  return Number.isNaN(ms) ? null : ms;
}

/** A signed 64-bit advisory lock key, as decimal text, from a name. */
function lockKey(name: string): string {
  return createHash("sha256").update(name).digest().readBigInt64BE(0).toString();
}

// ---------------------------------------------------------------------------------------------
// Schema and migrations

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
];

/** The schema version this code writes and reads. */
export const POSTGRES_SCHEMA_VERSION = MIGRATIONS.length;

// ---------------------------------------------------------------------------------------------
// Rows

const CLAIM_STATES = ["pending", "complete", "unknown", "pruned"] as const;

/** A claim row as the claim path reads it. */
const ClaimRowSchema = z.object({
  mutation_key: DigestSchema,
  tool_name: z.string(),
  tool_call_id: z.string(),
  state: z.enum(CLAIM_STATES),
  result_content: z.string().nullable(),
  result_status: z.string().nullable(),
});

const COUNT_ROW = z.object({ unknown_count: z.int().min(0) });

interface Statement {
  readonly name: string;
  readonly text: string;
}

type Queryable = Pick<pg.PoolClient, "query">;

// ---------------------------------------------------------------------------------------------

/**
 * A `GuardrailStore` in PostgreSQL. Create it with `PostgresGuardrailStore.open(...)`, which
 * migrates its schema; call `close()` when done (it ends the pool only if it created it).
 */
export class PostgresGuardrailStore implements GuardrailStore {
  readonly #pool: pg.Pool;
  readonly #ownsPool: boolean;
  readonly #now: () => Date;
  readonly #schema: string;
  readonly #where: string;
  readonly #password: string | undefined;
  readonly #auditLock: string;
  readonly #pruneLock: string;
  readonly #expiryLock: string;
  readonly #sql: ReturnType<typeof statements>;
  #closed = false;

  private constructor(init: {
    pool: pg.Pool;
    ownsPool: boolean;
    now: () => Date;
    schema: string;
    where: string;
    password: string | undefined;
  }) {
    this.#pool = init.pool;
    this.#ownsPool = init.ownsPool;
    this.#now = init.now;
    this.#schema = init.schema;
    this.#where = init.where;
    this.#password = init.password;
    this.#auditLock = lockKey(`arkah-agent-guardrails:audit:${init.schema}`);
    this.#pruneLock = lockKey(`arkah-agent-guardrails:prune:${init.schema}`);
    this.#expiryLock = lockKey(`arkah-agent-guardrails:expire-approvals:${init.schema}`);
    this.#sql = statements(init.schema);
  }

  /**
   * Connects, checks the server answers, and migrates the schema (under a transaction-scoped
   * advisory lock, so any number of workers may open concurrently). Rejects with an `Error` naming
   * the host and port (never the password) if the server cannot be reached, and with a
   * `ConfigurationError` for invalid arguments or a database migrated by a newer version.
   */
  static async open(
    connection: PostgresConnection,
    options: PostgresGuardrailStoreOptions = {},
  ): Promise<PostgresGuardrailStore> {
    const parsedConnection = ConnectionSchema.safeParse(connection);
    if (!parsedConnection.success) {
      throw new ConfigurationError(
        `invalid PostgresGuardrailStore connection: pass { connectionString: "postgres://..." } or { pool: new pg.Pool(...) }: ${redact(z.prettifyError(parsedConnection.error), undefined)}`,
      );
    }
    const parsedOptions = OptionsSchema.safeParse(options);
    if (!parsedOptions.success) {
      throw new ConfigurationError(`invalid PostgresGuardrailStore options: ${z.prettifyError(parsedOptions.error)}`);
    }
    const schema = parsedOptions.data.schema ?? DEFAULT_SCHEMA;
    const now = parsedOptions.data.now ?? (() => new Date());

    const target = parsedConnection.data;
    let pool: pg.Pool;
    let ownsPool: boolean;
    let config: pg.ClientConfig;
    if ("connectionString" in target) {
      config = { connectionString: checkConnectionString(target.connectionString) };
      pool = new pg.Pool({ ...config, connectionTimeoutMillis: 10_000 });
      // An idle client whose server connection dies emits 'error' on the pool; the pool drops the
      // client, and the next operation gets a fresh one. Without a listener it would crash.
      pool.on("error", () => undefined);
      ownsPool = true;
    } else {
      pool = target.pool;
      config = pool.options;
      ownsPool = false;
    }
    const { where, password } = describeTarget(config);

    const store = new PostgresGuardrailStore({ pool, ownsPool, now, schema, where, password });
    try {
      await store.#migrate();
    } catch (error) {
      if (ownsPool) await pool.end().catch(() => undefined);
      throw error;
    }
    return store;
  }

  /** Ends the pool if the store created it (a pool you passed stays yours). Idempotent. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#ownsPool) await this.#pool.end();
  }

  /** The schema this store uses. */
  get schema(): string {
    return this.#schema;
  }

  // -- plumbing -------------------------------------------------------------------------------

  #timestamp(): string {
    return this.#now().toISOString();
  }

  #query(statement: Statement, values: readonly unknown[], client: Queryable = this.#pool) {
    return client.query<Record<string, unknown>>({ name: statement.name, text: statement.text, values: [...values] });
  }

  /** Runs an operation; any failure other than a contract violation becomes a `PostgresStoreError`. */
  async #run<T>(operation: string, fn: () => Promise<T>): Promise<T> {
    if (this.#closed) {
      throw new PostgresStoreError(operation, `PostgresGuardrailStore.${operation}: the store is closed`, {
        cause: undefined,
      });
    }
    try {
      return await fn();
    } catch (error) {
      throw this.#wrap(operation, error);
    }
  }

  #wrap(operation: string, error: unknown): unknown {
    if (StoreContractError.isInstance(error) || ConfigurationError.isInstance(error)) return error;
    if (PostgresStoreError.isInstance(error)) return error;
    const code = errorCode(error);
    const state = FAILURE_STATE[operation];
    const message =
      `PostgresGuardrailStore.${operation} failed against ${this.#where}: ` +
      `${redact(errorText(error), this.#password)}${code === undefined ? "" : ` (${code})`}` +
      (state === undefined ? "" : `; ${state}`);
    return new PostgresStoreError(operation, message, { cause: error, code });
  }

  /** Runs `fn` in a transaction on one connection. A broken connection is discarded, not reused. */
  async #transaction<T>(fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    const client = await this.#pool.connect();
    const connection = watch(client);
    try {
      await client.query("BEGIN");
      const result = await fn(client);
      await client.query("COMMIT");
      return result;
    } catch (error) {
      await rollback(client, connection);
      throw error;
    } finally {
      connection.release();
    }
  }

  async #migrate(): Promise<void> {
    const s = quoteIdentifier(this.#schema);
    let client: pg.PoolClient;
    try {
      client = await this.#pool.connect();
    } catch (error) {
      throw new Error(
        `PostgresGuardrailStore: cannot connect to PostgreSQL at ${this.#where}: ${redact(errorText(error), this.#password)}`,
        // The cause is a copy with the password redacted from everything a logger would print.
        // eslint-disable-next-line preserve-caught-error
        { cause: sanitizedCause(error, this.#password) },
      );
    }
    const connection = watch(client);
    try {
      await client.query("BEGIN");
      // Serializes concurrent opens of the same schema until this transaction ends.
      await client.query("SELECT pg_advisory_xact_lock($1::bigint)", [lockKey(`arkah-agent-guardrails:migrate:${this.#schema}`)]);
      const exists = await client.query("SELECT 1 FROM pg_namespace WHERE nspname = $1", [this.#schema]);
      // CREATE SCHEMA IF NOT EXISTS would demand CREATE on the database even when the schema exists.
      if (exists.rowCount === 0) await client.query(`CREATE SCHEMA ${s}`);
      const table = await client.query<{ exists: boolean }>("SELECT to_regclass($1) IS NOT NULL AS exists", [
        `${s}.schema_migrations`,
      ]);
      if (table.rows[0]?.exists !== true) {
        await client.query(
          `CREATE TABLE ${s}.schema_migrations (version integer PRIMARY KEY, description text NOT NULL, applied_at text NOT NULL)`,
        );
      }
      const current = await client.query<{ version: number | null }>(
        `SELECT max(version) AS version FROM ${s}.schema_migrations`,
      );
      const version = current.rows[0]?.version ?? 0;
      if (version > POSTGRES_SCHEMA_VERSION) {
        throw new ConfigurationError(
          `PostgresGuardrailStore: schema "${this.#schema}" at ${this.#where} is at version ${String(version)}, ` +
            `newer than this version of arkah-agent-guardrails supports (${String(POSTGRES_SCHEMA_VERSION)}): ` +
            `upgrade the package on this worker, or use another schema`,
        );
      }
      for (const migration of MIGRATIONS) {
        if (migration.version <= version) continue;
        for (const sql of migration.statements(s)) await client.query(sql);
        await client.query(`INSERT INTO ${s}.schema_migrations (version, description, applied_at) VALUES ($1, $2, $3)`, [
          migration.version,
          migration.description,
          this.#timestamp(),
        ]);
      }
      await client.query("COMMIT");
    } catch (error) {
      await rollback(client, connection);
      if (ConfigurationError.isInstance(error)) throw error;
      throw new Error(
        `PostgresGuardrailStore: could not migrate schema "${this.#schema}" at ${this.#where}: ${redact(errorText(error), this.#password)}`,
        // The cause is a copy with the password redacted from everything a logger would print.
        // eslint-disable-next-line preserve-caught-error
        { cause: sanitizedCause(error, this.#password) },
      );
    } finally {
      connection.release();
    }
  }

  // -- admission ------------------------------------------------------------------------------

  async getReceipt(turnKey: string): Promise<AdmissionReceipt | undefined> {
    const key = parseDigest(turnKey, "turn key");
    return this.#run("getReceipt", async () => {
      const { rows } = await this.#query(this.#sql.getReceipt, [key]);
      return rows[0] === undefined ? undefined : receiptFromRow(rows[0]);
    });
  }

  async putReceiptIfAbsent(receipt: AdmissionReceipt): Promise<AdmissionReceipt> {
    const candidate = parseStoreValue(AdmissionReceiptSchema, receipt, "admission receipt");
    return this.#run("putReceiptIfAbsent", async () => {
      const values = [
        candidate.turnKey,
        encodeText(candidate.scopeId),
        encodeText(candidate.turnId),
        encodeText(candidate.policyVersion),
        candidate.moderationDigest,
        candidate.allowed,
        candidate.decidedAt,
        candidate.principal === undefined ? null : encodeText(candidate.principal),
      ];
      for (let attempt = 0; attempt < 16; attempt++) {
        const inserted = await this.#query(this.#sql.putReceipt, values);
        if (inserted.rows[0] !== undefined) return receiptFromRow(inserted.rows[0]);
        const { rows } = await this.#query(this.#sql.getReceipt, [candidate.turnKey]);
        if (rows[0] !== undefined) return receiptFromRow(rows[0]);
        // Receipts are never deleted, so this is unreachable short of a hand edit; try again.
      }
      throw new Error("the receipt was neither inserted nor found after 16 attempts");
    });
  }

  // -- read evidence --------------------------------------------------------------------------

  async recordSuccessfulRead(evidence: ReadEvidence): Promise<void> {
    const { turnKey, evidenceDigest } = parseEvidence(evidence);
    await this.#run("recordSuccessfulRead", () => this.#query(this.#sql.recordRead, [turnKey, evidenceDigest]));
  }

  async hasSuccessfulRead(evidence: ReadEvidence): Promise<boolean> {
    const { turnKey, evidenceDigest } = parseEvidence(evidence);
    return this.#run("hasSuccessfulRead", async () => {
      const { rowCount } = await this.#query(this.#sql.hasRead, [turnKey, evidenceDigest]);
      return rowCount === 1;
    });
  }

  // -- mutation claims ------------------------------------------------------------------------

  async claimMutation(identity: MutationIdentity, options?: ClaimOptions): Promise<ClaimResult> {
    const parsed = parseIdentity(identity);
    const requireResolvedScope = requiresResolvedScope(options);
    return this.#run("claimMutation", async () => {
      // Fast path, one statement: the common case (a fresh turn) is acquired here.
      const token = randomUUID();
      const claimedAt = this.#timestamp();
      const values = [
        parsed.turnKey,
        encodeText(parsed.scopeId),
        encodeText(parsed.toolCallId),
        encodeText(parsed.toolName),
        parsed.argsDigest,
        parsed.mutationKey,
        token,
        claimedAt,
        Date.parse(claimedAt),
        parsed.toolFingerprint,
      ];
      const inserted = await this.#query(requireResolvedScope ? this.#sql.claimScoped : this.#sql.claimUnscoped, values);
      if (inserted.rowCount === 1) return parseClaimResult({ status: "acquired", token });

      // Not inserted: the turn has a claim, or the scope is blocked. An existing claim answers.
      const existing = await this.#query(this.#sql.readClaim, [parsed.turnKey]);
      if (existing.rows[0] !== undefined) return classify(existing.rows[0], parsed.mutationKey);

      // No claim now: decide under the scope's lock, against the latest committed state.
      return this.#claimLocked(parsed, requireResolvedScope);
    });
  }

  async #claimLocked(identity: MutationIdentity, requireResolvedScope: boolean): Promise<ClaimResult> {
    const scopeId = encodeText(identity.scopeId);
    for (let attempt = 0; attempt < 16; attempt++) {
      const result = await this.#transaction(async (client): Promise<ClaimResult | undefined> => {
        const scope = await this.#query(this.#sql.lockScope, [scopeId], client);
        const { unknown_count: unknownCount } = parseRow(COUNT_ROW, scope.rows[0], "scope row");
        const existing = await this.#query(this.#sql.readClaim, [identity.turnKey], client);
        if (existing.rows[0] !== undefined) return classify(existing.rows[0], identity.mutationKey);
        if (requireResolvedScope && unknownCount > 0) return { status: "scope_unresolved" };
        const token = randomUUID();
        const claimedAt = this.#timestamp();
        const inserted = await this.#query(
          this.#sql.claimUnscoped,
          [
            identity.turnKey,
            scopeId,
            encodeText(identity.toolCallId),
            encodeText(identity.toolName),
            identity.argsDigest,
            identity.mutationKey,
            token,
            claimedAt,
            Date.parse(claimedAt),
            identity.toolFingerprint,
          ],
          client,
        );
        // Not inserted: a claim of this turn under another scope id won the race. Look again.
        return inserted.rowCount === 1 ? { status: "acquired", token } : undefined;
      });
      if (result !== undefined) return parseClaimResult(result);
    }
    throw new Error("the claim did not settle on an answer after 16 attempts under concurrent changes");
  }

  async settleMutation(settlement: MutationSettlement): Promise<boolean> {
    const parsed = parseSettlement(settlement);
    return this.#run("settleMutation", async () => {
      const token = encodeText(parsed.token);
      const settledAt = this.#timestamp();
      if (parsed.outcome === "complete") {
        const { rowCount } = await this.#query(this.#sql.settleComplete, [
          parsed.turnKey,
          token,
          encodeText(parsed.result.content),
          parsed.result.status,
          settledAt,
          Date.parse(settledAt),
        ]);
        return rowCount === 1;
      }
      // `unknown` blocks the scope: change it under the scope's lock (scope row, then claim row).
      return this.#transaction(async (client) => {
        const pending = await this.#query(this.#sql.pendingScope, [parsed.turnKey, token], client);
        const scopeId = pending.rows[0]?.scope_id;
        if (scopeId === undefined) return false;
        await this.#query(this.#sql.lockScope, [scopeId], client);
        const { rowCount } = await this.#query(
          this.#sql.settleUnknown,
          [parsed.turnKey, token, settledAt, Date.parse(settledAt)],
          client,
        );
        return rowCount === 1;
      });
    });
  }

  async releaseMutation(release: MutationRelease): Promise<boolean> {
    const parsed = parseRelease(release);
    return this.#run("releaseMutation", () =>
      // A pending claim is not counted in its scope's unknown_count: no scope lock is needed. The
      // delete and its audit event commit together.
      this.#transaction(async (client) => {
        const { rows } = await this.#query(this.#sql.releaseClaim, [parsed.turnKey, encodeText(parsed.token)], client);
        const row = rows[0];
        if (row === undefined) return false;
        const identity = parseStoreValue(ClaimedIdentitySchema, identityFromRow(row), "claim row");
        await this.#append(releasedEvent(identity, this.#timestamp()), client);
        return true;
      }),
    );
  }

  // -- verdicts --------------------------------------------------------------------------------

  async recordVerdict(record: VerdictRecord): Promise<VerdictRecord> {
    const candidate = parseStoreValue(VerdictRecordSchema, record, "verdict record");
    return this.#run("recordVerdict", async () => {
      const key = verdictKeyValues(candidate);
      for (let attempt = 0; attempt < 16; attempt++) {
        const inserted = await this.#query(this.#sql.putVerdict, [...key, JSON.stringify(candidate)]);
        if (inserted.rows[0] !== undefined) return verdictFromRow(inserted.rows[0], candidate);
        const { rows } = await this.#query(this.#sql.getVerdict, key);
        if (rows[0] !== undefined) return verdictFromRow(rows[0], candidate);
        // Only prune deletes verdicts; after it, the next insert wins.
      }
      throw new Error("the verdict record was neither inserted nor found after 16 attempts");
    });
  }

  async getVerdict(key: VerdictKey): Promise<VerdictRecord | undefined> {
    const parsed = parseStoreValue(VerdictKeySchema, key, "verdict key");
    return this.#run("getVerdict", async () => {
      const { rows } = await this.#query(this.#sql.getVerdict, verdictKeyValues(parsed));
      return rows[0] === undefined ? undefined : verdictFromRow(rows[0], parsed);
    });
  }

  // -- approval requests ----------------------------------------------------------------------

  async requestApproval(request: ApprovalSubmission): Promise<ApprovalRecord> {
    const candidate = parseStoreValue(ApprovalRequestSchema, request, "approval request");
    const record: ApprovalRecord = { ...candidate, status: "pending" };
    return this.#run("requestApproval", async () => {
      for (let attempt = 0; attempt < 16; attempt++) {
        const stored = await this.#transaction(async (client): Promise<ApprovalRecord | undefined> => {
          // ON CONFLICT waits for a concurrent insert of the same id to commit or roll back.
          const inserted = await this.#query(
            this.#sql.insertApproval,
            [record.approvalId, record.turnKey, epochMs(record.requestedAt), JSON.stringify(record)],
            client,
          );
          if (inserted.rowCount === 1) {
            await this.#append(approvalEvent(record, "requested", this.#timestamp()), client);
            return structuredClone(record);
          }
          const { rows } = await this.#query(this.#sql.getApproval, [record.approvalId], client);
          return rows[0] === undefined ? undefined : approvalFromRow(rows[0]);
        });
        // Undefined: pruned between the insert and the read. Try again.
        if (stored !== undefined) return stored;
      }
      throw new Error("the approval request was neither inserted nor found after 16 attempts");
    });
  }

  async getApproval(approvalId: string): Promise<ApprovalRecord | undefined> {
    const id = parseDigest(approvalId, "approval id");
    return this.#run("getApproval", async () => {
      const { rows } = await this.#query(this.#sql.getApproval, [id]);
      return rows[0] === undefined ? undefined : approvalFromRow(rows[0]);
    });
  }

  async decideApproval(input: DecideApprovalInput): Promise<ApprovalDecisionResult> {
    const parsed = parseStoreValue(DecideApprovalInputSchema, input, "approval decision");
    return this.#run("decideApproval", () =>
      // The row lock serializes decisions: the first to commit wins, the others read its result.
      this.#transaction(async (client) => {
        const { rows } = await this.#query(this.#sql.lockApproval, [parsed.approvalId], client);
        const current = rows[0] === undefined ? undefined : approvalFromRow(rows[0]);
        const { result, changed, event } = decideOutcome(current, parsed, this.#timestamp());
        if (changed !== undefined) await this.#storeApproval(changed, client);
        if (event !== undefined) await this.#append(event, client);
        return structuredClone(result);
      }),
    );
  }

  async applyApproval(input: ApplyApprovalInput): Promise<boolean> {
    const parsed = parseStoreValue(ApplyApprovalInputSchema, input, "approval application");
    return this.#run("applyApproval", () =>
      this.#transaction(async (client) => {
        const { rows } = await this.#query(this.#sql.lockApproval, [parsed.approvalId], client);
        const applied = appliedRecord(rows[0] === undefined ? undefined : approvalFromRow(rows[0]), parsed.appliedAt);
        if (applied === undefined) return false;
        await this.#storeApproval(applied, client);
        await this.#append(approvalEvent(applied, "applied", this.#timestamp()), client);
        return true;
      }),
    );
  }

  async listApprovals(query: ApprovalQuery = {}): Promise<ApprovalRecord[]> {
    const { status, turnKey, limit = 10_000 } = parseStoreValue(ApprovalQuerySchema, query, "approval query");
    return this.#run("listApprovals", async () => {
      const { rows } = await this.#query(this.#sql.listApprovals, [status ?? null, turnKey ?? null, limit]);
      return rows.map(approvalFromRow);
    });
  }

  async expireApprovals(input: ExpireApprovalsInput): Promise<ExpireApprovalsResult> {
    const { olderThan } = parseStoreValue(ExpireApprovalsInputSchema, input, "approval expiry");
    return this.#run("expireApprovals", () =>
      this.#transaction(async (client) => {
        // One expiry at a time per schema, so two never wait on each other's row locks.
        await client.query("SELECT pg_advisory_xact_lock($1::bigint)", [this.#expiryLock]);
        // FOR UPDATE re-checks each row once locked: one decided meanwhile is no longer pending.
        const { rows } = await this.#query(this.#sql.lockPendingBefore, [epochMs(olderThan)], client);
        const at = this.#timestamp();
        for (const row of rows) {
          const retired = expiredRecord(approvalFromRow(row), at);
          await this.#storeApproval(retired, client);
          await this.#append(approvalEvent(retired, "expired", at), client);
        }
        return { expired: rows.length };
      }),
    );
  }

  async #storeApproval(record: ApprovalRecord, client: Queryable): Promise<void> {
    await this.#query(this.#sql.updateApproval, [record.approvalId, record.status, JSON.stringify(record)], client);
  }

  // -- audit trail ----------------------------------------------------------------------------

  async appendAudit(event: AuditEvent): Promise<void> {
    const parsed = parseStoreValue(AuditEventSchema, event, "audit event");
    await this.#run("appendAudit", () => this.#append(parsed, this.#pool));
  }

  /**
   * Inserts an event with the next sequence number, taken under the audit advisory lock that is
   * held until the (implicit or enclosing) transaction commits: numbers are assigned in commit
   * order, so a reader never sees event n+1 committed before event n.
   */
  async #append(event: AuditEvent, client: Queryable): Promise<void> {
    await this.#query(
      this.#sql.appendAudit,
      [
        this.#auditLock,
        event.at,
        epochMs(event.at),
        event.decision,
        event.turnKey,
        encodeText(event.scopeId),
        event.approvalId ?? null,
        JSON.stringify(event),
      ],
      client,
    );
  }

  async readAudit(query: AuditQuery = {}): Promise<StoredAuditEvent[]> {
    const { since, afterSeq = 0, turnKey, scopeId, limit = 10_000 } = parseStoreValue(AuditQuerySchema, query, "audit query");
    return this.#run("readAudit", async () => {
      const from = since === undefined ? null : epochMs(since);
      const scope = scopeId === undefined ? null : encodeText(scopeId);
      // One statement per index it walks: the trail in seq order, or one turn's or one scope's events.
      const { rows } =
        turnKey !== undefined
          ? await this.#query(this.#sql.readAuditByTurn, [afterSeq, from, limit, turnKey, scope])
          : scope !== null
            ? await this.#query(this.#sql.readAuditByScope, [afterSeq, from, limit, scope])
            : await this.#query(this.#sql.readAudit, [afterSeq, from, limit]);
      return rows.map((row) => {
        const event = decodeJson(row.event, "audit event");
        const seq = Number(row.seq);
        if (typeof event !== "object" || event === null || Array.isArray(event)) {
          throw new StoreContractError("corrupt audit event: not an object");
        }
        return parseStoreValue(StoredAuditEventSchema, { ...event, seq }, "stored audit event");
      });
    });
  }

  async getAuditCursor(sink: string): Promise<number> {
    const name = parseStoreValue(AuditSinkNameSchema, sink, "audit sink name");
    return this.#run("getAuditCursor", async () => {
      const { rows } = await this.#query(this.#sql.getAuditCursor, [encodeText(name)]);
      const seq = rows[0] === undefined ? 0 : Number(rows[0].seq);
      return parseStoreValue(AuditCursorSchema, seq, "stored audit cursor");
    });
  }

  async advanceAuditCursor(input: AdvanceAuditCursorInput): Promise<boolean> {
    const { sink, seq } = parseStoreValue(AdvanceAuditCursorInputSchema, input, "audit cursor advance");
    // A cursor is never below 0: advancing to 0 moves nothing (and inserts no row).
    if (seq === 0) return false;
    return this.#run("advanceAuditCursor", async () => {
      // One statement: the upsert's row lock orders concurrent advances, and each applies only
      // over a lower cursor.
      const { rowCount } = await this.#query(this.#sql.advanceAuditCursor, [encodeText(sink), seq]);
      return rowCount === 1;
    });
  }

  // -- reconciliation and retention -----------------------------------------------------------

  async listUnresolved(): Promise<UnresolvedMutation[]> {
    return this.#run("listUnresolved", async () => {
      const { rows } = await this.#query(this.#sql.listUnresolved, []);
      return rows.map((row) =>
        parseStoreValue(
          UnresolvedMutationSchema,
          {
            ...identityFromRow(row),
            state: row.state,
            claimedAt: row.claimed_at,
          },
          "unresolved mutation",
        ),
      );
    });
  }

  async reconcileMutation(reconciliation: Reconciliation): Promise<ReconcileResult> {
    const parsed = parseStoreValue(ReconciliationSchema, reconciliation, "reconciliation");
    return this.#run("reconcileMutation", async () => {
      for (let attempt = 0; attempt < 16; attempt++) {
        const result = await this.#transaction(async (client): Promise<ReconcileResult | undefined> => {
          const first = await this.#query(this.#sql.readScope, [parsed.turnKey], client);
          const scopeId = first.rows[0]?.scope_id;
          if (scopeId === undefined) return { reconciled: false, reason: "not_found" };
          await this.#query(this.#sql.lockScope, [scopeId], client);
          const locked = await this.#query(this.#sql.lockClaim, [parsed.turnKey], client);
          const row = locked.rows[0];
          if (row === undefined) return { reconciled: false, reason: "not_found" };
          if (row.scope_id !== scopeId) return undefined; // deleted and claimed again elsewhere: retry
          const state = parseRow(z.enum(CLAIM_STATES), row.state, "claim state");
          if (state !== "pending" && state !== "unknown") return { reconciled: false, reason: "not_unresolved" };
          const identity = identityFromRow(row);
          const at = this.#timestamp();
          if (parsed.resolution === "completed") {
            await this.#query(
              this.#sql.reconcileComplete,
              [parsed.turnKey, encodeText(parsed.result.content), parsed.result.status, at, Date.parse(at)],
              client,
            );
          } else {
            await this.#query(this.#sql.deleteClaim, [parsed.turnKey], client);
          }
          if (state === "unknown") await this.#query(this.#sql.releaseScope, [scopeId], client);
          const event = reconciledEvent(parseStoreValue(ClaimedIdentitySchema, identity, "claim row"), parsed, at);
          await this.#append(event, client);
          return { reconciled: true, state };
        });
        if (result !== undefined) return result;
      }
      throw new Error("the reconciliation did not settle on an answer after 16 attempts under concurrent changes");
    });
  }

  async prune(options: PruneOptions): Promise<PruneResult> {
    const { olderThan } = parseStoreValue(PruneOptionsSchema, options, "prune options");
    return this.#run("prune", () =>
      // One prune at a time per schema: two would lock the same claim rows, maybe in different
      // orders (a deadlock PostgreSQL would break by failing one of them).
      this.#transaction(async (client) => {
        await client.query("SELECT pg_advisory_xact_lock($1::bigint)", [this.#pruneLock]);
        const { rows } = await this.#query(this.#sql.prune, [epochMs(olderThan)], client);
        return { turns: Number(rows[0]?.turns ?? 0) };
      }),
    );
  }
}

// ---------------------------------------------------------------------------------------------
// Helpers

/**
 * Watches a checked-out client: a connection that dies while checked out emits 'error' on the
 * client, which would crash the process without a listener (the pool listens only while it is
 * idle). `release` hands it back to the pool, destroying it if it broke.
 */
function watch(client: pg.PoolClient): { broken: Error | undefined; release: () => void } {
  const state: { broken: Error | undefined; release: () => void } = {
    broken: undefined,
    release: () => {
      client.removeListener("error", onError);
      client.release(state.broken);
    },
  };
  const onError = (error: Error) => {
    state.broken ??= error;
  };
  client.on("error", onError);
  return state;
}

/** Rolls back; a connection that cannot even do that is marked broken, so the pool discards it. */
async function rollback(client: pg.PoolClient, connection: { broken: Error | undefined }): Promise<void> {
  try {
    await client.query("ROLLBACK");
  } catch (error) {
    connection.broken ??= error instanceof Error ? error : new Error(String(error));
  }
}

function quoteIdentifier(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}

/**
 * Rejects anything but a `postgres://` / `postgresql://` URL or a socket path: the driver would
 * otherwise take "not a url" for a host name. The string itself is never echoed (it may hold a
 * password).
 */
function checkConnectionString(connectionString: string): string {
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
function describeTarget(config: pg.ClientConfig): { where: string; password: string | undefined } {
  const client = new pg.Client(config);
  const password = typeof client.password === "string" ? client.password : undefined;
  const host = client.host.includes(":") ? `[${client.host}]` : client.host;
  return { where: `${host}:${String(client.port)}/${client.database ?? ""} (user "${client.user ?? ""}")`, password };
}

/** A copy of a driver error without properties that could carry the connection string. */
function sanitizedCause(error: unknown, password: string | undefined): Error {
  const copy = new Error(redact(errorText(error), password));
  for (const key of ["code", "errno", "syscall", "address", "port", "hostname", "severity", "detail"] as const) {
    const value = (error as Record<string, unknown> | null)?.[key];
    if (typeof value === "string" || typeof value === "number") {
      Object.defineProperty(copy, key, { value: typeof value === "string" ? redact(value, password) : value, enumerable: true });
    }
  }
  return copy;
}

function parseRow<T>(schema: z.ZodType<T>, value: unknown, what: string): T {
  const parsed = schema.safeParse(value);
  if (!parsed.success) throw new StoreContractError(`corrupt ${what}: ${z.prettifyError(parsed.error)}`);
  return parsed.data;
}

/** The claim answer for an existing claim row, exactly as the in-memory store decides it. */
function classify(row: Record<string, unknown>, mutationKey: string): ClaimResult {
  const claim = parseRow(ClaimRowSchema, row, "claim row");
  if (claim.state === "pruned") return parseClaimResult({ status: "conflict" });
  const result =
    claim.state === "complete"
      ? parseStoreValue(
          MutationResultSchema,
          { content: decodeOptionalText(claim.result_content, "claim result"), status: claim.result_status },
          "stored mutation result",
        )
      : undefined;
  if (claim.mutation_key !== mutationKey) {
    if (result === undefined) return parseClaimResult({ status: "conflict" });
    const completed = {
      toolName: decodeText(claim.tool_name, "claim tool name"),
      toolCallId: decodeText(claim.tool_call_id, "claim tool call id"),
      result,
    };
    return parseClaimResult({ status: "conflict", completed });
  }
  if (result !== undefined) return parseClaimResult({ status: "replay", result });
  return parseClaimResult({ status: claim.state });
}

function identityFromRow(row: Record<string, unknown>) {
  return {
    turnKey: row.turn_key,
    scopeId: decodeText(row.scope_id, "claim scope id"),
    toolCallId: decodeText(row.tool_call_id, "claim tool call id"),
    toolName: decodeText(row.tool_name, "claim tool name"),
    argsDigest: row.args_digest,
    mutationKey: row.mutation_key,
    // NULL for a claim made before schema version 3.
    ...(row.tool_fingerprint === null ? {} : { toolFingerprint: row.tool_fingerprint }),
  };
}

function receiptFromRow(row: Record<string, unknown>): AdmissionReceipt {
  return parseStoreValue(
    AdmissionReceiptSchema,
    {
      turnKey: row.turn_key,
      scopeId: decodeText(row.scope_id, "receipt scope id"),
      turnId: decodeText(row.turn_id, "receipt turn id"),
      policyVersion: decodeText(row.policy_version, "receipt policy version"),
      moderationDigest: row.moderation_digest,
      allowed: row.allowed,
      decidedAt: row.decided_at,
      ...(row.principal === null ? {} : { principal: decodeText(row.principal, "receipt principal") }),
    },
    "stored admission receipt",
  );
}

function verdictKeyValues(key: VerdictKey): string[] {
  return [
    key.turnKey,
    encodeText(key.toolCallId),
    encodeText(key.toolName),
    key.toolFingerprint,
    encodeText(key.guardrail),
    key.argsDigest,
  ];
}

/** A stored verdict; it must still be the record for the key it is stored under. */
function verdictFromRow(row: Record<string, unknown>, key: VerdictKey): VerdictRecord {
  const record = parseStoreValue(VerdictRecordSchema, decodeJson(row.record, "verdict record"), "stored verdict record");
  if (
    record.turnKey !== key.turnKey ||
    record.toolCallId !== key.toolCallId ||
    record.toolName !== key.toolName ||
    record.toolFingerprint !== key.toolFingerprint ||
    record.guardrail !== key.guardrail ||
    record.argsDigest !== key.argsDigest
  ) {
    throw new StoreContractError("corrupt verdict record: stored under another key");
  }
  return record;
}

/** A stored approval request; it must agree with the columns it is filed under. */
function approvalFromRow(row: Record<string, unknown>): ApprovalRecord {
  const record = parseStoreValue(ApprovalRecordSchema, decodeJson(row.record, "approval request"), "stored approval request");
  if (record.approvalId !== row.approval_id || record.turnKey !== row.turn_key || record.status !== row.status) {
    throw new StoreContractError(`corrupt approval request ${String(row.approval_id)}: the record does not match its row`);
  }
  return record;
}

/** Every statement, with the schema quoted in, and a prepared-statement name unique to the schema. */
function statements(schema: string) {
  const s = quoteIdentifier(schema);
  const tag = createHash("sha256").update(schema).digest("hex").slice(0, 12);
  const statement = (name: string, text: string): Statement => ({ name: `arkah_${tag}_${name}`, text });
  const claimColumns =
    "turn_key, scope_id, tool_call_id, tool_name, args_digest, mutation_key, token, state, claimed_at, claimed_ms, tool_fingerprint";
  const claimValues = "$1, $2, $3, $4, $5, $6, $7, 'pending', $8, $9::bigint, $10";
  const receiptColumns = "turn_key, scope_id, turn_id, policy_version, moderation_digest, allowed, decided_at, principal";
  const approvalColumns = "approval_id, turn_key, status, record";
  return {
    getReceipt: statement("get_receipt", `SELECT ${receiptColumns} FROM ${s}.receipts WHERE turn_key = $1`),
    putReceipt: statement(
      "put_receipt",
      `INSERT INTO ${s}.receipts (${receiptColumns}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
       ON CONFLICT (turn_key) DO NOTHING RETURNING ${receiptColumns}`,
    ),
    recordRead: statement(
      "record_read",
      `INSERT INTO ${s}.read_evidence (turn_key, evidence_digest) VALUES ($1, $2) ON CONFLICT DO NOTHING`,
    ),
    hasRead: statement("has_read", `SELECT 1 FROM ${s}.read_evidence WHERE turn_key = $1 AND evidence_digest = $2`),
    // The scope row's lock (taken by the upsert, held to commit) and its latest unknown_count.
    claimScoped: statement(
      "claim_scoped",
      `WITH scope AS (
         INSERT INTO ${s}.scopes AS sc (scope_id) VALUES ($2)
         ON CONFLICT (scope_id) DO UPDATE SET unknown_count = sc.unknown_count
         RETURNING sc.unknown_count
       )
       INSERT INTO ${s}.claims (${claimColumns})
       SELECT ${claimValues} FROM scope WHERE scope.unknown_count = 0
       ON CONFLICT (turn_key) DO NOTHING
       RETURNING token`,
    ),
    claimUnscoped: statement(
      "claim_unscoped",
      `INSERT INTO ${s}.claims (${claimColumns}) VALUES (${claimValues})
       ON CONFLICT (turn_key) DO NOTHING RETURNING token`,
    ),
    readClaim: statement(
      "read_claim",
      `SELECT mutation_key, tool_name, tool_call_id, state, result_content, result_status FROM ${s}.claims WHERE turn_key = $1`,
    ),
    lockScope: statement(
      "lock_scope",
      `INSERT INTO ${s}.scopes AS sc (scope_id) VALUES ($1)
       ON CONFLICT (scope_id) DO UPDATE SET unknown_count = sc.unknown_count
       RETURNING sc.unknown_count`,
    ),
    settleComplete: statement(
      "settle_complete",
      `UPDATE ${s}.claims SET state = 'complete', result_content = $3, result_status = $4, settled_at = $5, settled_ms = $6::bigint
       WHERE turn_key = $1 AND token = $2 AND state = 'pending'`,
    ),
    pendingScope: statement(
      "pending_scope",
      `SELECT scope_id FROM ${s}.claims WHERE turn_key = $1 AND token = $2 AND state = 'pending'`,
    ),
    settleUnknown: statement(
      "settle_unknown",
      `WITH settled AS (
         UPDATE ${s}.claims SET state = 'unknown', settled_at = $3, settled_ms = $4::bigint
         WHERE turn_key = $1 AND token = $2 AND state = 'pending'
         RETURNING scope_id
       )
       UPDATE ${s}.scopes AS sc SET unknown_count = sc.unknown_count + 1
       FROM settled WHERE sc.scope_id = settled.scope_id
       RETURNING sc.unknown_count`,
    ),
    readScope: statement("read_scope", `SELECT scope_id FROM ${s}.claims WHERE turn_key = $1`),
    lockClaim: statement(
      "lock_claim",
      `SELECT turn_key, scope_id, tool_call_id, tool_name, args_digest, mutation_key, tool_fingerprint, state
       FROM ${s}.claims WHERE turn_key = $1 FOR UPDATE`,
    ),
    reconcileComplete: statement(
      "reconcile_complete",
      `UPDATE ${s}.claims SET state = 'complete', result_content = $2, result_status = $3, settled_at = $4, settled_ms = $5::bigint
       WHERE turn_key = $1`,
    ),
    deleteClaim: statement("delete_claim", `DELETE FROM ${s}.claims WHERE turn_key = $1`),
    releaseClaim: statement(
      "release_claim",
      `DELETE FROM ${s}.claims WHERE turn_key = $1 AND token = $2 AND state = 'pending'
       RETURNING turn_key, scope_id, tool_call_id, tool_name, args_digest, mutation_key, tool_fingerprint`,
    ),
    releaseScope: statement(
      "release_scope",
      `UPDATE ${s}.scopes SET unknown_count = unknown_count - 1 WHERE scope_id = $1`,
    ),
    putVerdict: statement(
      "put_verdict",
      `INSERT INTO ${s}.verdicts (turn_key, tool_call_id, tool_name, tool_fingerprint, guardrail, args_digest, record)
       VALUES ($1, $2, $3, $4, $5, $6, $7)
       ON CONFLICT DO NOTHING RETURNING record`,
    ),
    getVerdict: statement(
      "get_verdict",
      `SELECT record FROM ${s}.verdicts
       WHERE turn_key = $1 AND tool_call_id = $2 AND tool_name = $3 AND tool_fingerprint = $4 AND guardrail = $5 AND args_digest = $6`,
    ),
    insertApproval: statement(
      "insert_approval",
      `INSERT INTO ${s}.approvals (approval_id, turn_key, status, requested_ms, record) VALUES ($1, $2, 'pending', $3::bigint, $4)
       ON CONFLICT (approval_id) DO NOTHING`,
    ),
    getApproval: statement("get_approval", `SELECT ${approvalColumns} FROM ${s}.approvals WHERE approval_id = $1`),
    lockApproval: statement("lock_approval", `SELECT ${approvalColumns} FROM ${s}.approvals WHERE approval_id = $1 FOR UPDATE`),
    updateApproval: statement("update_approval", `UPDATE ${s}.approvals SET status = $2, record = $3 WHERE approval_id = $1`),
    // NULLS FIRST: where an unparseable time sorts in SQLite (it cannot occur: the schema checks times).
    listApprovals: statement(
      "list_approvals",
      `SELECT ${approvalColumns} FROM ${s}.approvals
       WHERE ($1::text IS NULL OR status = $1) AND ($2::text IS NULL OR turn_key = $2)
       ORDER BY requested_ms NULLS FIRST, approval_order LIMIT $3::integer`,
    ),
    lockPendingBefore: statement(
      "lock_pending_before",
      `SELECT ${approvalColumns} FROM ${s}.approvals
       WHERE status = 'pending' AND requested_ms < $1::bigint
       ORDER BY requested_ms, approval_order FOR UPDATE`,
    ),
    // The lock is taken in a MATERIALIZED CTE the INSERT reads from, so nextval() runs after it.
    appendAudit: statement(
      "append_audit",
      `WITH locked AS MATERIALIZED (SELECT pg_advisory_xact_lock($1::bigint))
       INSERT INTO ${s}.audit (seq, at, at_ms, decision, turn_key, scope_id, approval_id, event)
       SELECT nextval('${s}.audit_seq'), $2, $3::bigint, $4, $5, $6, $7, $8 FROM locked`,
    ),
    readAudit: statement(
      "read_audit",
      `SELECT seq, event FROM ${s}.audit
       WHERE seq > $1::bigint AND ($2::bigint IS NULL OR at_ms IS NULL OR at_ms >= $2::bigint)
       ORDER BY seq LIMIT $3::integer`,
    ),
    readAuditByTurn: statement(
      "read_audit_by_turn",
      `SELECT seq, event FROM ${s}.audit
       WHERE turn_key = $4 AND seq > $1::bigint AND ($2::bigint IS NULL OR at_ms IS NULL OR at_ms >= $2::bigint)
         AND ($5::text IS NULL OR scope_id = $5::text)
       ORDER BY seq LIMIT $3::integer`,
    ),
    readAuditByScope: statement(
      "read_audit_by_scope",
      `SELECT seq, event FROM ${s}.audit
       WHERE scope_id = $4 AND seq > $1::bigint AND ($2::bigint IS NULL OR at_ms IS NULL OR at_ms >= $2::bigint)
       ORDER BY seq LIMIT $3::integer`,
    ),
    getAuditCursor: statement("get_audit_cursor", `SELECT seq FROM ${s}.audit_cursors WHERE sink = $1`),
    advanceAuditCursor: statement(
      "advance_audit_cursor",
      `INSERT INTO ${s}.audit_cursors AS c (sink, seq) VALUES ($1, $2::bigint)
       ON CONFLICT (sink) DO UPDATE SET seq = EXCLUDED.seq WHERE c.seq < EXCLUDED.seq`,
    ),
    listUnresolved: statement(
      "list_unresolved",
      `SELECT turn_key, scope_id, tool_call_id, tool_name, args_digest, mutation_key, tool_fingerprint, state, claimed_at
       FROM ${s}.claims WHERE state IN ('pending', 'unknown') ORDER BY claimed_ms, claim_order`,
    ),
    prune: statement(
      "prune",
      `WITH pruned AS (
         UPDATE ${s}.claims SET state = 'pruned', result_content = NULL, result_status = NULL
         WHERE state = 'complete' AND settled_ms < $1::bigint
         RETURNING turn_key
       ),
       reads AS (DELETE FROM ${s}.read_evidence WHERE turn_key IN (SELECT turn_key FROM pruned)),
       verdicts AS (DELETE FROM ${s}.verdicts WHERE turn_key IN (SELECT turn_key FROM pruned)),
       approvals AS (DELETE FROM ${s}.approvals WHERE turn_key IN (SELECT turn_key FROM pruned))
       SELECT count(*) AS turns FROM pruned`,
    ),
  };
}
