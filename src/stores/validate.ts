/**
 * Parsing at the store boundary. The zod schemas in contracts.ts define what is valid. The
 * records on the per-call hot path (claims, settlements, releases, read evidence) also get a
 * structural fast path, which accepts only values its schema accepts and builds the same detached
 * copy; anything it is unsure of falls through to zod, which decides and words the error.
 */
import { z } from "zod";
import {
  ClaimOptionsSchema,
  ClaimResultSchema,
  DigestSchema,
  MutationIdentitySchema,
  MutationReleaseSchema,
  MutationSettlementSchema,
  ReadEvidenceSchema,
  type ClaimResult,
  type CompletedMutation,
  type MutationIdentity,
  type MutationRelease,
  type MutationResult,
  type MutationSettlement,
  type ReadEvidence,
} from "../contracts.js";
import { StoreContractError } from "../errors.js";

/**
 * Parses a value crossing the store boundary, in either direction: what a caller hands a store,
 * and what a store (possibly a third-party adapter) answers. Parsing also detaches: zod builds a
 * new object, so neither side keeps a reference into the other's state.
 */
export function parseStoreValue<T>(schema: z.ZodType<T>, value: unknown, what: string): T {
  const parsed = schema.safeParse(value);
  if (!parsed.success) {
    throw new StoreContractError(`invalid ${what}: ${z.prettifyError(parsed.error)}`);
  }
  return parsed.data;
}

export const StoreBooleanSchema = z.boolean();

// ---------------------------------------------------------------------------------------------
// Fast paths

/** The value's properties, if it is a plain object whose own keys are exactly `keys`. */
function exactRecord(value: unknown, keys: ReadonlySet<string>): Readonly<Record<string, unknown>> | undefined {
  if (typeof value !== "object" || value === null) return undefined;
  const proto: unknown = Object.getPrototypeOf(value);
  if (proto !== Object.prototype && proto !== null) return undefined;
  // for-in rather than Object.keys: no array to allocate. With a plain prototype it lists the own
  // keys (and anything enumerable added to Object.prototype, which only makes this stricter).
  let count = 0;
  for (const key in value) {
    if (!keys.has(key) || !Object.hasOwn(value, key)) return undefined;
    count++;
  }
  return count === keys.size ? (value as Readonly<Record<string, unknown>>) : undefined;
}

const isId = (value: unknown): value is string => typeof value === "string" && value.length > 0;

const NOT_LOWER_HEX = /[^0-9a-f]/;

/** A lowercase hex SHA-256: what `DigestSchema`'s pattern accepts (a negated class scans fastest). */
const isDigest = (value: unknown): value is string =>
  typeof value === "string" && value.length === 64 && !NOT_LOWER_HEX.test(value);

const keySet = (...keys: string[]): ReadonlySet<string> => new Set(keys);
const IDENTITY_KEYS = keySet("turnKey", "scopeId", "toolCallId", "toolName", "argsDigest", "mutationKey", "toolFingerprint");
const EVIDENCE_KEYS = keySet("turnKey", "evidenceDigest");
const RESULT_KEYS = keySet("content", "status");
const COMPLETE_KEYS = keySet("turnKey", "token", "outcome", "result");
const UNKNOWN_KEYS = keySet("turnKey", "token", "outcome");
const RELEASE_KEYS = keySet("turnKey", "token");
const OPTION_KEYS = keySet("requireResolvedScope");
const STATUS_KEYS = keySet("status");
const ACQUIRED_KEYS = keySet("status", "token");
const REPLAY_KEYS = keySet("status", "result");
const CONFLICT_KEYS = keySet("status", "completed");
const COMPLETED_KEYS = keySet("toolName", "toolCallId", "result");

function fastResult(value: unknown): MutationResult | undefined {
  const record = exactRecord(value, RESULT_KEYS);
  if (record === undefined) return undefined;
  const { content, status } = record;
  if (typeof content !== "string" || (status !== "success" && status !== "error")) return undefined;
  return { content, status };
}

function fastCompleted(value: unknown): CompletedMutation | undefined {
  const record = exactRecord(value, COMPLETED_KEYS);
  if (record === undefined) return undefined;
  const { toolName, toolCallId } = record;
  const result = fastResult(record.result);
  if (!isId(toolName) || !isId(toolCallId) || result === undefined) return undefined;
  return { toolName, toolCallId, result };
}

export function parseDigest(value: unknown, what: string): string {
  return isDigest(value) ? value : parseStoreValue(DigestSchema, value, what);
}

export function parseIdentity(value: unknown): MutationIdentity {
  const record = exactRecord(value, IDENTITY_KEYS);
  if (record !== undefined) {
    const { turnKey, scopeId, toolCallId, toolName, argsDigest, mutationKey, toolFingerprint } = record;
    if (
      isDigest(turnKey) &&
      isId(scopeId) &&
      isId(toolCallId) &&
      isId(toolName) &&
      isDigest(argsDigest) &&
      isDigest(mutationKey) &&
      isDigest(toolFingerprint)
    ) {
      return { turnKey, scopeId, toolCallId, toolName, argsDigest, mutationKey, toolFingerprint };
    }
  }
  return parseStoreValue(MutationIdentitySchema, value, "mutation identity");
}

export function parseEvidence(value: unknown): ReadEvidence {
  const record = exactRecord(value, EVIDENCE_KEYS);
  if (record !== undefined) {
    const { turnKey, evidenceDigest } = record;
    if (isDigest(turnKey) && isDigest(evidenceDigest)) return { turnKey, evidenceDigest };
  }
  return parseStoreValue(ReadEvidenceSchema, value, "read evidence");
}

export function parseSettlement(value: unknown): MutationSettlement {
  const complete = exactRecord(value, COMPLETE_KEYS);
  if (complete !== undefined) {
    const { turnKey, token, outcome } = complete;
    const result = fastResult(complete.result);
    if (isDigest(turnKey) && isId(token) && outcome === "complete" && result !== undefined) {
      return { turnKey, token, outcome, result };
    }
  }
  const unknown = exactRecord(value, UNKNOWN_KEYS);
  if (unknown !== undefined) {
    const { turnKey, token, outcome } = unknown;
    if (isDigest(turnKey) && isId(token) && outcome === "unknown") return { turnKey, token, outcome };
  }
  return parseStoreValue(MutationSettlementSchema, value, "mutation settlement");
}

export function parseRelease(value: unknown): MutationRelease {
  const record = exactRecord(value, RELEASE_KEYS);
  if (record !== undefined) {
    const { turnKey, token } = record;
    if (isDigest(turnKey) && isId(token)) return { turnKey, token };
  }
  return parseStoreValue(MutationReleaseSchema, value, "mutation release");
}

/** Whether a claim must wait for the scope's `unknown` claims; an omitted argument means yes. */
export function requiresResolvedScope(options: unknown): boolean {
  if (options === undefined) return true;
  const requireResolvedScope = exactRecord(options, OPTION_KEYS)?.requireResolvedScope;
  if (typeof requireResolvedScope === "boolean") return requireResolvedScope;
  return parseStoreValue(ClaimOptionsSchema, options, "claim options").requireResolvedScope ?? true;
}

/** A store's answer to `claimMutation`. */
export function parseClaimResult(value: unknown): ClaimResult {
  const status = typeof value === "object" && value !== null ? (value as { status?: unknown }).status : undefined;
  if (status === "acquired") {
    const token = exactRecord(value, ACQUIRED_KEYS)?.token;
    if (isId(token)) return { status, token };
  } else if (status === "replay") {
    const result = fastResult(exactRecord(value, REPLAY_KEYS)?.result);
    if (result !== undefined) return { status, result };
  } else if (status === "conflict") {
    if (exactRecord(value, STATUS_KEYS) !== undefined) return { status };
    const completed = fastCompleted(exactRecord(value, CONFLICT_KEYS)?.completed);
    if (completed !== undefined) return { status, completed };
  } else if (status === "pending" || status === "unknown" || status === "scope_unresolved") {
    if (exactRecord(value, STATUS_KEYS) !== undefined) return { status };
  }
  return parseStoreValue(ClaimResultSchema, value, "claimMutation answer");
}
