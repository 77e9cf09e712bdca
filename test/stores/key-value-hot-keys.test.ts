/**
 * No hot keys in the key-value base (issue 40, item 3): concurrent claims of turns in different
 * scopes never write one key, measured by the base's `onStep` footprints on the JSON adapter and
 * the file store (bench/key-value-conflicts.ts prints the same numbers); the audited steps share
 * only the audit counter, which keeps `seq` one total order. And a store written in layout 1 (the
 * shared `claim` and `effect` counters, no unresolved indexes) is migrated by the first step; one
 * written by a newer layout is refused and left as it is.
 */
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { digest, effectKey, mutationKey, StoreContractError, toolFingerprint, turnKey, type TurnRef } from "arkah-agent-guardrails";
import { KEY_VALUE_COLLECTIONS as C, type EffectIdentity, type MutationIdentity, type StoredClaim, type StoredEffect } from "arkah-agent-guardrails/store";
import { FileGuardrailStore } from "../../examples/file-store/store.js";
import { JsonKeyValueStore } from "../support/json-key-value-store.js";
import { measureStepConflicts, type ObservedStoreFactory, type StepConflicts } from "../support/step-conflicts.js";

const root = mkdtempSync(join(existsSync("/dev/shm") ? "/dev/shm" : tmpdir(), "arkah-hot-keys-"));
afterAll(() => {
  rmSync(root, { recursive: true, force: true });
});

const WORKERS = 8;
let directories = 0;
const adapters: readonly (readonly [string, ObservedStoreFactory])[] = [
  ["the JSON adapter", (onStep) => new JsonKeyValueStore({ onStep })],
  ["the file store", (onStep) => FileGuardrailStore.open({ directory: join(root, `store-${String(++directories)}`), onStep })],
];

const byStep = (rows: readonly StepConflicts[]) => Object.fromEntries(rows.map((row) => [row.step, row]));

describe("KeyValueGuardrailStore: steps of turns in different scopes", () => {
  for (const [name, open] of adapters) {
    it(`${name}: ${String(WORKERS)} concurrent claims (mutation and side effect) and effect settlements write no key another one touches`, async () => {
      const rows = byStep(await measureStepConflicts(open, WORKERS));
      for (const step of ["claimMutation", "claimEffect", "settleEffect"] as const) {
        expect({ step, steps: rows[step]?.steps, conflicting: rows[step]?.conflicting, hotKeys: rows[step]?.hotKeys }, step).toEqual({
          step,
          steps: WORKERS,
          conflicting: 0,
          hotKeys: [],
        });
      }
    });

    it(`${name}: the audited steps (a read with its event, a settlement with its event) meet on the audit counter alone`, async () => {
      const rows = byStep(await measureStepConflicts(open, WORKERS));
      for (const step of ["recordSuccessfulRead", "settleMutation"] as const) {
        expect(rows[step]?.hotKeys, `${step}: the one shared key, the audit counter, which keeps seq a total order`).toEqual([`${C.counters}/audit`]);
      }
    });
  }
});

function mutation(turn: TurnRef): MutationIdentity {
  const call = { id: "w1", name: "rename_document", args: { title: "Field notes" } };
  return {
    turnKey: turnKey(turn),
    scopeId: turn.scopeId,
    toolCallId: call.id,
    toolName: call.name,
    argsDigest: digest(call.args),
    mutationKey: mutationKey(turn, call),
    toolFingerprint: toolFingerprint({ name: call.name }),
  };
}

function sideEffect(turn: TurnRef): EffectIdentity {
  const call = { id: "m1", name: "send_mail", args: { to: "ops@example.com" } };
  return {
    effectKey: effectKey(turn, call),
    turnKey: turnKey(turn),
    scopeId: turn.scopeId,
    toolCallId: call.id,
    toolName: call.name,
    argsDigest: digest(call.args),
    toolFingerprint: toolFingerprint({ name: call.name }),
  };
}

const CLAIMED_AT = Date.UTC(2031, 1, 3, 4, 5, 6);
const snapshot = (store: JsonKeyValueStore) => JSON.stringify([...store.data].map(([name, entries]) => [name, [...entries].sort()]));

describe("KeyValueGuardrailStore: a store written in an older or newer layout", () => {
  it("layout 1 (shared counters, no unresolved indexes): the first step indexes its unresolved claims and effects, and they list, settle and drop out", async () => {
    const store = new JsonKeyValueStore({ now: () => new Date(CLAIMED_AT) });
    const pending = mutation({ scopeId: "doc-old", turnId: "pending" });
    const unknown = mutation({ scopeId: "doc-old-2", turnId: "unknown" });
    const done = mutation({ scopeId: "doc-old-3", turnId: "done" });
    const effect = sideEffect({ scopeId: "doc-old", turnId: "pending" });
    // As the previous base wrote them: numbered by the shared counters, found by a scan.
    const claims: StoredClaim[] = [
      { identity: unknown, token: "t-unknown", seq: 41, claimedAtMs: CLAIMED_AT, state: "unknown", settledAtMs: CLAIMED_AT },
      { identity: pending, token: "t-pending", seq: 42, claimedAtMs: CLAIMED_AT, state: "pending" },
      { identity: done, token: "t-done", seq: 43, claimedAtMs: CLAIMED_AT, state: "complete", result: { content: "ok", status: "success" }, settledAtMs: CLAIMED_AT },
    ];
    for (const claim of claims) store.writeRaw(C.claims, claim.identity.turnKey, claim);
    store.writeRaw(C.unknownScopes, unknown.scopeId, { scopeId: unknown.scopeId, turnKeys: [unknown.turnKey] });
    const stored: StoredEffect = { identity: effect, token: "t-effect", seq: 7, claimedAtMs: CLAIMED_AT, state: "pending" };
    store.writeRaw(C.effects, effect.effectKey, stored);
    store.writeRaw(C.effectGroups, JSON.stringify([effect.turnKey, effect.toolName]), { turnKey: effect.turnKey, toolName: effect.toolName, effectKeys: [effect.effectKey] });
    store.writeRaw(C.counters, "claim", 43);
    store.writeRaw(C.counters, "effect", 7);

    expect((await store.listUnresolved()).map((entry) => [entry.turnKey, entry.state]), "old claims, in their old claim order").toEqual([
      [unknown.turnKey, "unknown"],
      [pending.turnKey, "pending"],
    ]);
    expect(store.readRaw(C.meta, "layout"), "migrated once, in the first step").toBe(2);
    expect([...(store.data.get(C.unresolvedClaims)?.keys() ?? [])].sort()).toEqual([pending.turnKey, unknown.turnKey].sort());
    expect((await store.listUnresolvedEffects()).map((entry) => entry.effectKey)).toEqual([effect.effectKey]);

    expect(await store.settleMutation({ turnKey: pending.turnKey, token: "t-pending", outcome: "complete", result: { content: "done", status: "success" } })).toBe(true);
    expect(await store.settleEffect({ effectKey: effect.effectKey, token: "t-effect", outcome: "complete", result: { content: "sent", status: "success" } })).toBe(true);
    expect((await store.listUnresolved()).map((entry) => entry.turnKey), "a settled old claim leaves the index").toEqual([unknown.turnKey]);
    expect(await store.listUnresolvedEffects()).toEqual([]);
    expect(store.readRaw(C.counters, "claim"), "the old counter is left as it was, and never written again").toBe(43);
  });

  it("a layout newer than this version's is refused with a clear error, and nothing is written", async () => {
    const store = new JsonKeyValueStore();
    store.writeRaw(C.meta, "layout", 3);
    const before = snapshot(store);
    const error = await store.claimMutation(mutation({ scopeId: "doc-new", turnId: "t" })).then(
      () => undefined,
      (reason: unknown) => reason,
    );
    expect(StoreContractError.isInstance(error), `expected a StoreContractError, got ${String(error)}`).toBe(true);
    expect(String(error)).toMatch(/key-value layout 3, written by a newer arkah-agent-guardrails; this version reads layout 2 and older/);
    await expect(store.listUnresolved(), "every later operation is refused too").rejects.toThrow(/layout 3/);
    expect(snapshot(store), "nothing written").toBe(before);
  });
});
