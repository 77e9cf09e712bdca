/**
 * `requireApproval`: a ready-made guardrail that asks a person before the listed tools run (with
 * `when`, only the calls it matches). The pipeline pauses the call with a LangGraph interrupt
 * before any claim, carrying `{ tool, args, argsDigest, reason }`, and records the decision bound
 * to the call id and the argument digest, so an approval is never reused for other arguments or
 * another call.
 */
import { z } from "zod";
import type { GuardrailVerdict, JsonValue } from "../contracts/index.js";
import { ConfigurationError } from "../errors.js";
import type { Guardrail, GuardrailContext } from "./port.js";
import { hasCheckpointer, missingCheckpointer } from "./resume.js";

/** Marks the guardrails `requireApproval` builds: an agent they check must be able to pause. */
const APPROVAL_GUARDRAIL = Symbol.for("arkah-agent-guardrails.approval-guardrail");

/** The verdict for a call `when` does not match: it goes on without a person. */
const NOT_ASKED: GuardrailVerdict = { action: "allow", outcome: "complete", detections: [{ rule: "requires-approval", detected: false }] };

/** `requireApproval`'s options. */
export interface RequireApprovalOptions {
  /** The tools that need a person's approval. */
  readonly tools: readonly string[];
  /** What the person is shown; default `Approve <tool>?`. */
  readonly describe?: (call: { readonly name: string; readonly args: Readonly<Record<string, JsonValue>> }) => string;
  /** Default `"approval"`. */
  readonly name?: string;
  /**
   * Which calls of `tools` wait for a person: `true` asks, `false` lets the call go on without
   * one. It gets a copy of the parsed arguments (what the body receives, after the tool's own
   * parse; the model chose them) and the turn. A throw, or an answer that is not a boolean, asks
   * a person (the verdict's outcome is `partial`). The verdict is recorded, so a replay of the
   * call is not asked again. Default: every call asks.
   */
  readonly when?: (
    args: Readonly<Record<string, JsonValue>>,
    turn: GuardrailContext["turn"],
  ) => boolean | Promise<boolean>;
}

const OptionsSchema = z.strictObject({
  tools: z.array(z.string().min(1)).min(1, "name at least one tool"),
  describe: z.custom<NonNullable<RequireApprovalOptions["describe"]>>((value) => typeof value === "function").optional(),
  name: z.string().min(1).optional(),
  when: z.custom<NonNullable<RequireApprovalOptions["when"]>>((value) => typeof value === "function").optional(),
});

/** Throws `ConfigurationError` for invalid options. Needs a checkpointer on the agent. */
export function requireApproval(options: RequireApprovalOptions): Guardrail {
  const parsed = OptionsSchema.safeParse(options);
  if (!parsed.success) {
    throw new ConfigurationError(`invalid requireApproval options: ${z.prettifyError(parsed.error)}`);
  }
  const { tools, describe, name = "approval", when } = parsed.data;
  const ask = (toolCall: GuardrailContext["toolCall"], outcome: GuardrailVerdict["outcome"]): GuardrailVerdict => ({
    action: "approve",
    outcome,
    detections: [{ rule: "requires-approval", detected: true }],
    reason: describe?.({ name: toolCall.name, args: toolCall.args }) ?? `Approve ${toolCall.name}?`,
  });
  const guardrail: Guardrail & { readonly [APPROVAL_GUARDRAIL]: true } = {
    [APPROVAL_GUARDRAIL]: true,
    name,
    placements: ["tool-args"],
    tools,
    // Not `deterministic`, with or without `when`: the verdict is recorded and a replay reads it
    // back, so a condition that calls a service or reads the clock cannot answer a replay otherwise.
    check:
      when === undefined
        ? ({ toolCall }) => ask(toolCall, "complete")
        : async (context) => {
            const outcome = await askFor(when, context);
            return outcome === "allow" ? NOT_ASKED : ask(context.toolCall, outcome);
          },
  };
  return guardrail;
}

/**
 * What `when` says about a call: `complete` to ask a person, `partial` when it threw or answered
 * something that is not a boolean (fail closed: a person is asked), `allow` for `false`.
 */
async function askFor(when: NonNullable<RequireApprovalOptions["when"]>, { toolCall, turn }: GuardrailContext): Promise<GuardrailVerdict["outcome"] | "allow"> {
  let matches: unknown;
  try {
    // A copy of its own: what it does to the arguments reaches neither `describe` nor the person.
    matches = await when(structuredClone(toolCall.args), turn);
  } catch {
    return "partial";
  }
  if (matches === false) return "allow";
  return matches === true ? "complete" : "partial";
}

/**
 * At a model call: a `requireApproval` guardrail in an agent without a checkpointer fails the run
 * with a `ConfigurationError` naming the fix, before any call could ask. (Any other guardrail
 * that answers `approve` is stopped the same way before its request is stored.)
 */
export function checkApprovalsCanPause(
  guardrails: readonly Guardrail[],
  configurable: Readonly<Record<string, unknown>> | undefined,
): void {
  if (hasCheckpointer(configurable)) return;
  const asking = guardrails.find((guardrail) => APPROVAL_GUARDRAIL in guardrail);
  if (asking !== undefined) throw missingCheckpointer(`requireApproval (guardrail "${asking.name}")`);
}
