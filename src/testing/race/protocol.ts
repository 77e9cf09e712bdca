/**
 * The messages between `raceGuardrailStore` and its child processes, and the records both sides
 * derive from a run id (so the parent never sends anything a child could not rebuild). No vitest
 * here: the child loads this file.
 */
import type {
  ApprovalDecisionResult,
  AuditEvent,
  BeginTurnResult,
  ClaimResult,
  EffectClaimResult,
  EffectIdentity,
  JsonValue,
  MutationIdentity,
  TurnStart,
} from "../../contracts/index.js";
import { digest } from "../../digest.js";
import { effectIdentity, mutationKey, toolFingerprint, turnKey } from "../../keys.js";
import type { StorePart } from "../../store/capabilities.js";

/** Parent -> child: a request (answered once, by `id`) or the order to close the store and exit. */
export type RaceRequest =
  | { readonly type: "open"; readonly storeModule: string; readonly options: JsonValue }
  | { readonly type: "claim"; readonly identity: MutationIdentity }
  | { readonly type: "settle"; readonly turnKey: string; readonly token: string; readonly content: string }
  | { readonly type: "append"; readonly events: readonly AuditEvent[] }
  | { readonly type: "read-audit"; readonly scopeId: string }
  | { readonly type: "request-approval"; readonly runId: string; readonly round: number }
  | { readonly type: "decide"; readonly approvalId: string; readonly operatorRef: string; readonly approve: boolean }
  | { readonly type: "begin-turn"; readonly turn: TurnStart }
  | { readonly type: "claim-effect"; readonly identity: EffectIdentity; readonly maxPerTurn?: number };

export type RaceMessage = { readonly id: number; readonly request: RaceRequest } | { readonly type: "exit" };

/** Child -> parent: that it listens (once), or the answer to request `id`. */
export type RaceAnswer =
  | { readonly type: "ready" }
  | { readonly id: number; readonly ok: true; readonly value: RaceValue }
  | { readonly id: number; readonly ok: false; readonly error: string };

export type RaceValue =
  | { readonly type: "opened"; readonly parts: readonly StorePart[] }
  | { readonly type: "claimed"; readonly result: ClaimResult }
  | { readonly type: "settled"; readonly applied: boolean }
  | { readonly type: "appended" }
  | { readonly type: "audit"; readonly events: readonly { readonly seq: number; readonly toolCallId?: string }[] }
  | { readonly type: "requested" }
  | { readonly type: "decided"; readonly result: ApprovalDecisionResult }
  | { readonly type: "begun"; readonly result: BeginTurnResult }
  | { readonly type: "effect-claimed"; readonly result: EffectClaimResult };

/** A fixed instant: the harness checks races, not clocks. */
export const RACE_TIME = "2030-01-01T00:00:00.000Z";
const TOOL = "race_tool";
const ARGS = { harness: "race" };

/** The turn of `race` round `round` in run `runId`; every run uses its own scope. */
export const raceTurn = (runId: string, race: string, round: number) => ({
  scopeId: `race-${runId}`,
  turnId: `${race}-${String(round)}`,
});

export function raceIdentity(runId: string, round: number): MutationIdentity {
  const of = raceTurn(runId, "claim", round);
  const call = { id: "call-1", name: TOOL, args: ARGS };
  return {
    turnKey: turnKey(of),
    scopeId: of.scopeId,
    toolCallId: call.id,
    toolName: call.name,
    argsDigest: digest(call.args),
    mutationKey: mutationKey(of, call),
    toolFingerprint: toolFingerprint({ name: TOOL }),
  };
}

/** The audit event process `process` appends as its `index`th; `toolCallId` names both. */
export function raceAuditEvent(runId: string, process: number, index: number): AuditEvent {
  const of = raceTurn(runId, "audit", process);
  return {
    at: RACE_TIME,
    decision: "executed",
    turnKey: turnKey(of),
    scopeId: of.scopeId,
    toolCallId: `p${String(process)}-${String(index)}`,
    toolName: TOOL,
    kind: "mutation",
  };
}

export function raceApproval(runId: string, round: number) {
  const of = raceTurn(runId, "approval", round);
  const key = turnKey(of);
  const fingerprint = toolFingerprint({ name: TOOL });
  const argsDigest = digest(ARGS);
  return {
    approvalId: digest({ kind: "arkah.approval", v: 1, turnKey: key, toolName: TOOL, toolFingerprint: fingerprint, toolCallId: "call-1", argsDigest, execution: 0 }),
    turnKey: key,
    scopeId: of.scopeId,
    toolCallId: "call-1",
    toolName: TOOL,
    toolFingerprint: fingerprint,
    argsDigest,
    args: { ...ARGS },
    guardrails: ["race"],
    requestedAt: RACE_TIME,
  };
}

export function raceTurnStart(runId: string, round: number): TurnStart {
  const of = raceTurn(runId, "turn", round);
  const input = { ...of, policyVersion: "race-1", segments: [{ label: "user", content: "race" }] };
  const key = turnKey(input);
  return {
    turnKey: key,
    scopeId: of.scopeId,
    input,
    inputDigest: digest({ kind: "race.turn-input", input }),
    // One request per turn: every run id has its own scope, and turn ids repeat across runs.
    requestKey: digest({ kind: "race.turn-request", turnKey: key }),
    threadId: `turn:${key}`,
  };
}

/**
 * The side effect `variant` of round `round`'s turn in the effects race: variant 0 is the one
 * every process claims at once; the others (one per process) race for the turn's `maxPerTurn`.
 */
export function raceEffectIdentity(runId: string, round: number, variant: number): EffectIdentity {
  const of = raceTurn(runId, "effect", round);
  return effectIdentity(
    { scopeId: of.scopeId, turnKey: turnKey(of) },
    { id: `call-${String(variant)}`, name: TOOL, argsDigest: digest({ ...ARGS, variant }), toolFingerprint: toolFingerprint({ name: TOOL }) },
  );
}
