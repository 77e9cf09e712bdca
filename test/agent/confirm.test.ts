/**
 * `confirm` through the real `createAgent` loop: a mutation or side effect whose claim was left
 * `unknown` (the body wrote, then threw) or `pending` (the settlement was lost) is met again by the
 * same call (same call id, so the same `mutationKey`; the same arguments, so the same
 * `effectKey`), as a transport retry, a takeover or a resume re-runs it. The tool's `confirm` asks
 * the write service, which dedupes on the key, and its answer settles the claim through the
 * operator's store path; the call then goes on: a replay of the confirmed result, or one run of
 * the reopened claim. `unknown`, a throw or an invalid answer leave the claim as it was.
 *
 * Every assertion counts real writes (`service.writes`, records in the service's dedupe table) or
 * reads what the store and the model got.
 */
import { describe, expect, it } from "vitest";
import { effectKey, mutationKey, turnKey } from "arkah-agent-guardrails";
import type { MutationSettlement, EffectSettlement } from "arkah-agent-guardrails/store";
import { confirmWorld, notifyScript, recordedConfirm, renameScript, run, type ConfirmWorld } from "../support/confirm.js";
import { admit, ForwardingStore, outcomeOf } from "../support/fixtures.js";

/** A view of the store whose settlements are lost: the claim stays `pending`, as after a crash. */
class SettlementLostStore extends ForwardingStore {
  override async settleMutation(_settlement: MutationSettlement): Promise<boolean> {
    throw new Error("lost");
  }
  override async settleEffect(_settlement: EffectSettlement): Promise<boolean> {
    throw new Error("lost");
  }
}

async function reconciledEvents(world: ConfirmWorld) {
  return (await world.store.readAudit({ turnKey: turnKey(world.input) })).filter((event) => event.decision === "reconciled");
}

describe("a mutation left unknown, met again by the same call, is settled by confirm", () => {
  it("completed: the stored result is replayed, the body does not run again, one write", async () => {
    const world = confirmWorld();
    await admit(world.store, world.input);
    world.plans.push("write-then-throw");
    const first = await run(world, renameScript(), { confirm: recordedConfirm(world) });
    expect(outcomeOf(first, "w1").code).toBe("mutation_unknown");
    expect(world.asked).toEqual([]); // the claim was acquired: nothing to ask
    expect(world.service.writes).toBe(1);

    const again = await run(world, renameScript(), { confirm: recordedConfirm(world) });

    const key = mutationKey(world.input, { id: "w1", name: "rename_document", args: { title: "Field notes" } });
    expect(outcomeOf(again, "w1")).toMatchObject({ status: "success", content: "saved Field notes #1" });
    expect(world.service.writes).toBe(1);
    expect(world.service.bodies).toBe(1);
    expect(world.asked.map((claim) => ({ kind: claim.kind, state: claim.state, key: claim.kind === "mutation" ? claim.mutationKey : "" }))).toEqual([
      { kind: "mutation", state: "unknown", key },
    ]);
    expect(world.asked[0]).toMatchObject({ toolName: "rename_document", toolCallId: "w1", args: { title: "Field notes" }, scopeId: "doc-1", turnKey: turnKey(world.input) });
    expect(await world.store.listUnresolved()).toEqual([]);
    expect(await reconciledEvents(world)).toMatchObject([{ mutationKey: key, action: "completed", operatorRef: "confirm:rename_document" }]);
    // Later retries replay from the store without asking again.
    const third = await run(world, renameScript(), { confirm: recordedConfirm(world) });
    expect(outcomeOf(third, "w1").content).toBe("saved Field notes #1");
    expect(world.asked).toHaveLength(1);
    expect(world.service.bodies).toBe(1);
  });

  it("no-effect: the slot reopens and the same call runs once, one write", async () => {
    const world = confirmWorld();
    await admit(world.store, world.input);
    world.plans.push("throw-before-write");
    expect(outcomeOf(await run(world, renameScript()), "w1").code).toBe("mutation_unknown");
    expect(world.service.writes).toBe(0);

    const again = await run(world, renameScript(), { confirm: recordedConfirm(world) });

    expect(outcomeOf(again, "w1")).toMatchObject({ status: "success", content: "saved Field notes #1" });
    expect(world.service.writes).toBe(1);
    expect(world.service.bodies).toBe(2);
    expect(await reconciledEvents(world)).toMatchObject([{ action: "no-effect", operatorRef: "confirm:rename_document" }]);
    expect(await world.store.getMutation(turnKey(world.input))).toMatchObject({ state: "complete", toolCallId: "w1" });
  });

  it.each([
    ["answers unknown", () => ({ outcome: "unknown" }), undefined],
    [
      "throws",
      () => {
        throw new Error("dedupe table at /srv/secret unavailable");
      },
      "confirm_failed",
    ],
  ] as const)("%s: mutation_unknown, the claim unchanged, nothing runs", async (_name, answer, code) => {
    const world = confirmWorld();
    await admit(world.store, world.input);
    world.plans.push("write-then-throw");
    await run(world, renameScript());
    const before = await world.store.listUnresolved();
    const warnings: unknown[] = [];

    const again = await run(world, renameScript(), { confirm: recordedConfirm(world, answer), warnings });

    expect(outcomeOf(again, "w1").code).toBe("mutation_unknown");
    expect(world.asked).toHaveLength(1);
    expect(await world.store.listUnresolved()).toEqual(before);
    expect(await reconciledEvents(world)).toEqual([]);
    expect(world.service.bodies).toBe(1);
    expect(world.service.writes).toBe(1);
    if (code === "confirm_failed") {
      // The error's class only: never its text.
      expect(warnings).toContainEqual(expect.objectContaining({ code, error: { name: "Error" } }));
      expect(JSON.stringify(warnings)).not.toContain("/srv/secret");
    }
  });

  it("pending (the settlement was lost): confirm is asked with state pending and its answer is replayed", async () => {
    const world = confirmWorld();
    await admit(world.store, world.input);
    await expect(run(world, renameScript(), { store: new SettlementLostStore(world.store) })).rejects.toThrow();
    expect(await world.store.listUnresolved()).toMatchObject([{ state: "pending", toolCallId: "w1" }]);
    expect(world.service.writes).toBe(1);

    const again = await run(world, renameScript(), { confirm: recordedConfirm(world) });

    expect(world.asked.map((claim) => claim.state)).toEqual(["pending"]);
    expect(outcomeOf(again, "w1")).toMatchObject({ status: "success", content: "saved Field notes #1" });
    expect(world.service.bodies).toBe(1);
    expect(world.service.writes).toBe(1);
  });
});

describe("a side effect left unknown, met again by the same effect, is settled by confirm", () => {
  it("completed: replayed, one send", async () => {
    const world = confirmWorld();
    await admit(world.store, world.input);
    world.plans.push("write-then-throw");
    expect(outcomeOf(await run(world, notifyScript()), "n1").code).toBe("effect_unknown");

    const again = await run(world, notifyScript(), { confirm: recordedConfirm(world) });

    const key = effectKey(world.input, { name: "notify", args: { to: "ana" } });
    expect(outcomeOf(again, "n1")).toMatchObject({ status: "success", content: "saved ana #1" });
    expect(world.asked).toMatchObject([{ kind: "side-effect", effectKey: key, state: "unknown", toolName: "notify" }]);
    expect(world.service.bodies).toBe(1);
    expect(world.service.writes).toBe(1);
    expect(await reconciledEvents(world)).toMatchObject([{ effectKey: key, action: "completed", operatorRef: "confirm:notify" }]);
  });

  it("no-effect: the effect runs once", async () => {
    const world = confirmWorld();
    await admit(world.store, world.input);
    world.plans.push("throw-before-write");
    expect(outcomeOf(await run(world, notifyScript()), "n1").code).toBe("effect_unknown");

    const again = await run(world, notifyScript(), { confirm: recordedConfirm(world) });

    expect(outcomeOf(again, "n1")).toMatchObject({ status: "success", content: "saved ana #1" });
    expect(world.service.bodies).toBe(2);
    expect(world.service.writes).toBe(1);
  });

  it("unknown: effect_unknown, the claim unchanged", async () => {
    const world = confirmWorld();
    await admit(world.store, world.input);
    world.plans.push("write-then-throw");
    await run(world, notifyScript());

    const again = await run(world, notifyScript(), { confirm: recordedConfirm(world, () => ({ outcome: "unknown" })) });

    expect(outcomeOf(again, "n1").code).toBe("effect_unknown");
    expect(world.asked).toMatchObject([{ kind: "side-effect", state: "unknown" }]);
    expect(await world.store.listUnresolvedEffects()).toMatchObject([{ state: "unknown" }]);
    expect(world.service.bodies).toBe(1);
  });

  it("pending (the settlement was lost): settled by confirm and replayed", async () => {
    const world = confirmWorld();
    await admit(world.store, world.input);
    await expect(run(world, notifyScript(), { store: new SettlementLostStore(world.store) })).rejects.toThrow();
    expect(await world.store.listUnresolvedEffects()).toMatchObject([{ state: "pending" }]);

    const again = await run(world, notifyScript(), { confirm: recordedConfirm(world) });

    expect(world.asked.map((claim) => claim.state)).toEqual(["pending"]);
    expect(outcomeOf(again, "n1").content).toBe("saved ana #1");
    expect(world.service.bodies).toBe(1);
    expect(world.service.writes).toBe(1);
  });
});
