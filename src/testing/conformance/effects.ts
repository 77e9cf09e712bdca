/**
 * Side effects (the `effects` part): one claim per effect key (turn, tool, arguments), with six
 * answers; settlement and release as compare-and-sets by the claim token; `maxPerTurn` counted per
 * (turn, tool) in the claim's own transaction; reconciliation by an operator; prune to tombstones.
 * None of it touches the turn's mutation slot.
 */
import { expect } from "vitest";
import {
  EffectClaimResultSchema,
  EffectStatusSchema,
  ReconcileResultSchema,
  UnresolvedEffectSchema,
  type EffectClaimOptions,
  type EffectClaimResult,
  type EffectIdentity,
  type GuardrailStore,
  type MutationResult,
  type StoredAuditEvent,
  type TurnRef,
  type UnresolvedEffect,
} from "../../contracts/index.js";
import { digest } from "../../digest.js";
import { effectIdentity, turnKey } from "../../keys.js";
import {
  acquire,
  auditEvent,
  claim,
  conform,
  ERROR_RESULT,
  expectBoolean,
  expectContractError,
  expectInstant,
  fingerprintOfCall,
  identity,
  OPERATOR_RESULT,
  readAudit,
  RESULT,
  SIBLING,
  STRANGER,
  TURN,
  turn,
  type Call,
} from "./fixtures.js";
import type { StoreTest } from "./harness.js";

// ---------------------------------------------------------------------------------------------
// Fixtures

/** A side-effect call: a mail sent from the turn. */
export const MAIL: Call = Object.freeze({ id: "mail-1", name: "send_mail", args: Object.freeze({ to: "ops@example.com", subject: "Renamed" }) });
/** Another tool's side effect in the same turn. */
const TICKET: Call = Object.freeze({ id: "ticket-1", name: "open_ticket", args: Object.freeze({ title: "Renamed" }) });

/** The `n`th distinct mail of a turn (other arguments: another effect key). */
const mail = (n: number): Call => ({ ...MAIL, id: `mail-${String(n)}`, args: { ...MAIL.args, subject: `Renamed #${String(n)}` } });

/** The identity the middleware would claim `call` under in `of`. */
export function effect(of: TurnRef = TURN, call: Call = MAIL): EffectIdentity {
  return effectIdentity(
    { scopeId: of.scopeId, turnKey: turnKey(of) },
    { id: call.id, name: call.name, argsDigest: digest(call.args), toolFingerprint: fingerprintOfCall(call) },
  );
}

const SENT: MutationResult = Object.freeze({ content: '{"messageId":"m-42"}', status: "success" });

async function claimEffect(store: GuardrailStore, id: EffectIdentity = effect(), options?: EffectClaimOptions): Promise<EffectClaimResult> {
  const result = options === undefined ? await store.claimEffect(id) : await store.claimEffect(id, options);
  return conform(EffectClaimResultSchema, result, "claimEffect's answer");
}

async function acquireEffect(store: GuardrailStore, id: EffectIdentity = effect(), options?: EffectClaimOptions): Promise<string> {
  const result = await claimEffect(store, id, options);
  if (result.status !== "acquired") throw new Error(`expected the effect ${id.toolCallId} to be acquired, got ${result.status}`);
  return result.token;
}

async function completeEffect(store: GuardrailStore, id: EffectIdentity = effect(), result: MutationResult = SENT): Promise<void> {
  const token = await acquireEffect(store, id);
  expectBoolean(await store.settleEffect({ effectKey: id.effectKey, token, outcome: "complete", result }), true, "settling the effect complete");
}

async function unknownEffect(store: GuardrailStore, id: EffectIdentity = effect()): Promise<void> {
  const token = await acquireEffect(store, id);
  expectBoolean(await store.settleEffect({ effectKey: id.effectKey, token, outcome: "unknown" }), true, "settling the effect unknown");
}

async function unresolvedEffects(store: GuardrailStore): Promise<UnresolvedEffect[]> {
  const list = await store.listUnresolvedEffects();
  expect(Array.isArray(list), "listUnresolvedEffects must answer an array").toBe(true);
  list.forEach((entry, index) => conform(UnresolvedEffectSchema, entry, `listUnresolvedEffects()[${String(index)}]`));
  return list;
}

async function getEffect(store: GuardrailStore, id: EffectIdentity = effect()) {
  const status = await store.getEffect(id.effectKey);
  if (status !== undefined) conform(EffectStatusSchema, status, "getEffect's answer");
  return status;
}

const statusesOf = (results: readonly EffectClaimResult[], status: EffectClaimResult["status"]) =>
  results.filter((result) => result.status === status).length;

/** The audit event every effect event carries: the effect's identity and kind "side-effect". */
function expectEffectEvent(event: StoredAuditEvent | undefined, id: EffectIdentity, decision: "released" | "reconciled", atMs: number): void {
  expect(event, `the ${decision} event: its decision, the effect's identity, kind "side-effect" and effectKey`).toMatchObject({
    decision,
    turnKey: id.turnKey,
    scopeId: id.scopeId,
    toolCallId: id.toolCallId,
    toolName: id.toolName,
    toolFingerprint: id.toolFingerprint,
    kind: "side-effect",
    argsDigest: id.argsDigest,
    effectKey: id.effectKey,
  });
  expect(event, `a ${decision} effect event names no mutation key`).not.toHaveProperty("mutationKey");
  expect(event, `a ${decision} effect event carries no argument values`).not.toHaveProperty("args");
  expectInstant(event?.at, atMs, `the ${decision} event's time`);
}

// ---------------------------------------------------------------------------------------------
// The suite

export function effectsSuite(test: StoreTest): void {
  claimTests(test);
  settlementTests(test);
  releaseTests(test);
  limitTests(test);
  reconciliationTests(test);
  listingTests(test);
  pruneTests(test);
  independenceTests(test);
  validationTests(test);
}

function claimTests(test: StoreTest): void {
  test("acquired: a new effect is claimed with a non-empty token, and reads back pending without a result", async ({ store }) => {
    const token = await acquireEffect(store);
    expect(token, "the claim token is not empty").not.toBe("");
    expect(await getEffect(store), "getEffect of a pending effect").toEqual({ state: "pending", toolName: MAIL.name, toolCallId: MAIL.id });
  });

  test("pending: the same effect while its claim is open, also asked for under a new call id", async ({ store }) => {
    await acquireEffect(store);
    expect(await claimEffect(store), "the same call again").toEqual({ status: "pending" });
    expect(await claimEffect(store, effect(TURN, { ...MAIL, id: "mail-again" })), "the same effect under a new call id").toEqual({ status: "pending" });
  });

  test("replay: the same effect after it completed gets the stored result, every time, under any call id", async ({ store }) => {
    await completeEffect(store);
    expect(await claimEffect(store), "the first replay").toEqual({ status: "replay", result: SENT });
    expect(await claimEffect(store, effect(TURN, { ...MAIL, id: "mail-again" })), "a replay under a new call id").toEqual({ status: "replay", result: SENT });
    expect(await getEffect(store), "getEffect of a completed effect shows its result").toEqual({ state: "complete", toolName: MAIL.name, toolCallId: MAIL.id, result: SENT });
  });

  test("replay: an error result is replayed as an error, and content is returned exactly", async ({ store }) => {
    await completeEffect(store, effect(), ERROR_RESULT);
    expect(await claimEffect(store), "the error result is replayed").toEqual({ status: "replay", result: ERROR_RESULT });
    const odd: MutationResult = { content: "ünïcødé ✓ 🚀 \u2028 '\"\\%_;-- \u0000 end", status: "success" };
    const other = effect(TURN, mail(2));
    await completeEffect(store, other, odd);
    expect(await claimEffect(store, other), "odd content is replayed exactly").toEqual({ status: "replay", result: odd });
  });

  test("unknown: an effect settled unknown answers unknown, and reads back without a result", async ({ store }) => {
    await unknownEffect(store);
    expect(await claimEffect(store), "the same effect after an ambiguous outcome").toEqual({ status: "unknown" });
    expect(await getEffect(store), "getEffect of an unknown effect").toEqual({ state: "unknown", toolName: MAIL.name, toolCallId: MAIL.id });
  });

  test("every part of the key makes another effect: the turn, the tool and the arguments, not the call id", async ({ store }) => {
    await acquireEffect(store);
    for (const [label, other] of [
      ["another turn", effect(SIBLING)],
      ["another scope", effect(STRANGER)],
      ["another tool", effect(TURN, { ...MAIL, name: "send_other_mail" })],
      ["other arguments", effect(TURN, mail(7))],
    ] as const) {
      expect((await claimEffect(store, other)).status, `${label}: a new effect`).toBe("acquired");
    }
    expect(effect(TURN, { ...MAIL, id: "other-id" }).effectKey, "the call id is not part of the effect key").toBe(effect().effectKey);
  });

  test("getEffect of an effect never claimed is undefined", async ({ store }) => {
    expect(await store.getEffect(effect().effectKey), "getEffect of a fresh key").toBeUndefined();
  });

  test("ids round-trip exactly: a lone surrogate, a NUL and U+0001 in the call id and tool name", async ({ store }) => {
    // Built by hand: keys are digests of well-formed text, but a store must keep any id exactly.
    const odd: EffectIdentity = { ...effect(), scopeId: "doc-\ud800", toolCallId: "call-\u0000-\u0001", toolName: "mail-\udc00", effectKey: digest({ odd: 1 }) };
    await acquireEffect(store, odd);
    const [listed] = await unresolvedEffects(store);
    expect(listed === undefined ? undefined : { ...listed, claimedAt: undefined }, "the listed identity is exactly the claimed one").toEqual({ ...odd, state: "pending", claimedAt: undefined });
    expect(await getEffect(store, odd), "getEffect names the tool and call exactly").toEqual({ state: "pending", toolName: odd.toolName, toolCallId: odd.toolCallId });
    const replaced: EffectIdentity = { ...odd, toolName: "mail-\ufffd", effectKey: digest({ odd: 2 }) };
    expect((await claimEffect(store, replaced, { maxPerTurn: 1 })).status, "a tool name that differs by a replaced surrogate is another tool under the limit").toBe("acquired");
  });

  test("concurrent claims of one effect: exactly one acquired, the rest pending", async ({ store }) => {
    const results = await Promise.all(Array.from({ length: 16 }, (_, index) => claimEffect(store, effect(TURN, { ...MAIL, id: `racer-${String(index)}` }))));
    expect(statusesOf(results, "acquired"), "one winner").toBe(1);
    expect(statusesOf(results, "pending"), "every other claim sees it pending").toBe(15);
  });
}

function settlementTests(test: StoreTest): void {
  test("settlement is a compare-and-set by the claim token: a wrong token changes nothing", async ({ store }) => {
    const token = await acquireEffect(store);
    expectBoolean(await store.settleEffect({ effectKey: effect().effectKey, token: `${token}-forged`, outcome: "complete", result: SENT }), false, "settling with another token");
    expectBoolean(await store.settleEffect({ effectKey: effect(SIBLING).effectKey, token, outcome: "complete", result: SENT }), false, "settling an effect never claimed");
    expect(await getEffect(store), "still pending").toMatchObject({ state: "pending" });
    expectBoolean(await store.settleEffect({ effectKey: effect().effectKey, token, outcome: "complete", result: SENT }), true, "settling with the token");
  });

  test("a settled effect is settled once: a second settlement with the same token answers false", async ({ store }) => {
    const token = await acquireEffect(store);
    const key = effect().effectKey;
    expectBoolean(await store.settleEffect({ effectKey: key, token, outcome: "complete", result: SENT }), true, "the first settlement");
    expectBoolean(await store.settleEffect({ effectKey: key, token, outcome: "unknown" }), false, "unknown after complete");
    expectBoolean(await store.settleEffect({ effectKey: key, token, outcome: "complete", result: ERROR_RESULT }), false, "complete again");
    expect(await claimEffect(store), "the first result stands").toEqual({ status: "replay", result: SENT });
    const other = effect(SIBLING);
    const second = await acquireEffect(store, other);
    expectBoolean(await store.settleEffect({ effectKey: other.effectKey, token: second, outcome: "unknown" }), true, "settled unknown");
    expectBoolean(await store.settleEffect({ effectKey: other.effectKey, token: second, outcome: "complete", result: SENT }), false, "complete after unknown");
    expect(await claimEffect(store, other), "unknown stands").toEqual({ status: "unknown" });
  });

  test("concurrent settlements with the token: exactly one applies", async ({ store }) => {
    const token = await acquireEffect(store);
    const key = effect().effectKey;
    const results = await Promise.all(
      Array.from({ length: 8 }, (_, index) =>
        index % 2 === 0 ? store.settleEffect({ effectKey: key, token, outcome: "complete", result: SENT }) : store.settleEffect({ effectKey: key, token, outcome: "unknown" }),
      ),
    );
    expect(results.filter((value) => value), "one settlement applied").toHaveLength(1);
  });

  test("a settlement's audit event is appended exactly when the settlement applies", async ({ store }) => {
    const token = await acquireEffect(store);
    const key = effect().effectKey;
    const event = auditEvent({ decision: "executed", kind: "side-effect", toolCallId: MAIL.id, toolName: MAIL.name, effectKey: key });
    expectBoolean(await store.settleEffect({ effectKey: key, token: "not-the-token", outcome: "complete", result: SENT, audit: event }), false, "a settlement with a wrong token");
    expect(await readAudit(store), "no event for a settlement that did not apply").toEqual([]);
    expectBoolean(await store.settleEffect({ effectKey: key, token, outcome: "complete", result: SENT, audit: event }), true, "the settlement");
    expect((await readAudit(store)).map(({ seq: _seq, ...rest }) => rest), "its event, once").toEqual([event]);
    expectBoolean(await store.settleEffect({ effectKey: key, token, outcome: "unknown", audit: event }), false, "a second settlement");
    expect(await readAudit(store), "still one event").toHaveLength(1);
  });
}

function releaseTests(test: StoreTest): void {
  test("release by the token removes the claim, appends one released event, and the effect may be claimed again", async ({ store, clock }) => {
    const token = await acquireEffect(store);
    clock.advance(1_000);
    expectBoolean(await store.releaseEffect({ effectKey: effect().effectKey, token }), true, "releasing with the token");
    expect(await store.getEffect(effect().effectKey), "the claim is gone").toBeUndefined();
    expect(await unresolvedEffects(store), "nothing unresolved").toEqual([]);
    const events = await readAudit(store);
    expect(events, "one event").toHaveLength(1);
    expectEffectEvent(events[0], effect(), "released", clock.ms);
    expect(events[0], "a release is no operator's decision: no operatorRef").not.toHaveProperty("operatorRef");
    expect(events[0], "a release has no resolution: no action").not.toHaveProperty("action");
    const again = await acquireEffect(store);
    expect(again, "a new claim gets a new token").not.toBe(token);
  });

  test("release applies only to a pending claim with its token: wrong token, settled, released, never claimed", async ({ store }) => {
    const key = effect().effectKey;
    const token = await acquireEffect(store);
    expectBoolean(await store.releaseEffect({ effectKey: key, token: `${token}-forged` }), false, "a wrong token");
    expectBoolean(await store.releaseEffect({ effectKey: effect(SIBLING).effectKey, token }), false, "an effect never claimed");
    expectBoolean(await store.settleEffect({ effectKey: key, token, outcome: "complete", result: SENT }), true, "settled");
    expectBoolean(await store.releaseEffect({ effectKey: key, token }), false, "a settled effect");
    expect(await claimEffect(store), "the settled effect replays").toEqual({ status: "replay", result: SENT });
    const other = effect(SIBLING);
    const second = await acquireEffect(store, other);
    expectBoolean(await store.settleEffect({ effectKey: other.effectKey, token: second, outcome: "unknown" }), true, "settled unknown");
    expectBoolean(await store.releaseEffect({ effectKey: other.effectKey, token: second }), false, "an unknown effect");
    const third = effect(STRANGER);
    const thirdToken = await acquireEffect(store, third);
    expectBoolean(await store.releaseEffect({ effectKey: third.effectKey, token: thirdToken }), true, "released");
    expectBoolean(await store.releaseEffect({ effectKey: third.effectKey, token: thirdToken }), false, "released twice");
    expectBoolean(await store.settleEffect({ effectKey: third.effectKey, token: thirdToken, outcome: "complete", result: SENT }), false, "settling a released claim");
    expect((await readAudit(store)).map((event) => event.decision), "one released event in all").toEqual(["released"]);
  });

  test("concurrent releases with the token: exactly one applies, with one event", async ({ store }) => {
    const token = await acquireEffect(store);
    const results = await Promise.all(Array.from({ length: 8 }, () => store.releaseEffect({ effectKey: effect().effectKey, token })));
    expect(results.filter((value) => value), "one release applied").toHaveLength(1);
    expect(await readAudit(store), "one released event").toHaveLength(1);
  });
}

function limitTests(test: StoreTest): void {
  test("maxPerTurn: a new effect beyond the limit answers limit_reached and changes nothing", async ({ store }) => {
    await acquireEffect(store, effect(TURN, mail(1)), { maxPerTurn: 2 });
    await completeEffect(store, effect(TURN, mail(2)));
    const before = await unresolvedEffects(store);
    expect(await claimEffect(store, effect(TURN, mail(3)), { maxPerTurn: 2 }), "the third mail").toEqual({ status: "limit_reached" });
    expect(await store.getEffect(effect(TURN, mail(3)).effectKey), "no claim was made").toBeUndefined();
    expect(await unresolvedEffects(store), "nothing changed").toEqual(before);
    expect(await readAudit(store), "no event").toEqual([]);
    expect((await claimEffect(store, effect(TURN, mail(3)), { maxPerTurn: 3 })).status, "a higher limit admits it").toBe("acquired");
    expect((await claimEffect(store, effect(TURN, mail(4)))).status, "no limit admits anything").toBe("acquired");
  });

  test("maxPerTurn counts one tool in one turn: not other tools, not other turns", async ({ store }) => {
    await acquireEffect(store, effect(TURN, mail(1)), { maxPerTurn: 1 });
    expect(await claimEffect(store, effect(TURN, mail(2)), { maxPerTurn: 1 }), "a second mail of the turn").toEqual({ status: "limit_reached" });
    expect((await claimEffect(store, effect(TURN, TICKET), { maxPerTurn: 1 })).status, "another tool of the turn").toBe("acquired");
    expect((await claimEffect(store, effect(SIBLING, mail(2)), { maxPerTurn: 1 })).status, "the same tool in another turn").toBe("acquired");
    expect((await claimEffect(store, effect(STRANGER, mail(2)), { maxPerTurn: 1 })).status, "the same tool in another scope's turn").toBe("acquired");
  });

  test("maxPerTurn never limits an existing effect: it answers pending, replay or unknown as usual", async ({ store }) => {
    await acquireEffect(store, effect(TURN, mail(1)));
    await completeEffect(store, effect(TURN, mail(2)));
    await unknownEffect(store, effect(TURN, mail(3)));
    expect(await claimEffect(store, effect(TURN, mail(1)), { maxPerTurn: 1 }), "the pending one").toEqual({ status: "pending" });
    expect(await claimEffect(store, effect(TURN, mail(2)), { maxPerTurn: 1 }), "the completed one").toEqual({ status: "replay", result: SENT });
    expect(await claimEffect(store, effect(TURN, mail(3)), { maxPerTurn: 1 }), "the unknown one").toEqual({ status: "unknown" });
  });

  test("maxPerTurn counts pending, completed, unknown and pruned effects; a release frees its place", async ({ store }) => {
    const first = effect(TURN, mail(1));
    const token = await acquireEffect(store, first, { maxPerTurn: 3 });
    await completeEffect(store, effect(TURN, mail(2)));
    await unknownEffect(store, effect(TURN, mail(3)));
    expect(await claimEffect(store, effect(TURN, mail(4)), { maxPerTurn: 3 }), "pending, complete and unknown all count").toEqual({ status: "limit_reached" });
    expectBoolean(await store.releaseEffect({ effectKey: first.effectKey, token }), true, "releasing the pending one");
    expect((await claimEffect(store, effect(TURN, mail(4)), { maxPerTurn: 3 })).status, "its place is free").toBe("acquired");
    expect(await claimEffect(store, effect(TURN, mail(1)), { maxPerTurn: 3 }), "and the released effect is now beyond the limit").toEqual({ status: "limit_reached" });
  });

  test("maxPerTurn: a claim reconciled no-effect frees its place; one reconciled completed keeps it", async ({ store }) => {
    await unknownEffect(store, effect(TURN, mail(1)));
    await unknownEffect(store, effect(TURN, mail(2)));
    const reconcile = (id: EffectIdentity, resolution: "completed" | "no-effect") =>
      store.reconcileEffect(resolution === "completed" ? { effectKey: id.effectKey, resolution, result: OPERATOR_RESULT, operatorRef: "ops-1" } : { effectKey: id.effectKey, resolution, operatorRef: "ops-1" });
    expect((await reconcile(effect(TURN, mail(1)), "completed")).reconciled, "reconciled completed").toBe(true);
    expect(await claimEffect(store, effect(TURN, mail(3)), { maxPerTurn: 2 }), "a completed effect still counts").toEqual({ status: "limit_reached" });
    expect((await reconcile(effect(TURN, mail(2)), "no-effect")).reconciled, "reconciled no-effect").toBe(true);
    expect((await claimEffect(store, effect(TURN, mail(3)), { maxPerTurn: 2 })).status, "a no-effect one does not").toBe("acquired");
  });

  test("maxPerTurn: pruned effects still count", async ({ store, clock }) => {
    await completeEffect(store, effect(TURN, mail(1)));
    clock.advance(1_000);
    const pruned = await store.prune({ olderThan: clock.iso() });
    expect(pruned.effects, "one effect pruned").toBe(1);
    expect(await claimEffect(store, effect(TURN, mail(2)), { maxPerTurn: 1 }), "the tombstone counts").toEqual({ status: "limit_reached" });
  }, ["operator"]);

  test("concurrent claims of distinct effects of one tool with maxPerTurn k: exactly k acquired", async ({ store }) => {
    const results = await Promise.all(Array.from({ length: 12 }, (_, index) => claimEffect(store, effect(TURN, mail(index)), { maxPerTurn: 3 })));
    expect(statusesOf(results, "acquired"), "k acquired").toBe(3);
    expect(statusesOf(results, "limit_reached"), "the rest refused").toBe(9);
    expect(await unresolvedEffects(store), "k claims stored").toHaveLength(3);
  });

  test("concurrent limited claims of two tools and two turns: each (turn, tool) gets exactly k", async ({ store }) => {
    const claims = [TURN, SIBLING].flatMap((of) =>
      [mail, (n: number): Call => ({ ...TICKET, id: `ticket-${String(n)}`, args: { title: `T${String(n)}` } })].flatMap((make) =>
        Array.from({ length: 5 }, (_, index) => effect(of, make(index))),
      ),
    );
    const results = await Promise.all(claims.map((id) => claimEffect(store, id, { maxPerTurn: 2 })));
    expect(statusesOf(results, "acquired"), "two for each of the four (turn, tool) pairs").toBe(8);
    const listed = await unresolvedEffects(store);
    for (const of of [TURN, SIBLING]) {
      for (const name of [MAIL.name, TICKET.name]) {
        expect(listed.filter((entry) => entry.turnKey === turnKey(of) && entry.toolName === name), `${of.turnId} ${name}`).toHaveLength(2);
      }
    }
  });
}

function reconciliationTests(test: StoreTest): void {
  const completed = (id: EffectIdentity = effect()) => ({ effectKey: id.effectKey, resolution: "completed" as const, result: OPERATOR_RESULT, operatorRef: "ops-7" });
  const noEffect = (id: EffectIdentity = effect()) => ({ effectKey: id.effectKey, resolution: "no-effect" as const, operatorRef: "ops-7" });
  const reconcile = async (store: GuardrailStore, input: ReturnType<typeof completed> | ReturnType<typeof noEffect>) =>
    conform(ReconcileResultSchema, await store.reconcileEffect(input), "reconcileEffect's answer");

  test("completed: an unknown effect replays the operator's result from then on, with one reconciled event", async ({ store, clock }) => {
    await unknownEffect(store);
    clock.advance(5_000);
    expect(await reconcile(store, completed()), "reconciled from unknown").toEqual({ reconciled: true, state: "unknown" });
    expect(await claimEffect(store), "the operator's result replays").toEqual({ status: "replay", result: OPERATOR_RESULT });
    expect(await unresolvedEffects(store), "nothing unresolved").toEqual([]);
    const events = await readAudit(store);
    expect(events, "one event").toHaveLength(1);
    expectEffectEvent(events[0], effect(), "reconciled", clock.ms);
    expect(events[0], "the event names the resolution and the operator").toMatchObject({ action: "completed", operatorRef: "ops-7" });
  });

  test("completed: a pending effect; its old token can no longer settle or release it", async ({ store }) => {
    const token = await acquireEffect(store);
    expect(await reconcile(store, completed()), "reconciled from pending").toEqual({ reconciled: true, state: "pending" });
    expectBoolean(await store.settleEffect({ effectKey: effect().effectKey, token, outcome: "unknown" }), false, "the old token settles nothing");
    expectBoolean(await store.releaseEffect({ effectKey: effect().effectKey, token }), false, "the old token releases nothing");
    expect(await getEffect(store), "complete with the operator's result").toEqual({ state: "complete", toolName: MAIL.name, toolCallId: MAIL.id, result: OPERATOR_RESULT });
  });

  test("no-effect: the claim is gone and the same effect may run again, with one reconciled event", async ({ store, clock }) => {
    await unknownEffect(store);
    clock.advance(5_000);
    expect(await reconcile(store, noEffect()), "reconciled no-effect").toEqual({ reconciled: true, state: "unknown" });
    expect(await store.getEffect(effect().effectKey), "the claim is gone").toBeUndefined();
    const events = await readAudit(store);
    expectEffectEvent(events[0], effect(), "reconciled", clock.ms);
    expect(events[0], "the event names the resolution and the operator").toMatchObject({ action: "no-effect", operatorRef: "ops-7" });
    expect((await claimEffect(store)).status, "the same effect claims again").toBe("acquired");
  });

  test("not_found and not_unresolved change nothing and append no event", async ({ store, clock }) => {
    expect(await reconcile(store, completed()), "an effect never claimed").toEqual({ reconciled: false, reason: "not_found" });
    await completeEffect(store);
    expect(await reconcile(store, completed()), "a completed effect").toEqual({ reconciled: false, reason: "not_unresolved" });
    expect(await reconcile(store, noEffect()), "a completed effect, no-effect").toEqual({ reconciled: false, reason: "not_unresolved" });
    expect(await claimEffect(store), "its result stands").toEqual({ status: "replay", result: SENT });
    expect(await readAudit(store), "no event").toEqual([]);
    clock.advance(1_000);
    await completeEffect(store, effect(SIBLING));
    clock.advance(1_000);
    await store.prune({ olderThan: clock.iso() });
    expect(await reconcile(store, noEffect(effect(SIBLING))), "a pruned effect").toEqual({ reconciled: false, reason: "not_unresolved" });
    expect(await claimEffect(store, effect(SIBLING)), "still pruned").toEqual({ status: "pruned" });
  }, ["operator"]);

  test("concurrent reconciliations of one effect: exactly one applies, with one event", async ({ store }) => {
    await unknownEffect(store);
    const results = await Promise.all(Array.from({ length: 6 }, (_, index) => reconcile(store, index % 2 === 0 ? completed() : noEffect())));
    expect(results.filter((result) => result.reconciled), "one applied").toHaveLength(1);
    expect(await readAudit(store), "one event").toHaveLength(1);
  });
}

function listingTests(test: StoreTest): void {
  test("listUnresolvedEffects: pending and unknown effects, oldest claim first, with identity, state and claim time", async ({ store, clock }) => {
    const ids = Array.from({ length: 4 }, (_, index) => effect(turn(`list-${String(index)}`), mail(index)))
      // Claim order against key order: a store that lists by key fails.
      .sort((a, b) => (a.effectKey < b.effectKey ? 1 : -1));
    const claimed: { id: EffectIdentity; token: string; atMs: number }[] = [];
    for (const id of ids) {
      claimed.push({ id, token: await acquireEffect(store, id), atMs: clock.ms });
      clock.advance(1_000);
    }
    const [first, second, third, fourth] = claimed as [(typeof claimed)[0], (typeof claimed)[0], (typeof claimed)[0], (typeof claimed)[0]];
    expectBoolean(await store.settleEffect({ effectKey: second.id.effectKey, token: second.token, outcome: "unknown" }), true, "the second settles unknown");
    expectBoolean(await store.settleEffect({ effectKey: third.id.effectKey, token: third.token, outcome: "complete", result: SENT }), true, "the third completes");
    const listed = await unresolvedEffects(store);
    expect(listed.map(({ claimedAt: _at, ...rest }) => rest), "pending and unknown, in claim order").toEqual([
      { ...first.id, state: "pending" },
      { ...second.id, state: "unknown" },
      { ...fourth.id, state: "pending" },
    ]);
    expectInstant(listed[0]?.claimedAt, first.atMs, "the first claim's time");
    expectInstant(listed[1]?.claimedAt, second.atMs, "an unknown effect keeps its claim time");
    expectInstant(listed[2]?.claimedAt, fourth.atMs, "the last claim's time");
  });

  test("listUnresolvedEffects: claims made at the same instant are listed in claim order", async ({ store }) => {
    const ids = Array.from({ length: 5 }, (_, index) => effect(TURN, mail(index))).sort((a, b) => (a.effectKey < b.effectKey ? 1 : -1));
    for (const id of ids) await acquireEffect(store, id);
    expect((await unresolvedEffects(store)).map((entry) => entry.effectKey), "claim order").toEqual(ids.map((id) => id.effectKey));
  });

  test("listUnresolvedEffects of a fresh store is empty", async ({ store }) => {
    expect(await unresolvedEffects(store), "nothing unresolved").toEqual([]);
  });
}

function pruneTests(test: StoreTest): void {
  test("prune tombstones completed effects settled before the cut-off, counts them, and keeps the rest", async ({ store, clock }) => {
    await completeEffect(store, effect(TURN, mail(1)));
    const settledMs = clock.ms;
    clock.advance(1_000);
    await completeEffect(store, effect(TURN, mail(2)));
    await acquireEffect(store, effect(TURN, mail(3)));
    await unknownEffect(store, effect(TURN, mail(4)));
    const at = (ms: number) => new Date(ms).toISOString();
    expect((await store.prune({ olderThan: at(settledMs) })).effects ?? 0, "the cut-off is exclusive").toBe(0);
    const pruned = await store.prune({ olderThan: at(settledMs + 1) });
    expect(pruned.effects, "one completed effect pruned").toBe(1);
    expect(pruned.turns, "no turn pruned: an effect is no mutation").toBe(0);
    expect(await claimEffect(store, effect(TURN, mail(1))), "the pruned effect never runs again").toEqual({ status: "pruned" });
    expect(await getEffect(store, effect(TURN, mail(1))), "its tombstone has no result").toEqual({ state: "pruned", toolName: MAIL.name, toolCallId: "mail-1" });
    expect(await claimEffect(store, effect(TURN, mail(2))), "the newer one still replays").toEqual({ status: "replay", result: SENT });
    expect((await store.prune({ olderThan: at(settledMs + 1) })).effects, "a tombstone is not pruned twice").toBe(0);
    clock.advance(365 * 24 * 3_600_000);
    expect((await store.prune({ olderThan: clock.iso() })).effects, "later, the other completed one").toBe(1);
    expect((await unresolvedEffects(store)).map((entry) => entry.state), "pending and unknown are never pruned").toEqual(["pending", "unknown"]);
  }, ["operator"]);
}

function independenceTests(test: StoreTest): void {
  test("effects never touch the turn's mutation slot, and mutations never touch effects", async ({ store }) => {
    await completeEffect(store, effect(TURN, mail(1)));
    await unknownEffect(store, effect(TURN, mail(2)));
    expect(await store.getMutation(turnKey(TURN)), "no mutation claim for the turn").toBeUndefined();
    const token = await acquire(store, identity(TURN));
    expect(await claim(store, identity(TURN)), "the mutation claim is its own").toEqual({ status: "pending" });
    expectBoolean(await store.settleMutation({ turnKey: turnKey(TURN), token, outcome: "complete", result: RESULT }), true, "the mutation settles");
    expect(await claimEffect(store, effect(TURN, mail(1))), "the effect still replays").toEqual({ status: "replay", result: SENT });
    expect((await claimEffect(store, effect(TURN, mail(3)), { maxPerTurn: 3 })).status, "the mutation does not count toward an effect limit").toBe("acquired");
    expect(await store.getMutation(turnKey(TURN)), "the mutation reads back as it is").toMatchObject({ state: "complete", result: RESULT });
  });

  test("an unknown effect does not block its scope's mutations, and an unknown mutation does not block effects", async ({ store }) => {
    await unknownEffect(store, effect(TURN, mail(1)));
    expect((await claim(store, identity(SIBLING), { requireResolvedScope: true })).status, "a mutation of another turn in the scope").toBe("acquired");
    const token = await acquire(store, identity(TURN));
    expectBoolean(await store.settleMutation({ turnKey: turnKey(TURN), token, outcome: "unknown" }), true, "the turn's mutation is unknown");
    expect((await claimEffect(store, effect(SIBLING, mail(2)))).status, "an effect in the blocked scope").toBe("acquired");
  });

  test("listUnresolved lists mutations only, listUnresolvedEffects effects only", async ({ store }) => {
    await acquireEffect(store);
    await acquire(store, identity(TURN));
    expect((await store.listUnresolved()).map((entry) => entry.turnKey), "the mutation").toEqual([turnKey(TURN)]);
    expect((await unresolvedEffects(store)).map((entry) => entry.effectKey), "the effect").toEqual([effect().effectKey]);
    expect((await store.reconcileMutation({ turnKey: turnKey(TURN), resolution: "no-effect", operatorRef: "ops" })).reconciled, "the mutation reconciled").toBe(true);
    expect(await getEffect(store), "the effect untouched").toMatchObject({ state: "pending" });
  }, ["operator"]);
}

function validationTests(test: StoreTest): void {
  const good = effect();
  const badIdentities: readonly (readonly [string, unknown])[] = [
    ["an effect key that is no digest", { ...good, effectKey: "xyz" }],
    ["a turn key that is no digest", { ...good, turnKey: good.turnKey.toUpperCase() }],
    ["an empty tool name", { ...good, toolName: "" }],
    ["an extra key", { ...good, mutationKey: good.effectKey }],
    ["a missing fingerprint", { ...good, toolFingerprint: undefined }],
    ["not an object", "send_mail"],
  ];
  for (const [label, bad] of badIdentities) {
    test(`claimEffect rejects ${label} with a StoreContractError, changing nothing`, async ({ store }) => {
      await expectContractError(() => store.claimEffect(bad as EffectIdentity), `claimEffect with ${label}`);
      expect(await unresolvedEffects(store), "nothing claimed").toEqual([]);
      expect((await claimEffect(store)).status, "the good identity still claims").toBe("acquired");
    });
  }

  test("claimEffect rejects bad options: 0, a fraction, over 1000, an extra key; nothing claimed", async ({ store }) => {
    for (const options of [{ maxPerTurn: 0 }, { maxPerTurn: 1.5 }, { maxPerTurn: 1001 }, { maxPerTurn: 2, perTurn: 2 }, "2"]) {
      await expectContractError(() => store.claimEffect(good, options as EffectClaimOptions), `claimEffect with options ${JSON.stringify(options)}`);
    }
    expect(await unresolvedEffects(store), "nothing claimed").toEqual([]);
  });

  test("settleEffect, releaseEffect, getEffect and reconcileEffect reject malformed input, changing nothing", async ({ store }) => {
    const token = await acquireEffect(store);
    const key = good.effectKey;
    const bad: readonly (readonly [string, () => Promise<unknown>])[] = [
      ["settleEffect with an extra key", () => store.settleEffect({ effectKey: key, token, outcome: "unknown", turnKey: good.turnKey } as never)],
      ["settleEffect complete without a result", () => store.settleEffect({ effectKey: key, token, outcome: "complete" } as never)],
      ["settleEffect with a bad effect key", () => store.settleEffect({ effectKey: "nope", token, outcome: "unknown" })],
      ["settleEffect with an empty token", () => store.settleEffect({ effectKey: key, token: "", outcome: "unknown" })],
      ["settleEffect with a bad audit event", () => store.settleEffect({ effectKey: key, token, outcome: "unknown", audit: { decision: "executed" } as never })],
      ["releaseEffect with an extra key", () => store.releaseEffect({ effectKey: key, token, reason: "x" } as never)],
      ["releaseEffect with a bad effect key", () => store.releaseEffect({ effectKey: key.slice(1), token })],
      ["getEffect of a non-digest", () => store.getEffect("not a digest")],
      ["reconcileEffect with an unknown resolution", () => store.reconcileEffect({ effectKey: key, resolution: "maybe", operatorRef: "ops" } as never)],
      ["reconcileEffect completed without a result", () => store.reconcileEffect({ effectKey: key, resolution: "completed", operatorRef: "ops" } as never)],
      ["reconcileEffect without an operator", () => store.reconcileEffect({ effectKey: key, resolution: "no-effect" } as never)],
    ];
    for (const [label, run] of bad) await expectContractError(run, label);
    expect(await getEffect(store), "the effect is still pending").toMatchObject({ state: "pending" });
    expect(await readAudit(store), "no event").toEqual([]);
    expectBoolean(await store.releaseEffect({ effectKey: key, token }), true, "the token still holds the claim");
  });
}
