/**
 * `arkah-agent-guardrails`: what an app author calls. The middleware and its guardrails, the turn
 * service, admission, the keys a write service dedupes by, the errors to recognise, the in-memory
 * store, and the zod schemas an app parses its own HTTP bodies with. A runtime name is here only if
 * an app author's code calls it (test/unit/entry-points.test.ts pins the list). Storage adapter
 * authors: `arkah-agent-guardrails/store` has the contract's schemas, record types, the digests its
 * records carry (`toolFingerprint`, `moderationDigest`) and the key-value base.
 *
 * @packageDocumentation
 * @module arkah-agent-guardrails
 */
export {
  admitTurn,
  assertAdmitted,
  type AdmitTurnOptions,
  type AssertAdmittedOptions,
  type Moderate,
  type ModerationRequest,
} from "./admission.js";
export {
  ApprovalDecisionSchema,
  DigestSchema,
  REFUSAL_CODES,
  TurnInputSchema,
  type AdmissionReceipt,
  type ApprovalDecision,
  type ApprovalDecisionResult,
  type ApprovalRecord,
  type ApprovalStatus,
  type ApprovalSubmission,
  type AuditEvent,
  type ConfirmAnswer,
  type ConfirmClaim,
  type ConfirmRequest,
  type ConfirmRequestFields,
  type Detection,
  type EffectCall,
  type EffectDiscriminator,
  type GuardrailAction,
  type GuardrailVerdict,
  type JsonValue,
  type GuardrailStore,
  type RefusalCode,
  type RetryPolicy,
  type Segment,
  type ToolKind,
  type ScopeOf,
  type ToolPolicy,
  type TurnInput,
  type TurnRef,
} from "./contracts/index.js";
export { canonicalJson, digest, DigestError } from "./digest.js";
export {
  AdmissionError,
  ApprovalError,
  ConfigurationError,
  GuardrailsError,
  NoEffectError,
  RetryableToolError,
  SealError,
  SettlementError,
  StoreContractError,
  type AdmissionErrorCode,
  type ApprovalErrorCode,
  type ErrorClass,
  type SealViolation,
} from "./errors.js";
export { effectKey, mutationKey, turnKey, type ToolCallRef } from "./keys.js";
export {
  deliverAudit,
  type AuditDelivery,
  type AuditOptions,
  type AuditSinkEvent,
  type DeliverAuditOptions,
} from "./audit.js";
export {
  createDocumentGuardrails,
  type Authorize,
  type AuthorizeCall,
  type DocumentGuardrails,
  type DocumentGuardrailsOptions,
  type GuardrailsReport,
  type ToolReport,
} from "./middleware.js";
export { type AuthorizeRuntime } from "./pipeline/call.js";
export { type Coverage } from "./pipeline/coverage.js";
export { type GuardrailLogger, type LoggedError } from "./logger.js";
export {
  allowAllCalls,
  createToolGuardrails,
  type ToolAuthorize,
  type ToolAuthorizeCall,
  type ToolGuardrailsOptions,
  type ToolGuardrailsToolReport,
} from "./tool-guardrails.js";
export { requireApproval, type RequireApprovalOptions } from "./guardrails/approval.js";
export {
  type ApprovalRequest,
  type Guardrail,
  type GuardrailContext,
  type GuardrailPlacement,
  type JsonSchema,
} from "./guardrails/port.js";
export {
  createSchemaGuardrail,
  type ArgumentIssue,
  type SchemaDraft,
  type SchemaGuardrailOptions,
} from "./guardrails/schema.js";
export { runWithRetryBoundary, type RetryBoundaryOptions } from "./retry.js";
export { InMemoryGuardrailStore, type InMemoryGuardrailStoreOptions } from "./adapters/memory.js";
export {
  type GuardrailTelemetry,
  type TelemetryApprovalWait,
  type TelemetryCall,
  type TelemetryCallEnd,
  type TelemetryCallObserver,
  type TelemetryClaimKey,
  type TelemetryStep,
  type TelemetryTurn,
  type TelemetryTurnEnd,
  type TelemetryTurnObserver,
} from "./telemetry.js";
export { TURN_CONTEXT_KEY, turnContext } from "./turn-gate.js";
export {
  createTurnService,
  turnHttpErrorReply,
  turnHttpReply,
  turnThreadId,
  TurnServiceError,
  type DecideAnswer,
  type DecideTurnInput,
  type MayDecide,
  type PruneTurnsOptions,
  type RecoveredTurn,
  type RecoverTurnsOptions,
  type RecoverySummary,
  type PendingApproval,
  type RunningAnswer,
  type SubmitTurnInput,
  type ThreadConfig,
  type TurnAgent,
  type TurnAnswer,
  type TurnCallOutcome,
  type TurnFailure,
  type TurnHttpReply,
  type TurnMutation,
  type TurnOutcome,
  type TurnPruneResult,
  type TurnService,
  type TurnServiceErrorCode,
  type TurnServiceOptions,
  type TurnView,
} from "./turns/index.js";
export { admittedTurn, guardTools, type AdmittedTurnOptions, type GovernedTools, type GuardToolsOptions } from "./guard-tools.js";
// The pinned inventory (issue 22 item 4).
export { type InventoryOptions } from "./pipeline/coverage.js";
export {
  parseToolManifest,
  type ManifestDrift,
  type ManifestTool,
  type ToolManifest,
} from "./inventory.js";
export type { AnyGuardrailStore, GuardrailStoreCore, StorePart } from "./store/capabilities.js";
