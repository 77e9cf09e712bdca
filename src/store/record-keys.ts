/**
 * Where `KeyValueGuardrailStore` keeps each kind of record: one description, as data, of every
 * collection and the key each record is stored under. The conformance kit's corruption suite
 * locates records through it, an operator reads a backend's contents with it, and a test that
 * writes raw records uses it instead of guessing. Built from the base's own collection names
 * (records.ts). A record kind the base reads (its `RECORD_KINDS`) without a line here, or a line
 * for none, does not compile; test/unit/record-keys.test.ts fails when a collection it writes has
 * no line here.
 */
import { KEY_VALUE_COLLECTIONS as C, type KeyValueCollection, type RECORD_KINDS } from "./records.js";

/** Where the base keeps one kind of record. */
export interface KeyValueRecordKey {
  /** The collection the records of this kind are in. */
  readonly collection: KeyValueCollection;
  /** The key a record is stored under, in words: what it is made of, and the exported function that makes it, if any. */
  readonly key: string;
  /** An example key, shaped as the base makes it (digests shortened to `<turnKey>` and the like). */
  readonly example: string;
}

/**
 * A kind of record the base keeps, by the name the base gives it: a key of
 * {@link KEY_VALUE_RECORD_KEYS}, which has exactly one line per record kind the base reads.
 */
export type KeyValueRecordName = keyof typeof KEY_VALUE_RECORD_KEYS;

/**
 * Every kind of record the base keeps: its collection and its key. Every collection of
 * `KEY_VALUE_COLLECTIONS` holds exactly one kind. A record read under a key is checked against
 * that key (a record naming another key is a `StoreContractError`), so a raw copy of one record
 * under another key is corruption, never a second record.
 */
export const KEY_VALUE_RECORD_KEYS = {
  receipt: { collection: C.receipts, key: "the turn key", example: "<turnKey>" },
  reads: { collection: C.reads, key: "the turn key: one record holds every evidence digest recorded for the turn", example: "<turnKey>" },
  claim: { collection: C.claims, key: "the turn key", example: "<turnKey>" },
  unknownScope: { collection: C.unknownScopes, key: "the scope id, as given (any string)", example: "doc-1" },
  verdict: {
    collection: C.verdicts,
    key: "`verdictStorageKey(key)`: JSON of the VerdictKey's six fields in contract order (turnKey, toolCallId, toolName, toolFingerprint, guardrail, argsDigest)",
    example: '["<turnKey>","call-1","rename_document","<toolFingerprint>","schema","<argsDigest>"]',
  },
  approval: { collection: C.approvals, key: "the approval id", example: "<approvalId>" },
  audit: { collection: C.audit, key: "`sequenceKey(seq)`: the event's seq zero-padded to 16 digits", example: "0000000000000042" },
  pendingAudit: {
    collection: C.auditPending,
    key: "`pendingAuditKey(ms, count, writer)`: the appending store object's clock (`instantKey`: offset by 8.64e15, 17 digits), its append count (16 digits) and its random writer id, joined by `.`",
    example: "08641924553906000.0000000000000007.<writerId>",
  },
  turnAudit: {
    collection: C.turnAudit,
    key: "`turnAuditKey(turnKey, key)`: the event's turn key, `.`, the key it was appended under in `auditPending` (for an event numbered before layout 3, its `sequenceKey(seq)`); the entry holds the event's `seq` once `readAudit` numbered it",
    example: "<turnKey>.08641924553906000.0000000000000007.<writerId>",
  },
  cursor: { collection: C.cursors, key: "the sink name, as given (any string)", example: "siem" },
  turn: { collection: C.turns, key: "the turn key", example: "<turnKey>" },
  turnRequest: { collection: C.turnRequests, key: "the request key (`TurnStart.requestKey`)", example: "<requestKey>" },
  liveTurn: { collection: C.liveTurns, key: "the turn key of a `running` or `awaiting_approval` turn", example: "<turnKey>" },
  effect: { collection: C.effects, key: "the effect key", example: "<effectKey>" },
  effectGroup: { collection: C.effectGroups, key: "`effectGroupKey(turnKey, toolName)`: JSON of `[turnKey, toolName]`", example: '["<turnKey>","send_mail"]' },
  counter: {
    collection: C.counters,
    key: "the counter's name: `audit` (written only by `readAudit`, which numbers the pending events); a store written before layout 3 also holds `approval`, and one written before layout 2 `claim` and `effect`, read by nothing",
    example: "audit",
  },
  unresolvedClaim: { collection: C.unresolvedClaims, key: "the turn key of a `pending` or `unknown` claim", example: "<turnKey>" },
  unresolvedEffect: { collection: C.unresolvedEffects, key: "the effect key of a `pending` or `unknown` side effect", example: "<effectKey>" },
  pendingApproval: { collection: C.pendingApprovals, key: "the approval id of a `pending` request", example: "<approvalId>" },
  decidedApproval: { collection: C.decidedApprovals, key: "the approval id of an `approved` or `edited` request not applied", example: "<approvalId>" },
  settledClaim: {
    collection: C.settledClaims,
    key: "`timedKey(settledAtMs, turnKey)`: the settlement time (`instantKey`: offset by 8.64e15, 17 digits), `.`, the turn key of a `complete` claim",
    example: "08641924553906000.<turnKey>",
  },
  settledEffect: {
    collection: C.settledEffects,
    key: "`timedKey(settledAtMs, effectKey)`: as `settledClaim`, for a `complete` side effect",
    example: "08641924553906000.<effectKey>",
  },
  finishedTurn: {
    collection: C.finishedTurns,
    key: "`timedKey(updatedAt, turnKey)`: the last update of a `completed`, `refused` or `failed` turn, `.`, its turn key",
    example: "08641924553906000.<turnKey>",
  },
  approvalByTime: {
    collection: C.approvalsByTime,
    key: "`approvalTimeKey(entry)`: the request time (`instantKey`), its request number (16 digits) and its approval id, joined by `.`",
    example: "08641924553906000.0000000000000003.<approvalId>",
  },
  turnApproval: { collection: C.turnApprovals, key: "`turnApprovalKey(turnKey, approvalId)`: the request's turn key, `.`, its approval id", example: "<turnKey>.<approvalId>" },
  layout: { collection: C.meta, key: "`layout`: the layout version the records are kept in (`KEY_VALUE_LAYOUT`)", example: "layout" },
  // Exactly the base's record kinds: a missing line or an extra one does not compile.
} as const satisfies Record<keyof typeof RECORD_KINDS, KeyValueRecordKey>;
