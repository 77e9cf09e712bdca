/**
 * Running a checked call: always under a seal (src/execution/seal.ts), so the tool body gets the
 * checked tool and arguments, once per attempt. Reads and auxiliary calls then just run; a
 * mutation or a side effect is claimed first and its claim settled with what the seal saw really
 * happened.
 */
import type { ToolMessage } from "@langchain/core/messages";
import { isCommand } from "@langchain/langgraph";
import type { ToolCallHandler } from "langchain";
import {
  EffectClaimResultSchema,
  EffectStatusSchema,
  MAX_READ_EVIDENCE,
  ReconcileResultSchema,
  type AuditEvent,
  type ConfirmClaim,
  type EffectDiscriminator,
  type GuardrailStore,
  type MutationResult,
  type RefusalCode,
  type ToolKind,
} from "../contracts/index.js";
import { checkMutationStep, claimAction, confirmResolution, effectClaimAction, replaysAnotherCall, type ClaimAction, type Refusal } from "../decision/plan.js";
import { copyJson } from "../digest.js";
import { sealFinding, type SealFinding } from "../decision/seal.js";
import { readCandidates } from "../decision/transcript.js";
import { NoEffectError, RetryableToolError, SealError, SettlementError, StoreContractError } from "../errors.js";
import { Seal } from "../execution/seal.js";
import { bubblesUp } from "../interrupts.js";
import { effectIdentity, mutationIdentity, readEvidenceDigest, toolFingerprint } from "../keys.js";
import { retryDelayMs, sleep } from "../retry.js";
import { isTrustedStore, parseClaimResult, parseStoreValue, StoreBooleanSchema } from "../store/validate.js";
import type { TelemetryClaimKey, TelemetryStep } from "../telemetry.js";
import { duplicateEffectMessage, hasArtifact, ownCommand, ownResult, refusal, replayMessage, resultText, type ToolResult } from "../tool-messages.js";
import type { Approved } from "../guardrails/evaluate.js";
import type { GovernedCall } from "./call.js";
import { askConfirm } from "./confirm.js";
import { discriminate, recheckTool } from "./stages.js";

/** How often the middleware itself may run a call's tool (the tool policy's `retry`), and for how long each time. */
export interface Attempts {
  readonly maxAttempts: number;
  readonly delayMs: number;
  /** The tool policy's `timeoutMs`: each attempt's body is aborted, and the call refused, after it. */
  readonly timeoutMs?: number | undefined;
}

type Outcome = { readonly result: ToolResult } | { readonly error: unknown };

/** What the seal saw when an attempt timed out, taken at that moment: nothing later changes it. */
interface TimedOut {
  readonly finding: SealFinding;
}

/**
 * One attempt's timer: at `timeoutMs` it aborts the body's signal, closes the seal (no body starts
 * afterwards) and takes the seal's report, then stops the wait for the handler.
 */
class AttemptTimer {
  readonly #controller = new AbortController();
  readonly #timer: ReturnType<typeof setTimeout>;
  readonly #expired: Promise<TimedOut>;
  #seal: Seal | undefined;

  constructor(timeoutMs: number) {
    let expire: (timedOut: TimedOut) => void = () => undefined;
    this.#expired = new Promise((resolve) => {
      expire = resolve;
    });
    this.#timer = setTimeout(() => {
      const seal = this.#seal;
      seal?.close();
      const report = seal?.report() ?? { started: false, outcome: undefined, violations: [] };
      this.#controller.abort(new DOMException("the tool call timed out", "TimeoutError"));
      expire({ finding: sealFinding({ ...report, outcome: undefined }, { error: this.#controller.signal.reason }) });
    }, timeoutMs);
  }

  /** Aborted at the timeout: what the body gets besides the run's own signal. */
  get signal(): AbortSignal {
    return this.#controller.signal;
  }

  /** The handler's outcome, or the finding at the timeout, whichever comes first. */
  async race(seal: Seal, running: Promise<ToolResult>): Promise<Outcome | TimedOut> {
    this.#seal = seal;
    try {
      return await Promise.race([running.then((result) => ({ result }), (error: unknown) => ({ error })), this.#expired]);
    } finally {
      clearTimeout(this.#timer);
    }
  }
}

/**
 * Runs the call's tool under a seal. Only a body that threw `RetryableToolError` is tried again,
 * each attempt under a seal of its own; the last attempt's finding and outcome are returned.
 */
async function sealedRun(
  call: GovernedCall,
  handler: ToolCallHandler,
  attempts: Attempts,
): Promise<{ readonly finding: SealFinding; readonly outcome: Outcome; readonly timedOut?: true }> {
  const { checked, request } = call;
  if (call.tool === undefined) throw new Error("unreachable: the step check sets the tool");
  for (let attempt = 1; ; attempt++) {
    const timer = attempts.timeoutMs === undefined ? undefined : new AttemptTimer(attempts.timeoutMs);
    // A claimed call's claim is settled with what its body did, so its handler waits for the body
    // to end even after an abort; a read's or auxiliary call's need not.
    const awaitsBody = call.kind === "mutation" || call.kind === "side-effect";
    const seal = new Seal(call.tool, { id: call.id, name: call.name, rawDigest: checked.rawDigest, args: checked.args }, { bodySignal: timer?.signal, awaitsBody });
    const sealed = { ...request, tool: seal.tool, toolCall: { ...request.toolCall, args: checked.raw } };
    // `around` awaits inside its own try: a handler that throws synchronously is caught there.
    const running = seal.around(() => handler(sealed as Parameters<ToolCallHandler>[0]));
    let ended: Outcome | TimedOut;
    if (timer === undefined) {
      try {
        ended = { result: await running };
      } catch (error) {
        ended = { error };
      }
    } else {
      ended = await timer.race(seal, running);
    }
    // A retry follows a body that ran: whatever this attempt saw, something may have been written
    // (also when this attempt asserts no effect: an earlier one may have written).
    const later = (found: SealFinding): SealFinding =>
      attempt === 1 ? found : "broken" in found ? { ...found, mayHaveRun: true } : { ran: true, noEffect: false };
    if ("finding" in ended) {
      // Timed out: the body may still be running, and nothing it does from now on is looked at.
      return { finding: later(ended.finding), outcome: { error: timer?.signal.reason }, timedOut: true };
    }
    const outcome = "result" in ended ? { result: ownResult(ended.result, call) } : ended;
    const finding = later(sealFinding(seal.report(), outcome));
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
 * `ToolMessage` is withheld as `unsupported_result`; without, a `Command` is bound to its call
 * (`ownCommand`), or withheld the same way when it cannot be.
 */
export async function runRead(
  call: GovernedCall,
  handler: ToolCallHandler,
  attempts: Attempts,
  { requireText }: { readonly requireText: boolean },
): Promise<ToolResult> {
  const changed = recheckTool(call);
  if (changed !== undefined) return changed;
  if (call.approval !== undefined) {
    const unapproved = await applyApproval(call);
    if (unapproved !== undefined) return unapproved;
  }
  const { finding, outcome, timedOut } = await sealedRun(call, handler, attempts);
  if ("broken" in finding) return brokenSeal(call, finding.broken);
  if (timedOut === true) {
    // Nothing is claimed: the call is refused, whatever the body still does.
    await call.record({ decision: "ran" in finding ? "failed" : "refused", code: "tool_timeout" });
    call.governance.logger.warn("tool timed out", { code: "tool_timeout", toolName: call.name, toolCallId: call.id });
    return refusal(call.request.toolCall, "tool_timeout");
  }
  if ("error" in outcome) return toolFailed(call, outcome.error);
  const { result } = outcome;
  if ("notStarted" in finding) {
    // An inner middleware refused the call itself: its answer stands, nothing ran.
    await call.record({ decision: "refused", code: "tool_failed" });
    return result;
  }
  // A Command is bound to its call as its ToolMessage is (sealedRun); with `requireText` (the
  // document guardrails) none is, as it is no text result.
  const bound = isCommand(result) && !requireText ? ownCommand(result, call) : undefined;
  const text = resultText(bound?.message ?? result);
  if ((text === undefined && requireText) || (isCommand(result) && bound === undefined)) {
    await call.record({ decision: "failed", code: "unsupported_result" });
    return refusal(call.request.toolCall, "unsupported_result");
  }
  const answer = bound?.command ?? result;
  const executed = { decision: "executed", args: call.checked.args, ...(text === undefined ? {} : { result: text.content }) } as const;
  const { store } = call.governance;
  if (call.kind === "document-read" && text?.status === "success" && store !== undefined) {
    // The evidence and its audit event in one store call: one round trip per read.
    const event = call.event(executed);
    const evidenceDigest = readEvidenceDigest(call.turn.turnKey, { toolCallId: call.id, toolName: call.name, content: text.content });
    await store.recordSuccessfulRead({ turnKey: call.turn.turnKey, evidenceDigest }, { audit: event });
    const delivering = call.appended(event);
    if (delivering !== undefined) await delivering;
    return answer;
  }
  await call.record(executed);
  return answer;
}

/** What the mutation path needs of the transcript and the options. */
export interface MutationContext {
  readonly messages: Parameters<typeof readCandidates>[0];
  /** Index of the admitted user message. */
  readonly humanIndex: number;
  readonly kindOf: (toolName: string) => ToolKind | undefined;
  readonly requireResolvedScope: boolean;
}

/**
 * A mutation: step rules, read evidence, the atomic claim (settled first by the tool's `confirm`,
 * when it has one and the claim is this call's, unresolved), the sealed run, the settlement.
 */
export async function runMutation(
  call: GovernedCall,
  handler: ToolCallHandler,
  attempts: Attempts,
  context: MutationContext,
  confirm?: ConfirmClaim,
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

  const store = governedStoreOf(call);
  const trusted = isTrustedStore(store);
  const { turnKey } = call.turn;
  return runClaimed(call, handler, attempts, {
    noun: "mutation",
    unknownCode: "mutation_unknown",
    confirm,
    confirmKey: (key) => ({ kind: "mutation", mutationKey: key.mutationKey ?? "" }),
    reconcile: async (resolution, key, operatorRef) => {
      // A mutation is reconciled by its turn's slot, which another resolver may have reopened for
      // another call while confirm was asked: naming this call's mutationKey makes the store check,
      // in the reconciliation's own transaction, that the claim is still this call's.
      const reconciled = await store.reconcileMutation({ turnKey, ...resolution, operatorRef, mutationKey: key.mutationKey });
      return (trusted ? reconciled : parseStoreValue(ReconcileResultSchema, reconciled, "reconcileMutation answer")).reconciled;
    },
    claim: async (fingerprint) => {
      const identity = mutationIdentity(call.turn, { id: call.id, name: call.name, argsDigest: call.checked.argsDigest, toolFingerprint: fingerprint });
      const answer = await store.claimMutation(identity, { requireResolvedScope: context.requireResolvedScope, readEvidence });
      const claimed = trusted ? answer : parseClaimResult(answer);
      return { key: { mutationKey: identity.mutationKey }, status: claimed.status, action: claimAction(claimed) };
    },
    settle: async (token, outcome, audit) => {
      const answer = await store.settleMutation({ turnKey, token, ...outcome, audit });
      return trusted ? answer : parseStoreValue(StoreBooleanSchema, answer, "settleMutation answer");
    },
    release: async (token) => parseStoreValue(StoreBooleanSchema, await store.releaseMutation({ turnKey, token }), "releaseMutation answer"),
  });
}

/**
 * A `side-effect` call: no step rule and no read needed; the effect's own claim (turn, tool,
 * arguments, the discriminator's answer; optionally limited per turn), the sealed run, the
 * settlement: the mutation's shell. A replay for an identical call earlier in the turn says so.
 */
export async function runSideEffect(
  call: GovernedCall,
  handler: ToolCallHandler,
  attempts: Attempts,
  options: { readonly maxPerTurn: number | undefined; readonly discriminator: EffectDiscriminator | undefined; readonly confirm?: ConfirmClaim | undefined },
): Promise<ToolResult> {
  const changed = recheckTool(call);
  if (changed !== undefined) return changed;
  const store = governedStoreOf(call);
  const trusted = isTrustedStore(store);
  const claimOptions = options.maxPerTurn === undefined ? {} : { maxPerTurn: options.maxPerTurn };
  return runClaimed(call, handler, attempts, {
    noun: "side effect",
    unknownCode: "effect_unknown",
    confirm: options.confirm,
    confirmKey: (key) => ({ kind: "side-effect", effectKey: key.effectKey ?? "" }),
    reconcile: async (resolution, key, operatorRef) => {
      const reconciled = await store.reconcileEffect({ effectKey: key.effectKey ?? "", ...resolution, operatorRef });
      return (trusted ? reconciled : parseStoreValue(ReconcileResultSchema, reconciled, "reconcileEffect answer")).reconciled;
    },
    claim: async (fingerprint) => {
      // Asked at each claim: an approver's edit (the loop below) changes the arguments it is told.
      const discriminated = discriminate(call, options.discriminator);
      if (!discriminated.ok) return { refuse: "effect_unidentified" };
      const identity = effectIdentity(call.turn, {
        id: call.id,
        name: call.name,
        argsDigest: call.checked.argsDigest,
        toolFingerprint: fingerprint,
        discriminatorDigest: discriminated.digest,
      });
      const answer = await store.claimEffect(identity, claimOptions);
      const claimed = trusted ? answer : parseStoreValue(EffectClaimResultSchema, answer, "claimEffect answer");
      return { key: { effectKey: identity.effectKey }, status: claimed.status, action: effectClaimAction(claimed) };
    },
    replay: async (result, key) => {
      // Which call made the effect: the claim's answer does not say, so one read, on replays only.
      const answer = await store.getEffect(key.effectKey ?? "");
      const effect = answer === undefined || trusted ? answer : parseStoreValue(EffectStatusSchema, answer, "getEffect answer");
      return replaysAnotherCall(effect, call) ? duplicateEffectMessage(call, result, effect?.toolCallId) : replayMessage(call, result);
    },
    settle: async (token, outcome, audit, key) => {
      const answer = await store.settleEffect({ effectKey: key.effectKey ?? "", token, ...outcome, audit });
      return trusted ? answer : parseStoreValue(StoreBooleanSchema, answer, "settleEffect answer");
    },
    release: async (token, key) =>
      parseStoreValue(StoreBooleanSchema, await store.releaseEffect({ effectKey: key.effectKey ?? "", token }), "releaseEffect answer"),
  });
}

function governedStoreOf(call: GovernedCall): GuardrailStore {
  const { store } = call.governance;
  if (store === undefined) throw new Error("unreachable: the document guardrails always have a store");
  return store;
}

/**
 * The two kinds of claim (a mutation's turn slot, a side effect's key) as the shared shell uses
 * them. Each store call answers what the store said, validated unless the store is one this
 * package ships (which validated it at its own boundary).
 */
interface ClaimKind {
  /** For log messages. */
  readonly noun: "mutation" | "side effect";
  /** What an ambiguous outcome is refused with (and recorded as). */
  readonly unknownCode: "mutation_unknown" | "effect_unknown";
  /** Claims the call's identity (its arguments as checked now: an approver may have edited them). */
  claim(
    fingerprint: string,
  ): Promise<{ readonly key: TelemetryClaimKey; readonly status: TelemetryClaimStatus; readonly action: ClaimAction } | Refusal>;
  /** Settles the claim held by `token`, with its audit event in the same store call. */
  settle(
    token: string,
    outcome: { readonly outcome: "unknown" } | { readonly outcome: "complete"; readonly result: MutationResult },
    audit: AuditEvent,
    key: TelemetryClaimKey,
  ): Promise<boolean>;
  /** Gives the claim held by `token` back. */
  release(token: string, key: TelemetryClaimKey): Promise<boolean>;
  /** The model's answer for a replay of the stored `result`; default: the result as it was. */
  replay?(result: MutationResult, key: TelemetryClaimKey): Promise<ToolMessage>;
  /** The tool's `confirm`, asked when this call's claim answers `pending` or `unknown`. */
  readonly confirm: ConfirmClaim | undefined;
  /** The claim's key as `confirm` is told it. */
  confirmKey(key: TelemetryClaimKey): { readonly kind: "mutation"; readonly mutationKey: string } | { readonly kind: "side-effect"; readonly effectKey: string };
  /**
   * Settles this call's unresolved claim on `confirm`'s word, through the operator's store path;
   * false when the store did not (it is no longer this call's unresolved claim).
   */
  reconcile(resolution: NonNullable<ReturnType<typeof confirmResolution>>, key: TelemetryClaimKey, operatorRef: string): Promise<boolean>;
}

type TelemetryClaimStatus = Extract<TelemetryStep, { readonly type: "claim" }>["status"];

/**
 * The claimed path: the atomic claim (given back while a person is asked again), a replay or a
 * refusal from its answer, else the sealed run, once, and the settlement with what the seal saw
 * really happened. Every way out that may have left an effect leaves the claim closed.
 */
async function runClaimed(call: GovernedCall, handler: ToolCallHandler, attempts: Attempts, kind: ClaimKind): Promise<ToolResult> {
  const sealedTool = call.tool;
  if (sealedTool === undefined) throw new Error("unreachable: the step check sets the tool");
  const claim = async () => {
    call.signal?.throwIfAborted();
    const claimed = await kind.claim(call.fingerprint ?? toolFingerprint(sealedTool));
    if ("refuse" in claimed) return claimed;
    call.note({ type: "claim", status: claimed.status, ...claimed.key });
    return claimed;
  };
  const first = await claim();
  if ("refuse" in first) return call.refuse(first.refuse);
  let { key, action } = first;
  const { status } = first;
  // This very call's claim is unresolved (a crash, a timeout, an ambiguous failure, met again on a
  // retry, a takeover or a resume): the write service is asked, once, and a settlement it makes is
  // followed in this same call: a replay of the confirmed result, or one run of the reopened claim.
  if ((status === "pending" || status === "unknown") && (await settleByConfirm(call, kind, key, status))) {
    const settled = await claim();
    if ("refuse" in settled) return call.refuse(settled.refuse);
    ({ key, action } = settled);
  }
  const releaseHeld = (token: string) => releaseClaim(call, kind, key, token);
  // An approval covers one execution. One an earlier execution used covers this call's replay
  // only: a claim that opened again (a no-effect reconciliation) needs a new one, so the claim
  // is given back while a person is asked.
  while ("execute" in action && call.approval !== undefined && !(await coversOrRelease(call, kind, key, action.execute))) {
    await releaseHeld(action.execute);
    const renewed = await call.approval.renew();
    if ("blocked" in renewed) return call.refuse(renewed.blocked.refuse, renewed.blocked.details);
    if ("refusal" in renewed) {
      const { code, guardrail, approvalId } = renewed;
      await call.record({ decision: "refused", code, guardrail, ...(approvalId === undefined ? {} : { approvalId }) });
      return renewed.refusal;
    }
    call.adopt(renewed.pass, renewed.approval, renewed.replayOnly === true);
    const again = await claim();
    if ("refuse" in again) return call.refuse(again.refuse);
    ({ key, action } = again);
  }
  // Nobody was asked because the preflight read a completed effect, which only replays: a claim
  // that would run it contradicts the store's own answer (complete is final), so nothing runs.
  if ("execute" in action && call.replayOnly) {
    await releaseHeld(action.execute);
    throw new StoreContractError(
      `the store answered getEffect "complete" and then let the same ${kind.noun} be claimed to run; it was released, nothing ran`,
    );
  }
  // authorize allowed this call before the claim, so the turn's completed change may be named.
  if ("refuse" in action) return call.refuse(action.refuse, action.details);
  if ("replay" in action) {
    call.note({ type: "replay", ...key });
    const answer = kind.replay === undefined ? replayMessage(call, action.replay) : await kind.replay(action.replay, key);
    await call.record({ decision: "replayed", ...key, result: action.replay.content });
    return answer;
  }
  const token = action.execute;
  const logKey = { toolName: call.name, toolCallId: call.id, ...key };

  // The claim is ours: run once, then settle with what really happened, with the audit event
  // that says so in the same store call.
  const settle = async (
    outcome: { outcome: "unknown" } | { outcome: "complete"; result: MutationResult },
    event: AuditEvent,
  ): Promise<void> => {
    let applied: boolean;
    try {
      applied = await kind.settle(token, outcome, event, key);
    } catch (error) {
      const failure = new SettlementError({ toolName: call.name, toolCallId: call.id, ...key, outcome: outcome.outcome }, { cause: error });
      call.governance.logger.warn(failure.message, { ...logKey, error });
      throw failure;
    }
    call.note({ type: "settle", outcome: outcome.outcome, applied, ...key });
    if (!applied) {
      call.governance.logger.warn("settlement rejected: the claim is no longer pending under this token", logKey);
      // The store appended nothing; what ran is still recorded.
      await call.governance.store?.appendAudit(event);
    }
    const delivering = call.appended(event);
    if (delivering !== undefined) await delivering;
  };
  const settleUnknown = (code: RefusalCode | "seal_broken") => settle({ outcome: "unknown" }, call.event({ decision: "failed", ...key, code }));
  const settleComplete = (result: MutationResult, event: AuditEvent) => settle({ outcome: "complete", result }, event);
  const release = () => releaseHeld(token);

  const { finding, outcome, timedOut } = await sealedRun(call, handler, attempts);
  if ("broken" in finding) {
    const body = finding.mayHaveRun ? bodyText(finding.bodyResult) : undefined;
    if (!finding.mayHaveRun) await release();
    else if (body !== undefined) await settleComplete(body, call.event({ decision: "failed", ...key, code: "seal_broken" }));
    else await settleUnknown("seal_broken");
    return brokenSeal(call, finding.broken);
  }
  if (timedOut === true) {
    // The body may still be writing: its claim is closed unknown (confirm, or an operator, settles
    // it), unless it provably never started (the seal is closed, so it never will).
    if ("notStarted" in finding) {
      await release();
      await call.record({ decision: "refused", ...key, code: "tool_timeout" });
    } else {
      await settleUnknown("tool_timeout");
    }
    call.governance.logger.warn(`${kind.noun} timed out`, { code: "tool_timeout", ...logKey });
    return refusal(call, "tool_timeout");
  }
  if ("notStarted" in finding) {
    await release();
    if ("error" in outcome) return toolFailed(call, outcome.error);
    await call.record({ decision: "refused", ...key, code: "tool_failed" });
    return outcome.result;
  }
  if ("error" in outcome && finding.noEffect) {
    // The body itself proved nothing happened: the claim is given back.
    await call.record({ decision: "failed", ...key, code: "no_effect" });
    await release();
    call.governance.logger.warn(`the tool asserted its ${kind.noun} had no effect; its claim is released`, { code: "no_effect", ...logKey });
    if (call.signal?.aborted === true) throw outcome.error;
    // The tool's own explanation, only when it gave one explicitly (never the error's message).
    const reason = NoEffectError.find(outcome.error)?.reason;
    return refusal(call, "no_effect", reason === undefined ? undefined : { reason });
  }
  if ("error" in outcome) {
    await settleUnknown(kind.unknownCode);
    const { error } = outcome;
    if (bubblesUp(error) || call.signal?.aborted === true) throw error;
    call.governance.logger.warn(`${kind.noun} failed; its outcome is unknown`, { code: kind.unknownCode, ...logKey, error });
    return refusal(call, kind.unknownCode);
  }
  const text = resultText(outcome.result);
  // A completed claim is replayed as text: a result whose artifact a replay would drop is not
  // settled complete. The body ran, so the claim is settled unknown (closed), never released.
  if (text === undefined || hasArtifact(outcome.result)) {
    await settleUnknown("unsupported_result");
    return refusal(call, "unsupported_result");
  }
  await settleComplete(text, call.event({ decision: "executed", ...key, args: call.checked.args, result: text.content }));
  return outcome.result;
}

/**
 * Asks the tool's `confirm` about this call's own unresolved claim (`state`, as the claim just
 * answered) and settles it with the answer, as an operator's reconciliation would
 * (`confirm:<tool>` as the operator reference, the store's `reconciled` audit event). True when
 * the claim was settled; `unknown`, a failure or an answer that is not valid leave it as it was.
 */
async function settleByConfirm(call: GovernedCall, kind: ClaimKind, key: TelemetryClaimKey, state: "pending" | "unknown"): Promise<boolean> {
  const { confirm } = kind;
  if (confirm === undefined) return false;
  const { logger } = call.governance;
  const log = { toolName: call.name, toolCallId: call.id, ...key };
  const answer = await askConfirm(
    confirm,
    {
      ...kind.confirmKey(key),
      toolName: call.name,
      toolCallId: call.id,
      args: copyJson(call.checked.args),
      scopeId: call.turn.scopeId,
      turnKey: call.turn.turnKey,
      state,
    },
    { signal: call.signal, logger, log },
  );
  call.signal?.throwIfAborted(); // a cancelled run settles nothing more
  const resolution = confirmResolution(answer);
  if (resolution === undefined) return false;
  const reconciled = await kind.reconcile(resolution, key, `confirm:${call.name}`);
  if (!reconciled) logger.warn("confirm's answer was not applied: the claim is no longer this call's unresolved claim", log);
  return reconciled;
}

/**
 * Gives the claim back: the body provably never started, or it threw `NoEffectError`, so nothing
 * was done. A release that fails leaves the claim pending: closed, as after a lost settlement.
 */
async function releaseClaim(call: GovernedCall, kind: ClaimKind, key: TelemetryClaimKey, token: string): Promise<void> {
  const released = await kind.release(token, key);
  call.note({ type: "settle", outcome: "released", applied: released, ...key });
  if (!released) {
    call.governance.logger.warn("release rejected: the claim is no longer pending under this token", {
      toolName: call.name,
      toolCallId: call.id,
      ...key,
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
async function coversOrRelease(call: GovernedCall, kind: ClaimKind, key: TelemetryClaimKey, token: string): Promise<boolean> {
  const approval = call.approval;
  if (approval === undefined) return true;
  try {
    return await coversThisExecution(approval);
  } catch (error) {
    try {
      await releaseClaim(call, kind, key, token);
    } catch (releaseError) {
      call.governance.logger.warn("release failed after the approval could not be applied; the claim stays pending", {
        toolName: call.name,
        toolCallId: call.id,
        ...key,
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
