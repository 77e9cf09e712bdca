export {
  admitTurn,
  assertAdmitted,
  type AdmitTurnOptions,
  type AssertAdmittedOptions,
  type Moderate,
  type ModerationRequest,
} from "./admission.js";
export {
  AdmissionReceiptSchema,
  ClaimOptionsSchema,
  ClaimResultSchema,
  DigestSchema,
  MutationIdentitySchema,
  MutationResultSchema,
  MutationSettlementSchema,
  ReadEvidenceSchema,
  REFUSAL_CODES,
  RetryPolicySchema,
  SegmentSchema,
  TOOL_KINDS,
  ToolKindSchema,
  ToolPolicySchema,
  TurnInputSchema,
  type AdmissionReceipt,
  type ClaimOptions,
  type ClaimResult,
  type ClaimStatus,
  type GuardrailStore,
  type MutationIdentity,
  type MutationResult,
  type MutationSettlement,
  type ReadEvidence,
  type RefusalCode,
  type RetryPolicy,
  type Segment,
  type ToolKind,
  type ToolPolicy,
  type TurnInput,
  type TurnRef,
} from "./contracts.js";
export { canonicalJson, digest, DigestError } from "./digest.js";
export {
  AdmissionError,
  ConfigurationError,
  RetryableToolError,
  SettlementError,
  StoreContractError,
  type AdmissionErrorCode,
} from "./errors.js";
export { moderationDigest, mutationKey, turnKey, type ToolCallRef } from "./keys.js";
export {
  createDocumentGuardrails,
  type ArgumentIssue,
  type Authorize,
  type AuthorizeCall,
  type DocumentGuardrailsOptions,
  type GuardrailLogger,
} from "./middleware.js";
export { runWithRetryBoundary, type RetryBoundaryOptions } from "./retry.js";
export { InMemoryGuardrailStore } from "./stores/memory.js";
export { TURN_CONTEXT_KEY, turnContext } from "./turn-gate.js";
