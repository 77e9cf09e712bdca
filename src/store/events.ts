import { canonicalJson } from "../digest.js";
import {
  DECIDED_STATUS,
  type ApprovalDecision,
  type ApprovalDecisionResult,
  type ApprovalRecord,
  type AuditEvent,
  type ClaimedIdentity,
  type DecideApprovalInput,
  type EffectIdentity,
  type EffectReconciliation,
  type Reconciliation,
} from "../contracts/index.js";

/** The `reconciled` audit event every store appends with a reconciliation, in the same transaction. */
export function reconciledEvent(identity: ClaimedIdentity, reconciliation: Reconciliation, at: string): AuditEvent {
  return { ...claimEvent("reconciled", identity, at), action: reconciliation.resolution, operatorRef: reconciliation.operatorRef };
}

/** The `released` audit event every store appends with a release, in the same transaction. */
export function releasedEvent(identity: ClaimedIdentity, at: string): AuditEvent {
  return claimEvent("released", identity, at);
}

/**
 * An audit event about a claim, a mutation's or a side effect's: its identity's fields (the
 * tool's fingerprint if the claim recorded one), the kind, and the claim's own key.
 */
function claimEvent(decision: "reconciled" | "released", identity: ClaimedIdentity | EffectIdentity, at: string): AuditEvent {
  return {
    at,
    decision,
    turnKey: identity.turnKey,
    scopeId: identity.scopeId,
    toolCallId: identity.toolCallId,
    toolName: identity.toolName,
    ...(identity.toolFingerprint === undefined ? {} : { toolFingerprint: identity.toolFingerprint }),
    argsDigest: identity.argsDigest,
    ...("effectKey" in identity
      ? { kind: "side-effect" as const, effectKey: identity.effectKey }
      : { kind: "mutation" as const, mutationKey: identity.mutationKey }),
  };
}

/** The `reconciled` audit event of a side effect's reconciliation, in the same transaction. */
export function effectReconciledEvent(identity: EffectIdentity, reconciliation: EffectReconciliation, at: string): AuditEvent {
  return { ...claimEvent("reconciled", identity, at), action: reconciliation.resolution, operatorRef: reconciliation.operatorRef };
}

/** The `released` audit event of a side effect's release, in the same transaction. */
export function effectReleasedEvent(identity: EffectIdentity, at: string): AuditEvent {
  return claimEvent("released", identity, at);
}

/** A step of an approval request's lifecycle. */
export type ApprovalAction = "requested" | ApprovalDecision["decision"] | "decision_refused" | "applied" | "expired" | "orphaned";

/**
 * The `approval` audit event a store appends with each lifecycle step, in the same transaction:
 * the request's identity, never its argument values.
 */
export function approvalEvent(
  record: ApprovalRecord,
  action: ApprovalAction,
  at: string,
  extra: { readonly code?: string; readonly operatorRef?: string | undefined } = {},
): AuditEvent {
  return {
    at,
    decision: "approval",
    approvalId: record.approvalId,
    turnKey: record.turnKey,
    scopeId: record.scopeId,
    toolCallId: record.toolCallId,
    toolName: record.toolName,
    ...(record.toolFingerprint === undefined ? {} : { toolFingerprint: record.toolFingerprint }),
    argsDigest: record.argsDigest,
    action,
    ...(extra.code === undefined ? {} : { code: extra.code }),
    ...(extra.operatorRef === undefined ? {} : { operatorRef: extra.operatorRef }),
  };
}

/** What {@link approvalDecisionOutcome} decides: the answer, and what to write. */
export interface ApprovalDecisionOutcome {
  /** `decideApproval`'s answer. */
  readonly result: ApprovalDecisionResult;
  /** The record to store, when the decision applied. */
  readonly changed?: ApprovalRecord;
  /** The audit event to append in the same transaction (none for `not_found`). */
  readonly event?: AuditEvent;
}

/**
 * What `decideApproval` does to `record` (undefined: no such request), as every store decides it:
 * the answer, the record to store if it changed, and the audit event to append (none for
 * `not_found`, which has no request to attach it to).
 */
export function approvalDecisionOutcome(record: ApprovalRecord | undefined, input: DecideApprovalInput, at: string): ApprovalDecisionOutcome {
  if (record === undefined) return { result: { decided: false, reason: "not_found" } };
  const operatorRef = input.operatorRef;
  // A re-delivery of the recorded decision (a retried request, a replayed webhook) is answered as
  // the first delivery was, and is not a refusal: nothing to audit. An orphaned request's is
  // refused: its decision no longer lets anything run.
  if (record.status !== "orphaned" && isRecordedDecision(record, input)) return { result: { decided: true, record, repeated: true } };
  if (record.status !== "pending") {
    const reason = record.status === "expired" || record.status === "orphaned" ? record.status : "already_decided";
    return {
      result: { decided: false, reason, record },
      event: approvalEvent(record, "decision_refused", at, { code: reason, operatorRef }),
    };
  }
  const decided: ApprovalRecord = {
    ...record,
    status: DECIDED_STATUS[input.decision.decision],
    decision: input.decision,
    ...(operatorRef === undefined ? {} : { operatorRef }),
    decidedAt: input.decidedAt,
  };
  return {
    result: { decided: true, record: decided },
    changed: decided,
    event: approvalEvent(decided, input.decision.decision, at, { operatorRef }),
  };
}

/**
 * Whether `input` is the decision recorded on `record`: the same kind, the same `message` (a
 * reject), canonically equal `args` (an edit: key order and number spelling aside), and the same
 * `operatorRef` (both absent, or equal).
 */
export function isRecordedDecision(record: ApprovalRecord, input: Pick<DecideApprovalInput, "decision" | "operatorRef">): boolean {
  const recorded = record.decision;
  if (recorded?.decision !== input.decision.decision || record.operatorRef !== input.operatorRef) return false;
  switch (recorded.decision) {
    case "approve":
      return true;
    case "reject":
      return input.decision.decision === "reject" && recorded.message === input.decision.message;
    case "edit":
      return input.decision.decision === "edit" && canonicalJson(recorded.args) === canonicalJson(input.decision.args);
  }
}

/**
 * The record `applyApproval` stores (status `applied`, with `appliedAt`), or undefined when
 * `record` cannot be applied: only an `approved` or `edited` request can.
 */
export function appliedApprovalRecord(record: ApprovalRecord | undefined, appliedAt: string): ApprovalRecord | undefined {
  if (record?.status !== "approved" && record?.status !== "edited") return undefined;
  return { ...record, status: "applied", appliedAt };
}

/** The record `expireApprovals` stores for a pending request it retires (status `expired`, with `expiredAt`). */
export function expiredApprovalRecord(record: ApprovalRecord, expiredAt: string): ApprovalRecord {
  return { ...record, status: "expired", expiredAt };
}

/**
 * The record `orphanApprovals` stores for `record` (status `orphaned`, with `orphanedAt`, its
 * decision kept), or undefined when it is not orphaned: only an `approved` or `edited` request
 * decided before `cutoffMs` is.
 */
export function orphanedApprovalRecord(record: ApprovalRecord, cutoffMs: number, orphanedAt: string): ApprovalRecord | undefined {
  if (record.status !== "approved" && record.status !== "edited") return undefined;
  // An unparseable time compares false with every cut-off, as expiry's does.
  if (!(Date.parse(record.decidedAt ?? "") < cutoffMs)) return undefined;
  return { ...record, status: "orphaned", orphanedAt };
}
