/**
 * Option schemas both middleware share (`createDocumentGuardrails`, `createToolGuardrails`), and
 * the one way they ask `authorize`.
 */
import { z } from "zod";
import type { GuardrailStore } from "./contracts.js";
import type { Guardrail } from "./guardrails/port.js";
import { bubblesUp } from "./interrupts.js";
import { isLogger, type GuardrailLogger } from "./logger.js";

export const isFunction = (value: unknown): boolean => typeof value === "function";

/** The store methods a middleware calls; the operator methods are the CLI's. */
const STORE_METHODS = [
  "getReceipt",
  "putReceiptIfAbsent",
  "recordSuccessfulRead",
  "hasSuccessfulRead",
  "claimMutation",
  "settleMutation",
  "releaseMutation",
  "recordVerdict",
  "getVerdict",
  "requestApproval",
  "getApproval",
  "decideApproval",
  "applyApproval",
  "getMutation",
  "appendAudit",
] as const;

export const StoreShape = z.custom<GuardrailStore>(
  (value) =>
    typeof value === "object" &&
    value !== null &&
    STORE_METHODS.every((method) => isFunction((value as Record<string, unknown>)[method])),
  `store must implement GuardrailStore (at least ${STORE_METHODS.join(", ")})`,
);

export const GuardrailListSchema = z.array(
  z.custom<Guardrail>(
    (value) =>
      typeof value === "object" &&
      value !== null &&
      typeof (value as Partial<Guardrail>).name === "string" &&
      Array.isArray((value as Partial<Guardrail>).placements) &&
      isFunction((value as Partial<Guardrail>).check),
    "a guardrail needs a name, placements and a check function",
  ),
);

export const LoggerSchema = z.custom<GuardrailLogger>(isLogger, "logger must have a warn(message, fields) method");

/**
 * Asks an authorization check about a call, with a copy of its arguments. Only literally `true`
 * allows: a JavaScript caller can return anything. A throw refuses (and is logged), except an
 * interrupt, which pauses the run.
 */
export async function isAuthorized(
  ask: (args: unknown) => unknown,
  call: { readonly id: string; readonly name: string; readonly args: unknown },
  logger: GuardrailLogger,
): Promise<boolean> {
  try {
    const answer: unknown = await ask(structuredClone(call.args));
    return answer === true;
  } catch (error) {
    if (bubblesUp(error)) throw error;
    logger.warn("authorize threw; the call is refused", { toolName: call.name, toolCallId: call.id, error });
    return false;
  }
}
