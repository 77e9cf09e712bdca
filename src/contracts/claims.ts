/**
 * The records of the core rule: admission receipts, read evidence, and a turn's one mutation
 * claim with its settlement and release.
 */
import { z } from "zod";
import { DigestSchema, IdSchema, TimestampSchema } from "./primitives.js";
import { AuditEventSchema } from "./audit.js";

/** The immutable outcome of admitting one turn. The first receipt stored for a turn key wins. */
export const AdmissionReceiptSchema = z.strictObject({
  turnKey: DigestSchema,
  scopeId: IdSchema,
  turnId: IdSchema,
  policyVersion: IdSchema,
  /** `moderationDigest` of the exact ordered, labelled segments that were moderated. */
  moderationDigest: DigestSchema,
  allowed: z.boolean(),
  decidedAt: TimestampSchema,
  /** The turn's principal, when it named one: only a turn for the same principal matches. */
  principal: IdSchema.optional(),
});
/** An {@link AdmissionReceiptSchema} value. */
export type AdmissionReceipt = z.infer<typeof AdmissionReceiptSchema>;

/** Proof that a `document-read` succeeded in a turn, bound to the exact result the model saw. */
export const ReadEvidenceSchema = z.strictObject({
  turnKey: DigestSchema,
  evidenceDigest: DigestSchema,
});
/** A {@link ReadEvidenceSchema} value. */
export type ReadEvidence = z.infer<typeof ReadEvidenceSchema>;

/**
 * `recordSuccessfulRead`'s options: `audit`, when given, is appended in the same transaction as
 * the evidence, every time it is given (also when the evidence was recorded before).
 */
export const RecordReadOptionsSchema = z.strictObject({ audit: AuditEventSchema.optional() });
/** A {@link RecordReadOptionsSchema} value. */
export type RecordReadOptions = z.infer<typeof RecordReadOptionsSchema>;

/** Which mutation a claim is for. Two claims are the same call only if `mutationKey` matches. */
export const MutationIdentitySchema = z.strictObject({
  turnKey: DigestSchema,
  scopeId: IdSchema,
  toolCallId: IdSchema,
  toolName: IdSchema,
  argsDigest: DigestSchema,
  /** `mutationKey(turn, call)`: hashes turn key, tool name, argument digest and call id. */
  mutationKey: DigestSchema,
  /**
   * `toolFingerprint(tool)` of the tool the call was made to. Recorded on the claim (the one that
   * acquired it) and listed by `listUnresolved`; not part of `mutationKey`, so it never decides
   * whether two claims are the same call.
   */
  toolFingerprint: DigestSchema,
});
/** A {@link MutationIdentitySchema} value. */
export type MutationIdentity = z.infer<typeof MutationIdentitySchema>;

/**
 * A claim's identity as a store reads it back. `toolFingerprint` is absent only on a claim made
 * before the SQLite and PostgreSQL stores' schema version 3, which did not record it.
 */
export const ClaimedIdentitySchema = MutationIdentitySchema.extend({ toolFingerprint: DigestSchema.optional() });
/** A {@link ClaimedIdentitySchema} value. */
export type ClaimedIdentity = z.infer<typeof ClaimedIdentitySchema>;

/** The text result of a completed mutation, replayed verbatim on a retry. */
export const MutationResultSchema = z.strictObject({
  content: z.string(),
  status: z.enum(["success", "error"]),
});
/** A {@link MutationResultSchema} value. */
export type MutationResult = z.infer<typeof MutationResultSchema>;

/** At most this many evidence digests in one claim's `readEvidence`. */
export const MAX_READ_EVIDENCE = 256;

/** `claimMutation`'s options. */
export const ClaimOptionsSchema = z.strictObject({
  /**
   * Refuse the claim while another turn in the same scope has an `unknown` mutation.
   * Default true: an unreconciled write blocks further writes to that document.
   */
  requireResolvedScope: z.boolean().optional(),
  /**
   * The read evidence the caller holds for the turn (at most 256 digests). When given, the claim
   * first requires that at least one of them is recorded for `identity.turnKey`
   * (`recordSuccessfulRead`); if none is (an empty list included), it answers `read_required` and
   * changes nothing. Checked in the claim's own transaction, before anything else it decides.
   */
  readEvidence: z
    .array(DigestSchema)
    .max(MAX_READ_EVIDENCE, `readEvidence holds at most ${String(MAX_READ_EVIDENCE)} digests`)
    .optional(),
});
/** A {@link ClaimOptionsSchema} value. */
export type ClaimOptions = z.infer<typeof ClaimOptionsSchema>;

/** The completed mutation holding a turn's slot, as a `conflict` answer reports it. */
export const CompletedMutationSchema = z.strictObject({
  toolName: IdSchema,
  toolCallId: IdSchema,
  /** Its stored result, exactly as a replay of that call would return it. */
  result: MutationResultSchema,
});
/** A {@link CompletedMutationSchema} value. */
export type CompletedMutation = z.infer<typeof CompletedMutationSchema>;

/** `claimMutation`'s answer: one of seven outcomes, only `acquired` lets the write run. */
export const ClaimResultSchema = z.discriminatedUnion("status", [
  /** The caller owns the turn's only mutation slot and must settle it with `token`. */
  z.strictObject({ status: z.literal("acquired"), token: IdSchema }),
  /** The same call completed before: return this result, do not run it again. */
  z.strictObject({ status: z.literal("replay"), result: MutationResultSchema }),
  /** The same call is claimed and not settled (running elsewhere, or crashed). */
  z.strictObject({ status: z.literal("pending") }),
  /** The same call ran with an ambiguous outcome; an operator must reconcile it. */
  z.strictObject({ status: z.literal("unknown") }),
  /**
   * The turn's slot is held by another call (other id, tool or arguments). `completed` is present
   * exactly when that call completed (and was not pruned): what was done, so a caller can say so.
   */
  z.strictObject({ status: z.literal("conflict"), completed: CompletedMutationSchema.optional() }),
  /** Another turn in this scope has an `unknown` mutation awaiting reconciliation. */
  z.strictObject({ status: z.literal("scope_unresolved") }),
  /**
   * The claim named `readEvidence` and none of it is recorded for the turn: nothing was decided
   * or changed (this is checked before the turn's slot is looked at).
   */
  z.strictObject({ status: z.literal("read_required") }),
]);
/** A {@link ClaimResultSchema} value. */
export type ClaimResult = z.infer<typeof ClaimResultSchema>;
/** The `status` of a {@link ClaimResult}. */
export type ClaimStatus = ClaimResult["status"];

/**
 * Compare-and-set from `pending`, by the claim token. `audit`, when given, is appended in the same
 * transaction exactly when the settlement applies (the store answers `true`), never otherwise.
 */
export const MutationSettlementSchema = z.discriminatedUnion("outcome", [
  z.strictObject({
    turnKey: DigestSchema,
    token: IdSchema,
    outcome: z.literal("complete"),
    result: MutationResultSchema,
    audit: AuditEventSchema.optional(),
  }),
  z.strictObject({ turnKey: DigestSchema, token: IdSchema, outcome: z.literal("unknown"), audit: AuditEventSchema.optional() }),
]);
/** A {@link MutationSettlementSchema} value. */
export type MutationSettlement = z.infer<typeof MutationSettlementSchema>;

/**
 * Gives a `pending` claim back, by its token, when the tool body provably never started: the
 * turn's slot is open again exactly as if it had never been claimed.
 */
export const MutationReleaseSchema = z.strictObject({ turnKey: DigestSchema, token: IdSchema });
/** A {@link MutationReleaseSchema} value. */
export type MutationRelease = z.infer<typeof MutationReleaseSchema>;
