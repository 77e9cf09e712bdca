import type { AuditEvent, MutationIdentity, Reconciliation } from "../contracts.js";

/** The `reconciled` audit event every store appends with a reconciliation, in the same transaction. */
export function reconciledEvent(identity: MutationIdentity, reconciliation: Reconciliation, at: string): AuditEvent {
  return {
    at,
    decision: "reconciled",
    turnKey: identity.turnKey,
    scopeId: identity.scopeId,
    toolCallId: identity.toolCallId,
    toolName: identity.toolName,
    kind: "mutation",
    argsDigest: identity.argsDigest,
    mutationKey: identity.mutationKey,
    action: reconciliation.resolution,
    operatorRef: reconciliation.operatorRef,
  };
}

/** The `released` audit event every store appends with a release, in the same transaction. */
export function releasedEvent(identity: MutationIdentity, at: string): AuditEvent {
  return {
    at,
    decision: "released",
    turnKey: identity.turnKey,
    scopeId: identity.scopeId,
    toolCallId: identity.toolCallId,
    toolName: identity.toolName,
    kind: "mutation",
    argsDigest: identity.argsDigest,
    mutationKey: identity.mutationKey,
  };
}
