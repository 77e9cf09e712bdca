/**
 * The guardrail port: a small interface any check plugs into. A guardrail says what should happen
 * to a call; the pipeline applies it. It never changes anything itself.
 */
import type { GuardrailVerdict, JsonValue, ToolKind } from "../contracts/index.js";

/**
 * Where a guardrail can be evaluated. `tool-args` is the one evaluated today; the others are named
 * so an adapter written now stays valid when they are wired.
 */
export type GuardrailPlacement = "tool-args" | "model-input" | "model-output" | "tool-result";

/** A JSON Schema document, as a tool declares its input. */
export type JsonSchema = Readonly<Record<string, unknown>> | boolean;

/** What a `tool-args` guardrail is given. Everything in it is a copy. */
export interface GuardrailContext {
  /** Where the guardrail is evaluated: only `tool-args` is wired today. */
  readonly placement: "tool-args";
  /** The call being checked. */
  readonly toolCall: {
    readonly id: string;
    readonly name: string;
    /** The arguments as the tool's own schema parsed them: exactly what the tool body receives. */
    readonly args: Readonly<Record<string, JsonValue>>;
    /** The arguments as written (by the model, or by an approver's edit), before that parse. */
    readonly rawArgs: Readonly<Record<string, JsonValue>>;
  };
  /** The tool it is to. */
  readonly tool: {
    readonly name: string;
    /** The tool's kind, when a document guardrails middleware governs it. */
    readonly kind: ToolKind | undefined;
    /** The tool's declared input schema as JSON Schema (zod schemas converted), if any. */
    readonly schema: JsonSchema | undefined;
  };
  /** The turn the call belongs to. */
  readonly turn: { readonly scopeId: string; readonly turnId: string; readonly turnKey: string };
  /** Aborted when the run is cancelled or the guardrail's time is up. */
  readonly signal: AbortSignal;
}

/**
 * A check of a tool call's arguments that says what should happen to the call; the pipeline applies it.
 * Implement it for your own policy, moderation or approval rule (docs/guardrails.md).
 */
export interface Guardrail {
  /** Unique among the guardrails of one middleware; verdicts are recorded under it. */
  readonly name: string;
  /** Where it can be evaluated; it only runs where its placements include `tool-args`. */
  readonly placements: readonly GuardrailPlacement[];
  /** Only these tools; all tools when omitted. */
  readonly tools?: readonly string[];
  /** How long `check` may take before the call is denied (outcome `partial`). Default 10 s. */
  readonly timeoutMs?: number;
  /**
   * The verdict is a pure function of the call (its tool, arguments and turn): it is not recorded
   * in the store and read back on a replay, the check just runs again. Leave it unset for anything
   * that calls a service, samples, or reads the clock.
   */
  readonly deterministic?: boolean;
  /** The verdict for one call. A throw, a timeout or an invalid verdict is a `deny` (outcome `partial`). */
  check(context: GuardrailContext): GuardrailVerdict | Promise<GuardrailVerdict>;
}

/**
 * The interrupt payload of an approval request: what the person is asked to decide. One per
 * call, however many guardrails asked for approval (all of them are named).
 */
export interface ApprovalRequest {
  /** Tells this library's interrupts apart from other middleware's. */
  readonly type: "arkah.approval";
  /** The stored approval request this asks about (`GuardrailStore.getApproval`). */
  readonly approvalId: string;
  /** Every guardrail that asked for approval, in order. */
  readonly guardrails: readonly string[];
  /** The call the person is asked about. */
  readonly toolCallId: string;
  /** The tool it is to. */
  readonly tool: string;
  /** The arguments as the tool's schema parsed them: what will run if approved. */
  readonly args: Readonly<Record<string, JsonValue>>;
  /** `digest` of `args`: an approval covers exactly these arguments. */
  readonly argsDigest: string;
  /** The approving guardrails' reasons, joined. */
  readonly reason: string | undefined;
}

export function appliesTo(guardrail: Guardrail, toolName: string): boolean {
  return guardrail.placements.includes("tool-args") && (guardrail.tools?.includes(toolName) ?? true);
}
