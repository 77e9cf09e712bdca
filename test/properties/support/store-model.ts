/**
 * A small reference model of the `GuardrailStore` contract (docs/storage-adapters.md, the records
 * and rules table), and the random programs the property tests run against a real store and this
 * model side by side. The model is plain data, so it can be cloned to try every order of a batch
 * of concurrent operations.
 *
 * Written from the contract's text, not from any store: where a store and the model disagree,
 * one of them, or the contract, is wrong.
 */
import { randomUUID } from "node:crypto";
import fc from "fast-check";
import {
  digest,
  effectKey,
  mutationKey,
  turnKey,
  type AdmissionReceipt,
  type ApprovalRecord,
  type AuditEvent,
  type GuardrailStore,
} from "arkah-agent-guardrails";
import {
  toolFingerprint,
  type ClaimResult,
  type EffectClaimResult,
  type EffectIdentity,
  type MutationIdentity,
  type MutationResult,
  type StoredAuditEvent,
  type UnresolvedMutation,
} from "arkah-agent-guardrails/store";

// ---------------------------------------------------------------------------------------------
// The universe a program works in: few turns, calls and digests, so operations collide.

interface Turn {
  readonly scopeId: string;
  readonly turnId: string;
  readonly key: string;
}

const turnOf = (scopeId: string, turnId: string): Turn => ({ scopeId, turnId, key: turnKey({ scopeId, turnId }) });

/** Two turns share a scope (the scope rule), one is alone in another. */
export const TURNS: readonly Turn[] = [turnOf("doc-a", "t1"), turnOf("doc-a", "t2"), turnOf("doc-b", "t1")];

interface Call {
  readonly id: string;
  readonly name: string;
  readonly args: Record<string, string>;
}

/** Two calls a turn may claim; they differ in id and arguments, so their mutation keys differ. */
export const CALLS: readonly Call[] = [
  { id: "m1", name: "rename_document", args: { title: "A" } },
  { id: "m2", name: "rename_document", args: { title: "B" } },
];

const FINGERPRINT = toolFingerprint({ name: "rename_document", description: "Rename the document." });

export const EVIDENCE: readonly string[] = ["e1", "e2"].map((name) => digest({ kind: "property.read", name }));

export const RESULTS: readonly MutationResult[] = [
  { content: '{"title":"A","revision":1}', status: "success" },
  { content: "revision conflict", status: "error" },
];

const OPERATOR_RESULT: MutationResult = { content: '{"title":"by operator"}', status: "success" };

/** A token no claim was ever issued: a forged one. */
const FORGED_TOKEN = "00000000-0000-4000-8000-000000000000";

export function identityOf(turn: Turn, call: Call): MutationIdentity {
  return {
    turnKey: turn.key,
    scopeId: turn.scopeId,
    toolCallId: call.id,
    toolName: call.name,
    argsDigest: digest(call.args),
    mutationKey: mutationKey(turn, call),
    toolFingerprint: FINGERPRINT,
  };
}

/** Side-effect calls: two of one tool (other arguments), one of another tool. */
export const EFFECT_CALLS: readonly Call[] = [
  { id: "e1", name: "send_mail", args: { to: "a" } },
  { id: "e2", name: "send_mail", args: { to: "b" } },
  { id: "e3", name: "open_ticket", args: { title: "a" } },
];

const MAIL_FINGERPRINT = toolFingerprint({ name: "send_mail", description: "Send a mail." });

export function effectIdentityOf(turn: Turn, call: Call): EffectIdentity {
  return {
    turnKey: turn.key,
    scopeId: turn.scopeId,
    toolCallId: call.id,
    toolName: call.name,
    argsDigest: digest(call.args),
    effectKey: effectKey(turn, call),
    toolFingerprint: MAIL_FINGERPRINT,
  };
}

export function approvalIdOf(turn: Turn, call: Call): string {
  return digest({ kind: "property.approval", turnKey: turn.key, callId: call.id });
}

// ---------------------------------------------------------------------------------------------
// Operations: what one worker asks the store, as plain data (printed in counterexamples).

type TokenChoice = "latest" | "first" | "forged";
type AuditDecision = "executed" | "refused" | "verdict";

export type Op =
  | { readonly op: "admit"; readonly turn: number; readonly allowed: boolean; readonly policy: number }
  | { readonly op: "getReceipt"; readonly turn: number }
  | { readonly op: "read"; readonly turn: number; readonly evidence: number; readonly audited: boolean }
  | { readonly op: "hasRead"; readonly turn: number; readonly evidence: number }
  | {
      readonly op: "claim";
      readonly turn: number;
      readonly call: number;
      /** Indexes into EVIDENCE; undefined: the claim does not check evidence. */
      readonly evidence: readonly number[] | undefined;
      readonly requireResolvedScope: boolean | undefined;
    }
  | {
      readonly op: "settle";
      readonly turn: number;
      readonly token: TokenChoice;
      readonly outcome: "complete" | "unknown";
      readonly result: number;
      readonly audited: boolean;
    }
  | { readonly op: "release"; readonly turn: number; readonly token: TokenChoice }
  | { readonly op: "reconcile"; readonly turn: number; readonly resolution: "completed" | "no-effect" }
  | { readonly op: "request"; readonly turn: number; readonly call: number }
  | { readonly op: "decide"; readonly turn: number; readonly call: number; readonly decision: "approve" | "reject" | "edit" }
  | { readonly op: "apply"; readonly turn: number; readonly call: number }
  | { readonly op: "expire"; readonly ageMs: number }
  | { readonly op: "prune"; readonly ageMs: number }
  | { readonly op: "append"; readonly turn: number; readonly decision: AuditDecision }
  | { readonly op: "effectClaim"; readonly turn: number; readonly effect: number; readonly maxPerTurn: number | undefined }
  | {
      readonly op: "effectSettle";
      readonly turn: number;
      readonly effect: number;
      readonly token: TokenChoice;
      readonly outcome: "complete" | "unknown";
      readonly result: number;
    }
  | { readonly op: "effectRelease"; readonly turn: number; readonly effect: number; readonly token: TokenChoice }
  | { readonly op: "effectReconcile"; readonly turn: number; readonly effect: number; readonly resolution: "completed" | "no-effect" };

// Biased to the first turn and call, so operations meet the records earlier ones made.
const turnIndex = fc.constantFrom(0, 0, 0, 1, 1, 2);
const callIndex = fc.constantFrom(0, 0, 0, 1);
const effectIndex = fc.constantFrom(0, 0, 1, 2);
const evidenceIndex = fc.integer({ min: 0, max: EVIDENCE.length - 1 });
const tokenChoice = fc.constantFrom<TokenChoice>("latest", "latest", "first", "forged");
/** Ages around the clock's steps (`tick`), so cutoffs fall before, between and after records. */
const age = fc.constantFrom(0, 1, 30_000, 60_000, 3_600_000);

export const opArbitrary: fc.Arbitrary<Op> = fc.oneof(
  { arbitrary: fc.record({ op: fc.constant("admit" as const), turn: turnIndex, allowed: fc.boolean(), policy: fc.integer({ min: 1, max: 2 }) }), weight: 2 },
  { arbitrary: fc.record({ op: fc.constant("getReceipt" as const), turn: turnIndex }), weight: 1 },
  { arbitrary: fc.record({ op: fc.constant("read" as const), turn: turnIndex, evidence: evidenceIndex, audited: fc.boolean() }), weight: 4 },
  { arbitrary: fc.record({ op: fc.constant("hasRead" as const), turn: turnIndex, evidence: evidenceIndex }), weight: 1 },
  {
    arbitrary: fc.record({
      op: fc.constant("claim" as const),
      turn: turnIndex,
      call: callIndex,
      evidence: fc.option(fc.uniqueArray(evidenceIndex, { maxLength: EVIDENCE.length }), { nil: undefined, freq: 2 }),
      requireResolvedScope: fc.constantFrom(undefined, true, false),
    }),
    weight: 8,
  },
  {
    arbitrary: fc.record({
      op: fc.constant("settle" as const),
      turn: turnIndex,
      token: tokenChoice,
      outcome: fc.constantFrom("complete" as const, "complete" as const, "unknown" as const),
      result: fc.integer({ min: 0, max: RESULTS.length - 1 }),
      audited: fc.boolean(),
    }),
    weight: 5,
  },
  { arbitrary: fc.record({ op: fc.constant("release" as const), turn: turnIndex, token: tokenChoice }), weight: 2 },
  { arbitrary: fc.record({ op: fc.constant("reconcile" as const), turn: turnIndex, resolution: fc.constantFrom("completed" as const, "no-effect" as const) }), weight: 2 },
  { arbitrary: fc.record({ op: fc.constant("request" as const), turn: turnIndex, call: callIndex }), weight: 3 },
  {
    arbitrary: fc.record({
      op: fc.constant("decide" as const),
      turn: turnIndex,
      call: callIndex,
      decision: fc.constantFrom("approve" as const, "reject" as const, "edit" as const),
    }),
    weight: 2,
  },
  { arbitrary: fc.record({ op: fc.constant("apply" as const), turn: turnIndex, call: callIndex }), weight: 1 },
  { arbitrary: fc.record({ op: fc.constant("expire" as const), ageMs: age }), weight: 1 },
  { arbitrary: fc.record({ op: fc.constant("prune" as const), ageMs: age }), weight: 1 },
  {
    arbitrary: fc.record({ op: fc.constant("append" as const), turn: turnIndex, decision: fc.constantFrom<AuditDecision>("executed", "refused", "verdict") }),
    weight: 1,
  },
  {
    arbitrary: fc.record({ op: fc.constant("effectClaim" as const), turn: turnIndex, effect: effectIndex, maxPerTurn: fc.constantFrom(undefined, 1, 2) }),
    weight: 5,
  },
  {
    arbitrary: fc.record({
      op: fc.constant("effectSettle" as const),
      turn: turnIndex,
      effect: effectIndex,
      token: tokenChoice,
      outcome: fc.constantFrom("complete" as const, "complete" as const, "unknown" as const),
      result: fc.integer({ min: 0, max: RESULTS.length - 1 }),
    }),
    weight: 3,
  },
  { arbitrary: fc.record({ op: fc.constant("effectRelease" as const), turn: turnIndex, effect: effectIndex, token: tokenChoice }), weight: 2 },
  {
    arbitrary: fc.record({ op: fc.constant("effectReconcile" as const), turn: turnIndex, effect: effectIndex, resolution: fc.constantFrom("completed" as const, "no-effect" as const) }),
    weight: 1,
  },
);

export function describeOp(op: Op): string {
  const { op: name, ...rest } = op;
  return `${name}(${JSON.stringify(rest)})`;
}

// ---------------------------------------------------------------------------------------------
// The model's state

interface ModelClaim {
  readonly call: number;
  readonly mutationKey: string;
  state: "pending" | "complete" | "unknown" | "pruned";
  readonly token: string;
  readonly claimedAt: number;
  result: MutationResult | undefined;
  settledAt: number | undefined;
}

/** An approval as the model keeps it: what `listApprovals` shows of it. */
interface ModelApproval {
  readonly approvalId: string;
  readonly turn: number;
  readonly call: number;
  status: ApprovalRecord["status"];
  readonly requestedAt: number;
  decision: "approve" | "reject" | "edit" | undefined;
}

/** What of an audit event the model predicts (`at` comes from the shared clock). */
export interface ModelEvent {
  readonly seq: number;
  readonly at: string;
  readonly decision: AuditEvent["decision"];
  readonly turnKey: string;
  readonly toolCallId: string | undefined;
  readonly action: string | undefined;
  readonly code: string | undefined;
}

/** A side effect's claim as the model keeps it. */
interface ModelEffect {
  readonly turn: number;
  readonly effect: number;
  state: "pending" | "complete" | "unknown" | "pruned";
  readonly token: string;
  readonly claimedAt: number;
  result: MutationResult | undefined;
  settledAt: number | undefined;
}

export interface ModelState {
  /** effect key -> its claim; Map order is claim order. */
  effects: Map<string, ModelEffect>;
  /** Every token an effect key was issued, oldest first. */
  effectTokens: Map<string, string[]>;
  receipts: Map<string, AdmissionReceipt>;
  reads: Map<string, Set<string>>;
  /** Map order is claim order: a released or reopened claim, claimed again, goes last. */
  claims: Map<string, ModelClaim>;
  /** Every token a turn was issued, oldest first: settlements and releases pick from these. */
  tokens: Map<string, string[]>;
  /** In request order: a pruned request, asked again, goes last. */
  approvals: ModelApproval[];
  audit: ModelEvent[];
}

export const emptyModel = (): ModelState => ({
  effects: new Map(),
  effectTokens: new Map(),
  receipts: new Map(),
  reads: new Map(),
  claims: new Map(),
  tokens: new Map(),
  approvals: [],
  audit: [],
});

const at = (ms: number): string => new Date(ms).toISOString();

function turnAt(index: number): Turn {
  const turn = TURNS[index];
  if (turn === undefined) throw new Error(`no turn ${String(index)}`);
  return turn;
}

function callAt(index: number): Call {
  const call = CALLS[index];
  if (call === undefined) throw new Error(`no call ${String(index)}`);
  return call;
}

function effectCallAt(index: number): Call {
  const call = EFFECT_CALLS[index];
  if (call === undefined) throw new Error(`no effect call ${String(index)}`);
  return call;
}

const effectKeyOf = (turn: number, effect: number): string => effectKey(turnAt(turn), effectCallAt(effect));

function append(model: ModelState, event: Omit<ModelEvent, "seq">): void {
  model.audit.push({ ...event, seq: model.audit.length + 1 });
}

// ---------------------------------------------------------------------------------------------
// Resolving an op: the store call to make, built once, so the model and the store see the same values.

/** An op with its values fixed at the moment the batch starts (tokens, times). */
export interface Resolved {
  readonly op: Op;
  readonly now: number;
  /** The token a settlement or release presents. */
  readonly token: string | undefined;
  /** The call a settlement's audit event names: the claim's at the start of the batch. */
  readonly claimedCall: number;
}

export function resolve(model: ModelState, op: Op, now: number): Resolved {
  if (op.op === "effectSettle" || op.op === "effectRelease") {
    const issued = model.effectTokens.get(effectKeyOf(op.turn, op.effect)) ?? [];
    const token = op.token === "forged" ? FORGED_TOKEN : op.token === "first" ? issued[0] : issued[issued.length - 1];
    return { op, now, token: token ?? FORGED_TOKEN, claimedCall: 0 };
  }
  if (op.op !== "settle" && op.op !== "release") return { op, now, token: undefined, claimedCall: 0 };
  const key = turnAt(op.turn).key;
  const issued = model.tokens.get(key) ?? [];
  const token = op.token === "forged" ? FORGED_TOKEN : op.token === "first" ? issued[0] : issued[issued.length - 1];
  return { op, now, token: token ?? FORGED_TOKEN, claimedCall: model.claims.get(key)?.call ?? 0 };
}

function receiptOf(op: Extract<Op, { op: "admit" }>, now: number): AdmissionReceipt {
  const turn = turnAt(op.turn);
  return {
    turnKey: turn.key,
    scopeId: turn.scopeId,
    turnId: turn.turnId,
    policyVersion: `policy-${String(op.policy)}`,
    moderationDigest: digest({ kind: "property.segments", turnId: turn.turnId, policy: op.policy }),
    allowed: op.allowed,
    decidedAt: at(now),
  };
}

function settledEvent(turn: Turn, call: Call, outcome: "complete" | "unknown", now: number): AuditEvent {
  return {
    at: at(now),
    decision: outcome === "complete" ? "executed" : "failed",
    turnKey: turn.key,
    scopeId: turn.scopeId,
    toolCallId: call.id,
    toolName: call.name,
    kind: "mutation",
    mutationKey: mutationKey(turn, call),
    ...(outcome === "unknown" ? { code: "mutation_unknown" } : {}),
  };
}

// ---------------------------------------------------------------------------------------------
// Running an op against a store. The answer is normalized: what the contract fixes, nothing else.

export type Answer = unknown;

function claimAnswer(result: ClaimResult): Answer {
  return result.status === "acquired" ? { status: "acquired" } : result;
}

function approvalAnswer(record: ApprovalRecord | undefined): Answer {
  return record === undefined ? undefined : { approvalId: record.approvalId, status: record.status, decision: record.decision?.decision };
}

/** Runs `resolved` against the store: its normalized answer, and the token a claim acquired. */
export async function runOp(
  store: GuardrailStore,
  resolved: Resolved,
): Promise<{ answer: Answer; token?: string }> {
  const { op, now } = resolved;
  switch (op.op) {
    case "admit":
      return { answer: await store.putReceiptIfAbsent(receiptOf(op, now)) };
    case "getReceipt":
      return { answer: await store.getReceipt(turnAt(op.turn).key) };
    case "read": {
      const turn = turnAt(op.turn);
      const evidence = { turnKey: turn.key, evidenceDigest: EVIDENCE[op.evidence] ?? "" };
      const audit: AuditEvent = { at: at(now), decision: "executed", turnKey: turn.key, scopeId: turn.scopeId, toolCallId: `r${String(op.evidence)}`, kind: "document-read" };
      await (op.audited ? store.recordSuccessfulRead(evidence, { audit }) : store.recordSuccessfulRead(evidence));
      return { answer: undefined };
    }
    case "hasRead":
      return { answer: await store.hasSuccessfulRead({ turnKey: turnAt(op.turn).key, evidenceDigest: EVIDENCE[op.evidence] ?? "" }) };
    case "claim": {
      const identity = identityOf(turnAt(op.turn), callAt(op.call));
      const result = await store.claimMutation(identity, {
        ...(op.evidence === undefined ? {} : { readEvidence: op.evidence.map((index) => EVIDENCE[index] ?? "") }),
        ...(op.requireResolvedScope === undefined ? {} : { requireResolvedScope: op.requireResolvedScope }),
      });
      return result.status === "acquired" ? { answer: claimAnswer(result), token: result.token } : { answer: claimAnswer(result) };
    }
    case "settle": {
      const turn = turnAt(op.turn);
      const token = resolved.token ?? FORGED_TOKEN;
      const audit = op.audited ? { audit: settledEvent(turn, callAt(resolved.claimedCall), op.outcome, now) } : {};
      const answer =
        op.outcome === "complete"
          ? await store.settleMutation({ turnKey: turn.key, token, outcome: "complete", result: RESULTS[op.result] ?? OPERATOR_RESULT, ...audit })
          : await store.settleMutation({ turnKey: turn.key, token, outcome: "unknown", ...audit });
      return { answer };
    }
    case "release":
      return { answer: await store.releaseMutation({ turnKey: turnAt(op.turn).key, token: resolved.token ?? FORGED_TOKEN }) };
    case "reconcile": {
      const key = turnAt(op.turn).key;
      const answer = await store.reconcileMutation(
        op.resolution === "completed"
          ? { turnKey: key, resolution: "completed", result: OPERATOR_RESULT, operatorRef: "ops-1" }
          : { turnKey: key, resolution: "no-effect", operatorRef: "ops-1" },
      );
      return { answer };
    }
    case "request": {
      const turn = turnAt(op.turn);
      const call = callAt(op.call);
      const record = await store.requestApproval({
        approvalId: approvalIdOf(turn, call),
        turnKey: turn.key,
        scopeId: turn.scopeId,
        toolCallId: call.id,
        toolName: call.name,
        toolFingerprint: FINGERPRINT,
        argsDigest: digest(call.args),
        args: call.args,
        guardrails: ["manager"],
        requestedAt: at(now),
      });
      return { answer: approvalAnswer(record) };
    }
    case "decide": {
      const turn = turnAt(op.turn);
      const call = callAt(op.call);
      const decision =
        op.decision === "edit" ? { decision: "edit" as const, args: { title: "edited" } } : { decision: op.decision };
      const result = await store.decideApproval({ approvalId: approvalIdOf(turn, call), decision, operatorRef: "ops-2", decidedAt: at(now) });
      return {
        answer: result.decided
          ? { decided: true, ...(result.repeated === true ? { repeated: true } : {}), record: approvalAnswer(result.record) }
          : { decided: false, reason: result.reason, record: approvalAnswer(result.record) },
      };
    }
    case "apply":
      return { answer: await store.applyApproval({ approvalId: approvalIdOf(turnAt(op.turn), callAt(op.call)), appliedAt: at(now) }) };
    case "expire":
      return { answer: await store.expireApprovals({ olderThan: at(now - op.ageMs) }) };
    case "prune":
      return { answer: await store.prune({ olderThan: at(now - op.ageMs) }) };
    case "effectClaim": {
      const identity = effectIdentityOf(turnAt(op.turn), effectCallAt(op.effect));
      const result: EffectClaimResult = op.maxPerTurn === undefined ? await store.claimEffect(identity) : await store.claimEffect(identity, { maxPerTurn: op.maxPerTurn });
      return result.status === "acquired" ? { answer: { status: "acquired" }, token: result.token } : { answer: result };
    }
    case "effectSettle": {
      const key = effectKeyOf(op.turn, op.effect);
      const token = resolved.token ?? FORGED_TOKEN;
      return {
        answer:
          op.outcome === "complete"
            ? await store.settleEffect({ effectKey: key, token, outcome: "complete", result: RESULTS[op.result] ?? OPERATOR_RESULT })
            : await store.settleEffect({ effectKey: key, token, outcome: "unknown" }),
      };
    }
    case "effectRelease":
      return { answer: await store.releaseEffect({ effectKey: effectKeyOf(op.turn, op.effect), token: resolved.token ?? FORGED_TOKEN }) };
    case "effectReconcile": {
      const key = effectKeyOf(op.turn, op.effect);
      return {
        answer: await store.reconcileEffect(
          op.resolution === "completed"
            ? { effectKey: key, resolution: "completed", result: OPERATOR_RESULT, operatorRef: "ops-1" }
            : { effectKey: key, resolution: "no-effect", operatorRef: "ops-1" },
        ),
      };
    }
    case "append": {
      const turn = turnAt(op.turn);
      await store.appendAudit({ at: at(now), decision: op.decision, turnKey: turn.key, scopeId: turn.scopeId, toolCallId: "x1", code: op.decision === "refused" ? "read_required" : undefined });
      return { answer: undefined };
    }
  }
}

// ---------------------------------------------------------------------------------------------
// The model's answer to an op: the contract, applied to plain data.

/**
 * Applies `resolved` to `model` (mutating it) and returns the answer the contract says the store
 * gives. `acquiredToken` is the token the store issued, when it says it acquired the claim: the
 * model cannot guess a random token, only keep the one issued.
 */
export function applyOp(model: ModelState, resolved: Resolved, acquiredToken: string | undefined): Answer {
  const { op, now } = resolved;
  switch (op.op) {
    case "admit": {
      const candidate = receiptOf(op, now);
      const winner = model.receipts.get(candidate.turnKey) ?? candidate;
      model.receipts.set(candidate.turnKey, winner);
      return winner;
    }
    case "getReceipt":
      return model.receipts.get(turnAt(op.turn).key);
    case "read": {
      const turn = turnAt(op.turn);
      const digests = model.reads.get(turn.key) ?? new Set<string>();
      digests.add(EVIDENCE[op.evidence] ?? "");
      model.reads.set(turn.key, digests);
      if (op.audited) append(model, { at: at(now), decision: "executed", turnKey: turn.key, toolCallId: `r${String(op.evidence)}`, action: undefined, code: undefined });
      return undefined;
    }
    case "hasRead":
      return model.reads.get(turnAt(op.turn).key)?.has(EVIDENCE[op.evidence] ?? "") === true;
    case "claim":
      return claim(model, op, now, acquiredToken);
    case "settle": {
      const turn = turnAt(op.turn);
      const existing = model.claims.get(turn.key);
      if (existing?.state !== "pending" || existing.token !== resolved.token) return false;
      existing.state = op.outcome;
      existing.settledAt = now;
      if (op.outcome === "complete") existing.result = RESULTS[op.result];
      if (op.audited) {
        const call = callAt(resolved.claimedCall);
        append(model, {
          at: at(now),
          decision: op.outcome === "complete" ? "executed" : "failed",
          turnKey: turn.key,
          toolCallId: call.id,
          action: undefined,
          code: op.outcome === "unknown" ? "mutation_unknown" : undefined,
        });
      }
      return true;
    }
    case "release": {
      const turn = turnAt(op.turn);
      const existing = model.claims.get(turn.key);
      if (existing?.state !== "pending" || existing.token !== resolved.token) return false;
      model.claims.delete(turn.key);
      append(model, { at: at(now), decision: "released", turnKey: turn.key, toolCallId: callAt(existing.call).id, action: undefined, code: undefined });
      return true;
    }
    case "reconcile": {
      const turn = turnAt(op.turn);
      const existing = model.claims.get(turn.key);
      if (existing === undefined) return { reconciled: false, reason: "not_found" };
      if (existing.state !== "pending" && existing.state !== "unknown") return { reconciled: false, reason: "not_unresolved" };
      const state = existing.state;
      if (op.resolution === "completed") {
        existing.state = "complete";
        existing.result = OPERATOR_RESULT;
        existing.settledAt = now;
      } else {
        model.claims.delete(turn.key);
      }
      append(model, { at: at(now), decision: "reconciled", turnKey: turn.key, toolCallId: callAt(existing.call).id, action: op.resolution, code: undefined });
      return { reconciled: true, state };
    }
    case "request": {
      const turn = turnAt(op.turn);
      const call = callAt(op.call);
      const approvalId = approvalIdOf(turn, call);
      const existing = model.approvals.find((approval) => approval.approvalId === approvalId);
      if (existing !== undefined) return { approvalId, status: existing.status, decision: existing.decision };
      model.approvals.push({ approvalId, turn: op.turn, call: op.call, status: "pending", requestedAt: now, decision: undefined });
      append(model, { at: at(now), decision: "approval", turnKey: turn.key, toolCallId: call.id, action: "requested", code: undefined });
      return { approvalId, status: "pending", decision: undefined };
    }
    case "decide": {
      const turn = turnAt(op.turn);
      const call = callAt(op.call);
      const approvalId = approvalIdOf(turn, call);
      const existing = model.approvals.find((approval) => approval.approvalId === approvalId);
      if (existing === undefined) return { decided: false, reason: "not_found", record: undefined };
      if (existing.status !== "pending") {
        // The decision the request was decided by, delivered again (every decide here names the
        // same operator, and an edit the same arguments): the same answer, nothing appended.
        if (existing.decision === op.decision && existing.status !== "expired") {
          return { decided: true, repeated: true, record: { approvalId, status: existing.status, decision: existing.decision } };
        }
        const reason = existing.status === "expired" ? "expired" : "already_decided";
        append(model, { at: at(now), decision: "approval", turnKey: turn.key, toolCallId: call.id, action: "decision_refused", code: reason });
        return { decided: false, reason, record: { approvalId, status: existing.status, decision: existing.decision } };
      }
      existing.status = op.decision === "approve" ? "approved" : op.decision === "reject" ? "rejected" : "edited";
      existing.decision = op.decision;
      append(model, { at: at(now), decision: "approval", turnKey: turn.key, toolCallId: call.id, action: op.decision, code: undefined });
      return { decided: true, record: { approvalId, status: existing.status, decision: existing.decision } };
    }
    case "apply": {
      const turn = turnAt(op.turn);
      const call = callAt(op.call);
      const existing = model.approvals.find((approval) => approval.approvalId === approvalIdOf(turn, call));
      if (existing?.status !== "approved" && existing?.status !== "edited") return false;
      existing.status = "applied";
      append(model, { at: at(now), decision: "approval", turnKey: turn.key, toolCallId: call.id, action: "applied", code: undefined });
      return true;
    }
    case "expire": {
      const cutoff = now - op.ageMs;
      let expired = 0;
      for (const approval of approvalsByTime(model)) {
        if (approval.status !== "pending" || approval.requestedAt >= cutoff) continue;
        approval.status = "expired";
        const turn = turnAt(approval.turn);
        append(model, { at: at(now), decision: "approval", turnKey: turn.key, toolCallId: callAt(approval.call).id, action: "expired", code: undefined });
        expired++;
      }
      return { expired };
    }
    case "prune": {
      const cutoff = now - op.ageMs;
      // A turn a person can still decide (a pending request) is live: prune leaves it whole.
      const live = new Set(model.approvals.filter((approval) => approval.status === "pending").map((approval) => turnAt(approval.turn).key));
      const pruned = new Set<string>();
      for (const [key, existing] of model.claims) {
        if (existing.state === "complete" && existing.settledAt !== undefined && existing.settledAt < cutoff && !live.has(key)) {
          existing.state = "pruned";
          existing.result = undefined;
          pruned.add(key);
        }
      }
      for (const key of pruned) model.reads.delete(key);
      model.approvals = model.approvals.filter((approval) => !pruned.has(turnAt(approval.turn).key));
      let effects = 0;
      for (const existing of model.effects.values()) {
        if (existing.state === "complete" && existing.settledAt !== undefined && existing.settledAt < cutoff && !live.has(turnAt(existing.turn).key)) {
          existing.state = "pruned";
          existing.result = undefined;
          effects++;
        }
      }
      return { turns: pruned.size, effects };
    }
    case "effectClaim": {
      const key = effectKeyOf(op.turn, op.effect);
      const existing = model.effects.get(key);
      if (existing !== undefined) {
        if (existing.state === "complete" && existing.result !== undefined) return { status: "replay", result: existing.result };
        return { status: existing.state === "complete" ? "unknown" : existing.state };
      }
      const toolName = effectCallAt(op.effect).name;
      const counted = [...model.effects.values()].filter((other) => other.turn === op.turn && effectCallAt(other.effect).name === toolName).length;
      if (op.maxPerTurn !== undefined && counted >= op.maxPerTurn) return { status: "limit_reached" };
      const token = acquiredToken ?? randomUUID();
      model.effects.set(key, { turn: op.turn, effect: op.effect, state: "pending", token, claimedAt: now, result: undefined, settledAt: undefined });
      model.effectTokens.set(key, [...(model.effectTokens.get(key) ?? []), token]);
      return { status: "acquired" };
    }
    case "effectSettle": {
      const existing = model.effects.get(effectKeyOf(op.turn, op.effect));
      if (existing?.state !== "pending" || existing.token !== resolved.token) return false;
      existing.state = op.outcome;
      existing.settledAt = now;
      if (op.outcome === "complete") existing.result = RESULTS[op.result];
      return true;
    }
    case "effectRelease": {
      const key = effectKeyOf(op.turn, op.effect);
      const existing = model.effects.get(key);
      if (existing?.state !== "pending" || existing.token !== resolved.token) return false;
      model.effects.delete(key);
      append(model, { at: at(now), decision: "released", turnKey: turnAt(op.turn).key, toolCallId: effectCallAt(op.effect).id, action: undefined, code: undefined });
      return true;
    }
    case "effectReconcile": {
      const key = effectKeyOf(op.turn, op.effect);
      const existing = model.effects.get(key);
      if (existing === undefined) return { reconciled: false, reason: "not_found" };
      if (existing.state !== "pending" && existing.state !== "unknown") return { reconciled: false, reason: "not_unresolved" };
      const state = existing.state;
      if (op.resolution === "completed") {
        existing.state = "complete";
        existing.result = OPERATOR_RESULT;
        existing.settledAt = now;
      } else {
        model.effects.delete(key);
      }
      append(model, { at: at(now), decision: "reconciled", turnKey: turnAt(op.turn).key, toolCallId: effectCallAt(op.effect).id, action: op.resolution, code: undefined });
      return { reconciled: true, state };
    }
    case "append": {
      const turn = turnAt(op.turn);
      append(model, { at: at(now), decision: op.decision, turnKey: turn.key, toolCallId: "x1", action: undefined, code: op.decision === "refused" ? "read_required" : undefined });
      return undefined;
    }
  }
}

function claim(model: ModelState, op: Extract<Op, { op: "claim" }>, now: number, acquiredToken: string | undefined): Answer {
  const turn = turnAt(op.turn);
  const call = callAt(op.call);
  if (op.evidence !== undefined) {
    const recorded = model.reads.get(turn.key);
    if (!op.evidence.some((index) => recorded?.has(EVIDENCE[index] ?? "") === true)) return { status: "read_required" };
  }
  const key = mutationKey(turn, call);
  const existing = model.claims.get(turn.key);
  if (existing !== undefined) {
    if (existing.state === "pruned") return { status: "conflict" };
    if (existing.mutationKey !== key) {
      if (existing.state !== "complete" || existing.result === undefined) return { status: "conflict" };
      const holder = callAt(existing.call);
      return { status: "conflict", completed: { toolName: holder.name, toolCallId: holder.id, result: existing.result } };
    }
    if (existing.state === "complete" && existing.result !== undefined) return { status: "replay", result: existing.result };
    return { status: existing.state === "unknown" ? "unknown" : "pending" };
  }
  if (op.requireResolvedScope !== false) {
    for (const [otherKey, other] of model.claims) {
      const otherTurn = TURNS.find((candidate) => candidate.key === otherKey);
      if (other.state === "unknown" && otherTurn?.scopeId === turn.scopeId) return { status: "scope_unresolved" };
    }
  }
  // The model cannot mint the store's random token: it keeps the one the store issued, and a
  // store that did not say `acquired` here is caught by the answer comparison.
  const token = acquiredToken ?? randomUUID();
  model.claims.set(turn.key, { call: op.call, mutationKey: key, state: "pending", token, claimedAt: now, result: undefined, settledAt: undefined });
  model.tokens.set(turn.key, [...(model.tokens.get(turn.key) ?? []), token]);
  return { status: "acquired" };
}

/** Oldest request first, ties in request order (a stable sort). */
function approvalsByTime(model: ModelState): ModelApproval[] {
  return [...model.approvals].sort((a, b) => a.requestedAt - b.requestedAt);
}

// ---------------------------------------------------------------------------------------------
// Comparing the whole observable state of a store with the model's.

export interface Observed {
  readonly receipts: readonly (AdmissionReceipt | undefined)[];
  readonly reads: readonly boolean[];
  readonly unresolved: readonly { turnKey: string; state: string; toolCallId: string; claimedAt: string }[];
  readonly approvals: readonly Answer[];
  readonly audit: readonly ModelEvent[];
  /** getEffect of every (turn, effect call), in that order. */
  readonly effects: readonly Answer[];
  readonly unresolvedEffects: readonly { effectKey: string; state: string; toolCallId: string; claimedAt: string }[];
}

/** Unresolved effects, in the order compared: by claim time, ties by effect key. */
function unresolvedEffectOrder(list: Observed["unresolvedEffects"]): Observed["unresolvedEffects"] {
  return [...list].sort((a, b) => Date.parse(a.claimedAt) - Date.parse(b.claimedAt) || a.effectKey.localeCompare(b.effectKey));
}

const EFFECT_SLOTS = TURNS.flatMap((_, turn) => EFFECT_CALLS.map((__, effect) => [turn, effect] as const));

const project = (event: StoredAuditEvent): ModelEvent => ({
  seq: event.seq,
  at: new Date(event.at).toISOString(),
  decision: event.decision,
  turnKey: event.turnKey,
  toolCallId: event.toolCallId,
  action: event.action,
  code: event.code,
});

/** Unresolved claims, in the order compared: by claim time, ties by turn key (the contract leaves ties open). */
function unresolvedOrder(list: Observed["unresolved"]): Observed["unresolved"] {
  return [...list].sort((a, b) => Date.parse(a.claimedAt) - Date.parse(b.claimedAt) || a.turnKey.localeCompare(b.turnKey));
}

export async function observeStore(store: GuardrailStore): Promise<Observed> {
  const receipts = await Promise.all(TURNS.map((turn) => store.getReceipt(turn.key)));
  const reads = await Promise.all(
    TURNS.flatMap((turn) => EVIDENCE.map((evidenceDigest) => store.hasSuccessfulRead({ turnKey: turn.key, evidenceDigest }))),
  );
  const unresolved: UnresolvedMutation[] = await store.listUnresolved();
  for (let index = 1; index < unresolved.length; index++) {
    const [before, after] = [unresolved[index - 1], unresolved[index]];
    if (before !== undefined && after !== undefined && Date.parse(before.claimedAt) > Date.parse(after.claimedAt)) {
      throw new Error(`listUnresolved is not oldest claim first: ${before.claimedAt} before ${after.claimedAt}`);
    }
  }
  const approvals = await store.listApprovals();
  const audit = await store.readAudit();
  const effects = await Promise.all(EFFECT_SLOTS.map(([turn, effect]) => store.getEffect(effectKeyOf(turn, effect))));
  const unresolvedEffects = await store.listUnresolvedEffects();
  for (let index = 1; index < unresolvedEffects.length; index++) {
    const [before, after] = [unresolvedEffects[index - 1], unresolvedEffects[index]];
    if (before !== undefined && after !== undefined && Date.parse(before.claimedAt) > Date.parse(after.claimedAt)) {
      throw new Error(`listUnresolvedEffects is not oldest claim first: ${before.claimedAt} before ${after.claimedAt}`);
    }
  }
  return {
    effects,
    unresolvedEffects: unresolvedEffectOrder(
      unresolvedEffects.map((entry) => ({ effectKey: entry.effectKey, state: entry.state, toolCallId: entry.toolCallId, claimedAt: new Date(entry.claimedAt).toISOString() })),
    ),
    receipts,
    reads,
    unresolved: unresolvedOrder(
      unresolved.map((entry) => ({ turnKey: entry.turnKey, state: entry.state, toolCallId: entry.toolCallId, claimedAt: new Date(entry.claimedAt).toISOString() })),
    ),
    approvals: approvals.map(approvalAnswer),
    audit: audit.map(project),
  };
}

export function observeModel(model: ModelState): Observed {
  const unresolved: Observed["unresolved"][number][] = [];
  for (const [key, existing] of model.claims) {
    if (existing.state === "pending" || existing.state === "unknown") {
      unresolved.push({ turnKey: key, state: existing.state, toolCallId: callAt(existing.call).id, claimedAt: at(existing.claimedAt) });
    }
  }
  const unresolvedEffects: Observed["unresolvedEffects"][number][] = [];
  for (const [key, existing] of model.effects) {
    if (existing.state === "pending" || existing.state === "unknown") {
      unresolvedEffects.push({ effectKey: key, state: existing.state, toolCallId: effectCallAt(existing.effect).id, claimedAt: at(existing.claimedAt) });
    }
  }
  const effects = EFFECT_SLOTS.map(([turn, effect]) => {
    const existing = model.effects.get(effectKeyOf(turn, effect));
    if (existing === undefined) return undefined;
    const { name: toolName, id: toolCallId } = effectCallAt(existing.effect);
    return existing.state === "complete" ? { state: existing.state, toolName, toolCallId, result: existing.result } : { state: existing.state, toolName, toolCallId };
  });
  return {
    effects,
    unresolvedEffects: unresolvedEffectOrder(unresolvedEffects),
    receipts: TURNS.map((turn) => model.receipts.get(turn.key)),
    reads: TURNS.flatMap((turn) => EVIDENCE.map((evidence) => model.reads.get(turn.key)?.has(evidence) === true)),
    unresolved: unresolvedOrder(unresolved),
    approvals: approvalsByTime(model).map((approval) => ({ approvalId: approval.approvalId, status: approval.status, decision: approval.decision })),
    audit: model.audit,
  };
}

/** A deep copy of the model, to try one order of a concurrent batch on. */
export function cloneModel(model: ModelState): ModelState {
  return structuredClone(model);
}

/** Every order of `items` (a batch holds at most three ops: at most six orders). */
export function permutations<T>(items: readonly T[]): T[][] {
  if (items.length <= 1) return [[...items]];
  return items.flatMap((item, index) =>
    permutations([...items.slice(0, index), ...items.slice(index + 1)]).map((rest) => [item, ...rest]),
  );
}
