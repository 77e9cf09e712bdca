/**
 * Step 7a and 7b of the decision (design §3) through the real `createAgent` loop: a mutation that
 * shares its model step with a read is deferred, only the first mutation of a step is eligible,
 * and a turn makes one mutation in all. Tool calls of one step run concurrently (a framework fact),
 * so the last block proves the rules do not depend on which call finishes first.
 *
 * Every assertion is on a real side effect (`service.writes`, `service.reads`, the document's
 * title) or on the ToolMessage a tool or the guardrails produced for the model.
 */
import { ToolMessage, type BaseMessage } from "@langchain/core/messages";
import { createAgent, createMiddleware } from "langchain";
import { describe, expect, it } from "vitest";
import { createDocumentGuardrails, InMemoryGuardrailStore } from "arkah-agent-guardrails";
import { ScriptedModel, type ScriptStep } from "arkah-agent-guardrails/testing";
import {
  admit,
  DocumentService,
  documentTools,
  guardedAgent,
  invokeTurn,
  outcomeOf,
  read,
  remember,
  rename,
  search,
  TOOL_POLICIES,
  turnInput,
  type ToolHooks,
} from "../support/fixtures.js";

const UNTOUCHED = '{"title":"Untitled","revision":0}';
const RENAMED = '{"title":"Field notes","revision":1}';

// ---------------------------------------------------------------------------------------------
// Local helpers

/** A promise with its resolver, to hold a tool at a point the test controls. */
function gate() {
  let open: () => void = () => undefined;
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { opened, open };
}

/** Records `service.writes` when the scripted model is asked for its next step. */
function recordWrites(service: DocumentService, into: number[], step: ScriptStep): ScriptStep {
  return (messages: readonly BaseMessage[]) => {
    into.push(service.writes);
    return typeof step === "function" ? step(messages) : step;
  };
}

/**
 * A real agent whose guardrails are wrapped by an outer observer middleware. The observer sees
 * every ToolMessage the guardrails return, including refusals, at the moment it is returned, so a
 * tool can wait for a sibling call's outcome. `version` picks LangGraph's tool execution: `v2`
 * runs one task per call, `v1` runs the step's calls in one task with `Promise.all`.
 */
function observedAgent(options: { script: readonly ScriptStep[]; hooks: ToolHooks; version: "v1" | "v2" }) {
  const store = new InMemoryGuardrailStore();
  const input = turnInput();
  const service = new DocumentService();
  const decided = new Map<string, ReturnType<typeof gate>>();
  const decision = (callId: string) => {
    let entry = decided.get(callId);
    if (entry === undefined) {
      entry = gate();
      decided.set(callId, entry);
    }
    return entry;
  };
  const observer = createMiddleware({
    name: "OutcomeObserver",
    wrapToolCall: async (request, handler) => {
      const result = await handler(request);
      if (ToolMessage.isInstance(result)) decision(result.tool_call_id).open();
      return result;
    },
  });
  const guardrails = createDocumentGuardrails({
    input,
    store,
    userMessageLabel: "user",
    authorize: () => true,
    tools: TOOL_POLICIES,
    logger: { warn: () => undefined },
  });
  const agent = createAgent({
    model: new ScriptedModel(options.script),
    tools: documentTools(service, options.hooks).all,
    middleware: [observer, guardrails],
    version: options.version,
  });
  return { agent, store, input, service, decided: (callId: string) => decision(callId).opened };
}

// ---------------------------------------------------------------------------------------------

describe("a mutation sharing a step with a read is deferred (read_batch_deferred)", () => {
  it("defers the mutation next to a document read; the read and an auxiliary call still run; the slot stays free", async () => {
    const writesSeen: number[] = [];
    const service = new DocumentService();
    const { agent, store, input } = guardedAgent({
      service,
      script: [
        { toolCalls: [read("r1"), rename("w1"), remember("a1")] },
        recordWrites(service, writesSeen, { toolCalls: [rename("w2")] }),
        { content: "done" },
      ],
    });
    await admit(store, input);

    const messages = await invokeTurn(agent, input);

    const deferred = outcomeOf(messages, "w1");
    expect(deferred.status).toBe("error");
    expect(deferred.code).toBe("read_batch_deferred");
    // The read and the auxiliary call of that step really ran.
    expect(outcomeOf(messages, "r1")).toMatchObject({ status: "success", code: undefined, content: UNTOUCHED });
    expect(outcomeOf(messages, "a1")).toMatchObject({ status: "success", content: "Preference saved" });
    expect(service.reads).toBe(1);
    // Nothing was written by the step that held the deferred mutation.
    expect(writesSeen).toEqual([0]);
    // The mutation alone in a later step succeeds under a new call id: the deferral claimed nothing.
    expect(outcomeOf(messages, "w2")).toMatchObject({ status: "success", content: RENAMED });
    expect(service.writes).toBe(1);
    expect(service.title).toBe("Field notes");
  });

  it("defers the mutation next to a source read (search_sources) even when the turn already read the document", async () => {
    const writesSeen: number[] = [];
    const service = new DocumentService();
    const { agent, store, input } = guardedAgent({
      service,
      script: [
        { toolCalls: [read("r1")] },
        { toolCalls: [search("s1"), rename("w1"), remember("a1")] },
        recordWrites(service, writesSeen, { toolCalls: [rename("w2")] }),
        { content: "done" },
      ],
    });
    await admit(store, input);

    const messages = await invokeTurn(agent, input);

    expect(outcomeOf(messages, "w1")).toMatchObject({ status: "error", code: "read_batch_deferred" });
    expect(outcomeOf(messages, "s1")).toMatchObject({
      status: "success",
      content: "source: style guide says short titles",
    });
    expect(outcomeOf(messages, "a1")).toMatchObject({ status: "success", content: "Preference saved" });
    expect(writesSeen).toEqual([0]);
    expect(outcomeOf(messages, "w2")).toMatchObject({ status: "success", content: RENAMED });
    expect(service.writes).toBe(1);
  });
});

describe("one mutation per step and per turn", () => {
  it("lets only the first mutation of a step run (single_mutation) and refuses a later step's mutation (mutation_conflict)", async () => {
    const writesSeen: number[] = [];
    const service = new DocumentService();
    const { agent, store, input } = guardedAgent({
      service,
      script: [
        { toolCalls: [read("r1")] },
        { toolCalls: [rename("w1", "Field notes", 0), rename("w2", "Other title", 0)] },
        // Arguments valid against the current revision: only the guardrails can stop this one.
        recordWrites(service, writesSeen, { toolCalls: [rename("w3", "Third title", 1)] }),
        { content: "done" },
      ],
    });
    await admit(store, input);

    const messages = await invokeTurn(agent, input);

    expect(outcomeOf(messages, "w1")).toMatchObject({ status: "success", content: RENAMED });
    expect(outcomeOf(messages, "w2")).toMatchObject({ status: "error", code: "single_mutation" });
    expect(writesSeen).toEqual([1]);
    expect(outcomeOf(messages, "w3")).toMatchObject({ status: "error", code: "mutation_conflict" });
    expect(service.writes).toBe(1);
    expect(service.title).toBe("Field notes");
  });
});

describe("the step rules hold while the step's calls run concurrently", () => {
  it.each(["v2", "v1"] as const)(
    "(%s) refuses the second mutation while the first one's write is still in flight; exactly one write",
    async (version) => {
      // The first mutation's write waits until the second mutation's outcome has been returned,
      // so the second is decided while the first is in flight (a serial run would never finish).
      let secondDecided: Promise<void> = Promise.resolve();
      const { agent, store, input, service, decided } = observedAgent({
        version,
        script: [
          { toolCalls: [read("r1")] },
          { toolCalls: [rename("w1", "Field notes", 0), rename("w2", "Other title", 0)] },
          { content: "done" },
        ],
        hooks: {
          beforeWrite: async () => {
            await secondDecided;
          },
        },
      });
      secondDecided = decided("w2");
      await admit(store, input);

      const messages = await invokeTurn(agent, input);

      expect(outcomeOf(messages, "w2")).toMatchObject({ status: "error", code: "single_mutation" });
      expect(outcomeOf(messages, "w1")).toMatchObject({ status: "success", content: RENAMED });
      expect(service.writes).toBe(1);
      expect(service.title).toBe("Field notes");
    },
  );

  it.each(["v2", "v1"] as const)(
    "(%s) defers a mutation without waiting for its sibling read, and the deferral holds when that read fails",
    async (version) => {
      // The read waits until the mutation's deferral has been returned, then fails.
      let mutationDecided: Promise<void> = Promise.resolve();
      const { agent, store, input, service, decided } = observedAgent({
        version,
        script: [{ toolCalls: [read("r1"), rename("w1")] }, { content: "done" }],
        hooks: {
          beforeRead: async () => {
            await mutationDecided;
            throw new Error("read backend down");
          },
        },
      });
      mutationDecided = decided("w1");
      await admit(store, input);

      const messages = await invokeTurn(agent, input);

      expect(outcomeOf(messages, "w1")).toMatchObject({ status: "error", code: "read_batch_deferred" });
      expect(outcomeOf(messages, "r1")).toMatchObject({ status: "error", code: "tool_failed" });
      expect(service.reads).toBe(0);
      expect(service.writes).toBe(0);
    },
  );
});
