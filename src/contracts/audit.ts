/**
 * Audit events: one decision as the trail records it, and reading the trail back (queries,
 * sequence numbers, each sink's cursor).
 */
import { z } from "zod";
import { DigestSchema, IdSchema, JsonValueSchema, TimestampSchema } from "./primitives.js";
import { ToolKindSchema } from "./policy.js";

/** Every `decision` an audit event can record. */
export const AUDIT_DECISIONS = [
  /** The tool ran and returned a result. */
  "executed",
  /** A completed mutation's stored result was returned without running it. */
  "replayed",
  /** The call was refused before running (`code` says why). */
  "refused",
  /** A mutation was refused because it shared its step with a read (`read_batch_deferred`). */
  "deferred",
  /**
   * The tool ran and failed: `tool_failed`, a mutation left `unknown`, `retried` (its policy runs
   * it again), `seal_broken`. Every run of a tool body is one `executed` or `failed` event.
   */
  "failed",
  /** A guardrail's verdict other than `allow` (deny, observe, approve). */
  "verdict",
  /**
   * A step in an approval request's lifecycle, written by the store: `action` is `requested`, the
   * decision (`approve`, `reject`, `edit`), `decision_refused` (with the reason as `code`),
   * `applied`, `expired` or `orphaned`. The middleware adds `answer_refused` (with the reason as `code`) for a
   * resume value it did not take.
   */
  "approval",
  /** An operator reconciled an unresolved mutation or side effect. */
  "reconciled",
  /**
   * A claim (a mutation's or a side effect's) was released: its tool body provably never started,
   * or the body threw `NoEffectError` (recorded before it as a `failed` event with code `no_effect`).
   */
  "released",
] as const;

/** One decision, as the audit trail records it. Values only if the host opted in. */
export const AuditEventSchema = z.strictObject({
  at: TimestampSchema,
  decision: z.enum(AUDIT_DECISIONS),
  turnKey: DigestSchema,
  scopeId: IdSchema,
  toolCallId: IdSchema.optional(),
  toolName: IdSchema.optional(),
  /**
   * The execution of the call this event is about: a random id the middleware gives each time it
   * takes a tool call (a retried attempt is the same execution; a resumed call a new one), on the
   * events its pipeline records for it, the one that ends it among them (a guardrail's verdict and
   * an approval step need not carry it). The tool result it answers carries it too
   * (`response_metadata.arkahExecutionId`), so the turn service binds each result to the event that
   * ended its own execution. Absent on events a store writes on its own and on earlier versions'.
   */
  executionId: IdSchema.optional(),
  /**
   * `toolFingerprint(tool)`: on the events a store writes about a claim or an approval request
   * (`reconciled`, `released`, `approval`) whenever the claim or request recorded it.
   */
  toolFingerprint: DigestSchema.optional(),
  kind: ToolKindSchema.optional(),
  argsDigest: DigestSchema.optional(),
  /** The refusal code, the guardrail's code on a verdict, or why an approval decision was refused. */
  code: z.string().optional(),
  guardrail: IdSchema.optional(),
  /** The verdict's action, the approval step, or the reconciliation's resolution. */
  action: z.string().optional(),
  /** The approval request an `approval` event is about. */
  approvalId: DigestSchema.optional(),
  mutationKey: DigestSchema.optional(),
  /** The side effect's `effectKey`, on events about a `side-effect` call's claim. */
  effectKey: DigestSchema.optional(),
  operatorRef: IdSchema.optional(),
  /** Argument values and tool results: only with `audit: { includeValues: true }`. */
  args: JsonValueSchema.optional(),
  result: z.string().optional(),
});
/** An {@link AuditEventSchema} value. */
export type AuditEvent = z.infer<typeof AuditEventSchema>;

/** An audit event as read back: the store numbers events in the order they were appended. */
export const StoredAuditEventSchema = AuditEventSchema.extend({ seq: z.int().min(1) });
/** A {@link StoredAuditEventSchema} value. */
export type StoredAuditEvent = z.infer<typeof StoredAuditEventSchema>;

/** `readAudit`'s filter; filters combine, in `seq` order. */
export const AuditQuerySchema = z.strictObject({
  /** Events at or after this time. */
  since: TimestampSchema.optional(),
  /** Events after this sequence number (for paging). */
  afterSeq: z.int().min(0).optional(),
  /** Only the events of this turn (exact match). */
  turnKey: DigestSchema.optional(),
  /** Only the events in this scope (exact match). */
  scopeId: IdSchema.optional(),
  /**
   * Only the events about this approval request (exact match): its history, in order: `requested`,
   * decisions, refused decisions and answers, then `applied`, `expired` or `orphaned`.
   */
  approvalId: DigestSchema.optional(),
  /** At most this many events (of those that match). */
  limit: z.int().min(1).max(10_000).optional(),
});
/** An {@link AuditQuerySchema} value. */
export type AuditQuery = z.infer<typeof AuditQuerySchema>;

/** Names the consumer an audit cursor belongs to (`deliverAudit`'s `sinkName`). */
export const AuditSinkNameSchema = IdSchema;

/** The sequence number an audit sink has been delivered up to: 0 before any event. */
export const AuditCursorSchema = z.int().min(0);

/**
 * Moves a sink's audit cursor forward to `seq` (the last event delivered to it). Forward only: a
 * `seq` at or below the cursor changes nothing.
 */
export const AdvanceAuditCursorInputSchema = z.strictObject({ sink: AuditSinkNameSchema, seq: AuditCursorSchema });
/** An {@link AdvanceAuditCursorInputSchema} value. */
export type AdvanceAuditCursorInput = z.infer<typeof AdvanceAuditCursorInputSchema>;
