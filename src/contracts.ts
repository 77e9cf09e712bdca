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

/**
 * Text a turn's keys are digested from: well-formed UTF-16. A lone surrogate has no UTF-8 form, so
 * no digest takes it (`DigestError`); refused here, it is the caller's invalid input instead.
 * (The ES2023 lib typings lack `isWellFormed`; Node 20 has it.)
 */
const TurnTextSchema = z
  .string()
  .refine((text) => (text as unknown as { isWellFormed(): boolean }).isWellFormed(), "must be well-formed text (no lone UTF-16 surrogate)");
const TurnIdSchema = TurnTextSchema.min(1, "must not be empty");

/** One labelled piece of the turn's input, moderated together with the others. */
export const SegmentSchema = z.strictObject({
  label: TurnIdSchema,
  /** Exact text; whitespace and empty content are significant. */
  content: TurnTextSchema,
});
/** A {@link SegmentSchema} value. */
export type Segment = z.infer<typeof SegmentSchema>;

/**
 * One trusted user turn, issued by the server. A fresh user request gets a fresh `turnId`; a
 * transport retry of the same request keeps it.
 */
export const TurnInputSchema = z
  .strictObject({
    /** The document, record or file the turn may edit. */
    scopeId: TurnIdSchema,
    turnId: TurnIdSchema,
    /** Bound into the admission receipt; not part of the turn key. */
    policyVersion: TurnIdSchema,
    segments: z.array(SegmentSchema).min(1, "a turn needs at least one segment"),
    /**
     * Who the user is, as your server authenticated them. Bound into the admission receipt, so a
     * turn admitted for one principal cannot run as another (`input_mismatch`); not part of the
     * turn key.
     */
    principal: TurnIdSchema.optional(),
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
/** A {@link TurnInputSchema} value: what `admitTurn` moderates and `turnContext` carries. */
export type TurnInput = z.infer<typeof TurnInputSchema>;

/** What identifies a turn: the turn key hashes exactly these two fields. */
export type TurnRef = Pick<TurnInput, "scopeId" | "turnId">;

// ---------------------------------------------------------------------------------------------
// Tool policies

/** Every tool kind a policy can name; see {@link ToolKind}. */
export const TOOL_KINDS = ["document-read", "source-read", "mutation", "side-effect", "auxiliary"] as const;
/** Parses a {@link ToolKind}. */
export const ToolKindSchema = z.enum(TOOL_KINDS);
/**
 * - `document-read`: reads the document in scope; a successful one is the evidence a mutation needs.
 * - `source-read`: reads something else the edit may draw on (search, another file).
 * - `mutation`: changes the document; at most one per turn, claimed in the store.
 * - `side-effect`: acts outside the document (sends mail, opens a ticket, posts to chat); each
 *   distinct call (turn, tool, arguments) claimed in the store, run once, replayed after; no read
 *   needed and the turn's mutation slot untouched. `maxPerTurn` caps how many a turn may make;
 *   `discriminator` tells identical calls apart.
 * - `auxiliary`: anything else without an effect to fence (memory, calculators); runs freely.
 */
export type ToolKind = z.infer<typeof ToolKindSchema>;

/** Who retries a tool and how often. Invalid combinations (several attempts of a non-idempotent mutation, or with `owner: "tool"`) are a `ConfigurationError` when the middleware is built. */
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
/** A {@link RetryPolicySchema} value. */
export type RetryPolicy = z.infer<typeof RetryPolicySchema>;

/** Which document a call touches, from its parsed arguments: `undefined` when it cannot tell. */
export type ScopeOf = (args: Readonly<Record<string, JsonValue>>) => string | undefined;

/** What a side effect's {@link EffectDiscriminator} is told of the call besides its arguments. */
export interface EffectCall {
  /** The call id the model gave: a retried step with fresh provider ids has new ones. */
  readonly id: string;
  /** The tool's name. */
  readonly name: string;
}

/**
 * What tells two calls of a `side-effect` tool with the same arguments apart, from the parsed
 * arguments and the call: its answer (plain JSON, at most {@link MAX_DISCRIMINATOR_CHARS}
 * characters as canonical JSON) joins the call's `effectKey`; `null` keeps the key it has without
 * one. It must answer the same for the same call on a retry or a resume, or that call runs again.
 */
export type EffectDiscriminator = (args: Readonly<Record<string, JsonValue>>, call: EffectCall) => JsonValue;

/** The longest answer an {@link EffectDiscriminator} may give, in characters of canonical JSON. */
export const MAX_DISCRIMINATOR_CHARS = 1024;
/** The largest `timeoutMs` a tool policy takes: one hour. */
export const MAX_TOOL_TIMEOUT_MS = 3_600_000;

/** The longest a `confirm` result may be, in UTF-16 code units; a longer one is not a valid answer. */
export const MAX_CONFIRM_RESULT_LENGTH = 1_048_576;

/** How long `confirm` is given before its answer counts as `unknown`. */
export const CONFIRM_TIMEOUT_MS = 10_000;

/**
 * What `confirm` is asked about: one unresolved claim, `pending` or `unknown`, of a mutation
 * (`mutationKey`) or a side effect (`effectKey`): the key the tool's write service dedupes on.
 */
export type ConfirmRequest = ConfirmRequestFields &
  (
    | {
        /** A mutation's claim. */
        readonly kind: "mutation";
        /** `mutationKey(turn, call)`: the key the write service recorded the write under. */
        readonly mutationKey: string;
      }
    | {
        /** A side effect's claim. */
        readonly kind: "side-effect";
        /** `effectKey(turn, call)`: the key the service recorded the effect under. */
        readonly effectKey: string;
      }
  );

/** The fields every {@link ConfirmRequest} has. */
export interface ConfirmRequestFields {
  /** The tool the claim is for. */
  readonly toolName: string;
  /** The call that holds the claim. */
  readonly toolCallId: string;
  /**
   * The call's arguments as its schema parsed them, when the call is at hand (the pipeline); absent
   * for `reconcile --auto`, which has only the claim's record. Answer from the key, not these.
   */
  readonly args?: Readonly<Record<string, JsonValue>>;
  /** The turn's document scope. */
  readonly scopeId: string;
  /** The turn's key. */
  readonly turnKey: string;
  /** `pending`: claimed and never settled (a crash, or a holder still running); `unknown`: it ran, outcome unknown. */
  readonly state: "pending" | "unknown";
  /** Aborted when the run is cancelled or `confirm` took longer than {@link CONFIRM_TIMEOUT_MS}. */
  readonly signal: AbortSignal;
}

/** `confirm`'s answer, validated: anything else counts as `unknown`. */
export const ConfirmAnswerSchema = z.discriminatedUnion("outcome", [
  /** The write happened: `result` is what the call returns, now and on every replay. */
  z.strictObject({
    outcome: z.literal("completed"),
    result: z.string().max(MAX_CONFIRM_RESULT_LENGTH),
    /** The result's status; default `success`. */
    status: z.enum(["success", "error"]).optional(),
  }),
  /** The service has no record of the key: nothing was written, the claim reopens. */
  z.strictObject({ outcome: z.literal("no-effect") }),
  /** The service cannot tell (yet): the claim stays as it is. */
  z.strictObject({ outcome: z.literal("unknown") }),
]);
/** A {@link ConfirmAnswerSchema} value. */
export type ConfirmAnswer = z.infer<typeof ConfirmAnswerSchema>;

/**
 * Asks the tool's write service what became of an unresolved claim, by its key. Its answer
 * settles the claim as an operator's reconciliation would (operator reference `confirm:<tool>`).
 * A `pending` claim may belong to a holder still running: answer `completed` or `no-effect` only
 * from the service's record of the key, which a live holder's later write must dedupe against.
 */
export type ConfirmClaim = (claim: ConfirmRequest) => ConfirmAnswer | Promise<ConfirmAnswer>;

/** How the middleware governs one tool: its kind, retries and, for reads and mutations, the document a call touches. */
export const ToolPolicySchema = z
  .strictObject({
    kind: ToolKindSchema,
    retry: RetryPolicySchema.optional(),
    /**
     * For `document-read` and `mutation` tools: the document a call touches. A call whose scope is
     * not the turn's `scopeId` (or is undefined) is refused `out_of_scope` before anything runs or is
     * claimed, and such a read is never evidence. Without it, binding arguments to the turn's
     * document is `authorize`'s job.
     */
    scope: z.custom<ScopeOf>((value) => typeof value === "function", "scope must be a function (args) => string | undefined").optional(),
    /**
     * Configuration fields that are part of the tool's identity (e.g. `["baseUrl"]`): each names a
     * property of the tool object, or else of its `metadata`, holding plain JSON. Their values join
     * the tool's fingerprint, and a call after one of them changed (in this process) is refused
     * `tool_changed`. Never logged. A field found in neither place fails the first model call.
     */
    identity: z
      .array(z.string().min(1))
      .min(1)
      .refine((fields) => new Set(fields).size === fields.length, "list each identity field once")
      .optional(),
    /**
     * For `side-effect` tools: at most this many distinct effects of this tool per turn (claims
     * that were released, or reconciled `no-effect`, do not count). A call beyond it is refused
     * `effect_limit` before anything runs. Default: no limit.
     */
    maxPerTurn: z.int().min(1).max(1000).optional(),
    /**
     * For `side-effect` tools: what tells two calls with the same arguments apart, so a turn that
     * means to send two identical messages sends both. Its answer joins the `effectKey`; without
     * it (or when it answers `null`) identical calls in a turn are one effect, replayed. Answering
     * `call.id` makes each model call its own effect, at a price: a retried step with fresh
     * provider call ids then acts again. A discriminator that throws, or answers anything but
     * plain JSON of at most {@link MAX_DISCRIMINATOR_CHARS} characters, refuses the call
     * `effect_unidentified` before anything is claimed.
     */
    discriminator: z
      .custom<EffectDiscriminator>((value) => typeof value === "function", "discriminator must be a function (args, call) => JSON")
      .optional(),
    /**
     * The longest a call's tool body may take, per attempt. The body's `config.signal` aborts then
     * (with the run's own signal combined), and the call is refused `tool_timeout` without waiting
     * further; a mutation's or side effect's claim is settled `unknown`, since the body may still
     * be writing (`confirm`, or an operator, settles it). Default: no limit.
     */
    timeoutMs: z.int().min(1).max(MAX_TOOL_TIMEOUT_MS).optional(),
    /**
     * For `mutation` and `side-effect` tools: asks the write service what became of a call whose
     * claim is `pending` or `unknown` when the same call (same `mutationKey`, or `effectKey`) comes
     * again, and by `arkah-guardrails reconcile --auto`. It must answer from the service's own
     * record of that key (its dedupe table), never from a guess; see {@link ConfirmClaim}.
     */
    confirm: z.custom<ConfirmClaim>((value) => typeof value === "function", "confirm must be a function (claim) => answer").optional(),
  })
  .refine((policy) => policy.scope === undefined || policy.kind === "document-read" || policy.kind === "mutation", {
    error: "scope binds document-read and mutation tools only",
    path: ["scope"],
  })
  .refine((policy) => policy.maxPerTurn === undefined || policy.kind === "side-effect", {
    error: "maxPerTurn limits side-effect tools only",
    path: ["maxPerTurn"],
  })
  .refine((policy) => policy.discriminator === undefined || policy.kind === "side-effect", {
    error: "discriminator tells side-effect calls apart only",
    path: ["discriminator"],
  })
  .refine((policy) => policy.confirm === undefined || policy.kind === "mutation" || policy.kind === "side-effect", {
    error: "confirm settles the claims of mutation and side-effect tools only",
    path: ["confirm"],
  });
/** A {@link ToolPolicySchema} value: one entry of the `tools` option. */
export type ToolPolicy = z.infer<typeof ToolPolicySchema>;

// ---------------------------------------------------------------------------------------------
// Store records

const TimestampSchema = z.iso.datetime({ offset: true });

/** A JSON value, as stored: what a verdict's detections, an edited approval and an audit event's values may hold. */
export const JsonValueSchema = z.json();
/** A {@link JsonValueSchema} value. */
export type JsonValue = z.infer<typeof JsonValueSchema>;

// Audit events come first: a turn's atomic steps (a read, a settlement) may carry one.

/** Every `decision` an audit event can record. */
export const AUDIT_DECISIONS = [
  /** The tool ran and returned a result. */
  "executed",
  /** A completed mutation's stored result was returned without running it. */
  "replayed",
  /** The call was refused before running (`code` says why). */
  "refused",
  /** A mutation was refused because it shared its step with a read (`read_batch_deferred`). */
  "deferred",
  /**
   * The tool ran and failed: `tool_failed`, a mutation left `unknown`, `retried` (its policy runs
   * it again), `seal_broken`. Every run of a tool body is one `executed` or `failed` event.
   */
  "failed",
  /** A guardrail's verdict other than `allow` (deny, observe, approve). */
  "verdict",
  /**
   * A step in an approval request's lifecycle, written by the store: `action` is `requested`, the
   * decision (`approve`, `reject`, `edit`), `decision_refused` (with the reason as `code`),
   * `applied`, `expired` or `orphaned`. The middleware adds `answer_refused` (with the reason as `code`) for a
   * resume value it did not take.
   */
  "approval",
  /** An operator reconciled an unresolved mutation or side effect. */
  "reconciled",
  /**
   * A claim (a mutation's or a side effect's) was released: its tool body provably never started,
   * or the body threw `NoEffectError` (recorded before it as a `failed` event with code `no_effect`).
   */
  "released",
] as const;

/** One decision, as the audit trail records it. Values only if the host opted in. */
export const AuditEventSchema = z.strictObject({
  at: TimestampSchema,
  decision: z.enum(AUDIT_DECISIONS),
  turnKey: DigestSchema,
  scopeId: IdSchema,
  toolCallId: IdSchema.optional(),
  toolName: IdSchema.optional(),
  /**
   * `toolFingerprint(tool)`: on the events a store writes about a claim or an approval request
   * (`reconciled`, `released`, `approval`) whenever the claim or request recorded it.
   */
  toolFingerprint: DigestSchema.optional(),
  kind: ToolKindSchema.optional(),
  argsDigest: DigestSchema.optional(),
  /** The refusal code, the guardrail's code on a verdict, or why an approval decision was refused. */
  code: z.string().optional(),
  guardrail: IdSchema.optional(),
  /** The verdict's action, the approval step, or the reconciliation's resolution. */
  action: z.string().optional(),
  /** The approval request an `approval` event is about. */
  approvalId: DigestSchema.optional(),
  mutationKey: DigestSchema.optional(),
  /** The side effect's `effectKey`, on events about a `side-effect` call's claim. */
  effectKey: DigestSchema.optional(),
  operatorRef: IdSchema.optional(),
  /** Argument values and tool results: only with `audit: { includeValues: true }`. */
  args: JsonValueSchema.optional(),
  result: z.string().optional(),
});
/** An {@link AuditEventSchema} value. */
export type AuditEvent = z.infer<typeof AuditEventSchema>;


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

// ---------------------------------------------------------------------------------------------
// Side effects

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

// ---------------------------------------------------------------------------------------------
// Guardrail verdicts and approvals

/** Every action a guardrail verdict can take; see {@link GuardrailVerdictSchema}. */
export const GUARDRAIL_ACTIONS = ["allow", "deny", "observe", "approve"] as const;

/** One rule a guardrail checked. */
export const DetectionSchema = z
  .object({
    rule: IdSchema,
    detected: z.boolean(),
  })
  .catchall(JsonValueSchema);
/** A {@link DetectionSchema} value. */
export type Detection = z.infer<typeof DetectionSchema>;

/**
 * What a guardrail says should happen to a call. It never changes anything itself.
 * - `allow`: nothing to object to;
 * - `deny`: refuse the call (the model gets `code`, `reason` and `details`);
 * - `observe`: record what would have been refused, and let the call run;
 * - `approve`: pause for a person's decision before anything runs.
 */
export const GuardrailVerdictSchema = z.strictObject({
  action: z.enum(GUARDRAIL_ACTIONS),
  /** `partial` when the check could not finish (it threw or timed out): never clean. */
  outcome: z.enum(["complete", "partial"]),
  detections: z.array(DetectionSchema),
  /** Shown to the model on a denial, and to the approver. Keep server detail out of it. */
  reason: z.string().optional(),
  /** The refusal code on a denial; default `guardrail_denied`. */
  code: z.string().regex(/^[a-z][a-z0-9_]*$/, "a snake_case code").optional(),
  /** Extra fields for the model's refusal content on a denial. */
  details: z.record(z.string(), JsonValueSchema).optional(),
});
/** A {@link GuardrailVerdictSchema} value: what `Guardrail.check` returns. */
export type GuardrailVerdict = z.infer<typeof GuardrailVerdictSchema>;
/** The `action` of a {@link GuardrailVerdict}. */
export type GuardrailAction = GuardrailVerdict["action"];

/**
 * Which check of which call a verdict is bound to. The tool is part of it, by name and by
 * fingerprint: a verdict recorded for one tool never answers for another tool's call, whatever its
 * id and arguments, nor for the same tool once its description or schema changed.
 */
export const VerdictKeySchema = z.strictObject({
  turnKey: DigestSchema,
  toolCallId: IdSchema,
  toolName: IdSchema,
  /** `toolFingerprint(tool)`: the tool's name, description and declared input schema. */
  toolFingerprint: DigestSchema,
  guardrail: IdSchema,
  argsDigest: DigestSchema,
});
/** A {@link VerdictKeySchema} value. */
export type VerdictKey = z.infer<typeof VerdictKeySchema>;

/** A stored verdict, read back on a replay so the check does not run again. */
export const VerdictRecordSchema = VerdictKeySchema.extend({
  verdict: GuardrailVerdictSchema,
  recordedAt: TimestampSchema,
});
/** A {@link VerdictRecordSchema} value. */
export type VerdictRecord = z.infer<typeof VerdictRecordSchema>;

/** A person's answer to an approval request: the resume value of the interrupt. */
export const ApprovalDecisionSchema = z.discriminatedUnion("decision", [
  z.strictObject({ decision: z.literal("approve") }),
  z.strictObject({ decision: z.literal("reject"), message: z.string().optional() }),
  z.strictObject({ decision: z.literal("edit"), args: z.record(z.string(), JsonValueSchema) }),
]);
/** An {@link ApprovalDecisionSchema} value. */
export type ApprovalDecision = z.infer<typeof ApprovalDecisionSchema>;

/**
 * Where an approval request is in its lifecycle:
 * - `pending`: asked, not yet decided;
 * - `approved`, `rejected`, `edited`: decided (the first decision wins; it is never changed);
 * - `applied`: an approved or edited request whose call was carried out (its decision is kept);
 * - `expired`: nobody decided before `expireApprovals` retired it; it can no longer be decided;
 * - `orphaned`: approved or edited, but its call was never carried out before `orphanApprovals`
 *   retired it (the worker that was to resume it died): its decision is kept, it can no longer be
 *   applied, and a late resume of its call is refused `approval_orphaned`.
 */
export const APPROVAL_STATUSES = ["pending", "approved", "rejected", "edited", "applied", "expired", "orphaned"] as const;
/** Parses an {@link ApprovalStatus}. */
export const ApprovalStatusSchema = z.enum(APPROVAL_STATUSES);
/** One of {@link APPROVAL_STATUSES}. */
export type ApprovalStatus = z.infer<typeof ApprovalStatusSchema>;

/** The status a decision moves a pending request to. */
export const DECIDED_STATUS = { approve: "approved", reject: "rejected", edit: "edited" } as const satisfies Record<
  ApprovalDecision["decision"],
  ApprovalStatus
>;

/**
 * What the middleware submits when a call needs a person's approval: one request per call, bound
 * to the turn, the tool, the call id and the arguments by `approvalId`, naming every guardrail
 * that asked.
 */
export const ApprovalRequestSchema = z.strictObject({
  /**
   * `digest({ kind: "arkah.approval", v: 1, turnKey, toolName, toolFingerprint, toolCallId, argsDigest, execution })`:
   * docs/architecture.md#keys.
   */
  approvalId: DigestSchema,
  turnKey: DigestSchema,
  scopeId: IdSchema,
  toolCallId: IdSchema,
  toolName: IdSchema,
  /** `toolFingerprint(tool)` of the tool the person is asked about. */
  toolFingerprint: DigestSchema,
  argsDigest: DigestSchema,
  /** The arguments the person is asked about. */
  args: z.record(z.string(), JsonValueSchema),
  /** The guardrails that asked for approval, in order. */
  guardrails: z.array(IdSchema).min(1, "name at least one guardrail"),
  /** The guardrails' reasons, shown to the person. */
  reason: z.string().optional(),
  requestedAt: TimestampSchema,
});
/** (Named apart from the port's `ApprovalRequest`, the interrupt payload a person answers.) */
export type ApprovalSubmission = z.infer<typeof ApprovalRequestSchema>;

/**
 * A stored approval request and where it is in its lifecycle. Its fields agree with its status:
 * a decision (with `decidedAt`, and `operatorRef` if one was given) exactly when it was decided,
 * of the kind its status names (an applied or orphaned one was approved or edited); `appliedAt`
 * exactly when applied; `expiredAt` exactly when expired; `orphanedAt` exactly when orphaned.
 */
export const ApprovalRecordSchema = ApprovalRequestSchema.extend({
  /**
   * Absent only on a request stored before the SQLite and PostgreSQL stores' schema version 3,
   * which did not have it (the middleware never asks for such a request again: its id changed).
   */
  toolFingerprint: DigestSchema.optional(),
  status: ApprovalStatusSchema,
  /** Present once decided, and kept when applied. */
  decision: ApprovalDecisionSchema.optional(),
  /** Who decided, when the decision named someone. */
  operatorRef: IdSchema.optional(),
  decidedAt: TimestampSchema.optional(),
  appliedAt: TimestampSchema.optional(),
  expiredAt: TimestampSchema.optional(),
  /** When `orphanApprovals` retired the decided request whose call was never carried out. */
  orphanedAt: TimestampSchema.optional(),
}).superRefine((record, ctx) => {
  const problem = (path: string, message: string) => {
    ctx.addIssue({ code: "custom", path: [path], message });
  };
  const decided = record.status !== "pending" && record.status !== "expired";
  if (decided !== (record.decision !== undefined)) {
    problem("decision", `a ${record.status} request ${decided ? "needs" : "has no"} decision`);
  }
  if (decided !== (record.decidedAt !== undefined)) {
    problem("decidedAt", `a ${record.status} request ${decided ? "needs" : "has no"} decidedAt`);
  }
  if (!decided && record.operatorRef !== undefined) problem("operatorRef", `a ${record.status} request has no operatorRef`);
  if (record.decision !== undefined) {
    const status = DECIDED_STATUS[record.decision.decision];
    const consistent = record.status === status || ((record.status === "applied" || record.status === "orphaned") && status !== "rejected");
    if (!consistent) problem("status", `a ${record.decision.decision} decision cannot leave a request ${record.status}`);
  }
  if ((record.status === "applied") !== (record.appliedAt !== undefined)) {
    problem("appliedAt", "appliedAt is present exactly when the request is applied");
  }
  if ((record.status === "expired") !== (record.expiredAt !== undefined)) {
    problem("expiredAt", "expiredAt is present exactly when the request is expired");
  }
  if ((record.status === "orphaned") !== (record.orphanedAt !== undefined)) {
    problem("orphanedAt", "orphanedAt is present exactly when the request is orphaned");
  }
});
/** An {@link ApprovalRecordSchema} value. */
export type ApprovalRecord = z.infer<typeof ApprovalRecordSchema>;

/** A person's (or an operator's) decision on a pending request. */
export const DecideApprovalInputSchema = z.strictObject({
  approvalId: DigestSchema,
  decision: ApprovalDecisionSchema,
  /** Who decided, for the record and the audit trail. */
  operatorRef: IdSchema.optional(),
  decidedAt: TimestampSchema,
});
/** A {@link DecideApprovalInputSchema} value. */
export type DecideApprovalInput = z.infer<typeof DecideApprovalInputSchema>;

/**
 * `decideApproval`'s answer: whether this decision is the request's, and the request as it stands.
 * A decision re-delivered (the same kind, `message`, canonically equal `args` and `operatorRef` as
 * the recorded one) answers `decided: true` again with `repeated: true`: nothing changed, nothing
 * was appended.
 */
export const ApprovalDecisionResultSchema = z.discriminatedUnion("decided", [
  /**
   * The request was pending: this decision is now its decision. Or (`repeated: true`) this very
   * decision was recorded before and the request is still decided or applied by it: the record as
   * it stands, unchanged.
   */
  z.strictObject({ decided: z.literal(true), record: ApprovalRecordSchema, repeated: z.literal(true).optional() }),
  /**
   * Nothing changed: no such request (`not_found`, no record), or it was decided (or applied)
   * before by another decision (`already_decided`), or it expired (`expired`), or it was orphaned
   * (`orphaned`: whatever the decision, its call can no longer run); `record` is the request as it stands.
   */
  z.strictObject({
    decided: z.literal(false),
    reason: z.enum(["not_found", "already_decided", "expired", "orphaned"]),
    record: ApprovalRecordSchema.optional(),
  }),
]);
/** An {@link ApprovalDecisionResultSchema} value. */
export type ApprovalDecisionResult = z.infer<typeof ApprovalDecisionResultSchema>;

/** Marks an approved or edited request applied: its call was carried out. */
export const ApplyApprovalInputSchema = z.strictObject({ approvalId: DigestSchema, appliedAt: TimestampSchema });
/** An {@link ApplyApprovalInputSchema} value. */
export type ApplyApprovalInput = z.infer<typeof ApplyApprovalInputSchema>;

/** `listApprovals`' filter: by status and turn, at most `limit` requests. */
export const ApprovalQuerySchema = z.strictObject({
  status: ApprovalStatusSchema.optional(),
  turnKey: DigestSchema.optional(),
  limit: z.int().min(1).max(10_000).optional(),
});
/** An {@link ApprovalQuerySchema} value. */
export type ApprovalQuery = z.infer<typeof ApprovalQuerySchema>;

/** `expireApprovals`' input: retires pending requests nobody decided in time. */
export const ExpireApprovalsInputSchema = z.strictObject({
  /** Pending requests made before this instant expire. */
  olderThan: TimestampSchema,
});
/** An {@link ExpireApprovalsInputSchema} value. */
export type ExpireApprovalsInput = z.infer<typeof ExpireApprovalsInputSchema>;

/** `expireApprovals`' answer: how many requests it expired. */
export const ExpireApprovalsResultSchema = z.strictObject({ expired: z.int().min(0) });
/** An {@link ExpireApprovalsResultSchema} value. */
export type ExpireApprovalsResult = z.infer<typeof ExpireApprovalsResultSchema>;

/**
 * `orphanApprovals`' input: retires decided requests whose call was never carried out. The cut-off
 * is on `decidedAt`, not `requestedAt`: the lease that ran out is the resuming worker's, which
 * starts at the decision.
 */
export const OrphanApprovalsInputSchema = z.strictObject({
  /** `approved` and `edited` requests decided before this instant (and not applied) are orphaned. */
  decidedBefore: TimestampSchema,
});
/** An {@link OrphanApprovalsInputSchema} value. */
export type OrphanApprovalsInput = z.infer<typeof OrphanApprovalsInputSchema>;

/** `orphanApprovals`' answer: how many requests it orphaned. */
export const OrphanApprovalsResultSchema = z.strictObject({ orphaned: z.int().min(0) });
/** An {@link OrphanApprovalsResultSchema} value. */
export type OrphanApprovalsResult = z.infer<typeof OrphanApprovalsResultSchema>;

// ---------------------------------------------------------------------------------------------
// Audit trail

/** An audit event as read back: the store numbers events in the order they were appended. */
export const StoredAuditEventSchema = AuditEventSchema.extend({ seq: z.int().min(1) });
/** A {@link StoredAuditEventSchema} value. */
export type StoredAuditEvent = z.infer<typeof StoredAuditEventSchema>;

/** `readAudit`'s filter; filters combine, in `seq` order. */
export const AuditQuerySchema = z.strictObject({
  /** Events at or after this time. */
  since: TimestampSchema.optional(),
  /** Events after this sequence number (for paging). */
  afterSeq: z.int().min(0).optional(),
  /** Only the events of this turn (exact match). */
  turnKey: DigestSchema.optional(),
  /** Only the events in this scope (exact match). */
  scopeId: IdSchema.optional(),
  /**
   * Only the events about this approval request (exact match): its history, in order: `requested`,
   * decisions, refused decisions and answers, then `applied`, `expired` or `orphaned`.
   */
  approvalId: DigestSchema.optional(),
  /** At most this many events (of those that match). */
  limit: z.int().min(1).max(10_000).optional(),
});
/** An {@link AuditQuerySchema} value. */
export type AuditQuery = z.infer<typeof AuditQuerySchema>;

/** Names the consumer an audit cursor belongs to (`deliverAudit`'s `sinkName`). */
export const AuditSinkNameSchema = IdSchema;

/** The sequence number an audit sink has been delivered up to: 0 before any event. */
export const AuditCursorSchema = z.int().min(0);

/**
 * Moves a sink's audit cursor forward to `seq` (the last event delivered to it). Forward only: a
 * `seq` at or below the cursor changes nothing.
 */
export const AdvanceAuditCursorInputSchema = z.strictObject({ sink: AuditSinkNameSchema, seq: AuditCursorSchema });
/** An {@link AdvanceAuditCursorInputSchema} value. */
export type AdvanceAuditCursorInput = z.infer<typeof AdvanceAuditCursorInputSchema>;

// ---------------------------------------------------------------------------------------------
// Reconciliation and retention

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

// ---------------------------------------------------------------------------------------------
// Turn records (the turn service's lifecycle)

/**
 * Where a turn is in the turn service's lifecycle:
 * - `running`: a worker holds its lease and runs it;
 * - `awaiting_approval`: paused on approval requests (a decision resumes it);
 * - `completed`, `refused`, `failed`: finished; a retry answers the stored outcome.
 */
export type TurnState = "running" | "awaiting_approval" | "completed" | "refused" | "failed";
/** Every turn state, in lifecycle order. */
export const TURN_STATES = ["running", "awaiting_approval", "completed", "refused", "failed"] as const satisfies readonly TurnState[];
/** Parses a turn state. */
export const TurnStateSchema = z.enum(TURN_STATES);

/** How long a lease may be asked for: 1 ms to 24 hours. */
const LeaseMsSchema = z.int().min(1).max(86_400_000);

/** What a turn is: everything `beginTurn` stores when it first sees the turn key. */
export interface TurnStart {
  /** `turnKey(input)`. */
  readonly turnKey: string;
  /** The input's `scopeId`. */
  readonly scopeId: string;
  /** The input's `principal`, when it names one. */
  readonly principal?: string;
  /** The trusted turn as admitted: a resume rebuilds the run's `context` from it. */
  readonly input: TurnInput;
  /** Digest of the canonical turn input: the same key with another digest is `input_mismatch`. */
  readonly inputDigest: string;
  /**
   * What identifies the request: `digest({ kind: "arkah.turn-request", v: 1, principal, turnId })`
   * (`principal` null when there is none). A request key belongs to one turn key: `beginTurn` of
   * another turn key (the same request with another `scopeId`) is `input_mismatch`.
   */
  readonly requestKey: string;
  /** The LangGraph thread the turn runs on. */
  readonly threadId: string;
}

const turnStartFields = {
  turnKey: DigestSchema,
  scopeId: IdSchema,
  principal: IdSchema.optional(),
  input: TurnInputSchema,
  inputDigest: DigestSchema,
  threadId: IdSchema,
};

/** Parses a {@link TurnStart}: its `scopeId` and `principal` must be the input's. */
export const TurnStartSchema: z.ZodType<TurnStart> = z.strictObject({ ...turnStartFields, requestKey: DigestSchema }).superRefine((start, ctx) => {
  if (start.scopeId !== start.input.scopeId) ctx.addIssue({ code: "custom", path: ["scopeId"], message: "scopeId must be the input's scopeId" });
  if (start.principal !== start.input.principal) {
    ctx.addIssue({ code: "custom", path: ["principal"], message: "principal must be the input's principal" });
  }
});

/** Who runs a `running` turn, until when. Another worker may take the turn over once it expired. */
export interface TurnLease {
  /** The holder's token: `finishTurn` applies only with it. */
  readonly token: string;
  /** When the lease expires, at the store's clock. */
  readonly expiresAt: string;
}
/** Parses a {@link TurnLease}. */
export const TurnLeaseSchema: z.ZodType<TurnLease> = z.strictObject({ token: IdSchema, expiresAt: TimestampSchema });

/**
 * A stored turn. A `running` turn has a lease and no outcome; every other state has an outcome
 * (the turn service's JSON answer, opaque to the store) and no lease.
 */
export interface TurnRecord extends Omit<TurnStart, "requestKey"> {
  /** The turn's {@link TurnStart.requestKey}; absent on a turn stored before the stores kept one (SQLite and PostgreSQL schema version 7). */
  readonly requestKey?: string;
  /** Where the turn is. */
  readonly state: TurnState;
  /** The stored outcome; present exactly when the turn is not running. */
  readonly outcome?: JsonValue;
  /** The running worker's lease; present exactly when the turn is running. */
  readonly lease?: TurnLease;
  /** When `beginTurn` first stored it. */
  readonly createdAt: string;
  /** When it last changed (prune's clock). */
  readonly updatedAt: string;
}
/** Parses a {@link TurnRecord}, checking that its lease and outcome agree with its state. */
export const TurnRecordSchema: z.ZodType<TurnRecord> = z
  .strictObject({
    ...turnStartFields,
    requestKey: DigestSchema.optional(),
    state: TurnStateSchema,
    outcome: JsonValueSchema.optional(),
    lease: TurnLeaseSchema.optional(),
    createdAt: TimestampSchema,
    updatedAt: TimestampSchema,
  })
  .superRefine((record, ctx) => {
    const running = record.state === "running";
    if (running !== (record.lease !== undefined)) {
      ctx.addIssue({ code: "custom", path: ["lease"], message: "a turn has a lease exactly when it is running" });
    }
    if (running === (record.outcome !== undefined)) {
      ctx.addIssue({ code: "custom", path: ["outcome"], message: "a turn has an outcome exactly when it is not running" });
    }
    if (record.scopeId !== record.input.scopeId || record.principal !== record.input.principal) {
      ctx.addIssue({ code: "custom", path: ["input"], message: "scopeId and principal must be the input's" });
    }
  });

/** `beginTurn`'s input: the turn, and how long the lease it may grant lasts. */
export interface BeginTurnInput {
  /** The turn, stored if it is new. */
  readonly turn: TurnStart;
  /** The lease's length in ms (1 to 86 400 000), from the store's clock. */
  readonly leaseMs: number;
}
/** Parses a {@link BeginTurnInput}. */
export const BeginTurnInputSchema: z.ZodType<BeginTurnInput> = z.strictObject({ turn: TurnStartSchema, leaseMs: LeaseMsSchema });

/**
 * `beginTurn`'s answer; only `started` and `taken_over` let the caller run the turn:
 * - `started`: the turn was new; it is stored `running` and the caller holds its lease (`token`);
 * - `taken_over`: it was `running` under an expired lease; the caller holds a new one and resumes from the checkpoint;
 * - `running`: another worker holds an unexpired lease; nothing changed;
 * - `finished`: it is `awaiting_approval`, `completed`, `refused` or `failed`; nothing changed;
 * - `input_mismatch`: it was begun with another input digest, or it is new and its request key
 *   belongs to another turn; nothing changed.
 */
export type BeginTurnResult =
  | { readonly status: "started" | "taken_over"; readonly token: string; readonly record: TurnRecord }
  | { readonly status: "running" | "finished"; readonly record: TurnRecord }
  | { readonly status: "input_mismatch" };
/** Parses a {@link BeginTurnResult}. */
export const BeginTurnResultSchema: z.ZodType<BeginTurnResult> = z.discriminatedUnion("status", [
  z.strictObject({ status: z.literal("started"), token: IdSchema, record: TurnRecordSchema }),
  z.strictObject({ status: z.literal("taken_over"), token: IdSchema, record: TurnRecordSchema }),
  z.strictObject({ status: z.literal("running"), record: TurnRecordSchema }),
  z.strictObject({ status: z.literal("finished"), record: TurnRecordSchema }),
  z.strictObject({ status: z.literal("input_mismatch") }),
]);

/** `finishTurn`'s input: compare-and-set from `running` by the lease token. */
export interface FinishTurnInput {
  /** The turn. */
  readonly turnKey: string;
  /** The lease token `beginTurn` or `resumeTurn` issued. */
  readonly token: string;
  /** The state to store. */
  readonly state: Exclude<TurnState, "running">;
  /** The outcome to store (JSON). */
  readonly outcome: JsonValue;
}
/** Parses a {@link FinishTurnInput}. */
export const FinishTurnInputSchema: z.ZodType<FinishTurnInput> = z.strictObject({
  turnKey: DigestSchema,
  token: IdSchema,
  state: z.enum(["awaiting_approval", "completed", "refused", "failed"]),
  outcome: JsonValueSchema,
});

/** `resumeTurn`'s input: take an `awaiting_approval` turn back to `running` under a new lease. */
export interface ResumeTurnInput {
  /** The turn. */
  readonly turnKey: string;
  /** The new lease's length in ms (1 to 86 400 000). */
  readonly leaseMs: number;
  /**
   * The state it is taken from: `awaiting_approval` (default: a decided pause resumes) or `failed`
   * (a failure that left no effect is run again: the turn service decides which, from the outcome).
   */
  readonly from?: "awaiting_approval" | "failed";
}
/** Parses a {@link ResumeTurnInput}. */
export const ResumeTurnInputSchema: z.ZodType<ResumeTurnInput> = z.strictObject({
  turnKey: DigestSchema,
  leaseMs: LeaseMsSchema,
  from: z.enum(["awaiting_approval", "failed"]).optional(),
});

/**
 * `resumeTurn`'s answer: the caller holds the new lease (`resumed: true`), or nothing changed: no
 * such turn (no `record`), or it is not in the state asked for (`from`).
 */
export type ResumeTurnResult =
  | { readonly resumed: true; readonly token: string; readonly record: TurnRecord }
  | { readonly resumed: false; readonly record?: TurnRecord };
/** Parses a {@link ResumeTurnResult}. */
export const ResumeTurnResultSchema: z.ZodType<ResumeTurnResult> = z.discriminatedUnion("resumed", [
  z.strictObject({ resumed: z.literal(true), token: IdSchema, record: TurnRecordSchema }),
  z.strictObject({ resumed: z.literal(false), record: TurnRecordSchema.optional() }),
]);

/** `renewTurn`'s input: extend a running turn's lease, compare-and-set by its token. */
export interface RenewTurnInput {
  /** The turn. */
  readonly turnKey: string;
  /** The lease token `beginTurn` or `resumeTurn` issued. */
  readonly token: string;
  /** The lease's new length in ms (1 to 86 400 000), from the store's clock now. */
  readonly leaseMs: number;
}
/** Parses a {@link RenewTurnInput}. */
export const RenewTurnInputSchema: z.ZodType<RenewTurnInput> = z.strictObject({ turnKey: DigestSchema, token: IdSchema, leaseMs: LeaseMsSchema });

/** The most turns one `listTurns` answers. */
export const MAX_LIST_TURNS = 1000;

/**
 * `listTurns`' query, in turn key order, at most `limit` (default 100), after the turn key `after`
 * (paging): the live turns a recovery sweep looks for (`running`, `awaiting_approval`), or the
 * finished turn records `prune({ olderThan })` would remove (`finished` with `olderThan`), whose
 * checkpoint threads the turn service deletes before it prunes them.
 */
export interface ListTurnsQuery {
  /**
   * `running` or `awaiting_approval`; or `finished`: the turns in a finished state (`completed`,
   * `refused`, `failed`) last updated before `olderThan`, exactly the turn records `prune` removes.
   */
  readonly state: "running" | "awaiting_approval" | "finished";
  /** With `running`: only turns whose lease expired at the store's clock (any other worker may take them over). */
  readonly expired?: boolean;
  /** With `awaiting_approval`: only turns none of whose approval requests is `pending` (every one decided or expired). */
  readonly decided?: boolean;
  /** With `finished`, and required there: only turns last updated strictly before this time, as `prune({ olderThan })` compares. */
  readonly olderThan?: string;
  /** Only turns whose key sorts after this one (the last key of the previous page). */
  readonly after?: string;
  /** At most this many turns (1 to {@link MAX_LIST_TURNS}; default 100). */
  readonly limit?: number;
}
/**
 * Parses a {@link ListTurnsQuery}: `expired` only with `running`, `decided` only with
 * `awaiting_approval`, `olderThan` exactly with `finished`.
 */
export const ListTurnsQuerySchema: z.ZodType<ListTurnsQuery> = z
  .strictObject({
    state: z.enum(["running", "awaiting_approval", "finished"]),
    expired: z.boolean().optional(),
    decided: z.boolean().optional(),
    olderThan: TimestampSchema.optional(),
    after: DigestSchema.optional(),
    limit: z.int().min(1).max(MAX_LIST_TURNS).optional(),
  })
  .superRefine((query, ctx) => {
    if (query.expired !== undefined && query.state !== "running") ctx.addIssue({ code: "custom", path: ["expired"], message: "expired filters running turns only" });
    if (query.decided !== undefined && query.state !== "awaiting_approval") {
      ctx.addIssue({ code: "custom", path: ["decided"], message: "decided filters awaiting_approval turns only" });
    }
    if ((query.olderThan !== undefined) !== (query.state === "finished")) {
      ctx.addIssue({ code: "custom", path: ["olderThan"], message: "olderThan goes with finished, and finished needs it" });
    }
  });

/** A turn's mutation claim as `getMutation` reads it: its state, the call, and the result once complete. */
export interface MutationStatus {
  /** `pruned`: a tombstone, the result is gone. */
  readonly state: "pending" | "complete" | "unknown" | "pruned";
  /** The tool of the call holding the slot. */
  readonly toolName: string;
  /** The call holding the slot. */
  readonly toolCallId: string;
  /** The stored result: present exactly when `complete`. */
  readonly result?: MutationResult;
}
/** Parses a {@link MutationStatus}. */
export const MutationStatusSchema: z.ZodType<MutationStatus> = z
  .strictObject({
    state: z.enum(["pending", "complete", "unknown", "pruned"]),
    toolName: IdSchema,
    toolCallId: IdSchema,
    result: MutationResultSchema.optional(),
  })
  .refine((status) => (status.state === "complete") === (status.result !== undefined), {
    error: "a complete mutation has a result, and no other does",
    path: ["result"],
  });

/** A side effect's claim as `getEffect` reads it: the same shape as a mutation's. */
export type EffectStatus = MutationStatus;
/** Parses an {@link EffectStatus}. */
export const EffectStatusSchema: z.ZodType<EffectStatus> = MutationStatusSchema;

// ---------------------------------------------------------------------------------------------
// The store

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
  /**
   * Records read evidence: an idempotent insert. With `options.audit`, appends that event in the
   * same transaction, every time it is given (also when the evidence was already recorded).
   */
  recordSuccessfulRead(evidence: ReadEvidence, options?: RecordReadOptions): Promise<void>;
  /**
   * True only for evidence recorded for exactly this turn key and digest. The middleware does not
   * ask it: it passes the evidence to `claimMutation` as `readEvidence`, checked in the claim's own
   * transaction. Kept for custom stores and hosts.
   */
  hasSuccessfulRead(evidence: ReadEvidence): Promise<boolean>;
  /**
   * Atomically claims the turn's single mutation slot. One winner across all workers. A turn
   * whose completed claim was pruned answers `conflict`: it is never reopened. With
   * `options.readEvidence`, the claim first requires one of those digests recorded for the turn,
   * else answers `read_required` and changes nothing; all in one transaction.
   */
  claimMutation(identity: MutationIdentity, options?: ClaimOptions): Promise<ClaimResult>;
  /**
   * Settles a pending claim. Returns false, changing nothing, unless the claim is pending and
   * `token` is the one `claimMutation` issued. A settlement that throws leaves the claim pending.
   * `settlement.audit` is appended in the same transaction exactly when it returns true.
   */
  settleMutation(settlement: MutationSettlement): Promise<boolean>;
  /**
   * Releases a pending claim whose tool body provably never started, with a `released` audit
   * event, atomically: the turn's slot is open again as if it had never been claimed. Returns
   * false, changing nothing, unless the claim is pending and `token` is the one `claimMutation`
   * issued. Never use it for a body that may have started: settle that `unknown` (the one
   * exception: a body that threw `NoEffectError`, asserting nothing was written).
   */
  releaseMutation(release: MutationRelease): Promise<boolean>;
  /** Stores a guardrail's verdict unless one exists for its key; returns whichever won. */
  recordVerdict(record: VerdictRecord): Promise<VerdictRecord>;
  /** The verdict recorded for exactly this key (turn, call id, tool, guardrail, arguments). */
  getVerdict(key: VerdictKey): Promise<VerdictRecord | undefined>;
  /**
   * Stores `request` as a `pending` approval unless one exists for its `approvalId`, appending a
   * `requested` audit event with it, atomically. Returns the stored record: the new one, or the
   * existing one, unchanged, whatever its status.
   */
  requestApproval(request: ApprovalSubmission): Promise<ApprovalRecord>;
  /** The stored request with this id, whatever its status; `undefined` when there is none. */
  getApproval(approvalId: string): Promise<ApprovalRecord | undefined>;
  /**
   * Decides a pending request (the first decision wins) and audits it, atomically. A refused
   * decision (`already_decided`, `expired`, `orphaned`) changes nothing but is audited
   * (`decision_refused`); `not_found` changes and appends nothing. The recorded decision
   * re-delivered, on a request still decided or applied by it, answers `decided: true,
   * repeated: true` and appends nothing.
   */
  decideApproval(input: DecideApprovalInput): Promise<ApprovalDecisionResult>;
  /**
   * Compare-and-set of an `approved` or `edited` request to `applied`, audited. False, changing
   * nothing, for any other status or no request.
   */
  applyApproval(input: ApplyApprovalInput): Promise<boolean>;
  /** Approval requests, oldest `requestedAt` first; ties in the order they were requested (between requests made concurrently, unspecified). */
  listApprovals(query?: ApprovalQuery): Promise<ApprovalRecord[]>;
  /** Expires every `pending` request made before `olderThan`, one audit event each. */
  expireApprovals(input: ExpireApprovalsInput): Promise<ExpireApprovalsResult>;
  /**
   * Orphans every `approved` or `edited` request decided before `decidedBefore` (never pending,
   * rejected, applied, expired or orphaned ones), one `orphaned` audit event each, atomically per
   * request: `applyApproval` answers false for it from then on.
   */
  orphanApprovals(input: OrphanApprovalsInput): Promise<OrphanApprovalsResult>;
  /** Appends to the audit trail. Append-only: events are never changed or removed by the store. */
  appendAudit(event: AuditEvent): Promise<void>;
  /** Audit events in the order they were appended, oldest first; `turnKey`, `scopeId` and `approvalId` filter exactly. */
  readAudit(query?: AuditQuery): Promise<StoredAuditEvent[]>;
  /** The sequence number `sink` has been delivered up to: 0 when it has no cursor. */
  getAuditCursor(sink: string): Promise<number>;
  /**
   * Moves `sink`'s cursor forward to `seq`, atomically under concurrency. Returns true if it moved;
   * false, changing nothing, when `seq` is at or below the cursor.
   */
  advanceAuditCursor(input: AdvanceAuditCursorInput): Promise<boolean>;
  /** Every `pending` or `unknown` mutation, oldest claim first. */
  listUnresolved(): Promise<UnresolvedMutation[]>;
  /**
   * Resolves a `pending` or `unknown` mutation on an operator's word, and appends a `reconciled`
   * audit event, atomically. With `mutationKey`, only the claim of that call (`other_call`
   * otherwise). Anything else changes nothing and says why.
   */
  reconcileMutation(reconciliation: Reconciliation): Promise<ReconcileResult>;
  /**
   * Removes completed mutations settled before `olderThan`, with their turns' read evidence,
   * verdicts and approval requests, keeping a tombstone per turn so a replay is refused, not reopened.
   * Unresolved claims, receipts and the audit trail are kept. Finished turn records
   * (`completed`, `refused`, `failed`) last updated before `olderThan` are removed too. A store
   * with the `effects` part also prunes completed side effects settled before `olderThan` to
   * tombstones (a later claim of one answers `pruned`), and counts them in `effects`.
   */
  prune(options: PruneOptions): Promise<PruneResult>;
  /** The state of the turn's mutation claim, if it has one; read only. */
  getMutation(turnKey: string): Promise<MutationStatus | undefined>;
  /**
   * Begins or joins a turn, atomically: stores it `running` under a new lease if it is new
   * (`started`), takes over a `running` turn whose lease expired at the store's clock
   * (`taken_over`, the old token no longer finishes it), else changes nothing and answers
   * `running`, `finished` (with the record) or `input_mismatch` (another input digest).
   */
  beginTurn(input: BeginTurnInput): Promise<BeginTurnResult>;
  /**
   * Compare-and-set from `running` by the lease token (expired or not, as long as nobody took the
   * turn over): stores the state and outcome and drops the lease. False, changing nothing, otherwise.
   */
  finishTurn(input: FinishTurnInput): Promise<boolean>;
  /**
   * Compare-and-set from `awaiting_approval` (or `input.from`: `failed`) to `running` under a new
   * lease, dropping the outcome: of concurrent callers, one resumes. Anything else changes nothing.
   */
  resumeTurn(input: ResumeTurnInput): Promise<ResumeTurnResult>;
  /**
   * Extends a running turn's lease to `leaseMs` from the store's clock now: compare-and-set by the
   * lease token while the turn is `running` (expired or not, as long as nobody took it over).
   * False, changing nothing, otherwise: the holder lost the turn. Changes nothing else (not `updatedAt`).
   */
  renewTurn(input: RenewTurnInput): Promise<boolean>;
  /**
   * Live turns, in turn key order: `running` ones (with `expired`, only those whose lease expired
   * at the store's clock) or `awaiting_approval` ones (with `decided`, only those with no `pending`
   * approval request). Read only; served by an index of live turns, never a scan of finished ones.
   */
  listTurns(query: ListTurnsQuery): Promise<TurnRecord[]>;
  /** The stored turn, whatever its state; `undefined` when there is none. */
  getTurn(turnKey: string): Promise<TurnRecord | undefined>;
  /**
   * Atomically claims one side effect by its `effectKey`: one winner across all workers. An
   * existing claim answers `replay`, `pending`, `unknown` or `pruned`; with `options.maxPerTurn`,
   * a new effect beyond the turn's limit for its tool answers `limit_reached`. Never touches the
   * turn's mutation slot, and needs no read.
   */
  claimEffect(identity: EffectIdentity, options?: EffectClaimOptions): Promise<EffectClaimResult>;
  /** Settles a pending effect claim, as `settleMutation` does a mutation's. */
  settleEffect(settlement: EffectSettlement): Promise<boolean>;
  /**
   * Releases a pending effect claim, with a `released` audit event, atomically, as
   * `releaseMutation` does: the effect's claim is gone and it no longer counts toward `maxPerTurn`.
   */
  releaseEffect(release: EffectRelease): Promise<boolean>;
  /** The state of one side effect's claim, if it has one; read only. */
  getEffect(effectKey: string): Promise<EffectStatus | undefined>;
  /** Every `pending` or `unknown` side effect, oldest claim first. */
  listUnresolvedEffects(): Promise<UnresolvedEffect[]>;
  /**
   * Resolves a `pending` or `unknown` side effect on an operator's word, with a `reconciled` audit
   * event, atomically: `completed` stores the result later replays return; `no-effect` removes
   * the claim. Anything else changes nothing and says why.
   */
  reconcileEffect(reconciliation: EffectReconciliation): Promise<ReconcileResult>;
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
  out_of_scope: "out_of_scope",
  unauthorized: "unauthorized",
  invalid_arguments: "invalid_arguments",
  guardrail_denied: "guardrail_denied",
  approval_rejected: "approval_rejected",
  approval_expired: "approval_expired",
  approval_orphaned: "approval_orphaned",
  read_batch_deferred: "read_batch_deferred",
  single_mutation: "single_mutation",
  read_required: "read_required",
  mutation_pending: "mutation_pending",
  mutation_unknown: "mutation_unknown",
  mutation_conflict: "mutation_conflict",
  scope_unresolved: "scope_unresolved",
  tool_failed: "tool_failed",
  unsupported_result: "unsupported_result",
  no_effect: "no_effect",
  tool_changed: "tool_changed",
  effect_pending: "effect_pending",
  effect_unknown: "effect_unknown",
  effect_pruned: "effect_pruned",
  effect_limit: "effect_limit",
  effect_unidentified: "effect_unidentified",
  tool_timeout: "tool_timeout",
} as const;
/** One of {@link REFUSAL_CODES}: the `guardrail` field of a refused call's `ToolMessage`. */
export type RefusalCode = (typeof REFUSAL_CODES)[keyof typeof REFUSAL_CODES];
