/**
 * A turn's atomic steps in the SQLite store: recording a read, claiming the turn's mutation slot,
 * settling and releasing the claim. Each is one `BEGIN IMMEDIATE` transaction (callers run them
 * with `.immediate()`), so two processes never interleave between a check and its write; the
 * PostgreSQL store's steps.ts does the same steps, side by side.
 */
import { randomUUID } from "node:crypto";
import type Database from "better-sqlite3";
import type { AuditEvent, ClaimResult, MutationIdentity, MutationRelease, MutationSettlement, ReadEvidence } from "../../contracts.js";
import { existingClaimAnswer } from "../../store/decisions.js";
import { releasedEvent } from "../events.js";
import { claimFromRow, encodeText, epochMs, sameText } from "./encoding.js";
import type { Statements } from "./statements.js";
import { appendEvent } from "./transactions.js";

export interface Steps {
  readonly recordRead: Database.Transaction<(evidence: ReadEvidence, audit: AuditEvent) => void>;
  readonly claim: Database.Transaction<
    (identity: MutationIdentity, requireResolvedScope: boolean, readEvidence: readonly string[] | undefined) => ClaimResult
  >;
  readonly settle: Database.Transaction<(settlement: MutationSettlement) => boolean>;
  readonly release: Database.Transaction<(release: MutationRelease) => boolean>;
}

export function prepareSteps(db: Database.Database, sql: Statements, timestamp: () => string): Steps {
  /**
   * The evidence (idempotent) and its audit event, together. Without an event, a read is the one
   * `INSERT OR IGNORE` (sql.insertRead), atomic on its own.
   */
  const recordRead = db.transaction((evidence: ReadEvidence, audit: AuditEvent): void => {
    sql.insertRead.run(evidence.turnKey, evidence.evidenceDigest);
    appendEvent(sql, audit);
  });

  const claim = db.transaction(
    (identity: MutationIdentity, requireResolvedScope: boolean, readEvidence: readonly string[] | undefined): ClaimResult => {
      // The evidence first, under the same write lock as everything the claim decides next.
      if (readEvidence !== undefined && sql.hasAnyRead.get(identity.turnKey, JSON.stringify(readEvidence)) === undefined) {
        return { status: "read_required" };
      }
      const row = sql.getClaim.get(identity.turnKey);
      if (row !== undefined) return existingClaimAnswer(claimFromRow(row), identity.mutationKey);
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
    },
  );

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
    if (applied.changes !== 1) return false;
    // Only a settlement that applied is audited, in its transaction.
    if (settlement.audit !== undefined) appendEvent(sql, settlement.audit);
    return true;
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

  return { recordRead, claim, settle, release };
}
