/**
 * The SQLite store's read-then-write operations other than a turn's own steps (steps.ts): receipts,
 * verdicts, approval requests, reconciliation and retention. Each is one transaction; callers run
 * them with `.immediate()` (`BEGIN IMMEDIATE`: the write lock is taken before the first read).
 */
import type Database from "better-sqlite3";
import type {
  AdmissionReceipt,
  ApplyApprovalInput,
  ApprovalDecisionResult,
  ApprovalRecord,
  ApprovalSubmission,
  AuditEvent,
  DecideApprovalInput,
  EffectReconciliation,
  ExpireApprovalsResult,
  OrphanApprovalsResult,
  PruneResult,
  Reconciliation,
  ReconcileResult,
  VerdictRecord,
} from "../../contracts/index.js";
import {
  appliedApprovalRecord,
  approvalEvent,
  approvalDecisionOutcome,
  effectReconciledEvent,
  expiredApprovalRecord,
  orphanedApprovalRecord,
  reconciledEvent,
} from "../../store/events.js";
import { reconcileAnswer } from "../../store/decisions.js";
import { approvalFromRow, claimFromRow, effectFromRow, encodeText, epochMs, keyParams, receiptFromRow, verdictFromRow } from "./encoding.js";
import { corrupt } from "./errors.js";
import type { Statements } from "./statements.js";

export interface Transactions {
  readonly putReceipt: Database.Transaction<(receipt: AdmissionReceipt) => AdmissionReceipt>;
  readonly putVerdict: Database.Transaction<(record: VerdictRecord) => VerdictRecord>;
  readonly requestApproval: Database.Transaction<(request: ApprovalSubmission) => ApprovalRecord>;
  readonly decideApproval: Database.Transaction<(input: DecideApprovalInput) => ApprovalDecisionResult>;
  readonly applyApproval: Database.Transaction<(input: ApplyApprovalInput) => boolean>;
  readonly expireApprovals: Database.Transaction<(cutoff: number) => ExpireApprovalsResult>;
  readonly orphanApprovals: Database.Transaction<(cutoff: number) => OrphanApprovalsResult>;
  readonly reconcile: Database.Transaction<(reconciliation: Reconciliation) => ReconcileResult>;
  readonly prune: Database.Transaction<(cutoff: number) => PruneResult>;
  readonly reconcileEffect: Database.Transaction<(reconciliation: EffectReconciliation) => ReconcileResult>;
}

export function prepareTransactions(db: Database.Database, sql: Statements, timestamp: () => string): Transactions {
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
    const { result, changed, event } = approvalDecisionOutcome(row === undefined ? undefined : approvalFromRow(row), input, timestamp());
    if (changed !== undefined) storeApproval(changed);
    if (event !== undefined) appendEvent(sql, event);
    return structuredClone(result);
  });

  const applyApproval = db.transaction((input: ApplyApprovalInput): boolean => {
    const row = sql.getApproval.get(input.approvalId);
    const applied = appliedApprovalRecord(row === undefined ? undefined : approvalFromRow(row), input.appliedAt);
    if (applied === undefined) return false;
    storeApproval(applied);
    appendEvent(sql, approvalEvent(applied, "applied", timestamp()));
    return true;
  });

  const expireApprovals = db.transaction((cutoff: number): ExpireApprovalsResult => {
    const at = timestamp();
    const due = sql.pendingApprovalsBefore.all(cutoff).map(approvalFromRow);
    for (const record of due) {
      const retired = expiredApprovalRecord(record, at);
      storeApproval(retired);
      appendEvent(sql, approvalEvent(retired, "expired", at));
    }
    return { expired: due.length };
  });

  // Decided requests wait only for their resume, so the approved and edited rows are few: their
  // decision times are compared here, as every store compares them.
  const orphanApprovals = db.transaction((cutoff: number): OrphanApprovalsResult => {
    const at = timestamp();
    let orphaned = 0;
    for (const record of sql.decidedApprovals.all().map(approvalFromRow)) {
      const retired = orphanedApprovalRecord(record, cutoff, at);
      if (retired === undefined) continue;
      storeApproval(retired);
      appendEvent(sql, approvalEvent(retired, "orphaned", at));
      orphaned++;
    }
    return { orphaned };
  });

  const reconcile = db.transaction((reconciliation: Reconciliation): ReconcileResult => {
    const row = sql.getClaim.get(reconciliation.turnKey);
    if (row === undefined) return { reconciled: false, reason: "not_found" };
    const existing = claimFromRow(row);
    const answer = reconcileAnswer(existing, reconciliation.mutationKey);
    if (!answer.reconciled) return answer;
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
    return answer;
  });

  const prune = db.transaction((cutoff: number): PruneResult => {
    sql.pruneReads.run(cutoff);
    sql.pruneVerdicts.run(cutoff);
    sql.pruneApprovals.run(cutoff);
    sql.pruneTurns.run(cutoff);
    const effects = sql.pruneEffects.run(cutoff).changes;
    return { turns: sql.pruneClaims.run(cutoff).changes, effects };
  });

  const reconcileEffect = db.transaction((reconciliation: EffectReconciliation): ReconcileResult => {
    const row = sql.getEffect.get(reconciliation.effectKey);
    if (row === undefined) return { reconciled: false, reason: "not_found" };
    const existing = effectFromRow(row);
    if (existing.state !== "pending" && existing.state !== "unknown") return { reconciled: false, reason: "not_unresolved" };
    const at = timestamp();
    if (reconciliation.resolution === "completed") {
      sql.reconcileEffectComplete.run(
        encodeText(reconciliation.result.content),
        reconciliation.result.status,
        at,
        epochMs(at),
        reconciliation.effectKey,
      );
    } else {
      sql.deleteEffect.run(reconciliation.effectKey);
    }
    appendEvent(sql, effectReconciledEvent(existing.identity, reconciliation, at));
    return { reconciled: true, state: existing.state };
  });

  return {
    putReceipt,
    putVerdict,
    requestApproval,
    decideApproval,
    applyApproval,
    expireApprovals,
    orphanApprovals,
    reconcile,
    reconcileEffect,
    prune,
  };
}

export function appendEvent(sql: Statements, event: AuditEvent): void {
  sql.appendAudit.run(
    epochMs(event.at),
    event.turnKey,
    encodeText(event.scopeId),
    event.decision,
    event.approvalId ?? null,
    JSON.stringify(event),
  );
}
