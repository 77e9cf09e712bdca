/**
 * Records and assertions shared by the conformance suites. Keys are derived with the library's own
 * `turnKey`, `mutationKey` and `digest`, exactly as the middleware derives them.
 */
import { inspect } from "node:util";
import { expect } from "vitest";
import type { z } from "zod";
import {
  ApprovalRecordSchema,
  ClaimResultSchema,
  StoredAuditEventSchema,
  UnresolvedMutationSchema,
  type AdmissionReceipt,
  type ApprovalDecision,
  type ApprovalRecord,
  type ApprovalSubmission,
  type AuditEvent,
  type AuditQuery,
  type ClaimOptions,
  type ClaimResult,
  type GuardrailStore,
  type GuardrailVerdict,
  type MutationIdentity,
  type MutationResult,
  type StoredAuditEvent,
  type TurnRef,
  type UnresolvedMutation,
  type VerdictKey,
  type VerdictRecord,
} from "../../contracts/index.js";
import { digest } from "../../digest.js";
import { StoreContractError } from "../../errors.js";
import { mutationKey, toolFingerprint, turnKey } from "../../keys.js";

/** Freezes `value` and everything in it, so a test (or a store) that changes a shared fixture fails loudly. */
function deepFreeze<T>(value: T): T {
  if (typeof value === "object" && value !== null) {
    for (const child of Object.values(value)) deepFreeze(child);
    Object.freeze(value);
  }
  return value;
}

// ---------------------------------------------------------------------------------------------
// Turns and calls

export interface Call {
  readonly id: string;
  readonly name: string;
  readonly args: Record<string, unknown>;
  /** The tool's fingerprint; default: that of a tool named `name` with no description or schema. */
  readonly fingerprint?: string;
}

/** `toolFingerprint` of a tool named `name`, described as `description`, with no schema. */
export const fingerprintOf = (name: string, description = ""): string => toolFingerprint({ name, description });

/** The fingerprint of the tool `call` is made to. */
export const fingerprintOfCall = (call: Call): string => call.fingerprint ?? fingerprintOf(call.name);

export const SCOPE = "doc-1";
export const OTHER_SCOPE = "doc-2";

export const turn = (turnId: string, scopeId: string = SCOPE): TurnRef => ({ scopeId, turnId });

export const TURN = turn("turn-1");
export const TURN_KEY = turnKey(TURN);
/** Another turn in the same scope. */
export const SIBLING = turn("turn-2");
/** A turn in another scope. */
export const STRANGER = turn("turn-1", OTHER_SCOPE);

export const CALL: Call = deepFreeze({ id: "call-1", name: "rename_document", args: { title: "Field notes" } });

/** The identity the middleware would claim `call` under in `of`. */
export function identity(of: TurnRef = TURN, call: Call = CALL): MutationIdentity {
  return {
    turnKey: turnKey(of),
    scopeId: of.scopeId,
    toolCallId: call.id,
    toolName: call.name,
    argsDigest: digest(call.args),
    mutationKey: mutationKey(of, call),
    toolFingerprint: fingerprintOfCall(call),
  };
}

/** The same call, to the same tool by name, after the tool's description changed: another fingerprint. */
export const REDESCRIBED: Call = deepFreeze({ ...CALL, args: { ...CALL.args }, fingerprint: fingerprintOf(CALL.name, "Renames a document.") });

/** Three calls of the same turn that each differ from `CALL` in one part of the mutation key. */
export const RIVAL_CALLS: readonly (readonly [string, Call])[] = [
  ["another call id", { ...CALL, id: "call-2" }],
  ["another tool", { ...CALL, name: "delete_document" }],
  ["other arguments", { ...CALL, args: { title: "Other notes" } }],
];

/** Constants: tests that change a record in place take a copy first. */
export const RESULT: MutationResult = deepFreeze({ content: '{"title":"Field notes","revision":4}', status: "success" });
export const ERROR_RESULT: MutationResult = deepFreeze({ content: "revision conflict: expected 3", status: "error" });
/** What an operator records when reconciling a write that did happen. */
export const OPERATOR_RESULT: MutationResult = deepFreeze({ content: '{"title":"Field notes","revision":5}', status: "success" });

// ---------------------------------------------------------------------------------------------
// Records

export const evidenceDigest = (name: string): string => digest({ kind: "conformance.read", name });

/** A timestamp with an offset other than Z: stored values must come back exactly as given. */
export const OFFSET_TIME = "2031-02-03T06:05:06.789+02:00";

export function receipt(of: TurnRef = TURN, overrides: Partial<AdmissionReceipt> = {}): AdmissionReceipt {
  return {
    turnKey: turnKey(of),
    scopeId: of.scopeId,
    turnId: of.turnId,
    policyVersion: "policy-1",
    moderationDigest: digest({ kind: "conformance.segments", turnId: of.turnId }),
    allowed: true,
    decidedAt: OFFSET_TIME,
    ...overrides,
  };
}

export const VERDICT_KEY: VerdictKey = deepFreeze({
  turnKey: TURN_KEY,
  toolCallId: CALL.id,
  toolName: CALL.name,
  toolFingerprint: fingerprintOfCall(CALL),
  guardrail: "pii",
  argsDigest: digest(CALL.args),
});

/** The verdict key with each of its six fields changed in turn. */
export const VERDICT_KEY_VARIANTS: readonly (readonly [string, VerdictKey])[] = [
  ["another turn key", { ...VERDICT_KEY, turnKey: turnKey(SIBLING) }],
  ["another call id", { ...VERDICT_KEY, toolCallId: "call-2" }],
  ["another tool", { ...VERDICT_KEY, toolName: "delete_document" }],
  ["another tool fingerprint", { ...VERDICT_KEY, toolFingerprint: fingerprintOfCall(REDESCRIBED) }],
  ["another guardrail", { ...VERDICT_KEY, guardrail: "toxicity" }],
  ["another argument digest", { ...VERDICT_KEY, argsDigest: digest({ title: "Other notes" }) }],
];

/** A verdict with every optional field and nested JSON in its detections and details. */
export const DENY: GuardrailVerdict = deepFreeze<GuardrailVerdict>({
  action: "deny",
  outcome: "complete",
  detections: [
    { rule: "email", detected: true, spans: [{ start: 3, end: 17 }], score: 0.93, note: null },
    { rule: "phone", detected: false },
  ],
  reason: "The title contains an e-mail address.",
  code: "pii_detected",
  details: { fields: ["title"], nested: { level: 2, flags: [true, false] }, label: "ünïcødé ✓" },
});

export const ALLOW: GuardrailVerdict = deepFreeze({ action: "allow", outcome: "complete", detections: [] });

export function verdictRecord(
  key: VerdictKey = VERDICT_KEY,
  verdict: GuardrailVerdict = DENY,
  recordedAt: string = OFFSET_TIME,
): VerdictRecord {
  return { ...key, verdict: structuredClone(verdict), recordedAt };
}

/** The approval id the middleware derives for the first execution of `call` in `of`. */
export function approvalId(of: TurnRef = TURN, call: Call = CALL): string {
  return digest({
    kind: "arkah.approval",
    v: 1,
    turnKey: turnKey(of),
    toolName: call.name,
    toolFingerprint: fingerprintOfCall(call),
    toolCallId: call.id,
    argsDigest: digest(call.args),
    execution: 0,
  });
}

export const APPROVAL_ID = approvalId();

/** An approval request for `call` in `of`, with nested arguments, two guardrails and a reason. */
export function approvalRequest(
  of: TurnRef = TURN,
  call: Call = CALL,
  overrides: Partial<ApprovalSubmission> = {},
): ApprovalSubmission {
  return {
    approvalId: approvalId(of, call),
    turnKey: turnKey(of),
    scopeId: of.scopeId,
    toolCallId: call.id,
    toolName: call.name,
    toolFingerprint: fingerprintOfCall(call),
    argsDigest: digest(call.args),
    args: { ...(structuredClone(call.args) as ApprovalSubmission["args"]), tags: ["a", { b: null }], label: "ünïcødé ✓" },
    guardrails: ["manager", "legal"],
    reason: "Manager sign-off. Legal sign-off.",
    requestedAt: OFFSET_TIME,
    ...overrides,
  };
}

/** The record a store holds right after `request`: the request, pending. */
export function pendingRecord(request: ApprovalSubmission = approvalRequest()): ApprovalRecord {
  return { ...structuredClone(request), status: "pending" };
}

/** Every kind of decision, with the status it leads to. */
export const DECISIONS: readonly (readonly [string, ApprovalDecision, ApprovalRecord["status"]])[] = deepFreeze([
  ["an approval", { decision: "approve" }, "approved"],
  ["a rejection with a message", { decision: "reject", message: "Not this title." }, "rejected"],
  ["a rejection without a message", { decision: "reject" }, "rejected"],
  ["an edit with nested arguments", { decision: "edit", args: { title: "Field notes (edited)", tags: ["a", { b: null }] } }, "edited"],
]);

/** `requestApproval(request)`, checked against the record schema. */
export async function requestApproval(store: GuardrailStore, request: ApprovalSubmission = approvalRequest()): Promise<ApprovalRecord> {
  return conform(ApprovalRecordSchema, await store.requestApproval(request), "requestApproval's answer");
}

/** `getApproval(id)`, checked against the record schema when there is one. */
export async function getApproval(store: GuardrailStore, id: string = APPROVAL_ID): Promise<ApprovalRecord | undefined> {
  const found = await store.getApproval(id);
  return found === undefined ? undefined : conform(ApprovalRecordSchema, found, "getApproval's answer");
}

export function auditEvent(overrides: Partial<AuditEvent> = {}): AuditEvent {
  return {
    at: OFFSET_TIME,
    decision: "executed",
    turnKey: TURN_KEY,
    scopeId: SCOPE,
    toolCallId: CALL.id,
    toolName: CALL.name,
    // The middleware's execution id: a caller's event is stored and answered with it as given.
    executionId: "0b4c3f0e-6a55-4d1e-9a86-2f0d5d1c7e21",
    kind: "mutation",
    argsDigest: digest(CALL.args),
    mutationKey: mutationKey(TURN, CALL),
    ...overrides,
  };
}

// ---------------------------------------------------------------------------------------------
// Assertions

/** Asserts that a store's answer is exactly what `schema` accepts, and returns it untouched. */
export function conform<T>(schema: z.ZodType<T>, value: unknown, what: string): T {
  const parsed = schema.safeParse(value);
  expect(parsed.success, `${what} must match its schema: ${parsed.error?.message ?? ""}`).toBe(true);
  return value as T;
}

/** Claims through the store and checks the answer's shape. */
export async function claim(
  store: GuardrailStore,
  id: MutationIdentity = identity(),
  options?: ClaimOptions,
): Promise<ClaimResult> {
  const result = options === undefined ? await store.claimMutation(id) : await store.claimMutation(id, options);
  return conform(ClaimResultSchema, result, "claimMutation's answer");
}

/** Claims and returns the token; fails the test unless the claim was acquired. */
export async function acquire(store: GuardrailStore, id: MutationIdentity = identity()): Promise<string> {
  const result = await claim(store, id);
  if (result.status !== "acquired") {
    throw new Error(`expected the claim of ${id.toolCallId} to be acquired, got ${result.status}`);
  }
  return result.token;
}

/** `listUnresolved()`, each entry checked against its schema. */
export async function unresolved(store: GuardrailStore): Promise<UnresolvedMutation[]> {
  const list = await store.listUnresolved();
  expect(Array.isArray(list), "listUnresolved must answer an array").toBe(true);
  list.forEach((entry, index) => conform(UnresolvedMutationSchema, entry, `listUnresolved()[${String(index)}]`));
  return list;
}

/** `readAudit(query)`, each event checked against its schema. */
export async function readAudit(store: GuardrailStore, query?: AuditQuery): Promise<StoredAuditEvent[]> {
  const events = query === undefined ? await store.readAudit() : await store.readAudit(query);
  expect(Array.isArray(events), "readAudit must answer an array").toBe(true);
  events.forEach((event, index) => conform(StoredAuditEventSchema, event, `readAudit()[${String(index)}]`));
  return events;
}

/** Acquires and settles `complete` with `result`. */
export async function complete(
  store: GuardrailStore,
  id: MutationIdentity = identity(),
  result: MutationResult = RESULT,
): Promise<void> {
  const token = await acquire(store, id);
  expect(await store.settleMutation({ turnKey: id.turnKey, token, outcome: "complete", result }), "await store.settleMutation({ turnKey: id.turnKey, token, outcome: \"complete\", result }) toBe").toBe(true);
}

/** Acquires and settles `unknown`, as the middleware does after an exception. Returns the token. */
export async function leaveUnknown(store: GuardrailStore, id: MutationIdentity = identity()): Promise<string> {
  const token = await acquire(store, id);
  expect(await store.settleMutation({ turnKey: id.turnKey, token, outcome: "unknown" }), "await store.settleMutation({ turnKey: id.turnKey, token, outcome: \"unknown\" }) toBe").toBe(true);
  return token;
}

/**
 * Calls `run` and expects a rejected promise carrying a `StoreContractError`: not a synchronous
 * throw (a caller awaiting inside try/catch would survive it, one chaining `.catch` would not), not
 * a resolution, not another error.
 */
export async function expectContractError(run: () => Promise<unknown>, what: string): Promise<void> {
  let promise: Promise<unknown> | undefined;
  let thrown: { error: unknown } | undefined;
  try {
    promise = run();
  } catch (error) {
    thrown = { error };
  }
  expect(thrown, `${what} must reject, not throw synchronously`).toBeUndefined();
  expect(promise, `${what} must return a promise`).toBeInstanceOf(Promise);
  const outcome = await (promise as Promise<unknown>).then(
    (value: unknown) => ({ resolved: true as const, value }),
    (error: unknown) => ({ resolved: false as const, error }),
  );
  if (outcome.resolved) {
    throw new Error(`${what} must reject with a StoreContractError, but it resolved to ${inspect(outcome.value)}`);
  }
  expect(
    StoreContractError.isInstance(outcome.error),
    `${what} must reject with a StoreContractError, got ${String(outcome.error)}`,
  ).toBe(true);
}

/** Asserts a literal boolean: not a truthy or falsy stand-in. */
export function expectBoolean(value: unknown, expected: boolean, what: string): void {
  expect(typeof value, `${what} must answer a boolean`).toBe("boolean");
  expect(value, what).toBe(expected);
}

/** Two timestamps denote the same instant (representations may differ). */
export function expectInstant(actual: string | undefined, expectedMs: number, what: string): void {
  expect(actual, what).toBeTypeOf("string");
  expect(Date.parse(actual ?? ""), `${what}: ${actual ?? ""} should be ${new Date(expectedMs).toISOString()}`).toBe(
    expectedMs,
  );
}

/**
 * `count` turns, each in its own scope (so an unknown one blocks no other), listed so that their
 * turn keys descend: claiming them in this order makes claim order differ from key order.
 */
export function turnsAgainstKeyOrder(count: number): TurnRef[] {
  return Array.from({ length: count }, (_, index) => turn(`ordered-${String(index)}`, `doc-ordered-${String(index)}`)).sort(
    (a, b) => (turnKey(a) < turnKey(b) ? 1 : -1),
  );
}
