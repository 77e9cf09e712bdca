/**
 * Support for the `confirm` tests (test/agent/confirm.test.ts, test/security/confirm.test.ts): a
 * write service that dedupes on the key it is given and counts real writes, tools that write
 * through it (a read, a mutation, a side effect), and a real `createAgent` loop whose claimed tools
 * may have `confirm`.
 */
import { HumanMessage, type BaseMessage } from "@langchain/core/messages";
import { createAgent, tool, type ToolRuntime } from "langchain";
import { z } from "zod";
import {
  createDocumentGuardrails,
  effectKey,
  InMemoryGuardrailStore,
  mutationKey,
  type ConfirmClaim,
  type ConfirmRequest,
  type GuardrailStore,
  type TurnInput,
} from "arkah-agent-guardrails";
import type { MutationIdentity, Reconciliation } from "arkah-agent-guardrails/store";
import { ScriptedModel, type ScriptStep } from "arkah-agent-guardrails/testing";
import { turnInput, userText } from "./fixtures.js";

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

/**
 * The store as another resolver meets it: at the confirm path's reconciliation (after any check of
 * the slot), an operator reconciles the turn's claim `no-effect` and a new call of the turn claims
 * the reopened slot, and holds it, mid-write; only then does the reconciliation reach the store.
 */
export function reopenedBeforeReconcile(store: GuardrailStore, rival: MutationIdentity): { store: GuardrailStore; rivalToken: () => string } {
  let rivalToken: string | undefined;
  const wrapped = new Proxy(store, {
    get(target, property) {
      if (property !== "reconcileMutation") {
        const value = Reflect.get(target, property, target) as unknown;
        // The store's methods use its private fields: they run on the store itself.
        return typeof value === "function" ? (value as (...args: unknown[]) => unknown).bind(target) : value;
      }
      return async (reconciliation: Reconciliation) => {
        if (rivalToken === undefined) {
          const reopened = await target.reconcileMutation({ turnKey: reconciliation.turnKey, resolution: "no-effect", operatorRef: "INC-1" });
          if (!reopened.reconciled) throw new Error(`the operator's reconciliation answered ${reopened.reason}`);
          const claimed = await target.claimMutation(rival);
          if (claimed.status !== "acquired") throw new Error(`the new call's claim answered ${claimed.status}`);
          rivalToken = claimed.token;
        }
        return target.reconcileMutation(reconciliation);
      };
    },
  });
  return {
    store: wrapped,
    rivalToken: () => {
      if (rivalToken === undefined) throw new Error("the slot was never reopened: confirm's reconciliation did not reach the store");
      return rivalToken;
    },
  };
}
