/**
 * Parses a call's arguments exactly as the tool will when LangChain invokes it
 * (`StructuredTool.call` in @langchain/core): a zod tool through its own schema (defaults,
 * coercion, transforms, refinements, unknown keys stripped), a JSON Schema tool through
 * @langchain/core's own validator in the dialect it applies at invoke time (draft 2019-09, whatever
 * the schema's `$schema` says). Every later decision sees the parsed arguments, and the sealed
 * execution hands the tool body exactly these. What it returns is detached: neither the arguments
 * as written nor the parsed ones share an object with the call's own `args` or with each other, so
 * nothing that holds the request can change what was checked.
 */
import { Validator } from "@langchain/core/utils/json_schema";
import { interopSafeParse, interopSafeParseAsync, isInteropZodSchema } from "@langchain/core/utils/types";
import type { JsonValue } from "../contracts/index.js";
import { copyJson, digest, DigestError } from "../digest.js";
import { jsonPointer, leafIssues, type ArgumentIssue } from "../guardrails/schema.js";
import { parsesSynchronously } from "./sync-parse.js";
import { takesInputString, type SealableTool } from "./tool.js";

export { isSealable, type SealableTool } from "./tool.js";

export type ParsedArguments =
  | {
      readonly ok: true;
      /** The arguments as written, and their digest: what the sealed invocation must carry. */
      readonly raw: Readonly<Record<string, JsonValue>>;
      readonly rawDigest: string;
      /** The tool's parse: what every decision sees and the body receives. */
      readonly args: Readonly<Record<string, JsonValue>>;
      readonly argsDigest: string;
    }
  | { readonly ok: false; readonly issues: readonly ArgumentIssue[] };

/** @langchain/core validates JSON Schema tools with this dialect at invoke time (`validate`'s default). */
const CORE_DRAFT = "2019-09";

/** Compiled validators per JSON Schema object, as core would apply them. */
const validators = new WeakMap<object, Validator>();

/**
 * The tool's own parse of `raw`. Fails (does not throw) for arguments the tool would reject, and
 * for parsed arguments the guardrails cannot bind: anything but a plain JSON object; a schema that
 * itself throws (a refinement with a bug) throws or rejects, and the pipeline refuses the call.
 * Synchronous for a JSON Schema tool and for a zod schema without code of the tool author's that
 * could wait (`parsesSynchronously`); any other zod tool is parsed async, as the tool parses.
 */
export function parseArguments(tool: SealableTool, raw: unknown): ParsedArguments | Promise<ParsedArguments> {
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) {
    return { ok: false, issues: [{ path: "", message: "the arguments are not a JSON object" }] };
  }
  let rawDigest: string;
  try {
    rawDigest = digest(raw);
  } catch (error) {
    if (!DigestError.isInstance(error)) throw error;
    return { ok: false, issues: [{ path: jsonPath(error.path), message: `not plain JSON (${error.message})` }] };
  }
  const { schema } = tool;
  // Parsed as `StructuredTool.call` does, from a copy of its own: `raw` is plain JSON here.
  const input = copyJson(raw) as Readonly<Record<string, JsonValue>>;
  if (isInteropZodSchema(schema)) {
    // Async, as `StructuredTool.call` parses: a sync parse of a schema with an async refinement
    // runs the refinement and drops its promise, so a refinement that rejects would be an
    // unhandled rejection, which ends a Node process (SECURITY.md, class 21). Sync only for a
    // schema in which nothing can answer a promise: both parses are then the same (sync-parse.ts).
    if (parsesSynchronously(schema)) return fromZod(tool, input, rawDigest, interopSafeParse(schema, input));
    return interopSafeParseAsync(schema, input).then((result) => fromZod(tool, input, rawDigest, result));
  }
  if (typeof schema === "object" && schema !== null) {
    let validator = validators.get(schema);
    if (validator === undefined) {
      // Its own copy: the validator annotates the schema it compiles.
      validator = new Validator(structuredClone(schema), CORE_DRAFT, false);
      validators.set(schema, validator);
    }
    const result = validator.validate(input);
    if (!result.valid) {
      return { ok: false, issues: leafIssues(result.errors) };
    }
  }
  return bound(input, rawDigest, input);
}

type ZodResult = { readonly success: true; readonly data: unknown } | { readonly success: false; readonly error: unknown };

function fromZod(tool: SealableTool, input: Readonly<Record<string, JsonValue>>, rawDigest: string, result: ZodResult): ParsedArguments {
  if (!result.success) {
    // A refinement that throws surfaces here as its own error, not as issues.
    const issues = (result.error as { issues?: unknown }).issues;
    if (!Array.isArray(issues)) throw result.error instanceof Error ? result.error : new Error("the schema failed");
    return {
      ok: false,
      issues: (issues as readonly { readonly path: readonly PropertyKey[]; readonly message: string }[]).map((issue) => ({
        path: jsonPointer(issue.path),
        message: issue.message,
      })),
    };
  }
  let parsed = result.data;
  // A string tool's parse yields the string (or nothing): decided on as the object it came from.
  if ((parsed === undefined || typeof parsed === "string") && takesInputString(tool)) parsed = parsed === undefined ? {} : { input: parsed };
  return bound(input, rawDigest, parsed);
}

/** The parse as the guardrails bind it: a plain JSON object, with its digest and a copy of its own. */
function bound(input: Readonly<Record<string, JsonValue>>, rawDigest: string, parsed: unknown): ParsedArguments {
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
    return { ok: false, issues: [{ path: "", message: "the arguments are not an object after parsing" }] };
  }
  let argsDigest = rawDigest;
  if (parsed !== input) {
    try {
      argsDigest = digest(parsed);
    } catch (error) {
      if (!DigestError.isInstance(error)) throw error;
      // A Date, undefined, a lone surrogate...: the guardrails bind plain JSON only.
      return { ok: false, issues: [{ path: jsonPath(error.path), message: `not plain JSON after parsing (${error.message})` }] };
    }
  }
  // The parsed arguments get a copy of their own: a JSON Schema parse is the input itself, and a zod
  // parse may hand nested values through (z.any(), z.unknown()).
  return { ok: true, raw: input, rawDigest, args: copyJson(parsed) as Readonly<Record<string, JsonValue>>, argsDigest };
}

/** `$.items[2].title` as a JSON Pointer, roughly: only for the refusal's `path`. */
function jsonPath(path: string): string {
  return path
    .replace(/^\$/, "")
    .replace(/\[(\d+)\]/g, "/$1")
    .replace(/\.([^.[\]/]+)/g, "/$1");
}
