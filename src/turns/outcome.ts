/**
 * What the turn service answers: a turn's outcome (stored, and replayed on a retry) and the
 * answers of `submit`, `get` and `decide`. Outcomes carry no tool result text unless the service
 * was asked to include it, and no error text ever: a failure is a code.
 */
import { ToolMessage, type BaseMessage } from "@langchain/core/messages";
import { z } from "zod";
import { ApprovalStatusSchema, DigestSchema, JsonValueSchema, MutationStatusSchema } from "../contracts.js";
import { latestUserTextIndex, textContent } from "../decision/transcript.js";

/** One tool call of the turn, as the client sees it. */
export const TurnCallOutcomeSchema = z.strictObject({
  tool: z.string(),
  callId: z.string(),
  status: z.enum(["success", "error"]),
  /** The refusal code (`REFUSAL_CODES`) when the guardrails refused the call. */
  refusal: z.string().optional(),
  /** The tool's result text: only with the service's `includeToolResults`. */
  content: z.string().optional(),
});
/** A {@link TurnCallOutcomeSchema} value. */
export type TurnCallOutcome = z.infer<typeof TurnCallOutcomeSchema>;

/** One approval request a paused turn waits on: what the person is asked. */
export const PendingApprovalSchema = z.strictObject({
  approvalId: DigestSchema,
  tool: z.string(),
  toolCallId: z.string(),
  /** The arguments the person is asked to approve. */
  args: z.record(z.string(), JsonValueSchema),
  guardrails: z.array(z.string()),
  reason: z.string().optional(),
});
/** A {@link PendingApprovalSchema} value. */
export type PendingApproval = z.infer<typeof PendingApprovalSchema>;

/** Why a turn failed: nothing of the error's text, only what kind of failure and what it left. */
export const TURN_FAILURES = [
  /** The moderation provider failed or answered a non-boolean: nothing ran. */
  "moderation_failed",
  /** The run was refused by admission (`admission` names the `AdmissionError` code): no model call ran. */
  "admission_failed",
  /** A person's decision could not be applied (`ApprovalError`). */
  "approval_failed",
  /** The run paused on an interrupt that is not this library's approval request: the service cannot answer it. */
  "unsupported_interrupt",
  /** The run threw: a model, tool or store failure (`error` names its class). */
  "run_failed",
] as const;

/** A turn's outcome: what a finished (or paused) turn answers, stored and replayed. */
export const TurnOutcomeSchema = z.discriminatedUnion("status", [
  z.strictObject({
    status: z.literal("completed"),
    /** The last model message's text. */
    answer: z.string(),
    calls: z.array(TurnCallOutcomeSchema),
  }),
  z.strictObject({ status: z.literal("awaiting_approval"), approvals: z.array(PendingApprovalSchema).min(1) }),
  z.strictObject({
    status: z.literal("refused"),
    /** `denied`: moderation denied the turn; `input_mismatch`: the turn key was used with other input. */
    code: z.enum(["denied", "input_mismatch"]),
  }),
  z.strictObject({
    status: z.literal("failed"),
    code: z.enum(TURN_FAILURES),
    /** The `AdmissionError` or `ApprovalError` code, for those failures. */
    detail: z.string().optional(),
    /** The class of the error a `run_failed` run threw (never its message). */
    error: z.string().optional(),
    /** The turn's mutation claim as the failure left it (its result only with `includeToolResults`). */
    mutation: MutationStatusSchema.optional(),
  }),
]);
/** A {@link TurnOutcomeSchema} value. */
export type TurnOutcome = z.infer<typeof TurnOutcomeSchema>;

/** `submit`'s and `decide`'s answer about a turn: its outcome, or that a worker runs it now. */
export const TurnAnswerSchema = z.union([
  z.intersection(
    TurnOutcomeSchema,
    z.object({
      turnKey: DigestSchema,
      /** True when the stored outcome was answered and nothing ran. */
      replayed: z.boolean(),
    }),
  ),
  z.strictObject({ status: z.literal("running"), turnKey: DigestSchema }),
]);
/** A {@link TurnAnswerSchema} value. */
export type TurnAnswer = (TurnOutcome & { readonly turnKey: string; readonly replayed: boolean }) | RunningAnswer;
/** Another worker runs the turn now: ask again later. */
export interface RunningAnswer {
  readonly status: "running";
  readonly turnKey: string;
}

/** `decide`'s answer: the turn's new answer, or why nothing was decided. */
export type DecideAnswer =
  | TurnAnswer
  /** No such approval request, or it is not one of a turn this service runs. */
  | { readonly status: "not_found" }
  /** The principal may not decide this request (`mayDecide`). Nothing was recorded. */
  | { readonly status: "forbidden" }
  /** The request was decided (or expired) before: `approvalStatus` is where it stands. Nothing was recorded. */
  | { readonly status: "not_pending"; readonly approvalStatus: z.infer<typeof ApprovalStatusSchema> };

/** `get`'s answer: the turn's state and outcome, read only, with its mutation claim. */
export type TurnView =
  | { readonly status: "not_found" }
  | {
      readonly status: "found";
      readonly turnKey: string;
      readonly scopeId: string;
      readonly principal: string | undefined;
      readonly state: "running" | "awaiting_approval" | "completed" | "refused" | "failed";
      /** Absent while running. */
      readonly outcome: TurnOutcome | undefined;
      /** The turn's mutation claim; its result only with `includeToolResults`. */
      readonly mutation: z.infer<typeof MutationStatusSchema> | undefined;
      readonly createdAt: string;
      readonly updatedAt: string;
    };

/** The interrupt payload fields the service reads of an approval request. */
const ApprovalInterruptSchema = z.looseObject({
  type: z.literal("arkah.approval"),
  approvalId: DigestSchema,
  tool: z.string(),
  toolCallId: z.string(),
  args: z.record(z.string(), JsonValueSchema),
  guardrails: z.array(z.string()),
  reason: z.string().optional(),
});

/** An interrupt of a paused run, as `graph.getState` lists it. */
export interface PendingInterrupt {
  readonly id: string;
  readonly approval: PendingApproval;
}

/**
 * The approval requests a paused run waits on, or `undefined` when one of its interrupts is not an
 * approval request of this library (or carries no id to resume it by).
 */
export function approvalInterrupts(interrupts: readonly { readonly id?: string; readonly value?: unknown }[]): PendingInterrupt[] | undefined {
  const pending: PendingInterrupt[] = [];
  for (const each of interrupts) {
    const parsed = ApprovalInterruptSchema.safeParse(each.value);
    if (each.id === undefined || !parsed.success) return undefined;
    const { approvalId, tool, toolCallId, args, guardrails, reason } = parsed.data;
    pending.push({ id: each.id, approval: { approvalId, tool, toolCallId, args, guardrails, ...(reason === undefined ? {} : { reason }) } });
  }
  return pending;
}

/** A completed run's outcome: the last message's text and every tool call after the user's message. */
export function completedOutcome(messages: readonly BaseMessage[], includeToolResults: boolean): TurnOutcome {
  const start = Math.max(0, latestUserTextIndex(messages));
  const calls = messages.slice(start).filter((message) => ToolMessage.isInstance(message)).map((message): TurnCallOutcome => {
    const status = message.status === "error" ? "error" : "success";
    const text = textContent(message) ?? "";
    const refusal = status === "error" ? refusalCode(text) : undefined;
    return {
      tool: message.name ?? "",
      callId: message.tool_call_id,
      status,
      ...(refusal === undefined ? {} : { refusal }),
      ...(includeToolResults ? { content: text } : {}),
    };
  });
  const last = messages.at(-1);
  return { status: "completed", answer: last === undefined ? "" : (textContent(last) ?? ""), calls };
}

/** The guardrail's code of a refusal `ToolMessage` (`{"guardrail": code, ...}`), if it is one. */
function refusalCode(text: string): string | undefined {
  try {
    const parsed: unknown = JSON.parse(text);
    const code = typeof parsed === "object" && parsed !== null ? (parsed as { guardrail?: unknown }).guardrail : undefined;
    return typeof code === "string" && /^[a-z][a-z0-9_]*$/.test(code) ? code : undefined;
  } catch {
    return undefined;
  }
}
