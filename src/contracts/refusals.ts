/**
 * Refusal codes: every code a refused tool call can carry.
 */

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
