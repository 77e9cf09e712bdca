/**
 * Every method rejects malformed input (wrong types, missing or extra keys, bad digests, null)
 * with a rejected promise of `StoreContractError`, and changes nothing.
 */
import { expect } from "vitest";
import { z } from "zod";
import {
  AdmissionReceiptSchema,
  AdvanceAuditCursorInputSchema,
  ApplyApprovalInputSchema,
  ApprovalQuerySchema,
  ApprovalRequestSchema,
  AuditEventSchema,
  AuditQuerySchema,
  AuditSinkNameSchema,
  ClaimOptionsSchema,
  DecideApprovalInputSchema,
  DigestSchema,
  ExpireApprovalsInputSchema,
  MAX_READ_EVIDENCE,
  OrphanApprovalsInputSchema,
  MutationIdentitySchema,
  MutationReleaseSchema,
  MutationSettlementSchema,
  PruneOptionsSchema,
  ReadEvidenceSchema,
  RecordReadOptionsSchema,
  ReconciliationSchema,
  VerdictKeySchema,
  VerdictRecordSchema,
  type GuardrailStore,
  type VerdictKey,
} from "../../contracts/index.js";
import { turnKey } from "../../keys.js";
import { hasStorePart, STORE_PART_NAMES, STORE_PARTS } from "../../store/capabilities.js";
import {
  acquire,
  approvalRequest,
  auditEvent,
  complete,
  DENY,
  evidenceDigest,
  expectContractError,
  identity,
  leaveUnknown,
  OPERATOR_RESULT,
  receipt,
  RESULT,
  STRANGER,
  TURN,
  TURN_KEY,
  turn,
  VERDICT_KEY,
  verdictRecord,
} from "./fixtures.js";
import type { ConformanceNeed, ManualClock, StoreTest } from "./harness.js";

/** Lets a test pass a value the types forbid, as an untyped caller could. */
const untyped = (value: unknown): never => value as never;

/** `value` with the token marker "TOKEN" replaced by the seeded pending claim's real one. */
function withSeededToken(value: unknown, seeded: Seeded): unknown {
  return typeof value === "object" && value !== null && !Array.isArray(value) && "token" in value && value.token === "TOKEN"
    ? { ...value, token: seeded.token }
    : value;
}

/** `[value, <hole>]`: an array of length 2 whose second element is missing. */
function sparse(value: string): string[] {
  const array = [value];
  array.length = 2;
  return array;
}

/** A copy of `record` without `key`. */
function without(record: object, key: string): Record<string, unknown> {
  return Object.fromEntries(Object.entries(record).filter(([name]) => name !== key));
}

// ---------------------------------------------------------------------------------------------
// A store with something in every table, and a way to see all of it without changing it

/** A turn whose slots and keys nothing uses: where an invalid write would land if accepted. */
const FREE = turn("free", "doc-free");
const FREE_KEY = turnKey(FREE);
const FREE_VERDICT_KEY: VerdictKey = { ...VERDICT_KEY, turnKey: FREE_KEY };
const DONE = turn("done", "doc-done");
/** A turn in the scope of `STRANGER`, whose mutation is unknown. */
const BLOCKED = turn("blocked", STRANGER.scopeId);

const SEEDED_EVIDENCE = { turnKey: TURN_KEY, evidenceDigest: evidenceDigest("seeded") };
/** A pending approval request (a valid expiry after `seed` would expire it). */
const PENDING_REQUEST = approvalRequest(TURN);
/** An approved request (a valid application would apply it). */
const APPROVED_REQUEST = approvalRequest(DONE);
const FREE_REQUEST = approvalRequest(FREE);
const FREE_EVIDENCE = { turnKey: FREE_KEY, evidenceDigest: evidenceDigest("free") };
/** A sink whose cursor is at 1 (a valid advance would move it), and one without a cursor. */
const SEEDED_SINK = "seeded";
const FREE_SINK = "free";

interface Seeded {
  /** The token of `TURN`'s pending claim. */
  readonly token: string;
}

async function seed(store: GuardrailStore, clock: ManualClock): Promise<Seeded> {
  await store.putReceiptIfAbsent(receipt(TURN));
  await store.recordSuccessfulRead(SEEDED_EVIDENCE);
  if (hasStorePart(store, "approvals")) {
    await store.recordVerdict(verdictRecord(VERDICT_KEY, DENY));
    await store.requestApproval(PENDING_REQUEST);
    await store.requestApproval(APPROVED_REQUEST);
    await store.decideApproval({ approvalId: APPROVED_REQUEST.approvalId, decision: { decision: "approve" }, decidedAt: clock.iso() });
  }
  await store.appendAudit(auditEvent());
  if (hasStorePart(store, "auditDelivery")) await store.advanceAuditCursor({ sink: SEEDED_SINK, seq: 1 });
  await complete(store, identity(DONE));
  await leaveUnknown(store, identity(STRANGER));
  const token = await acquire(store, identity(TURN));
  // A valid prune now would remove DONE, and a valid expiry would expire the pending request: an
  // invalid one that slipped through would show.
  clock.advance(24 * 60 * 60 * 1000);
  return { token };
}

/**
 * Everything a store holds for the seeded and the free keys, read without changing anything
 * (through the parts the store has; `undefined` for those it lacks).
 */
async function observe(store: GuardrailStore) {
  const approvals = hasStorePart(store, "approvals");
  return {
    receipts: [await store.getReceipt(TURN_KEY), await store.getReceipt(FREE_KEY)],
    reads: hasSuccessfulRead(store) ? [await store.hasSuccessfulRead(SEEDED_EVIDENCE), await store.hasSuccessfulRead(FREE_EVIDENCE)] : undefined,
    verdicts: approvals ? [await store.getVerdict(VERDICT_KEY), await store.getVerdict(FREE_VERDICT_KEY)] : undefined,
    approvals: approvals
      ? [
          await store.getApproval(PENDING_REQUEST.approvalId),
          await store.getApproval(APPROVED_REQUEST.approvalId),
          await store.getApproval(FREE_REQUEST.approvalId),
        ]
      : undefined,
    approvalList: approvals ? await store.listApprovals() : undefined,
    audit: await store.readAudit(),
    cursors: hasStorePart(store, "auditDelivery") ? [await store.getAuditCursor(SEEDED_SINK), await store.getAuditCursor(FREE_SINK)] : undefined,
    unresolved: hasStorePart(store, "operator") ? await store.listUnresolved() : undefined,
    mutations: await Promise.all([TURN_KEY, FREE_KEY, turnKey(STRANGER), turnKey(DONE)].map((key) => store.getMutation(key))),
    // Claims that find an existing claim, or are refused, change nothing.
    claims: [
      await store.claimMutation(identity(TURN)),
      await store.claimMutation(identity(STRANGER)),
      await store.claimMutation(identity(DONE)),
      await store.claimMutation(identity(BLOCKED)),
    ],
  };
}

// ---------------------------------------------------------------------------------------------
// The malformed inputs

interface Case {
  readonly method: string;
  readonly label: string;
  /** The schema the argument must fail: a check on this catalog itself. */
  readonly schema: z.ZodType;
  readonly value: unknown;
  readonly call: (store: GuardrailStore, seeded: Seeded, value: unknown) => Promise<unknown>;
}

function cases(
  method: string,
  schema: z.ZodType,
  values: readonly (readonly [string, unknown])[],
  call: Case["call"],
): Case[] {
  return values.map(([label, value]) => ({ method, label, schema, value, call }));
}

const NOT_OBJECTS: readonly (readonly [string, unknown])[] = [
  ["null", null],
  ["undefined", undefined],
  ["a string", "value"],
  ["a number", 42],
  ["an array", []],
];

const BAD_DIGESTS: readonly (readonly [string, unknown])[] = [
  ["an empty string", ""],
  ["a short hex string", "abc"],
  ["upper-case hex", TURN_KEY.toUpperCase()],
  ["65 hex characters", `${TURN_KEY}0`],
  ["63 hex characters", TURN_KEY.slice(1)],
  ["a leading space", ` ${TURN_KEY.slice(1)}`],
  ["64 non-hex characters", "g".repeat(64)],
  ["a number", 42],
  ["null", null],
  ["undefined", undefined],
  ["an object", {}],
  ["an array holding the digest", [TURN_KEY]],
];

const BAD_TIMESTAMPS: readonly (readonly [string, unknown])[] = [
  ["a word", "yesterday"],
  ["no offset", "2031-02-03T04:05:06"],
  ["a date only", "2031-02-03"],
  ["a space separator", "2031-02-03 04:05:06Z"],
  ["a Date object", new Date(0)],
  ["epoch milliseconds", 0],
];

const badTimestamps = (field: string, base: object) =>
  BAD_TIMESTAMPS.map(([label, value]) => [`${field} as ${label}`, { ...base, [field]: value }] as const);

function validationCases(): Case[] {
  const freeReceipt = receipt(FREE);
  const freeIdentity = identity(FREE);
  const freeVerdict = verdictRecord(FREE_VERDICT_KEY, DENY);
  const decision = { approvalId: PENDING_REQUEST.approvalId, decision: { decision: "approve" }, decidedAt: "2031-02-05T00:00:00Z" };
  const application = { approvalId: APPROVED_REQUEST.approvalId, appliedAt: "2031-02-05T00:00:00Z" };
  const settlement = (token: string) => ({ turnKey: TURN_KEY, token, outcome: "complete", result: RESULT });
  const reconciliation = { turnKey: turnKey(STRANGER), resolution: "completed", result: OPERATOR_RESULT, operatorRef: "INC-1" };
  const event = auditEvent();

  return [
    ...cases("getReceipt", DigestSchema, BAD_DIGESTS, (store, _seeded, value) => store.getReceipt(untyped(value))),

    ...cases(
      "putReceiptIfAbsent",
      AdmissionReceiptSchema,
      [
        ...NOT_OBJECTS,
        ["a bad turn key", { ...freeReceipt, turnKey: "nope" }],
        ["an empty scopeId", { ...freeReceipt, scopeId: "" }],
        ["an empty turnId", { ...freeReceipt, turnId: "" }],
        ["an empty policyVersion", { ...freeReceipt, policyVersion: "" }],
        ["a bad moderation digest", { ...freeReceipt, moderationDigest: "x".repeat(64) }],
        ["allowed as a string", { ...freeReceipt, allowed: "true" }],
        ["allowed as a number", { ...freeReceipt, allowed: 1 }],
        ["allowed as null", { ...freeReceipt, allowed: null }],
        ...badTimestamps("decidedAt", freeReceipt),
        ["no allowed", without(freeReceipt, "allowed")],
        ["an empty principal", { ...freeReceipt, principal: "" }],
        ["a numeric principal", { ...freeReceipt, principal: 7 }],
        ["a null principal", { ...freeReceipt, principal: null }],
        ["no turn key", without(freeReceipt, "turnKey")],
        ["an extra key", { ...freeReceipt, trusted: true }],
      ],
      (store, _seeded, value) => store.putReceiptIfAbsent(untyped(value)),
    ),

    ...(["recordSuccessfulRead", "hasSuccessfulRead"] as const).flatMap((method) =>
      cases(
        method,
        ReadEvidenceSchema,
        [
          ...NOT_OBJECTS,
          ["a bad turn key", { ...FREE_EVIDENCE, turnKey: "x" }],
          ["an upper-case evidence digest", { ...FREE_EVIDENCE, evidenceDigest: FREE_EVIDENCE.evidenceDigest.toUpperCase() }],
          ["a numeric evidence digest", { ...FREE_EVIDENCE, evidenceDigest: 7 }],
          ["no evidence digest", without(FREE_EVIDENCE, "evidenceDigest")],
          ["an extra key", { ...FREE_EVIDENCE, ok: true }],
          // A bad value for evidence that exists: a lenient store might answer true.
          ["seeded evidence with an extra key", { ...SEEDED_EVIDENCE, ok: true }],
        ],
        (store, _seeded, value) => store[method](untyped(value)),
      ),
    ),

    ...cases(
      "claimMutation",
      MutationIdentitySchema,
      [
        ...NOT_OBJECTS,
        ["a bad turn key", { ...freeIdentity, turnKey: "t" }],
        ["an empty scopeId", { ...freeIdentity, scopeId: "" }],
        ["a numeric scopeId", { ...freeIdentity, scopeId: 1 }],
        ["an empty toolCallId", { ...freeIdentity, toolCallId: "" }],
        ["an empty toolName", { ...freeIdentity, toolName: "" }],
        ["a bad argsDigest", { ...freeIdentity, argsDigest: "{}" }],
        ["a numeric mutationKey", { ...freeIdentity, mutationKey: 7 }],
        ["no mutationKey", without(freeIdentity, "mutationKey")],
        ["no toolFingerprint", without(freeIdentity, "toolFingerprint")],
        ["an upper-case toolFingerprint", { ...freeIdentity, toolFingerprint: freeIdentity.toolFingerprint.toUpperCase() }],
        ["a null toolFingerprint", { ...freeIdentity, toolFingerprint: null }],
        ["an extra key", { ...freeIdentity, token: "mine" }],
        ["an existing claim's identity with an extra key", { ...identity(TURN), force: true }],
      ],
      (store, _seeded, value) => store.claimMutation(untyped(value)),
    ),

    ...(
      [
        ["a free turn", FREE],
        ["a turn with a pending claim", TURN],
      ] as const
    ).flatMap(([which, of]) =>
      cases(
        "claimMutation",
        ClaimOptionsSchema,
        (
          [
            ["options as null", null],
            ["options as a string", "fast"],
            ["options as an array", []],
            ["requireResolvedScope as a string", { requireResolvedScope: "no" }],
            ["requireResolvedScope as 0", { requireResolvedScope: 0 }],
            ["requireResolvedScope as null", { requireResolvedScope: null }],
            ["an extra option", { requireResolvedScope: false, force: true }],
            ["readEvidence as a digest, not a list", { readEvidence: SEEDED_EVIDENCE.evidenceDigest }],
            ["readEvidence as null", { readEvidence: null }],
            ["readEvidence holding a bad digest", { readEvidence: [SEEDED_EVIDENCE.evidenceDigest, "x"] }],
            ["readEvidence holding an upper-case digest", { readEvidence: [SEEDED_EVIDENCE.evidenceDigest.toUpperCase()] }],
            ["readEvidence holding null", { readEvidence: [null] }],
            ["readEvidence with a hole", { readEvidence: sparse(SEEDED_EVIDENCE.evidenceDigest) }],
            [
              `readEvidence with ${String(MAX_READ_EVIDENCE + 1)} digests`,
              { readEvidence: Array.from({ length: MAX_READ_EVIDENCE + 1 }, () => SEEDED_EVIDENCE.evidenceDigest) },
            ],
          ] as const
        ).map(([label, value]) => [`${label} (${which})`, value] as const),
        (store, _seeded, value) => store.claimMutation(identity(of), untyped(value)),
      ),
    ),

    ...(
      [
        ["free evidence", FREE_EVIDENCE],
        ["seeded evidence", SEEDED_EVIDENCE],
      ] as const
    ).flatMap(([which, evidence]) =>
      cases(
        "recordSuccessfulRead",
        RecordReadOptionsSchema,
        (
          [
            ["options as null", null],
            ["options as a string", "audit"],
            ["an extra option", { audit: event, force: true }],
            ["audit as null", { audit: null }],
            ["audit as a string", { audit: "executed" }],
            ["an audit event with an extra key", { audit: { ...event, trusted: true } }],
            ["an audit event without a time", { audit: without(event, "at") }],
            ["an audit event with a bad turn key", { audit: { ...event, turnKey: "t" } }],
            ["an audit event with an unknown decision", { audit: { ...event, decision: "deleted" } }],
            ["an audit event with a caller-chosen seq", { audit: { ...event, seq: 1 } }],
            ["an audit event with args holding NaN", { audit: { ...event, args: [Number.NaN] } }],
          ] as const
        ).map(([label, value]) => [`${label} (${which})`, value] as const),
        (store, _seeded, value) => store.recordSuccessfulRead(evidence, untyped(value)),
      ),
    ),

    ...cases(
      "settleMutation",
      MutationSettlementSchema,
      [
        ...NOT_OBJECTS,
        ["a bad turn key", { ...settlement("TOKEN"), turnKey: "t" }],
        ["an empty token", { ...settlement("TOKEN"), token: "" }],
        ["a numeric token", { ...settlement("TOKEN"), token: 1 }],
        ["no token", without(settlement("TOKEN"), "token")],
        ["an unknown outcome", { ...settlement("TOKEN"), outcome: "failed" }],
        ["complete without a result", without(settlement("TOKEN"), "result")],
        ["unknown with a result", { ...settlement("TOKEN"), outcome: "unknown" }],
        ["a result with a bad status", { ...settlement("TOKEN"), result: { content: "x", status: "ok" } }],
        ["a result without content", { ...settlement("TOKEN"), result: { status: "success" } }],
        ["non-text content", { ...settlement("TOKEN"), result: { content: ["x"], status: "success" } }],
        ["a result with an extra key", { ...settlement("TOKEN"), result: { ...RESULT, raw: 1 } }],
        ["an extra key", { ...settlement("TOKEN"), force: true }],
        ["an audit event with an extra key", { ...settlement("TOKEN"), audit: { ...event, trusted: true } }],
        ["an audit event with a bad time", { ...settlement("TOKEN"), audit: { ...event, at: "yesterday" } }],
        ["an audit event as null", { ...settlement("TOKEN"), audit: null }],
        ["unknown with a bad audit event", { turnKey: TURN_KEY, token: "TOKEN", outcome: "unknown", audit: { ...event, kind: "write" } }],
      ],
      // The real token of the pending claim: only the malformation may stop the settlement.
      (store, seeded, value) => store.settleMutation(untyped(withSeededToken(value, seeded))),
    ),

    ...cases(
      "releaseMutation",
      MutationReleaseSchema,
      [
        ...NOT_OBJECTS,
        ["a bad turn key", { turnKey: "t", token: "TOKEN" }],
        ["an upper-case turn key", { turnKey: TURN_KEY.toUpperCase(), token: "TOKEN" }],
        ["an empty token", { turnKey: TURN_KEY, token: "" }],
        ["a numeric token", { turnKey: TURN_KEY, token: 1 }],
        ["no token", { turnKey: TURN_KEY }],
        ["no turn key", { token: "TOKEN" }],
        ["a settlement's outcome", { turnKey: TURN_KEY, token: "TOKEN", outcome: "unknown" }],
        ["an extra key", { turnKey: TURN_KEY, token: "TOKEN", force: true }],
      ],
      // The real token of the pending claim: only the malformation may stop the release.
      (store, seeded, value) => store.releaseMutation(untyped(withSeededToken(value, seeded))),
    ),

    ...cases(
      "recordVerdict",
      VerdictRecordSchema,
      [
        ...NOT_OBJECTS,
        ["a bad turn key", { ...freeVerdict, turnKey: "t" }],
        ["an empty toolCallId", { ...freeVerdict, toolCallId: "" }],
        ["an empty toolName", { ...freeVerdict, toolName: "" }],
        ["no toolName", without(freeVerdict, "toolName")],
        ["no toolFingerprint", without(freeVerdict, "toolFingerprint")],
        ["a bad toolFingerprint", { ...freeVerdict, toolFingerprint: "rename_document" }],
        ["an empty guardrail", { ...freeVerdict, guardrail: "" }],
        ["a bad argsDigest", { ...freeVerdict, argsDigest: "x" }],
        ["no verdict", without(freeVerdict, "verdict")],
        ["an unknown action", { ...freeVerdict, verdict: { ...DENY, action: "block" } }],
        ["an unknown outcome", { ...freeVerdict, verdict: { ...DENY, outcome: "timeout" } }],
        ["detections as an object", { ...freeVerdict, verdict: { ...DENY, detections: {} } }],
        ["a detection without a rule", { ...freeVerdict, verdict: { ...DENY, detections: [{ detected: true }] } }],
        ["a detection with a string detected", { ...freeVerdict, verdict: { ...DENY, detections: [{ rule: "r", detected: "yes" }] } }],
        ["a detection holding NaN", { ...freeVerdict, verdict: { ...DENY, detections: [{ rule: "r", detected: true, n: Number.NaN }] } }],
        ["a detection holding a function", { ...freeVerdict, verdict: { ...DENY, detections: [{ rule: "r", detected: true, f: () => 1 }] } }],
        ["a code that is not snake_case", { ...freeVerdict, verdict: { ...DENY, code: "Bad-Code" } }],
        ["a numeric reason", { ...freeVerdict, verdict: { ...DENY, reason: 7 } }],
        ["details as an array", { ...freeVerdict, verdict: { ...DENY, details: [] } }],
        ["details holding undefined", { ...freeVerdict, verdict: { ...DENY, details: { a: undefined } } }],
        ["an extra key in the verdict", { ...freeVerdict, verdict: { ...DENY, trusted: true } }],
        ...badTimestamps("recordedAt", freeVerdict),
        ["an extra key", { ...freeVerdict, trusted: true }],
      ],
      (store, _seeded, value) => store.recordVerdict(untyped(value)),
    ),

    ...cases(
      "getVerdict",
      VerdictKeySchema,
      [
        ...NOT_OBJECTS,
        ["a bad turn key", { ...VERDICT_KEY, turnKey: "t" }],
        ["an empty guardrail", { ...VERDICT_KEY, guardrail: "" }],
        ["an empty toolCallId", { ...VERDICT_KEY, toolCallId: "" }],
        ["an empty toolName", { ...VERDICT_KEY, toolName: "" }],
        ["no toolName (a key without the tool)", without(VERDICT_KEY, "toolName")],
        ["a numeric toolName", { ...VERDICT_KEY, toolName: 1 }],
        ["no toolFingerprint (a key without the tool's fingerprint)", without(VERDICT_KEY, "toolFingerprint")],
        ["an empty toolFingerprint", { ...VERDICT_KEY, toolFingerprint: "" }],
        ["a bad argsDigest", { ...VERDICT_KEY, argsDigest: VERDICT_KEY.argsDigest.toUpperCase() }],
        ["no guardrail", without(VERDICT_KEY, "guardrail")],
        ["an extra key (a whole record)", verdictRecord(VERDICT_KEY, DENY)],
      ],
      (store, _seeded, value) => store.getVerdict(untyped(value)),
    ),

    ...cases("getApproval", DigestSchema, BAD_DIGESTS, (store, _seeded, value) => store.getApproval(untyped(value))),

    ...cases(
      "requestApproval",
      ApprovalRequestSchema,
      [
        ...NOT_OBJECTS,
        ["a bad approvalId", { ...FREE_REQUEST, approvalId: "a" }],
        ["an upper-case approvalId", { ...FREE_REQUEST, approvalId: FREE_REQUEST.approvalId.toUpperCase() }],
        ["a bad turn key", { ...FREE_REQUEST, turnKey: "t" }],
        ["an empty scopeId", { ...FREE_REQUEST, scopeId: "" }],
        ["an empty toolCallId", { ...FREE_REQUEST, toolCallId: "" }],
        ["an empty toolName", { ...FREE_REQUEST, toolName: "" }],
        ["no toolFingerprint", without(FREE_REQUEST, "toolFingerprint")],
        ["a bad toolFingerprint", { ...FREE_REQUEST, toolFingerprint: "x" }],
        ["a bad argsDigest", { ...FREE_REQUEST, argsDigest: "x" }],
        ["arguments as an array", { ...FREE_REQUEST, args: [] }],
        ["arguments as a string", { ...FREE_REQUEST, args: "{}" }],
        ["arguments holding NaN", { ...FREE_REQUEST, args: { n: Number.NaN } }],
        ["arguments holding undefined", { ...FREE_REQUEST, args: { a: undefined } }],
        ["arguments holding a function", { ...FREE_REQUEST, args: { f: () => 1 } }],
        ["no arguments", without(FREE_REQUEST, "args")],
        ["no guardrails", { ...FREE_REQUEST, guardrails: [] }],
        ["an empty guardrail name", { ...FREE_REQUEST, guardrails: ["manager", ""] }],
        ["guardrails as a string", { ...FREE_REQUEST, guardrails: "manager" }],
        ["a numeric reason", { ...FREE_REQUEST, reason: 7 }],
        ...badTimestamps("requestedAt", FREE_REQUEST),
        ["no requestedAt", without(FREE_REQUEST, "requestedAt")],
        ["a caller-chosen status", { ...FREE_REQUEST, status: "approved" }],
        ["a caller-chosen decision", { ...FREE_REQUEST, decision: { decision: "approve" } }],
        ["an existing request with an extra key", { ...PENDING_REQUEST, status: "approved" }],
      ],
      (store, _seeded, value) => store.requestApproval(untyped(value)),
    ),

    ...cases(
      "decideApproval",
      DecideApprovalInputSchema,
      [
        ...NOT_OBJECTS,
        ["a bad approvalId", { ...decision, approvalId: "x" }],
        ["no approvalId", without(decision, "approvalId")],
        ["no decision", without(decision, "decision")],
        ["an unknown decision", { ...decision, decision: { decision: "maybe" } }],
        ["a decision as a string", { ...decision, decision: "approve" }],
        ["a numeric rejection message", { ...decision, decision: { decision: "reject", message: 1 } }],
        ["edit without arguments", { ...decision, decision: { decision: "edit" } }],
        ["edited arguments as an array", { ...decision, decision: { decision: "edit", args: [] } }],
        ["edited arguments holding NaN", { ...decision, decision: { decision: "edit", args: { n: Number.NaN } } }],
        ["an approval with an extra key", { ...decision, decision: { decision: "approve", args: {} } }],
        ["an empty operatorRef", { ...decision, operatorRef: "" }],
        ["a numeric operatorRef", { ...decision, operatorRef: 7 }],
        ...badTimestamps("decidedAt", decision),
        ["no decidedAt", without(decision, "decidedAt")],
        ["a caller-chosen status", { ...decision, status: "rejected" }],
        ["an extra key", { ...decision, force: true }],
      ],
      (store, _seeded, value) => store.decideApproval(untyped(value)),
    ),

    ...cases(
      "applyApproval",
      ApplyApprovalInputSchema,
      [
        ...NOT_OBJECTS,
        ["a bad approvalId", { ...application, approvalId: "x" }],
        ["no approvalId", without(application, "approvalId")],
        ...badTimestamps("appliedAt", application),
        ["no appliedAt", without(application, "appliedAt")],
        ["an extra key", { ...application, operatorRef: "op-1" }],
      ],
      (store, _seeded, value) => store.applyApproval(untyped(value)),
    ),

    ...cases(
      "listApprovals",
      ApprovalQuerySchema,
      [
        ["null", null],
        ["a string", "pending"],
        ["an array", []],
        ["an unknown status", { status: "open" }],
        ["a bad turn key", { turnKey: "t" }],
        ["limit 0", { limit: 0 }],
        ["limit above 10000", { limit: 10_001 }],
        ["a fractional limit", { limit: 1.5 }],
        ["a string limit", { limit: "10" }],
        ["an extra key", { status: "pending", order: "desc" }],
      ],
      (store, _seeded, value) => store.listApprovals(untyped(value)),
    ),

    ...cases(
      "expireApprovals",
      ExpireApprovalsInputSchema,
      [
        ...NOT_OBJECTS,
        ["no olderThan", {}],
        ...BAD_TIMESTAMPS.map(([label, value]) => [`olderThan as ${label}`, { olderThan: value }] as const),
        ["an extra key", { olderThan: "2099-01-01T00:00:00.000Z", status: "pending" }],
      ],
      (store, _seeded, value) => store.expireApprovals(untyped(value)),
    ),

    ...cases(
      "orphanApprovals",
      OrphanApprovalsInputSchema,
      [
        ...NOT_OBJECTS,
        ["no decidedBefore", {}],
        ["olderThan instead of decidedBefore", { olderThan: "2099-01-01T00:00:00.000Z" }],
        ...BAD_TIMESTAMPS.map(([label, value]) => [`decidedBefore as ${label}`, { decidedBefore: value }] as const),
        ["an extra key", { decidedBefore: "2099-01-01T00:00:00.000Z", status: "approved" }],
      ],
      (store, _seeded, value) => store.orphanApprovals(untyped(value)),
    ),

    ...cases(
      "appendAudit",
      AuditEventSchema,
      [
        ...NOT_OBJECTS,
        ...badTimestamps("at", event),
        ["no time", without(event, "at")],
        ["an unknown decision", { ...event, decision: "deleted" }],
        ["an unknown kind", { ...event, kind: "write" }],
        ["a bad turn key", { ...event, turnKey: "t" }],
        ["no scopeId", without(event, "scopeId")],
        ["an empty scopeId", { ...event, scopeId: "" }],
        ["an empty toolCallId", { ...event, toolCallId: "" }],
        ["a bad argsDigest", { ...event, argsDigest: "x" }],
        ["a bad mutationKey", { ...event, mutationKey: "x" }],
        ["a bad toolFingerprint", { ...event, toolFingerprint: "x" }],
        ["an empty operatorRef", { ...event, operatorRef: "" }],
        ["a bad approvalId", { ...event, decision: "approval", approvalId: "x" }],
        ["a caller-chosen seq", { ...event, seq: 1 }],
        ["args holding undefined", { ...event, args: { a: undefined } }],
        ["args holding NaN", { ...event, args: [Number.NaN] }],
        ["args holding a function", { ...event, args: { fn: () => 1 } }],
        ["a non-text result", { ...event, result: { ok: true } }],
        ["an extra key", { ...event, trusted: true }],
      ],
      (store, _seeded, value) => store.appendAudit(untyped(value)),
    ),

    ...cases(
      "readAudit",
      AuditQuerySchema,
      [
        ["null", null],
        ["a string", "all"],
        ["an array", []],
        ["limit 0", { limit: 0 }],
        ["limit above 10000", { limit: 10_001 }],
        ["a fractional limit", { limit: 1.5 }],
        ["a string limit", { limit: "10" }],
        ["a negative afterSeq", { afterSeq: -1 }],
        ["a string afterSeq", { afterSeq: "1" }],
        ["a bad turn key", { turnKey: "t" }],
        ["an upper-case turn key", { turnKey: TURN_KEY.toUpperCase() }],
        ["a null turn key", { turnKey: null }],
        ["an empty scopeId", { scopeId: "" }],
        ["a numeric scopeId", { scopeId: 1 }],
        ["scopeId as an array", { scopeId: ["doc-1"] }],
        ["a bad approval id", { approvalId: "a" }],
        ["an upper-case approval id", { approvalId: "A".repeat(64) }],
        ["a null approval id", { approvalId: null }],
        ...BAD_TIMESTAMPS.map(([label, value]) => [`since as ${label}`, { since: value }] as const),
        ["an extra key", { limit: 1, order: "desc" }],
      ],
      (store, _seeded, value) => store.readAudit(untyped(value)),
    ),

    ...cases(
      "getAuditCursor",
      AuditSinkNameSchema,
      [
        ["an empty name", ""],
        ["a number", 1],
        ["null", null],
        ["undefined", undefined],
        ["an object", { sink: FREE_SINK }],
        ["an array", [FREE_SINK]],
      ],
      (store, _seeded, value) => store.getAuditCursor(untyped(value)),
    ),

    ...(
      [
        ["a fresh sink", FREE_SINK],
        ["a sink at 1", SEEDED_SINK],
      ] as const
    ).flatMap(([which, sink]) =>
      cases(
        "advanceAuditCursor",
        AdvanceAuditCursorInputSchema,
        (
          [
            ...NOT_OBJECTS,
            ["a negative seq", { sink, seq: -1 }],
            ["a fractional seq", { sink, seq: 2.5 }],
            ["a string seq", { sink, seq: "2" }],
            ["NaN", { sink, seq: Number.NaN }],
            ["Infinity", { sink, seq: Number.POSITIVE_INFINITY }],
            ["no seq", { sink }],
            ["no sink", { seq: 2 }],
            ["an empty sink", { sink: "", seq: 2 }],
            ["a numeric sink", { sink: 1, seq: 2 }],
            ["an extra key", { sink, seq: 2, force: true }],
          ] as const
        ).map(([label, value]) => [`${label} (${which})`, value] as const),
        (store, _seeded, value) => store.advanceAuditCursor(untyped(value)),
      ),
    ),

    ...cases(
      "reconcileMutation",
      ReconciliationSchema,
      [
        ...NOT_OBJECTS,
        ["no operatorRef", without(reconciliation, "operatorRef")],
        ["an empty operatorRef", { ...reconciliation, operatorRef: "" }],
        ["a numeric operatorRef", { ...reconciliation, operatorRef: 7 }],
        ["completed without a result", without(reconciliation, "result")],
        ["no-effect with a result", { ...reconciliation, resolution: "no-effect" }],
        ["no-effect without operatorRef", { turnKey: turnKey(STRANGER), resolution: "no-effect" }],
        ["an unknown resolution", { ...reconciliation, resolution: "done" }],
        ["a bad turn key", { ...reconciliation, turnKey: "t" }],
        ["a result with a bad status", { ...reconciliation, result: { content: "x", status: "ok" } }],
        ["a result with an extra key", { ...reconciliation, result: { ...OPERATOR_RESULT, raw: 1 } }],
        ["an extra key", { ...reconciliation, force: true }],
      ],
      (store, _seeded, value) => store.reconcileMutation(untyped(value)),
    ),

    ...cases(
      "prune",
      PruneOptionsSchema,
      [
        ...NOT_OBJECTS,
        ["no olderThan", {}],
        ...BAD_TIMESTAMPS.map(([label, value]) => [`olderThan as ${label}`, { olderThan: value }] as const),
        ["an extra key", { olderThan: "2099-01-01T00:00:00.000Z", dryRun: false }],
      ],
      (store, _seeded, value) => store.prune(untyped(value)),
    ),
  ];
}

/** What a test of `method` needs beyond the core: its part, or `hasSuccessfulRead`. */
function needOf(method: string): ConformanceNeed[] {
  if (method === "hasSuccessfulRead") return ["hasSuccessfulRead"];
  const part = STORE_PART_NAMES.find((name) => (STORE_PARTS[name] as readonly string[]).includes(method));
  return part === undefined ? [] : [part];
}

const hasSuccessfulRead = (store: GuardrailStore): boolean => typeof (store as Partial<GuardrailStore>).hasSuccessfulRead === "function";

export function validationSuite(test: StoreTest): void {
  for (const entry of validationCases()) {
    test(`${entry.method} rejects ${entry.label}, changing nothing`, async ({ store, clock }) => {
      expect(entry.schema.safeParse(entry.value).success, "the case itself: the contract's schema rejects it").toBe(false);
      const seeded = await seed(store, clock);
      const before = await observe(store);
      await expectContractError(() => entry.call(store, seeded, entry.value), `${entry.method} with ${entry.label}`);
      expect(await observe(store), "await observe(store) toEqual").toEqual(before);
      // The free turn's slot is still free, and the pending claim still settles with its token.
      await acquire(store, identity(FREE));
      expect(await store.settleMutation({ turnKey: TURN_KEY, token: seeded.token, outcome: "complete", result: RESULT }), "await store.settleMutation({ turnKey: TURN_KEY, token: seeded.token, outcome: \"complete\", result:...").toBe(true);
    }, needOf(entry.method));
  }
}
