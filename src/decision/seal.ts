/**
 * What a sealed execution's report means for the call: pure, so the table can be tested without
 * an agent. The claim of a mutation follows from it: released only when the tool body provably
 * never started, otherwise settled with what really happened.
 */
import { ToolMessage } from "@langchain/core/messages";
import { NoEffectError, type SealViolation } from "../errors.js";
import type { SealReport } from "../execution/seal.js";

export type SealFinding =
  /**
   * The body ran once with the checked arguments: the handler's answer stands. `noEffect`: the
   * body itself threw a `NoEffectError` and that very error is what the handler threw (not one an
   * inner middleware threw after the body ran, nor the body's error replaced on its way up).
   */
  | { readonly ran: true; readonly noEffect: boolean }
  /** The body never started and nothing broke the seal: an inner middleware threw or refused. */
  | { readonly notStarted: true }
  /**
   * A middleware inside broke the seal. `mayHaveRun` is false only when the body provably never
   * started; `bodyResult` is the body's own answer when it ran and returned.
   */
  | { readonly broken: SealViolation; readonly mayHaveRun: boolean; readonly bodyResult: unknown };

export function sealFinding(report: SealReport, outcome: { readonly result: unknown } | { readonly error: unknown }): SealFinding {
  const bodyResult = report.outcome !== undefined && "returned" in report.outcome ? report.outcome.returned : undefined;
  const [violation] = report.violations;
  if (violation !== undefined) return { broken: violation, mayHaveRun: report.started, bodyResult };
  if (report.started) return { ran: true, noEffect: bodyAssertedNoEffect(report, outcome) };
  if ("error" in outcome) return { notStarted: true };
  // An inner middleware answered without the tool: a refusal of its own is harmless; a success
  // (or anything else) claims an effect the guardrails cannot see, so it may have happened.
  if (ToolMessage.isInstance(outcome.result) && outcome.result.status === "error") return { notStarted: true };
  return { broken: "answered_without_tool", mayHaveRun: true, bodyResult: undefined };
}

/** The body threw a `NoEffectError`, and the handler threw exactly it. */
function bodyAssertedNoEffect(report: SealReport, outcome: { readonly result: unknown } | { readonly error: unknown }): boolean {
  if (report.outcome === undefined || !("threw" in report.outcome) || !("error" in outcome)) return false;
  return outcome.error === report.outcome.threw && NoEffectError.isInstance(outcome.error);
}
