/**
 * What the seal needs of a governed tool, and whether it can have it: a LangChain `StructuredTool`
 * whose body entry points (`invoke`, `_call`, `func`, and a subclass's `_call` on its class) the
 * seal can replace by guards (src/execution/seal.ts).
 */
import { DynamicStructuredTool, DynamicTool, tool as makeTool } from "@langchain/core/tools";
import { interopSafeParse, isInteropZodSchema } from "@langchain/core/utils/types";
import { z } from "zod";

/** What `StructuredTool.call` needs of a tool: the schema it parses with and the body it runs. */
export interface SealableTool {
  readonly name: string;
  readonly schema: unknown;
  invoke(input: unknown, config?: unknown): Promise<unknown>;
  _call(...args: unknown[]): unknown;
}

/** The tool's own properties the guard replaces. */
const GUARDED_KEYS = ["invoke", "_call", "func"] as const;

/** Tools whose guards are in place (fixed for good). */
export const guardedTools = new WeakSet<object>();
/** Class prototypes whose `_call` is guarded. */
export const guardedClasses = new WeakSet<object>();

/**
 * A tool's body as it was before the guards replaced it (`guardTool` records it first): the
 * implementation a fingerprint covers, which after guarding is no longer reachable on the tool.
 * `null` for a tool without a body of its own to guard.
 */
export const originalBodies = new WeakMap<object, Body | null>();
/** A class's `_call` as it was before `guardClass` replaced it. */
export const originalClassBodies = new WeakMap<object, Body>();

/** A tool body, as far as a fingerprint is concerned: a function whose source text it reads. */
export type Body = (this: unknown, ...args: never[]) => unknown;

/** LangChain's own `_call`s that only hand over to `this.func` (guarded on the tool itself). */
const FORWARDING = new Set<unknown>([Reflect.get(DynamicStructuredTool.prototype, "_call"), Reflect.get(DynamicTool.prototype, "_call")]);

/**
 * The class prototype whose `_call` is the tool's body when it is a subclass of `StructuredTool`
 * with its own `_call`: reachable from any instance through `Object.getPrototypeOf`, so guarded
 * there too. Undefined when `_call` is the tool's own property or one of LangChain's that forwards
 * to `func`.
 */
export function classBodyOf(tool: object): object | undefined {
  if (Object.hasOwn(tool, "_call")) return undefined;
  for (let proto: unknown = Object.getPrototypeOf(tool); proto !== null && typeof proto === "object"; proto = Object.getPrototypeOf(proto)) {
    const descriptor = Object.getOwnPropertyDescriptor(proto, "_call");
    if (descriptor === undefined) continue;
    return FORWARDING.has(descriptor.value) ? undefined : proto;
  }
  return undefined;
}

/**
 * The function whose source is the tool's implementation, found as the seal finds the body: its
 * own `func` (what `tool()` and `DynamicStructuredTool` run), else its own `_call`, else its
 * `StructuredTool` subclass's `_call` (`classBodyOf`). The original, when the seal guarded it.
 */
export function implementationOf(tool: object): Body | undefined {
  const recorded = originalBodies.get(tool);
  if (recorded !== undefined) return recorded ?? undefined;
  return currentBody(tool);
}

/** The body `implementationOf` means, on a tool the seal has not guarded (yet). */
export function currentBody(tool: object): Body | undefined {
  const func = Object.getOwnPropertyDescriptor(tool, "func")?.value as unknown;
  if (typeof func === "function") return func as Body;
  const own = Object.getOwnPropertyDescriptor(tool, "_call")?.value as unknown;
  if (typeof own === "function") return own as Body;
  const proto = classBodyOf(tool);
  if (proto === undefined) return undefined;
  const body = originalClassBodies.get(proto) ?? (Object.getOwnPropertyDescriptor(proto, "_call")?.value as unknown);
  return typeof body === "function" ? (body as Body) : undefined;
}

/**
 * A tool the guardrails can seal: a LangChain `StructuredTool` (what `tool()` makes) whose body
 * they can guard: not frozen or otherwise closed to new properties, its class's `_call` replaceable.
 */
export function isSealable(tool: unknown): tool is SealableTool {
  if (typeof tool !== "object" || tool === null) return false;
  const candidate = tool as Partial<SealableTool>;
  if (typeof candidate.invoke !== "function" || typeof candidate._call !== "function" || !("schema" in candidate)) return false;
  if (guardedTools.has(tool)) return true;
  if (!Object.isExtensible(tool) || GUARDED_KEYS.some((key) => Object.getOwnPropertyDescriptor(tool, key)?.configurable === false)) return false;
  const body = classBodyOf(tool);
  return body === undefined || guardedClasses.has(body) || Object.getOwnPropertyDescriptor(body, "_call")?.configurable === true;
}

/** Tools by whether they take a string, once per tool object. */
const stringTools = new WeakMap<object, boolean>();
const PROBE = "\u0000arkah.probe";

/**
 * Whether the tool is a LangChain string tool (`DynamicTool`, `tool()` without a schema): one whose
 * own parse turns `{ input: s }` into `s`. It declares no schema of its own; LangChain shows the
 * model `{ input?: string }` and hands the body the string. The guardrails decide on that object,
 * and the body receives its `input`.
 */
export function takesInputString(tool: SealableTool): boolean {
  let known = stringTools.get(tool);
  if (known === undefined) {
    const { schema } = tool;
    try {
      known = isInteropZodSchema(schema) && interopSafeParse(schema, { input: PROBE }).data === PROBE;
    } catch {
      known = false;
    }
    stringTools.set(tool, known);
  }
  return known;
}


/** The source text of the function `tool()` wraps a structured tool's function in, read once. */
let racingWrapperText: string | undefined;

/**
 * Whether `func` is the function `tool()` wraps a structured tool's function in. That wrapper
 * races the function against `config.signal`: at an abort it rejects with the signal's reason and
 * drops whatever the function does afterwards (a `NoEffectError`, a result). Known by its source
 * text, which is the same for every tool `tool()` makes.
 */
export function racesSignal(func: unknown): boolean {
  if (typeof func !== "function") return false;
  racingWrapperText ??= Function.prototype.toString.call(
    Reflect.get(makeTool(() => "", { name: "probe", description: "probe", schema: z.object({}) }), "func"),
  );
  return Function.prototype.toString.call(func) === racingWrapperText;
}
