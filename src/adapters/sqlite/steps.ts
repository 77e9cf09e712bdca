/**
 * A turn's atomic steps in the SQLite store: recording a read, claiming the turn's mutation slot,
 * settling and releasing the claim. Each is one `BEGIN IMMEDIATE` transaction (callers run them
 * with `.immediate()`), so two processes never interleave between a check and its write; the
 * PostgreSQL store's steps.ts does the same steps, side by side.
 */
import { randomUUID } from "node:crypto";
import type Database from "better-sqlite3";
import type {
  AuditEvent,
  ClaimResult,
  EffectClaimResult,
  EffectIdentity,
  EffectRelease,
  EffectSettlement,
  MutationIdentity,
  MutationRelease,
  MutationSettlement,
  ReadEvidence,
} from "../../contracts/index.js";
import { existingClaimAnswer, existingEffectAnswer } from "../../store/decisions.js";
import { effectReleasedEvent, releasedEvent } from "../../store/events.js";
import { claimFromRow, effectFromRow, encodeText, epochMs, sameText } from "./encoding.js";
import type { Statements } from "./statements.js";
import { appendEvent } from "./transactions.js";

export interface Steps {
  readonly recordRead: Database.Transaction<(evidence: ReadEvidence, audit: AuditEvent) => void>;
  readonly claim: Database.Transaction<
    (identity: MutationIdentity, requireResolvedScope: boolean, readEvidence: readonly string[] | undefined) => ClaimResult
  >;
  readonly settle: Database.Transaction<(settlement: MutationSettlement) => boolean>;
  readonly release: Database.Transaction<(release: MutationRelease) => boolean>;
  readonly claimEffect: Database.Transaction<(identity: EffectIdentity, maxPerTurn: number | undefined) => EffectClaimResult>;
  readonly settleEffect: Database.Transaction<(settlement: EffectSettlement) => boolean>;
  readonly releaseEffect: Database.Transaction<(release: EffectRelease) => boolean>;
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

  /** A side effect's claim: the existing row's answer, else the turn's count for the tool, then the insert, under one write lock. */
  const claimEffect = db.transaction((identity: EffectIdentity, maxPerTurn: number | undefined): EffectClaimResult => {
    const row = sql.getEffect.get(identity.effectKey);
    if (row !== undefined) return existingEffectAnswer(effectFromRow(row));
    const toolName = encodeText(identity.toolName);
    if (maxPerTurn !== undefined) {
      const count: unknown = sql.countEffects.get(identity.turnKey, toolName)?.n;
      if (typeof count !== "number" || count >= maxPerTurn) return { status: "limit_reached" };
    }
    const token = randomUUID();
    const claimedAt = timestamp();
    sql.insertEffect.run(
      identity.effectKey,
      identity.turnKey,
      encodeText(identity.scopeId),
      encodeText(identity.toolCallId),
      toolName,
      identity.argsDigest,
      identity.toolFingerprint,
      token,
      claimedAt,
      epochMs(claimedAt),
    );
    return { status: "acquired", token };
  });

  /** Compare-and-set from pending by token; the audit event only when it applies. */
  const settleEffect = db.transaction((settlement: EffectSettlement): boolean => {
    const token = encodeText(settlement.token);
    const row = sql.getEffect.get(settlement.effectKey);
    if (row === undefined) return false;
    const existing = effectFromRow(row);
    if (existing.state !== "pending" || !sameText(row.token, token)) return false;
    const settledAt = timestamp();
    const applied =
      settlement.outcome === "complete"
        ? sql.settleEffectComplete.run(
            encodeText(settlement.result.content),
            settlement.result.status,
            settledAt,
            epochMs(settledAt),
            settlement.effectKey,
            token,
          )
        : sql.settleEffectUnknown.run(settledAt, epochMs(settledAt), settlement.effectKey, token);
    if (applied.changes !== 1) return false;
    if (settlement.audit !== undefined) appendEvent(sql, settlement.audit);
    return true;
  });

  /** Deletes a pending effect claim by its token (freeing its place under maxPerTurn), with its `released` event. */
  const releaseEffect = db.transaction((input: EffectRelease): boolean => {
    const token = encodeText(input.token);
    const row = sql.getEffect.get(input.effectKey);
    if (row === undefined) return false;
    const existing = effectFromRow(row);
    if (existing.state !== "pending" || !sameText(row.token, token)) return false;
    if (sql.releaseEffect.run(input.effectKey, token).changes !== 1) return false;
    appendEvent(sql, effectReleasedEvent(existing.identity, timestamp()));
    return true;
  });

  return { recordRead, claim, settle, release, claimEffect, settleEffect, releaseEffect };
}
