/**
 * `arkah-agent-guardrails`: the middleware, the turn service, admission, keys, errors, the store contract's
 * type and the in-memory store. Store adapter authors: `arkah-agent-guardrails/store` has the contract's
 * schemas, record types and the key-value base.
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
  CONFIRM_TIMEOUT_MS,
  ConfirmAnswerSchema,
  DigestSchema,
  MAX_DISCRIMINATOR_CHARS,
  MAX_CONFIRM_RESULT_LENGTH,
  MAX_TOOL_TIMEOUT_MS,
  REFUSAL_CODES,
  RetryPolicySchema,
  TOOL_KINDS,
  ToolPolicySchema,
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
export { effectKey, moderationDigest, mutationKey, toolFingerprint, turnKey, type FingerprintedTool, type ToolCallRef } from "./keys.js";
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
  TURN_FAILURES,
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
// Tool identity and the pinned inventory (issue 22 items 3 and 4).
export { IdentityFieldError, type ToolIdentityOptions } from "./keys.js";
export { type InventoryOptions } from "./pipeline/coverage.js";
export {
  compareManifests,
  parseToolManifest,
  ToolManifestSchema,
  type ManifestDrift,
  type ManifestTool,
  type ToolManifest,
} from "./inventory.js";
export type { AnyGuardrailStore, GuardrailStoreCore, StorePart } from "./store/capabilities.js";
