/**
 * Values in and out of PostgreSQL: exact text (a string `text` cannot hold is stored escaped),
 * JSON documents as text, times, and every row read back parsed with the exported schemas (a row
 * that does not parse is a corrupt record: fail closed).
 */
import { z } from "zod";
import {
  AdmissionReceiptSchema,
  ApprovalRecordSchema,
  ClaimedIdentitySchema,
  DigestSchema,
  MutationResultSchema,
  VerdictRecordSchema,
  type AdmissionReceipt,
  type ApprovalRecord,
  type ClaimedIdentity,
  type ClaimResult,
  type VerdictKey,
  type VerdictRecord,
} from "../../contracts/index.js";
import { StoreContractError } from "../../errors.js";
import { existingClaimAnswer } from "../../store/decisions.js";
import { parseClaimResult, parseStoreValue } from "../../store/validate.js";


/**
 * PostgreSQL `text` cannot hold U+0000, and a lone UTF-16 surrogate would be replaced on the wire:
 * either would break the exact round trip every string crossing the store gets. Such strings (and
 * strings starting with the marker) are stored as the marker + their JSON form; every other string
 * is stored as itself, so the tables stay readable. The mapping is injective and deterministic, so
 * equality on stored values is equality on the strings.
 */
const MARKER = "\u0001";
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

export function encodeText(value: string): string {
  return value.startsWith(MARKER) || value.includes("\u0000") || LONE_SURROGATE.test(value)
    ? MARKER + JSON.stringify(value)
    : value;
}

export function decodeText(value: unknown, what: string): string {
  if (typeof value !== "string") throw new StoreContractError(`corrupt ${what}: expected text, got ${typeof value}`);
  if (!value.startsWith(MARKER)) return value;
  try {
    const decoded: unknown = JSON.parse(value.slice(1));
    if (typeof decoded === "string") return decoded;
  } catch {
    // Reported below.
  }
  throw new StoreContractError(`corrupt ${what}: an escaped string that does not decode`);
}

export function decodeOptionalText(value: unknown, what: string): string | undefined {
  return value === null || value === undefined ? undefined : decodeText(value, what);
}

/** A JSON document stored as text (not jsonb: jsonb rejects \u0000 and reorders keys). */
export function decodeJson(value: unknown, what: string): unknown {
  if (typeof value !== "string") throw new StoreContractError(`corrupt ${what}: expected JSON text`);
  try {
    return JSON.parse(value) as unknown;
  } catch {
    throw new StoreContractError(`corrupt ${what}: not JSON`);
  }
}

/** Milliseconds since the epoch as `Date.parse` gives them (what the in-memory store compares), or null. */
export function epochMs(timestamp: string): number | null {
  const ms = Date.parse(timestamp);
  return Number.isNaN(ms) ? null : ms;
}

// ---------------------------------------------------------------------------------------------
// Rows

export const CLAIM_STATES = ["pending", "complete", "unknown", "pruned"] as const;

/** A claim row as the claim path reads it. */
const ClaimRowSchema = z.object({
  mutation_key: DigestSchema,
  tool_name: z.string(),
  tool_call_id: z.string(),
  state: z.enum(CLAIM_STATES),
  result_content: z.string().nullable(),
  result_status: z.string().nullable(),
});

export const COUNT_ROW = z.object({ unknown_count: z.int().min(0) });

export function parseRow<T>(schema: z.ZodType<T>, value: unknown, what: string): T {
  const parsed = schema.safeParse(value);
  if (!parsed.success) throw new StoreContractError(`corrupt ${what}: ${z.prettifyError(parsed.error)}`);
  return parsed.data;
}

/** The claim answer for an existing claim row, decided by the rule every store shares. */
export function classify(row: Record<string, unknown>, mutationKey: string): ClaimResult {
  const claim = parseRow(ClaimRowSchema, row, "claim row");
  if (claim.state === "pruned") return parseClaimResult({ status: "conflict" });
  const result =
    claim.state === "complete"
      ? parseStoreValue(
          MutationResultSchema,
          { content: decodeOptionalText(claim.result_content, "claim result"), status: claim.result_status },
          "stored mutation result",
        )
      : undefined;
  // The whole identity is parsed whatever the answer: a corrupt row answers nothing.
  const identity = claimedIdentityFromRow(row);
  return parseClaimResult(existingClaimAnswer({ state: claim.state, identity, result }, mutationKey));
}

/** The identity a claim row holds, parsed: every read of a claim checks all of it (fail closed). */
export function claimedIdentityFromRow(row: Record<string, unknown>): ClaimedIdentity {
  return parseStoreValue(ClaimedIdentitySchema, identityFromRow(row), "claim row");
}

export function identityFromRow(row: Record<string, unknown>) {
  return {
    turnKey: row.turn_key,
    scopeId: decodeText(row.scope_id, "claim scope id"),
    toolCallId: decodeText(row.tool_call_id, "claim tool call id"),
    toolName: decodeText(row.tool_name, "claim tool name"),
    argsDigest: row.args_digest,
    mutationKey: row.mutation_key,
    // NULL for a claim made before schema version 3.
    ...(row.tool_fingerprint === null ? {} : { toolFingerprint: row.tool_fingerprint }),
  };
}

export function receiptFromRow(row: Record<string, unknown>): AdmissionReceipt {
  return parseStoreValue(
    AdmissionReceiptSchema,
    {
      turnKey: row.turn_key,
      scopeId: decodeText(row.scope_id, "receipt scope id"),
      turnId: decodeText(row.turn_id, "receipt turn id"),
      policyVersion: decodeText(row.policy_version, "receipt policy version"),
      moderationDigest: row.moderation_digest,
      allowed: row.allowed,
      decidedAt: row.decided_at,
      ...(row.principal === null ? {} : { principal: decodeText(row.principal, "receipt principal") }),
    },
    "stored admission receipt",
  );
}

export function verdictKeyValues(key: VerdictKey): string[] {
  return [
    key.turnKey,
    encodeText(key.toolCallId),
    encodeText(key.toolName),
    key.toolFingerprint,
    encodeText(key.guardrail),
    key.argsDigest,
  ];
}

/** A stored verdict; it must still be the record for the key it is stored under. */
export function verdictFromRow(row: Record<string, unknown>, key: VerdictKey): VerdictRecord {
  const record = parseStoreValue(VerdictRecordSchema, decodeJson(row.record, "verdict record"), "stored verdict record");
  if (
    record.turnKey !== key.turnKey ||
    record.toolCallId !== key.toolCallId ||
    record.toolName !== key.toolName ||
    record.toolFingerprint !== key.toolFingerprint ||
    record.guardrail !== key.guardrail ||
    record.argsDigest !== key.argsDigest
  ) {
    throw new StoreContractError("corrupt verdict record: stored under another key");
  }
  return record;
}

/** A stored approval request; it must agree with the columns it is filed under. */
export function approvalFromRow(row: Record<string, unknown>): ApprovalRecord {
  const record = parseStoreValue(ApprovalRecordSchema, decodeJson(row.record, "approval request"), "stored approval request");
  if (record.approvalId !== row.approval_id || record.turnKey !== row.turn_key || record.status !== row.status) {
    throw new StoreContractError(`corrupt approval request ${String(row.approval_id)}: the record does not match its row`);
  }
  return record;
}
