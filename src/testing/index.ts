/**
 * `arkah-agent-guardrails/testing`: the offline `ScriptedModel` and the store conformance kit (needs vitest).
 *
 * @packageDocumentation
 * @module arkah-agent-guardrails/testing
 */
export { ScriptedModel, type ScriptReply, type ScriptResponder, type ScriptStep, type ScriptedToolCall } from "./scripted-model.js";
export {
  CONFORMANCE_SUITES,
  validateGuardrailStore,
  type ConformanceSuite,
  type CorruptedRecord,
  type CorruptionApplied,
  type ConformanceNeed,
  type CorruptionTarget,
  type GuardrailStoreTestInitializer,
} from "./conformance.js";
