/**
 * What `KeyValueGuardrailStore` keeps under which key: its collections, the shape of each record,
 * and the key each record must be read by. An adapter stores these opaquely; they are documented
 * so an operator can read a backend's contents, not so an adapter depends on them.
 */
import { z } from "zod";
import {
  AdmissionReceiptSchema,
  ApprovalRecordSchema,
  DigestSchema,
  MutationIdentitySchema,
  MutationResultSchema,
  StoredAuditEventSchema,
  TurnRecordSchema,
  VerdictRecordSchema,
  type AdmissionReceipt,
  type ApprovalRecord,
  type MutationIdentity,
  type MutationResult,
  type StoredAuditEvent,
  type TurnRecord,
  type VerdictKey,
  type VerdictRecord,
} from "../contracts.js";

/** Every collection the base writes, by role. An adapter may create one table, hash or prefix per name. */
export const KEY_VALUE_COLLECTIONS = {
  /** turn key -> {@link AdmissionReceipt}. */
  receipts: "receipts",
  /** turn key -> {@link StoredReads}: the turn's read evidence. */
  reads: "reads",
  /** turn key -> {@link StoredClaim}: the turn's mutation slot. */
  claims: "claims",
  /** zero-padded claim sequence number -> {@link UnresolvedIndexEntry}: pending and unknown claims, in claim order. */
  unresolved: "unresolved",
  /** scope id -> {@link UnknownScopeEntry}: the scope's turns with an `unknown` claim. */
  unknownScopes: "unknownScopes",
  /** {@link verdictStorageKey} -> {@link VerdictRecord}. */
  verdicts: "verdicts",
  /** approval id -> {@link StoredApproval}. */
  approvals: "approvals",
  /** zero-padded audit sequence number -> {@link StoredAuditEvent}. */
  audit: "audit",
  /** sink name -> {@link StoredCursor}. */
  cursors: "cursors",
  /** turn key -> {@link TurnRecord}. */
  turns: "turns",
  /** counter name (`audit`, `claim`, `approval`) -> the last number it issued (an integer, 0 before any). */
  counters: "counters",
} as const;

/** One of {@link KEY_VALUE_COLLECTIONS}' values. */
export type KeyValueCollection = (typeof KEY_VALUE_COLLECTIONS)[keyof typeof KEY_VALUE_COLLECTIONS];

/** The counters the base keeps, each in its own record of `counters`. */
export type KeyValueCounter = "audit" | "claim" | "approval";

/** Digits of a zero-padded sequence number: every safe integer fits, so key order is number order. */
const SEQ_DIGITS = 16;

/** A sequence number as a key: zero-padded, so ascending key order is ascending number order. */
export function sequenceKey(seq: number): string {
  return String(seq).padStart(SEQ_DIGITS, "0");
}

/**
 * A verdict's key: JSON of its six key fields, in order. JSON escapes a lone surrogate rather than
 * replacing it, so two different keys never encode alike.
 */
export function verdictStorageKey(key: VerdictKey): string {
  return JSON.stringify([key.turnKey, key.toolCallId, key.toolName, key.toolFingerprint, key.guardrail, key.argsDigest]);
}

const EpochMsSchema = z.number().refine(Number.isFinite, "expected a finite epoch millisecond");

/** A turn's mutation claim as the base stores it. */
export interface StoredClaim {
  readonly identity: MutationIdentity;
  readonly token: string;
  /** The claim counter's number for it: claim order, the tie-break of `listUnresolved`. */
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

/** A turn's read evidence. */
export interface StoredReads {
  readonly turnKey: string;
  /** Every evidence digest recorded for the turn, each once. */
  readonly digests: readonly string[];
}
/** Parses {@link StoredReads}. */
export const StoredReadsSchema: z.ZodType<StoredReads> = z.strictObject({ turnKey: DigestSchema, digests: z.array(DigestSchema) });

/** An entry of the unresolved index: the turn whose claim has this claim number. */
export interface UnresolvedIndexEntry {
  readonly turnKey: string;
}
/** Parses an {@link UnresolvedIndexEntry}. */
export const UnresolvedIndexEntrySchema: z.ZodType<UnresolvedIndexEntry> = z.strictObject({ turnKey: DigestSchema });

/** The turns of a scope whose claim is `unknown`: they block the scope's other claims. */
export interface UnknownScopeEntry {
  readonly scopeId: string;
  readonly turnKeys: readonly string[];
}
/** Parses an {@link UnknownScopeEntry}. */
export const UnknownScopeEntrySchema: z.ZodType<UnknownScopeEntry> = z.strictObject({
  scopeId: z.string().min(1),
  turnKeys: z.array(DigestSchema).min(1),
});

/** An approval request as stored: the record and its request number (the tie-break of `listApprovals`). */
export interface StoredApproval {
  readonly seq: number;
  readonly record: ApprovalRecord;
}
/** Parses a {@link StoredApproval}. */
export const StoredApprovalSchema: z.ZodType<StoredApproval> = z.strictObject({ seq: z.int().min(1), record: ApprovalRecordSchema });

/** A sink's audit cursor. */
export interface StoredCursor {
  readonly sink: string;
  readonly seq: number;
}
/** Parses a {@link StoredCursor}. */
export const StoredCursorSchema: z.ZodType<StoredCursor> = z.strictObject({ sink: z.string().min(1), seq: z.int().min(0) });

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
  unresolved: kind<UnresolvedIndexEntry>(
    KEY_VALUE_COLLECTIONS.unresolved,
    "unresolved claim index entry",
    UnresolvedIndexEntrySchema,
    // The entry names a turn; the claim it is read with must carry the same number (checked there).
    (_record, key) => key,
  ),
  unknownScope: kind<UnknownScopeEntry>(KEY_VALUE_COLLECTIONS.unknownScopes, "unknown-claims index entry", UnknownScopeEntrySchema, (record) => record.scopeId),
  verdict: kind<VerdictRecord>(KEY_VALUE_COLLECTIONS.verdicts, "verdict record", VerdictRecordSchema, verdictStorageKey),
  approval: kind<StoredApproval>(KEY_VALUE_COLLECTIONS.approvals, "approval request", StoredApprovalSchema, (stored) => stored.record.approvalId),
  audit: kind<StoredAuditEvent>(KEY_VALUE_COLLECTIONS.audit, "audit event", StoredAuditEventSchema, (event) => sequenceKey(event.seq)),
  cursor: kind<StoredCursor>(KEY_VALUE_COLLECTIONS.cursors, "audit cursor", StoredCursorSchema, (cursor) => cursor.sink),
  turn: kind<TurnRecord>(KEY_VALUE_COLLECTIONS.turns, "turn record", TurnRecordSchema, (record) => record.turnKey),
  counter: kind<number>(KEY_VALUE_COLLECTIONS.counters, "counter", StoredCounterSchema, (_value, key) => key),
} as const;
