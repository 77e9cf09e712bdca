/**
 * Option schemas both middleware share (`createDocumentGuardrails`, `createToolGuardrails`), and
 * the one way they ask `authorize`.
 */
import { z } from "zod";
import type { Guardrail } from "./guardrails/port.js";
import { SCHEMA_GUARDRAIL } from "./guardrails/schema.js";
import { bubblesUp } from "./interrupts.js";
import { isLogger, type GuardrailLogger } from "./logger.js";
import type { GuardrailStore } from "./contracts/index.js";
import { copyJson } from "./digest.js";
import {
  CORE_STORE_METHODS,
  detectStoreParts,
  requireStoreParts,
  type AnyGuardrailStore,
  type StorePart,
} from "./store/capabilities.js";

export const isFunction = (value: unknown): boolean => typeof value === "function";

/** A value with the core of the store contract; its parts are checked against the configuration after parsing. */
export const StoreShape = z.custom<AnyGuardrailStore>(
  (value) => detectStoreParts(value).missingCore.length === 0,
  `store must implement GuardrailStore, at least its core: ${CORE_STORE_METHODS.join(", ")}`,
);

/**
 * The parts a middleware's store needs: `approvals` when a guardrail other than the schema
 * guardrail runs (its verdicts are recorded and it may ask for an approval; the deterministic
 * schema guardrail records nothing), `auditDelivery` when an audit sink is given (it is delivered
 * from a cursor in the store), `effects` when a `side-effect` tool is configured (its calls are
 * claimed there), `operator` when a `mutation` tool has `confirm` (it reconciles the claim).
 */
function partsNeeded(configuration: StoreConfiguration): StorePart[] {
  const parts: StorePart[] = [];
  if (configuration.guardrails.some((guardrail) => !(SCHEMA_GUARDRAIL in guardrail))) parts.push("approvals");
  if (configuration.audit?.sink !== undefined) parts.push("auditDelivery");
  if (configuration.sideEffects === true) parts.push("effects");
  if (configuration.confirmsMutations === true) parts.push("operator");
  return parts;
}

/** What of a middleware's configuration decides the store parts it needs. */
interface StoreConfiguration {
  readonly guardrails: readonly Guardrail[];
  readonly audit: { readonly sink?: unknown } | undefined;
  readonly sideEffects?: boolean;
  readonly confirmsMutations?: boolean;
}

/**
 * The store a middleware governs with, once checked: the core, no half part, and the parts its
 * configuration calls (else `ConfigurationError`, before anything is written). The one widening
 * to the full contract: a part left out is one this configuration never calls, except
 * `operator`, which the approval preflight asks only of a store that has it.
 */
export function governedStore(
  store: AnyGuardrailStore,
  configuration: StoreConfiguration,
  who: string,
): GuardrailStore {
  requireStoreParts(
    store,
    partsNeeded(configuration),
    who,
    "the configuration needs (guardrails beyond the schema guardrail store verdicts and approval requests; an audit sink is delivered from a cursor; side-effect tools are claimed in the store; a mutation's confirm reconciles its claim)",
  );
  return store as GuardrailStore;
}

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
 * interrupt, which pauses the run. Answers synchronously when the check does.
 */
export function isAuthorized(
  ask: (args: unknown) => unknown,
  call: { readonly id: string; readonly name: string; readonly args: unknown },
  logger: GuardrailLogger,
): boolean | Promise<boolean> {
  const refuse = (error: unknown): false => {
    if (bubblesUp(error)) throw error;
    logger.warn("authorize threw; the call is refused", { toolName: call.name, toolCallId: call.id, error });
    return false;
  };
  let answer: unknown;
  try {
    answer = ask(copyJson(call.args));
  } catch (error) {
    return refuse(error);
  }
  if (isThenable(answer)) return Promise.resolve(answer).then((value) => value === true, refuse);
  return answer === true;
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return (typeof value === "object" || typeof value === "function") && value !== null && typeof (value as { then?: unknown }).then === "function";
}
