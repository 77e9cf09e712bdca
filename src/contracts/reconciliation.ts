/**
 * Reconciliation and retention: unresolved mutations and side effects, an operator's
 * reconciliation, and pruning.
 */
import { z } from "zod";
import { DigestSchema, IdSchema, TimestampSchema } from "./primitives.js";
import { ClaimedIdentitySchema, MutationResultSchema } from "./claims.js";
import { EffectIdentitySchema } from "./effects.js";

/**
 * A mutation whose outcome nobody recorded: `pending` (running, or crashed) or `unknown`, with
 * the identity it was claimed under (`toolFingerprint` absent only for a claim made before schema
 * version 3).
 */
export const UnresolvedMutationSchema = ClaimedIdentitySchema.extend({
  state: z.enum(["pending", "unknown"]),
  claimedAt: TimestampSchema,
});
/** An {@link UnresolvedMutationSchema} value. */
export type UnresolvedMutation = z.infer<typeof UnresolvedMutationSchema>;

/**
 * The claim a reconciliation is about, when the caller knows it: reconciled only while the turn's
 * claim is that call's (checked in the reconciliation's own transaction), else `other_call`, and
 * nothing changes. Without it, whichever claim the turn holds is reconciled. A resolver that read
 * the claim first and decides later (a tool's `confirm`, `reconcile --auto`) names it, so a slot
 * that reopened and was claimed by another call meanwhile is never settled with its answer.
 */
const ReconciledMutationKeySchema = DigestSchema.optional();

/** An operator's verdict on an unresolved mutation, after checking the write service. */
export const ReconciliationSchema = z.discriminatedUnion("resolution", [
  /** The write happened: `result` is what later replays of the call return. */
  z.strictObject({
    turnKey: DigestSchema,
    resolution: z.literal("completed"),
    result: MutationResultSchema,
    operatorRef: IdSchema,
    /** Reconcile only this call's claim (`other_call` otherwise). */
    mutationKey: ReconciledMutationKeySchema,
  }),
  /** The write did not happen: the turn's slot reopens. */
  z.strictObject({
    turnKey: DigestSchema,
    resolution: z.literal("no-effect"),
    operatorRef: IdSchema,
    /** Reconcile only this call's claim (`other_call` otherwise). */
    mutationKey: ReconciledMutationKeySchema,
  }),
]);
/** A {@link ReconciliationSchema} value. */
export type Reconciliation = z.infer<typeof ReconciliationSchema>;

/** `reconcileMutation`'s answer: whether it resolved a claim, and the state it left. */
export const ReconcileResultSchema = z.discriminatedUnion("reconciled", [
  z.strictObject({ reconciled: z.literal(true), state: z.enum(["pending", "unknown"]) }),
  /**
   * Nothing changed: no claim for the turn (`not_found`), the turn's claim is another call's than
   * the reconciliation's `mutationKey` names (`other_call`; mutations only), or it is not
   * `pending`/`unknown`, already resolved (`not_unresolved`).
   */
  z.strictObject({ reconciled: z.literal(false), reason: z.enum(["not_found", "other_call", "not_unresolved"]) }),
]);
/** A {@link ReconcileResultSchema} value. */
export type ReconcileResult = z.infer<typeof ReconcileResultSchema>;

/** A side effect whose outcome nobody recorded: `pending` (running, or crashed) or `unknown`. */
export const UnresolvedEffectSchema = EffectIdentitySchema.extend({
  state: z.enum(["pending", "unknown"]),
  claimedAt: TimestampSchema,
});
/** An {@link UnresolvedEffectSchema} value. */
export type UnresolvedEffect = z.infer<typeof UnresolvedEffectSchema>;

/** An operator's verdict on an unresolved side effect, after checking the service it acts on. */
export const EffectReconciliationSchema = z.discriminatedUnion("resolution", [
  /** The effect happened: `result` is what later replays of it return. */
  z.strictObject({
    effectKey: DigestSchema,
    resolution: z.literal("completed"),
    result: MutationResultSchema,
    operatorRef: IdSchema,
  }),
  /** The effect did not happen: its claim is gone, and the same call may run again. */
  z.strictObject({ effectKey: DigestSchema, resolution: z.literal("no-effect"), operatorRef: IdSchema }),
]);
/** An {@link EffectReconciliationSchema} value. */
export type EffectReconciliation = z.infer<typeof EffectReconciliationSchema>;

/** `prune`'s input: the retention cut-off. */
export const PruneOptionsSchema = z.strictObject({
  /** Completed records settled before this time are removed; a tombstone per turn remains. */
  olderThan: TimestampSchema,
});
/** A {@link PruneOptionsSchema} value. */
export type PruneOptions = z.infer<typeof PruneOptionsSchema>;

/** `prune`'s answer. */
export const PruneResultSchema = z.strictObject({
  /** Turns whose completed mutation was pruned to a tombstone. */
  turns: z.int().min(0),
  /** Completed side effects pruned to a tombstone (0 from a store without the `effects` part). */
  effects: z.int().min(0).optional(),
});
/** A {@link PruneResultSchema} value. */
export type PruneResult = z.infer<typeof PruneResultSchema>;
