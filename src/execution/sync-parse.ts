/**
 * Which zod schemas the guardrails may parse synchronously: those in which nothing can answer a
 * promise, so that zod's sync and async parses run the same code to the same result.
 *
 * `StructuredTool.call` parses a zod tool async, and the guardrails did too for every zod tool
 * (SECURITY.md, class 21): a sync parse of a schema with an async refinement runs the refinement
 * and drops its promise, whose rejection then goes unhandled and ends the process. But the async
 * parse costs promises and turns of the event loop on every call, for schemas (most tool schemas)
 * that hold no code of the tool author's at all. So a zod v4 schema is parsed synchronously only
 * when every node in it is a built-in type from a fixed list and every check on it a built-in
 * check from a fixed list: no refinement (`refine`, `superRefine`, `check`), no transform, pipe,
 * preprocess or codec, no custom, lazy, promise, function or catch schema, no property check, and
 * nothing this zod version or a later one adds that is not on the lists. Anything else (zod 3 too)
 * is parsed async, as the tool parses it.
 */

/** Built-in schema types whose parse never waits for anything but the schemas they contain. */
const SYNC_TYPES: ReadonlySet<string> = new Set([
  "any",
  "array",
  "bigint",
  "boolean",
  "date",
  "default",
  "enum",
  "intersection",
  "literal",
  "nan",
  "never",
  "nonoptional",
  "null",
  "nullable",
  "number",
  "object",
  "optional",
  "prefault",
  "readonly",
  "record",
  "string",
  "template_literal",
  "tuple",
  "undefined",
  "union",
  "unknown",
  "void",
]);

/**
 * Built-in checks that answer synchronously (an `overwrite` or custom string format may call the
 * tool author's function, but never waits for what it answers, in either parse).
 */
const SYNC_CHECKS: ReadonlySet<string> = new Set([
  "bigint_format",
  "greater_than",
  "length_equals",
  "less_than",
  "max_length",
  "max_size",
  "min_length",
  "min_size",
  "multiple_of",
  "number_format",
  "overwrite",
  "size_equals",
  "string_format",
]);

/** A schema with more nodes than this is parsed async rather than walked. */
const MAX_NODES = 2_000;

const known = new WeakMap<object, boolean>();

/** Whether `schema` is a zod v4 schema that parses the same synchronously as async (see above). */
export function parsesSynchronously(schema: unknown): boolean {
  if (typeof schema !== "object" || schema === null) return false;
  let sync = known.get(schema);
  if (sync === undefined) {
    try {
      sync = walk(schema);
    } catch {
      sync = false; // a getter that throws: leave it to the parse
    }
    known.set(schema, sync);
  }
  return sync;
}

interface Def {
  readonly type?: unknown;
  readonly checks?: unknown;
  readonly [key: string]: unknown;
}

function defOf(node: unknown): Def | undefined {
  if (typeof node !== "object" || node === null) return undefined;
  const zod = (node as { _zod?: unknown })._zod;
  if (typeof zod !== "object" || zod === null) return undefined;
  const def = (zod as { def?: unknown }).def;
  return typeof def === "object" && def !== null ? (def as Def) : undefined;
}

/** Every node reachable from `root` is a sync type with sync checks (a cycle is walked once). */
function walk(root: object): boolean {
  const seen = new Set<object>();
  const pending: unknown[] = [root];
  while (pending.length > 0) {
    const node = pending.pop();
    if (typeof node !== "object" || node === null) return false;
    if (seen.has(node)) continue;
    seen.add(node);
    if (seen.size > MAX_NODES) return false;
    const def = defOf(node);
    if (def === undefined || typeof def.type !== "string" || !SYNC_TYPES.has(def.type)) return false;
    if (def.checks !== undefined) {
      if (!Array.isArray(def.checks)) return false;
      for (const check of def.checks) {
        const kind = defOf(check)?.check;
        if (typeof kind !== "string" || !SYNC_CHECKS.has(kind)) return false;
      }
    }
    const children = childrenOf(def);
    if (children === undefined) return false;
    pending.push(...children);
  }
  return true;
}

/** The schemas a node of a sync type contains; undefined when they are not where zod keeps them. */
function childrenOf(def: Def): readonly unknown[] | undefined {
  switch (def.type) {
    case "array":
      return [def.element];
    case "object": {
      const { shape, catchall } = def;
      if (typeof shape !== "object" || shape === null) return undefined;
      const members = Object.values(shape as Record<string, unknown>);
      return catchall === undefined ? members : [...members, catchall];
    }
    case "union":
      return Array.isArray(def.options) ? (def.options as readonly unknown[]) : undefined;
    case "intersection":
      return [def.left, def.right];
    case "tuple": {
      if (!Array.isArray(def.items)) return undefined;
      const items = def.items as readonly unknown[];
      return def.rest === undefined || def.rest === null ? items : [...items, def.rest];
    }
    case "record":
      return [def.keyType, def.valueType];
    case "default":
    case "nonoptional":
    case "nullable":
    case "optional":
    case "prefault":
    case "readonly":
      return [def.innerType];
    default:
      // Leaves: their parts (an enum's entries, a template literal's compiled pattern) are data.
      return [];
  }
}
