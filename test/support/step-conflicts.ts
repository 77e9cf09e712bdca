/**
 * Step conflicts of `KeyValueGuardrailStore` under concurrency, measured on any adapter through the
 * base's `onStep` footprints: `workers` turns, each in its own scope, run a guarded mutation's
 * steps at once (record the read with its audit event, claim with the read evidence, settle with
 * its audit event), then a side effect's (claim, settle), then the other audited steps of a turn
 * (an event of its own, an approval request and its decision), and last each turn reads its own
 * audit trail (as the turn service does for a completed outcome). Two concurrent steps conflict when
 * one writes a key the other read or wrote, or writes into a collection the other scanned: on
 * storage with optimistic concurrency (Redis `WATCH`, conditional writes) one of them aborts and
 * runs again. The adapters here serialize their steps, so nothing re-runs; the footprints say what
 * would, whatever the adapter.
 */
import { digest, effectKey, mutationKey, turnKey, type ApprovalSubmission, type AuditEvent } from "arkah-agent-guardrails";
import { toolFingerprint } from "arkah-agent-guardrails/store";
import type { EffectIdentity, KeyValueGuardrailStore, KeyValueStepFootprint, MutationIdentity } from "arkah-agent-guardrails/store";

/** The operations measured, in the order a turn runs them. */
export const MEASURED_STEPS = [
  "recordSuccessfulRead",
  "claimMutation",
  "settleMutation",
  "claimEffect",
  "settleEffect",
  "appendAudit",
  "requestApproval",
  "decideApproval",
  "readAudit",
] as const;
/** One of {@link MEASURED_STEPS}. */
export type MeasuredStep = (typeof MEASURED_STEPS)[number];

/** For one operation run concurrently by every worker: how many of its steps conflict with another worker's. */
export interface StepConflicts {
  /** The operation. */
  readonly step: MeasuredStep;
  /** Its steps (one per worker). */
  readonly steps: number;
  /** Steps that conflict with at least one other worker's step of the same operation (every worker's turn is in another scope). */
  readonly conflicting: number;
  /** The keys behind the conflicts, as `collection/key` (collection names only for scans), each once. */
  readonly hotKeys: readonly string[];
}

/** A store on the key-value base opened with `onStep` set to the given observer. */
export type ObservedStoreFactory = (onStep: (footprint: KeyValueStepFootprint) => void) => Promise<KeyValueGuardrailStore> | KeyValueGuardrailStore;

const call = { id: "write-1", name: "rename_document", args: { title: "Field notes" } };
const mail = { id: "mail-1", name: "send_mail", args: { to: "ops@example.com" } };

function turnOf(index: number) {
  const ref = { scopeId: `doc-${String(index)}`, turnId: `turn-${String(index)}` };
  const key = turnKey(ref);
  const identity: MutationIdentity = {
    turnKey: key,
    scopeId: ref.scopeId,
    toolCallId: call.id,
    toolName: call.name,
    argsDigest: digest(call.args),
    mutationKey: mutationKey(ref, call),
    toolFingerprint: toolFingerprint({ name: call.name }),
  };
  const effect: EffectIdentity = {
    effectKey: effectKey(ref, mail),
    turnKey: key,
    scopeId: ref.scopeId,
    toolCallId: mail.id,
    toolName: mail.name,
    argsDigest: digest(mail.args),
    toolFingerprint: toolFingerprint({ name: mail.name }),
  };
  const event = (decision: AuditEvent["decision"]): AuditEvent => ({ at: new Date().toISOString(), decision, turnKey: key, scopeId: ref.scopeId, kind: "mutation" });
  const approval: ApprovalSubmission = {
    approvalId: digest({ kind: "step-conflicts.approval", index }),
    turnKey: key,
    scopeId: ref.scopeId,
    toolCallId: "approve-1",
    toolName: call.name,
    toolFingerprint: toolFingerprint({ name: call.name }),
    argsDigest: digest(call.args),
    args: call.args,
    guardrails: ["manager"],
    requestedAt: new Date().toISOString(),
  };
  return { identity, effect, event, approval, evidence: digest({ kind: "step-conflicts.read", index }) };
}

/** Steps of one operation, run concurrently, that conflict with another's; and on which keys. */
export function conflictsAmong(step: MeasuredStep, footprints: readonly KeyValueStepFootprint[]): StepConflicts {
  const id = (collection: string, key: string) => `${collection}/${key}`;
  const writes = footprints.map((footprint) => new Set(footprint.writes.map(({ collection, key }) => id(collection, key))));
  const written = footprints.map((footprint) => new Set(footprint.writes.map(({ collection }) => collection)));
  const hot = new Set<string>();
  let conflicting = 0;
  footprints.forEach((footprint, index) => {
    const touched = [...footprint.reads, ...footprint.writes].map(({ collection, key }) => id(collection, key));
    let conflicts = false;
    footprints.forEach((_other, other) => {
      if (other === index) return;
      for (const key of touched) {
        if (writes[other]?.has(key) === true) {
          conflicts = true;
          hot.add(key);
        }
      }
      for (const collection of footprint.scans) {
        if (written[other]?.has(collection) === true) {
          conflicts = true;
          hot.add(collection);
        }
      }
    });
    if (conflicts) conflicting++;
  });
  return { step, steps: footprints.length, conflicting, hotKeys: [...hot].sort() };
}

/**
 * Runs the measured operations for `workers` turns of different scopes on a store `open` makes,
 * each operation started for every worker at once, and answers the conflicts per operation. One
 * warm-up call first, so a store's first step (its layout check) is not measured.
 */
export async function measureStepConflicts(open: ObservedStoreFactory, workers: number): Promise<StepConflicts[]> {
  let current: KeyValueStepFootprint[] | undefined;
  const store = await open((footprint) => current?.push(footprint));
  await store.getMutation(turnOf(-1).identity.turnKey);
  const turns = Array.from({ length: workers }, (_, index) => turnOf(index));
  const results: StepConflicts[] = [];
  const round = async (step: MeasuredStep, run: (turn: (typeof turns)[number]) => Promise<unknown>) => {
    const footprints: KeyValueStepFootprint[] = [];
    current = footprints;
    await Promise.all(turns.map(run));
    current = undefined;
    results.push(conflictsAmong(step, footprints));
  };
  const tokens = new Map<string, string>();
  const effectTokens = new Map<string, string>();
  await round("recordSuccessfulRead", ({ identity, evidence, event }) =>
    store.recordSuccessfulRead({ turnKey: identity.turnKey, evidenceDigest: evidence }, { audit: event("executed") }),
  );
  await round("claimMutation", async ({ identity, evidence }) => {
    const claimed = await store.claimMutation(identity, { requireResolvedScope: true, readEvidence: [evidence] });
    if (claimed.status !== "acquired") throw new Error(`measureStepConflicts: claim answered ${claimed.status}`);
    tokens.set(identity.turnKey, claimed.token);
  });
  await round("settleMutation", ({ identity, event }) =>
    store.settleMutation({
      turnKey: identity.turnKey,
      token: tokens.get(identity.turnKey) ?? "",
      outcome: "complete",
      result: { content: "renamed", status: "success" },
      audit: event("executed"),
    }),
  );
  await round("claimEffect", async ({ effect }) => {
    const claimed = await store.claimEffect(effect, { maxPerTurn: 3 });
    if (claimed.status !== "acquired") throw new Error(`measureStepConflicts: effect claim answered ${claimed.status}`);
    effectTokens.set(effect.effectKey, claimed.token);
  });
  await round("settleEffect", ({ effect }) =>
    store.settleEffect({ effectKey: effect.effectKey, token: effectTokens.get(effect.effectKey) ?? "", outcome: "complete", result: { content: "sent", status: "success" } }),
  );
  await round("appendAudit", ({ event }) => store.appendAudit(event("refused")));
  await round("requestApproval", ({ approval }) => store.requestApproval(approval));
  await round("decideApproval", ({ approval }) =>
    store.decideApproval({ approvalId: approval.approvalId, decision: { decision: "approve" }, decidedAt: new Date().toISOString() }),
  );
  await round("readAudit", ({ identity }) => store.readAudit({ turnKey: identity.turnKey }));
  return results;
}
