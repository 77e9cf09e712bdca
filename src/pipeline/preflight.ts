/**
 * Before a person is asked about a mutation: the refusals its claim would certainly answer, found
 * without claiming, so nobody is asked to approve a write that cannot run (and no request is
 * stored, no interrupt raised). Asked only when a call is about to be put to a person: calls
 * without approvals pay nothing. The claim after the approval still decides.
 */
import { EffectStatusSchema, MutationStatusSchema, UnresolvedMutationSchema, type EffectDiscriminator } from "../contracts/index.js";
import { checkMutationStep, effectRefusal, slotRefusal, type Refusal } from "../decision/plan.js";
import { effectIdentity, toolFingerprint } from "../keys.js";
import { readCandidates } from "../decision/transcript.js";
import { REPLAY_ONLY } from "../guardrails/evaluate.js";
import { hasStorePart } from "../store/capabilities.js";
import { isTrustedStore, parseStoreValue } from "../store/validate.js";
import { z } from "zod";
import type { GovernedCall } from "./call.js";
import type { MutationContext } from "./execute.js";
import { discriminate } from "./stages.js";

const UnresolvedListSchema = z.array(UnresolvedMutationSchema);

/**
 * The step rules and the transcript's reads (pure), then the turn's slot (`getMutation`; this
 * call's own `unknown` claim goes on when the tool has `confirm`, which its claim asks), then,
 * when the turn holds no claim and `requireResolvedScope` is on, the scope (`listUnresolved`: only
 * read here, where a person is about to be asked). A store without the `operator` part skips the
 * scope look-up: the claim refuses `scope_unresolved` in its own transaction all the same, so the
 * only loss is that a person may be asked about a write its claim will then refuse.
 */
export function mutationPreflight(call: GovernedCall, context: MutationContext, confirmable = false): () => Promise<Refusal | undefined> {
  return async () => {
    const step = checkMutationStep(call.id, call.step ?? [], context.kindOf);
    if (step !== undefined) return step;
    if (readCandidates(context.messages, context.humanIndex, context.kindOf).length === 0) return { refuse: "read_required" };
    const { store } = call.governance;
    if (store === undefined) return undefined;
    const trusted = isTrustedStore(store);
    const answer = await store.getMutation(call.turn.turnKey);
    const slot = answer === undefined || trusted ? answer : parseStoreValue(MutationStatusSchema, answer, "getMutation answer");
    if (slot !== undefined) return slotRefusal(slot, call, confirmable);
    if (!context.requireResolvedScope || !hasStorePart(store, "operator")) return undefined;
    const listed = await store.listUnresolved();
    const unresolved = trusted ? listed : parseStoreValue(UnresolvedListSchema, listed, "listUnresolved answer");
    const { scopeId, turnKey } = call.turn;
    const blocked = unresolved.some((claim) => claim.state === "unknown" && claim.scopeId === scopeId && claim.turnKey !== turnKey);
    return blocked ? { refuse: "scope_unresolved" } : undefined;
  };
}

/**
 * Before a person is asked about a side effect: its claim as `getEffect` reads it, refused when
 * it is certain never to run (`unknown`, `pruned`), and `replay` when it completed (under this or
 * another call id): the claim can only replay it, so nobody is asked about what already happened.
 * A discriminator that fails refuses it `effect_unidentified`. One store read, and only for calls
 * put to a person.
 */
export function effectPreflight(
  call: GovernedCall,
  discriminator: EffectDiscriminator | undefined,
  confirmable = false,
): () => Promise<Refusal | typeof REPLAY_ONLY | undefined> {
  return async () => {
    const { store } = call.governance;
    if (store === undefined || call.tool === undefined) return undefined;
    const discriminated = discriminate(call, discriminator);
    if (!discriminated.ok) return { refuse: "effect_unidentified" };
    const { effectKey } = effectIdentity(call.turn, {
      id: call.id,
      name: call.name,
      argsDigest: call.checked.argsDigest,
      toolFingerprint: call.fingerprint ?? toolFingerprint(call.tool),
      discriminatorDigest: discriminated.digest,
    });
    const answer = await store.getEffect(effectKey);
    const effect = answer === undefined || isTrustedStore(store) ? answer : parseStoreValue(EffectStatusSchema, answer, "getEffect answer");
    return effect?.state === "complete" ? REPLAY_ONLY : effectRefusal(effect, confirmable);
  };
}
