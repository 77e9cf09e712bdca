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
  return {
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
}
