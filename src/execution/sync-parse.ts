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

import { walkZod, type ZodDef } from "./zod-def.js";

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

/**
 * A schema with more nodes (schemas and checks) than this is parsed async rather than walked to
 * the end.
 */
const MAX_NODES = 2_000;

const known = new WeakMap<object, boolean>();

/** Whether `schema` is a zod v4 schema that parses the same synchronously as async (see above). */
export function parsesSynchronously(schema: unknown): boolean {
  if (typeof schema !== "object" || schema === null) return false;
  let sync = known.get(schema);
  if (sync === undefined) {
    try {
      sync = walkZod(schema, MAX_NODES, builtIn) === "complete";
    } catch {
      sync = false; // a getter that throws: leave it to the parse
    }
    known.set(schema, sync);
  }
  return sync;
}

/**
 * A node of a sync type, or a check of a sync kind (a refinement is a schema of type `custom`
 * used as a check: neither). Its members (the schemas and checks it holds) are walked after it.
 */
function builtIn(_node: object, def: ZodDef): boolean {
  const { type, check, checks } = def;
  if (type === undefined && check === undefined) return false;
  if (type !== undefined && (typeof type !== "string" || !SYNC_TYPES.has(type))) return false;
  if (check !== undefined && (typeof check !== "string" || !SYNC_CHECKS.has(check))) return false;
  return checks === undefined || Array.isArray(checks);
}
