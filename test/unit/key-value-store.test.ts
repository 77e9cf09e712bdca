/**
 * `KeyValueGuardrailStore`'s own guarantees beyond the conformance kit: a record read under one key
 * that names another fails closed, as does one that does not parse, and changes nothing; a subclass
 * with no storage is refused at construction; a turn audit index entry that names no event of its
 * turn fails closed.
 */
import { describe, expect, it } from "vitest";
import { digest, mutationKey, StoreContractError, turnKey, type TurnRef } from "arkah-agent-guardrails";
import { toolFingerprint, type MutationIdentity } from "arkah-agent-guardrails/store";
import { KEY_VALUE_COLLECTIONS, KeyValueGuardrailStore } from "arkah-agent-guardrails/store";
import { JsonKeyValueStore } from "../support/json-key-value-store.js";

function identity(turn: TurnRef): MutationIdentity {
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

const A = identity({ scopeId: "doc-1", turnId: "turn-a" });
const B = identity({ scopeId: "doc-1", turnId: "turn-b" });

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => undefined,
    (reason: unknown) => reason,
  );
}

describe("KeyValueGuardrailStore: records are checked against the key they are read by", () => {
  it("a claim stored under turn A that names turn B fails closed, and the slot is not taken", async () => {
    const store = new JsonKeyValueStore();
    const claimed = await store.claimMutation(B);
    expect(claimed.status).toBe("acquired");
    // Copy B's claim under A's key, as a corrupt backend (or someone with storage access) could.
    store.writeRaw(KEY_VALUE_COLLECTIONS.claims, A.turnKey, store.readRaw(KEY_VALUE_COLLECTIONS.claims, B.turnKey));
    const before = JSON.stringify([...store.data].map(([name, entries]) => [name, [...entries]]));
    const error = await rejection(store.claimMutation(A));
    expect(StoreContractError.isInstance(error), `expected a StoreContractError, got ${String(error)}`).toBe(true);
    expect(String(error)).toMatch(/names another key/);
    expect(await rejection(store.getMutation(A.turnKey)), "getMutation reads the same record").toBeInstanceOf(StoreContractError);
    expect(JSON.stringify([...store.data].map(([name, entries]) => [name, [...entries]])), "nothing changed").toBe(before);
  });

  it("a record that does not parse fails closed", async () => {
    const store = new JsonKeyValueStore();
    store.writeRaw(KEY_VALUE_COLLECTIONS.claims, A.turnKey, { identity: A, token: "t", seq: 1, claimedAtMs: 0, state: "complete" });
    const error = await rejection(store.claimMutation(A));
    expect(StoreContractError.isInstance(error), `expected a StoreContractError, got ${String(error)}`).toBe(true);
    expect(String(error)).toMatch(/a complete claim has a result/);
  });

  it("an audit counter that is not a count: the append waits unnumbered; reading fails closed, numbers nothing and loses nothing", async () => {
    const store = new JsonKeyValueStore();
    store.writeRaw(KEY_VALUE_COLLECTIONS.counters, "audit", -1);
    const event = { at: "2025-01-02T03:04:05.000Z", decision: "executed" as const, turnKey: A.turnKey, scopeId: A.scopeId };
    await store.appendAudit(event);
    expect(await rejection(store.readAudit())).toBeInstanceOf(StoreContractError);
    expect(store.data.get(KEY_VALUE_COLLECTIONS.audit)?.size ?? 0, "nothing numbered").toBe(0);
    expect(store.data.get(KEY_VALUE_COLLECTIONS.auditPending)?.size ?? 0, "the event still waits").toBe(1);
    store.writeRaw(KEY_VALUE_COLLECTIONS.counters, "audit", 0);
    expect(await store.readAudit(), "numbered once the counter is repaired").toEqual([{ ...event, seq: 1 }]);
  });
});

describe("KeyValueGuardrailStore: the turn audit index", () => {
  it("an index entry naming another turn's event, an absent event or an event never numbered fails closed and changes nothing", async () => {
    const store = new JsonKeyValueStore();
    const at = "2025-01-02T03:04:05.000Z";
    await store.appendAudit({ at, decision: "executed", turnKey: A.turnKey, scopeId: A.scopeId });
    await store.appendAudit({ at, decision: "executed", turnKey: B.turnKey, scopeId: B.scopeId });
    expect((await store.readAudit({ turnKey: A.turnKey })).map((event) => event.seq)).toEqual([1]);
    const entries: readonly (readonly [{ seq?: number }, RegExp])[] = [
      [{ seq: 2 }, /audit event 0000000000000002, which is another turn's/],
      [{ seq: 9 }, /audit event 0000000000000009, which is absent/],
      [{}, /pending audit event x, which is absent/],
    ];
    for (const [seq, message] of entries) {
      // A forged entry in A's index, as a corrupt backend (or someone with storage access) could write.
      store.writeRaw(KEY_VALUE_COLLECTIONS.turnAudit, `${A.turnKey}.x`, { turnKey: A.turnKey, key: "x", ...seq });
      const before = JSON.stringify([...store.data].map(([name, records]) => [name, [...records]]));
      const error = await rejection(store.readAudit({ turnKey: A.turnKey }));
      expect(StoreContractError.isInstance(error), `expected a StoreContractError, got ${String(error)}`).toBe(true);
      expect(String(error)).toMatch(message);
      expect(JSON.stringify([...store.data].map(([name, records]) => [name, [...records]])), "nothing changed").toBe(before);
    }
    expect((await store.readAudit({ turnKey: B.turnKey })).map((event) => event.seq), "another turn's reads are unaffected").toEqual([2]);
  });
});

describe("KeyValueGuardrailStore: storage", () => {
  it("a subclass that implements neither atomic nor atomicSync is refused at construction", () => {
    class NoStorage extends KeyValueGuardrailStore {}
    expect(() => new NoStorage()).toThrow(/implements neither atomic nor atomicSync/);
  });
});
