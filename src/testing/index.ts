/**
 * `arkah-agent-guardrails/testing`: the offline `ScriptedModel` and the store conformance kit (needs vitest), and the multi-process race harness.
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
  type KeyValueRawWrite,
} from "./conformance.js";
export {
  raceGuardrailStore,
  StoreRaceError,
  type RaceGuardrailStoreOptions,
  type StoreRace,
  type StoreRaceReport,
  type StoreRaceResult,
} from "./race.js";
