/**
 * `createSchemaGuardrail`: checks a call's arguments against its tool's own input schema, listing
 * every failing keyword, each located by JSON Pointer, in one refusal, so the model can fix them
 * all in one step. It is the port's default member.
 *
 * Before any guardrail runs, the pipeline parses every call exactly as the tool will (zod tools
 * with their own schema, JSON Schema tools in the dialect @langchain/core applies): a call that
 * fails is `invalid_arguments` there. This guardrail adds the check in the schema's *declared*
 * dialect (`$schema`, else `draft`) for tools that carry a JSON Schema (MCP tools, for example),
 * so a call must pass both. It validates the arguments as written (`rawArgs`) with
 * @cfworker/json-schema (no code generation, so it runs under a strict CSP and on edge runtimes),
 * loaded lazily: the optional peer if installed, else the copy @langchain/core already depends on
 * and re-exports. zod tools need nothing more: their parse is exactly what they accept.
 */
import type { ClientTool, ServerTool } from "@langchain/core/tools";
import { toJsonSchema } from "@langchain/core/utils/json_schema";
import { isInteropZodSchema, type InteropZodType } from "@langchain/core/utils/types";
import { z } from "zod";
import type { GuardrailVerdict, JsonValue } from "../contracts/index.js";
import { ConfigurationError } from "../errors.js";
import type { Guardrail, GuardrailContext, JsonSchema } from "./port.js";

/** The JSON Schema dialects the schema guardrail validates in. */
export type SchemaDraft = "4" | "7" | "2019-09" | "2020-12";

/** `createSchemaGuardrail`'s options. */
export interface SchemaGuardrailOptions {
  /** The dialect when a schema declares no `$schema`. Default 2020-12. */
  readonly draft?: SchemaDraft;
  /** Default `"schema"`. */
  readonly name?: string;
}

/** One failing keyword: `path` is a JSON Pointer into the arguments (`""` is the whole object). */
export interface ArgumentIssue {
  /** JSON Pointer to the failing value. */
  readonly path: string;
  /** What is wrong there, as the validator says it. */
  readonly message: string;
}

export interface ValidationError {
  readonly instanceLocation: string;
  readonly keyword: string;
  readonly error: string;
}
interface Validation {
  readonly valid: boolean;
  readonly errors: readonly ValidationError[];
}
interface ValidatorLike {
  validate(instance: unknown): Validation;
}
type ValidatorClass = new (schema: object | boolean, draft?: SchemaDraft, shortCircuit?: boolean) => ValidatorLike;

/** Marks schema guardrails, so a middleware knows the default member is already in the list. */
export const SCHEMA_GUARDRAIL = Symbol.for("arkah-agent-guardrails.schema-guardrail");

const OptionsSchema = z.strictObject({
  draft: z.enum(["4", "7", "2019-09", "2020-12"]).optional(),
  name: z.string().min(1).optional(),
});

let validatorClass: Promise<ValidatorClass> | undefined;

/** Loads the validator once: the optional peer if the host installed it, else @langchain/core's. */
function loadValidator(): Promise<ValidatorClass> {
  validatorClass ??= import("@cfworker/json-schema").then(
    (module) => module.Validator as unknown as ValidatorClass,
    async () => (await import("@langchain/core/utils/json_schema")).Validator as unknown as ValidatorClass,
  );
  return validatorClass;
}

/**
 * Compiled validators per declared schema object and configured `draft` (the dialect follows from
 * the two), shared by every schema guardrail: `declaredSchema` hands out one frozen object per
 * tool schema, so a middleware built per turn compiles nothing an earlier one compiled (compiling
 * costs more than validating).
 */
const validators = new WeakMap<object, Map<SchemaDraft, ValidatorLike>>();

function compiledValidator(schema: object, draft: SchemaDraft): ValidatorLike | undefined {
  return validators.get(schema)?.get(draft);
}

function compileValidator(Validator: ValidatorClass, schema: JsonSchema & object, draft: SchemaDraft): ValidatorLike {
  // The validator gets its own copy: it annotates the schema it compiles, and the declared
  // schema guardrails see is frozen.
  const validator = new Validator(structuredClone(schema), declaredDraft(schema, draft), false);
  let byDraft = validators.get(schema);
  if (byDraft === undefined) validators.set(schema, (byDraft = new Map<SchemaDraft, ValidatorLike>()));
  byDraft.set(draft, validator);
  return validator;
}

/** `$schema` URIs, without a trailing `#`. */
const DRAFTS: Readonly<Record<string, SchemaDraft>> = {
  "http://json-schema.org/draft-04/schema": "4",
  "http://json-schema.org/draft-07/schema": "7",
  "https://json-schema.org/draft/2019-09/schema": "2019-09",
  "https://json-schema.org/draft/2020-12/schema": "2020-12",
};

/** The dialect a schema declares in `$schema`, else the configured one. */
function declaredDraft(schema: JsonSchema, fallback: SchemaDraft): SchemaDraft {
  const declared = typeof schema === "object" ? schema.$schema : undefined;
  return typeof declared === "string" ? (DRAFTS[declared.replace(/#$/, "")] ?? fallback) : fallback;
}

/**
 * Checks arguments against the tool's declared input schema. A tool with no schema is allowed.
 * Throws `ConfigurationError` for invalid options.
 */
export function createSchemaGuardrail(options: SchemaGuardrailOptions = {}): Guardrail {
  const parsed = OptionsSchema.safeParse(options);
  if (!parsed.success) {
    throw new ConfigurationError(`invalid createSchemaGuardrail options: ${z.prettifyError(parsed.error)}`);
  }
  const { draft = "2020-12", name = "schema" } = parsed.data;
  const loadValidatorFor = async (schema: JsonSchema & object): Promise<ValidatorLike> => {
    const Validator = await loadValidator();
    return compiledValidator(schema, draft) ?? compileValidator(Validator, schema, draft);
  };

  const guardrail: Guardrail & { readonly [SCHEMA_GUARDRAIL]: true } = {
    [SCHEMA_GUARDRAIL]: true,
    name,
    placements: ["tool-args"],
    deterministic: true,
    // Synchronous once the validator is loaded (zod tools always): no timer, no extra turn.
    check(context: GuardrailContext): GuardrailVerdict | Promise<GuardrailVerdict> {
      const { schema } = context.tool;
      const { rawArgs: args, name: toolName } = context.toolCall;
      if (schema === false) return schemaVerdict(toolName, [{ path: "", message: "False boolean schema." }]);
      if (typeof schema !== "object") return schemaVerdict(toolName, []);
      const validator = compiledValidator(schema, draft);
      if (validator !== undefined) return schemaVerdict(toolName, leafIssues(validator.validate(args).errors));
      return loadValidatorFor(schema).then((loaded) => schemaVerdict(toolName, leafIssues(loaded.validate(args).errors)));
    },
  };
  return guardrail;
}

const ALLOW: GuardrailVerdict = { action: "allow", outcome: "complete", detections: [] };

/**
 * Keywords that fail because a subschema failed: the subschema's own error says what is wrong.
 * Not `contains`: @cfworker/json-schema drops the items' errors and reports only its own.
 */
const APPLICATORS = new Set([
  "properties",
  "patternProperties",
  "additionalProperties",
  "items",
  "prefixItems",
  "additionalItems",
  "unevaluatedProperties",
  "unevaluatedItems",
  "allOf",
  "$ref",
  "$dynamicRef",
  "$recursiveRef",
  "dependentSchemas",
  "if",
  "then",
  "else",
]);

/**
 * Every failing keyword, each once: an applicator's summary ("Property x does not match schema")
 * is dropped when an error at or below its location explains it.
 */
export function leafIssues(errors: readonly ValidationError[]): ArgumentIssue[] {
  const issues: ArgumentIssue[] = [];
  const seen = new Set<string>();
  for (const error of errors) {
    const location = error.instanceLocation;
    const explained =
      APPLICATORS.has(error.keyword) &&
      errors.some(
        (other) =>
          other !== error &&
          !APPLICATORS.has(other.keyword) &&
          (other.instanceLocation === location || other.instanceLocation.startsWith(`${location}/`)),
      );
    const issue = { path: location.replace(/^#/, ""), message: error.error };
    const key = `${issue.path}\u0000${issue.message}`;
    if (explained || seen.has(key)) continue;
    seen.add(key);
    issues.push(issue);
  }
  return issues;
}

/** @internal An issue path as an RFC 6901 JSON Pointer. */
export function jsonPointer(path: readonly PropertyKey[]): string {
  return path.map((segment) => `/${String(segment).replaceAll("~", "~0").replaceAll("/", "~1")}`).join("");
}

/** The verdict for a list of problems: allow when there are none, else deny listing them all. */
function schemaVerdict(toolName: string, issues: readonly ArgumentIssue[]): GuardrailVerdict {
  if (issues.length === 0) return ALLOW;
  return {
    action: "deny",
    outcome: "complete",
    code: "invalid_arguments",
    detections: issues.map((issue) => ({ rule: "schema", detected: true, path: issue.path, message: issue.message })),
    details: argumentIssueDetails(toolName, issues),
  };
}

/** @internal What an `invalid_arguments` refusal tells the model: every problem, by JSON Pointer. */
export function argumentIssueDetails(toolName: string, issues: readonly ArgumentIssue[]): Readonly<Record<string, JsonValue>> {
  const error =
    `arguments for tool "${toolName}" do not match its inputSchema - ` +
    issues.map((issue) => `#${issue.path}: ${issue.message}`).join("; ");
  return { valid: false, tool: toolName, error, issues: issues.map((issue) => ({ path: issue.path, message: issue.message })) };
}

/**
 * The tool's declared input schema as JSON Schema, cached per tool for the schema object it was
 * converted from: a tool given another schema object is converted again (a fingerprint sees it).
 */
const declaredSchemas = new WeakMap<object, { readonly source: unknown; readonly schema: JsonSchema | undefined }>();

export function declaredSchema(tool: ClientTool | ServerTool | undefined): JsonSchema | undefined {
  if (tool === undefined || typeof tool !== "object") return undefined;
  const source = (tool as { schema?: unknown }).schema;
  const cached = declaredSchemas.get(tool);
  if (cached !== undefined && cached.source === source) return cached.schema;
  const schema = zodSchemaOf(tool);
  let converted: JsonSchema | undefined;
  if (schema !== undefined) {
    // zod 4 (and zod 3) schemas through @langchain/core's converter, which uses zod's own export.
    // A schema it cannot convert is still checked: by the zod re-check.
    try {
      converted = toJsonSchema(schema);
    } catch {
      converted = undefined;
    }
  } else {
    const declared = (tool as { schema?: unknown }).schema;
    if (typeof declared === "boolean" || (typeof declared === "object" && declared !== null)) {
      converted = declared as JsonSchema;
    }
  }
  // A frozen copy: guardrails get it as a copy, and neither the tool's own schema object nor
  // LangChain's cached one (sent to the model) can be changed through it.
  const copy = converted === undefined || typeof converted === "boolean" ? converted : deepFreeze(structuredClone(converted));
  declaredSchemas.set(tool, { source, schema: copy });
  return copy;
}

function deepFreeze<T>(value: T): T {
  if (typeof value === "object" && value !== null) {
    for (const inner of Object.values(value)) deepFreeze(inner);
    Object.freeze(value);
  }
  return value;
}

/** The tool's zod schema, if it has one. */
export function zodSchemaOf(tool: ClientTool | ServerTool | undefined): InteropZodType | undefined {
  const schema = (tool as { schema?: unknown } | undefined)?.schema;
  return isInteropZodSchema(schema) ? schema : undefined;
}
