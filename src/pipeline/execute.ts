/**
 * Running a checked call: always under a seal (src/execution/seal.ts), so the tool body gets the
 * checked tool and arguments, once per attempt. Reads and auxiliary calls then just run; a
 * mutation is claimed first and its claim settled with what the seal saw really happened.
 */
import type { ToolMessage } from "@langchain/core/messages";
import type { ToolCallHandler } from "langchain";
import {
  MAX_READ_EVIDENCE,
  type AuditEvent,
  type GuardrailStore,
  type MutationIdentity,
  type MutationResult,
  type MutationSettlement,
  type RefusalCode,
  type ToolKind,
} from "../contracts.js";
import { checkMutationStep, claimAction } from "../decision/plan.js";
import { sealFinding, type SealFinding } from "../decision/seal.js";
import { readCandidates } from "../decision/transcript.js";
import { RetryableToolError, SealError, SettlementError } from "../errors.js";
import { Seal } from "../execution/seal.js";
import { bubblesUp } from "../interrupts.js";
import { mutationIdentity, readEvidenceDigest, toolFingerprint } from "../keys.js";
import { retryDelayMs, sleep } from "../retry.js";
import { isTrustedStore, parseClaimResult, parseStoreValue, StoreBooleanSchema } from "../stores/validate.js";
import { hasArtifact, refusal, replayMessage, resultText, type ToolResult } from "../tool-messages.js";
import type { Approved } from "../guardrails/evaluate.js";
import type { GovernedCall } from "./call.js";
import { recheckTool } from "./stages.js";

/** How often the middleware itself may run a call's tool (the tool policy's `retry`). */
export interface Attempts {
  readonly maxAttempts: number;
  readonly delayMs: number;
}

type Outcome = { readonly result: ToolResult } | { readonly error: unknown };

/**
 * Runs the call's tool under a seal. Only a body that threw `RetryableToolError` is tried again,
 * each attempt under a seal of its own; the last attempt's finding and outcome are returned.
 */
async function sealedRun(
  call: GovernedCall,
  handler: ToolCallHandler,
  attempts: Attempts,
): Promise<{ readonly finding: SealFinding; readonly outcome: Outcome }> {
  const { checked, request } = call;
  if (call.tool === undefined) throw new Error("unreachable: the step check sets the tool");
  for (let attempt = 1; ; attempt++) {
    const seal = new Seal(call.tool, {
      id: call.id,
      name: call.name,
      rawDigest: checked.rawDigest,
      args: checked.args,
    });
    const sealed = { ...request, tool: seal.tool, toolCall: { ...request.toolCall, args: checked.raw } };
    let outcome: Outcome;
    try {
      outcome = { result: await seal.around(async () => handler(sealed as Parameters<ToolCallHandler>[0])) };
    } catch (error) {
      outcome = { error };
    }
    // A retry follows a body that ran: whatever this attempt saw, something may have been written
    // (also when this attempt asserts no effect: an earlier one may have written).
    const found = sealFinding(seal.report(), outcome);
    const finding: SealFinding = attempt === 1 ? found : "broken" in found ? { ...found, mayHaveRun: true } : { ran: true, noEffect: false };
    if (!("error" in outcome) || !("ran" in finding) || attempt >= attempts.maxAttempts) return { finding, outcome };
    const { error } = outcome;
    if (!RetryableToolError.isInstance(error) || call.signal?.aborted === true) return { finding, outcome };
    // Every run of the body is one audit event: this one failed and is retried.
    await call.record({ decision: "failed", code: "retried" });
    call.note({ type: "retry", attempt: attempt + 1 });
    try {
      await sleep(retryDelayMs(attempt, attempts.delayMs, error), call.signal);
    } catch (aborted) {
      return { finding, outcome: { error: aborted } };
    }
  }
}

/**
 * A read or auxiliary call (and every call of `createToolGuardrails`). A successful
 * `document-read` becomes read evidence. With `requireText`, a result that is not a text
 * `ToolMessage` is withheld as `unsupported_result`.
 */
export async function runRead(
  call: GovernedCall,
  handler: ToolCallHandler,
  options: Attempts & { readonly requireText: boolean },
): Promise<ToolResult> {
  const changed = recheckTool(call);
  if (changed !== undefined) return changed;
  const unapproved = await applyApproval(call);
  if (unapproved !== undefined) return unapproved;
  const { finding, outcome } = await sealedRun(call, handler, options);
  if ("broken" in finding) return brokenSeal(call, finding.broken);
  if ("error" in outcome) return toolFailed(call, outcome.error);
  const { result } = outcome;
  if ("notStarted" in finding) {
    // An inner middleware refused the call itself: its answer stands, nothing ran.
    await call.record({ decision: "refused", code: "tool_failed" });
    return result;
  }
  const text = resultText(result);
  if (text === undefined && options.requireText) {
    await call.record({ decision: "failed", code: "unsupported_result" });
    return refusal(call.request.toolCall, "unsupported_result");
  }
  const executed = { decision: "executed", args: call.checked.args, ...(text === undefined ? {} : { result: text.content }) } as const;
  const { store } = call.governance;
  if (call.kind === "document-read" && text?.status === "success" && store !== undefined) {
    // The evidence and its audit event in one store call: one round trip per read.
    const event = call.event(executed);
    const evidenceDigest = readEvidenceDigest(call.turn.turnKey, { toolCallId: call.id, toolName: call.name, content: text.content });
    await store.recordSuccessfulRead({ turnKey: call.turn.turnKey, evidenceDigest }, { audit: event });
    await call.appended(event);
    return result;
  }
  await call.record(executed);
  return result;
}

/** What the mutation path needs of the transcript and the options. */
export interface MutationContext {
  readonly messages: Parameters<typeof readCandidates>[0];
  /** Index of the admitted user message. */
  readonly humanIndex: number;
  readonly kindOf: (toolName: string) => ToolKind | undefined;
  readonly requireResolvedScope: boolean;
}

/** A mutation: step rules, read evidence, the atomic claim, the sealed run, the settlement. */
export async function runMutation(
  call: GovernedCall,
  handler: ToolCallHandler,
  attempts: Attempts,
  context: MutationContext,
): Promise<ToolResult> {
  const changed = recheckTool(call);
  if (changed !== undefined) return changed;
  const stepRefusal = checkMutationStep(call.id, call.step ?? [], context.kindOf);
  if (stepRefusal !== undefined) return call.refuse(stepRefusal.refuse);
  // The reads the transcript shows in this turn; the claim itself asks the store about them.
  const readEvidence = readCandidates(context.messages, context.humanIndex, context.kindOf)
    .slice(0, MAX_READ_EVIDENCE)
    .map((read) => readEvidenceDigest(call.turn.turnKey, read));
  if (readEvidence.length === 0) return call.refuse("read_required");

  const store = call.governance.store;
  if (store === undefined) throw new Error("unreachable: the document guardrails always have a store");
  // A store this package ships validated its answers at its own boundary already.
  const trusted = isTrustedStore(store);
  const sealedTool = call.tool;
  if (sealedTool === undefined) throw new Error("unreachable: the step check sets the tool");
  const claim = async () => {
    call.signal?.throwIfAborted();
    const identity = mutationIdentity(call.turn, {
      id: call.id,
      name: call.name,
      argsDigest: call.checked.argsDigest,
      toolFingerprint: call.fingerprint ?? toolFingerprint(sealedTool),
    });
    const answer = await store.claimMutation(identity, { requireResolvedScope: context.requireResolvedScope, readEvidence });
    const claimed = trusted ? answer : parseClaimResult(answer);
    call.note({ type: "claim", status: claimed.status, mutationKey: identity.mutationKey });
    return { identity, action: claimAction(claimed) };
  };
  let { identity, action } = await claim();
  // An approval covers one execution. One an earlier execution used covers this call's replay
  // only: a slot that opened again (a no-effect reconciliation) needs a new one, so the claim
  // is given back while a person is asked.
  while ("execute" in action && call.approval !== undefined && !(await coversOrRelease(call, store, identity, action.execute))) {
    await releaseClaim(call, store, identity, action.execute);
    const renewed = await call.approval.renew();
    if ("blocked" in renewed) return call.refuse(renewed.blocked.refuse, renewed.blocked.details);
    if ("refusal" in renewed) {
      const { code, guardrail, approvalId } = renewed;
      await call.record({ decision: "refused", code, guardrail, ...(approvalId === undefined ? {} : { approvalId }) });
      return renewed.refusal;
    }
    call.adopt(renewed.pass, renewed.approval);
    ({ identity, action } = await claim());
  }
  // authorize allowed this call before the claim, so the turn's completed change may be named.
  if ("refuse" in action) return call.refuse(action.refuse, action.details);
  const { mutationKey } = identity;
  if ("replay" in action) {
    call.note({ type: "replay", mutationKey });
    await call.record({ decision: "replayed", mutationKey, result: action.replay.content });
    return replayMessage(call, action.replay);
  }
  const token = action.execute;

  // The slot is ours: run once, then settle with what really happened, with the audit event
  // that says so in the same store call.
  const settle = async (
    outcome: { outcome: "unknown" } | { outcome: "complete"; result: MutationResult },
    event: AuditEvent,
  ): Promise<void> => {
    const settlement: MutationSettlement = { turnKey: call.turn.turnKey, token, ...outcome, audit: event };
    let applied: boolean;
    try {
      const answer = await store.settleMutation(settlement);
      applied = trusted ? answer : parseStoreValue(StoreBooleanSchema, answer, "settleMutation answer");
    } catch (error) {
      const failure = new SettlementError(
        { toolName: call.name, toolCallId: call.id, mutationKey, outcome: outcome.outcome },
        { cause: error },
      );
      call.governance.logger.warn(failure.message, { toolName: call.name, toolCallId: call.id, mutationKey, error });
      throw failure;
    }
    call.note({ type: "settle", outcome: outcome.outcome, applied, mutationKey });
    if (!applied) {
      call.governance.logger.warn("settlement rejected: the claim is no longer pending under this token", {
        toolName: call.name,
        toolCallId: call.id,
        mutationKey,
      });
      // The store appended nothing; what ran is still recorded.
      await store.appendAudit(event);
    }
    await call.appended(event);
  };
  const settleUnknown = (code: RefusalCode | "seal_broken") =>
    settle({ outcome: "unknown" }, call.event({ decision: "failed", mutationKey, code }));
  const settleComplete = (result: MutationResult, event: AuditEvent) => settle({ outcome: "complete", result }, event);
  const release = () => releaseClaim(call, store, identity, token);

  const { finding, outcome } = await sealedRun(call, handler, attempts);
  if ("broken" in finding) {
    const body = finding.mayHaveRun ? bodyText(finding.bodyResult) : undefined;
    if (!finding.mayHaveRun) await release();
    else if (body !== undefined) await settleComplete(body, call.event({ decision: "failed", mutationKey, code: "seal_broken" }));
    else await settleUnknown("seal_broken");
    return brokenSeal(call, finding.broken);
  }
  if ("notStarted" in finding) {
    await release();
    if ("error" in outcome) return toolFailed(call, outcome.error);
    await call.record({ decision: "refused", mutationKey, code: "tool_failed" });
    return outcome.result;
  }
  if ("error" in outcome && finding.noEffect) {
    // The body itself proved nothing was written: the slot is given back, the scope stays open.
    await call.record({ decision: "failed", mutationKey, code: "no_effect" });
    await release();
    call.governance.logger.warn("the tool asserted its change had no effect; its claim is released", {
      code: "no_effect",
      toolName: call.name,
      toolCallId: call.id,
      mutationKey,
    });
    if (call.signal?.aborted === true) throw outcome.error;
    return refusal(call, "no_effect");
  }
  if ("error" in outcome) {
    await settleUnknown("mutation_unknown");
    const { error } = outcome;
    if (bubblesUp(error) || call.signal?.aborted === true) throw error;
    call.governance.logger.warn("mutation failed; its outcome is unknown", {
      code: "mutation_unknown",
      toolName: call.name,
      toolCallId: call.id,
      mutationKey,
      error,
    });
    return refusal(call, "mutation_unknown");
  }
  const text = resultText(outcome.result);
  // A completed mutation is replayed as text: a result whose artifact a replay would drop is not
  // settled complete. The body ran, so the claim is settled unknown (closed), never released.
  if (text === undefined || hasArtifact(outcome.result)) {
    await settleUnknown("unsupported_result");
    return refusal(call, "unsupported_result");
  }
  await settleComplete(text, call.event({ decision: "executed", mutationKey, args: call.checked.args, result: text.content }));
  return outcome.result;
}

/**
 * Gives the slot back: the body provably never started, or it threw `NoEffectError`, so nothing
 * was written. A release that fails leaves the claim pending: closed, as after a lost settlement.
 */
async function releaseClaim(call: GovernedCall, store: GuardrailStore, identity: MutationIdentity, token: string): Promise<void> {
  const released = parseStoreValue(
    StoreBooleanSchema,
    await store.releaseMutation({ turnKey: identity.turnKey, token }),
    "releaseMutation answer",
  );
  call.note({ type: "settle", outcome: "released", applied: released, mutationKey: identity.mutationKey });
  if (!released) {
    call.governance.logger.warn("release rejected: the claim is no longer pending under this token", {
      toolName: call.name,
      toolCallId: call.id,
      mutationKey: identity.mutationKey,
    });
  }
}

/**
 * Applies the call's approval to this execution. One an earlier execution used, or that a
 * concurrent one took first, does not cover it: a person is asked again (the run pauses).
 */
async function applyApproval(call: GovernedCall): Promise<ToolMessage | undefined> {
  while (call.approval !== undefined && !(await coversThisExecution(call.approval))) {
    const renewed = await call.approval.renew();
    if ("blocked" in renewed) return call.refuse(renewed.blocked.refuse, renewed.blocked.details);
    if ("refusal" in renewed) {
      const { code, guardrail, approvalId } = renewed;
      await call.record({ decision: "refused", code, guardrail, ...(approvalId === undefined ? {} : { approvalId }) });
      return renewed.refusal;
    }
    call.adopt(renewed.pass, renewed.approval);
  }
  return undefined;
}

/**
 * `coversThisExecution` while holding the claim. Applying the approval is a store call of its own:
 * when it fails, the body has not started, so the claim is given back before the failure
 * propagates (a release that fails too leaves it pending: closed).
 */
async function coversOrRelease(call: GovernedCall, store: GuardrailStore, identity: MutationIdentity, token: string): Promise<boolean> {
  const approval = call.approval;
  if (approval === undefined) return true;
  try {
    return await coversThisExecution(approval);
  } catch (error) {
    try {
      await releaseClaim(call, store, identity, token);
    } catch (releaseError) {
      call.governance.logger.warn("release failed after the approval could not be applied; the claim stays pending", {
        toolName: call.name,
        toolCallId: call.id,
        mutationKey: identity.mutationKey,
        error: releaseError,
      });
    }
    throw error;
  }
}

/** Whether the approval is this execution's: unused, and applied now (a concurrent one may take it first). */
async function coversThisExecution(approval: Approved): Promise<boolean> {
  return !approval.handle.used && (await approval.handle.apply());
}

/** A tool that threw: interrupts and cancellations propagate, anything else is `tool_failed`. */
async function toolFailed(call: GovernedCall, error: unknown): Promise<ToolMessage> {
  if (bubblesUp(error) || call.signal?.aborted === true) throw error;
  call.governance.logger.warn("tool failed", { code: "tool_failed", toolName: call.name, toolCallId: call.id, error });
  await call.record({ decision: "failed", code: "tool_failed" });
  return refusal(call.request.toolCall, "tool_failed");
}

/** Records the broken seal and fails the run: a host configuration problem, not the model's. */
async function brokenSeal(call: GovernedCall, violation: SealError["violation"]): Promise<never> {
  const error = new SealError(violation, { toolName: call.name, toolCallId: call.id });
  call.governance.logger.warn(error.message, { toolName: call.name, toolCallId: call.id, violation });
  await call.record({ decision: "failed", code: "seal_broken" });
  throw error;
}

/** The body's own text result, when it returned one (without an artifact a replay would drop). */
function bodyText(returned: unknown): MutationResult | undefined {
  if (returned === undefined || hasArtifact(returned as ToolResult)) return undefined;
  return resultText(returned as ToolResult);
}
