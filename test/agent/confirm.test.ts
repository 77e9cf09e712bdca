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
import { HumanMessage, type BaseMessage } from "@langchain/core/messages";
import { createAgent, tool, type ToolRuntime } from "langchain";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import {
  createDocumentGuardrails,
  effectKey,
  InMemoryGuardrailStore,
  mutationKey,
  turnKey,
  type ConfirmClaim,
  type ConfirmRequest,
  type GuardrailStore,
  type TurnInput,
} from "arkah-agent-guardrails";
import type { MutationSettlement, EffectSettlement } from "arkah-agent-guardrails/store";
import { ScriptedModel, type ScriptStep } from "arkah-agent-guardrails/testing";
import { admit, ForwardingStore, outcomeOf, turnInput, userText } from "../support/fixtures.js";

/** A write service that dedupes on the key it is given: the record `confirm` answers from. */
export class KeyedService {
  /** Writes that really happened, by key. */
  readonly records = new Map<string, string>();
  /** Real writes (a repeated key is not one). */
  writes = 0;
  /** Times a tool body started. */
  bodies = 0;

  write(key: string, text: string): string {
    const known = this.records.get(key);
    if (known !== undefined) return known;
    this.writes += 1;
    const result = `saved ${text} #${String(this.writes)}`;
    this.records.set(key, result);
    return result;
  }

  /** What a `confirm` that reads this service's record answers. */
  confirm(key: string): { outcome: "completed"; result: string } | { outcome: "no-effect" } {
    const known = this.records.get(key);
    return known === undefined ? { outcome: "no-effect" } : { outcome: "completed", result: known };
  }
}

/** How the next body behaves: writes then throws (`unknown`), throws before writing, or writes. */
export type BodyPlan = "write-then-throw" | "throw-before-write" | "write";

export interface ConfirmWorld {
  readonly store: GuardrailStore;
  readonly service: KeyedService;
  readonly input: TurnInput;
  /** Plans of the next bodies, in order; then "write". */
  readonly plans: BodyPlan[];
  /** Every claim `confirm` was asked about. */
  readonly asked: ConfirmRequest[];
}

export function confirmWorld(input = turnInput()): ConfirmWorld {
  return { store: new InMemoryGuardrailStore(), service: new KeyedService(), input, plans: [], asked: [] };
}

function runBody(world: ConfirmWorld, key: string, text: string): string {
  world.service.bodies += 1;
  const plan = world.plans.shift() ?? "write";
  if (plan === "throw-before-write") throw new Error("the write service did not answer");
  const result = world.service.write(key, text);
  if (plan === "write-then-throw") throw new Error("connection reset after the write");
  return result;
}

/** The document tools of this file: a read, a mutation and a side effect, all on `world.service`. */
export function confirmTools(world: ConfirmWorld) {
  const readDocument = tool(() => "Untitled", { name: "read_document", description: "Read the document.", schema: z.object({}) });
  const renameDocument = tool(
    (args, runtime: ToolRuntime) => runBody(world, mutationKey(world.input, { id: runtime.toolCallId, name: "rename_document", args }), args.title),
    { name: "rename_document", description: "Rename the document.", schema: z.object({ title: z.string().min(1) }) },
  );
  const notify = tool((args) => runBody(world, effectKey(world.input, { name: "notify", args }), args.to), {
    name: "notify",
    description: "Notify someone.",
    schema: z.object({ to: z.string().min(1) }),
  });
  return [readDocument, renameDocument, notify];
}

/** A `confirm` that records what it was asked and answers from the service's record of the key. */
export function recordedConfirm(world: ConfirmWorld, answer?: (claim: ConfirmRequest) => unknown): ConfirmClaim {
  return (claim) => {
    world.asked.push(claim);
    if (answer !== undefined) return answer(claim) as ReturnType<ConfirmClaim>;
    return world.service.confirm(claim.kind === "mutation" ? claim.mutationKey : claim.effectKey);
  };
}

/** One invocation of the turn on a fresh agent: the script's calls, with `confirm` on both claimed tools. */
export async function run(
  world: ConfirmWorld,
  script: readonly ScriptStep[],
  options: { confirm?: ConfirmClaim | undefined; store?: GuardrailStore; warnings?: unknown[] } = {},
): Promise<BaseMessage[]> {
  const confirm = options.confirm === undefined ? {} : { confirm: options.confirm };
  const agent = createAgent({
    model: new ScriptedModel(script),
    tools: confirmTools(world),
    middleware: [
      createDocumentGuardrails({
        input: world.input,
        store: options.store ?? world.store,
        userMessageLabel: "user",
        authorize: () => true,
        tools: {
          read_document: { kind: "document-read" },
          rename_document: { kind: "mutation", ...confirm },
          notify: { kind: "side-effect", ...confirm },
        },
        logger: { warn: (message, fields) => options.warnings?.push({ message, ...fields }) },
      }),
    ],
  });
  const result = await agent.invoke({ messages: [new HumanMessage(userText(world.input))] });
  return result.messages;
}

export const renameScript = (callId = "w1", title = "Field notes"): ScriptStep[] => [
  { toolCalls: [{ id: "r1", name: "read_document", args: {} }] },
  { toolCalls: [{ id: callId, name: "rename_document", args: { title } }] },
  { content: "done" },
];

export const notifyScript = (callId = "n1", to = "ana"): ScriptStep[] => [{ toolCalls: [{ id: callId, name: "notify", args: { to } }] }, { content: "done" }];

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
