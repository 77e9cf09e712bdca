/**
 * A `GuardrailStore` on one SQLite file (better-sqlite3, an optional peer dependency: only this
 * module imports it). Durable, and safe for several processes sharing the file on one host.
 *
 * - Journal: WAL, so readers never block the writer and one writer commits at a time.
 * - `synchronous = FULL` by default: every commit (a claim above all) is on disk before the
 *   method resolves, so a claim survives an OS crash or power loss and a side effect that ran
 *   after it can never be run again. `"normal"` keeps the database consistent but may lose the
 *   last commits on an OS crash or power loss (not on a process crash): a lost claim would let a
 *   retry run the write a second time. Choose it only where the writes themselves are idempotent.
 * - Every read-then-write operation is ONE `BEGIN IMMEDIATE` transaction: it takes the write lock
 *   before it reads, so two processes can never interleave between the check and the write. A
 *   writer that finds the lock held waits up to `busyTimeoutMs`, then fails (a rejection).
 * - Versioned migrations run at open, in one transaction; a file written by a newer version of
 *   the package is refused, never guessed at.
 * - Every row read back is parsed with the exported zod schemas: a corrupted row (a hand edit,
 *   a bad disk) is a `StoreContractError`: fail closed.
 *
 * Semantics are exactly those of `InMemoryGuardrailStore`; the conformance suite in
 * `arkah-agent-guardrails/testing` is the definition. better-sqlite3 is synchronous: each method
 * runs to completion without yielding, and is `async` only so that every error is a rejection.
 * Waiting for another process's lock blocks this process's event loop for at most
 * `busyTimeoutMs`.
 */
import { randomUUID } from "node:crypto";
import { accessSync, constants, statSync } from "node:fs";
import { dirname, resolve } from "node:path";
import Database from "better-sqlite3";
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
import { ConfigurationError, StoreContractError } from "../errors.js";
import {
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

export interface SqliteGuardrailStoreOptions {
  /** The database file, created if missing (its directory must exist). `":memory:"` for tests. */
  readonly path: string;
  /** Clock for claim, settlement and reconciliation times. Default: the system clock. */
  readonly now?: () => Date;
  /** How long a write waits for another connection's lock before failing. Default 5000 ms. */
  readonly busyTimeoutMs?: number;
  /**
   * `"full"` (default): every commit is synced to disk before the method resolves.
   * `"normal"`: faster; a commit survives a process crash but may be lost on an OS crash or power
   * loss, and a lost claim lets a retry run its write again. See the module comment.
   */
  readonly synchronous?: "full" | "normal";
}

const OptionsSchema = z.strictObject({
  path: z.string().min(1, "path must name a database file (or be \":memory:\")"),
  now: z.custom<() => Date>((value) => typeof value === "function", "now must be a function returning a Date").optional(),
  busyTimeoutMs: z.int().min(0).max(2_147_483_647).optional(),
  synchronous: z.enum(["full", "normal"]).optional(),
});

const DEFAULT_BUSY_TIMEOUT_MS = 5_000;

// ---------------------------------------------------------------------------------------------
// Schema

/** The newest schema version this module knows. */
export const SQLITE_SCHEMA_VERSION = 3;

/**
 * Migration N brings a version N-1 database to version N. Never edit a shipped migration: add the
 * next one. Text columns holding caller-supplied strings (ids, results) store a string, or, for a
 * string that is not well-formed UTF-16 (a lone surrogate), its UTF-16LE bytes as a BLOB (see
 * `encodeText`), so every string round-trips exactly and two distinct strings never collide.
 */
interface SqliteMigration {
  readonly version: number;
  readonly sql: string;
  /** What SQL cannot do exactly, run after `sql` in the same transaction. */
  readonly after?: (db: Database.Database) => void;
}

/** @internal Append-only: the tests build older files from the first ones, as they shipped. */
export const MIGRATIONS: readonly SqliteMigration[] = [
  {
    version: 1,
    sql: `
      -- Admission receipts: the first one per turn wins and is never changed.
      CREATE TABLE receipts (
        turn_key          TEXT PRIMARY KEY,
        scope_id          TEXT NOT NULL,
        turn_id           TEXT NOT NULL,
        policy_version    TEXT NOT NULL,
        moderation_digest TEXT NOT NULL,
        allowed           INTEGER NOT NULL,
        decided_at        TEXT NOT NULL
      );

      -- Read evidence: (turn, digest) pairs.
      CREATE TABLE read_evidence (
        turn_key        TEXT NOT NULL,
        evidence_digest TEXT NOT NULL,
        PRIMARY KEY (turn_key, evidence_digest)
      ) WITHOUT ROWID;

      -- Mutation claims: one row per turn. 'pruned' is a tombstone (the slot is used, the result
      -- gone). Row order (rowid) is claim order, the tie-break of listUnresolved.
      CREATE TABLE claims (
        turn_key       TEXT PRIMARY KEY,
        scope_id       TEXT NOT NULL,
        tool_call_id   TEXT NOT NULL,
        tool_name      TEXT NOT NULL,
        args_digest    TEXT NOT NULL,
        mutation_key   TEXT NOT NULL,
        token          TEXT NOT NULL,
        state          TEXT NOT NULL CHECK (state IN ('pending', 'complete', 'unknown', 'pruned')),
        result_content TEXT,
        result_status  TEXT,
        claimed_at     TEXT NOT NULL,
        claimed_at_ms  INTEGER NOT NULL,
        settled_at     TEXT,
        settled_at_ms  INTEGER
      );
      -- The scope rule: is any claim in this scope 'unknown'?
      CREATE INDEX claims_unknown_by_scope ON claims (scope_id) WHERE state = 'unknown';
      -- listUnresolved, oldest first.
      CREATE INDEX claims_unresolved_by_time ON claims (claimed_at_ms) WHERE state IN ('pending', 'unknown');
      -- prune.
      CREATE INDEX claims_complete_by_settled ON claims (settled_at_ms) WHERE state = 'complete';

      -- Guardrail verdicts and approval decisions: the first per key wins. record is JSON.
      CREATE TABLE verdicts (
        turn_key     TEXT NOT NULL,
        tool_call_id TEXT NOT NULL,
        guardrail    TEXT NOT NULL,
        args_digest  TEXT NOT NULL,
        record       TEXT NOT NULL,
        PRIMARY KEY (turn_key, tool_call_id, guardrail, args_digest)
      ) WITHOUT ROWID;
      CREATE TABLE approvals (
        turn_key     TEXT NOT NULL,
        tool_call_id TEXT NOT NULL,
        guardrail    TEXT NOT NULL,
        args_digest  TEXT NOT NULL,
        record       TEXT NOT NULL,
        PRIMARY KEY (turn_key, tool_call_id, guardrail, args_digest)
      ) WITHOUT ROWID;

      -- The audit trail, append-only. event is the JSON AuditEvent; at_ms is Date.parse(event.at)
      -- (NULL if unparseable), for readAudit's since filter.
      CREATE TABLE audit_events (
        seq      INTEGER PRIMARY KEY AUTOINCREMENT,
        at_ms    INTEGER,
        turn_key TEXT NOT NULL,
        decision TEXT NOT NULL,
        event    TEXT NOT NULL
      );
    `,
  },
  {
    // Verdicts are bound to the tool; approvals become requests with a lifecycle. The package was
    // unreleased (0.1.0) when this shipped, so the two tables are recreated, not converted.
    version: 2,
    sql: `
      DROP TABLE verdicts;
      DROP TABLE approvals;

      -- Guardrail verdicts: the first per key wins. record is the JSON VerdictRecord.
      CREATE TABLE verdicts (
        turn_key     TEXT NOT NULL,
        tool_call_id TEXT NOT NULL,
        tool_name    TEXT NOT NULL,
        guardrail    TEXT NOT NULL,
        args_digest  TEXT NOT NULL,
        record       TEXT NOT NULL,
        PRIMARY KEY (turn_key, tool_call_id, tool_name, guardrail, args_digest)
      ) WITHOUT ROWID;

      -- Approval requests, one per approval id. record is the JSON ApprovalRecord; turn_key,
      -- status and requested_at_ms (Date.parse(requestedAt), NULL if unparseable) repeat it for
      -- queries. Row order (rowid) is request order, the tie-break of listApprovals.
      CREATE TABLE approvals (
        approval_id     TEXT PRIMARY KEY,
        turn_key        TEXT NOT NULL,
        status          TEXT NOT NULL
          CHECK (status IN ('pending', 'approved', 'rejected', 'edited', 'applied', 'expired')),
        requested_at_ms INTEGER,
        record          TEXT NOT NULL
      );
      CREATE INDEX approvals_by_time ON approvals (requested_at_ms);
      CREATE INDEX approvals_pending_by_time ON approvals (requested_at_ms) WHERE status = 'pending';
      CREATE INDEX approvals_by_turn ON approvals (turn_key);

      -- The approval request an event is about, for queries (the event JSON has it too).
      ALTER TABLE audit_events ADD COLUMN approval_id TEXT;
      CREATE INDEX audit_events_by_approval ON audit_events (approval_id) WHERE approval_id IS NOT NULL;
    `,
  },
  {
    version: 3,
    sql: `
      -- The principal a turn was admitted for; NULL when the turn named none (every receipt
      -- stored before version 3).
      ALTER TABLE receipts ADD COLUMN principal TEXT;

      -- The fingerprint of the tool a claim was made to; NULL for a claim made before version 3.
      ALTER TABLE claims ADD COLUMN tool_fingerprint TEXT;

      -- Verdicts are keyed by the tool's fingerprint too. A verdict recorded before version 3 has
      -- none, so it can answer no call any more (a replay runs its check again): the table is
      -- recreated empty rather than kept unreachable.
      DROP TABLE verdicts;
      CREATE TABLE verdicts (
        turn_key         TEXT NOT NULL,
        tool_call_id     TEXT NOT NULL,
        tool_name        TEXT NOT NULL,
        tool_fingerprint TEXT NOT NULL,
        guardrail        TEXT NOT NULL,
        args_digest      TEXT NOT NULL,
        record           TEXT NOT NULL,
        PRIMARY KEY (turn_key, tool_call_id, tool_name, tool_fingerprint, guardrail, args_digest)
      ) WITHOUT ROWID;

      -- The scope an event is about, for readAudit's scopeId filter (encoded as every stored id is;
      -- the event JSON has it too). Filled in for the events already there: here for those whose
      -- JSON has no \\u escape (json_extract gives back their text exactly), by the migration's
      -- after step for the others (a lone surrogate or a control character needs encodeText).
      ALTER TABLE audit_events ADD COLUMN scope_id TEXT;
      UPDATE audit_events SET scope_id = json_extract(event, '$.scopeId')
        WHERE json_valid(event) AND instr(event, '\\u') = 0 AND json_type(event, '$.scopeId') = 'text';
      -- readAudit by turn and by scope, in seq order.
      CREATE INDEX audit_events_by_turn ON audit_events (turn_key, seq);
      CREATE INDEX audit_events_by_scope ON audit_events (scope_id, seq);

      -- How far each named sink has been delivered (deliverAudit): forward only.
      CREATE TABLE audit_cursors (
        sink TEXT PRIMARY KEY,
        seq  INTEGER NOT NULL CHECK (seq >= 0)
      );
    `,
    after: (db) => {
      const rows = db.prepare<[], Row>("SELECT seq, event FROM audit_events WHERE scope_id IS NULL").all();
      const update = db.prepare("UPDATE audit_events SET scope_id = ? WHERE seq = ?");
      for (const row of rows) {
        let scopeId: unknown;
        try {
          scopeId = (JSON.parse(String(row.event)) as { scopeId?: unknown } | null)?.scopeId;
        } catch {
          // A corrupt event stays unfiltered (NULL); readAudit rejects it when it reads it.
          continue;
        }
        if (typeof scopeId === "string") update.run(encodeText(scopeId), row.seq);
      }
    },
  },
];

// ---------------------------------------------------------------------------------------------
// Values in and out of SQLite

type SqlText = string | Buffer;
type Row = Record<string, unknown>;

const LONE_SURROGATE = /\p{Cs}/u;

/**
 * SQLite text is UTF-8, and better-sqlite3 replaces a lone surrogate with U+FFFD, which would
 * change the string and could make two ids equal. Such a string is stored as its UTF-16LE bytes
 * (a BLOB never equals a TEXT value, so distinct strings stay distinct).
 */
function encodeText(value: string): SqlText {
  return LONE_SURROGATE.test(value) ? Buffer.from(value, "utf16le") : value;
}

function decodeText(value: unknown): unknown {
  return Buffer.isBuffer(value) ? value.toString("utf16le") : value;
}

/** Date.parse, as the in-memory store compares times; NULL in SQL when unparseable. */
function epochMs(timestamp: string): number | null {
  const ms = Date.parse(timestamp);
  return Number.isNaN(ms) ? null : ms;
}

function corrupt(what: string, detail: string, cause?: unknown): StoreContractError {
  return new StoreContractError(
    `corrupt ${what} in the SQLite guardrail store: ${detail}`,
    cause === undefined ? undefined : { cause },
  );
}

/** Parses a row read back; a row that does not parse is a corrupt record (fail closed). */
function parseRow<T>(schema: z.ZodType<T>, value: unknown, what: string): T {
  const parsed = schema.safeParse(value);
  if (!parsed.success) throw corrupt(what, z.prettifyError(parsed.error));
  return parsed.data;
}

function parseJson(text: unknown, what: string): unknown {
  if (typeof text !== "string") throw corrupt(what, "the JSON column is not text");
  try {
    return JSON.parse(text);
  } catch (error) {
    throw corrupt(what, "the JSON column does not parse", error);
  }
}

/** 1/0 as stored; anything else is passed through for the schema to reject. */
function decodeBoolean(value: unknown): unknown {
  return value === 1 ? true : value === 0 ? false : value;
}

const ClaimStateSchema = z.enum(["pending", "complete", "unknown", "pruned"]);

/** A claim row, as read back. */
const StoredClaimSchema = z
  .strictObject({
    identity: ClaimedIdentitySchema,
    token: z.string().min(1),
    state: ClaimStateSchema,
    result: MutationResultSchema.optional(),
    claimedAt: z.iso.datetime({ offset: true }),
  })
  .refine(
    (claim) => (claim.state === "complete") === (claim.result !== undefined),
    "a complete claim has a result, and no other claim does",
  );
type StoredClaim = z.infer<typeof StoredClaimSchema>;

function claimFromRow(row: Row): StoredClaim {
  const content = decodeText(row.result_content);
  const status = row.result_status;
  return parseRow(
    StoredClaimSchema,
    {
      identity: {
        turnKey: row.turn_key,
        scopeId: decodeText(row.scope_id),
        toolCallId: decodeText(row.tool_call_id),
        toolName: decodeText(row.tool_name),
        argsDigest: row.args_digest,
        mutationKey: row.mutation_key,
        // NULL for a claim made before schema version 3.
        ...(row.tool_fingerprint === null ? {} : { toolFingerprint: row.tool_fingerprint }),
      },
      token: decodeText(row.token),
      state: row.state,
      result: content === null && status === null ? undefined : { content, status },
      claimedAt: row.claimed_at,
    },
    `claim for turn ${String(row.turn_key)}`,
  );
}

function receiptFromRow(row: Row): AdmissionReceipt {
  return parseRow(
    AdmissionReceiptSchema,
    {
      turnKey: row.turn_key,
      scopeId: decodeText(row.scope_id),
      turnId: decodeText(row.turn_id),
      policyVersion: decodeText(row.policy_version),
      moderationDigest: row.moderation_digest,
      allowed: decodeBoolean(row.allowed),
      decidedAt: row.decided_at,
      ...(row.principal === null ? {} : { principal: decodeText(row.principal) }),
    },
    `admission receipt for turn ${String(row.turn_key)}`,
  );
}

/** A verdict record: its JSON, parsed, and bound to the key it is stored under. */
function verdictFromRow(row: Row, key: VerdictKey): VerdictRecord {
  const what = "verdict record";
  const record = parseRow(VerdictRecordSchema, parseJson(row.record, what), what);
  if (
    record.turnKey !== key.turnKey ||
    record.toolCallId !== key.toolCallId ||
    record.toolName !== key.toolName ||
    record.toolFingerprint !== key.toolFingerprint ||
    record.guardrail !== key.guardrail ||
    record.argsDigest !== key.argsDigest
  ) {
    throw corrupt(what, "the record's key is not the key it is stored under");
  }
  return record;
}

function keyParams(key: VerdictKey): [string, SqlText, SqlText, string, SqlText, string] {
  return [
    key.turnKey,
    encodeText(key.toolCallId),
    encodeText(key.toolName),
    key.toolFingerprint,
    encodeText(key.guardrail),
    key.argsDigest,
  ];
}

/** An approval row: its JSON record, parsed, and agreeing with the columns it is filed under. */
function approvalFromRow(row: Row): ApprovalRecord {
  const what = `approval request ${String(row.approval_id)}`;
  const record = parseRow(ApprovalRecordSchema, parseJson(row.record, what), what);
  if (record.approvalId !== row.approval_id || record.turnKey !== row.turn_key || record.status !== row.status) {
    throw corrupt(what, "the record does not match the row it is stored in");
  }
  return record;
}

// ---------------------------------------------------------------------------------------------
// Opening

const OWN_ERROR = Symbol("arkah.sqlite.own");

/** Why `path` cannot be opened, in words, when the file system can tell. */
function diagnosePath(path: string): string | undefined {
  const absolute = resolve(path);
  const dir = dirname(absolute);
  const stat = (target: string) => {
    try {
      return statSync(target);
    } catch (error) {
      return error as NodeJS.ErrnoException;
    }
  };
  const dirStat = stat(dir);
  if (dirStat instanceof Error) {
    return dirStat.code === "ENOENT"
      ? `its directory ${JSON.stringify(dir)} does not exist; create it first`
      : `its directory ${JSON.stringify(dir)} cannot be read (${dirStat.code ?? dirStat.message})`;
  }
  if (!dirStat.isDirectory()) return `${JSON.stringify(dir)} is not a directory`;
  const fileStat = stat(absolute);
  if (!(fileStat instanceof Error) && fileStat.isDirectory()) return "it is a directory, not a database file";
  try {
    accessSync(dir, constants.W_OK);
  } catch {
    return `its directory ${JSON.stringify(dir)} is not writable (SQLite needs to create the file and its -wal and -shm files there)`;
  }
  if (!(fileStat instanceof Error)) {
    try {
      accessSync(absolute, constants.R_OK | constants.W_OK);
    } catch {
      return "the file is not readable and writable by this process";
    }
  }
  return undefined;
}

function openError(path: string, cause: unknown): Error {
  const reason =
    (path === ":memory:" ? undefined : diagnosePath(path)) ?? (cause instanceof Error ? cause.message : String(cause));
  return new Error(`cannot open the SQLite guardrail store at ${JSON.stringify(path)}: ${reason}`, { cause });
}

function ownError(message: string): Error {
  const error = new Error(message);
  Object.defineProperty(error, OWN_ERROR, { value: true });
  return error;
}

/** Applies the migrations the file lacks, in one immediate transaction (one process at a time). */
function migrate(db: Database.Database, path: string): void {
  db.transaction(() => {
    db.exec("CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)");
    // version is the rowid: an integer, or NULL (max of nothing) in a fresh file.
    const version: unknown = db.prepare("SELECT max(version) FROM schema_migrations").pluck().get() ?? 0;
    if (typeof version !== "number" || version < 0) {
      throw ownError(
        `the SQLite guardrail store at ${JSON.stringify(path)} has an unreadable schema_migrations table (max version ${JSON.stringify(version)})`,
      );
    }
    if (version > SQLITE_SCHEMA_VERSION) {
      throw ownError(
        `the SQLite guardrail store at ${JSON.stringify(path)} has schema version ${String(version)}, written by a newer ` +
          `arkah-agent-guardrails; this version supports up to ${String(SQLITE_SCHEMA_VERSION)}. Upgrade the package; ` +
          `never downgrade a store in use`,
      );
    }
    const record = db.prepare("INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)");
    for (const migration of MIGRATIONS) {
      if (migration.version <= version) continue;
      db.exec(migration.sql);
      migration.after?.(db);
      record.run(migration.version, new Date().toISOString());
    }
  }).immediate();
}

// ---------------------------------------------------------------------------------------------
// The store

type Statement = Database.Statement<unknown[], Row>;

export class SqliteGuardrailStore implements GuardrailStore {
  readonly #db: Database.Database;
  readonly #now: () => Date;
  readonly #sql: Statements;
  readonly #tx: ReturnType<typeof prepareTransactions>;

  private constructor(db: Database.Database, now: () => Date) {
    this.#db = db;
    this.#now = now;
    this.#sql = prepareStatements(db);
    this.#tx = prepareTransactions(db, this.#sql, () => this.#timestamp());
  }

  /**
   * Opens (creating if needed) the store at `options.path`, applying pending migrations. Throws
   * `ConfigurationError` for invalid options, and an `Error` naming the path and the cause when the
   * file cannot be opened or was written by a newer version.
   */
  static open(options: SqliteGuardrailStoreOptions): SqliteGuardrailStore {
    const parsed = OptionsSchema.safeParse(options);
    if (!parsed.success) {
      throw new ConfigurationError(`invalid SqliteGuardrailStore options: ${z.prettifyError(parsed.error)}`);
    }
    const { path, now = () => new Date(), busyTimeoutMs = DEFAULT_BUSY_TIMEOUT_MS, synchronous = "full" } = parsed.data;
    let db: Database.Database;
    try {
      db = new Database(path, { timeout: busyTimeoutMs });
    } catch (error) {
      throw openError(path, error);
    }
    try {
      const mode: unknown = db.pragma("journal_mode = WAL", { simple: true });
      if (mode !== "wal" && !(path === ":memory:" && mode === "memory")) {
        throw ownError(
          `the SQLite guardrail store at ${JSON.stringify(path)} cannot use WAL mode (journal_mode is ${String(mode)}); ` +
            "put it on a local file system",
        );
      }
      db.pragma(`synchronous = ${synchronous === "full" ? "FULL" : "NORMAL"}`);
      migrate(db, path);
      return new SqliteGuardrailStore(db, now);
    } catch (error) {
      db.close();
      if (typeof error === "object" && error !== null && OWN_ERROR in error) throw error;
      throw openError(path, error);
    }
  }

  /** Closes the connection. Calls after this reject. Idempotent. */
  close(): void {
    if (this.#db.open) this.#db.close();
  }

  #timestamp(): string {
    return this.#now().toISOString();
  }

  // -- admission ------------------------------------------------------------------------------

  async getReceipt(turnKey: string): Promise<AdmissionReceipt | undefined> {
    const row = this.#sql.getReceipt.get(parseDigest(turnKey, "turn key"));
    return row === undefined ? undefined : receiptFromRow(row);
  }

  async putReceiptIfAbsent(receipt: AdmissionReceipt): Promise<AdmissionReceipt> {
    const candidate = parseStoreValue(AdmissionReceiptSchema, receipt, "admission receipt");
    return this.#tx.putReceipt.immediate(candidate);
  }

  // -- read evidence --------------------------------------------------------------------------

  async recordSuccessfulRead(evidence: ReadEvidence): Promise<void> {
    const { turnKey, evidenceDigest } = parseEvidence(evidence);
    this.#sql.insertRead.run(turnKey, evidenceDigest);
  }

  async hasSuccessfulRead(evidence: ReadEvidence): Promise<boolean> {
    const { turnKey, evidenceDigest } = parseEvidence(evidence);
    return this.#sql.hasRead.get(turnKey, evidenceDigest) !== undefined;
  }

  // -- mutation claims ------------------------------------------------------------------------

  async claimMutation(identity: MutationIdentity, options?: ClaimOptions): Promise<ClaimResult> {
    const parsed = parseIdentity(identity);
    return this.#tx.claim.immediate(parsed, requiresResolvedScope(options));
  }

  async settleMutation(settlement: MutationSettlement): Promise<boolean> {
    return this.#tx.settle.immediate(parseSettlement(settlement));
  }

  async releaseMutation(release: MutationRelease): Promise<boolean> {
    return this.#tx.release.immediate(parseRelease(release));
  }

  // -- verdicts --------------------------------------------------------------------------------

  async recordVerdict(record: VerdictRecord): Promise<VerdictRecord> {
    const candidate = parseStoreValue(VerdictRecordSchema, record, "verdict record");
    return this.#tx.putVerdict.immediate(candidate);
  }

  async getVerdict(key: VerdictKey): Promise<VerdictRecord | undefined> {
    const parsed = parseStoreValue(VerdictKeySchema, key, "verdict key");
    const row = this.#sql.getVerdict.get(...keyParams(parsed));
    return row === undefined ? undefined : verdictFromRow(row, parsed);
  }

  // -- approval requests ----------------------------------------------------------------------

  async requestApproval(request: ApprovalSubmission): Promise<ApprovalRecord> {
    const candidate = parseStoreValue(ApprovalRequestSchema, request, "approval request");
    return this.#tx.requestApproval.immediate(candidate);
  }

  async getApproval(approvalId: string): Promise<ApprovalRecord | undefined> {
    const row = this.#sql.getApproval.get(parseDigest(approvalId, "approval id"));
    return row === undefined ? undefined : approvalFromRow(row);
  }

  async decideApproval(input: DecideApprovalInput): Promise<ApprovalDecisionResult> {
    const parsed = parseStoreValue(DecideApprovalInputSchema, input, "approval decision");
    return this.#tx.decideApproval.immediate(parsed);
  }

  async applyApproval(input: ApplyApprovalInput): Promise<boolean> {
    const parsed = parseStoreValue(ApplyApprovalInputSchema, input, "approval application");
    return this.#tx.applyApproval.immediate(parsed);
  }

  async listApprovals(query: ApprovalQuery = {}): Promise<ApprovalRecord[]> {
    const { status, turnKey, limit = 10_000 } = parseStoreValue(ApprovalQuerySchema, query, "approval query");
    const [byStatus, byTurn] = [status ?? null, turnKey ?? null];
    return this.#sql.listApprovals.all(byStatus, byStatus, byTurn, byTurn, limit).map(approvalFromRow);
  }

  async expireApprovals(input: ExpireApprovalsInput): Promise<ExpireApprovalsResult> {
    const cutoff = epochMs(parseStoreValue(ExpireApprovalsInputSchema, input, "approval expiry").olderThan);
    // An unparseable cutoff compares false with every time, as in the in-memory store.
    if (cutoff === null) return { expired: 0 };
    return this.#tx.expireApprovals.immediate(cutoff);
  }

  // -- audit trail ----------------------------------------------------------------------------

  async appendAudit(event: AuditEvent): Promise<void> {
    appendEvent(this.#sql, parseStoreValue(AuditEventSchema, event, "audit event"));
  }


  async readAudit(query: AuditQuery = {}): Promise<StoredAuditEvent[]> {
    const { since, afterSeq = 0, turnKey, scopeId, limit = 10_000 } = parseStoreValue(AuditQuerySchema, query, "audit query");
    const params = {
      afterSeq,
      since: since === undefined ? null : epochMs(since),
      turnKey: turnKey ?? null,
      scopeId: scopeId === undefined ? null : encodeText(scopeId),
      limit,
    };
    const statement =
      turnKey !== undefined ? this.#sql.readAuditByTurn : scopeId !== undefined ? this.#sql.readAuditByScope : this.#sql.readAudit;
    return statement.all(params).map((row) => {
      const what = `audit event ${String(row.seq)}`;
      const event = parseJson(row.event, what);
      if (typeof event !== "object" || event === null || Array.isArray(event)) throw corrupt(what, "not a JSON object");
      return parseRow(StoredAuditEventSchema, { ...event, seq: row.seq }, what);
    });
  }

  async getAuditCursor(sink: string): Promise<number> {
    const name = parseStoreValue(AuditSinkNameSchema, sink, "audit sink name");
    const seq: unknown = this.#sql.getAuditCursor.get(encodeText(name))?.seq ?? 0;
    return parseRow(AuditCursorSchema, seq, `audit cursor of ${JSON.stringify(name)}`);
  }

  async advanceAuditCursor(input: AdvanceAuditCursorInput): Promise<boolean> {
    const { sink, seq } = parseStoreValue(AdvanceAuditCursorInputSchema, input, "audit cursor advance");
    // A cursor is never below 0: advancing to 0 moves nothing (and inserts no row).
    if (seq === 0) return false;
    return this.#sql.advanceAuditCursor.run(encodeText(sink), seq).changes === 1;
  }

  // -- reconciliation and retention -----------------------------------------------------------

  async listUnresolved(): Promise<UnresolvedMutation[]> {
    return this.#sql.listUnresolved.all().map((row) => {
      const claim = claimFromRow(row);
      return parseRow(
        UnresolvedMutationSchema,
        { ...claim.identity, state: claim.state, claimedAt: claim.claimedAt },
        `claim for turn ${claim.identity.turnKey}`,
      );
    });
  }

  async reconcileMutation(reconciliation: Reconciliation): Promise<ReconcileResult> {
    const parsed = parseStoreValue(ReconciliationSchema, reconciliation, "reconciliation");
    return this.#tx.reconcile.immediate(parsed);
  }

  async prune(options: PruneOptions): Promise<PruneResult> {
    const cutoff = epochMs(parseStoreValue(PruneOptionsSchema, options, "prune options").olderThan);
    // An unparseable cutoff compares false with every time, as in the in-memory store: nothing goes.
    if (cutoff === null) return { turns: 0 };
    return this.#tx.prune.immediate(cutoff);
  }
}

/**
 * The read-then-write operations, each one transaction; callers run them with `.immediate()`
 * (`BEGIN IMMEDIATE`: the write lock is taken before the first read).
 */
function prepareTransactions(db: Database.Database, sql: Statements, timestamp: () => string) {
  const putReceipt = db.transaction((receipt: AdmissionReceipt): AdmissionReceipt => {
    const inserted = sql.insertReceipt.run(
      receipt.turnKey,
      encodeText(receipt.scopeId),
      encodeText(receipt.turnId),
      encodeText(receipt.policyVersion),
      receipt.moderationDigest,
      receipt.allowed ? 1 : 0,
      receipt.decidedAt,
      receipt.principal === undefined ? null : encodeText(receipt.principal),
    );
    if (inserted.changes === 1) return receipt;
    const row = sql.getReceipt.get(receipt.turnKey);
    if (row === undefined) throw corrupt("admission receipt", `turn ${receipt.turnKey} neither inserted nor found`);
    return receiptFromRow(row);
  });

  const claim = db.transaction((identity: MutationIdentity, requireResolvedScope: boolean): ClaimResult => {
    const row = sql.getClaim.get(identity.turnKey);
    if (row !== undefined) {
      const existing = claimFromRow(row);
      if (existing.state === "pruned") return { status: "conflict" };
      if (existing.identity.mutationKey !== identity.mutationKey) {
        if (existing.state !== "complete" || existing.result === undefined) return { status: "conflict" };
        const { toolName, toolCallId } = existing.identity;
        return { status: "conflict", completed: { toolName, toolCallId, result: existing.result } };
      }
      if (existing.state === "complete" && existing.result !== undefined) {
        return { status: "replay", result: existing.result };
      }
      return { status: existing.state === "unknown" ? "unknown" : "pending" };
    }
    const scopeId = encodeText(identity.scopeId);
    if (requireResolvedScope && sql.scopeHasUnknown.get(scopeId) !== undefined) {
      return { status: "scope_unresolved" };
    }
    const token = randomUUID();
    const claimedAt = timestamp();
    sql.insertClaim.run(
      identity.turnKey,
      scopeId,
      encodeText(identity.toolCallId),
      encodeText(identity.toolName),
      identity.argsDigest,
      identity.mutationKey,
      identity.toolFingerprint,
      token,
      claimedAt,
      epochMs(claimedAt),
    );
    return { status: "acquired", token };
  });

  const settle = db.transaction((settlement: MutationSettlement): boolean => {
    const token = encodeText(settlement.token);
    const row = sql.getClaimToken.get(settlement.turnKey);
    if (row?.state !== "pending" || !sameText(row.token, token)) return false;
    const settledAt = timestamp();
    const applied =
      settlement.outcome === "complete"
        ? sql.settleComplete.run(
            encodeText(settlement.result.content),
            settlement.result.status,
            settledAt,
            epochMs(settledAt),
            settlement.turnKey,
            token,
          )
        : sql.settleUnknown.run(settledAt, epochMs(settledAt), settlement.turnKey, token);
    return applied.changes === 1;
  });

  /** Deletes a pending claim by its token, with its `released` audit event. */
  const release = db.transaction((input: MutationRelease): boolean => {
    const token = encodeText(input.token);
    const row = sql.getClaim.get(input.turnKey);
    if (row === undefined) return false;
    const existing = claimFromRow(row);
    if (existing.state !== "pending" || !sameText(row.token, token)) return false;
    if (sql.releaseClaim.run(input.turnKey, token).changes !== 1) return false;
    appendEvent(sql, releasedEvent(existing.identity, timestamp()));
    return true;
  });

  /** Insert-if-absent of a verdict; returns whichever record won. */
  const putVerdict = db.transaction((record: VerdictRecord): VerdictRecord => {
    const params = keyParams(record);
    const inserted = sql.insertVerdict.run(...params, JSON.stringify(record));
    if (inserted.changes === 1) return structuredClone(record);
    const row = sql.getVerdict.get(...params);
    if (row === undefined) throw corrupt("verdict record", "neither inserted nor found");
    return verdictFromRow(row, record);
  });

  /** Writes a changed approval record over its row (the id and turn never change). */
  const storeApproval = (record: ApprovalRecord): void => {
    sql.updateApproval.run(record.status, JSON.stringify(record), record.approvalId);
  };

  /** Insert-if-absent of a pending request, audited when inserted; returns the stored record. */
  const requestApproval = db.transaction((request: ApprovalSubmission): ApprovalRecord => {
    const record: ApprovalRecord = { ...request, status: "pending" };
    const inserted = sql.insertApproval.run(
      record.approvalId,
      record.turnKey,
      epochMs(record.requestedAt),
      JSON.stringify(record),
    );
    if (inserted.changes === 1) {
      appendEvent(sql, approvalEvent(record, "requested", timestamp()));
      return structuredClone(record);
    }
    const row = sql.getApproval.get(record.approvalId);
    if (row === undefined) throw corrupt("approval request", "neither inserted nor found");
    return approvalFromRow(row);
  });

  const decideApproval = db.transaction((input: DecideApprovalInput): ApprovalDecisionResult => {
    const row = sql.getApproval.get(input.approvalId);
    const { result, changed, event } = decideOutcome(row === undefined ? undefined : approvalFromRow(row), input, timestamp());
    if (changed !== undefined) storeApproval(changed);
    if (event !== undefined) appendEvent(sql, event);
    return structuredClone(result);
  });

  const applyApproval = db.transaction((input: ApplyApprovalInput): boolean => {
    const row = sql.getApproval.get(input.approvalId);
    const applied = appliedRecord(row === undefined ? undefined : approvalFromRow(row), input.appliedAt);
    if (applied === undefined) return false;
    storeApproval(applied);
    appendEvent(sql, approvalEvent(applied, "applied", timestamp()));
    return true;
  });

  const expireApprovals = db.transaction((cutoff: number): ExpireApprovalsResult => {
    const at = timestamp();
    const due = sql.pendingApprovalsBefore.all(cutoff).map(approvalFromRow);
    for (const record of due) {
      const retired = expiredRecord(record, at);
      storeApproval(retired);
      appendEvent(sql, approvalEvent(retired, "expired", at));
    }
    return { expired: due.length };
  });

  const reconcile = db.transaction((reconciliation: Reconciliation): ReconcileResult => {
    const row = sql.getClaim.get(reconciliation.turnKey);
    if (row === undefined) return { reconciled: false, reason: "not_found" };
    const existing = claimFromRow(row);
    if (existing.state !== "pending" && existing.state !== "unknown") {
      return { reconciled: false, reason: "not_unresolved" };
    }
    const at = timestamp();
    if (reconciliation.resolution === "completed") {
      sql.reconcileComplete.run(
        encodeText(reconciliation.result.content),
        reconciliation.result.status,
        at,
        epochMs(at),
        reconciliation.turnKey,
      );
    } else {
      sql.deleteClaim.run(reconciliation.turnKey);
    }
    const { identity } = existing;
    appendEvent(sql, reconciledEvent(identity, reconciliation, at));
    return { reconciled: true, state: existing.state };
  });

  const prune = db.transaction((cutoff: number): PruneResult => {
    sql.pruneReads.run(cutoff);
    sql.pruneVerdicts.run(cutoff);
    sql.pruneApprovals.run(cutoff);
    return { turns: sql.pruneClaims.run(cutoff).changes };
  });

  return {
    putReceipt,
    claim,
    settle,
    release,
    putVerdict,
    requestApproval,
    decideApproval,
    applyApproval,
    expireApprovals,
    reconcile,
    prune,
  };
}

function appendEvent(sql: Statements, event: AuditEvent): void {
  sql.appendAudit.run(
    epochMs(event.at),
    event.turnKey,
    encodeText(event.scopeId),
    event.decision,
    event.approvalId ?? null,
    JSON.stringify(event),
  );
}

function sameText(stored: unknown, expected: SqlText): boolean {
  if (typeof stored === "string" || typeof expected === "string") return stored === expected;
  return Buffer.isBuffer(stored) && stored.equals(expected);
}

/** readAudit's `since`: events at or after it (an event time that did not parse is kept, as in memory). */
const AUDIT_SINCE = "(@since IS NULL OR at_ms IS NULL OR at_ms >= @since)";

const CLAIM_COLUMNS =
  "turn_key, scope_id, tool_call_id, tool_name, args_digest, mutation_key, tool_fingerprint, token, state, " +
  "result_content, result_status, claimed_at";

type Statements = ReturnType<typeof prepareStatements>;

/** Every statement, prepared once per connection. */
function prepareStatements(db: Database.Database) {
  const prepare = (source: string): Statement => db.prepare<unknown[], Row>(source);
  /** Deletes the rows of turns whose completed claims settled before the cutoff. */
  const pruneTurns = (table: "read_evidence" | "verdicts" | "approvals") =>
    prepare(
      `DELETE FROM ${table} WHERE turn_key IN (SELECT turn_key FROM claims WHERE state = 'complete' AND settled_at_ms < ?)`,
    );
  const approvalColumns = "approval_id, turn_key, status, record";
  return {
    getReceipt: prepare(
      "SELECT turn_key, scope_id, turn_id, policy_version, moderation_digest, allowed, decided_at, principal " +
        "FROM receipts WHERE turn_key = ?",
    ),
    insertReceipt: prepare(
      "INSERT OR IGNORE INTO receipts (turn_key, scope_id, turn_id, policy_version, moderation_digest, allowed, decided_at, principal) " +
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
    ),
    insertRead: prepare("INSERT OR IGNORE INTO read_evidence (turn_key, evidence_digest) VALUES (?, ?)"),
    hasRead: prepare("SELECT 1 FROM read_evidence WHERE turn_key = ? AND evidence_digest = ?"),
    getClaim: prepare(`SELECT ${CLAIM_COLUMNS} FROM claims WHERE turn_key = ?`),
    getClaimToken: prepare("SELECT token, state FROM claims WHERE turn_key = ?"),
    scopeHasUnknown: prepare("SELECT 1 FROM claims WHERE scope_id = ? AND state = 'unknown' LIMIT 1"),
    insertClaim: prepare(
      "INSERT INTO claims (turn_key, scope_id, tool_call_id, tool_name, args_digest, mutation_key, tool_fingerprint, token, state, " +
        "claimed_at, claimed_at_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?)",
    ),
    settleComplete: prepare(
      "UPDATE claims SET state = 'complete', result_content = ?, result_status = ?, settled_at = ?, settled_at_ms = ? " +
        "WHERE turn_key = ? AND token = ? AND state = 'pending'",
    ),
    settleUnknown: prepare(
      "UPDATE claims SET state = 'unknown', settled_at = ?, settled_at_ms = ? WHERE turn_key = ? AND token = ? AND state = 'pending'",
    ),
    reconcileComplete: prepare(
      "UPDATE claims SET state = 'complete', result_content = ?, result_status = ?, settled_at = ?, settled_at_ms = ? " +
        "WHERE turn_key = ? AND state IN ('pending', 'unknown')",
    ),
    deleteClaim: prepare("DELETE FROM claims WHERE turn_key = ? AND state IN ('pending', 'unknown')"),
    releaseClaim: prepare("DELETE FROM claims WHERE turn_key = ? AND token = ? AND state = 'pending'"),
    listUnresolved: prepare(
      `SELECT ${CLAIM_COLUMNS} FROM claims WHERE state IN ('pending', 'unknown') ORDER BY claimed_at_ms, rowid`,
    ),
    insertVerdict: prepare(
      "INSERT OR IGNORE INTO verdicts (turn_key, tool_call_id, tool_name, tool_fingerprint, guardrail, args_digest, record) " +
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
    ),
    getVerdict: prepare(
      "SELECT record FROM verdicts WHERE turn_key = ? AND tool_call_id = ? AND tool_name = ? AND tool_fingerprint = ? " +
        "AND guardrail = ? AND args_digest = ?",
    ),
    insertApproval: prepare(
      "INSERT OR IGNORE INTO approvals (approval_id, turn_key, status, requested_at_ms, record) VALUES (?, ?, 'pending', ?, ?)",
    ),
    getApproval: prepare(`SELECT ${approvalColumns} FROM approvals WHERE approval_id = ?`),
    updateApproval: prepare("UPDATE approvals SET status = ?, record = ? WHERE approval_id = ?"),
    listApprovals: prepare(
      `SELECT ${approvalColumns} FROM approvals WHERE (? IS NULL OR status = ?) AND (? IS NULL OR turn_key = ?) ` +
        "ORDER BY requested_at_ms, rowid LIMIT ?",
    ),
    pendingApprovalsBefore: prepare(
      `SELECT ${approvalColumns} FROM approvals WHERE status = 'pending' AND requested_at_ms < ? ORDER BY requested_at_ms, rowid`,
    ),
    appendAudit: prepare(
      "INSERT INTO audit_events (at_ms, turn_key, scope_id, decision, approval_id, event) VALUES (?, ?, ?, ?, ?, ?)",
    ),
    // Named parameters: @afterSeq, @since (NULL: no bound), @turnKey, @scopeId, @limit. One
    // statement per index it walks: the trail in seq order, or one turn's or one scope's events.
    readAudit: prepare(`SELECT seq, event FROM audit_events WHERE seq > @afterSeq AND ${AUDIT_SINCE} ORDER BY seq LIMIT @limit`),
    readAuditByTurn: prepare(
      `SELECT seq, event FROM audit_events WHERE turn_key = @turnKey AND seq > @afterSeq AND ${AUDIT_SINCE} ` +
        "AND (@scopeId IS NULL OR scope_id = @scopeId) ORDER BY seq LIMIT @limit",
    ),
    readAuditByScope: prepare(
      `SELECT seq, event FROM audit_events WHERE scope_id = @scopeId AND seq > @afterSeq AND ${AUDIT_SINCE} ORDER BY seq LIMIT @limit`,
    ),
    getAuditCursor: prepare("SELECT seq FROM audit_cursors WHERE sink = ?"),
    // Forward only, in one statement: the update applies only to a lower cursor.
    advanceAuditCursor: prepare(
      "INSERT INTO audit_cursors (sink, seq) VALUES (?, ?) ON CONFLICT (sink) DO UPDATE SET seq = excluded.seq WHERE seq < excluded.seq",
    ),
    pruneReads: pruneTurns("read_evidence"),
    pruneVerdicts: pruneTurns("verdicts"),
    pruneApprovals: pruneTurns("approvals"),
    pruneClaims: prepare(
      "UPDATE claims SET state = 'pruned', result_content = NULL, result_status = NULL " +
        "WHERE state = 'complete' AND settled_at_ms < ?",
    ),
  };
}
