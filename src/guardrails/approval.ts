/**
 * `requireApproval`: a ready-made guardrail that asks a person before the listed tools run. The
 * pipeline pauses the call with a LangGraph interrupt before any claim, carrying
 * `{ tool, args, argsDigest, reason }`, and records the decision bound to the call id and the
 * argument digest, so an approval is never reused for other arguments or another call.
 */
import { z } from "zod";
import type { JsonValue } from "../contracts.js";
import { ConfigurationError } from "../errors.js";
import type { Guardrail } from "./port.js";
import { hasCheckpointer, missingCheckpointer } from "./resume.js";

/** Marks the guardrails `requireApproval` builds: an agent they check must be able to pause. */
const APPROVAL_GUARDRAIL = Symbol.for("arkah-agent-guardrails.approval-guardrail");

/** `requireApproval`'s options. */
export interface RequireApprovalOptions {
  /** The tools that need a person's approval. */
  readonly tools: readonly string[];
  /** What the person is shown; default `Approve <tool>?`. */
  readonly describe?: (call: { readonly name: string; readonly args: Readonly<Record<string, JsonValue>> }) => string;
  /** Default `"approval"`. */
  readonly name?: string;
}

const OptionsSchema = z.strictObject({
  tools: z.array(z.string().min(1)).min(1, "name at least one tool"),
  describe: z.custom<NonNullable<RequireApprovalOptions["describe"]>>((value) => typeof value === "function").optional(),
  name: z.string().min(1).optional(),
});

/** Throws `ConfigurationError` for invalid options. Needs a checkpointer on the agent. */
export function requireApproval(options: RequireApprovalOptions): Guardrail {
  const parsed = OptionsSchema.safeParse(options);
  if (!parsed.success) {
    throw new ConfigurationError(`invalid requireApproval options: ${z.prettifyError(parsed.error)}`);
  }
  const { tools, describe, name = "approval" } = parsed.data;
  const guardrail: Guardrail & { readonly [APPROVAL_GUARDRAIL]: true } = {
    [APPROVAL_GUARDRAIL]: true,
    name,
    placements: ["tool-args"],
    tools,
    check: ({ toolCall }) => ({
      action: "approve",
      outcome: "complete",
      detections: [{ rule: "requires-approval", detected: true }],
      reason: describe?.({ name: toolCall.name, args: toolCall.args }) ?? `Approve ${toolCall.name}?`,
    }),
  };
  return guardrail;
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
