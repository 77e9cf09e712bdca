/**
 * The part of a tool's fingerprint that covers what its zod schema's parse does (`parse` in
 * `toolFingerprint` v3). A schema's JSON Schema export cannot show an object's unknown-key policy
 * (strip, `.loose()`, `.strict()`, `catchall`), coercion, a transform, a preprocess or a
 * refinement, yet each changes what the tool body receives. So the fingerprint also digests the
 * schema's own definition: every zod v4 schema and check reachable from it (zod-def.ts walks them),
 * each with its type or check kind and all its parameters, and every function in it by the SHA-256
 * of its source text (`Function.prototype.toString`, the same for the same code in every process).
 *
 * Left out: a default's value (zod reads it through a getter that calls a function default; the
 * JSON Schema part shows a plain one) and a check's `error` (it words an issue, it does not change
 * what parses). The whole description is bounded: a schema of more than `MAX_NODES` schemas and
 * checks, or more than `MAX_VALUES` values in their definitions, has no fingerprint.
 */
import type { JsonValue } from "../contracts/index.js";
import { DigestError, sha256Hex } from "../digest.js";
import { defOf, isPlainObject, sortedKeys, unreadMember, walkZod } from "./zod-def.js";

/** Past this many schemas and checks, a zod schema is not fingerprinted (a lazy schema that never ends). */
const MAX_NODES = 10_000;
/** Past this many values in their definitions either. */
const MAX_VALUES = 1_000_000;

/** What a zod v4 schema's parse does: its nodes, the root first, each referring to others by index. */
export interface ParseDefinition {
  /** The zod major version whose definitions these are. */
  readonly zod: 4;
  /** Each node's definition, in walk order; `{"$node": i}` refers to the node at index i. */
  readonly nodes: readonly JsonValue[];
}

/**
 * The definition of a zod v4 schema's parse; null for anything else (a JSON Schema, a zod 3
 * schema, no schema). Deterministic: two schemas built by the same code have the same one, in any
 * process. Throws `DigestError` for a schema too large or a definition that holds a cycle, and
 * whatever a getter in it throws.
 */
export function parseDefinition(schema: unknown): ParseDefinition | null {
  if (defOf(schema) === undefined) return null;
  const nodes: object[] = [];
  const end = walkZod(schema, MAX_NODES, (node) => {
    nodes.push(node);
    return true;
  });
  if (end !== "complete") {
    throw new DigestError("$.parse", `a zod schema of more than ${String(MAX_NODES)} schemas and checks (a z.lazy that builds a new schema each time it is read?)`);
  }
  const describer = new Describer(new Map(nodes.map((node, index) => [node, index])));
  return { zod: 4, nodes: nodes.map((node) => describer.node(node)) };
}

/** Definition members left out (see the header). */
function leftOut(key: string): boolean {
  return unreadMember(key) || key === "error";
}

/** Turns definitions into plain JSON, each value tagged by what it is, so no two kinds share a description. */
class Describer {
  readonly #index: ReadonlyMap<object, number>;
  readonly #path = new Set<object>();
  #values = 0;

  constructor(index: ReadonlyMap<object, number>) {
    this.#index = index;
  }

  node(node: object): JsonValue {
    const def = defOf(node) ?? {};
    const described = record();
    described.def = this.#members(def, leftOut);
    const zod = (node as { _zod: { innerType?: unknown; check?: unknown } })._zod;
    // A lazy schema's getter answers the schema its parse uses: the walk followed it.
    if (def.type === "lazy") described.inner = this.#value(zod.innerType);
    // A bare custom check (`.check(fn)`, `.superRefine(fn)`) keeps its function outside the definition.
    if (def.type === undefined && def.check === "custom") described.check = this.#value(zod.check);
    return described;
  }

  #members(value: object, skip: (key: string) => boolean): JsonValue {
    const described = record();
    for (const key of sortedKeys(value)) {
      if (skip(key)) continue;
      const member = (value as Record<string, unknown>)[key];
      // An absent member and one set to undefined (`error: undefined`) parse alike.
      if (member !== undefined) described[key] = this.#value(member);
    }
    return described;
  }

  #value(value: unknown): JsonValue {
    if (++this.#values > MAX_VALUES) {
      throw new DigestError("$.parse", `a zod schema whose definitions hold more than ${String(MAX_VALUES)} values`);
    }
    switch (typeof value) {
      case "string":
      case "boolean":
        return value;
      case "number":
        return Number.isFinite(value) && !Object.is(value, -0) ? value : { $number: String(Object.is(value, -0) ? "-0" : value) };
      case "bigint":
        return { $bigint: value.toString() };
      case "undefined":
        return { $undefined: true };
      case "symbol":
        return { $symbol: value.description ?? null };
      case "function":
        return this.#function(value);
      case "object":
        return value === null ? null : this.#object(value);
    }
  }

  #function(fn: unknown): JsonValue {
    // zod wraps a constant `.catch(value)` in a thunk it marks; its source is the same for every value.
    if (Object.hasOwn(fn as object, "~constantCatch")) return { $constant: this.#value((fn as () => unknown)()) };
    return { $function: sha256Hex(Function.prototype.toString.call(fn)) };
  }

  #object(value: object): JsonValue {
    const node = this.#index.get(value);
    if (node !== undefined) return { $node: node };
    const tag = Object.prototype.toString.call(value);
    if (tag === "[object RegExp]") {
      const { source, flags } = value as RegExp;
      return { $regexp: [source, flags] };
    }
    if (tag === "[object Date]") {
      const time = (value as Date).getTime();
      return { $date: Number.isNaN(time) ? "invalid" : time };
    }
    if (this.#path.has(value)) throw new DigestError("$.parse", "a zod schema whose definition holds a cycle outside its schemas");
    this.#path.add(value);
    try {
      if (Array.isArray(value)) return Array.from(value as unknown[], (item) => this.#value(item));
      const members = this.#members(value, () => false);
      if (isPlainObject(value)) return { $object: members };
      const constructor = (Object.getPrototypeOf(value) as { constructor?: { name?: unknown } } | null)?.constructor?.name;
      return { $instance: typeof constructor === "string" ? constructor : "", members };
    } finally {
      this.#path.delete(value);
    }
  }
}

/** An object with no prototype: a definition's key may be `__proto__`. */
function record(): Record<string, JsonValue> {
  return Object.create(null) as Record<string, JsonValue>;
}
