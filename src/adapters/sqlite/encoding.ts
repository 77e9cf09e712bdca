/**
 * Values in and out of SQLite: exact text (a string that is not well-formed UTF-16 is stored as
 * its UTF-16LE bytes), times, and every row read back parsed with the exported schemas (a row that
 * does not parse is a corrupt record: fail closed).
 */
import { z } from "zod";
import {
  AdmissionReceiptSchema,
  ApprovalRecordSchema,
  ClaimedIdentitySchema,
  EffectIdentitySchema,
  MutationResultSchema,
  VerdictRecordSchema,
  type AdmissionReceipt,
  type ApprovalRecord,
  type VerdictKey,
  type VerdictRecord,
} from "../../contracts/index.js";
import { corrupt } from "./errors.js";

export type SqlText = string | Buffer;
export type Row = Record<string, unknown>;

const LONE_SURROGATE = /\p{Cs}/u;

/**
 * SQLite text is UTF-8, and better-sqlite3 replaces a lone surrogate with U+FFFD, which would
 * change the string and could make two ids equal. Such a string is stored as its UTF-16LE bytes
 * (a BLOB never equals a TEXT value, so distinct strings stay distinct).
 */
export function encodeText(value: string): SqlText {
  return LONE_SURROGATE.test(value) ? Buffer.from(value, "utf16le") : value;
}

export function decodeText(value: unknown): unknown {
  return Buffer.isBuffer(value) ? value.toString("utf16le") : value;
}

/** Date.parse, as the in-memory store compares times; NULL in SQL when unparseable. */
export function epochMs(timestamp: string): number | null {
  const ms = Date.parse(timestamp);
  return Number.isNaN(ms) ? null : ms;
}


/** Parses a row read back; a row that does not parse is a corrupt record (fail closed). */
export function parseRow<T>(schema: z.ZodType<T>, value: unknown, what: string): T {
  const parsed = schema.safeParse(value);
  if (!parsed.success) throw corrupt(what, z.prettifyError(parsed.error));
  return parsed.data;
}

export function parseJson(text: unknown, what: string): unknown {
  if (typeof text !== "string") throw corrupt(what, "the JSON column is not text");
  try {
    return JSON.parse(text);
  } catch (error) {
    throw corrupt(what, "the JSON column does not parse", error);
  }
}

/** 1/0 as stored; anything else is passed through for the schema to reject. */
export function decodeBoolean(value: unknown): unknown {
  return value === 1 ? true : value === 0 ? false : value;
}

const ClaimStateSchema = z.enum(["pending", "complete", "unknown", "pruned"]);

/** A claim row, as read back. */
const StoredClaimSchema = z
  .strictObject({
    identity: ClaimedIdentitySchema,
    token: z.string().min(1),
    state: ClaimStateSchema,
    result: MutationResultSchema.optional(),
    claimedAt: z.iso.datetime({ offset: true }),
  })
  .refine(
    (claim) => (claim.state === "complete") === (claim.result !== undefined),
    "a complete claim has a result, and no other claim does",
  );
export type StoredClaim = z.infer<typeof StoredClaimSchema>;

export function claimFromRow(row: Row): StoredClaim {
  const content = decodeText(row.result_content);
  const status = row.result_status;
  return parseRow(
    StoredClaimSchema,
    {
      identity: {
        turnKey: row.turn_key,
        scopeId: decodeText(row.scope_id),
        toolCallId: decodeText(row.tool_call_id),
        toolName: decodeText(row.tool_name),
        argsDigest: row.args_digest,
        mutationKey: row.mutation_key,
        // NULL for a claim made before schema version 3.
        ...(row.tool_fingerprint === null ? {} : { toolFingerprint: row.tool_fingerprint }),
      },
      token: decodeText(row.token),
      state: row.state,
      result: content === null && status === null ? undefined : { content, status },
      claimedAt: row.claimed_at,
    },
    `claim for turn ${String(row.turn_key)}`,
  );
}

/** An effect row, as read back: its whole identity parsed (a corrupt row fails closed). */
const StoredEffectSchema = z
  .strictObject({
    identity: EffectIdentitySchema,
    token: z.string().min(1),
    state: ClaimStateSchema,
    result: MutationResultSchema.optional(),
    claimedAt: z.iso.datetime({ offset: true }),
  })
  .refine(
    (effect) => (effect.state === "complete") === (effect.result !== undefined),
    "a complete effect has a result, and no other effect does",
  );
export type StoredEffect = z.infer<typeof StoredEffectSchema>;

export function effectFromRow(row: Row): StoredEffect {
  const content = decodeText(row.result_content);
  const status = row.result_status;
  return parseRow(
    StoredEffectSchema,
    {
      identity: {
        turnKey: row.turn_key,
        scopeId: decodeText(row.scope_id),
        toolCallId: decodeText(row.tool_call_id),
        toolName: decodeText(row.tool_name),
        argsDigest: row.args_digest,
        effectKey: row.effect_key,
        toolFingerprint: row.tool_fingerprint,
      },
      token: decodeText(row.token),
      state: row.state,
      result: content === null && status === null ? undefined : { content, status },
      claimedAt: row.claimed_at,
    },
    `side effect ${String(row.effect_key)}`,
  );
}

export function receiptFromRow(row: Row): AdmissionReceipt {
  return parseRow(
    AdmissionReceiptSchema,
    {
      turnKey: row.turn_key,
      scopeId: decodeText(row.scope_id),
      turnId: decodeText(row.turn_id),
      policyVersion: decodeText(row.policy_version),
      moderationDigest: row.moderation_digest,
      allowed: decodeBoolean(row.allowed),
      decidedAt: row.decided_at,
      ...(row.principal === null ? {} : { principal: decodeText(row.principal) }),
    },
    `admission receipt for turn ${String(row.turn_key)}`,
  );
}

/** A verdict record: its JSON, parsed, and bound to the key it is stored under. */
export function verdictFromRow(row: Row, key: VerdictKey): VerdictRecord {
  const what = "verdict record";
  const record = parseRow(VerdictRecordSchema, parseJson(row.record, what), what);
  if (
    record.turnKey !== key.turnKey ||
    record.toolCallId !== key.toolCallId ||
    record.toolName !== key.toolName ||
    record.toolFingerprint !== key.toolFingerprint ||
    record.guardrail !== key.guardrail ||
    record.argsDigest !== key.argsDigest
  ) {
    throw corrupt(what, "the record's key is not the key it is stored under");
  }
  return record;
}

export function keyParams(key: VerdictKey): [string, SqlText, SqlText, string, SqlText, string] {
  return [
    key.turnKey,
    encodeText(key.toolCallId),
    encodeText(key.toolName),
    key.toolFingerprint,
    encodeText(key.guardrail),
    key.argsDigest,
  ];
}

/** An approval row: its JSON record, parsed, and agreeing with the columns it is filed under. */
export function approvalFromRow(row: Row): ApprovalRecord {
  const what = `approval request ${String(row.approval_id)}`;
  const record = parseRow(ApprovalRecordSchema, parseJson(row.record, what), what);
  if (record.approvalId !== row.approval_id || record.turnKey !== row.turn_key || record.status !== row.status) {
    throw corrupt(what, "the record does not match the row it is stored in");
  }
  return record;
}

export function sameText(stored: unknown, expected: SqlText): boolean {
  if (typeof stored === "string" || typeof expected === "string") return stored === expected;
  return Buffer.isBuffer(stored) && stored.equals(expected);
}
