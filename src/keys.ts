/**
 * The derived keys: each is `digest` (SHA-256 over RFC 8785 canonical JSON) of a small tagged
 * object, so a service in another language can compute the same values. The formulas are part of
 * the public contract and documented in docs/architecture.md.
 */
import type { ServerTool } from "@langchain/core/tools";
import type { MutationIdentity, Segment, TurnRef } from "./contracts.js";
import { digest, sha256Hex } from "./digest.js";
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

/** Fingerprints already computed, per tool object: a tool is fingerprinted once, not per call. */
const fingerprints = new WeakMap<object, string>();

/**
 * Identifies a tool as the model is shown it: its name, its description (`""` when it has none)
 * and its declared input schema as JSON Schema (a zod schema converted, a JSON Schema as is; `null`
 * when it declares none). A verdict, an approval or a claim recorded under one fingerprint says
 * which tool was decided on: change the tool's description or schema and its fingerprint changes.
 * Computed once per tool object.
 */
export function toolFingerprint(tool: FingerprintedTool): string {
  const known = fingerprints.get(tool);
  if (known !== undefined) return known;
  const { name, description } = tool;
  const fingerprint = digest({
    kind: "arkah.tool",
    v: 1,
    name: typeof name === "string" ? name : "",
    description: typeof description === "string" ? description : "",
    schema: declaredSchema(tool as ServerTool) ?? null,
  });
  fingerprints.set(tool, fingerprint);
  return fingerprint;
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
