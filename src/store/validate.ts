/**
 * Parsing at the store boundary. The zod schemas in contracts/ define what is valid. The
 * records on the per-call hot path (claims, settlements, releases, read evidence) also get a
 * structural fast path, which accepts only values its schema accepts and builds the same detached
 * copy; anything it is unsure of falls through to zod, which decides and words the error.
 */
import { types } from "node:util";
import { z } from "zod";
import {
  AUDIT_DECISIONS,
  AuditEventSchema,
  ClaimOptionsSchema,
  ClaimResultSchema,
  DigestSchema,
  MAX_READ_EVIDENCE,
  MutationIdentitySchema,
  MutationReleaseSchema,
  MutationSettlementSchema,
  ReadEvidenceSchema,
  RecordReadOptionsSchema,
  TOOL_KINDS,
  type AuditEvent,
  type ClaimResult,
  type CompletedMutation,
  type GuardrailStore,
  type MutationIdentity,
  type MutationRelease,
  type MutationResult,
  type MutationSettlement,
  type ReadEvidence,
} from "../contracts/index.js";
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

/** The keys a record must have (`order`: as callers usually write them), and those it may have. */
interface Shape {
  readonly order: readonly string[];
  readonly keys: ReadonlySet<string>;
  readonly optional: ReadonlySet<string> | undefined;
}

const shape = (order: readonly string[], optional: readonly string[] = []): Shape => ({
  order,
  keys: new Set(order),
  optional: optional.length === 0 ? undefined : new Set(optional),
});

/**
 * The value's properties, if it is a plain object whose enumerable keys (own and inherited, as
 * zod's for-in sees them) are exactly `shape.order`, plus any of `shape.optional` (whose values
 * the caller checks: `undefined` stands for an absent optional key, as in zod).
 */
function exactRecord(value: unknown, shape: Shape): Readonly<Record<string, unknown>> | undefined {
  if (typeof value !== "object" || value === null) return undefined;
  const proto: unknown = Object.getPrototypeOf(value);
  if (proto !== Object.prototype && proto !== null) return undefined;
  // The common case, cheaply: exactly the keys, in the usual order. for-in lists own keys in
  // creation order, then inherited enumerable ones; property names compare by identity.
  const { order } = shape;
  let index = 0;
  for (const key in value) {
    if (key !== order[index]) {
      index = -1;
      break;
    }
    index++;
  }
  if (index === order.length) return value as Readonly<Record<string, unknown>>;
  // Any order, optional keys: own keys only (an inherited enumerable key would be unknown to zod).
  let count = 0;
  for (const key in value) {
    if (!Object.hasOwn(value, key)) return undefined;
    if (shape.keys.has(key)) count++;
    else if (shape.optional?.has(key) !== true) return undefined;
  }
  return count === shape.keys.size ? (value as Readonly<Record<string, unknown>>) : undefined;
}

const isId = (value: unknown): value is string => typeof value === "string" && value.length > 0;

/** 1 for the UTF-16 code units `[0-9a-f]`, 0 for every other unit below 128. */
const LOWER_HEX = new Uint8Array(128);
for (const unit of "0123456789abcdef") LOWER_HEX[unit.charCodeAt(0)] = 1;

/**
 * Digests that passed the full check, one per slot, the slot chosen by two of the string's code
 * units. A turn's values repeat (the turn key in the claim, the settlement and their audit events;
 * the tool's fingerprint on every call), and validity is a function of a string's content, which
 * `===` compares: a string equal to one that passed, passes. One comparison per lookup (a scan of
 * recent entries cost about as much as the check it saved), and a new digest evicts only its own
 * slot, so the values that repeat stay while fresh ones (a new turn key per claim) come and go.
 */
const PASSED_DIGESTS: string[] = new Array<string>(64).fill("");

/** The slot of `PASSED_DIGESTS` a 64-unit string goes in. */
const digestSlot = (value: string): number => (value.charCodeAt(0) * 31 + value.charCodeAt(63)) & 63;

/**
 * A lowercase hex SHA-256: exactly what `DigestSchema`'s pattern `^[0-9a-f]{64}$` accepts (no `u`
 * or `m` flag: 64 UTF-16 code units, each one of `[0-9a-f]`; `$` is the end of the string).
 */
function isDigest(value: unknown): value is string {
  if (typeof value !== "string" || value.length !== 64) return false;
  const slot = digestSlot(value);
  if (PASSED_DIGESTS[slot] === value) return true;
  for (let index = 0; index < 64; index++) {
    const unit = value.charCodeAt(index);
    if (unit >= 128 || LOWER_HEX[unit] === 0) return false;
  }
  PASSED_DIGESTS[slot] = value;
  return true;
}

const keySet = (...keys: string[]): ReadonlySet<string> => new Set(keys);
const IDENTITY_KEYS = shape(["turnKey", "scopeId", "toolCallId", "toolName", "argsDigest", "mutationKey", "toolFingerprint"]);
const EVIDENCE_KEYS = shape(["turnKey", "evidenceDigest"]);
const RESULT_KEYS = shape(["content", "status"]);
const COMPLETE_KEYS = shape(["turnKey", "token", "outcome", "result"], ["audit"]);
const UNKNOWN_KEYS = shape(["turnKey", "token", "outcome"], ["audit"]);
const RELEASE_KEYS = shape(["turnKey", "token"]);
const OPTION_KEYS = shape([], ["requireResolvedScope", "readEvidence"]);
const READ_OPTION_KEYS = shape([], ["audit"]);
const STATUS_KEYS = shape(["status"]);
const ACQUIRED_KEYS = shape(["status", "token"]);
const REPLAY_KEYS = shape(["status", "result"]);
const CONFLICT_KEYS = shape(["status", "completed"]);
const COMPLETED_KEYS = shape(["toolName", "toolCallId", "result"]);

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

/** A digest crossing the store boundary (a turn key, an approval id); `what` names it in the error. */
export function parseDigest(value: unknown, what: string): string {
  return isDigest(value) ? value : parseStoreValue(DigestSchema, value, what);
}

/** `claimMutation`'s identity, detached; a `StoreContractError` if invalid. */
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

/** `recordSuccessfulRead`'s and `hasSuccessfulRead`'s evidence, detached. */
export function parseEvidence(value: unknown): ReadEvidence {
  const record = exactRecord(value, EVIDENCE_KEYS);
  if (record !== undefined) {
    const { turnKey, evidenceDigest } = record;
    if (isDigest(turnKey) && isDigest(evidenceDigest)) return { turnKey, evidenceDigest };
  }
  return parseStoreValue(ReadEvidenceSchema, value, "read evidence");
}

/** `settleMutation`'s settlement (with its optional audit event), detached. */
export function parseSettlement(value: unknown): MutationSettlement {
  const complete = exactRecord(value, COMPLETE_KEYS);
  if (complete !== undefined) {
    const { turnKey, token, outcome } = complete;
    const result = fastResult(complete.result);
    const audit = fastOptionalAudit(complete.audit);
    if (isDigest(turnKey) && isId(token) && outcome === "complete" && result !== undefined && audit !== INVALID) {
      return audit === undefined ? { turnKey, token, outcome, result } : { turnKey, token, outcome, result, audit };
    }
  }
  const unknown = exactRecord(value, UNKNOWN_KEYS);
  if (unknown !== undefined) {
    const { turnKey, token, outcome } = unknown;
    const audit = fastOptionalAudit(unknown.audit);
    if (isDigest(turnKey) && isId(token) && outcome === "unknown" && audit !== INVALID) {
      return audit === undefined ? { turnKey, token, outcome } : { turnKey, token, outcome, audit };
    }
  }
  return parseStoreValue(MutationSettlementSchema, value, "mutation settlement");
}

/** `releaseMutation`'s release, detached. */
export function parseRelease(value: unknown): MutationRelease {
  const record = exactRecord(value, RELEASE_KEYS);
  if (record !== undefined) {
    const { turnKey, token } = record;
    if (isDigest(turnKey) && isId(token)) return { turnKey, token };
  }
  return parseStoreValue(MutationReleaseSchema, value, "mutation release");
}

/** A claim's options, parsed: what the claim must check, in its own transaction. */
export interface ParsedClaimOptions {
  /** Wait for the scope's `unknown` claims (default true). */
  readonly requireResolvedScope: boolean;
  /** Require one of these digests recorded for the turn first; undefined: no such check. A detached copy. */
  readonly readEvidence: readonly string[] | undefined;
}

const DEFAULT_CLAIM_OPTIONS: ParsedClaimOptions = Object.freeze({ requireResolvedScope: true, readEvidence: undefined });

/** `readEvidence` as `ClaimOptionsSchema` accepts it (an array of at most 256 digests), copied; else undefined. */
function fastEvidenceList(value: unknown): string[] | undefined {
  if (!Array.isArray(value) || value.length > MAX_READ_EVIDENCE) return undefined;
  const digests: string[] = [];
  // By index, as zod reads an array (its iterator could be replaced).
  // eslint-disable-next-line @typescript-eslint/prefer-for-of
  for (let index = 0; index < value.length; index++) {
    const digest: unknown = value[index];
    if (!isDigest(digest)) return undefined;
    digests.push(digest);
  }
  return digests;
}

/**
 * `claimMutation`'s options; an omitted argument (`undefined`) means the defaults. `null` is not
 * omitted: it is rejected, like any other value the schema does not accept.
 */
export function parseClaimOptions(options: unknown): ParsedClaimOptions {
  if (options === undefined) return DEFAULT_CLAIM_OPTIONS;
  const record = exactRecord(options, OPTION_KEYS);
  if (record !== undefined) {
    const { requireResolvedScope = true, readEvidence } = record;
    const evidence = readEvidence === undefined ? undefined : fastEvidenceList(readEvidence);
    if (typeof requireResolvedScope === "boolean" && (readEvidence === undefined || evidence !== undefined)) {
      return readEvidence === undefined && requireResolvedScope ? DEFAULT_CLAIM_OPTIONS : { requireResolvedScope, readEvidence: evidence };
    }
  }
  const parsed = parseStoreValue(ClaimOptionsSchema, options, "claim options");
  return { requireResolvedScope: parsed.requireResolvedScope ?? true, readEvidence: parsed.readEvidence };
}

/** Whether a claim must wait for the scope's `unknown` claims; an omitted argument means yes. */
export function requiresResolvedScope(options: unknown): boolean {
  return parseClaimOptions(options).requireResolvedScope;
}

/** `recordSuccessfulRead`'s options: the audit event to append with the evidence, if any. */
export function parseReadOptions(options: unknown): AuditEvent | undefined {
  if (options === undefined) return undefined;
  const record = exactRecord(options, READ_OPTION_KEYS);
  if (record !== undefined) {
    const audit = fastOptionalAudit(record.audit);
    if (audit !== INVALID) return audit;
  }
  return parseStoreValue(RecordReadOptionsSchema, options, "read options").audit;
}

// ---------------------------------------------------------------------------------------------
// Audit events

/** Not accepted by the fast path (zod decides). */
const INVALID = Symbol("invalid");

const isString = (value: unknown): value is string => typeof value === "string";
const AUDIT_DECISION_SET: ReadonlySet<unknown> = new Set(AUDIT_DECISIONS);
const TOOL_KIND_SET: ReadonlySet<unknown> = new Set(TOOL_KINDS);

/**
 * The pattern `AuditEventSchema.shape.at` (`z.iso.datetime({ offset: true })`) checks with, taken
 * from the schema itself: its check is exactly this pattern's `test`. Undefined if zod ever stops
 * exposing it; then events take the zod path.
 */
const TIMESTAMP_PATTERN: RegExp | undefined = (AuditEventSchema.shape.at.def as { pattern?: unknown }).pattern instanceof RegExp
  ? ((AuditEventSchema.shape.at.def as { pattern: RegExp }).pattern)
  : undefined;

const isTimestamp = (value: unknown): value is string =>
  typeof value === "string" && TIMESTAMP_PATTERN !== undefined && !TIMESTAMP_PATTERN.global && TIMESTAMP_PATTERN.test(value);

/**
 * Each field of `AuditEventSchema` but `args` (any JSON, left to zod) and what it accepts. A Map,
 * so an inherited name (`constructor`, `__proto__`) is never a field.
 */
const AUDIT_FIELDS: ReadonlyMap<string, (value: unknown) => boolean> = new Map<string, (value: unknown) => boolean>([
  ["at", isTimestamp],
  ["decision", (value) => AUDIT_DECISION_SET.has(value)],
  ["turnKey", isDigest],
  ["scopeId", isId],
  ["toolCallId", isId],
  ["toolName", isId],
  ["executionId", isId],
  ["toolFingerprint", isDigest],
  ["kind", (value) => TOOL_KIND_SET.has(value)],
  ["argsDigest", isDigest],
  ["code", isString],
  ["guardrail", isId],
  ["action", isString],
  ["approvalId", isDigest],
  ["mutationKey", isDigest],
  ["effectKey", isDigest],
  ["operatorRef", isId],
  ["result", isString],
]);
const AUDIT_REQUIRED: ReadonlySet<string> = keySet("at", "decision", "turnKey", "scopeId");

/** An audit event exactly as `AuditEventSchema` accepts it, copied (its values are strings); else undefined. */
function fastAuditEvent(value: unknown): AuditEvent | undefined {
  if (typeof value !== "object" || value === null) return undefined;
  const proto: unknown = Object.getPrototypeOf(value);
  if (proto !== Object.prototype && proto !== null) return undefined;
  const event: Record<string, unknown> = {};
  let required = 0;
  for (const key in value) {
    if (!Object.hasOwn(value, key)) return undefined;
    const accepts = AUDIT_FIELDS.get(key);
    if (accepts === undefined) return undefined;
    const field = (value as Record<string, unknown>)[key];
    const isRequired = AUDIT_REQUIRED.has(key);
    if (field === undefined && !isRequired) continue;
    if (!accepts(field)) return undefined;
    if (isRequired) required++;
    event[key] = field;
  }
  return required === AUDIT_REQUIRED.size ? (event as AuditEvent) : undefined;
}

/** An optional `audit` field: undefined when absent, the detached event, or INVALID for zod to decide. */
function fastOptionalAudit(value: unknown): AuditEvent | undefined | typeof INVALID {
  if (value === undefined) return undefined;
  return fastAuditEvent(value) ?? INVALID;
}

/** An audit event crossing the store boundary (`appendAudit`, or one carried by a step). */
export function parseAuditEvent(value: unknown): AuditEvent {
  return fastAuditEvent(value) ?? parseStoreValue(AuditEventSchema, value, "audit event");
}

/** A store's answer to `claimMutation`, as the middleware checks an untrusted store's answer. */
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
  } else if (status === "pending" || status === "unknown" || status === "scope_unresolved" || status === "read_required") {
    if (exactRecord(value, STATUS_KEYS) !== undefined) return { status };
  }
  return parseStoreValue(ClaimResultSchema, value, "claimMutation answer");
}

// ---------------------------------------------------------------------------------------------
// Stores this package ships

/**
 * The brand of a store this package ships (`InMemoryGuardrailStore`, `SqliteGuardrailStore`,
 * `PostgresGuardrailStore`): a non-enumerable, read-only own property whose value is the class's
 * prototype. A registered symbol, so a store made by one build of the package (ESM or CommonJS)
 * is known to the other.
 */
export const TRUSTED_STORE: symbol = Symbol.for("arkah-agent-guardrails.trusted-store");

/**
 * Brands `store` as one this package ships. Called by the shipped classes' constructors only when
 * `new.target` is the class itself: an instance of a subclass (which may override what it
 * answers) is never branded.
 */
export function brandTrustedStore(store: object, prototype: object): void {
  Object.defineProperty(store, TRUSTED_STORE, { value: prototype, enumerable: false, writable: false, configurable: false });
}

/**
 * Whether `store` is a store this package ships, as it ships it, so its answers need no
 * re-validation by the middleware (the store validates its inputs and its own answers at its
 * boundary). True only for a branded instance (not a subclass's) that is not a Proxy, still has
 * its class's prototype, and has no own property but the brand (no method replaced on it). A
 * custom store, or a wrapper around a shipped one, is not trusted.
 */
export function isTrustedStore(store: GuardrailStore | object | null | undefined): boolean {
  if (typeof store !== "object" || store === null || types.isProxy(store)) return false;
  const brand = Object.getOwnPropertyDescriptor(store, TRUSTED_STORE);
  if (brand === undefined || brand.enumerable === true || brand.writable === true || brand.configurable === true) return false;
  if (brand.value !== Object.getPrototypeOf(store)) return false;
  const own = Reflect.ownKeys(store);
  return own.length === 1 && own[0] === TRUSTED_STORE;
}
