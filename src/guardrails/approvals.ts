/**
 * Approvals: a person's decision on a call some guardrail asked about. One approval covers one
 * execution of one call of one tool with those arguments: the request is a durable record
 * (pending -> approved | rejected | edited -> applied, or expired, or approved | edited -> orphaned)
 * keyed by the turn, the tool,
 * the call id, the argument digest and the execution's ordinal, and running the call again asks
 * again. A mutation's replay is not an execution: the claim replays it without a new approval.
 *
 * Resume values: the person answers by resuming the run. Each value is judged once, the first
 * time the call meets it (src/guardrails/resume.ts): a value LangGraph replays to a re-run task is
 * never judged again, so a refused one cannot come back as a decision. A value that is not a
 * decision, names another request, or is unkeyed while another request of the call or its step
 * exists, is refused; so is an edit whose arguments fail the checks a model's call passes. A
 * refused answer is audited (`answer_refused`) and reported in a new interrupt for the same
 * request, which stays answerable: nothing is decided before the answer is accepted.
 *
 * A decision recorded before the run met it (the turn service's `decide`, the CLI) is not judged
 * here: it is the person's, and stands. Its edit is checked when the call meets it
 * (src/guardrails/evaluate.ts); one that fails refuses the call and closes the request. Either
 * way an edit that fails its checks never runs (docs/turns.md#an-edit-that-fails-its-checks).
 */
import { z } from "zod";
import {
  ApprovalDecisionResultSchema,
  ApprovalRecordSchema,
  DigestSchema,
  JsonValueSchema,
  type ApprovalDecision,
  type ApprovalRecord,
  type JsonValue,
} from "../contracts/index.js";
import { digest } from "../digest.js";
import { parseStoreValue } from "../store/validate.js";
import type { ApprovalRequest } from "./port.js";
import type { CheckedCall, EditCheck, GuardrailEnvironment } from "./evaluate.js";
import { fromHitl, hitlRequest, type ApprovalFormat } from "./langchain-format.js";
import { askOnce, missingCheckpointer } from "./resume.js";

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

/** Checks an approver's edited arguments as a new call, before the edit is recorded. */
export type EditChecker = (args: Readonly<Record<string, JsonValue>>) => Promise<EditCheck>;

/**
 * The person's decision for this execution: approve/edit with its handle, reject, expired, or
 * orphaned (decided, but retired before its call ran: it never runs on it).
 * `checked`: an edit this execution checked before recording it (the recorded decision is it).
 */
export type ApprovalOutcome =
  | {
      readonly decision: Extract<ApprovalDecision, { decision: "approve" | "edit" }>;
      readonly handle: ApprovalHandle;
      readonly checked?: CheckedCall;
    }
  | { readonly decision: Extract<ApprovalDecision, { decision: "reject" }> }
  | { readonly expired: true }
  | { readonly orphaned: true; readonly approvalId: string };

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
  options: { readonly from: number; readonly reuseApplied: boolean; readonly checkEdit: EditChecker },
): Promise<ApprovalOutcome> {
  // Checked before a request is stored: LangGraph cannot pause a run without a checkpointer.
  if (!env.checkpointed) throw missingCheckpointer(`guardrail "${ask.guardrails.join('", "')}"`);
  const { store } = env;
  if (store === undefined) {
    // Without a store there is nothing to consume: one decision per task execution.
    const id = approvalId(env.turn.turnKey, call, options.from);
    const { decision, checked } = await answer(env, call, request(ask, call, id), false, options.checkEdit);
    return withHandle(decision, { approvalId: id, execution: options.from, used: false, apply: () => Promise.resolve(true) }, checked);
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
        return withHandle(record.decision ?? { decision: "approve" }, { approvalId: id, execution, used: true, apply }, undefined);
      }
      continue;
    }
    if (record.status === "expired") return { expired: true };
    if (record.status === "orphaned") return { orphaned: true, approvalId: id };
    const { record: decided, checked } =
      record.status === "pending" ? await decide(env, call, record, request(ask, call, id), options.checkEdit) : { record, checked: undefined };
    if (decided.status === "expired") return { expired: true };
    if (decided.status === "orphaned") return { orphaned: true, approvalId: id };
    return withHandle(decided.decision ?? { decision: "reject" }, { approvalId: id, execution, used: false, apply }, checked);
  }
}

function withHandle(decision: ApprovalDecision, handle: ApprovalHandle, checked: CheckedCall | undefined): ApprovalOutcome {
  if (decision.decision === "reject") return { decision };
  return checked === undefined || decision.decision !== "edit" ? { decision, handle } : { decision, handle, checked };
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

/**
 * Pauses for the person's answer and records it once accepted; the first recorded decision wins.
 * `checked` is the accepted edit, when the recorded decision is it.
 */
async function decide(
  env: GuardrailEnvironment,
  call: CheckedCall,
  pending: ApprovalRecord,
  asked: ApprovalRequest,
  checkEdit: EditChecker,
): Promise<{ readonly record: ApprovalRecord; readonly checked: CheckedCall | undefined }> {
  const store = env.store;
  if (store === undefined) throw new Error("unreachable: decide needs a store");
  const { decision, checked } = await answer(env, call, asked, true, checkEdit);
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
  return { record, checked: result.decided ? checked : undefined };
}

/** An accepted answer: the decision, and for an edit the call its arguments make. */
interface Accepted {
  readonly decision: ApprovalDecision;
  readonly checked: CheckedCall | undefined;
}

/**
 * The person's answer to `asked`, from the resume values the call has not met before (a value an
 * earlier execution was handed was judged then: it is skipped, never judged again). A refused
 * answer is audited and reported in a new interrupt for the same request: nothing is decided and
 * the request stays answerable.
 */
async function answer(
  env: GuardrailEnvironment,
  call: CheckedCall,
  asked: ApprovalRequest,
  keyed: boolean,
  checkEdit: EditChecker,
): Promise<Accepted> {
  let problem: string | undefined;
  for (;;) {
    const resumed = askOnce(payload(env.approvalFormat, asked, call, problem));
    if (!resumed.fresh && !resumed.repeated) continue;
    const judged = resumed.fresh ? await judge(env, asked, keyed, resumed.value, checkEdit) : repeated(env.approvalFormat);
    if ("decision" in judged) return judged;
    problem = judged.problem;
    env.logger.warn("an approval answer was not accepted; the request stays pending", {
      approvalId: asked.approvalId,
      toolName: asked.tool,
      toolCallId: asked.toolCallId,
      // An edit's problem may quote what its checks said about argument values: only its code is logged.
      ...(judged.edit ? { code: judged.code } : { problem }),
    });
    await env.audit.record({
      decision: "approval",
      action: "answer_refused",
      code: judged.code,
      approvalId: asked.approvalId,
      turnKey: env.turn.turnKey,
      scopeId: env.scopeId,
      toolCallId: asked.toolCallId,
      toolName: asked.tool,
      toolFingerprint: call.toolFingerprint,
      argsDigest: asked.argsDigest,
    });
  }
}

/** The interrupt payload for `asked`, in the agent's approval format, with the problem of a refused answer. */
function payload(format: ApprovalFormat, asked: ApprovalRequest, call: CheckedCall, problem: string | undefined): unknown {
  if (format === "langchain") return hitlRequest(asked, call.schema, problem);
  return problem === undefined ? asked : { ...asked, problem };
}

/** An answer naming its request, in the agent's approval format, for the problems a person is shown. */
function keyedExample(format: ApprovalFormat): string {
  const value = format === "langchain" ? "{ decisions: [decision], approvalId }" : "{ decision, approvalId }";
  return `new Command({ resume: { [interrupt.id]: ${value} } })`;
}

/** A run resumed without a new answer: LangGraph handed the task its last unkeyed value again. */
function repeated(format: ApprovalFormat): Refused {
  return {
    code: "repeated_answer",
    edit: false,
    problem:
      "the run was resumed without a new answer (the last one was handed in again, and it was judged already): " +
      `answer this request, e.g. ${keyedExample(format)}`,
  };
}

/** Why an answer was not accepted: a code for the audit trail, a problem for the person. */
interface Refused {
  readonly code: string;
  readonly problem: string;
  /** An edit that failed a check of its arguments. */
  readonly edit: boolean;
}

/**
 * Judges one new resume value: a decision, for this request (named, or the only one that could
 * be meant), and for an edit, arguments that pass every check a model's call passes.
 */
async function judge(
  env: GuardrailEnvironment,
  asked: ApprovalRequest,
  keyed: boolean,
  value: unknown,
  checkEdit: EditChecker,
): Promise<Accepted | Refused> {
  const parsed = parseAnswer(env.approvalFormat, value, asked.tool);
  if ("refused" in parsed) return parsed.refused;
  if (parsed.data.approvalId !== undefined && parsed.data.approvalId !== asked.approvalId) {
    return { code: "other_request", edit: false, problem: "the answer named another approval request: resume this one with its own approvalId" };
  }
  if (parsed.data.approvalId === undefined && keyed && (await othersAsked(env, asked))) {
    // LangGraph hands an unkeyed scalar to every pending request: with another request for this
    // call or its step, the value may be meant for that one (asked before the call ran again, or
    // its tool or arguments changed).
    return {
      code: "unkeyed_answer",
      edit: false,
      problem:
        "another approval request exists for this call or another call of its step, so an answer without approvalId " +
        `decides none: answer each request with its approvalId, e.g. ${keyedExample(env.approvalFormat)}`,
    };
  }
  const { approvalId: _named, ...decision } = parsed.data;
  if (decision.decision !== "edit") return { decision, checked: undefined };
  // An edit is a new call: checked like a model's call before anything is recorded.
  const check = await checkEdit(decision.args);
  if ("refused" in check) {
    const { code, reason } = check.refused;
    return {
      code,
      edit: true,
      problem: `the edited arguments were refused (${code}): ${reason}; nothing ran. Answer again: approve the call as asked, reject it, or edit it with other arguments`,
    };
  }
  return { decision, checked: check.pass };
}

/** A resume value as a decision, in the agent's approval format, or why it is not one. */
function parseAnswer(format: ApprovalFormat, value: unknown, toolName: string): { readonly data: ApprovalAnswer } | { readonly refused: Refused } {
  if (format === "langchain") {
    const mapped = fromHitl(value, toolName);
    return "refused" in mapped ? { refused: { ...mapped.refused, edit: false } } : { data: mapped.answer };
  }
  const parsed = ApprovalAnswerSchema.safeParse(value);
  if (parsed.success) return { data: parsed.data };
  return {
    refused: {
      code: "not_a_decision",
      edit: false,
      problem:
        'the answer was not a decision: resume with { decision: "approve" }, { decision: "reject", message? } ' +
        'or { decision: "edit", args }, optionally with this request\'s approvalId',
    },
  };
}

/** Whether this turn holds another approval request for this call id or another call of its step. */
async function othersAsked(env: GuardrailEnvironment, asked: ApprovalRequest): Promise<boolean> {
  if (env.store === undefined) return false;
  const calls = new Set([asked.toolCallId, ...env.siblings]);
  const requests = parseStoreValue(ApprovalRecordListSchema, await env.store.listApprovals({ turnKey: env.turn.turnKey }), "listApprovals answer");
  return requests.some((record) => record.approvalId !== asked.approvalId && calls.has(record.toolCallId));
}

/**
 * Whether the request `approvalId` was orphaned: asked when applying it answered false, to tell a
 * request retired by `orphanApprovals` (its call is refused) from one another execution applied
 * first (a person is asked again).
 */
export async function isOrphaned(env: GuardrailEnvironment, approvalId: string): Promise<boolean> {
  if (env.store === undefined) return false;
  const answer = await env.store.getApproval(approvalId);
  return answer !== undefined && parseStoreValue(ApprovalRecordSchema, answer, "getApproval answer").status === "orphaned";
}
