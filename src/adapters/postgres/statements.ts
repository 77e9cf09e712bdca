/** Every SQL statement of the PostgreSQL store, with the schema quoted in and a prepared-statement name unique to it. */
import { createHash } from "node:crypto";

export interface Statement {
  readonly name: string;
  readonly text: string;
}

export type Statements = ReturnType<typeof statements>;

export function quoteIdentifier(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}

/**
 * A one-row source that turns off `synchronous_commit` for the statement's own (implicit)
 * transaction: its commit returns without waiting for the WAL flush. Only for records whose loss in
 * a server crash makes a retry redo work or refuse (an allowed receipt, read evidence and its audit
 * event): the claim's synchronous commit flushes the WAL up to itself, so they are on disk before
 * any write can depend on them (docs/architecture.md, "Which record waits for its flush").
 * `set_config(..., true)` rather than `SET LOCAL`: it needs no explicit transaction (no extra round
 * trips), and the value it sets is the one the commit reads.
 */
const UNFLUSHED = "(SELECT set_config('synchronous_commit', 'off', true)) AS unflushed";

/**
 * A column for `readAudit`'s statements: whether every commit the statement can see is flushed to
 * the WAL. Evaluated once (an uncorrelated subquery: an InitPlan) while the statement runs, so after
 * its snapshot was taken: every commit the snapshot sees inserted its commit record before that,
 * so an insert position read now is past all of them, and a flush position at or past it means
 * they are on disk. The read and the check are then one round trip (docs/architecture.md, "Which
 * record waits for its flush"). On a standby (recovery), what it replays was flushed on the
 * primary first; CASE, so the WAL functions are not called during recovery.
 */
const WAL_FLUSHED = `(SELECT CASE WHEN pg_is_in_recovery() THEN true
  ELSE pg_current_wal_flush_lsn() >= pg_current_wal_insert_lsn() END) AS flushed`;

/** Every statement, with the schema quoted in, and a prepared-statement name unique to the schema. */
export function statements(schema: string) {
  const s = quoteIdentifier(schema);
  const tag = createHash("sha256").update(schema).digest("hex").slice(0, 12);
  const statement = (name: string, text: string): Statement => ({ name: `arkah_${tag}_${name}`, text });
  // prune leaves a live turn whole: one running or paused on approval, or with a pending request
  // (a person can still decide it). Each by its table's index.
  const notLive = (column: string) =>
    `NOT EXISTS (SELECT 1 FROM ${s}.turns AS live_turn WHERE live_turn.turn_key = ${column}
       AND live_turn.state IN ('running', 'awaiting_approval'))
     AND NOT EXISTS (SELECT 1 FROM ${s}.approvals AS live_request WHERE live_request.turn_key = ${column}
       AND live_request.status = 'pending')`;
  const claimColumns =
    "turn_key, scope_id, tool_call_id, tool_name, args_digest, mutation_key, token, state, claimed_at, claimed_ms, tool_fingerprint";
  const claimValues = "$1, $2, $3, $4, $5, $6, $7, 'pending', $8, $9::bigint, $10";
  const receiptColumns = "turn_key, scope_id, turn_id, policy_version, moderation_digest, allowed, decided_at, principal";
  const approvalColumns = "approval_id, turn_key, status, record";
  const effectColumns =
    "effect_key, turn_key, scope_id, tool_call_id, tool_name, args_digest, tool_fingerprint, token, state, result_content, result_status, claimed_at";
  return {
    getReceipt: statement("get_receipt", `SELECT ${receiptColumns} FROM ${s}.receipts WHERE turn_key = $1`),
    putReceipt: statement(
      "put_receipt",
      `INSERT INTO ${s}.receipts (${receiptColumns}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
       ON CONFLICT (turn_key) DO NOTHING RETURNING ${receiptColumns}`,
    ),
    // An allowed receipt, committed without waiting for its WAL flush (see UNFLUSHED).
    putReceiptUnflushed: statement(
      "put_receipt_unflushed",
      `INSERT INTO ${s}.receipts (${receiptColumns}) SELECT $1, $2, $3, $4, $5, $6::boolean, $7, $8 FROM ${UNFLUSHED}
       ON CONFLICT (turn_key) DO NOTHING RETURNING ${receiptColumns}`,
    ),
    recordRead: statement(
      "record_read",
      `INSERT INTO ${s}.read_evidence (turn_key, evidence_digest) SELECT $1, $2 FROM ${UNFLUSHED} ON CONFLICT DO NOTHING`,
    ),
    hasRead: statement("has_read", `SELECT 1 FROM ${s}.read_evidence WHERE turn_key = $1 AND evidence_digest = $2`),
    // The evidence and its audit event in one statement (one transaction): the event is appended
    // under the audit lock (as appendAudit, below) whether or not the evidence was new.
    recordReadAudited: statement(
      "record_read_audited",
      `WITH recorded AS (
         INSERT INTO ${s}.read_evidence (turn_key, evidence_digest) SELECT $1, $2 FROM ${UNFLUSHED} ON CONFLICT DO NOTHING
       ),
       locked AS MATERIALIZED (SELECT pg_advisory_xact_lock($3::bigint))
       INSERT INTO ${s}.audit (seq, at, at_ms, decision, turn_key, scope_id, approval_id, event)
       SELECT nextval('${s}.audit_seq'), $4, $5::bigint, $6, $7, $8, $9, $10 FROM locked`,
    ),
    // Is any of the digests in $2 (validated hex, at most 256) recorded for turn $1?
    hasAnyRead: statement(
      "has_any_read",
      `SELECT 1 FROM ${s}.read_evidence WHERE turn_key = $1 AND evidence_digest = ANY($2::text[]) LIMIT 1`,
    ),
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
    // The same two claims, after the evidence check ($11: the digests), all in one statement: no
    // evidence, nothing written (not even the scope row). Always one row: ok, and the token if the
    // claim was inserted.
    claimScopedRead: statement(
      "claim_scoped_read",
      `WITH evidence AS (
         SELECT EXISTS (SELECT 1 FROM ${s}.read_evidence WHERE turn_key = $1 AND evidence_digest = ANY($11::text[])) AS ok
       ),
       scope AS (
         INSERT INTO ${s}.scopes AS sc (scope_id) SELECT $2::text FROM evidence WHERE evidence.ok
         ON CONFLICT (scope_id) DO UPDATE SET unknown_count = sc.unknown_count
         RETURNING sc.unknown_count
       ),
       inserted AS (
         INSERT INTO ${s}.claims (${claimColumns})
         SELECT ${claimValues} FROM scope WHERE scope.unknown_count = 0
         ON CONFLICT (turn_key) DO NOTHING
         RETURNING token
       )
       SELECT evidence.ok, (SELECT token FROM inserted) AS token FROM evidence`,
    ),
    claimUnscopedRead: statement(
      "claim_unscoped_read",
      `WITH evidence AS (
         SELECT EXISTS (SELECT 1 FROM ${s}.read_evidence WHERE turn_key = $1 AND evidence_digest = ANY($11::text[])) AS ok
       ),
       inserted AS (
         INSERT INTO ${s}.claims (${claimColumns})
         SELECT ${claimValues} FROM evidence WHERE evidence.ok
         ON CONFLICT (turn_key) DO NOTHING
         RETURNING token
       )
       SELECT evidence.ok, (SELECT token FROM inserted) AS token FROM evidence`,
    ),
    readClaim: statement(
      "read_claim",
      `SELECT turn_key, scope_id, tool_call_id, tool_name, args_digest, mutation_key, tool_fingerprint, state, result_content, result_status
       FROM ${s}.claims WHERE turn_key = $1`,
    ),
    // The evidence check and the turn's claim in one snapshot ($2: the digests); one row always,
    // with NULL claim columns when there is no claim.
    readClaimWithEvidence: statement(
      "read_claim_with_evidence",
      `SELECT EXISTS (SELECT 1 FROM ${s}.read_evidence WHERE turn_key = $1 AND evidence_digest = ANY($2::text[])) AS evidence_ok,
              c.turn_key AS claimed, c.turn_key, c.scope_id, c.tool_call_id, c.tool_name, c.args_digest, c.mutation_key,
              c.tool_fingerprint, c.state, c.result_content, c.result_status
       FROM (SELECT 1) AS one LEFT JOIN ${s}.claims AS c ON c.turn_key = $1`,
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
    // The settlement and its audit event in one statement: the event ($7 the audit lock, then its
    // columns) is appended under the audit lock exactly when the compare-and-set applied. One row
    // inserted: it applied.
    settleCompleteAudited: statement(
      "settle_complete_audited",
      `WITH settled AS (
         UPDATE ${s}.claims SET state = 'complete', result_content = $3, result_status = $4, settled_at = $5, settled_ms = $6::bigint
         WHERE turn_key = $1 AND token = $2 AND state = 'pending'
         RETURNING turn_key
       ),
       locked AS MATERIALIZED (SELECT pg_advisory_xact_lock($7::bigint) FROM settled)
       INSERT INTO ${s}.audit (seq, at, at_ms, decision, turn_key, scope_id, approval_id, event)
       SELECT nextval('${s}.audit_seq'), $8, $9::bigint, $10, $11, $12, $13, $14 FROM locked`,
    ),
    pendingScope: statement(
      "pending_scope",
      `SELECT turn_key, scope_id, tool_call_id, tool_name, args_digest, mutation_key, tool_fingerprint
       FROM ${s}.claims WHERE turn_key = $1 AND token = $2 AND state = 'pending'`,
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
    getTurn: statement("get_turn", `SELECT record FROM ${s}.turns WHERE turn_key = $1`),
    lockTurn: statement("lock_turn", `SELECT record FROM ${s}.turns WHERE turn_key = $1 FOR UPDATE`),
    turnOfRequest: statement("turn_of_request", `SELECT turn_key FROM ${s}.turns WHERE request_key = $1`),
    insertTurn: statement(
      "insert_turn",
      // No conflict target: a turn key or a request key already held inserts nothing (request_key is never updated).
      `INSERT INTO ${s}.turns (turn_key, state, updated_ms, record, request_key) VALUES ($1, $2, $3::bigint, $4, $5) ON CONFLICT DO NOTHING`,
    ),
    updateTurn: statement("update_turn", `UPDATE ${s}.turns SET state = $2, updated_ms = $3::bigint, record = $4 WHERE turn_key = $1`),
    // The same write as a compare-and-set on the record as read ($5, its stored text): applied only
    // if nothing changed the turn since.
    swapTurn: statement(
      "swap_turn",
      `UPDATE ${s}.turns SET state = $2, updated_ms = $3::bigint, record = $4 WHERE turn_key = $1 AND record = $5`,
    ),
    // $1: the state, $2: the key after which to list ('' from the first), $3: the page. By turns_live.
    listTurns: statement(
      "list_turns",
      `SELECT turn_key, record FROM ${s}.turns
       WHERE state = $1 AND state IN ('running', 'awaiting_approval') AND turn_key > $2 ORDER BY turn_key LIMIT $3::integer`,
    ),
    // Paused turns with no pending request (approvals_turn): $1 the key after which, $2 the page.
    listDecidedTurns: statement(
      "list_decided_turns",
      `SELECT turn_key, record FROM ${s}.turns AS t
       WHERE t.state = 'awaiting_approval' AND t.turn_key > $1
         AND NOT EXISTS (SELECT 1 FROM ${s}.approvals AS a WHERE a.turn_key = t.turn_key AND a.status = 'pending')
       ORDER BY t.turn_key LIMIT $2::integer`,
    ),
    // What prune_turns removes, in key order: $1 the cut-off (epoch ms), $2 the key after which, $3 the page.
    listFinishedTurns: statement(
      "list_finished_turns",
      `SELECT turn_key, record FROM ${s}.turns
       WHERE state IN ('completed', 'refused', 'failed') AND updated_ms < $1::bigint AND turn_key > $2
       ORDER BY turn_key LIMIT $3::integer`,
    ),
    pruneTurns: statement(
      "prune_turns",
      `DELETE FROM ${s}.turns WHERE state IN ('completed', 'refused', 'failed') AND updated_ms < $1::bigint`,
    ),
    getMutation: statement(
      "get_mutation",
      `SELECT turn_key, scope_id, tool_call_id, tool_name, args_digest, mutation_key, tool_fingerprint, state, result_content, result_status
       FROM ${s}.claims WHERE turn_key = $1`,
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
    lockDecided: statement(
      "lock_decided",
      `SELECT ${approvalColumns} FROM ${s}.approvals
       WHERE status IN ('approved', 'edited')
       ORDER BY requested_ms, approval_order FOR UPDATE`,
    ),
    // The lock is taken in a MATERIALIZED CTE the INSERT reads from, so nextval() runs after it.
    appendAudit: statement(
      "append_audit",
      `WITH locked AS MATERIALIZED (SELECT pg_advisory_xact_lock($1::bigint))
       INSERT INTO ${s}.audit (seq, at, at_ms, decision, turn_key, scope_id, approval_id, event)
       SELECT nextval('${s}.audit_seq'), $2, $3::bigint, $4, $5, $6, $7, $8 FROM locked`,
    ),
    // A transactional WAL message (any role may emit one; logical decoding plugins that ask for
    // messages see it, others skip it): the statement's transaction then wrote WAL, so its commit
    // waits for the flush (the session's synchronous_commit), which carries every earlier commit.
    // An id alone would not do: a transaction that wrote no WAL commits without flushing.
    flushWal: statement("flush_wal", "SELECT pg_logical_emit_message(true, 'arkah-agent-guardrails', 'flush')"),
    readAudit: statement(
      "read_audit",
      `SELECT seq, event, ${WAL_FLUSHED} FROM ${s}.audit
       WHERE seq > $1::bigint AND ($2::bigint IS NULL OR at_ms IS NULL OR at_ms >= $2::bigint)
       ORDER BY seq LIMIT $3::integer`,
    ),
    readAuditByTurn: statement(
      "read_audit_by_turn",
      `SELECT seq, event, ${WAL_FLUSHED} FROM ${s}.audit
       WHERE turn_key = $4 AND seq > $1::bigint AND ($2::bigint IS NULL OR at_ms IS NULL OR at_ms >= $2::bigint)
         AND ($5::text IS NULL OR scope_id = $5::text)
       ORDER BY seq LIMIT $3::integer`,
    ),
    readAuditByApproval: statement(
      "read_audit_by_approval",
      `SELECT seq, event, ${WAL_FLUSHED} FROM ${s}.audit
       WHERE approval_id = $4 AND seq > $1::bigint AND ($2::bigint IS NULL OR at_ms IS NULL OR at_ms >= $2::bigint)
         AND ($5::text IS NULL OR turn_key = $5::text) AND ($6::text IS NULL OR scope_id = $6::text)
       ORDER BY seq LIMIT $3::integer`,
    ),
    readAuditByScope: statement(
      "read_audit_by_scope",
      `SELECT seq, event, ${WAL_FLUSHED} FROM ${s}.audit
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
         WHERE state = 'complete' AND settled_ms < $1::bigint AND ${notLive("claims.turn_key")}
         RETURNING turn_key
       ),
       reads AS (DELETE FROM ${s}.read_evidence WHERE turn_key IN (SELECT turn_key FROM pruned)),
       verdicts AS (DELETE FROM ${s}.verdicts WHERE turn_key IN (SELECT turn_key FROM pruned)),
       approvals AS (DELETE FROM ${s}.approvals WHERE turn_key IN (SELECT turn_key FROM pruned))
       SELECT count(*) AS turns FROM pruned`,
    ),
    getEffect: statement("get_effect", `SELECT ${effectColumns} FROM ${s}.effects WHERE effect_key = $1`),
    lockEffect: statement("lock_effect", `SELECT ${effectColumns} FROM ${s}.effects WHERE effect_key = $1 FOR UPDATE`),
    // Released and no-effect claims are deleted: every row counts toward maxPerTurn.
    countEffects: statement("count_effects", `SELECT count(*)::integer AS n FROM ${s}.effects WHERE turn_key = $1 AND tool_name = $2`),
    insertEffect: statement(
      "insert_effect",
      `INSERT INTO ${s}.effects (effect_key, turn_key, scope_id, tool_call_id, tool_name, args_digest, tool_fingerprint, token, state,
         claimed_at, claimed_ms)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'pending', $9, $10::bigint)
       ON CONFLICT (effect_key) DO NOTHING RETURNING token`,
    ),
    // Compare-and-set from pending by token ($3 the new state; $4, $5 the result or NULLs).
    settleEffect: statement(
      "settle_effect",
      `UPDATE ${s}.effects SET state = $3, result_content = $4, result_status = $5, settled_at = $6, settled_ms = $7::bigint
       WHERE effect_key = $1 AND token = $2 AND state = 'pending'`,
    ),
    // The same, and its audit event ($8 the audit lock, then its columns) exactly when it applied.
    settleEffectAudited: statement(
      "settle_effect_audited",
      `WITH settled AS (
         UPDATE ${s}.effects SET state = $3, result_content = $4, result_status = $5, settled_at = $6, settled_ms = $7::bigint
         WHERE effect_key = $1 AND token = $2 AND state = 'pending'
         RETURNING effect_key
       ),
       locked AS MATERIALIZED (SELECT pg_advisory_xact_lock($8::bigint) FROM settled)
       INSERT INTO ${s}.audit (seq, at, at_ms, decision, turn_key, scope_id, approval_id, event)
       SELECT nextval('${s}.audit_seq'), $9, $10::bigint, $11, $12, $13, $14, $15 FROM locked`,
    ),
    releaseEffect: statement(
      "release_effect",
      `DELETE FROM ${s}.effects WHERE effect_key = $1 AND token = $2 AND state = 'pending' RETURNING ${effectColumns}`,
    ),
    reconcileEffectComplete: statement(
      "reconcile_effect_complete",
      `UPDATE ${s}.effects SET state = 'complete', result_content = $2, result_status = $3, settled_at = $4, settled_ms = $5::bigint
       WHERE effect_key = $1`,
    ),
    deleteEffect: statement("delete_effect", `DELETE FROM ${s}.effects WHERE effect_key = $1`),
    listUnresolvedEffects: statement(
      "list_unresolved_effects",
      `SELECT ${effectColumns} FROM ${s}.effects WHERE state IN ('pending', 'unknown') ORDER BY claimed_ms, effect_order`,
    ),
    pruneEffects: statement(
      "prune_effects",
      `WITH pruned AS (
         UPDATE ${s}.effects SET state = 'pruned', result_content = NULL, result_status = NULL
         WHERE state = 'complete' AND settled_ms < $1::bigint AND ${notLive("effects.turn_key")}
         RETURNING effect_key
       )
       SELECT count(*)::integer AS effects FROM pruned`,
    ),
  };
}
