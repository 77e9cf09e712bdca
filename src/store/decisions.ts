/**
 * Decision rules of the claim lifecycle that every shipped store applies, as pure functions: the
 * key-value base and the in-memory store call them on records, the SQLite and PostgreSQL stores on
 * rows. (The approval and turn rules live beside their events, in `events.ts` and `turns.ts`.)
 */
import type { ClaimResult, EffectClaimResult, MutationResult, ReconcileResult } from "../contracts/index.js";

/** A turn's existing claim, as much of it as `claimMutation` needs to answer a second claim. */
export interface ExistingClaim {
  /** `pruned`: a tombstone, its result gone. */
  readonly state: "pending" | "complete" | "unknown" | "pruned";
  /** The claimed call: the same call only if its `mutationKey` matches. */
  readonly identity: { readonly mutationKey: string; readonly toolName: string; readonly toolCallId: string };
  /** Present when `complete`. */
  readonly result?: MutationResult | undefined;
}

/**
 * What `claimMutation` answers when the turn already has a claim: `replay`, `pending` or `unknown`
 * for the same call (same `mutationKey`), else `conflict`, naming the completed call when there is
 * one (never for a pruned tombstone). The answer holds its own copy of the result.
 */
export function existingClaimAnswer(existing: ExistingClaim, mutationKey: string): ClaimResult {
  if (existing.state === "pruned") return { status: "conflict" };
  const result = existing.state === "complete" ? existing.result : undefined;
  if (existing.identity.mutationKey !== mutationKey) {
    if (result === undefined) return { status: "conflict" };
    const { toolName, toolCallId } = existing.identity;
    return { status: "conflict", completed: { toolName, toolCallId, result: { content: result.content, status: result.status } } };
  }
  if (result !== undefined) return { status: "replay", result: { content: result.content, status: result.status } };
  return { status: existing.state === "unknown" ? "unknown" : "pending" };
}

/**
 * What `claimEffect` answers when the effect already has a claim (its `effectKey` is the whole
 * identity, so it is always the same effect): `replay` with a copy of the result, `pending`,
 * `unknown` or `pruned`.
 */
export function existingEffectAnswer(existing: Pick<ExistingClaim, "state" | "result">): EffectClaimResult {
  if (existing.state === "complete" && existing.result !== undefined) {
    return { status: "replay", result: { content: existing.result.content, status: existing.result.status } };
  }
  return { status: existing.state === "complete" ? "unknown" : existing.state };
}

/**
 * What `reconcileMutation` answers about the turn's existing claim: `other_call` when the
 * reconciliation names a `mutationKey` and the claim is another call's (whatever its state: the
 * named call's claim is not there), `not_unresolved` when it is not `pending` or `unknown`, else
 * `reconciled` with the state it resolves (the store then applies it). Every store decides this in
 * the reconciliation's own transaction, on the claim it changes; no claim at all is `not_found`.
 */
export function reconcileAnswer(
  claim: { readonly state: string; readonly identity: { readonly mutationKey: string } },
  mutationKey: string | undefined,
): ReconcileResult {
  if (mutationKey !== undefined && claim.identity.mutationKey !== mutationKey) return { reconciled: false, reason: "other_call" };
  if (claim.state !== "pending" && claim.state !== "unknown") return { reconciled: false, reason: "not_unresolved" };
  return { reconciled: true, state: claim.state };
}

/**
 * Whether a settlement or release by `token` applies to a claim: only to a `pending` one, and only
 * with the token `claimMutation` issued for it.
 */
export function tokenHoldsClaim(claim: { readonly state: string; readonly token: string } | undefined, token: string): boolean {
  return claim?.state === "pending" && claim.token === token;
}

/**
 * An instant as the stores compare it: epoch milliseconds of an ISO 8601 timestamp. Digits below
 * the millisecond are dropped (`.0001Z` and `.0009Z` are the same instant), and offsets are
 * applied (`01:00+01:00` is `00:00Z`). Every cut-off (`olderThan`, `since`) compares with these.
 */
export function instantMs(timestamp: string): number {
  return Date.parse(timestamp);
}
