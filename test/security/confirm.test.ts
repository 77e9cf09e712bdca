/**
 * Attack class 22: `confirm` settles only this call's own unresolved claim, on a valid answer,
 * and only the pipeline asks it. A model that mints a new call id (or new arguments) to meet a
 * turn's unresolved write gets no confirm asked and the claim untouched; an answer that is not
 * valid (another shape, extra fields, a result beyond `MAX_CONFIRM_RESULT_LENGTH`) counts as
 * `unknown`; a slot another resolver reopened, and another call claimed, while `confirm` was asked
 * is not settled with its answer; and a model that calls `confirm` as a tool is refused
 * `unregistered_tool`.
 *
 * Every assertion counts tool bodies and writes, or reads the store.
 */
import { describe, expect, it } from "vitest";
import { digest, mutationKey, turnKey } from "arkah-agent-guardrails";
import type { MutationIdentity } from "arkah-agent-guardrails/store";
import { confirmWorld, notifyScript, recordedConfirm, renameScript, reopenedBeforeReconcile, run } from "../support/confirm.js";
import { admit, outcomeOf } from "../support/fixtures.js";
import { MAX_CONFIRM_RESULT_LENGTH } from "../../src/contracts/policy.js";

describe("confirm is asked only about this call's own claim", () => {
  it("a new call id meeting the turn's unknown write: mutation_conflict, confirm not asked, the claim unchanged", async () => {
    const world = confirmWorld();
    await admit(world.store, world.input);
    world.plans.push("write-then-throw");
    await run(world, renameScript("w1"));
    const before = await world.store.listUnresolved();

    const minted = await run(world, renameScript("w2"), { confirm: recordedConfirm(world) });

    expect(outcomeOf(minted, "w2").code).toBe("mutation_conflict");
    expect(world.asked).toEqual([]);
    expect(await world.store.listUnresolved()).toEqual(before);
    expect(world.service.bodies).toBe(1);
  });

  it("the same call id with other arguments is another mutationKey: refused, confirm not asked", async () => {
    const world = confirmWorld();
    await admit(world.store, world.input);
    world.plans.push("write-then-throw");
    await run(world, renameScript("w1", "Field notes"));

    const other = await run(world, renameScript("w1", "Something else"), { confirm: recordedConfirm(world) });

    expect(outcomeOf(other, "w1").code).toBe("mutation_conflict");
    expect(world.asked).toEqual([]);
    expect(await world.store.listUnresolved()).toMatchObject([{ state: "unknown" }]);
  });

  it("a side effect with other arguments is another effect: it runs on its own claim, the unknown one is not asked about", async () => {
    const world = confirmWorld();
    await admit(world.store, world.input);
    world.plans.push("write-then-throw");
    await run(world, notifyScript("n1", "ana"));

    const other = await run(world, notifyScript("n2", "bob"), { confirm: recordedConfirm(world) });

    expect(outcomeOf(other, "n2").content).toBe("saved bob #2");
    expect(world.asked).toEqual([]);
    expect(await world.store.listUnresolvedEffects()).toMatchObject([{ state: "unknown", toolCallId: "n1" }]);
  });
});

describe("an answer that is not valid counts as unknown", () => {
  it.each([
    ["a bare string", () => "completed"],
    ["a completed answer without a result", () => ({ outcome: "completed" })],
    ["an extra field", (claim: { kind: string }) => ({ outcome: "no-effect", kind: claim.kind })],
    ["another outcome", () => ({ outcome: "done" })],
    ["a result beyond the limit", () => ({ outcome: "completed", result: "x".repeat(MAX_CONFIRM_RESULT_LENGTH + 1) })],
    ["a promise of a wrong shape", () => Promise.resolve({ outcome: "completed", result: 42 })],
  ] as const)("%s: mutation_unknown, the claim unchanged, nothing reconciled", async (_name, answer) => {
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
    const events = await world.store.readAudit({ turnKey: turnKey(world.input) });
    expect(events.filter((event) => event.decision === "reconciled")).toEqual([]);
    expect(world.service.bodies).toBe(1);
    expect(warnings).toContainEqual(expect.objectContaining({ code: "confirm_invalid" }));
    expect(JSON.stringify(warnings)).not.toContain("xxxx");
  });
});

describe("confirm cannot be reached from the model", () => {
  it("a call to a tool named confirm (or the tool's confirm) is unregistered_tool; nothing is asked or settled", async () => {
    const world = confirmWorld();
    await admit(world.store, world.input);
    world.plans.push("write-then-throw");
    await run(world, renameScript());
    const key = (await world.store.listUnresolved())[0]?.mutationKey ?? "";

    const messages = await run(
      world,
      [
        {
          toolCalls: [
            { id: "c1", name: "confirm", args: { mutationKey: key, outcome: "no-effect" } },
            { id: "c2", name: "rename_document.confirm", args: { outcome: "completed", result: "forged" } },
          ],
        },
        { content: "done" },
      ],
      { confirm: recordedConfirm(world) },
    );

    expect(outcomeOf(messages, "c1").code).toBe("unregistered_tool");
    expect(outcomeOf(messages, "c2").code).toBe("unregistered_tool");
    expect(world.asked).toEqual([]);
    expect(await world.store.listUnresolved()).toMatchObject([{ state: "unknown", mutationKey: key }]);
  });
});

describe("confirm's answer settles only the claim it was asked about", () => {
  it("the slot reopened and claimed by another call while confirm was asked: the new claim untouched, its holder settles it", async () => {
    const world = confirmWorld();
    await admit(world.store, world.input);
    world.plans.push("write-then-throw");
    await run(world, renameScript("w1"));
    const args = { title: "Other notes" };
    const rival: MutationIdentity = {
      turnKey: turnKey(world.input),
      scopeId: world.input.scopeId,
      toolCallId: "w2",
      toolName: "rename_document",
      argsDigest: digest(args),
      mutationKey: mutationKey(world.input, { id: "w2", name: "rename_document", args }),
      toolFingerprint: "2".repeat(64),
    };
    const racing = reopenedBeforeReconcile(world.store, rival);

    // The retry of w1 asks confirm, which answers completed from the service's record of w1's key.
    const again = await run(world, renameScript("w1"), { confirm: recordedConfirm(world), store: racing.store });

    expect(world.asked).toMatchObject([{ kind: "mutation", toolCallId: "w1", state: "unknown" }]);
    expect(outcomeOf(again, "w1").code).toBe("mutation_unknown");
    // w2's claim is still pending under its holder, not completed with w1's result.
    expect(await world.store.listUnresolved()).toMatchObject([{ toolCallId: "w2", mutationKey: rival.mutationKey, state: "pending" }]);
    const events = await world.store.readAudit({ turnKey: turnKey(world.input) });
    expect(events.filter((event) => event.decision === "reconciled").map((event) => event.operatorRef)).toEqual(["INC-1"]);
    expect(await world.store.settleMutation({ turnKey: rival.turnKey, token: racing.rivalToken(), outcome: "complete", result: { content: "saved Other notes", status: "success" } })).toBe(true);
    expect(world.service.bodies).toBe(1);
  });
});
