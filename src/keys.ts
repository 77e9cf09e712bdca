/**
 * The derived keys: each is `digest` (SHA-256 over RFC 8785 canonical JSON) of a small tagged
 * object, so a service in another language can compute the same values. The formulas are part of
 * the public contract and documented in docs/architecture.md.
 */
import type { ServerTool } from "@langchain/core/tools";
import { MAX_DISCRIMINATOR_CHARS, type EffectIdentity, type JsonValue, type MutationIdentity, type Segment, type TurnRef } from "./contracts/index.js";
import { canonicalJson, digest, sha256Hex } from "./digest.js";
import { GuardrailsError } from "./errors.js";
import { parseDefinition } from "./execution/parse-definition.js";
import { implementationOf } from "./execution/tool.js";
import { declaredSchema } from "./guardrails/schema.js";

/** Identifies a user turn: `(scopeId, turnId)`. The policy version is deliberately left out. */
export function turnKey(turn: TurnRef): string {
  return digest({ kind: "arkah.turn", v: 1, scopeId: turn.scopeId, turnId: turn.turnId });
}

/** The digest of the exact ordered, labelled segments a moderation provider judged. */
export function moderationDigest(input: { readonly segments: readonly Segment[] }): string {
  return digest({
    kind: "arkah.segments",
    v: 1,
    segments: input.segments.map(({ label, content }) => ({ label, content })),
  });
}

/** What a fingerprint reads of a tool: any LangChain tool (`tool(...)`, a `StructuredTool`, an MCP tool) has it. */
export interface FingerprintedTool {
  /** The tool's name. */
  readonly name?: unknown;
  /** The tool's description: the model reads it, so a change is a different tool. */
  readonly description?: unknown;
  /** A zod schema, or a JSON Schema. */
  readonly schema?: unknown;
}

/** What a tool declares as part of its identity besides its name, description, schema and body. */
export interface ToolIdentityOptions {
  /**
   * Configuration fields (an endpoint, a base URL) whose values are part of the tool's identity:
   * each names a property of the tool object, or else of its `metadata`. A field found in neither
   * is an error. The values must be plain JSON; they are digested, never logged.
   */
  readonly identity?: readonly string[];
}

/** A declared identity field found neither on the tool nor in its `metadata`. */
export class IdentityFieldError extends GuardrailsError {
  protected static override readonly brandName: string = "IdentityFieldError";

  /** The declared field that was not found. */
  readonly field: string;

  constructor(field: string) {
    super(`identity field "${field}" is neither a property of the tool nor in its metadata`);
    this.field = field;
  }
}

/** What a fingerprint was computed from: the references, so an unchanged tool is recognised without hashing. */
interface Observation {
  readonly name: unknown;
  readonly description: unknown;
  readonly schema: unknown;
  readonly body: unknown;
  readonly values: readonly unknown[];
  /** Canonical JSON of the declared values when one is an object (changed in place, its reference stays). */
  readonly valuesJson: string | undefined;
  readonly fingerprint: string;
}

/** A tool's identity under one declaration: the fingerprint it was first given in this process, and the latest. */
interface Identity {
  readonly first: string;
  last: Observation;
}

/** Per tool object, per declaration of identity fields. */
const identities = new WeakMap<object, Map<string, Identity>>();
const NO_FIELDS: readonly string[] = [];

/**
 * Identifies a tool: its name, its description (`""` when it has none), its declared input schema
 * as JSON Schema (a zod schema converted, a JSON Schema as is; `null` when it declares none), what
 * its zod v4 schema's parse does (every schema and check in it with their parameters, functions by
 * the SHA-256 of their source text; `null` for a JSON Schema tool), the SHA-256 of its
 * implementation's source text (`func` of a `tool()`, the `_call` of a `StructuredTool` subclass,
 * as `Function.prototype.toString` gives it; `null` when it has none) and the values of the
 * configuration fields it declares as identity (`null` when it declares none). A verdict, an
 * approval or a claim recorded under one fingerprint says which tool was decided on. Cheap when
 * nothing changed: the digest is recomputed only when one of those references (or an
 * object-valued field's content) differs from the last time.
 */
export function toolFingerprint(tool: FingerprintedTool, options: ToolIdentityOptions = {}): string {
  return identifyTool(tool, options.identity).fingerprint;
}

/**
 * @internal The tool's fingerprint now, and the one it was first given in this process under the
 * same declaration: they differ when its declared configuration, description, schema or body
 * changed since. Throws `DigestError` (a schema or field value that is not plain JSON, a zod
 * schema too large to describe) or `IdentityFieldError`, and what a getter in the schema throws.
 */
export function identifyTool(
  tool: FingerprintedTool,
  fields: readonly string[] = NO_FIELDS,
): { readonly fingerprint: string; readonly first: string } {
  // Runs twice for every governed call: no arrays or strings built when no field is declared.
  const key = fields.length === 0 ? "" : fields.join("\u0000");
  let byFields = identities.get(tool);
  const known = byFields?.get(key);
  const { name, description, schema } = tool;
  const body = implementationOf(tool);
  const values = fields.length === 0 ? NO_FIELDS : fields.map((field) => identityValue(tool, field));
  if (known !== undefined && unchanged(known.last, name, description, schema, body, values)) {
    return { fingerprint: known.last.fingerprint, first: known.first };
  }
  const fingerprint = digest({
    kind: "arkah.tool",
    v: 3,
    name: typeof name === "string" ? name : "",
    description: typeof description === "string" ? description : "",
    schema: declaredSchema(tool as ServerTool) ?? null,
    parse: parseDefinition(schema),
    implementation: body === undefined ? null : sha256Hex(Function.prototype.toString.call(body)),
    identity: fields.length === 0 ? null : Object.fromEntries(fields.map((field, index) => [field, values[index]])),
  });
  const valuesJson = values.some((value) => typeof value === "object" && value !== null) ? canonicalJson(values) : undefined;
  const last: Observation = { name, description, schema, body, values, valuesJson, fingerprint };
  if (known !== undefined) {
    known.last = last;
    return { fingerprint, first: known.first };
  }
  if (byFields === undefined) {
    byFields = new Map();
    identities.set(tool, byFields);
  }
  byFields.set(key, { first: fingerprint, last });
  return { fingerprint, first: fingerprint };
}

function unchanged(last: Observation, name: unknown, description: unknown, schema: unknown, body: unknown, values: readonly unknown[]): boolean {
  if (!Object.is(last.name, name) || !Object.is(last.description, description) || !Object.is(last.schema, schema) || last.body !== body) {
    return false;
  }
  for (let index = 0; index < values.length; index++) if (!Object.is(last.values[index], values[index])) return false;
  return last.valuesJson === undefined || last.valuesJson === canonicalJson(values);
}

/** A declared field's value: the tool's own (or inherited) property, else its `metadata`'s. */
function identityValue(tool: object, field: string): unknown {
  const value: unknown = Reflect.get(tool, field);
  if (value !== undefined) return value;
  const metadata: unknown = Reflect.get(tool, "metadata");
  if (typeof metadata === "object" && metadata !== null && Object.hasOwn(metadata, field)) {
    return (metadata as Record<string, unknown>)[field];
  }
  throw new IdentityFieldError(field);
}

/** A tool call as the model proposed it. */
export interface ToolCallRef {
  /** The call id the model gave: part of the key, so a transport retry must keep it. */
  readonly id: string;
  /** The tool's name. */
  readonly name: string;
  /** The call's arguments; their digest is part of the key. */
  readonly args: unknown;
}

function keyOf(turnKeyValue: string, toolName: string, argsDigest: string, toolCallId: string) {
  return digest({ kind: "arkah.mutation", v: 1, turnKey: turnKeyValue, toolName, argsDigest, toolCallId });
}

/**
 * The idempotency key of one mutation: turn, tool, arguments and call id. Pass it to the write
 * service so a write that outlives a crash can be recognised when an operator reconciles it.
 */
export function mutationKey(turn: TurnRef, call: ToolCallRef): string {
  return keyOf(turnKey(turn), call.name, digest(call.args), call.id);
}

/**
 * @internal The identity a claim is made under, from the call's argument digest and its tool's
 * fingerprint (recorded with the claim, not part of the mutation key).
 */
export function mutationIdentity(
  turn: { readonly scopeId: string; readonly turnKey: string },
  call: { readonly id: string; readonly name: string; readonly argsDigest: string; readonly toolFingerprint: string },
): MutationIdentity {
  const { argsDigest } = call;
  return {
    turnKey: turn.turnKey,
    scopeId: turn.scopeId,
    toolCallId: call.id,
    toolName: call.name,
    argsDigest,
    mutationKey: keyOf(turn.turnKey, call.name, argsDigest, call.id),
    toolFingerprint: call.toolFingerprint,
  };
}

/**
 * The key of one side effect: turn, tool and arguments (not the call id, so the same effect asked
 * for again in the turn under a new id is the same effect), and the answer of the tool's
 * `discriminator`, when its policy has one and it is not `null`. Pass it to the service the effect
 * acts on (a mail API's idempotency key) so it can be recognised when an operator reconciles it.
 */
export function effectKey(turn: TurnRef, call: Omit<ToolCallRef, "id"> & { readonly discriminator?: JsonValue }): string {
  const { discriminator } = call;
  return effectKeyOf(turnKey(turn), call.name, digest(call.args), discriminator === undefined || discriminator === null ? undefined : digest(discriminator));
}

function effectKeyOf(turnKeyValue: string, toolName: string, argsDigest: string, discriminatorDigest: string | undefined): string {
  // Without a discriminator the formula is the one keys had before there were any: stored claims keep their keys.
  const base = { kind: "arkah.effect", v: 1, turnKey: turnKeyValue, toolName, argsDigest };
  return digest(discriminatorDigest === undefined ? base : { ...base, discriminatorDigest });
}

/**
 * @internal The digest of a discriminator's answer, as its effect key takes it: undefined for
 * `null` (the key without one). Throws `DigestError` for a value that is not plain JSON, and
 * `RangeError` for one longer than {@link MAX_DISCRIMINATOR_CHARS} characters of canonical JSON.
 */
export function discriminatorDigest(answer: unknown): string | undefined {
  if (answer === null) return undefined;
  const json = canonicalJson(answer);
  if (json.length > MAX_DISCRIMINATOR_CHARS) throw new RangeError(`the answer is longer than ${String(MAX_DISCRIMINATOR_CHARS)} characters of canonical JSON`);
  return sha256Hex(json);
}

/** @internal The identity a side effect is claimed under. */
export function effectIdentity(
  turn: { readonly scopeId: string; readonly turnKey: string },
  call: {
    readonly id: string;
    readonly name: string;
    readonly argsDigest: string;
    readonly toolFingerprint: string;
    /** `discriminatorDigest` of the tool's discriminator's answer; undefined without one. */
    readonly discriminatorDigest?: string | undefined;
  },
): EffectIdentity {
  return {
    turnKey: turn.turnKey,
    scopeId: turn.scopeId,
    toolCallId: call.id,
    toolName: call.name,
    argsDigest: call.argsDigest,
    effectKey: effectKeyOf(turn.turnKey, call.name, call.argsDigest, call.discriminatorDigest),
    toolFingerprint: call.toolFingerprint,
  };
}

/**
 * @internal Binds a successful document read to the exact text the model was shown. The content
 * is hashed on its own (SHA-256 of its UTF-8 bytes), so a large document is not re-serialised.
 */
export function readEvidenceDigest(
  turnKeyValue: string,
  read: { readonly toolCallId: string; readonly toolName: string; readonly content: string },
): string {
  return digest({
    kind: "arkah.read",
    v: 1,
    turnKey: turnKeyValue,
    toolCallId: read.toolCallId,
    toolName: read.toolName,
    contentDigest: sha256Hex(read.content),
  });
}
