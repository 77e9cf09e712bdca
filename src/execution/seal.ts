/**
 * The seal on one checked execution. The guardrails decide on a tool, its parsed arguments and one
 * call id; whatever middleware sits inside them, the tool body must run with exactly those, at
 * most once per handler call.
 *
 * Two parts:
 *
 * - The handler is given a sealed copy of the tool whose `invoke` admits one invocation, with the
 *   checked call id and arguments, and refuses any other (other arguments, a second one, one after
 *   the guardrails answered) without running anything.
 * - The body itself is guarded (`guardTool`): a governed tool's `_call` and `func` (what `tool()`
 *   and `DynamicTool` run) and its `invoke` are replaced, once, by guards. While a governed call's
 *   handler chain runs (an `AsyncLocalStorage` context, so concurrent calls and threads never
 *   meet), a body runs only on the single-use permit the sealed invocation issues, and receives a
 *   fresh copy of the checked arguments. `call`, `_call`, `func`, `stream`, `batch`, the registered
 *   tool under any config: each reaches a guard without the permit and is refused, unrun. Outside
 *   every governed call (other host code, a test) the guards just call through.
 * - The admitted body runs with `this` the registered tool, never the frozen sealed copy, so a tool
 *   that keeps state on itself (`this.calls += 1`, `this.client ??= ...`) keeps it. Its own entry
 *   points on `this` are the guards above, and each inner entry (`func`, a class's `_call`) passes
 *   once per admitted call: code the body calls cannot enter the body again.
 *
 * What the seal saw afterwards says whether the body provably never started, which releases a claim.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import { AsyncLocalStorageProviderSingleton } from "@langchain/core/singletons";
import { SealError, type SealViolation } from "../errors.js";
import type { JsonValue } from "../contracts/index.js";
import { copyJson, digest } from "../digest.js";
import {
  classBodyOf,
  currentBody,
  guardedClasses,
  guardedTools,
  originalBodies,
  originalClassBodies,
  racesSignal,
  takesInputString,
  type SealableTool,
} from "./tool.js";

/** The checked execution a seal admits. */
export interface SealedCall {
  readonly id: string;
  readonly name: string;
  /** Digest of the arguments passed down the handler chain (as the model or an approver wrote them). */
  readonly rawDigest: string;
  /** The parsed arguments: the body receives a fresh copy (a string tool, their `input`). */
  readonly args: Readonly<Record<string, JsonValue>>;
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

type Method = (this: unknown, ...args: unknown[]) => unknown;

/** What a governed tool's guards call through to. */
export interface Originals {
  /** Its `invoke`, as it was before the guard replaced it. */
  readonly invoke: SealableTool["invoke"];
  /** What the guarded `_call` enters once admitted: its own `_call`, or its class's guarded one. */
  readonly call: Method;
}

/** Governed tools whose body is guarded. */
const guarded = new WeakMap<object, Originals>();

/** The seal of the governed call whose handler chain the running code belongs to, if any. */
const current = new AsyncLocalStorage<Seal>();

/** The one entry into a body a sealed invocation allows. */
interface Permit {
  readonly tool: object;
  /** What the sealed invocation passed to `call`: `_call` must be given this very object. */
  readonly token: object;
  /** What the body receives instead: a copy no other object shares. */
  readonly input: unknown;
}

export class Seal {
  readonly #call: SealedCall;
  readonly #tool: SealableTool;
  readonly #invoke: SealableTool["invoke"];
  /** Aborts the body's run besides the run's own signal (the tool policy's `timeoutMs`). */
  readonly #bodySignal: AbortSignal | undefined;
  /**
   * Whether the handler answers the body's own end after an abort (`callUnraced`): for a claimed
   * call, whose claim is settled with what the body did.
   */
  readonly awaitsBody: boolean;
  #open = true;
  /** The sealed invocation happened (there is one). */
  #invoked = false;
  #permit: Permit | undefined = undefined;
  /**
   * The tool whose admitted `_call` is running its body's first, synchronous part, and the inner
   * entries (`func`, a class's `_call`) already passed in it: each passes once.
   */
  #passing: { readonly tool: object; readonly passed: Set<object> } | undefined = undefined;
  #started = false;
  #outcome: SealReport["outcome"] = undefined;
  readonly #violations: SealViolation[] = [];
  /** The sealed tool for the handler's request. */
  readonly tool: SealableTool;

  constructor(tool: SealableTool, call: SealedCall, options: { readonly bodySignal?: AbortSignal | undefined; readonly awaitsBody?: boolean } = {}) {
    this.#call = call;
    this.#tool = tool;
    this.#bodySignal = options.bodySignal;
    this.awaitsBody = options.awaitsBody === true;
    this.#invoke = guardTool(tool).invoke;
    const SealedCopy = sealedCopyOf(tool);
    this.tool = new SealedCopy((sealed, input, config) => this.#run(sealed, input, config));
  }

  /** Runs `handler` under this seal; returns or throws what it does. */
  async around<T>(handler: () => T | PromiseLike<T>): Promise<T> {
    try {
      return await current.run(this, handler);
    } finally {
      this.#open = false;
      this.#permit = undefined;
    }
  }

  /**
   * Closes the seal before the handler ended (the call timed out): no body starts from now on, and
   * what happens later is not reported to anyone who took the report now.
   */
  close(): void {
    this.#open = false;
    this.#permit = undefined;
  }

  report(): SealReport {
    return { started: this.#started, outcome: this.#outcome, violations: [...this.#violations] };
  }

  /** Records a violation and returns the error the offending invocation gets. */
  violate(violation: SealViolation): SealError {
    this.#violations.push(violation);
    return new SealError(violation, { toolName: this.#call.name, toolCallId: this.#call.id });
  }

  /**
   * A guarded `_call` of `tool` inside this seal's handler chain: admitted only on the permit, once,
   * and only while nothing broke the seal. Answers what the body receives instead of `token`, or
   * the refusal.
   */
  admit(tool: object, token: unknown): { readonly input: unknown } | SealError {
    const permit = this.#permit;
    if (permit?.tool !== tool || permit.token !== token || this.#violations.length > 0) {
      return this.violate(this.#open ? "body_called" : "late_invocation");
    }
    this.#permit = undefined;
    this.#started = true;
    this.#passing = { tool, passed: new Set() };
    return permit;
  }

  /** The admitted `_call` returned (or threw): its `func` can no longer be entered. */
  leave(): void {
    this.#passing = undefined;
  }

  /**
   * A guarded inner entry `door` (its `func`, or a class's `_call`) of `tool`: passes only
   * synchronously inside its admitted `_call`, and once. What the body calls there (a client a
   * middleware planted on the tool) could otherwise enter the body again with other arguments.
   * Otherwise answers the refusal.
   */
  pass(tool: object, door: object): SealError | undefined {
    const passing = this.#passing;
    if (passing?.tool !== tool || passing.passed.has(door)) return this.violate(this.#open ? "body_called" : "late_invocation");
    passing.passed.add(door);
    return undefined;
  }

  async #run(sealed: SealableTool, input: unknown, config: unknown): Promise<unknown> {
    if (!this.#open) throw this.violate("late_invocation");
    if (this.#invoked) throw this.violate("handler_repeated");
    // Once broken, nothing runs: the first violation stands.
    const [broken] = this.#violations;
    if (broken !== undefined) throw new SealError(broken, { toolName: this.#call.name, toolCallId: this.#call.id });
    const { id, args } = invocation(input, config);
    if (id !== this.#call.id || digestOrUndefined(args) !== this.#call.rawDigest) {
      throw this.violate("arguments_rewritten");
    }
    const given = (config as { signal?: AbortSignal } | undefined)?.signal;
    const signal = this.#bodySignal === undefined ? given : given === undefined ? this.#bodySignal : AbortSignal.any([given, this.#bodySignal]);
    // A cancelled run starts nothing: the body provably did not run.
    signal?.throwIfAborted();
    if (signal !== given) config = { ...(config as object | undefined), signal };
    this.#invoked = true;
    // The token travels through LangChain's `call` (and its callbacks); the body gets its own copy.
    const token = copyJson(this.#call.args);
    const copy = copyJson(this.#call.args);
    this.#permit = { tool: this.#tool, token, input: takesInputString(this.#tool) ? copy.input : copy };
    const sealedInput = isToolCall(input) ? { ...input, args: token } : token;
    try {
      const returned = await this.#invoke.call(sealed, sealedInput, config);
      this.#outcome = { returned };
      return returned;
    } catch (error) {
      this.#outcome = { threw: error };
      throw error;
    } finally {
      this.#permit = undefined;
    }
  }
}

/** Where a sealed copy keeps its seal's invocation: only the sealed `invoke` reads it. */
const RUN = Symbol("sealed invocation");
type SealedRun = (sealed: SealableTool, input: unknown, config: unknown) => Promise<unknown>;
type SealedCopyConstructor = new (run: SealedRun) => SealableTool;

/** Per governed tool, the constructor of its sealed copies. */
const sealedCopies = new WeakMap<object, SealedCopyConstructor>();

/**
 * The constructor of `tool`'s sealed copies, made once per tool: every copy of one tool shares one
 * frozen prototype (a per-call `Object.create` with descriptors cost microseconds a call). The
 * prototype inherits everything from the tool (name, description, response format, the guarded
 * `_call`, callbacks); its schema accepts anything, so `StructuredTool.call` hands `_call` the
 * token `#run` gives it without parsing it again. Each copy is frozen too, so nothing can be put
 * in the body's place; it holds only its seal's `#run` (what its `invoke` calls anyway).
 */
function sealedCopyOf(tool: SealableTool): SealedCopyConstructor {
  const known = sealedCopies.get(tool);
  if (known !== undefined) return known;
  const prototype = Object.freeze(
    Object.create(tool, {
      schema: { value: true },
      invoke: {
        value: function sealedInvoke(this: unknown, input: unknown, config?: unknown) {
          const run = typeof this === "object" && this !== null ? (this as { [RUN]?: unknown })[RUN] : undefined;
          if (typeof run === "function") return (run as SealedRun)(this as SealableTool, input, config);
          // Called on another object (`invoke.call(registered, ...)`): another tool than the sealed
          // copy, so the seal of the governed call it happens in breaks, as for any swapped tool.
          const seal = current.getStore();
          return Promise.reject(
            seal === undefined ? new TypeError("a sealed tool's invoke was called on another object") : seal.violate("tool_swapped"),
          );
        },
      },
    }) as object,
  );
  function SealedCopy(this: { [RUN]: SealedRun }, run: SealedRun): void {
    this[RUN] = run;
    Object.freeze(this);
  }
  SealedCopy.prototype = prototype;
  const made = SealedCopy as unknown as SealedCopyConstructor;
  sealedCopies.set(tool, made);
  return made;
}

/**
 * Guards a governed tool's body, once (the guardrails call it when they first see the tool, at the
 * agent's first model call, and for every seal): its `invoke`, `_call` and, when it has one of its
 * own, `func` become guards that call through outside every governed call and, inside one, let
 * only the sealed invocation's permit reach the body. The guards cannot be replaced or removed.
 * A subclass's `_call` is guarded on its class too (`classBodyOf`). The tool must be sealable
 * (`isSealable`: extensible, those properties configurable).
 */
export function guardTool(tool: SealableTool): Originals {
  const known = guarded.get(tool);
  if (known !== undefined) return known;
  const invoke = Reflect.get<SealableTool, "invoke">(tool, "invoke");
  const func = Object.getOwnPropertyDescriptor(tool, "func")?.value as unknown;
  const classBody = classBodyOf(tool);
  // The implementation a fingerprint covers, before a guard stands in its place.
  originalBodies.set(tool, currentBody(tool) ?? null);
  // The admitted `_call` enters a subclass's body through its class guard, which passes once, so
  // code the body calls cannot enter the body again (on the class's first guarded tool too).
  const call: Method = classBody === undefined ? Reflect.get<SealableTool, "_call">(tool, "_call") : guardClass(classBody);
  const originals: Originals = { invoke, call };
  const define = (key: string, value: Method) =>
    Object.defineProperty(tool, key, { value, writable: false, configurable: false, enumerable: false });

  // The registered tool itself is never what the handler runs: invoking it inside a governed call
  // (a middleware that dropped or replaced `request.tool`, a body calling another governed tool)
  // is refused whatever config, thread or call id comes with it.
  define("invoke", function guardedInvoke(this: unknown, input: unknown, config?: unknown) {
    const seal = current.getStore();
    if (seal === undefined) return invoke.call(this, input, config);
    return Promise.reject(seal.violate("tool_swapped"));
  });
  define("_call", function guardedCall(this: unknown, token: unknown, ...rest: unknown[]) {
    const seal = current.getStore();
    if (seal === undefined) return call.call(this, token, ...rest);
    const entry = seal.admit(tool, token);
    // A body answers with a promise: so does its refusal.
    if (entry instanceof SealError) return Promise.reject(entry);
    try {
      // On the registered tool, not the frozen sealed copy `this` is: its writes to `this` persist.
      return call.call(tool, entry.input, ...rest);
    } finally {
      seal.leave();
    }
  });
  if (typeof func === "function") {
    const body = func as Method;
    const races = racesSignal(body);
    // `tool()` and `DynamicTool` run their function through `this.func`, synchronously from `_call`.
    define("func", function guardedFunc(this: unknown, ...args: unknown[]) {
      const seal = current.getStore();
      if (seal === undefined) return body.apply(this, args);
      const refused = seal.pass(tool, guardedFunc);
      if (refused !== undefined) return Promise.reject(refused);
      return races && seal.awaitsBody ? callUnraced(body, tool, args) : body.apply(tool, args);
    });
  }
  guarded.set(tool, originals);
  guardedTools.add(tool);
  return originals;
}

/**
 * Calls `tool()`'s wrapper (`racesSignal`) so that it does not race the tool's function against
 * the signal, while the function still gets that signal as `config.signal`: the wrapper is given
 * the config without it, and the function's config (which LangChain completes from the runnable
 * config in its async context) gets it from there. The handler then answers what the function
 * really did after an abort: a `NoEffectError` that releases the claim, or a result settled
 * `complete`, instead of the abort that would leave the claim `unknown`. Without LangChain's async
 * context (nothing to carry the signal), the wrapper is called as it was.
 */
function callUnraced(wrapper: Method, tool: object, args: readonly unknown[]): unknown {
  const [input, runManager, config] = args;
  const signal = (config as { signal?: unknown } | undefined)?.signal;
  if (!(signal instanceof AbortSignal)) return wrapper.apply(tool, [...args]);
  const implicit = AsyncLocalStorageProviderSingleton.getRunnableConfig() as object | undefined;
  return AsyncLocalStorageProviderSingleton.runWithConfig(
    { ...implicit, signal },
    () => {
      const carried = (AsyncLocalStorageProviderSingleton.getRunnableConfig() as { signal?: unknown } | undefined)?.signal;
      if (carried !== signal) return wrapper.apply(tool, [...args]);
      return wrapper.apply(tool, [input, runManager, { ...(config as object), signal: undefined }]);
    },
  );
}

/** Per guarded class prototype, the guard that stands in its `_call`. */
const classGuards = new WeakMap<object, Method>();

/**
 * Guards a `StructuredTool` subclass's `_call` on its class prototype, once, and answers the guard:
 * inside a governed call, a governed instance (or the sealed copy of one) reaches the body only from
 * its admitted `_call`, once, and the body runs on the registered tool. Other instances, and every
 * call outside governed calls, call straight through.
 */
function guardClass(proto: object): Method {
  const known = classGuards.get(proto);
  if (known !== undefined) return known;
  const descriptor = Object.getOwnPropertyDescriptor(proto, "_call");
  const body = descriptor?.value as Method;
  originalClassBodies.set(proto, body);
  const guard = function guardedClassCall(this: unknown, ...args: unknown[]): unknown {
    const seal = current.getStore();
    const tool = seal === undefined ? undefined : governedTool(this, proto);
    if (seal === undefined || tool === undefined) return body.apply(this, args);
    const refused = seal.pass(tool, proto);
    return refused === undefined ? body.apply(tool, args) : Promise.reject(refused);
  };
  Object.defineProperty(proto, "_call", { ...descriptor, value: guard });
  classGuards.set(proto, guard);
  guardedClasses.add(proto);
  return guard;
}

/** The governed tool `self` is (or is a copy of), looking up its prototypes as far as `proto`. */
function governedTool(self: unknown, proto: object): object | undefined {
  for (let at: unknown = self; at !== null && typeof at === "object" && at !== proto; at = Object.getPrototypeOf(at)) {
    if (guarded.has(at)) return at;
  }
  return undefined;
}

function isToolCall(input: unknown): input is { readonly type: "tool_call"; readonly id?: unknown; readonly args?: unknown } {
  return typeof input === "object" && input !== null && (input as { type?: unknown }).type === "tool_call";
}

/** The call id and arguments of a tool invocation, as `StructuredTool.invoke` reads them. */
export function invocation(input: unknown, config: unknown): { readonly id: string | undefined; readonly args: unknown } {
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
