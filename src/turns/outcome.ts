/**
 * What the turn service answers: a turn's outcome (stored, and replayed on a retry) and the
 * answers of `submit`, `get` and `decide`. Outcomes carry no tool result text unless the service
 * was asked to include it, and no error text ever: a failure is a code.
 */
import { ToolMessage, type BaseMessage } from "@langchain/core/messages";
import { z } from "zod";
import {
  DigestSchema,
  JsonValueSchema,
  MutationResultSchema,
  type ApprovalStatus,
  type AuditEvent,
  type TurnRecord,
  type JsonValue,
  type MutationResult,
  type MutationStatus,
  type RefusalCode,
  type TurnState,
} from "../contracts/index.js";
import { latestUserTextIndex, textContent } from "../decision/transcript.js";
import { HitlApprovalRequestSchema, type ApprovalFormat } from "../guardrails/langchain-format.js";
import { EXECUTION_ID_KEY } from "../tool-messages.js";

/** One tool call of the turn, as the client sees it. */
export interface TurnCallOutcome {
  /** The tool's name. */
  readonly tool: string;
  /** The call id the model gave it. */
  readonly callId: string;
  /** `error` for a refused or failed call. */
  readonly status: "success" | "error";
  /**
   * The refusal code (`REFUSAL_CODES`, or a guardrail's own code) when the guardrails refused the
   * call, as the turn's audit trail records it: a tool's own error result is never a refusal,
   * whatever its text says. The trail is the source of truth: a call an inner middleware refused
   * with its own error message is `tool_failed` here, whatever that message said to the model.
   */
  readonly refusal?: string;
  /**
   * The approval request a refusal is about, as the audit trail records it: a reviewer's edit that
   * failed its checks (`refusal` is the failing stage's code, e.g. `invalid_arguments`), or an
   * orphaned approval.
   */
  readonly approvalId?: string;
  /** The tool's result text: only with the service's `includeToolResults`. */
  readonly content?: string;
}

const TurnCallOutcomeSchema: z.ZodType<TurnCallOutcome> = z.strictObject({
  tool: z.string(),
  callId: z.string(),
  status: z.enum(["success", "error"]),
  refusal: z.string().optional(),
  approvalId: DigestSchema.optional(),
  content: z.string().optional(),
});

/** One approval request a paused turn waits on: what the person is asked. */
export interface PendingApproval {
  /** Answer it with `decide({ approvalId, ... })`. */
  readonly approvalId: string;
  /** The tool the call is to. */
  readonly tool: string;
  /** The call the person is asked about. */
  readonly toolCallId: string;
  /** The arguments the person is asked to approve. */
  readonly args: Record<string, JsonValue>;
  /** The guardrails that asked. */
  readonly guardrails: string[];
  /** Their reasons, shown to the person. */
  readonly reason?: string;
}

const PendingApprovalSchema: z.ZodType<PendingApproval> = z.strictObject({
  approvalId: DigestSchema,
  tool: z.string(),
  toolCallId: z.string(),
  args: z.record(z.string(), JsonValueSchema),
  guardrails: z.array(z.string()),
  reason: z.string().optional(),
});

/**
 * Why a turn failed: nothing of the error's text, only what kind of failure.
 * - `moderation_failed`: the moderation provider failed or answered a non-boolean; nothing ran;
 * - `admission_failed`: admission refused the run (`detail`: the `AdmissionError` code); no model call ran;
 * - `unsupported_interrupt`: the run paused on an interrupt that is not this library's approval request;
 * - `run_failed`: the run threw: a model, tool or store failure (`error`: its class name).
 */
export type TurnFailure = "moderation_failed" | "admission_failed" | "unsupported_interrupt" | "run_failed";
/** Every {@link TurnFailure}. */
export const TURN_FAILURES = [
  "moderation_failed",
  "admission_failed",
  "unsupported_interrupt",
  "run_failed",
] as const satisfies readonly TurnFailure[];

/**
 * The turn's mutation claim as the service answers it (`get`, a failed outcome): the claim's
 * state, tool and call, and a completed one's result only with the service's `includeToolResults`
 * (so, unlike the store's `MutationStatus`, a `complete` claim may come without its result).
 */
export interface TurnMutation {
  /** `pending` or `unknown`: an operator must reconcile; `complete`: the write ran; `pruned`: a tombstone. */
  readonly state: MutationStatus["state"];
  /** The tool of the call holding the slot. */
  readonly toolName: string;
  /** The call holding the slot. */
  readonly toolCallId: string;
  /** The completed write's stored result: only with `includeToolResults`, and only when `complete`. */
  readonly result?: MutationResult;
}

/** Parses a {@link TurnMutation}: exactly what the service answers and stores. */
export const TurnMutationSchema: z.ZodType<TurnMutation> = z
  .strictObject({
    state: z.enum(["pending", "complete", "unknown", "pruned"]),
    toolName: z.string().min(1),
    toolCallId: z.string().min(1),
    result: MutationResultSchema.optional(),
  })
  .refine((mutation) => mutation.result === undefined || mutation.state === "complete", {
    error: "only a complete mutation has a result",
    path: ["result"],
  });

/** The claim as the service answers it: the store's status, its result only when asked for. */
export function turnMutation(status: MutationStatus, includeResult: boolean): TurnMutation {
  const { state, toolName, toolCallId, result } = status;
  return includeResult && result !== undefined ? { state, toolName, toolCallId, result } : { state, toolName, toolCallId };
}

/**
 * A turn's outcome: what a finished (or paused) turn answers, stored and replayed.
 * - `completed`: `answer` is the last model message's text, `calls` every tool call of the turn,
 *   `mutation` the turn's claim when it made one ({@link TurnMutation}: a refused or ambiguous write
 *   shows here without reading `calls`; replayed as the claim is now once it was settled);
 * - `awaiting_approval`: the requests the run waits on (stored: every request of the pause;
 *   answered: those still pending, none once all are decided and the resume is still to come);
 * - `refused`: `denied` by moderation, or `input_mismatch` (the turn key was used with other input);
 * - `failed`: a {@link TurnFailure}, with the turn's mutation claim as the failure left it
 *   ({@link TurnMutation}: its result only with `includeToolResults`). A failure before any effect
 *   was claimed (`run_failed`, `moderation_failed`) says `retryable` (a `submit` of the same key
 *   runs the turn again, from its checkpoint) and how many `attempts` ran; `retryable: false` once
 *   `maxAttempts` ran. Without them the failure is final.
 */
export type TurnOutcome =
  | { readonly status: "completed"; readonly answer: string; readonly calls: TurnCallOutcome[]; readonly mutation?: TurnMutation }
  | { readonly status: "awaiting_approval"; readonly approvals: PendingApproval[] }
  | { readonly status: "refused"; readonly code: "denied" | "input_mismatch" }
  | {
      readonly status: "failed";
      readonly code: TurnFailure;
      readonly detail?: string;
      readonly error?: string;
      readonly mutation?: TurnMutation;
      readonly retryable?: boolean;
      readonly attempts?: number;
    };

/** Parses a stored {@link TurnOutcome}: the service checks every outcome with it before storing it. */
export const TurnOutcomeSchema: z.ZodType<TurnOutcome> = z.discriminatedUnion("status", [
  z.strictObject({ status: z.literal("completed"), answer: z.string(), calls: z.array(TurnCallOutcomeSchema), mutation: TurnMutationSchema.optional() }),
  z.strictObject({ status: z.literal("awaiting_approval"), approvals: z.array(PendingApprovalSchema).min(1) }),
  z.strictObject({ status: z.literal("refused"), code: z.enum(["denied", "input_mismatch"]) }),
  z.strictObject({
    status: z.literal("failed"),
    code: z.enum(TURN_FAILURES),
    detail: z.string().optional(),
    error: z.string().optional(),
    mutation: TurnMutationSchema.optional(),
    retryable: z.boolean().optional(),
    attempts: z.int().min(1).max(10).optional(),
  }),
]);

/**
 * Whether a turn record's stored pause waits on this approval request: the run returned, its
 * checkpoint holds the interrupt, and the service stored the pause. Only then is a pending request
 * decidable (a stored outcome that does not parse is no pause).
 */
export function pauseWaitsOn(record: TurnRecord, approvalId: string): boolean {
  if (record.state !== "awaiting_approval") return false;
  const outcome = TurnOutcomeSchema.safeParse(record.outcome);
  return outcome.success && outcome.data.status === "awaiting_approval" && outcome.data.approvals.some((each) => each.approvalId === approvalId);
}

/** Another worker runs the turn now: ask again later. */
export interface RunningAnswer {
  /** Always `running`. */
  readonly status: "running";
  /** The turn. */
  readonly turnKey: string;
}

/** `submit`'s and `decide`'s answer about a turn: its outcome (`replayed` when nothing ran), or that a worker runs it now. */
export type TurnAnswer = (TurnOutcome & { readonly turnKey: string; readonly replayed: boolean }) | RunningAnswer;

/**
 * `decide`'s answer: the turn's new answer, or why nothing was decided (nothing recorded):
 * `not_found` (no such request, or not one of a turn this service runs), `forbidden` (`mayDecide`
 * said no), `not_pending` (decided by another decision, applied after one, expired or orphaned:
 * `approvalStatus`; the store audited the refused decision). The decision recorded before,
 * delivered again by the same principal, is no refusal: it answers the turn as it stands now
 * (`replayed: true` once the turn resumed), and resumes nothing twice.
 */
export type DecideAnswer =
  | TurnAnswer
  | { readonly status: "not_found" }
  | { readonly status: "forbidden" }
  | { readonly status: "not_pending"; readonly approvalStatus: ApprovalStatus };

/**
 * `get`'s answer: `not_found`, or the turn's state and outcome (absent while running; a paused
 * turn's lists only the requests still pending), read only, with its mutation claim (its result
 * only with `includeToolResults`).
 */
export type TurnView =
  | { readonly status: "not_found" }
  | {
      readonly status: "found";
      readonly turnKey: string;
      readonly scopeId: string;
      readonly principal: string | undefined;
      readonly state: TurnState;
      readonly outcome: TurnOutcome | undefined;
      readonly mutation: TurnMutation | undefined;
      readonly createdAt: string;
      readonly updatedAt: string;
    };

/** The interrupt payload fields the service reads of an approval request in the package's format. */
const ApprovalInterruptSchema = z.looseObject({
  type: z.literal("arkah.approval"),
  approvalId: DigestSchema,
  tool: z.string(),
  toolCallId: z.string(),
  args: z.record(z.string(), JsonValueSchema),
  guardrails: z.array(z.string()),
  reason: z.string().optional(),
});

/**
 * An approval interrupt of a paused run, as its payload says: in the package's format, the whole
 * request; in LangChain's, the request's id, tool and arguments (the service reads the rest from
 * the store's record, which must agree).
 */
export type ApprovalInterrupt =
  | { readonly id: string; readonly format: "arkah"; readonly approval: PendingApproval }
  | { readonly id: string; readonly format: "langchain"; readonly approvalId: string; readonly tool: string; readonly args: Record<string, JsonValue> };

/** An approval request a paused run waits on: the interrupt to resume, in its format, and what the person is asked. */
export interface PendingInterrupt {
  /** The interrupt's id: the resume value is keyed by it. */
  readonly id: string;
  /** The format of the pause: the resume value answers in it. */
  readonly format: ApprovalFormat;
  /** The request. */
  readonly approval: PendingApproval;
}

/**
 * The approval interrupts of a paused run, in either approval format, or `undefined` when one of
 * its interrupts is not an approval request of this library (or carries no id to resume it by).
 */
export function approvalInterrupts(interrupts: readonly { readonly id?: string; readonly value?: unknown }[]): ApprovalInterrupt[] | undefined {
  const found: ApprovalInterrupt[] = [];
  for (const { id, value } of interrupts) {
    if (id === undefined) return undefined;
    const ours = ApprovalInterruptSchema.safeParse(value);
    if (ours.success) {
      const { approvalId, tool, toolCallId, args, guardrails, reason } = ours.data;
      found.push({ id, format: "arkah", approval: { approvalId, tool, toolCallId, args, guardrails, ...(reason === undefined ? {} : { reason }) } });
      continue;
    }
    const hitl = HitlApprovalRequestSchema.safeParse(value);
    if (!hitl.success) return undefined;
    const [action] = hitl.data.actionRequests;
    found.push({ id, format: "langchain", approvalId: hitl.data.approvalId, tool: action.name, args: action.args });
  }
  return found;
}

/**
 * Whether any tool result of the run (after the user's message) is an error: only an error result
 * can be a refusal, so a run without one needs no audit trail for its outcome.
 */
export function hasErrorResult(messages: readonly BaseMessage[]): boolean {
  const start = Math.max(0, latestUserTextIndex(messages));
  return messages.slice(start).some((message) => ToolMessage.isInstance(message) && message.status === "error");
}

/**
 * A completed run's outcome: the last message's text and every tool call after the user's message.
 * Which calls the guardrails refused, and the approval request a refusal is about, come from
 * `trail`, the turn's audit trail (`readAudit({ turnKey })`), never from a message's text: a tool
 * body may answer its own error `ToolMessage`, shaped as a refusal by whoever wrote its text. An
 * error result the trail has no refusal for is a plain error (`status: "error"`, no `refusal`).
 */
export function completedOutcome(messages: readonly BaseMessage[], includeToolResults: boolean, trail: readonly AuditEvent[]): TurnOutcome {
  const start = Math.max(0, latestUserTextIndex(messages));
  const results = messages.slice(start).filter((message) => ToolMessage.isInstance(message));
  const refusals = refusalsOf(results, trail);
  const calls = results.map((message, index): TurnCallOutcome => {
    const refusal = refusals[index];
    return {
      tool: message.name ?? "",
      callId: message.tool_call_id,
      status: message.status === "error" ? "error" : "success",
      ...(refusal === undefined ? {} : { refusal: refusal.code }),
      ...(refusal?.approvalId === undefined ? {} : { approvalId: refusal.approvalId }),
      ...(includeToolResults ? { content: textContent(message) ?? "" } : {}),
    };
  });
  const last = messages.at(-1);
  return { status: "completed", answer: last === undefined ? "" : (textContent(last) ?? ""), calls };
}

/** A refusal as the trail records it: its code, and the approval request it is about, if any. */
interface RecordedRefusal {
  readonly code: string;
  readonly approvalId?: string;
}

/** How one execution of a call ended, as the trail records it: its call and tool, and the refusal it answered, if any. */
interface CallEnding {
  readonly toolCallId: string;
  readonly toolName: string | undefined;
  readonly refusal: RecordedRefusal | undefined;
}

/**
 * The refusal each tool result answered, matched exactly: the pipeline stamps every result it
 * answers with its execution's id (`stampedResult`, overwriting whatever a tool body put there)
 * and records that id on the event that ended the execution, so a result is bound to its own
 * execution's ending, not to a position: a call id the model reuses, an execution whose ending
 * event is missing, or a trail of any length shifts nothing. A result counts as refused only when
 * it is an error, of the recorded execution's call and tool. A stamp counts once, for the first
 * result carrying it: the pipeline answers each execution once, so a later copy (a `Command` a
 * tool returned, with a message copied from the transcript) takes nothing. A result without a
 * stamp (an earlier version's, or a `Command`'s message) has no refusal.
 */
function refusalsOf(results: readonly ToolMessage[], trail: readonly AuditEvent[]): (RecordedRefusal | undefined)[] {
  const endings = new Map<string, CallEnding>();
  for (const event of trail) {
    if (event.executionId === undefined) continue;
    const ending = callEnding(event);
    if (ending !== undefined) endings.set(event.executionId, ending);
  }
  const answered = new Set<string>();
  return results.map((result) => {
    const executionId = executionIdOf(result);
    if (executionId === undefined || answered.has(executionId)) return undefined;
    answered.add(executionId);
    const ending = endings.get(executionId);
    if (result.status !== "error" || ending === undefined) return undefined;
    return ending.toolCallId === result.tool_call_id && ending.toolName === result.name ? ending.refusal : undefined;
  });
}

/** The execution id the pipeline stamped on a result, if any. */
function executionIdOf(result: ToolMessage): string | undefined {
  const stamp: unknown = (result.response_metadata as Readonly<Record<string, unknown>> | undefined)?.[EXECUTION_ID_KEY];
  return typeof stamp === "string" && stamp !== "" ? stamp : undefined;
}

/** Every code a `failed` event records for an execution that answered the model with a refusal. */
const FAILURE_REFUSALS: ReadonlySet<string> = new Set<RefusalCode>(["tool_failed", "tool_timeout", "unsupported_result", "no_effect", "mutation_unknown", "effect_unknown"]);

/**
 * The event an execution of a call ends with, and the refusal it answered: `executed` and
 * `replayed` (the tool's result, whatever it says), `refused` and `deferred` (the code), `failed`
 * (a refusal code; `seal_broken` failed the run). Undefined for the events along the way
 * (verdicts, approval steps, a `retried` attempt, a claim released or reconciled).
 */
function callEnding(event: AuditEvent): CallEnding | undefined {
  const { decision, code, toolName } = event;
  // A call the model gave no id is recorded without one; its refusal answers with an empty id.
  const toolCallId = event.toolCallId ?? "";
  switch (decision) {
    case "executed":
    case "replayed":
      return { toolCallId, toolName, refusal: undefined };
    case "refused":
    case "deferred":
      return { toolCallId, toolName, refusal: recorded(code, event.approvalId) };
    case "failed":
      if (code === "retried") return undefined; // the next attempt ends the execution
      return { toolCallId, toolName, refusal: code !== undefined && FAILURE_REFUSALS.has(code) ? recorded(code, event.approvalId) : undefined };
    default:
      return undefined;
  }
}

/** Only a refusal about an approval request (an orphaned one, a reviewer's refused edit) records its id. */
function recorded(code: string | undefined, approvalId: string | undefined): RecordedRefusal | undefined {
  if (code === undefined) return undefined;
  return approvalId === undefined ? { code } : { code, approvalId };
}
