/**
 * The SQLite store's schema: versioned migrations, applied at open in one `BEGIN IMMEDIATE`
 * transaction, so processes opening the file at once migrate it once. A file written by a newer
 * version of the package is refused, never guessed at.
 */
import type Database from "better-sqlite3";
import { encodeText, type Row } from "./encoding.js";
import { ownError } from "./errors.js";

/** The newest schema version this module knows. */
export const SQLITE_SCHEMA_VERSION = 7;

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
  {
    version: 4,
    sql: `
      -- The turn service's records: one per turn key. record is the whole TurnRecord as JSON;
      -- state and updated_at_ms are copies of two of its fields, for prune.
      CREATE TABLE turns (
        turn_key      TEXT PRIMARY KEY,
        state         TEXT NOT NULL CHECK (state IN ('running', 'awaiting_approval', 'completed', 'refused', 'failed')),
        updated_at_ms INTEGER NOT NULL,
        record        TEXT NOT NULL
      );
      -- prune: finished turns by age.
      CREATE INDEX turns_finished_by_updated ON turns (updated_at_ms) WHERE state IN ('completed', 'refused', 'failed');
    `,
  },
  {
    version: 5,
    sql: `
      -- Side-effect claims: one row per effect key (turn, tool, arguments). A released claim, or
      -- one reconciled 'no-effect', is deleted; 'pruned' is a completed effect's tombstone.
      CREATE TABLE effects (
        effect_key       TEXT PRIMARY KEY,
        turn_key         TEXT NOT NULL,
        scope_id         TEXT NOT NULL,
        tool_call_id     TEXT NOT NULL,
        tool_name        TEXT NOT NULL,
        args_digest      TEXT NOT NULL,
        tool_fingerprint TEXT NOT NULL,
        token            TEXT NOT NULL,
        state            TEXT NOT NULL CHECK (state IN ('pending', 'complete', 'unknown', 'pruned')),
        result_content   TEXT,
        result_status    TEXT,
        claimed_at       TEXT NOT NULL,
        claimed_at_ms    INTEGER NOT NULL,
        settled_at       TEXT,
        settled_at_ms    INTEGER
      );
      -- maxPerTurn: the turn's effect claims of one tool.
      CREATE INDEX effects_by_turn_tool ON effects (turn_key, tool_name);
      -- listUnresolvedEffects, oldest first.
      CREATE INDEX effects_unresolved_by_time ON effects (claimed_at_ms) WHERE state IN ('pending', 'unknown');
      -- prune.
      CREATE INDEX effects_complete_by_settled ON effects (settled_at_ms) WHERE state = 'complete';
    `,
  },
  {
    // The approval status 'orphaned'. SQLite cannot alter a CHECK constraint, so the table is
    // rebuilt by its documented procedure (sqlite.org/lang_altertable.html#otheralter), inside
    // migrate's transaction: no foreign key refers to approvals, and no trigger or view names it,
    // so steps 1, 9, 10 and 12 have nothing to do. rowid is copied: it is listApprovals' tie-break.
    version: 6,
    sql: `
      CREATE TABLE approvals_v6 (
        approval_id     TEXT PRIMARY KEY,
        turn_key        TEXT NOT NULL,
        status          TEXT NOT NULL
          CHECK (status IN ('pending', 'approved', 'rejected', 'edited', 'applied', 'expired', 'orphaned')),
        requested_at_ms INTEGER,
        record          TEXT NOT NULL
      );
      INSERT INTO approvals_v6 (rowid, approval_id, turn_key, status, requested_at_ms, record)
        SELECT rowid, approval_id, turn_key, status, requested_at_ms, record FROM approvals;
      DROP TABLE approvals;
      ALTER TABLE approvals_v6 RENAME TO approvals;
      CREATE INDEX approvals_by_time ON approvals (requested_at_ms);
      CREATE INDEX approvals_pending_by_time ON approvals (requested_at_ms) WHERE status = 'pending';
      CREATE INDEX approvals_by_turn ON approvals (turn_key);
      -- orphanApprovals: the decided requests not yet applied.
      CREATE INDEX approvals_decided ON approvals (status) WHERE status IN ('approved', 'edited');
    `,
  },
  {
    version: 7,
    sql: `
      -- The turn's request key (a copy of the record's requestKey): one turn per request, so the
      -- same idempotency key for another scope is refused. NULL for a turn stored before version 7
      -- (SQLite's UNIQUE lets NULLs repeat).
      ALTER TABLE turns ADD COLUMN request_key TEXT;
      CREATE UNIQUE INDEX turns_by_request ON turns (request_key);
      -- listTurns (the turn service's recovery): the live turns, by state and key; finished ones
      -- (nearly every row) are never walked.
      CREATE INDEX turns_live ON turns (state, turn_key) WHERE state IN ('running', 'awaiting_approval');
    `,
  },
];

/** Applies the migrations the file lacks, in one immediate transaction (one process at a time). */
export function migrate(db: Database.Database, path: string): void {
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
