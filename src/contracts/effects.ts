/**
 * Side effects: a `side-effect` call's claim, keyed by its effect, with its settlement and release.
 */
import { z } from "zod";
import { DigestSchema, IdSchema } from "./primitives.js";
import { AuditEventSchema } from "./audit.js";
import { MutationResultSchema } from "./claims.js";

/**
 * Which side effect a claim is for: one `side-effect` call, keyed by `effectKey` (turn, tool and
 * arguments, and its tool's `discriminator`'s answer if any). The call id is recorded, not keyed:
 * a model that asks for the same effect again in the same turn, under a new call id, gets the
 * first call's answer, never a second effect (unless the discriminator tells the calls apart).
 */
export const EffectIdentitySchema = z.strictObject({
  turnKey: DigestSchema,
  scopeId: IdSchema,
  toolCallId: IdSchema,
  toolName: IdSchema,
  argsDigest: DigestSchema,
  /** `effectKey(turn, call)`: hashes turn key, tool name, argument digest and the discriminator's answer, if any. */
  effectKey: DigestSchema,
  /** `toolFingerprint(tool)` of the tool the call was made to; recorded, not part of `effectKey`. */
  toolFingerprint: DigestSchema,
});
/** An {@link EffectIdentitySchema} value. */
export type EffectIdentity = z.infer<typeof EffectIdentitySchema>;

/** `claimEffect`'s options. */
export const EffectClaimOptionsSchema = z.strictObject({
  /**
   * At most this many effect claims of `identity.toolName` in `identity.turnKey`, this one
   * included: a new effect beyond it answers `limit_reached` and changes nothing. Released claims
   * and claims reconciled `no-effect` are gone and do not count. Checked in the claim's own
   * transaction; an existing claim for the same `effectKey` is answered as usual, never limited.
   */
  maxPerTurn: z.int().min(1).max(1000).optional(),
});
/** An {@link EffectClaimOptionsSchema} value. */
export type EffectClaimOptions = z.infer<typeof EffectClaimOptionsSchema>;

/** `claimEffect`'s answer: one of six outcomes, only `acquired` lets the effect run. */
export const EffectClaimResultSchema = z.discriminatedUnion("status", [
  /** The caller owns this effect and must settle it (or release it) with `token`. */
  z.strictObject({ status: z.literal("acquired"), token: IdSchema }),
  /** The same effect completed before: return this result, do not run it again. */
  z.strictObject({ status: z.literal("replay"), result: MutationResultSchema }),
  /** The same effect is claimed and not settled (running elsewhere, or crashed). */
  z.strictObject({ status: z.literal("pending") }),
  /** The same effect ran with an ambiguous outcome; an operator must reconcile it. */
  z.strictObject({ status: z.literal("unknown") }),
  /** The same effect completed and its result was pruned: it is never run again. */
  z.strictObject({ status: z.literal("pruned") }),
  /** A new effect, and the turn already holds `maxPerTurn` claims of this tool: nothing changed. */
  z.strictObject({ status: z.literal("limit_reached") }),
]);
/** An {@link EffectClaimResultSchema} value. */
export type EffectClaimResult = z.infer<typeof EffectClaimResultSchema>;

/**
 * Compare-and-set from `pending`, by the claim token, as for a mutation. `audit`, when given, is
 * appended in the same transaction exactly when the settlement applies.
 */
export const EffectSettlementSchema = z.discriminatedUnion("outcome", [
  z.strictObject({
    effectKey: DigestSchema,
    token: IdSchema,
    outcome: z.literal("complete"),
    result: MutationResultSchema,
    audit: AuditEventSchema.optional(),
  }),
  z.strictObject({ effectKey: DigestSchema, token: IdSchema, outcome: z.literal("unknown"), audit: AuditEventSchema.optional() }),
]);
/** An {@link EffectSettlementSchema} value. */
export type EffectSettlement = z.infer<typeof EffectSettlementSchema>;

/** Gives a `pending` effect claim back, by its token, when the body provably did nothing. */
export const EffectReleaseSchema = z.strictObject({ effectKey: DigestSchema, token: IdSchema });
/** An {@link EffectReleaseSchema} value. */
export type EffectRelease = z.infer<typeof EffectReleaseSchema>;
