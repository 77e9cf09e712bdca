/**
 * The decision table of design section 3, as pure functions of the policy, the model step and the
 * store's answers. The middleware asks these in order; the first refusal wins.
 */
import type {
  ClaimResult,
  CompletedMutation,
  ConfirmAnswer,
  EffectClaimResult,
  EffectStatus,
  JsonValue,
  MutationResult,
  MutationStatus,
  RefusalCode,
  ToolKind,
} from "../contracts/index.js";
import type { StepCall } from "./transcript.js";

export interface Refusal {
  readonly refuse: RefusalCode;
  /** Extra fields of the refusal's content, for the model. */
  readonly details?: Readonly<Record<string, JsonValue>>;
}

/** Steps 2 and 3: is the tool registered, and are the step's call ids unique? */
export function checkCall(
  call: { readonly name: string; readonly id?: string | undefined },
  step: readonly StepCall[] | undefined,
  kind: ToolKind | undefined,
  toolAvailable: boolean,
): Refusal | { readonly kind: ToolKind; readonly id: string } {
  if (kind === undefined || !toolAvailable) return { refuse: "unregistered_tool" };
  if (!isWellFormedId(call.id) || step === undefined || !hasUniqueIds(step)) {
    return { refuse: "duplicate_call_id" };
  }
  return { kind, id: call.id };
}

/**
 * Every call of the step has a well-formed id of its own; one missing, malformed or repeated id
 * spoils the whole step, so no call of it runs.
 */
function hasUniqueIds(step: readonly StepCall[]): boolean {
  const seen = new Set<string>();
  for (const { id } of step) {
    if (!isWellFormedId(id) || seen.has(id)) return false;
    seen.add(id);
  }
  return true;
}

/** A lone UTF-16 surrogate: not text, and no digest or store can keep it exactly. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** A call id the keys can be built from: a non-empty string of well-formed text. */
export function isWellFormedId(id: unknown): id is string {
  return typeof id === "string" && id !== "" && !LONE_SURROGATE.test(id);
}

/**
 * Step 7, before any I/O: a mutation may not share its step with a read, and only the step's
 * first mutation is eligible.
 */
export function checkMutationStep(
  callId: string,
  step: readonly StepCall[],
  kindOf: (toolName: string) => ToolKind | undefined,
): Refusal | undefined {
  let firstMutation: string | undefined;
  let hasRead = false;
  for (const call of step) {
    const kind = kindOf(call.name);
    if (kind === "document-read" || kind === "source-read") hasRead = true;
    if (kind === "mutation" && firstMutation === undefined) firstMutation = call.id;
  }
  if (hasRead) return { refuse: "read_batch_deferred" };
  if (firstMutation !== callId) return { refuse: "single_mutation" };
  return undefined;
}

/** What to do with the store's answer to a claim. */
export type ClaimAction =
  | { readonly execute: string }
  | { readonly replay: MutationResult }
  | Refusal;

export function claimAction(claim: ClaimResult): ClaimAction {
  switch (claim.status) {
    case "acquired":
      return { execute: claim.token };
    case "replay":
      return { replay: claim.result };
    case "pending":
      return { refuse: "mutation_pending" };
    case "unknown":
      return { refuse: "mutation_unknown" };
    case "conflict":
      return conflict(claim.completed);
    case "scope_unresolved":
      return { refuse: "scope_unresolved" };
    case "read_required":
      // The claim named the turn's read evidence and the store has none of it recorded.
      return { refuse: "read_required" };
  }
}

/**
 * What to do with the store's answer to a side effect's claim. The effect's key is its whole
 * identity, so an existing claim is always the same effect: replayed when it completed, refused
 * otherwise; `limit_reached` changed nothing.
 */
export function effectClaimAction(claim: EffectClaimResult): ClaimAction {
  switch (claim.status) {
    case "acquired":
      return { execute: claim.token };
    case "replay":
      return { replay: claim.result };
    case "pending":
      return { refuse: "effect_pending" };
    case "unknown":
      return { refuse: "effect_unknown" };
    case "pruned":
      return { refuse: "effect_pruned" };
    case "limit_reached":
      return { refuse: "effect_limit" };
  }
}

/**
 * Before a person is asked about a side effect: the refusal its claim would certainly answer, from
 * its claim as `getEffect` reads it. `unknown` and `pruned` never change by themselves (an
 * `unknown` one may, when the tool has `confirm`: its claim asks it); a `pending` claim may still
 * be released and a `complete` one replays, so both go on.
 */
export function effectRefusal(effect: EffectStatus | undefined, confirmable = false): Refusal | undefined {
  if (effect?.state === "unknown" && !confirmable) return { refuse: "effect_unknown" };
  if (effect?.state === "pruned") return { refuse: "effect_pruned" };
  return undefined;
}

/**
 * Whether a side effect's replay answers a call other than the one that made it: an identical
 * call (same tool, arguments and discriminator) earlier in the turn, which the model is told about.
 * The same call id replays its own effect (a resume re-running the step, a transport retry). An
 * effect the store no longer names (gone since the claim answered) counts as another call's.
 */
export function replaysAnotherCall(effect: EffectStatus | undefined, call: { readonly id: string; readonly name: string }): boolean {
  return effect?.toolCallId !== call.id || effect.toolName !== call.name;
}

/**
 * What a `confirm` answer makes of an unresolved claim: the reconciliation an operator would make
 * (`completed` with the result every replay returns, or `no-effect`), or none when it cannot tell.
 */
export function confirmResolution(
  answer: ConfirmAnswer,
): { readonly resolution: "completed"; readonly result: MutationResult } | { readonly resolution: "no-effect" } | undefined {
  switch (answer.outcome) {
    case "completed":
      return { resolution: "completed", result: { content: answer.result, status: answer.status ?? "success" } };
    case "no-effect":
      return { resolution: "no-effect" };
    case "unknown":
      return undefined;
  }
}

/** The turn's slot is held by another call: what the turn's one change did, so a model that minted a new call id can tell the user. */
function conflict(completed: CompletedMutation | undefined): Refusal {
  if (completed === undefined) return { refuse: "mutation_conflict" };
  const { toolName, result } = completed;
  return { refuse: "mutation_conflict", details: { completed: { tool: toolName, status: result.status, result: result.content } } };
}

/**
 * Before a person is asked about a mutation: the refusal its claim would certainly answer, from
 * the turn's slot as `getMutation` reads it, so nobody approves a write that cannot run. The
 * completed call itself goes on (its claim replays it, needing no new approval); so does any call
 * while the slot is `pending` (it may still be released). An `unknown` slot refuses every call:
 * the same one `mutation_unknown`, another `mutation_conflict`; a pruned one, every call.
 */
export function slotRefusal(
  slot: MutationStatus,
  call: { readonly id: string; readonly name: string },
  confirmable = false,
): Refusal | undefined {
  const same = slot.toolCallId === call.id && slot.toolName === call.name;
  switch (slot.state) {
    case "pending":
      return undefined;
    case "complete":
      return same || slot.result === undefined
        ? undefined
        : conflict({ toolName: slot.toolName, toolCallId: slot.toolCallId, result: slot.result });
    case "unknown":
      // The same call's tool has `confirm`: its claim asks the write service, which may settle it.
      if (same && confirmable) return undefined;
      return { refuse: same ? "mutation_unknown" : "mutation_conflict" };
    case "pruned":
      return conflict(undefined);
  }
}

/** What the model is told for each refusal: why, and what to do next. */
export const REFUSAL_MESSAGES: Readonly<Record<RefusalCode, string>> = {
  unregistered_tool: "This tool is not governed by the document guardrails, so it cannot run. Use another tool.",
  duplicate_call_id:
    "Tool call ids in this step are missing, malformed or repeated, so none of the calls ran. Call the tools again, each with its own id.",
  out_of_scope:
    "This call touches another document than the one this turn may read and change, so it did not run. Work on the turn's document only.",
  unauthorized: "This call is not authorized for this user. Do not retry it; tell the user.",
  invalid_arguments:
    "The arguments do not match the tool's schema, so the call did not run. Fix every listed problem and call it again.",
  guardrail_denied: "A guardrail refused this call, so it did not run. Read the reason, then change the call or tell the user.",
  approval_rejected:
    "A person reviewed this call and rejected it, so it did not run. Do not retry it; tell the user, with their message if any.",
  approval_expired:
    "The approval request for this call expired before anyone decided it, so it did not run. Tell the user; they can ask again.",
  approval_orphaned:
    "This call was approved, but it was not carried out in time and its approval lapsed, so it did not run. Do not retry it; tell the user they can ask again.",
  read_batch_deferred:
    "A change cannot run in the same step as a read, so it did not run. Check the read result, then make the change in a step of its own.",
  single_mutation:
    "Only the first change in a step may run, so this one did not. A turn makes at most one change.",
  read_required: "Read the document in this turn before changing it, then make the change.",
  mutation_pending:
    "This change is already being applied. Do not call it again; tell the user it is in progress.",
  mutation_unknown:
    "The outcome of this change is unknown and it will not be retried. Tell the user an operator has to confirm it.",
  mutation_conflict:
    "This turn has already made its one change. Do not make another; tell the user what was done (see completed, when given).",
  scope_unresolved:
    "An earlier change to this document has an unknown outcome and awaits an operator, so no change can be made now. Tell the user.",
  tool_failed: "The tool failed and returned no result. Try a different approach or tell the user.",
  unsupported_result: "The tool returned a result the guardrails cannot record, so it was withheld.",
  no_effect:
    "The change was not made: the service refused it and nothing was written (the document may have changed meanwhile). Read the document again, then make the change again if it is still wanted.",
  tool_changed:
    "This tool is not the one that was reviewed: its code, description, schema or configuration changed, so it cannot run. Do not retry it; tell the user an operator has to check the tool.",
  effect_pending:
    "This exact action is already being carried out. Do not call it again; tell the user it is in progress.",
  effect_unknown:
    "The outcome of this exact action is unknown and it will not be retried. Tell the user an operator has to confirm it.",
  effect_pruned:
    "This exact action was carried out earlier in this turn; its result is no longer kept. Do not call it again.",
  effect_limit:
    "This turn has made as many of these actions as it may, so this one did not run. Do not make another; tell the user.",
  effect_unidentified:
    "This action could not be told apart from others of its kind, so it did not run. Do not retry it; tell the user an operator has to check the tool.",
  tool_timeout:
    "The tool took longer than it may and was stopped; whether a change it was making happened is not known yet. Do not call it again now; tell the user.",
};
