/**
 * Tool policies: what kind each tool is, and how its calls are keyed, retried, timed out and
 * confirmed (the `tools` option).
 */
import { z } from "zod";
import type { JsonValue } from "./primitives.js";

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
/**
 * Who retries a tool and how often: a tool policy's `retry`. Invalid combinations (several attempts
 * of a non-idempotent mutation, or with `owner: "tool"`) are a `ConfigurationError` when the
 * middleware is built.
 */
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
 * arguments and the call: its answer (plain JSON, at most 1024 characters as canonical JSON) joins
 * the call's `effectKey`; `null` keeps the key it has without one. It must answer the same for the
 * same call on a retry or a resume, or that call runs again.
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
  /** Aborted when the run is cancelled or `confirm` took longer than 10 seconds. */
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
/**
 * `confirm`'s answer: `completed` with the call's `result` (at most 1,048,576 UTF-16 code units)
 * and an optional `status`, `no-effect`, or `unknown`. Validated: anything else counts as `unknown`.
 */
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
/** One entry of the `tools` option: a tool's kind and how it is governed, validated when the middleware is built. */
export type ToolPolicy = z.infer<typeof ToolPolicySchema>;
