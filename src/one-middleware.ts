/**
 * One guardrails middleware per agent. Stacked, the outer one seals each call before the inner one
 * sees it, so the inner one refuses or fails every call (reads became `tool_failed`), and two
 * document guardrails would claim and audit each call twice. LangChain already refuses two
 * middleware of one name when the agent is built; this catches the rest (one of each kind, or a
 * renamed copy) at the first model call: the outer middleware marks the model request it passes
 * down, and an inner one that finds the mark throws a `ConfigurationError` naming the fix.
 */
import { ConfigurationError } from "./errors.js";

export type GuardrailsFactory = "createDocumentGuardrails" | "createToolGuardrails";

/** Registered, so the ESM and CommonJS builds loaded in one process see each other's mark. */
const MARK = Symbol.for("arkah-agent-guardrails.model-request-governed-by");

/**
 * The model request to pass down, marked as governed by `factory`; throws a `ConfigurationError`
 * if a guardrails middleware outside this one already marked it.
 */
export function markGoverned<TRequest extends object>(request: TRequest, factory: GuardrailsFactory): TRequest {
  const outer: unknown = (request as Record<symbol, unknown>)[MARK];
  if (outer === "createDocumentGuardrails" || outer === "createToolGuardrails") throw stackedError(outer, factory);
  return { ...request, [MARK]: factory };
}

function stackedError(outer: GuardrailsFactory, inner: GuardrailsFactory): ConfigurationError {
  if (outer === inner) {
    return new ConfigurationError(
      `two ${inner} middlewares in one agent: each would check, claim and audit every call again; build one ${inner} and list every tool in its tools`,
    );
  }
  return new ConfigurationError(
    `${inner} inside ${outer} in one agent: the outer one seals each call, so the inner one refuses every call; ` +
      "use createDocumentGuardrails alone and pass the tool guardrails' checks to its guardrails option (createToolGuardrails is for agents that edit no document)",
  );
}

/**
 * The governed twins `guardTools` builds. A twin checks, claims and audits each call itself, so a
 * guardrails middleware (or `guardTools`) that met one would govern every call twice: it refuses
 * to take one, at the first model call (or when the twins are built), naming the fix.
 */
const TWIN = Symbol.for("arkah-agent-guardrails.governed-twin");

export function markTwin(tool: object): void {
  Object.defineProperty(tool, TWIN, { value: true, enumerable: false, writable: false, configurable: false });
}

export function isTwin(tool: object): boolean {
  return TWIN in tool;
}
