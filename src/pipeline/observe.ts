/**
 * The one place telemetry hooks into the pipeline: each governed call runs inside its backend's
 * `observeCall`, and ends with what the pipeline recorded for it. Without a backend the call just
 * runs. A backend that throws is logged and ignored: telemetry never changes a decision.
 */
import { isGraphInterrupt } from "@langchain/langgraph";
import { bubblesUp } from "../interrupts.js";
import { sanitizeError } from "../logger.js";
import type { GuardrailTelemetry, TelemetryCallEnd, TelemetryCallObserver } from "../telemetry.js";
import { resultText, stampedResult, type ToolResult } from "../tool-messages.js";
import type { GovernedCall } from "./call.js";

type Settled = { readonly result: ToolResult } | { readonly error: unknown };

/**
 * Runs `decide` for `call` under the governance's telemetry backend, if it has one. The pipeline
 * runs once whatever the backend does: its answer is the pipeline's own, and a backend that never
 * runs it, runs it twice or throws is logged and worked around.
 */
export function observeCall(call: GovernedCall, governed: boolean, decide: () => Promise<ToolResult>): Promise<ToolResult> {
  const { telemetry } = call.governance;
  // Every answer of the pipeline, refusal or body's result, carries its execution's id: the turn
  // service binds it to the event that ended this execution, and nothing else can set it.
  const stamped = async (): Promise<ToolResult> => stampedResult(await decide(), call.executionId);
  if (telemetry === undefined) return stamped();
  return observeWith(call, telemetry, governed, stamped);
}

async function observeWith(call: GovernedCall, telemetry: GuardrailTelemetry, governed: boolean, decide: () => Promise<ToolResult>): Promise<ToolResult> {
  const { logger } = call.governance;
  const warn = (error: unknown) => {
    logger.warn("telemetry failed", { toolName: call.name, toolCallId: call.id, error });
  };
  const includeValues = telemetry.includeValues === true;
  let pipeline: Promise<Settled> | undefined;
  const observed = async (observer: TelemetryCallObserver): Promise<Settled> => {
    call.observer = observer;
    const settled = await settle(decide);
    call.observer = undefined;
    try {
      observer.end(ending(call, settled, includeValues));
    } catch (error) {
      warn(error);
    }
    return settled;
  };
  const run = async (observer: TelemetryCallObserver): Promise<ToolResult> => unwrap(await (pipeline ??= observed(observer)));
  const start = { toolName: call.name, toolCallId: call.request.toolCall.id, kind: call.kind, turnKey: call.turn.turnKey, governed };
  try {
    await telemetry.observeCall(start, run);
  } catch (error) {
    // The pipeline's own error, passed through, is no telemetry failure.
    const settled = pipeline === undefined ? undefined : await pipeline;
    if (settled === undefined || !("error" in settled) || settled.error !== error) warn(error);
  }
  // A backend that never ran the call: run it here, as the one pipeline a late `run` would reuse.
  pipeline ??= settle(decide);
  return unwrap(await pipeline);
}

async function settle(decide: () => Promise<ToolResult>): Promise<Settled> {
  try {
    return { result: await decide() };
  } catch (error) {
    return { error };
  }
}

function unwrap(settled: Settled): ToolResult {
  if ("error" in settled) throw settled.error;
  return settled.result;
}

/** How the call ended, from the audit event recorded last and what the pipeline answered or threw. */
function ending(call: GovernedCall, settled: Settled, includeValues: boolean): TelemetryCallEnd {
  const { last } = call;
  const answered = "result" in settled ? resultText(settled.result) : undefined;
  const thrown = "error" in settled ? settled.error : undefined;
  const decision =
    "error" in settled
      ? isApprovalWait(thrown)
        ? "approval_wait"
        : (last?.decision ?? (bubblesUp(thrown) ? "interrupted" : "error"))
      : (last?.decision ?? "executed");
  const end: TelemetryCallEnd = {
    decision,
    code: last?.code,
    refusal: answered?.status === "error" && last?.code !== undefined ? last.code : undefined,
    guardrail: last?.guardrail,
    mutationKey: last?.mutationKey,
    ...(last?.effectKey === undefined ? {} : { effectKey: last.effectKey }),
    errorType: "error" in settled && !bubblesUp(thrown) ? sanitizeError(thrown).name : undefined,
  };
  if (!includeValues) return end;
  const args = call.arguments?.args ?? call.request.toolCall.args;
  return { ...end, args, ...(answered === undefined ? {} : { result: answered.content }) };
}

/** A pause for a person: an interrupt carrying one of the guardrails' approval requests. */
function isApprovalWait(error: unknown): boolean {
  try {
    return (
      isGraphInterrupt(error) &&
      error.interrupts.some((pending) => {
        const value: unknown = pending.value;
        return typeof value === "object" && value !== null && (value as { type?: unknown }).type === "arkah.approval";
      })
    );
  } catch {
    return false; // a thrown value whose getters throw is no interrupt
  }
}
