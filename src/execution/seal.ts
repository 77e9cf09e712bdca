/**
 * The seal on one checked execution. The guardrails decide on a tool, its parsed arguments and one
 * call id; whatever middleware sits inside them, the tool body must run with exactly those, at
 * most once per handler call. The handler is given a sealed copy of the tool that:
 *
 * - runs the tool's own body with the checked, parsed arguments (the tool does not parse again, so
 *   a transform cannot apply twice);
 * - refuses, without running anything, an invocation whose call id or arguments differ from the
 *   checked ones, a second invocation, and one after the guardrails answered.
 *
 * The registered tool object itself is guarded too: while its call is sealed, invoking it around
 * the seal (a middleware that drops or replaces `request.tool`) is refused the same way. What the
 * seal saw afterwards says whether the body provably never started, which releases a claim.
 */
import { SealError, type SealViolation } from "../errors.js";
import type { JsonValue } from "../contracts.js";
import { digest } from "../digest.js";
import type { SealableTool } from "./parse.js";

/** The checked execution a seal admits. */
export interface SealedCall {
  readonly id: string;
  readonly name: string;
  /** Digest of the arguments passed down the handler chain (as the model or an approver wrote them). */
  readonly rawDigest: string;
  /** What the tool body receives. */
  readonly args: Readonly<Record<string, JsonValue>>;
  /** Distinguishes concurrent runs that reuse a call id (e.g. the thread id). */
  readonly scope: string;
}

/** What happened inside one sealed handler call. */
export interface SealReport {
  /** Whether the tool body started (it ran at most once). */
  readonly started: boolean;
  /** How the body ended, if it started and ended. */
  readonly outcome: { readonly returned: unknown } | { readonly threw: unknown } | undefined;
  /** Every way a middleware inside tried to break the seal, in order. */
  readonly violations: readonly SealViolation[];
}

/** Sealed calls in flight, by scope and call id: the guard on registered tools consults it. */
const inFlight = new Map<string, Seal>();
/** Registered tools whose `invoke` is guarded, with the original `invoke`. */
const originals = new WeakMap<object, SealableTool["invoke"]>();

const flightKey = (scope: string, id: string) => `${scope}\u0000${id}`;

export class Seal {
  readonly #call: SealedCall;
  readonly #invoke: SealableTool["invoke"];
  #open = true;
  #started = false;
  #outcome: SealReport["outcome"] = undefined;
  readonly #violations: SealViolation[] = [];
  /** The sealed tool for the handler's request. */
  readonly tool: SealableTool;

  constructor(tool: SealableTool, call: SealedCall) {
    this.#call = call;
    this.#invoke = guard(tool);
    const run = (sealed: SealableTool, input: unknown, config: unknown) => this.#run(sealed, input, config);
    // Inherits everything from the tool (name, description, response format, `_call`, callbacks);
    // its schema accepts anything, so `StructuredTool.call` hands `_call` the arguments `#run`
    // gives it (the checked ones) without parsing them again.
    this.tool = Object.create(tool, {
      schema: { value: true },
      invoke: {
        value: function sealedInvoke(this: SealableTool, input: unknown, config?: unknown) {
          return run(this, input, config);
        },
      },
    }) as SealableTool;
  }

  /** Runs `handler` under this seal; returns or throws what it does. */
  async around<T>(handler: () => Promise<T>): Promise<T> {
    const key = flightKey(this.#call.scope, this.#call.id);
    const previous = inFlight.get(key);
    inFlight.set(key, this);
    try {
      return await handler();
    } finally {
      this.#open = false;
      if (previous === undefined) inFlight.delete(key);
      else inFlight.set(key, previous);
    }
  }

  report(): SealReport {
    return { started: this.#started, outcome: this.#outcome, violations: [...this.#violations] };
  }

  /** Records a violation and returns the error the offending invocation gets. */
  violate(violation: SealViolation): SealError {
    this.#violations.push(violation);
    return new SealError(violation, { toolName: this.#call.name, toolCallId: this.#call.id });
  }

  async #run(sealed: SealableTool, input: unknown, config: unknown): Promise<unknown> {
    if (!this.#open) throw this.violate("late_invocation");
    if (this.#started) throw this.violate("handler_repeated");
    const { id, args } = invocation(input, config);
    if (id !== this.#call.id || digestOrUndefined(args) !== this.#call.rawDigest) {
      throw this.violate("arguments_rewritten");
    }
    // A cancelled run starts nothing: the body provably did not run.
    (config as { signal?: AbortSignal } | undefined)?.signal?.throwIfAborted();
    this.#started = true;
    // The body gets its own copy of exactly the checked arguments.
    const checked = structuredClone(this.#call.args);
    const sealedInput = isToolCall(input) ? { ...input, args: checked } : checked;
    try {
      const returned = await this.#invoke.call(sealed, sealedInput, config);
      this.#outcome = { returned };
      return returned;
    } catch (error) {
      this.#outcome = { threw: error };
      throw error;
    }
  }
}

/**
 * Guards a registered tool once: while one of its calls is sealed, an invocation of the tool
 * object itself for that call id is refused. Returns the tool's original `invoke`.
 */
function guard(tool: SealableTool): SealableTool["invoke"] {
  const known = originals.get(tool);
  if (known !== undefined) return known;
  // The prototype's (or the tool's own) invoke, called with `this` set explicitly below.
  const original = Reflect.get<SealableTool, "invoke">(tool, "invoke");
  originals.set(tool, original);
  if (!Object.isFrozen(tool)) {
    Object.defineProperty(tool, "invoke", {
      configurable: true,
      writable: true,
      enumerable: false,
      value: function guardedInvoke(this: SealableTool, input: unknown, config?: unknown) {
        const seal = sealFor(input, config);
        if (seal !== undefined) return Promise.reject(seal.violate("tool_swapped"));
        return original.call(this, input, config);
      },
    });
  }
  return original;
}

/** The seal of a call in flight that this invocation belongs to, if any. */
function sealFor(input: unknown, config: unknown): Seal | undefined {
  if (inFlight.size === 0) return undefined;
  const { id } = invocation(input, config);
  if (id === undefined) return undefined;
  const threadId = (config as { configurable?: { thread_id?: unknown } } | undefined)?.configurable?.thread_id;
  return inFlight.get(flightKey(typeof threadId === "string" ? threadId : "", id));
}

function isToolCall(input: unknown): input is { readonly type: "tool_call"; readonly id?: unknown; readonly args?: unknown } {
  return typeof input === "object" && input !== null && (input as { type?: unknown }).type === "tool_call";
}

/** The call id and arguments of a tool invocation, as `StructuredTool.invoke` reads them. */
function invocation(input: unknown, config: unknown): { readonly id: string | undefined; readonly args: unknown } {
  if (isToolCall(input)) {
    const call = input as { id?: unknown; args?: unknown };
    return { id: typeof call.id === "string" ? call.id : undefined, args: call.args };
  }
  const fromConfig = (config as { toolCall?: { id?: unknown } } | undefined)?.toolCall?.id;
  return { id: typeof fromConfig === "string" ? fromConfig : undefined, args: input };
}

function digestOrUndefined(value: unknown): string | undefined {
  try {
    return digest(value);
  } catch {
    return undefined;
  }
}

/** The scope sealed calls are keyed under: the thread, so equal call ids of other threads never meet. */
export function sealScope(configurable: unknown): string {
  const threadId = (configurable as { thread_id?: unknown } | undefined)?.thread_id;
  return typeof threadId === "string" ? threadId : "";
}
