/**
 * What `KeyValueGuardrailStore` keeps under which key: its collections, the shape of each record,
 * and the key each record must be read by. An adapter stores these opaquely; they are documented
 * so an operator can read a backend's contents, not so an adapter depends on them.
 */
import { z } from "zod";
import {
  AdmissionReceiptSchema,
  ApprovalRecordSchema,
  AuditEventSchema,
  DigestSchema,
  EffectIdentitySchema,
  MutationIdentitySchema,
  MutationResultSchema,
  StoredAuditEventSchema,
  TurnRecordSchema,
  VerdictRecordSchema,
  type AdmissionReceipt,
  type ApprovalRecord,
  type AuditEvent,
  type EffectIdentity,
  type MutationIdentity,
  type MutationResult,
  type StoredAuditEvent,
  type TurnRecord,
  type VerdictKey,
  type VerdictRecord,
} from "../contracts/index.js";

/** Every collection the base writes, by role. An adapter may create one table, hash or prefix per name. */
export const KEY_VALUE_COLLECTIONS = {
  /** turn key -> {@link AdmissionReceipt}. */
  receipts: "receipts",
  /** turn key -> {@link StoredReads}: the turn's read evidence. */
  reads: "reads",
  /** turn key -> {@link StoredClaim}: the turn's mutation slot. */
  claims: "claims",
  /** scope id -> {@link UnknownScopeEntry}: the scope's turns with an `unknown` claim. */
  unknownScopes: "unknownScopes",
  /** {@link verdictStorageKey} -> {@link VerdictRecord}. */
  verdicts: "verdicts",
  /** approval id -> {@link StoredApproval}. */
  approvals: "approvals",
  /** zero-padded audit sequence number -> {@link StoredAuditEvent}: the sequenced trail, all `readAudit` answers from. */
  audit: "audit",
  /**
   * {@link pendingAuditKey} -> {@link PendingAuditEvent}: events appended and not yet numbered. The
   * step that appends an event writes it here, under a key no other step writes; the next
   * `readAudit` numbers them from `counters/audit` and moves them into `audit` (layout 3).
   */
  auditPending: "auditPending",
  /**
   * {@link turnAuditKey} -> {@link TurnAuditEntry}: every audit event of a turn, for
   * `readAudit({ turnKey })`, which reads that turn's entries and gets each event by its `seq`
   * instead of walking the trail. Written in the step that appends the event (a key only that
   * step writes); `readAudit` records the `seq` it numbers the event with (layout 3).
   */
  turnAudit: "turnAudit",
  /** sink name -> {@link StoredCursor}. */
  cursors: "cursors",
  /** turn key -> {@link TurnRecord}. */
  turns: "turns",
  /** request key -> {@link TurnRequestEntry}: the turn that holds the request, written in the turn's first step. */
  turnRequests: "turnRequests",
  /** turn key -> {@link LiveTurnEntry}: the index of turns `running` or `awaiting_approval`, for `listTurns`. */
  liveTurns: "liveTurns",
  /** effect key -> {@link StoredEffect}: one side effect's claim. */
  effects: "effects",
  /** {@link effectGroupKey} -> {@link EffectGroup}: a turn's effect claims of one tool, for `maxPerTurn`. */
  effectGroups: "effectGroups",
  /**
   * counter name ({@link KeyValueCounter}: `audit`) -> the last number it issued (an integer, 0
   * before any), written only by the step that numbers pending events (`readAudit`). A store
   * written before layout 3 also holds `approval`, and one before layout 2 `claim` and `effect`:
   * left as they were, read and written by nothing.
   */
  counters: "counters",
  /** turn key -> {@link UnresolvedClaimEntry}: the index of `pending` and `unknown` claims, for `listUnresolved`. */
  unresolvedClaims: "unresolvedClaims",
  /** effect key -> {@link UnresolvedEffectEntry}: the index of `pending` and `unknown` side effects, for `listUnresolvedEffects`. */
  unresolvedEffects: "unresolvedEffects",
  /** approval id -> {@link ApprovalIndexEntry}: the index of `pending` requests, for `expireApprovals`, `listTurns`' `decided`, `listApprovals` and `prune`. */
  pendingApprovals: "pendingApprovals",
  /** approval id -> {@link ApprovalIndexEntry}: the index of `approved` and `edited` requests not applied, for `orphanApprovals` and `listApprovals`. */
  decidedApprovals: "decidedApprovals",
  /** {@link timedKey}(`settledAtMs`, turn key) -> {@link TimedEntry}: the index of `complete` claims by settlement time, for `prune`. */
  settledClaims: "settledClaims",
  /** {@link timedKey}(`settledAtMs`, effect key) -> {@link TimedEntry}: the index of `complete` side effects by settlement time, for `prune`. */
  settledEffects: "settledEffects",
  /** {@link timedKey}(`updatedAt`, turn key) -> {@link TimedEntry}: the index of finished turns (`completed`, `refused`, `failed`) by last update, for `prune`. */
  finishedTurns: "finishedTurns",
  /** {@link approvalTimeKey} -> {@link ApprovalTimeEntry}: every request in `listApprovals`' order (request time, then request number). */
  approvalsByTime: "approvalsByTime",
  /** {@link turnApprovalKey} -> {@link TurnApprovalEntry}: every request by its turn, for `listApprovals({ turnKey })` and `prune`. */
  turnApprovals: "turnApprovals",
  /** `layout` -> the layout version the records are kept in ({@link KEY_VALUE_LAYOUT}); absent in a store written before layout 2. */
  meta: "meta",
} as const;

/**
 * The layout this base writes. 1 (no `meta` record): claims and side effects numbered by the
 * shared `claim` and `effect` counters, unresolved ones and approval requests by status found by a
 * scan. 2: no shared counter on a claim's step; unresolved claims and effects, pending requests and
 * decided ones not applied kept in their own indexes. 3: an audited step writes its event to
 * `auditPending` and no counter, `readAudit` numbers the pending events (one writer of
 * `counters/audit`); an approval request is numbered by its store object, not `counters/approval`;
 * `prune` and `listApprovals` read time and turn indexes; `readAudit({ turnKey })` reads the
 * turn's audit index (`turnAudit`). A store at layout 1 or 2 is migrated by the first step of a store object that
 * finds it (see `KeyValueGuardrailStore`).
 */
export const KEY_VALUE_LAYOUT = 3;

/** The key of the layout version in {@link KEY_VALUE_COLLECTIONS}' `meta`. */
export const LAYOUT_KEY = "layout";

/** One of {@link KEY_VALUE_COLLECTIONS}' values. */
export type KeyValueCollection = (typeof KEY_VALUE_COLLECTIONS)[keyof typeof KEY_VALUE_COLLECTIONS];

/**
 * The counter the base keeps in `counters`: `audit`, written only by the step that numbers
 * pending audit events (`readAudit`), never by a step of a turn. (The `approval`, `claim` and
 * `effect` counters of older layouts are read and written by nothing: no name here.)
 */
export type KeyValueCounter = "audit";

/** Digits of a zero-padded sequence number: every safe integer fits, so key order is number order. */
const SEQ_DIGITS = 16;

/** A sequence number as a key: zero-padded, so ascending key order is ascending number order. */
export function sequenceKey(seq: number): string {
  return String(seq).padStart(SEQ_DIGITS, "0");
}

/** Milliseconds added to an epoch millisecond so every valid `Date` (±8.64e15) is non-negative. */
const INSTANT_OFFSET = 8_640_000_000_000_000;

/** An epoch millisecond as a key: offset and zero-padded to 17 digits, so key order is time order for every valid `Date`. */
export function instantKey(ms: number): string {
  // Floored: a fraction would break the fixed width (an integer cut-off compares the same either way).
  return String(Math.floor(ms) + INSTANT_OFFSET).padStart(17, "0");
}

/** An index entry's key ordered by a time: {@link instantKey} of `atMs`, `.`, the record's key. */
export function timedKey(atMs: number, key: string): string {
  return `${instantKey(atMs)}.${key}`;
}

/** A request's key in `approvalsByTime`: its request time, its request number, its id; key order is `listApprovals`' order. */
export function approvalTimeKey(entry: ApprovalTimeEntry): string {
  return `${instantKey(entry.requestedAtMs)}.${sequenceKey(entry.seq)}.${entry.approvalId}`;
}

/** A request's key in `turnApprovals`: its turn key, `.`, its id (both digests: a turn's requests are the keys after `<turnKey>.`). */
export function turnApprovalKey(turnKey: string, approvalId: string): string {
  return `${turnKey}.${approvalId}`;
}

/**
 * A pending audit event's key: the appending store object's clock (never stepping back within the
 * object), its append count, and its writer id (random per store object), so no two steps write
 * one key and one object's events sort in its append order.
 */
export function pendingAuditKey(ms: number, count: number, writer: string): string {
  return `${instantKey(ms)}.${sequenceKey(count)}.${writer}`;
}

/**
 * An audit event's key in `turnAudit`: its turn key, `.`, the key it was appended under
 * ({@link pendingAuditKey}; for an event numbered before layout 3, its {@link sequenceKey}). A turn
 * key is a digest, so a turn's entries are exactly the keys after `<turnKey>.`.
 */
export function turnAuditKey(turnKey: string, key: string): string {
  return `${turnKey}.${key}`;
}

/**
 * A verdict's key: JSON of its six key fields, in order. JSON escapes a lone surrogate rather than
 * replacing it, so two different keys never encode alike.
 */
export function verdictStorageKey(key: VerdictKey): string {
  return JSON.stringify([key.turnKey, key.toolCallId, key.toolName, key.toolFingerprint, key.guardrail, key.argsDigest]);
}

/**
 * The key of a turn's effect claims of one tool: JSON of `[turnKey, toolName]` (a tool name may
 * hold any character; JSON keeps two different pairs apart).
 */
export function effectGroupKey(turnKey: string, toolName: string): string {
  return JSON.stringify([turnKey, toolName]);
}

const EpochMsSchema = z.number().refine(Number.isFinite, "expected a finite epoch millisecond");

/** A turn's mutation claim as the base stores it. */
export interface StoredClaim {
  /** The identity it was claimed under. */
  readonly identity: MutationIdentity;
  /** The claim token `claimMutation` issued: a settlement or release needs it. */
  readonly token: string;
  /**
   * The tie-break of `listUnresolved` among claims made in the same millisecond: the order the
   * store object that made it made its claims in (between store objects, unspecified; a store
   * written before layout 2 holds the shared `claim` counter's number).
   */
  readonly seq: number;
  /** Epoch milliseconds of the store's clock when claimed. */
  readonly claimedAtMs: number;
  /** `pruned`: a tombstone; the turn's slot is used and its result is gone. */
  readonly state: "pending" | "complete" | "unknown" | "pruned";
  /** Present exactly when `complete`. */
  readonly result?: MutationResult;
  /** Epoch milliseconds when settled or reconciled; absent while pending. */
  readonly settledAtMs?: number;
}
/** Parses a {@link StoredClaim}. */
export const StoredClaimSchema: z.ZodType<StoredClaim> = z
  .strictObject({
    identity: MutationIdentitySchema,
    token: z.string().min(1),
    seq: z.int().min(1),
    claimedAtMs: EpochMsSchema,
    state: z.enum(["pending", "complete", "unknown", "pruned"]),
    result: MutationResultSchema.optional(),
    settledAtMs: EpochMsSchema.optional(),
  })
  .refine((claim) => (claim.state === "complete") === (claim.result !== undefined), {
    error: "a complete claim has a result, and no other does",
    path: ["result"],
  });

/** A side effect's claim as the base stores it: a {@link StoredClaim} for one effect key. */
export interface StoredEffect {
  /** The identity it was claimed under. */
  readonly identity: EffectIdentity;
  /** The claim token `claimEffect` issued: a settlement or release needs it. */
  readonly token: string;
  /** The tie-break of `listUnresolvedEffects`, as {@link StoredClaim.seq} is `listUnresolved`'s. */
  readonly seq: number;
  /** Epoch milliseconds of the store's clock when claimed. */
  readonly claimedAtMs: number;
  /** `pruned`: a tombstone; the effect happened and its result is gone. */
  readonly state: "pending" | "complete" | "unknown" | "pruned";
  /** Present exactly when `complete`. */
  readonly result?: MutationResult;
  /** Epoch milliseconds when settled or reconciled; absent while pending. */
  readonly settledAtMs?: number;
}
/** Parses a {@link StoredEffect}. */
export const StoredEffectSchema: z.ZodType<StoredEffect> = z
  .strictObject({
    identity: EffectIdentitySchema,
    token: z.string().min(1),
    seq: z.int().min(1),
    claimedAtMs: EpochMsSchema,
    state: z.enum(["pending", "complete", "unknown", "pruned"]),
    result: MutationResultSchema.optional(),
    settledAtMs: EpochMsSchema.optional(),
  })
  .refine((claim) => (claim.state === "complete") === (claim.result !== undefined), {
    error: "a complete effect has a result, and no other does",
    path: ["result"],
  });

/**
 * A turn's effect claims of one tool, kept beside the claims so `maxPerTurn` is one get, not a
 * scan: every claim of the (turn, tool) writes this one record, so two claims racing for the
 * turn's last slot conflict on it even in storage with optimistic concurrency.
 */
export interface EffectGroup {
  /** The turn. */
  readonly turnKey: string;
  /** The tool. */
  readonly toolName: string;
  /** Effect keys claimed and not released or reconciled `no-effect` (at least one: an empty group is deleted). */
  readonly effectKeys: readonly string[];
}
/** Parses an {@link EffectGroup}. */
export const EffectGroupSchema: z.ZodType<EffectGroup> = z.strictObject({
  turnKey: DigestSchema,
  toolName: z.string().min(1),
  effectKeys: z.array(DigestSchema).min(1),
});

/** A turn's read evidence. */
export interface StoredReads {
  /** The turn. */
  readonly turnKey: string;
  /** Every evidence digest recorded for the turn, each once. */
  readonly digests: readonly string[];
}
/** Parses {@link StoredReads}. */
export const StoredReadsSchema: z.ZodType<StoredReads> = z.strictObject({ turnKey: DigestSchema, digests: z.array(DigestSchema) });

/** The turns of a scope whose claim is `unknown`: they block the scope's other claims. */
export interface UnknownScopeEntry {
  /** The scope. */
  readonly scopeId: string;
  /** Its turns whose claim is `unknown` (at least one: an empty entry is deleted). */
  readonly turnKeys: readonly string[];
}
/** Parses an {@link UnknownScopeEntry}. */
export const UnknownScopeEntrySchema: z.ZodType<UnknownScopeEntry> = z.strictObject({
  scopeId: z.string().min(1),
  turnKeys: z.array(DigestSchema).min(1),
});

/** Which turn holds a request key: one turn per request (`beginTurn`). */
export interface TurnRequestEntry {
  /** The request key (`TurnStart.requestKey`). */
  readonly requestKey: string;
  /** The turn key that holds it. */
  readonly turnKey: string;
}
/** Parses a {@link TurnRequestEntry}. */
export const TurnRequestEntrySchema: z.ZodType<TurnRequestEntry> = z.strictObject({ requestKey: DigestSchema, turnKey: DigestSchema });
/** A live turn's entry in the `liveTurns` index: its key and state (the record itself is in `turns`). */
export interface LiveTurnEntry {
  /** The turn. */
  readonly turnKey: string;
  /** Its state while it is live. */
  readonly state: "running" | "awaiting_approval";
}
/** Parses a {@link LiveTurnEntry}. */
export const LiveTurnEntrySchema: z.ZodType<LiveTurnEntry> = z.strictObject({ turnKey: DigestSchema, state: z.enum(["running", "awaiting_approval"]) });

/** An approval request as stored: the record and its request number (the tie-break of `listApprovals`). */
export interface StoredApproval {
  /**
   * Its request number: the tie-break of `listApprovals` among requests made in the same
   * millisecond, in the order the store object that stored it stored its requests (between store
   * objects, unspecified; a store written before layout 3 holds the shared `approval` counter's).
   */
  readonly seq: number;
  /** The request as it stands. */
  readonly record: ApprovalRecord;
}
/** Parses a {@link StoredApproval}. */
export const StoredApprovalSchema: z.ZodType<StoredApproval> = z.strictObject({ seq: z.int().min(1), record: ApprovalRecordSchema });

/** An audit event appended and not yet numbered: `readAudit` moves it into `audit` with its `seq`. */
export interface PendingAuditEvent {
  /** Its key in `auditPending` ({@link pendingAuditKey}). */
  readonly key: string;
  /** The event as appended. */
  readonly event: AuditEvent;
}
/** Parses a {@link PendingAuditEvent}. */
export const PendingAuditEventSchema: z.ZodType<PendingAuditEvent> = z.strictObject({ key: z.string().min(1), event: AuditEventSchema });

/** An audit event's entry in `turnAudit`: the index of a turn's events, for `readAudit({ turnKey })`. */
export interface TurnAuditEntry {
  /** The event's turn. */
  readonly turnKey: string;
  /** The key the event was appended under in `auditPending` (for an event numbered before layout 3, its {@link sequenceKey}). */
  readonly key: string;
  /** The event's `seq`: its key in `audit`. Absent while the event waits in `auditPending`. */
  readonly seq?: number;
}
/** Parses a {@link TurnAuditEntry}. */
export const TurnAuditEntrySchema: z.ZodType<TurnAuditEntry> = z.strictObject({ turnKey: DigestSchema, key: z.string().min(1), seq: z.int().min(1).optional() });

/** A sink's audit cursor. */
export interface StoredCursor {
  /** The sink's name. */
  readonly sink: string;
  /** The sequence number delivered up to. */
  readonly seq: number;
}
/** Parses a {@link StoredCursor}. */
export const StoredCursorSchema: z.ZodType<StoredCursor> = z.strictObject({ sink: z.string().min(1), seq: z.int().min(0) });

/** A claim's entry in the `unresolvedClaims` index: kept exactly while the turn's claim is `pending` or `unknown`. */
export interface UnresolvedClaimEntry {
  /** The turn whose claim it is. */
  readonly turnKey: string;
}
/** Parses an {@link UnresolvedClaimEntry}. */
export const UnresolvedClaimEntrySchema: z.ZodType<UnresolvedClaimEntry> = z.strictObject({ turnKey: DigestSchema });

/** A side effect's entry in the `unresolvedEffects` index: kept exactly while its claim is `pending` or `unknown`. */
export interface UnresolvedEffectEntry {
  /** The effect whose claim it is. */
  readonly effectKey: string;
}
/** Parses an {@link UnresolvedEffectEntry}. */
export const UnresolvedEffectEntrySchema: z.ZodType<UnresolvedEffectEntry> = z.strictObject({ effectKey: DigestSchema });

/** An approval request's entry in `pendingApprovals` or `decidedApprovals`: kept exactly while its status is the index's. */
export interface ApprovalIndexEntry {
  /** The request. */
  readonly approvalId: string;
}
/** Parses an {@link ApprovalIndexEntry}. */
export const ApprovalIndexEntrySchema: z.ZodType<ApprovalIndexEntry> = z.strictObject({ approvalId: DigestSchema });

/** An entry of a time index (`settledClaims`, `settledEffects`, `finishedTurns`): the record's key and the time it is ordered by. */
export interface TimedEntry {
  /** The record's key: a turn key or an effect key. */
  readonly key: string;
  /** The time in epoch milliseconds (a settlement, a turn's last update). */
  readonly atMs: number;
}
/** Parses a {@link TimedEntry}. */
export const TimedEntrySchema: z.ZodType<TimedEntry> = z.strictObject({ key: DigestSchema, atMs: EpochMsSchema });

/** A request's entry in `approvalsByTime`. */
export interface ApprovalTimeEntry {
  /** The request. */
  readonly approvalId: string;
  /** Its `requestedAt` in epoch milliseconds. */
  readonly requestedAtMs: number;
  /** Its request number ({@link StoredApproval.seq}). */
  readonly seq: number;
}
/** Parses an {@link ApprovalTimeEntry}. */
export const ApprovalTimeEntrySchema: z.ZodType<ApprovalTimeEntry> = z.strictObject({ approvalId: DigestSchema, requestedAtMs: z.int(), seq: z.int().min(1) });

/** A request's entry in `turnApprovals`. */
export interface TurnApprovalEntry {
  /** The request's turn. */
  readonly turnKey: string;
  /** The request. */
  readonly approvalId: string;
}
/** Parses a {@link TurnApprovalEntry}. */
export const TurnApprovalEntrySchema: z.ZodType<TurnApprovalEntry> = z.strictObject({ turnKey: DigestSchema, approvalId: DigestSchema });

/** Parses a counter's value. */
export const StoredCounterSchema: z.ZodType<number> = z.int().min(0);

/**
 * How each collection's records are parsed and which key each must be read by. A record that
 * parses but names another key than the one it was read by is corrupt, as is one that does not
 * parse: the base fails closed with a `StoreContractError`.
 */
export interface RecordKind<T> {
  readonly collection: KeyValueCollection;
  /** Named in errors. */
  readonly what: string;
  readonly schema: z.ZodType<T>;
  /** The key the record must be stored under. */
  readonly keyOf: (record: T, key: string) => string;
}

const kind = <T>(collection: KeyValueCollection, what: string, schema: z.ZodType<T>, keyOf: (record: T, key: string) => string): RecordKind<T> => ({
  collection,
  what,
  schema,
  keyOf,
});

/** Every record kind the base reads. */
export const RECORD_KINDS = {
  receipt: kind<AdmissionReceipt>(KEY_VALUE_COLLECTIONS.receipts, "admission receipt", AdmissionReceiptSchema, (record) => record.turnKey),
  reads: kind<StoredReads>(KEY_VALUE_COLLECTIONS.reads, "read evidence", StoredReadsSchema, (record) => record.turnKey),
  claim: kind<StoredClaim>(KEY_VALUE_COLLECTIONS.claims, "mutation claim", StoredClaimSchema, (record) => record.identity.turnKey),
  unknownScope: kind<UnknownScopeEntry>(KEY_VALUE_COLLECTIONS.unknownScopes, "unknown-claims index entry", UnknownScopeEntrySchema, (record) => record.scopeId),
  verdict: kind<VerdictRecord>(KEY_VALUE_COLLECTIONS.verdicts, "verdict record", VerdictRecordSchema, verdictStorageKey),
  approval: kind<StoredApproval>(KEY_VALUE_COLLECTIONS.approvals, "approval request", StoredApprovalSchema, (stored) => stored.record.approvalId),
  audit: kind<StoredAuditEvent>(KEY_VALUE_COLLECTIONS.audit, "audit event", StoredAuditEventSchema, (event) => sequenceKey(event.seq)),
  pendingAudit: kind<PendingAuditEvent>(KEY_VALUE_COLLECTIONS.auditPending, "pending audit event", PendingAuditEventSchema, (pending) => pending.key),
  turnAudit: kind<TurnAuditEntry>(KEY_VALUE_COLLECTIONS.turnAudit, "turn-audit index entry", TurnAuditEntrySchema, (entry) => turnAuditKey(entry.turnKey, entry.key)),
  cursor: kind<StoredCursor>(KEY_VALUE_COLLECTIONS.cursors, "audit cursor", StoredCursorSchema, (cursor) => cursor.sink),
  turn: kind<TurnRecord>(KEY_VALUE_COLLECTIONS.turns, "turn record", TurnRecordSchema, (record) => record.turnKey),
  turnRequest: kind<TurnRequestEntry>(KEY_VALUE_COLLECTIONS.turnRequests, "turn request entry", TurnRequestEntrySchema, (record) => record.requestKey),
  liveTurn: kind<LiveTurnEntry>(KEY_VALUE_COLLECTIONS.liveTurns, "live-turn index entry", LiveTurnEntrySchema, (entry) => entry.turnKey),
  effect: kind<StoredEffect>(KEY_VALUE_COLLECTIONS.effects, "side-effect claim", StoredEffectSchema, (record) => record.identity.effectKey),
  effectGroup: kind<EffectGroup>(KEY_VALUE_COLLECTIONS.effectGroups, "side-effect group", EffectGroupSchema, (record) =>
    effectGroupKey(record.turnKey, record.toolName),
  ),
  counter: kind<number>(KEY_VALUE_COLLECTIONS.counters, "counter", StoredCounterSchema, (_value, key) => key),
  unresolvedClaim: kind<UnresolvedClaimEntry>(KEY_VALUE_COLLECTIONS.unresolvedClaims, "unresolved-claims index entry", UnresolvedClaimEntrySchema, (entry) => entry.turnKey),
  unresolvedEffect: kind<UnresolvedEffectEntry>(
    KEY_VALUE_COLLECTIONS.unresolvedEffects,
    "unresolved-effects index entry",
    UnresolvedEffectEntrySchema,
    (entry) => entry.effectKey,
  ),
  pendingApproval: kind<ApprovalIndexEntry>(KEY_VALUE_COLLECTIONS.pendingApprovals, "pending-approvals index entry", ApprovalIndexEntrySchema, (entry) => entry.approvalId),
  decidedApproval: kind<ApprovalIndexEntry>(KEY_VALUE_COLLECTIONS.decidedApprovals, "decided-approvals index entry", ApprovalIndexEntrySchema, (entry) => entry.approvalId),
  settledClaim: kind<TimedEntry>(KEY_VALUE_COLLECTIONS.settledClaims, "settled-claims index entry", TimedEntrySchema, (entry) => timedKey(entry.atMs, entry.key)),
  settledEffect: kind<TimedEntry>(KEY_VALUE_COLLECTIONS.settledEffects, "settled-effects index entry", TimedEntrySchema, (entry) => timedKey(entry.atMs, entry.key)),
  finishedTurn: kind<TimedEntry>(KEY_VALUE_COLLECTIONS.finishedTurns, "finished-turns index entry", TimedEntrySchema, (entry) => timedKey(entry.atMs, entry.key)),
  approvalByTime: kind<ApprovalTimeEntry>(KEY_VALUE_COLLECTIONS.approvalsByTime, "approvals-by-time index entry", ApprovalTimeEntrySchema, approvalTimeKey),
  turnApproval: kind<TurnApprovalEntry>(KEY_VALUE_COLLECTIONS.turnApprovals, "turn-approvals index entry", TurnApprovalEntrySchema, (entry) =>
    turnApprovalKey(entry.turnKey, entry.approvalId),
  ),
  layout: kind<number>(KEY_VALUE_COLLECTIONS.meta, "layout version", z.int().min(1), (_value, key) => key),
} as const;
