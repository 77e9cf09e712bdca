/**
 * Approvals: a person's decision on a call some guardrail asked about. One approval covers one
 * execution of one call of one tool with those arguments: the request is a durable record
 * (pending -> approved | rejected | edited -> applied, or expired) keyed by the turn, the tool,
 * the call id, the argument digest and the execution's ordinal, and running the call again asks
 * again. A mutation's replay is not an execution: the claim replays it without a new approval.
 *
 * Resume values: the person answers by resuming the run. A malformed answer is reported in a new
 * interrupt for the same request, which stays answerable. When other calls of the same model step
 * also asked, an answer must name its `approvalId`: an unkeyed one, which LangGraph would hand to
 * every pending request, approves none.
 */
import { interrupt } from "@langchain/langgraph";
import { z } from "zod";
import {
  ApprovalDecisionResultSchema,
  ApprovalRecordSchema,
  DigestSchema,
  JsonValueSchema,
  type ApprovalDecision,
  type ApprovalRecord,
} from "../contracts.js";
import { digest } from "../digest.js";
import { parseStoreValue } from "../stores/validate.js";
import type { ApprovalRequest } from "./port.js";
import type { CheckedCall, GuardrailEnvironment } from "./evaluate.js";

const ApprovalRecordListSchema = z.array(ApprovalRecordSchema);

/** A resume value: a decision, optionally naming the request it answers. */
export const ApprovalAnswerSchema = z.discriminatedUnion("decision", [
  z.strictObject({ decision: z.literal("approve"), approvalId: DigestSchema.optional() }),
  z.strictObject({ decision: z.literal("reject"), message: z.string().optional(), approvalId: DigestSchema.optional() }),
  z.strictObject({
    decision: z.literal("edit"),
    args: z.record(z.string(), JsonValueSchema),
    approvalId: DigestSchema.optional(),
  }),
]);
export type ApprovalAnswer = z.infer<typeof ApprovalAnswerSchema>;

/** What asked for the approval. */
export interface ApprovalAsk {
  readonly guardrails: readonly string[];
  readonly reason: string | undefined;
}

/** The decision that lets a call through, and how its execution consumes it. */
export interface ApprovalHandle {
  readonly approvalId: string;
  /** Which execution of the call this approval is for (0 for the first). */
  readonly execution: number;
  /** Already applied by an earlier execution: only a mutation's replay may go on without a new one. */
  readonly used: boolean;
  /** Marks the approval applied by this execution; false when another execution took it first. */
  apply(): Promise<boolean>;
}

/** The person's decision for this execution: approve/edit with its handle, reject, or expired. */
export type ApprovalOutcome =
  | { readonly decision: Extract<ApprovalDecision, { decision: "approve" | "edit" }>; readonly handle: ApprovalHandle }
  | { readonly decision: Extract<ApprovalDecision, { decision: "reject" }> }
  | { readonly expired: true };

/** `digest` of the request's identity: the turn, tool (name and fingerprint), call, arguments and the execution ordinal. */
export function approvalId(
  turnKey: string,
  call: Pick<CheckedCall, "id" | "name" | "argsDigest" | "toolFingerprint">,
  execution: number,
): string {
  return digest({
    kind: "arkah.approval",
    v: 1,
    turnKey,
    toolName: call.name,
    toolFingerprint: call.toolFingerprint,
    toolCallId: call.id,
    argsDigest: call.argsDigest,
    execution,
  });
}

/**
 * The decision for this execution of `call`: a recorded one if the request was decided (by a
 * resume value or out of band), else the run pauses for it. `fresh` skips every earlier request:
 * a new execution after a used approval.
 */
export async function approvalFor(
  env: GuardrailEnvironment,
  ask: ApprovalAsk,
  call: CheckedCall,
  options: { readonly from: number; readonly reuseApplied: boolean },
): Promise<ApprovalOutcome> {
  const { store } = env;
  if (store === undefined) {
    // Without a store there is nothing to consume: one decision per task execution.
    const id = approvalId(env.turn.turnKey, call, options.from);
    const decision = await answer(env, request(ask, call, id), false);
    return withHandle(decision, { approvalId: id, execution: options.from, used: false, apply: () => Promise.resolve(true) });
  }
  for (let execution = options.from; ; execution++) {
    const id = approvalId(env.turn.turnKey, call, execution);
    const record = parseStoreValue(
      ApprovalRecordSchema,
      await store.requestApproval({
        approvalId: id,
        turnKey: env.turn.turnKey,
        scopeId: env.scopeId,
        toolCallId: call.id,
        toolName: call.name,
        toolFingerprint: call.toolFingerprint,
        argsDigest: call.argsDigest,
        args: call.args,
        guardrails: [...ask.guardrails],
        ...(ask.reason === undefined ? {} : { reason: ask.reason }),
        requestedAt: new Date().toISOString(),
      }),
      "requestApproval answer",
    );
    const apply = async () =>
      parseStoreValue(z.boolean(), await store.applyApproval({ approvalId: id, appliedAt: new Date().toISOString() }), "applyApproval answer");
    if (record.status === "applied") {
      // Used by an earlier execution. A later request for this call means a person was asked
      // again; otherwise a mutation may go on (its claim replays), anything else asks again.
      const nextId = approvalId(env.turn.turnKey, call, execution + 1);
      const nextAnswer = await store.getApproval(nextId);
      const next = nextAnswer === undefined ? undefined : parseStoreValue(ApprovalRecordSchema, nextAnswer, "getApproval answer");
      if (next === undefined && options.reuseApplied) {
        return withHandle(record.decision ?? { decision: "approve" }, { approvalId: id, execution, used: true, apply });
      }
      continue;
    }
    if (record.status === "expired") return { expired: true };
    const decided = record.status === "pending" ? await decide(env, record, request(ask, call, id)) : record;
    if (decided.status === "expired") return { expired: true };
    return withHandle(decided.decision ?? { decision: "reject" }, { approvalId: id, execution, used: false, apply });
  }
}

function withHandle(decision: ApprovalDecision, handle: ApprovalHandle): ApprovalOutcome {
  return decision.decision === "reject" ? { decision } : { decision, handle };
}

function request(ask: ApprovalAsk, call: CheckedCall, id: string): ApprovalRequest {
  return {
    type: "arkah.approval",
    approvalId: id,
    guardrails: ask.guardrails,
    toolCallId: call.id,
    tool: call.name,
    args: call.args,
    argsDigest: call.argsDigest,
    reason: ask.reason,
  };
}

/** Pauses for the person's answer and records it; the first recorded decision wins. */
async function decide(env: GuardrailEnvironment, pending: ApprovalRecord, asked: ApprovalRequest): Promise<ApprovalRecord> {
  const store = env.store;
  if (store === undefined) throw new Error("unreachable: decide needs a store");
  const decision = await answer(env, asked, true);
  const result = parseStoreValue(
    ApprovalDecisionResultSchema,
    await store.decideApproval({ approvalId: asked.approvalId, decision, decidedAt: new Date().toISOString() }),
    "decideApproval answer",
  );
  const record = result.record ?? pending;
  if (!result.decided && record.decision !== undefined && record.decision.decision !== decision.decision) {
    env.logger.warn("a resume value disagreed with the decision already recorded; the recorded one stands", {
      approvalId: asked.approvalId,
      toolName: asked.tool,
      toolCallId: asked.toolCallId,
      recorded: record.decision.decision,
      answered: decision.decision,
    });
  }
  return record;
}

/**
 * The person's answer to `asked`, from the resume value. A value that is not a decision, names
 * another request, or is unkeyed while other calls of the step are waiting too, is reported in a
 * new interrupt for the same request: nothing is decided and the request stays answerable.
 */
async function answer(env: GuardrailEnvironment, asked: ApprovalRequest, keyed: boolean): Promise<ApprovalDecision> {
  let problem: string | undefined;
  for (;;) {
    const value: unknown = interrupt(problem === undefined ? asked : { ...asked, problem });
    const parsed = ApprovalAnswerSchema.safeParse(value);
    if (!parsed.success) {
      problem =
        'the answer was not a decision: resume with { decision: "approve" }, { decision: "reject", message? } ' +
        'or { decision: "edit", args }, optionally with this request\'s approvalId';
    } else if (parsed.data.approvalId !== undefined && parsed.data.approvalId !== asked.approvalId) {
      problem = "the answer named another approval request: resume this one with its own approvalId";
    } else if (parsed.data.approvalId === undefined && keyed && (await othersAsked(env, asked))) {
      // LangGraph hands a task its resume values by position, and an unkeyed scalar to every
      // pending request: with another request for this call or its step, the value may be meant
      // for that one (asked before the call ran again, or its tool or arguments changed).
      problem =
        "another approval request exists for this call or another call of its step, so an answer without approvalId " +
        "decides none: answer each request with its approvalId, e.g. new Command({ resume: { [interrupt.id]: { decision, approvalId } } })";
    } else {
      const { approvalId: _named, ...decision } = parsed.data;
      return decision;
    }
    env.logger.warn("an approval answer was not accepted; the request stays pending", {
      approvalId: asked.approvalId,
      toolName: asked.tool,
      toolCallId: asked.toolCallId,
      problem,
    });
  }
}

/** Whether this turn holds another approval request for this call id or another call of its step. */
async function othersAsked(env: GuardrailEnvironment, asked: ApprovalRequest): Promise<boolean> {
  if (env.store === undefined) return false;
  const calls = new Set([asked.toolCallId, ...env.siblings]);
  const requests = parseStoreValue(ApprovalRecordListSchema, await env.store.listApprovals({ turnKey: env.turn.turnKey }), "listApprovals answer");
  return requests.some((record) => record.approvalId !== asked.approvalId && calls.has(record.toolCallId));
}
