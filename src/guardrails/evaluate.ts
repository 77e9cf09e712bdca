/**
 * Step 5 of the pipeline: the guardrails of one call, in listed order. The first verdict that is
 * not `allow` wins (`observe` is recorded and the call goes on), so a later guardrail never
 * overturns an earlier refusal. Verdicts are recorded under (turn, call, guardrail, arguments):
 * a replay of the call reads them instead of running the detector again. An `approve` verdict
 * pauses the call for a person; the store keeps the call's approval request and its decision.
 */
import type { ToolMessage } from "@langchain/core/messages";
import type { ClientTool, ServerTool } from "@langchain/core/tools";
import {
  GuardrailVerdictSchema,
  VerdictRecordSchema,
  type GuardrailStore,
  type GuardrailVerdict,
  type JsonValue,
  type ToolKind,
  type VerdictKey,
  type VerdictRecord,
} from "../contracts/index.js";
import { StoreContractError } from "../errors.js";
import { isTrustedStore, parseStoreValue } from "../store/validate.js";
import type { AuditTrail } from "../audit.js";
import type { GuardrailLogger } from "../logger.js";
import { denialMessage, refusal, refusalMessage } from "../tool-messages.js";
import { approvalFor, isOrphaned, type ApprovalAsk, type ApprovalHandle } from "./approvals.js";
import { appliesTo, type Guardrail, type GuardrailContext, type JsonSchema } from "./port.js";
import { declaredSchema, SCHEMA_GUARDRAIL, zodSchemaOf } from "./schema.js";
import { toolFingerprint } from "../keys.js";
import type { Refusal } from "../decision/plan.js";
import type { ApprovalFormat } from "./langchain-format.js";
import type { ParsedArguments } from "../execution/parse.js";

const DEFAULT_TIMEOUT_MS = 10_000;

/** What the guardrails are asked about. */
export interface CheckedCall {
  readonly id: string;
  readonly name: string;
  /** The tool's own parse of `rawArgs`: what the tool body receives. */
  readonly args: Readonly<Record<string, JsonValue>>;
  /** As written, by the model or an approver, and the digest the sealed invocation must match. */
  readonly rawArgs: Readonly<Record<string, JsonValue>>;
  readonly rawDigest: string;
  readonly argsDigest: string;
  readonly kind: ToolKind | undefined;
  readonly schema: JsonSchema | undefined;
  /** `toolFingerprint` of the call's tool: verdicts and approval requests are bound to it. */
  readonly toolFingerprint: string;
  /** The arguments were parsed by the tool's own zod schema (the schema guardrail has nothing to add). */
  readonly parsedByZod: boolean;
}

export interface GuardrailEnvironment {
  readonly guardrails: readonly Guardrail[];
  readonly store: GuardrailStore | undefined;
  readonly audit: AuditTrail;
  readonly logger: GuardrailLogger;
  readonly turn: GuardrailContext["turn"];
  readonly scopeId: string;
  readonly signal: AbortSignal | undefined;
  /** The other call ids of the call's model step: an approval answer must be keyed when they asked too. */
  readonly siblings: readonly string[];
  /** A mutation may go on with an approval an earlier execution applied: its claim replays it. */
  readonly reuseApplied: boolean;
  /** The graph has a checkpointer, so a call can pause for a person. */
  readonly checkpointed: boolean;
  /** The approval interrupt's payload and resume value: this package's own, or LangChain's. */
  readonly approvalFormat: ApprovalFormat;
  /**
   * Asked before a person is asked about the call: a refusal the call would certainly get later
   * (a mutation's claim), so no request is stored and no interrupt raised for it; or `replay`
   * when its claim can only replay a completed effect (nothing would run), so nobody is asked
   * about what already happened and the call goes on, bound to replay only.
   */
  readonly beforeAsk?: (() => Promise<Refusal | typeof REPLAY_ONLY | undefined>) | undefined;
}

/** `beforeAsk`'s answer for a call whose claim can only replay: see {@link GuardrailEnvironment.beforeAsk}. */
export const REPLAY_ONLY = "replay";

/** An approval that let the call through, and how to ask again for a new execution. */
export interface Approved {
  readonly handle: ApprovalHandle;
  /** Asks a person again, for the next execution (pauses the run). */
  renew(): Promise<Evaluation>;
}

/** The guardrails' answer for a call. */
export type Evaluation =
  /**
   * Run the call, with these arguments (a person may have edited them). `replayOnly`: nobody was
   * asked, because its claim can only replay what already ran; a claim that would run it refuses.
   */
  | { readonly pass: CheckedCall; readonly approval?: Approved; readonly replayOnly?: true }
  /**
   * Refused: the model gets `refusal`; the audit records `code`, the deciding `guardrail`, and the
   * approval request whose recorded edit failed its checks, or that was orphaned, if that is why.
   */
  | { readonly refusal: ToolMessage; readonly code: string; readonly guardrail: string; readonly approvalId?: string }
  /** Refused before a person was asked (`beforeAsk`): the pipeline's own refusal, not a guardrail's. */
  | { readonly blocked: Refusal };

/** Stands in for a missing tool (the pipeline checks the tool is there before the guardrails run). */
const NO_TOOL = Object.freeze({});

/** What the guardrails are asked about: the call's parsed and written arguments, and its tool's schema. */
export function checkedCall(
  tool: ClientTool | ServerTool | undefined,
  call: { readonly id: string; readonly name: string; readonly kind?: ToolKind | undefined; readonly fingerprint?: string | undefined },
  checked: Omit<Extract<ParsedArguments, { readonly ok: true }>, "ok">,
): CheckedCall {
  return {
    id: call.id,
    name: call.name,
    args: checked.args,
    rawArgs: checked.raw,
    rawDigest: checked.rawDigest,
    argsDigest: checked.argsDigest,
    kind: call.kind,
    schema: declaredSchema(tool),
    // The pipeline's fingerprint (with the tool's declared identity fields) when it has one.
    toolFingerprint: call.fingerprint ?? toolFingerprint(tool ?? NO_TOOL),
    parsedByZod: zodSchemaOf(tool) !== undefined,
  };
}

/**
 * How the pipeline checks arguments a person edited, as it checks a model's call, in the same
 * order: the tool's parse, the tool's scope, `authorize` (the guardrails follow, here).
 */
export interface EditChecks {
  readonly parse: (raw: Readonly<Record<string, JsonValue>>) => Promise<ParsedArguments>;
  /** Whether the parsed arguments touch the turn's document (true when the tool declares no scope). */
  readonly inScope: (args: Readonly<Record<string, JsonValue>>) => boolean;
  readonly authorize: (call: CheckedCall) => Promise<boolean>;
}

/** Edited arguments that failed a check: the stage's refusal code, the guardrail that denied them, and why, for the person. */
export interface EditRefusal {
  readonly code: string;
  readonly guardrail: string | undefined;
  readonly reason: string;
}

/** What the checks said about edited arguments: the call they make, or why they were refused. */
export type EditCheck = { readonly pass: CheckedCall } | { readonly refused: EditRefusal };

/**
 * Whether `guardrail` checks a call of `name`: it applies to the tool, and it is not the schema
 * guardrail on a zod tool, whose own parse already ran (all a schema guardrail could check for it).
 */
export function checks(guardrail: Guardrail, call: { readonly name: string; readonly parsedByZod: boolean }): boolean {
  return appliesTo(guardrail, call.name) && !(call.parsedByZod && SCHEMA_GUARDRAIL in guardrail);
}

/** Runs the guardrails that apply to `call`, in order, with approvals. */
export async function evaluateGuardrails(env: GuardrailEnvironment, call: CheckedCall, edits: EditChecks): Promise<Evaluation> {
  // Approvals are gathered and asked once, after every guardrail ran: a call a later guardrail
  // denies is never put to a person, and one interrupt per call keeps each resume value with
  // its own request (LangGraph matches resume values to interrupts by their order in a task).
  const approvals: { readonly guardrail: string; readonly reason: string | undefined }[] = [];
  for (const guardrail of env.guardrails) {
    if (!checks(guardrail, call)) continue;
    const { verdict, fresh } = await verdictOf(env, guardrail, call);
    if (verdict.action === "allow") continue;
    if (fresh) await auditVerdict(env, guardrail.name, call, verdict);
    if (verdict.action === "deny") {
      return { refusal: denialMessage(call, verdict), code: verdict.code ?? "guardrail_denied", guardrail: guardrail.name };
    }
    if (verdict.action === "approve") approvals.push({ guardrail: guardrail.name, reason: verdict.reason });
  }
  if (approvals.length === 0) return { pass: call };
  const reasons = approvals.flatMap((approval) => (approval.reason === undefined ? [] : [approval.reason]));
  const ask: ApprovalAsk = {
    guardrails: approvals.map((approval) => approval.guardrail),
    reason: reasons.length === 0 ? undefined : reasons.join(" "),
  };
  return approve(env, ask, call, edits, 0);
}

/** The person's decision for execution `from` of the call (or a later one), as an evaluation. */
async function approve(env: GuardrailEnvironment, ask: ApprovalAsk, call: CheckedCall, edits: EditChecks, from: number): Promise<Evaluation> {
  // Nobody is asked to approve what will be refused anyway; a replay of the call goes on.
  const blocked = await env.beforeAsk?.();
  if (blocked === REPLAY_ONLY) return { pass: call, replayOnly: true };
  if (blocked !== undefined) return { blocked };
  const outcome = await approvalFor(env, ask, call, {
    from,
    reuseApplied: env.reuseApplied,
    checkEdit: (args) => checkEdit(env, call, args, edits),
  });
  const guardrail = ask.guardrails.join(",");
  if ("expired" in outcome) return { refusal: refusal(call, "approval_expired"), code: "approval_expired", guardrail };
  if ("orphaned" in outcome) return orphanedEvaluation(call, guardrail, outcome.approvalId);
  if (!("handle" in outcome)) {
    const { message } = outcome.decision;
    const details = message === undefined ? undefined : { reviewerMessage: message };
    return { refusal: refusal(call, "approval_rejected", details), code: "approval_rejected", guardrail };
  }
  const { decision, handle } = outcome;
  // Renewed when applying the approval answered false: an orphaned request is refused, never
  // asked again (its person decided; the call missed its lease), anything else asks a person again.
  const renew = async (): Promise<Evaluation> =>
    (await isOrphaned(env, handle.approvalId)) ? orphanedEvaluation(call, guardrail, handle.approvalId) : approve(env, ask, call, edits, handle.execution + 1);
  const approval = { handle, renew };
  if (decision.decision !== "edit") return { pass: call, approval };
  // An edit recorded without these checks (out of band, e.g. the CLI's `decide --edit-file`) is
  // checked now; one that fails them closes the request: the call is refused with the stage's code.
  const check = outcome.checked === undefined ? await checkEdit(env, call, decision.args, edits) : { pass: outcome.checked };
  if ("pass" in check) return { pass: check.pass, approval };
  const { code } = check.refused;
  const { approvalId } = handle;
  return { refusal: editRefused(call, approvalId, code), code, guardrail: check.refused.guardrail ?? guardrail, approvalId };
}

/** A call whose approval was orphaned: refused `approval_orphaned` (audited with the request's id), and nothing runs. */
function orphanedEvaluation(call: CheckedCall, guardrail: string, approvalId: string): Evaluation {
  return { refusal: refusal(call, "approval_orphaned", { approvalId }), code: "approval_orphaned", guardrail, approvalId };
}

/** The model's answer for a call whose approver's edit failed its checks: it did not run, and it was not the model's arguments. */
function editRefused(call: CheckedCall, approvalId: string, code: string): ToolMessage {
  return refusalMessage(
    call,
    code,
    "A reviewer approved this call with edited arguments that failed their checks, so it did not run. " +
      "Do not retry it with those arguments; tell the user.",
    { approvalId, editedByReviewer: true },
  );
}

/**
 * Arguments a person typed make a new call, checked as a model's call is, in the same order: the
 * tool's parse, its scope, `authorize`, then every guardrail (approvals aside: the person just gave
 * one). The first check that fails refuses the edit with its stage's code.
 */
async function checkEdit(
  env: GuardrailEnvironment,
  call: CheckedCall,
  args: Readonly<Record<string, JsonValue>>,
  edits: EditChecks,
): Promise<EditCheck> {
  const refused = (code: string, reason: string, guardrail?: string): EditCheck => ({ refused: { code, reason, guardrail } });
  const parsed = await edits.parse(args);
  if (!parsed.ok) {
    return refused(
      "invalid_arguments",
      "they do not match the tool's schema: " + parsed.issues.map((issue) => `#${issue.path}: ${issue.message}`).join("; "),
    );
  }
  const edited: CheckedCall = {
    ...call,
    args: parsed.args,
    rawArgs: parsed.raw,
    rawDigest: parsed.rawDigest,
    argsDigest: parsed.argsDigest,
  };
  if (!edits.inScope(edited.args)) return refused("out_of_scope", "they touch a document outside this turn's scope");
  if (!(await edits.authorize(edited))) return refused("unauthorized", "authorize does not allow them");
  for (const guardrail of env.guardrails) {
    if (!checks(guardrail, edited)) continue;
    const { verdict, fresh } = await verdictOf(env, guardrail, edited);
    if (verdict.action === "allow" || verdict.action === "approve") continue;
    if (fresh) await auditVerdict(env, guardrail.name, edited, verdict);
    if (verdict.action === "deny") {
      const reason = `guardrail "${guardrail.name}" denied them` + (verdict.reason === undefined ? "" : `: ${verdict.reason}`);
      return refused(verdict.code ?? "guardrail_denied", reason, guardrail.name);
    }
  }
  return { pass: edited };
}

async function auditVerdict(env: GuardrailEnvironment, guardrail: string, call: CheckedCall, verdict: GuardrailVerdict) {
  await env.audit.record({
    decision: "verdict",
    turnKey: env.turn.turnKey,
    scopeId: env.scopeId,
    toolCallId: call.id,
    toolName: call.name,
    ...(call.kind === undefined ? {} : { kind: call.kind }),
    argsDigest: call.argsDigest,
    guardrail,
    action: verdict.action,
    ...(verdict.code === undefined ? {} : { code: verdict.code }),
    args: call.args,
  });
}

/**
 * The recorded verdict, or the guardrail's new one, recorded (the first recorded one wins).
 * `fresh` says the check ran now: a verdict read back is not a new decision to audit.
 */
async function verdictOf(
  env: GuardrailEnvironment,
  guardrail: Guardrail,
  call: CheckedCall,
): Promise<{ readonly verdict: GuardrailVerdict; readonly fresh: boolean }> {
  // A pure function of the call answers the same again: nothing to record or read back.
  if (guardrail.deterministic === true) return { verdict: await runCheck(env, guardrail, call), fresh: true };
  const key: VerdictKey = {
    turnKey: env.turn.turnKey,
    toolCallId: call.id,
    toolName: call.name,
    toolFingerprint: call.toolFingerprint,
    guardrail: guardrail.name,
    argsDigest: call.argsDigest,
  };
  const { store } = env;
  const recorded = store === undefined ? undefined : storedVerdict(store, key, await store.getVerdict(key), "getVerdict");
  if (recorded !== undefined) return { verdict: recorded.verdict, fresh: false };
  const verdict = await runCheck(env, guardrail, call);
  if (store === undefined) return { verdict, fresh: true };
  const answer = await store.recordVerdict({ ...key, verdict, recordedAt: new Date().toISOString() });
  const winner = storedVerdict(store, key, answer, "recordVerdict") ?? missingVerdict();
  return { verdict: winner.verdict, fresh: true };
}

/**
 * A store's verdict answer, validated unless the store is one this package ships (which validated
 * it at its own boundary): a verdict decides whether a call runs, so a malformed one, or one
 * recorded for another key, is a `StoreContractError`, never a verdict.
 */
function storedVerdict(store: GuardrailStore, key: VerdictKey, answer: unknown, method: string): VerdictRecord | undefined {
  if (answer === undefined) return undefined;
  if (isTrustedStore(store)) return answer as VerdictRecord;
  const record = parseStoreValue(VerdictRecordSchema, answer, `${method} answer`);
  const matches = (Object.keys(key) as (keyof VerdictKey)[]).every((field) => record[field] === key[field]);
  if (!matches) throw new StoreContractError(`invalid ${method} answer: a verdict recorded for another call, tool, guardrail or arguments`);
  return record;
}

function missingVerdict(): never {
  throw new StoreContractError("invalid recordVerdict answer: expected the recorded verdict, got nothing");
}

/** Runs one check. A check that throws, times out or answers nonsense is a `partial` denial. */
async function runCheck(env: GuardrailEnvironment, guardrail: Guardrail, call: CheckedCall): Promise<GuardrailVerdict> {
  // One controller per check, aborted by the run's cancellation or by the guardrail's time
  // limit. The timer is armed only for a check that answers asynchronously.
  const controller = new AbortController();
  const cancel = () => {
    controller.abort(env.signal?.reason);
  };
  env.signal?.addEventListener("abort", cancel, { once: true });
  if (env.signal?.aborted === true) cancel();
  // Copies: a guardrail cannot change what the next one, or the tool, sees.
  const args = structuredClone(call.args);
  const context: GuardrailContext = {
    placement: "tool-args",
    toolCall: { id: call.id, name: call.name, args, rawArgs: call.rawArgs === call.args ? args : structuredClone(call.rawArgs) },
    tool: { name: call.name, kind: call.kind, schema: call.schema },
    turn: Object.freeze({ ...env.turn }),
    signal: controller.signal,
  };
  const limit = { timedOut: false };
  let timer: ReturnType<typeof setTimeout> | undefined;
  let answer: unknown;
  try {
    answer = guardrail.check(context);
    if (answer instanceof Promise) {
      const pending = answer;
      answer = await new Promise((resolve, reject) => {
        controller.signal.addEventListener("abort", () => {
          reject(controller.signal.reason as Error);
        }, { once: true });
        timer = setTimeout(() => {
          limit.timedOut = true;
          controller.abort(new Error(`guardrail "${guardrail.name}" timed out`));
        }, guardrail.timeoutMs ?? DEFAULT_TIMEOUT_MS);
        pending.then(resolve, reject);
      });
    }
  } catch (error) {
    env.signal?.throwIfAborted(); // a cancelled run is not a failed check
    env.logger.warn("guardrail check failed; the call is denied", {
      guardrail: guardrail.name,
      toolName: call.name,
      toolCallId: call.id,
      timedOut: limit.timedOut,
      error,
    });
    return failedCheck(limit.timedOut ? "timed out" : "failed");
  } finally {
    clearTimeout(timer);
    env.signal?.removeEventListener("abort", cancel);
  }
  const parsed = GuardrailVerdictSchema.safeParse(answer);
  if (!parsed.success) {
    env.logger.warn("guardrail answered an invalid verdict; the call is denied", {
      guardrail: guardrail.name,
      toolName: call.name,
      toolCallId: call.id,
    });
    return failedCheck("answered an invalid verdict");
  }
  return parsed.data;
}

function failedCheck(what: string): GuardrailVerdict {
  return {
    action: "deny",
    outcome: "partial",
    detections: [],
    reason: `A guardrail ${what} while checking this call, so it did not run. Try again later or tell the user.`,
  };
}
