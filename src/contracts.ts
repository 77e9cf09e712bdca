/**
 * The zod schemas and types shared by everything: turn input, tool policies, store records and the
 * refusal codes. Everything that crosses a trust boundary is parsed with one of these.
 */
import { z } from "zod";

// ---------------------------------------------------------------------------------------------
// Turns

/** A lowercase hex SHA-256, as produced by `digest`. */
export const DigestSchema = z.string().regex(/^[0-9a-f]{64}$/, "expected a lowercase hex SHA-256");

const IdSchema = z.string().min(1, "must not be empty");

/** One labelled piece of the turn's input, moderated together with the others. */
export const SegmentSchema = z.strictObject({
  label: IdSchema,
  /** Exact text; whitespace and empty content are significant. */
  content: z.string(),
});
export type Segment = z.infer<typeof SegmentSchema>;

/**
 * One trusted user turn, issued by the server. A fresh user request gets a fresh `turnId`; a
 * transport retry of the same request keeps it.
 */
export const TurnInputSchema = z
  .strictObject({
    /** The document, record or file the turn may edit. */
    scopeId: IdSchema,
    turnId: IdSchema,
    /** Bound into the admission receipt; not part of the turn key. */
    policyVersion: IdSchema,
    segments: z.array(SegmentSchema).min(1, "a turn needs at least one segment"),
  })
  .superRefine((input, ctx) => {
    const seen = new Set<string>();
    input.segments.forEach((segment, index) => {
      if (seen.has(segment.label)) {
        ctx.addIssue({
          code: "custom",
          path: ["segments", index, "label"],
          message: `duplicate segment label "${segment.label}"`,
        });
      }
      seen.add(segment.label);
    });
  });
export type TurnInput = z.infer<typeof TurnInputSchema>;

/** What identifies a turn: the turn key hashes exactly these two fields. */
export type TurnRef = Pick<TurnInput, "scopeId" | "turnId">;

// ---------------------------------------------------------------------------------------------
// Tool policies

export const TOOL_KINDS = ["document-read", "source-read", "mutation", "auxiliary"] as const;
export const ToolKindSchema = z.enum(TOOL_KINDS);
/**
 * - `document-read`: reads the document in scope; a successful one is the evidence a mutation needs.
 * - `source-read`: reads something else the edit may draw on (search, another file).
 * - `mutation`: changes the document; at most one per turn, claimed in the store.
 * - `auxiliary`: anything else (memory, calculators); runs freely.
 */
export type ToolKind = z.infer<typeof ToolKindSchema>;

export const RetryPolicySchema = z.strictObject({
  /** Who retries: `tool` means the tool retries itself and the middleware makes one attempt. */
  owner: z.enum(["tool", "middleware"]).optional(),
  /** Attempts in total, including the first. Default 1. */
  maxAttempts: z.int().min(1).max(5).optional(),
  /** Base wait before the second attempt, doubled for each later one. Default 200. */
  delayMs: z.int().min(0).max(60_000).optional(),
  /** Required for a mutation to get more than one attempt: the write service dedupes it. */
  idempotent: z.boolean().optional(),
});
export type RetryPolicy = z.infer<typeof RetryPolicySchema>;

export const ToolPolicySchema = z.strictObject({
  kind: ToolKindSchema,
  retry: RetryPolicySchema.optional(),
});
export type ToolPolicy = z.infer<typeof ToolPolicySchema>;

// ---------------------------------------------------------------------------------------------
// Store records

const TimestampSchema = z.iso.datetime({ offset: true });

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
});
export type AdmissionReceipt = z.infer<typeof AdmissionReceiptSchema>;

/** Proof that a `document-read` succeeded in a turn, bound to the exact result the model saw. */
export const ReadEvidenceSchema = z.strictObject({
  turnKey: DigestSchema,
  evidenceDigest: DigestSchema,
});
export type ReadEvidence = z.infer<typeof ReadEvidenceSchema>;

/** Which mutation a claim is for. Two claims are the same call only if `mutationKey` matches. */
export const MutationIdentitySchema = z.strictObject({
  turnKey: DigestSchema,
  scopeId: IdSchema,
  toolCallId: IdSchema,
  toolName: IdSchema,
  argsDigest: DigestSchema,
  /** `mutationKey(turn, call)`: hashes turn key, tool name, argument digest and call id. */
  mutationKey: DigestSchema,
});
export type MutationIdentity = z.infer<typeof MutationIdentitySchema>;

/** The text result of a completed mutation, replayed verbatim on a retry. */
export const MutationResultSchema = z.strictObject({
  content: z.string(),
  status: z.enum(["success", "error"]),
});
export type MutationResult = z.infer<typeof MutationResultSchema>;

export const ClaimOptionsSchema = z.strictObject({
  /**
   * Refuse the claim while another turn in the same scope has an `unknown` mutation.
   * Default true: an unreconciled write blocks further writes to that document.
   */
  requireResolvedScope: z.boolean().optional(),
});
export type ClaimOptions = z.infer<typeof ClaimOptionsSchema>;

export const ClaimResultSchema = z.discriminatedUnion("status", [
  /** The caller owns the turn's only mutation slot and must settle it with `token`. */
  z.strictObject({ status: z.literal("acquired"), token: IdSchema }),
  /** The same call completed before: return this result, do not run it again. */
  z.strictObject({ status: z.literal("replay"), result: MutationResultSchema }),
  /** The same call is claimed and not settled (running elsewhere, or crashed). */
  z.strictObject({ status: z.literal("pending") }),
  /** The same call ran with an ambiguous outcome; an operator must reconcile it. */
  z.strictObject({ status: z.literal("unknown") }),
  /** The turn's slot is held by another call (other id, tool or arguments). */
  z.strictObject({ status: z.literal("conflict") }),
  /** Another turn in this scope has an `unknown` mutation awaiting reconciliation. */
  z.strictObject({ status: z.literal("scope_unresolved") }),
]);
export type ClaimResult = z.infer<typeof ClaimResultSchema>;
export type ClaimStatus = ClaimResult["status"];

/** Compare-and-set from `pending`, by the claim token. */
export const MutationSettlementSchema = z.discriminatedUnion("outcome", [
  z.strictObject({
    turnKey: DigestSchema,
    token: IdSchema,
    outcome: z.literal("complete"),
    result: MutationResultSchema,
  }),
  z.strictObject({ turnKey: DigestSchema, token: IdSchema, outcome: z.literal("unknown") }),
]);
export type MutationSettlement = z.infer<typeof MutationSettlementSchema>;

/**
 * Durable, trusted server-side storage for the guardrails. Its methods are server operations:
 * never expose them as tools or client endpoints. Implementations validate every value crossing
 * the boundary and never hand out references to their internal state.
 *
 * Run `arkah-agent-guardrails/testing`'s conformance suite against any implementation.
 */
export interface GuardrailStore {
  /** The receipt stored for `turnKey`, if any. */
  getReceipt(turnKey: string): Promise<AdmissionReceipt | undefined>;
  /** Stores `receipt` unless one exists for its turn key; returns whichever receipt won. */
  putReceiptIfAbsent(receipt: AdmissionReceipt): Promise<AdmissionReceipt>;
  /** Idempotent. */
  recordSuccessfulRead(evidence: ReadEvidence): Promise<void>;
  /** True only for evidence recorded for exactly this turn key and digest. */
  hasSuccessfulRead(evidence: ReadEvidence): Promise<boolean>;
  /** Atomically claims the turn's single mutation slot. One winner across all workers. */
  claimMutation(identity: MutationIdentity, options?: ClaimOptions): Promise<ClaimResult>;
  /**
   * Settles a pending claim. Returns false, changing nothing, unless the claim is pending and
   * `token` is the one `claimMutation` issued. A settlement that throws leaves the claim pending.
   */
  settleMutation(settlement: MutationSettlement): Promise<boolean>;
}

// ---------------------------------------------------------------------------------------------
// Refusals

/**
 * Every code a refused tool call can carry. A refusal reaches the model as an error
 * `ToolMessage` whose content is JSON `{"guardrail": code, "message": "..."}`.
 */
export const REFUSAL_CODES = {
  unregistered_tool: "unregistered_tool",
  duplicate_call_id: "duplicate_call_id",
  unauthorized: "unauthorized",
  invalid_arguments: "invalid_arguments",
  read_batch_deferred: "read_batch_deferred",
  single_mutation: "single_mutation",
  read_required: "read_required",
  mutation_pending: "mutation_pending",
  mutation_unknown: "mutation_unknown",
  mutation_conflict: "mutation_conflict",
  scope_unresolved: "scope_unresolved",
  tool_failed: "tool_failed",
  unsupported_result: "unsupported_result",
} as const;
export type RefusalCode = (typeof REFUSAL_CODES)[keyof typeof REFUSAL_CODES];
