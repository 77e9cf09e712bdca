/**
 * Guardrail verdicts and approval requests: what a guardrail decided for a call, and an approval
 * request's lifecycle.
 */
import { z } from "zod";
import { DigestSchema, IdSchema, JsonValueSchema, TimestampSchema } from "./primitives.js";

/** Every action a guardrail verdict can take; see {@link GuardrailVerdictSchema}. */
export const GUARDRAIL_ACTIONS = ["allow", "deny", "observe", "approve"] as const;

/** One rule a guardrail checked. */
export const DetectionSchema = z
  .object({
    rule: IdSchema,
    detected: z.boolean(),
  })
  .catchall(JsonValueSchema);
/** A {@link DetectionSchema} value. */
export type Detection = z.infer<typeof DetectionSchema>;

/**
 * What a guardrail says should happen to a call. It never changes anything itself.
 * - `allow`: nothing to object to;
 * - `deny`: refuse the call (the model gets `code`, `reason` and `details`);
 * - `observe`: record what would have been refused, and let the call run;
 * - `approve`: pause for a person's decision before anything runs.
 */
export const GuardrailVerdictSchema = z.strictObject({
  action: z.enum(GUARDRAIL_ACTIONS),
  /** `partial` when the check could not finish (it threw or timed out): never clean. */
  outcome: z.enum(["complete", "partial"]),
  detections: z.array(DetectionSchema),
  /** Shown to the model on a denial, and to the approver. Keep server detail out of it. */
  reason: z.string().optional(),
  /** The refusal code on a denial; default `guardrail_denied`. */
  code: z.string().regex(/^[a-z][a-z0-9_]*$/, "a snake_case code").optional(),
  /** Extra fields for the model's refusal content on a denial. */
  details: z.record(z.string(), JsonValueSchema).optional(),
});
/** A {@link GuardrailVerdictSchema} value: what `Guardrail.check` returns. */
export type GuardrailVerdict = z.infer<typeof GuardrailVerdictSchema>;
/** The `action` of a {@link GuardrailVerdict}. */
export type GuardrailAction = GuardrailVerdict["action"];

/**
 * Which check of which call a verdict is bound to. The tool is part of it, by name and by
 * fingerprint: a verdict recorded for one tool never answers for another tool's call, whatever its
 * id and arguments, nor for the same tool once its description or schema changed.
 */
export const VerdictKeySchema = z.strictObject({
  turnKey: DigestSchema,
  toolCallId: IdSchema,
  toolName: IdSchema,
  /** `toolFingerprint(tool)`: the tool's name, description and declared input schema. */
  toolFingerprint: DigestSchema,
  guardrail: IdSchema,
  argsDigest: DigestSchema,
});
/** A {@link VerdictKeySchema} value. */
export type VerdictKey = z.infer<typeof VerdictKeySchema>;

/** A stored verdict, read back on a replay so the check does not run again. */
export const VerdictRecordSchema = VerdictKeySchema.extend({
  verdict: GuardrailVerdictSchema,
  recordedAt: TimestampSchema,
});
/** A {@link VerdictRecordSchema} value. */
export type VerdictRecord = z.infer<typeof VerdictRecordSchema>;

/** A person's answer to an approval request: the resume value of the interrupt. */
export const ApprovalDecisionSchema = z.discriminatedUnion("decision", [
  z.strictObject({ decision: z.literal("approve") }),
  z.strictObject({ decision: z.literal("reject"), message: z.string().optional() }),
  z.strictObject({ decision: z.literal("edit"), args: z.record(z.string(), JsonValueSchema) }),
]);
/** An {@link ApprovalDecisionSchema} value. */
export type ApprovalDecision = z.infer<typeof ApprovalDecisionSchema>;

/**
 * Where an approval request is in its lifecycle:
 * - `pending`: asked, not yet decided;
 * - `approved`, `rejected`, `edited`: decided (the first decision wins; it is never changed);
 * - `applied`: an approved or edited request whose call was carried out (its decision is kept);
 * - `expired`: nobody decided before `expireApprovals` retired it; it can no longer be decided;
 * - `orphaned`: approved or edited, but its call was never carried out before `orphanApprovals`
 *   retired it (the worker that was to resume it died): its decision is kept, it can no longer be
 *   applied, and a late resume of its call is refused `approval_orphaned`.
 */
export const APPROVAL_STATUSES = ["pending", "approved", "rejected", "edited", "applied", "expired", "orphaned"] as const;
/** Parses an {@link ApprovalStatus}. */
export const ApprovalStatusSchema = z.enum(APPROVAL_STATUSES);
/** One of {@link APPROVAL_STATUSES}. */
export type ApprovalStatus = z.infer<typeof ApprovalStatusSchema>;

/** The status a decision moves a pending request to. */
export const DECIDED_STATUS = { approve: "approved", reject: "rejected", edit: "edited" } as const satisfies Record<
  ApprovalDecision["decision"],
  ApprovalStatus
>;

/**
 * What the middleware submits when a call needs a person's approval: one request per call, bound
 * to the turn, the tool, the call id and the arguments by `approvalId`, naming every guardrail
 * that asked.
 */
export const ApprovalRequestSchema = z.strictObject({
  /**
   * `digest({ kind: "arkah.approval", v: 1, turnKey, toolName, toolFingerprint, toolCallId, argsDigest, execution })`:
   * docs/architecture.md#keys.
   */
  approvalId: DigestSchema,
  turnKey: DigestSchema,
  scopeId: IdSchema,
  toolCallId: IdSchema,
  toolName: IdSchema,
  /** `toolFingerprint(tool)` of the tool the person is asked about. */
  toolFingerprint: DigestSchema,
  argsDigest: DigestSchema,
  /** The arguments the person is asked about. */
  args: z.record(z.string(), JsonValueSchema),
  /** The guardrails that asked for approval, in order. */
  guardrails: z.array(IdSchema).min(1, "name at least one guardrail"),
  /** The guardrails' reasons, shown to the person. */
  reason: z.string().optional(),
  requestedAt: TimestampSchema,
});
/** (Named apart from the port's `ApprovalRequest`, the interrupt payload a person answers.) */
export type ApprovalSubmission = z.infer<typeof ApprovalRequestSchema>;

/**
 * A stored approval request and where it is in its lifecycle. Its fields agree with its status:
 * a decision (with `decidedAt`, and `operatorRef` if one was given) exactly when it was decided,
 * of the kind its status names (an applied or orphaned one was approved or edited); `appliedAt`
 * exactly when applied; `expiredAt` exactly when expired; `orphanedAt` exactly when orphaned.
 */
export const ApprovalRecordSchema = ApprovalRequestSchema.extend({
  /**
   * Absent only on a request stored before the SQLite and PostgreSQL stores' schema version 3,
   * which did not have it (the middleware never asks for such a request again: its id changed).
   */
  toolFingerprint: DigestSchema.optional(),
  status: ApprovalStatusSchema,
  /** Present once decided, and kept when applied. */
  decision: ApprovalDecisionSchema.optional(),
  /** Who decided, when the decision named someone. */
  operatorRef: IdSchema.optional(),
  decidedAt: TimestampSchema.optional(),
  appliedAt: TimestampSchema.optional(),
  expiredAt: TimestampSchema.optional(),
  /** When `orphanApprovals` retired the decided request whose call was never carried out. */
  orphanedAt: TimestampSchema.optional(),
}).superRefine((record, ctx) => {
  const problem = (path: string, message: string) => {
    ctx.addIssue({ code: "custom", path: [path], message });
  };
  const decided = record.status !== "pending" && record.status !== "expired";
  if (decided !== (record.decision !== undefined)) {
    problem("decision", `a ${record.status} request ${decided ? "needs" : "has no"} decision`);
  }
  if (decided !== (record.decidedAt !== undefined)) {
    problem("decidedAt", `a ${record.status} request ${decided ? "needs" : "has no"} decidedAt`);
  }
  if (!decided && record.operatorRef !== undefined) problem("operatorRef", `a ${record.status} request has no operatorRef`);
  if (record.decision !== undefined) {
    const status = DECIDED_STATUS[record.decision.decision];
    const consistent = record.status === status || ((record.status === "applied" || record.status === "orphaned") && status !== "rejected");
    if (!consistent) problem("status", `a ${record.decision.decision} decision cannot leave a request ${record.status}`);
  }
  if ((record.status === "applied") !== (record.appliedAt !== undefined)) {
    problem("appliedAt", "appliedAt is present exactly when the request is applied");
  }
  if ((record.status === "expired") !== (record.expiredAt !== undefined)) {
    problem("expiredAt", "expiredAt is present exactly when the request is expired");
  }
  if ((record.status === "orphaned") !== (record.orphanedAt !== undefined)) {
    problem("orphanedAt", "orphanedAt is present exactly when the request is orphaned");
  }
});
/** An {@link ApprovalRecordSchema} value. */
export type ApprovalRecord = z.infer<typeof ApprovalRecordSchema>;

/** A person's (or an operator's) decision on a pending request. */
export const DecideApprovalInputSchema = z.strictObject({
  approvalId: DigestSchema,
  decision: ApprovalDecisionSchema,
  /** Who decided, for the record and the audit trail. */
  operatorRef: IdSchema.optional(),
  decidedAt: TimestampSchema,
});
/** A {@link DecideApprovalInputSchema} value. */
export type DecideApprovalInput = z.infer<typeof DecideApprovalInputSchema>;

/**
 * `decideApproval`'s answer: whether this decision is the request's, and the request as it stands.
 * A decision re-delivered (the same kind, `message`, canonically equal `args` and `operatorRef` as
 * the recorded one) answers `decided: true` again with `repeated: true`: nothing changed, nothing
 * was appended.
 */
export const ApprovalDecisionResultSchema = z.discriminatedUnion("decided", [
  /**
   * The request was pending: this decision is now its decision. Or (`repeated: true`) this very
   * decision was recorded before and the request is still decided or applied by it: the record as
   * it stands, unchanged.
   */
  z.strictObject({ decided: z.literal(true), record: ApprovalRecordSchema, repeated: z.literal(true).optional() }),
  /**
   * Nothing changed: no such request (`not_found`, no record), or it was decided (or applied)
   * before by another decision (`already_decided`), or it expired (`expired`), or it was orphaned
   * (`orphaned`: whatever the decision, its call can no longer run); `record` is the request as it stands.
   */
  z.strictObject({
    decided: z.literal(false),
    reason: z.enum(["not_found", "already_decided", "expired", "orphaned"]),
    record: ApprovalRecordSchema.optional(),
  }),
]);
/** An {@link ApprovalDecisionResultSchema} value. */
export type ApprovalDecisionResult = z.infer<typeof ApprovalDecisionResultSchema>;

/** Marks an approved or edited request applied: its call was carried out. */
export const ApplyApprovalInputSchema = z.strictObject({ approvalId: DigestSchema, appliedAt: TimestampSchema });
/** An {@link ApplyApprovalInputSchema} value. */
export type ApplyApprovalInput = z.infer<typeof ApplyApprovalInputSchema>;

/** `listApprovals`' filter: by status and turn, at most `limit` requests. */
export const ApprovalQuerySchema = z.strictObject({
  status: ApprovalStatusSchema.optional(),
  turnKey: DigestSchema.optional(),
  limit: z.int().min(1).max(10_000).optional(),
});
/** An {@link ApprovalQuerySchema} value. */
export type ApprovalQuery = z.infer<typeof ApprovalQuerySchema>;

/** `expireApprovals`' input: retires pending requests nobody decided in time. */
export const ExpireApprovalsInputSchema = z.strictObject({
  /** Pending requests made before this instant expire. */
  olderThan: TimestampSchema,
});
/** An {@link ExpireApprovalsInputSchema} value. */
export type ExpireApprovalsInput = z.infer<typeof ExpireApprovalsInputSchema>;

/** `expireApprovals`' answer: how many requests it expired. */
export const ExpireApprovalsResultSchema = z.strictObject({ expired: z.int().min(0) });
/** An {@link ExpireApprovalsResultSchema} value. */
export type ExpireApprovalsResult = z.infer<typeof ExpireApprovalsResultSchema>;

/**
 * `orphanApprovals`' input: retires decided requests whose call was never carried out. The cut-off
 * is on `decidedAt`, not `requestedAt`: the lease that ran out is the resuming worker's, which
 * starts at the decision.
 */
export const OrphanApprovalsInputSchema = z.strictObject({
  /** `approved` and `edited` requests decided before this instant (and not applied) are orphaned. */
  decidedBefore: TimestampSchema,
});
/** An {@link OrphanApprovalsInputSchema} value. */
export type OrphanApprovalsInput = z.infer<typeof OrphanApprovalsInputSchema>;

/** `orphanApprovals`' answer: how many requests it orphaned. */
export const OrphanApprovalsResultSchema = z.strictObject({ orphaned: z.int().min(0) });
/** An {@link OrphanApprovalsResultSchema} value. */
export type OrphanApprovalsResult = z.infer<typeof OrphanApprovalsResultSchema>;
