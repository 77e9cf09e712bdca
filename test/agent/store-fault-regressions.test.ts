/**
 * Regressions found by the store fault-injection matrix (test/stores/fault-matrix.test.ts), each
 * through the real `createAgent` loop on a store view the middleware does not trust:
 *
 * - applying an approval is a store call made while the mutation's claim is held; when it failed,
 *   the claim stayed pending although the tool body never started, so the turn's slot was lost
 *   until an operator reconciled it. The claim is now released before the failure propagates.
 * - the answers of `getVerdict`, `recordVerdict`, `getApproval` and `listApprovals` were used
 *   unvalidated: a malformed one crashed the run with a `TypeError`, and a well-formed verdict
 *   recorded for another call would have answered for this one. They are now a
 *   `StoreContractError`, and nothing runs.
 */
import { HumanMessage } from "@langchain/core/messages";
import { Command, MemorySaver } from "@langchain/langgraph";
import { describe, expect, it } from "vitest";
import {
  InMemoryGuardrailStore,
  requireApproval,
  StoreContractError,
  type GuardrailStore,
} from "arkah-agent-guardrails";
import {
  type VerdictKey,
  type VerdictRecord,
} from "arkah-agent-guardrails/store";
import { FaultPlan, InjectedStoreFault, type Fault } from "../support/faults.js";
import { admit, DocumentService, ForwardingStore, guardedAgent, outcomeOf, read, rename, turnInput, USER_MESSAGE } from "../support/fixtures.js";

const SCRIPT = [{ toolCalls: [read("r1")] }, { toolCalls: [rename("w1")] }, { content: "done" }];

/** An approval turn on `store`: started, then resumed with `answer` while it asks. */
async function approvalRun(store: GuardrailStore, service: DocumentService, answer: (approvalId: string) => unknown, thread: string) {
  const input = turnInput();
  const { agent } = guardedAgent({
    store,
    input,
    service,
    script: SCRIPT,
    guardrails: { guardrails: [requireApproval({ tools: ["rename_document"] })] },
    checkpointer: new MemorySaver(),
  });
  const config = { configurable: { thread_id: thread } };
  let result = await agent.invoke({ messages: [new HumanMessage(USER_MESSAGE)] }, config);
  for (let round = 0; round < 3 && (result.__interrupt__?.length ?? 0) > 0; round++) {
    const answers = Object.fromEntries(
      (result.__interrupt__ ?? []).map((entry) => [entry.id ?? "", answer((entry.value as { approvalId: string }).approvalId)]),
    );
    result = await agent.invoke(new Command({ resume: answers }), config);
  }
  expect(result.__interrupt__ ?? []).toEqual([]);
  return result.messages;
}

const keyed = (approvalId: string) => ({ decision: "approve", approvalId });

async function failureOf(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => {
      throw new Error("expected the run to fail");
    },
    (error: unknown) => error,
  );
}

async function faultedApprovalRun(fault: Fault, answer: (approvalId: string) => unknown = keyed) {
  const store = new InMemoryGuardrailStore();
  await admit(store, turnInput());
  const service = new DocumentService();
  const plan = new FaultPlan(fault);
  const error = await failureOf(approvalRun(plan.store(store), service, answer, "faulted"));
  await plan.drain();
  return { store, service, error };
}

describe("an approval that cannot be applied gives the claim back", () => {
  it("applyApproval throws: the body never started, no claim stays pending, and the retry writes once", async () => {
    const { store, service, error } = await faultedApprovalRun({ method: "applyApproval", occurrence: 1, kind: "throw" });

    expect(findFault(error)).toBeInstanceOf(InjectedStoreFault);
    expect(service.writes).toBe(0);
    expect(await store.listUnresolved()).toEqual([]);
    const trail = await store.readAudit();
    expect(trail.filter((event) => event.decision === "released").map((event) => event.toolCallId)).toEqual(["w1"]);

    const messages = await approvalRun(store, service, keyed, "retry");
    expect(outcomeOf(messages, "w1").status).toBe("success");
    expect(service.writes).toBe(1);
  });

  it("applyApproval answers malformed (it applied): the claim is released too; the retry asks again and writes once", async () => {
    const { store, service, error } = await faultedApprovalRun({ method: "applyApproval", occurrence: 1, kind: "malformed" });

    expect(StoreContractError.find(error)?.message).toMatch(/applyApproval answer/);
    expect(service.writes).toBe(0);
    expect(await store.listUnresolved()).toEqual([]);

    const messages = await approvalRun(store, service, keyed, "retry");
    expect(outcomeOf(messages, "w1").status).toBe("success");
    expect(service.writes).toBe(1);
  });
});

describe("verdict and approval answers of an untrusted store are validated", () => {
  it("a malformed getVerdict answer is a StoreContractError, not a TypeError; nothing ran", async () => {
    const { service, error } = await faultedApprovalRun({ method: "getVerdict", occurrence: 1, kind: "malformed" });
    expect(StoreContractError.find(error)?.message).toMatch(/getVerdict answer/);
    expect(service.writes).toBe(0);
  });

  it("a malformed recordVerdict answer is a StoreContractError; nothing ran", async () => {
    const { service, error } = await faultedApprovalRun({ method: "recordVerdict", occurrence: 1, kind: "malformed" });
    expect(StoreContractError.find(error)?.message).toMatch(/recordVerdict answer/);
    expect(service.writes).toBe(0);
  });

  it("a malformed listApprovals answer is a StoreContractError; nothing ran", async () => {
    // An unkeyed answer makes the middleware look for other requests of the call.
    const { service, error } = await faultedApprovalRun({ method: "listApprovals", occurrence: 1, kind: "malformed" }, () => ({
      decision: "approve",
    }));
    expect(StoreContractError.find(error)?.message).toMatch(/listApprovals answer/);
    expect(service.writes).toBe(0);
  });

  it("an allow verdict recorded for another guardrail never answers for the approval: StoreContractError, nothing ran", async () => {
    class ForgedVerdictStore extends ForwardingStore {
      override getVerdict(key: VerdictKey): Promise<VerdictRecord | undefined> {
        return Promise.resolve({
          ...key,
          guardrail: "someone-else",
          verdict: { action: "allow", outcome: "complete", detections: [] },
          recordedAt: new Date().toISOString(),
        });
      }
    }
    const store = new InMemoryGuardrailStore();
    await admit(store, turnInput());
    const service = new DocumentService();
    const error = await failureOf(approvalRun(new ForgedVerdictStore(store), service, keyed, "forged"));
    expect(StoreContractError.find(error)?.message).toMatch(/getVerdict answer: a verdict recorded for another/);
    expect(service.writes).toBe(0);
    expect(await store.listApprovals()).toEqual([]);
  });
});

/** The injected fault behind a caught error (LangChain may wrap it). */
function findFault(error: unknown): unknown {
  let current: unknown = error;
  for (let depth = 0; depth < 5 && current instanceof Error; depth++) {
    if (current instanceof InjectedStoreFault) return current;
    current = current.cause;
  }
  return undefined;
}
