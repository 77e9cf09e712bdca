/** Every SQL statement of the SQLite store, prepared once per connection. */
import type Database from "better-sqlite3";
import type { Row } from "./encoding.js";

export type Statement = Database.Statement<unknown[], Row>;

/** readAudit's `since`: events at or after it (an event time that did not parse is kept, as in memory). */
const AUDIT_SINCE = "(@since IS NULL OR at_ms IS NULL OR at_ms >= @since)";

const CLAIM_COLUMNS =
  "turn_key, scope_id, tool_call_id, tool_name, args_digest, mutation_key, tool_fingerprint, token, state, " +
  "result_content, result_status, claimed_at";

/**
 * Whether the turn named by `column` may be pruned: no turn record running or paused on approval,
 * and no pending approval request (a person can still decide it). Each by its table's index.
 */
const NOT_LIVE = (column: string) =>
  `NOT EXISTS (SELECT 1 FROM turns AS live_turn WHERE live_turn.turn_key = ${column} ` +
  "AND live_turn.state IN ('running', 'awaiting_approval')) " +
  `AND NOT EXISTS (SELECT 1 FROM approvals AS live_request WHERE live_request.turn_key = ${column} ` +
  "AND live_request.status = 'pending')";

/** The completed claims prune tombstones: settled before the cutoff, of turns that are not live. */
const PRUNABLE_CLAIM = `state = 'complete' AND settled_at_ms < ? AND ${NOT_LIVE("claims.turn_key")}`;

/** Deletes the rows of the turns whose claims prune tombstones. */
const pruneTurns = (table: "read_evidence" | "verdicts" | "approvals") =>
  `DELETE FROM ${table} WHERE turn_key IN (SELECT turn_key FROM claims WHERE ${PRUNABLE_CLAIM})`;

const EFFECT_COLUMNS =
  "effect_key, turn_key, scope_id, tool_call_id, tool_name, args_digest, tool_fingerprint, token, state, " +
  "result_content, result_status, claimed_at";

const APPROVAL_COLUMNS = "approval_id, turn_key, status, record";

/** Every statement's SQL, by name. */
const SQL = {
  getReceipt:
    "SELECT turn_key, scope_id, turn_id, policy_version, moderation_digest, allowed, decided_at, principal " +
      "FROM receipts WHERE turn_key = ?",
  insertReceipt:
    "INSERT OR IGNORE INTO receipts (turn_key, scope_id, turn_id, policy_version, moderation_digest, allowed, decided_at, principal) " +
      "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
  insertRead: "INSERT OR IGNORE INTO read_evidence (turn_key, evidence_digest) VALUES (?, ?)",
  hasRead: "SELECT 1 FROM read_evidence WHERE turn_key = ? AND evidence_digest = ?",
  // Any of a JSON array of digests (validated hex, at most 256), by the primary key.
  hasAnyRead:
    "SELECT 1 FROM read_evidence WHERE turn_key = ? AND evidence_digest IN (SELECT value FROM json_each(?)) LIMIT 1",
  getClaim: `SELECT ${CLAIM_COLUMNS} FROM claims WHERE turn_key = ?`,
  getClaimToken: "SELECT token, state FROM claims WHERE turn_key = ?",
  scopeHasUnknown: "SELECT 1 FROM claims WHERE scope_id = ? AND state = 'unknown' LIMIT 1",
  insertClaim:
    "INSERT INTO claims (turn_key, scope_id, tool_call_id, tool_name, args_digest, mutation_key, tool_fingerprint, token, state, " +
      "claimed_at, claimed_at_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?)",
  settleComplete:
    "UPDATE claims SET state = 'complete', result_content = ?, result_status = ?, settled_at = ?, settled_at_ms = ? " +
      "WHERE turn_key = ? AND token = ? AND state = 'pending'",
  settleUnknown:
    "UPDATE claims SET state = 'unknown', settled_at = ?, settled_at_ms = ? WHERE turn_key = ? AND token = ? AND state = 'pending'",
  reconcileComplete:
    "UPDATE claims SET state = 'complete', result_content = ?, result_status = ?, settled_at = ?, settled_at_ms = ? " +
      "WHERE turn_key = ? AND state IN ('pending', 'unknown')",
  deleteClaim: "DELETE FROM claims WHERE turn_key = ? AND state IN ('pending', 'unknown')",
  releaseClaim: "DELETE FROM claims WHERE turn_key = ? AND token = ? AND state = 'pending'",
  listUnresolved:
    `SELECT ${CLAIM_COLUMNS} FROM claims WHERE state IN ('pending', 'unknown') ORDER BY claimed_at_ms, rowid`,
  insertVerdict:
    "INSERT OR IGNORE INTO verdicts (turn_key, tool_call_id, tool_name, tool_fingerprint, guardrail, args_digest, record) " +
      "VALUES (?, ?, ?, ?, ?, ?, ?)",
  getVerdict:
    "SELECT record FROM verdicts WHERE turn_key = ? AND tool_call_id = ? AND tool_name = ? AND tool_fingerprint = ? " +
      "AND guardrail = ? AND args_digest = ?",
  insertApproval:
    "INSERT OR IGNORE INTO approvals (approval_id, turn_key, status, requested_at_ms, record) VALUES (?, ?, 'pending', ?, ?)",
  getApproval: `SELECT ${APPROVAL_COLUMNS} FROM approvals WHERE approval_id = ?`,
  updateApproval: "UPDATE approvals SET status = ?, record = ? WHERE approval_id = ?",
  listApprovals:
    `SELECT ${APPROVAL_COLUMNS} FROM approvals WHERE (? IS NULL OR status = ?) AND (? IS NULL OR turn_key = ?) ` +
      "ORDER BY requested_at_ms, rowid LIMIT ?",
  pendingApprovalsBefore:
    `SELECT ${APPROVAL_COLUMNS} FROM approvals WHERE status = 'pending' AND requested_at_ms < ? ORDER BY requested_at_ms, rowid`,
  decidedApprovals: `SELECT ${APPROVAL_COLUMNS} FROM approvals WHERE status IN ('approved', 'edited') ORDER BY requested_at_ms, rowid`,
  appendAudit:
    "INSERT INTO audit_events (at_ms, turn_key, scope_id, decision, approval_id, event) VALUES (?, ?, ?, ?, ?, ?)",
  // Named parameters: @afterSeq, @since (NULL: no bound), @turnKey, @scopeId, @approvalId, @limit. One
  // statement per index it walks: the trail in seq order, or one request's, one turn's or one scope's events.
  readAudit: `SELECT seq, event FROM audit_events WHERE seq > @afterSeq AND ${AUDIT_SINCE} ORDER BY seq LIMIT @limit`,
  readAuditByTurn:
    `SELECT seq, event FROM audit_events WHERE turn_key = @turnKey AND seq > @afterSeq AND ${AUDIT_SINCE} ` +
      "AND (@scopeId IS NULL OR scope_id = @scopeId) ORDER BY seq LIMIT @limit",
  readAuditByApproval:
    `SELECT seq, event FROM audit_events WHERE approval_id = @approvalId AND seq > @afterSeq AND ${AUDIT_SINCE} ` +
      "AND (@turnKey IS NULL OR turn_key = @turnKey) AND (@scopeId IS NULL OR scope_id = @scopeId) ORDER BY seq LIMIT @limit",
  readAuditByScope:
    `SELECT seq, event FROM audit_events WHERE scope_id = @scopeId AND seq > @afterSeq AND ${AUDIT_SINCE} ORDER BY seq LIMIT @limit`,
  getAuditCursor: "SELECT seq FROM audit_cursors WHERE sink = ?",
  // Forward only, in one statement: the update applies only to a lower cursor.
  advanceAuditCursor:
    "INSERT INTO audit_cursors (sink, seq) VALUES (?, ?) ON CONFLICT (sink) DO UPDATE SET seq = excluded.seq WHERE seq < excluded.seq",
  pruneReads: pruneTurns("read_evidence"),
  pruneVerdicts: pruneTurns("verdicts"),
  pruneApprovals: pruneTurns("approvals"),
  getTurn: "SELECT record FROM turns WHERE turn_key = ?",
  turnOfRequest: "SELECT turn_key FROM turns WHERE request_key = ?",
  // request_key is written once, with the new turn: a later write keeps it.
  putTurn:
    "INSERT INTO turns (turn_key, state, updated_at_ms, record, request_key) VALUES (?, ?, ?, ?, ?) " +
      "ON CONFLICT (turn_key) DO UPDATE SET state = excluded.state, updated_at_ms = excluded.updated_at_ms, record = excluded.record",
  pruneTurns: "DELETE FROM turns WHERE state IN ('completed', 'refused', 'failed') AND updated_at_ms < ?",
  // Named parameters: @state, @after ('' : from the first key), @limit. By the turns_live index.
  listTurns:
    "SELECT turn_key, record FROM turns WHERE state = @state AND state IN ('running', 'awaiting_approval') AND turn_key > @after " +
      "ORDER BY turn_key LIMIT @limit",
  // The same, only paused turns with no pending request (approvals_by_turn).
  listDecidedTurns:
    "SELECT turn_key, record FROM turns WHERE state = 'awaiting_approval' AND turn_key > @after " +
      "AND NOT EXISTS (SELECT 1 FROM approvals WHERE approvals.turn_key = turns.turn_key AND approvals.status = 'pending') " +
      "ORDER BY turn_key LIMIT @limit",
  // What prune's pruneTurns removes, in key order: @cutoff (epoch ms), @after, @limit. By the primary key, or turns_finished_by_updated.
  listFinishedTurns:
    "SELECT turn_key, record FROM turns WHERE state IN ('completed', 'refused', 'failed') AND updated_at_ms < @cutoff AND turn_key > @after " +
      "ORDER BY turn_key LIMIT @limit",
  pruneClaims:
    `UPDATE claims SET state = 'pruned', result_content = NULL, result_status = NULL WHERE ${PRUNABLE_CLAIM}`,
  getEffect: `SELECT ${EFFECT_COLUMNS} FROM effects WHERE effect_key = ?`,
  // Released and no-effect claims are deleted: every row counts toward maxPerTurn.
  countEffects: "SELECT count(*) AS n FROM effects WHERE turn_key = ? AND tool_name = ?",
  insertEffect:
    "INSERT INTO effects (effect_key, turn_key, scope_id, tool_call_id, tool_name, args_digest, tool_fingerprint, token, state, " +
      "claimed_at, claimed_at_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?)",
  settleEffectComplete:
    "UPDATE effects SET state = 'complete', result_content = ?, result_status = ?, settled_at = ?, settled_at_ms = ? " +
      "WHERE effect_key = ? AND token = ? AND state = 'pending'",
  settleEffectUnknown:
    "UPDATE effects SET state = 'unknown', settled_at = ?, settled_at_ms = ? WHERE effect_key = ? AND token = ? AND state = 'pending'",
  releaseEffect: "DELETE FROM effects WHERE effect_key = ? AND token = ? AND state = 'pending'",
  reconcileEffectComplete:
    "UPDATE effects SET state = 'complete', result_content = ?, result_status = ?, settled_at = ?, settled_at_ms = ? " +
      "WHERE effect_key = ? AND state IN ('pending', 'unknown')",
  deleteEffect: "DELETE FROM effects WHERE effect_key = ? AND state IN ('pending', 'unknown')",
  listUnresolvedEffects:
    `SELECT ${EFFECT_COLUMNS} FROM effects WHERE state IN ('pending', 'unknown') ORDER BY claimed_at_ms, rowid`,
  pruneEffects:
    "UPDATE effects SET state = 'pruned', result_content = NULL, result_status = NULL " +
      `WHERE state = 'complete' AND settled_at_ms < ? AND ${NOT_LIVE("effects.turn_key")}`,
} as const;

export type Statements = { readonly [K in keyof typeof SQL]: Statement };

/** Every statement, prepared once per connection. */
export function prepareStatements(db: Database.Database): Statements {
  return Object.fromEntries(Object.entries(SQL).map(([name, source]) => [name, db.prepare<unknown[], Row>(source)])) as Statements;
}
