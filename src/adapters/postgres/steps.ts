/**
 * A turn's atomic steps in the PostgreSQL store: recording a read, claiming the turn's mutation
 * slot, settling and releasing the claim; the SQLite store's steps.ts does the same steps, side by
 * side. Values are parsed by the caller (the store class); each function answers from one
 * statement or one transaction.
 *
 * - Claims: one statement upserts the scope's row in `scopes` (taking its row lock and reading its
 *   latest `unknown_count`) and inserts the claim `ON CONFLICT (turn_key) DO NOTHING`. Every change
 *   that makes a claim `unknown` or un-`unknown` takes the same scope row lock first, so the scope
 *   rule is decided under the lock against the latest committed state: linearizable, not a
 *   snapshot read that a concurrent `unknown` settlement could slip past.
 * - Settlement: a compare-and-set `UPDATE ... WHERE turn_key AND token AND state = 'pending'`;
 *   a release is the same compare-and-set as a `DELETE`, with its audit event.
 */
import { randomUUID } from "node:crypto";
import {
  type AuditEvent,
  type ClaimResult,
  type MutationIdentity,
  type MutationRelease,
  type MutationSettlement,
  type ReadEvidence,
} from "../../contracts/index.js";
import { releasedEvent } from "../../store/events.js";
import { parseClaimResult } from "../../store/validate.js";
import { appendEvent, eventValues, query, transaction, type Session } from "./connection.js";
import { claimedIdentityFromRow, classify, COUNT_ROW, encodeText, parseRow } from "./encoding.js";

/**
 * Records read evidence (an idempotent insert) and, when given, its audit event: one statement
 * either way, so the two commit together.
 */
export async function recordRead(session: Session, evidence: ReadEvidence, audit: AuditEvent | undefined): Promise<void> {
  const { pool, sql } = session;
  if (audit === undefined) {
    await query(pool, sql.recordRead, [evidence.turnKey, evidence.evidenceDigest]);
    return;
  }
  await query(pool, sql.recordReadAudited, [evidence.turnKey, evidence.evidenceDigest, session.auditLock, ...eventValues(audit)]);
}

/** The claim's columns, in the order of the claim statements' parameters. */
function claimValues(identity: MutationIdentity, token: string, claimedAt: string): unknown[] {
  return [
    identity.turnKey,
    encodeText(identity.scopeId),
    encodeText(identity.toolCallId),
    encodeText(identity.toolName),
    identity.argsDigest,
    identity.mutationKey,
    token,
    claimedAt,
    Date.parse(claimedAt),
    identity.toolFingerprint,
  ];
}

/**
 * Claims the turn's slot. Every answer comes from one statement (one snapshot) or one transaction:
 * with `readEvidence`, the evidence check is in the same statement or transaction as what the
 * claim then decides, and comes first (no evidence: `read_required`, nothing written).
 */
export async function claim(
  session: Session,
  identity: MutationIdentity,
  requireResolvedScope: boolean,
  readEvidence: readonly string[] | undefined,
): Promise<ClaimResult> {
  const { pool, sql } = session;
  // Fast path, one statement: the common case (a fresh turn) is acquired here.
  const token = randomUUID();
  const values = claimValues(identity, token, session.timestamp());
  if (readEvidence === undefined) {
    const inserted = await query(pool, requireResolvedScope ? sql.claimScoped : sql.claimUnscoped, values);
    if (inserted.rowCount === 1) return parseClaimResult({ status: "acquired", token });
    // Not inserted: the turn has a claim, or the scope is blocked. An existing claim answers.
    const existing = await query(pool, sql.readClaim, [identity.turnKey]);
    if (existing.rows[0] !== undefined) return classify(existing.rows[0], identity.mutationKey);
  } else {
    const evidence = [...readEvidence];
    const inserted = await query(pool, requireResolvedScope ? sql.claimScopedRead : sql.claimUnscopedRead, [...values, evidence]);
    const answer = inserted.rows[0];
    if (answer?.ok !== true) return parseClaimResult({ status: "read_required" });
    if (answer.token === token) return parseClaimResult({ status: "acquired", token });
    // Not inserted: the evidence and an existing claim, read together, answer.
    const existing = await query(pool, sql.readClaimWithEvidence, [identity.turnKey, evidence]);
    const row = existing.rows[0];
    if (row?.evidence_ok !== true) return parseClaimResult({ status: "read_required" });
    if (row.claimed !== null) return classify(row, identity.mutationKey);
  }
  // No claim now: decide under the scope's lock, against the latest committed state.
  return claimLocked(session, identity, requireResolvedScope, readEvidence);
}

async function claimLocked(
  session: Session,
  identity: MutationIdentity,
  requireResolvedScope: boolean,
  readEvidence: readonly string[] | undefined,
): Promise<ClaimResult> {
  const { sql } = session;
  const scopeId = encodeText(identity.scopeId);
  for (let attempt = 0; attempt < 16; attempt++) {
    const result = await transaction(session.pool, async (client): Promise<ClaimResult | undefined> => {
      if (readEvidence !== undefined) {
        const evidence = await query(client, sql.hasAnyRead, [identity.turnKey, [...readEvidence]]);
        if (evidence.rowCount !== 1) return { status: "read_required" };
      }
      const scope = await query(client, sql.lockScope, [scopeId]);
      const { unknown_count: unknownCount } = parseRow(COUNT_ROW, scope.rows[0], "scope row");
      const existing = await query(client, sql.readClaim, [identity.turnKey]);
      if (existing.rows[0] !== undefined) return classify(existing.rows[0], identity.mutationKey);
      if (requireResolvedScope && unknownCount > 0) return { status: "scope_unresolved" };
      const token = randomUUID();
      const inserted = await query(client, sql.claimUnscoped, claimValues(identity, token, session.timestamp()));
      // Not inserted: a claim of this turn under another scope id won the race. Look again.
      return inserted.rowCount === 1 ? { status: "acquired", token } : undefined;
    });
    if (result !== undefined) return parseClaimResult(result);
  }
  throw new Error("the claim did not settle on an answer after 16 attempts under concurrent changes");
}

export async function settle(session: Session, settlement: MutationSettlement): Promise<boolean> {
  const { pool, sql } = session;
  const token = encodeText(settlement.token);
  const settledAt = session.timestamp();
  if (settlement.outcome === "complete") {
    const values = [
      settlement.turnKey,
      token,
      encodeText(settlement.result.content),
      settlement.result.status,
      settledAt,
      Date.parse(settledAt),
    ];
    // One statement, with or without the event: it is appended exactly when the update applied.
    const { rowCount } =
      settlement.audit === undefined
        ? await query(pool, sql.settleComplete, values)
        : await query(pool, sql.settleCompleteAudited, [...values, session.auditLock, ...eventValues(settlement.audit)]);
    return rowCount === 1;
  }
  // `unknown` blocks the scope: change it under the scope's lock (scope row, then claim row).
  return transaction(pool, async (client) => {
    const pending = await query(client, sql.pendingScope, [settlement.turnKey, token]);
    const row = pending.rows[0];
    if (row === undefined) return false;
    // The claim is parsed before anything changes: a corrupt row fails closed, left pending.
    claimedIdentityFromRow(row);
    await query(client, sql.lockScope, [row.scope_id]);
    const { rowCount } = await query(client, sql.settleUnknown, [settlement.turnKey, token, settledAt, Date.parse(settledAt)]);
    if (rowCount !== 1) return false;
    if (settlement.audit !== undefined) await appendEvent(session, settlement.audit, client);
    return true;
  });
}

export async function release(session: Session, input: MutationRelease): Promise<boolean> {
  // A pending claim is not counted in its scope's unknown_count: no scope lock is needed. The
  // delete and its audit event commit together.
  return transaction(session.pool, async (client) => {
    const { rows } = await query(client, session.sql.releaseClaim, [input.turnKey, encodeText(input.token)]);
    const row = rows[0];
    if (row === undefined) return false;
    const identity = claimedIdentityFromRow(row);
    await appendEvent(session, releasedEvent(identity, session.timestamp()), client);
    return true;
  });
}
