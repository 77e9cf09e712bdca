/**
 * Steps 2 to 4 of the decision (design §3) through the real `createAgent` loop: unregistered
 * tools, duplicate call ids and authorization, plus the construction-time configuration errors.
 * Every assertion is on a real side effect (the document service, a counted tool) or on the
 * ToolMessage the model receives.
 */
import { AIMessage, HumanMessage } from "@langchain/core/messages";
import { Command, interrupt, MemorySaver, type BaseCheckpointSaver } from "@langchain/langgraph";
import { createAgent, tool } from "langchain";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import {
  ConfigurationError,
  createDocumentGuardrails,
  InMemoryGuardrailStore,
  type Authorize,
  type AuthorizeCall,
  type DocumentGuardrailsOptions,
  type GuardrailStore,
  type ToolPolicy,
  type TurnInput,
} from "arkah-agent-guardrails";
import { ScriptedModel, type ScriptStep } from "arkah-agent-guardrails/testing";
import {
  admit,
  DocumentService,
  documentTools,
  invokeTurn,
  outcomeOf,
  read,
  remember,
  rename,
  TOOL_POLICIES,
  toolOutcomes,
  turnInput,
  userText,
} from "../support/fixtures.js";

// ---------------------------------------------------------------------------------------------
// Local helpers

/** Side effects of the extra tools this file exposes. */
interface Effects {
  remembered: number;
  deleted: number;
}

/**
 * A real agent with the fixture's document tools, a counting `remember` and a `delete_document`
 * tool; `policies` decides which of them the guardrails know about.
 */
function agentWithExtras(options: {
  script: readonly ScriptStep[];
  policies: Record<string, ToolPolicy>;
  authorize?: Authorize;
  store?: GuardrailStore;
  input?: TurnInput;
  service?: DocumentService;
  logger?: { warn: (message: string) => void };
  checkpointer?: BaseCheckpointSaver;
}) {
  const store = options.store ?? new InMemoryGuardrailStore();
  const input = options.input ?? turnInput();
  const service = options.service ?? new DocumentService();
  const effects: Effects = { remembered: 0, deleted: 0 };
  const { readDocument, searchSources, renameDocument } = documentTools(service);
  const countedRemember = tool(
    () => {
      effects.remembered += 1;
      return "Preference saved";
    },
    { name: "remember", description: "Remember a preference.", schema: z.object({ preference: z.string() }) },
  );
  const deleteDocument = tool(
    () => {
      effects.deleted += 1;
      return "deleted";
    },
    { name: "delete_document", description: "Delete the document.", schema: z.object({}) },
  );
  const model = new ScriptedModel(options.script);
  const agent = createAgent({
    model,
    tools: [readDocument, searchSources, renameDocument, countedRemember, deleteDocument],
    middleware: [
      createDocumentGuardrails({
        input,
        store,
        userMessageLabel: "user",
        authorize: options.authorize ?? (() => true),
        tools: options.policies,
        logger: options.logger ?? { warn: () => undefined },
      }),
    ],
    ...(options.checkpointer === undefined ? {} : { checkpointer: options.checkpointer }),
  });
  return { agent, store, input, service, effects, model };
}

function validOptions(overrides: Record<string, unknown> = {}): DocumentGuardrailsOptions {
  return {
    input: turnInput(),
    store: new InMemoryGuardrailStore(),
    userMessageLabel: "user",
    authorize: () => true,
    tools: TOOL_POLICIES,
    ...overrides,
  };
}

/** The ConfigurationError `build` throws; fails if it throws anything else or nothing. */
function configurationError(build: () => unknown): ConfigurationError {
  let caught: unknown;
  try {
    build();
  } catch (error) {
    caught = error;
  }
  expect(ConfigurationError.isInstance(caught), `expected a ConfigurationError, got ${String(caught)}`).toBe(true);
  return caught as ConfigurationError;
}

// ---------------------------------------------------------------------------------------------

describe("unregistered tools fail closed", () => {
  it("a tool the agent exposes but the guardrails do not know is refused and never runs", async () => {
    const { agent, store, input, service, effects, model } = agentWithExtras({
      script: [{ toolCalls: [{ id: "d1", name: "delete_document", args: {} }] }, { content: "done" }],
      policies: TOOL_POLICIES,
    });
    await admit(store, input);
    const messages = await invokeTurn(agent, input);
    expect(outcomeOf(messages, "d1")).toMatchObject({ status: "error", code: "unregistered_tool" });
    expect(effects.deleted).toBe(0);
    expect(service.writes).toBe(0);
    // The run went on: the model saw the refusal and answered.
    expect(model.calls).toBe(2);
  });

  it("the unregistered tool is refused even beside registered calls, which still run", async () => {
    const { agent, store, input, service, effects } = agentWithExtras({
      script: [
        { toolCalls: [read("r1"), { id: "d1", name: "delete_document", args: {} }, remember("m1")] },
        { content: "done" },
      ],
      policies: TOOL_POLICIES,
    });
    await admit(store, input);
    const messages = await invokeTurn(agent, input);
    expect(outcomeOf(messages, "d1").code).toBe("unregistered_tool");
    expect(outcomeOf(messages, "r1").status).toBe("success");
    expect(outcomeOf(messages, "m1").status).toBe("success");
    expect(effects.deleted).toBe(0);
    expect(service.reads).toBe(1);
    expect(effects.remembered).toBe(1);
  });

  it("the control: once registered, the same tool runs", async () => {
    const { agent, store, input, effects } = agentWithExtras({
      script: [{ toolCalls: [{ id: "d1", name: "delete_document", args: {} }] }, { content: "done" }],
      policies: { ...TOOL_POLICIES, delete_document: { kind: "auxiliary" } },
    });
    await admit(store, input);
    const messages = await invokeTurn(agent, input);
    expect(outcomeOf(messages, "d1").status).toBe("success");
    expect(effects.deleted).toBe(1);
  });

  it("a registered name that the agent does not expose is refused unregistered_tool", async () => {
    const { agent, store, input, service, effects } = agentWithExtras({
      script: [
        { toolCalls: [read("r1")] },
        { toolCalls: [{ id: "p1", name: "purge_document", args: {} }] },
        { content: "done" },
      ],
      policies: { ...TOOL_POLICIES, purge_document: { kind: "mutation" } },
    });
    await admit(store, input);
    const messages = await invokeTurn(agent, input);
    const outcome = outcomeOf(messages, "p1");
    expect(outcome).toMatchObject({ status: "error", code: "unregistered_tool" });
    // Our refusal, not LangChain's "is not a valid tool" message listing the other tools.
    expect(outcome.content).not.toMatch(/not a valid tool/);
    expect(service.writes).toBe(0);
    expect(effects.deleted).toBe(0);
  });
});

describe("duplicate call ids in one step run nothing", () => {
  it("every call of the step is refused duplicate_call_id: no read, no write, no auxiliary effect", async () => {
    const { agent, store, input, service, effects } = agentWithExtras({
      script: [
        { toolCalls: [read("dup"), remember("m1"), rename("dup")] },
        { content: "done" },
      ],
      policies: TOOL_POLICIES,
    });
    await admit(store, input);
    const messages = await invokeTurn(agent, input);
    const outcomes = toolOutcomes(messages);
    expect(outcomes).toHaveLength(3);
    for (const outcome of outcomes) expect(outcome).toMatchObject({ status: "error", code: "duplicate_call_id" });
    expect(service.reads).toBe(0);
    expect(service.writes).toBe(0);
    expect(effects.remembered).toBe(0);
  });

  it("two reads sharing an id both refuse; the refused step does not consume the turn's mutation", async () => {
    const { agent, store, input, service } = agentWithExtras({
      script: [
        { toolCalls: [read("x"), read("x")] },
        { toolCalls: [rename("y"), rename("y", "Other")] },
        { toolCalls: [read("r1")] },
        { toolCalls: [rename("w1")] },
        { content: "done" },
      ],
      policies: TOOL_POLICIES,
    });
    await admit(store, input);
    const messages = await invokeTurn(agent, input);
    const codes = toolOutcomes(messages).map((outcome) => `${outcome.callId}:${outcome.code ?? outcome.status}`);
    expect(codes).toEqual([
      "x:duplicate_call_id",
      "x:duplicate_call_id",
      "y:duplicate_call_id",
      "y:duplicate_call_id",
      "r1:success",
      "w1:success",
    ]);
    expect(service.reads).toBe(1);
    expect(service.writes).toBe(1);
  });
  // REFUSAL_MESSAGES.duplicate_call_id tells the model "ids in this step are missing or repeated,
  // so none of the calls ran": a missing id must spoil the whole step, like a repeated one.
  it.each<[string, string | undefined]>([
    ["a missing id", undefined],
    ["an empty id", ""],
  ])("a call with %s is refused with its whole step, and nothing runs", async (_name, id) => {
    const { agent, store, input, service, effects } = agentWithExtras({
      script: [
        new AIMessage({
          content: "",
          tool_calls: [
            { ...(id === undefined ? {} : { id }), name: "read_document", args: {}, type: "tool_call" },
            { id: "m1", name: "remember", args: { preference: "short" }, type: "tool_call" },
          ],
        }),
        { content: "done" },
      ],
      policies: TOOL_POLICIES,
    });
    await admit(store, input);
    const messages = await invokeTurn(agent, input);
    const outcomes = toolOutcomes(messages);
    expect(outcomes).toHaveLength(2);
    expect(outcomes[0]?.code).toBe("duplicate_call_id");
    expect(service.reads).toBe(0);
    // The sibling with a valid id is part of the same defective step.
    expect(outcomeOf(messages, "m1").code).toBe("duplicate_call_id");
    expect(effects.remembered).toBe(0);
  });
});

describe("authorize must return literally true", () => {
  const refusingAnswers: [string, () => unknown][] = [
    ['"true"', () => "true"],
    ["1", () => 1],
    ["{}", () => ({})],
    ["undefined", () => undefined],
    ["null", () => null],
    ["a promise of 1", () => Promise.resolve(1)],
    ["false", () => false],
    [
      "a throw",
      () => {
        throw new Error("authz backend down");
      },
    ],
    ["a rejection", () => Promise.reject(new Error("authz backend down"))],
  ];

  it.each(refusingAnswers)("an answer of %s refuses every call with no side effect", async (_name, answer) => {
    const { agent, store, input, service, effects, model } = agentWithExtras({
      script: [{ toolCalls: [read("r1"), remember("m1")] }, { toolCalls: [rename("w1")] }, { content: "done" }],
      policies: TOOL_POLICIES,
      authorize: answer as Authorize,
    });
    await admit(store, input);
    const messages = await invokeTurn(agent, input);
    expect(toolOutcomes(messages).map((outcome) => outcome.code)).toEqual(["unauthorized", "unauthorized", "unauthorized"]);
    expect(service.reads).toBe(0);
    expect(service.writes).toBe(0);
    expect(effects.remembered).toBe(0);
    // The refusals are tool results: the run goes on and the model answers.
    expect(model.calls).toBe(3);
    // A throwing authorize leaks nothing of its error to the model.
    for (const outcome of toolOutcomes(messages)) expect(outcome.content).not.toContain("authz backend down");
  });

  it("a promise of true allows the call (control)", async () => {
    const { agent, store, input, service } = agentWithExtras({
      script: [{ toolCalls: [read("r1")] }, { toolCalls: [rename("w1")] }, { content: "done" }],
      policies: TOOL_POLICIES,
      authorize: () => Promise.resolve(true),
    });
    await admit(store, input);
    await invokeTurn(agent, input);
    expect(service.reads).toBe(1);
    expect(service.writes).toBe(1);
  });

  it("authorize gets the kind and the turn, and refusing only the mutation leaves the read alone", async () => {
    const seen: { name: string; kind: string; scopeId: string }[] = [];
    const { agent, store, input, service } = agentWithExtras({
      script: [{ toolCalls: [read("r1")] }, { toolCalls: [rename("w1")] }, { content: "done" }],
      policies: TOOL_POLICIES,
      authorize: (call, turn) => {
        seen.push({ name: call.name, kind: call.kind, scopeId: turn.scopeId });
        return call.kind !== "mutation";
      },
    });
    await admit(store, input);
    const messages = await invokeTurn(agent, input);
    expect(outcomeOf(messages, "r1").status).toBe("success");
    expect(outcomeOf(messages, "w1").code).toBe("unauthorized");
    expect(service.reads).toBe(1);
    expect(service.writes).toBe(0);
    expect(seen).toEqual([
      { name: "read_document", kind: "document-read", scopeId: "doc-1" },
      { name: "rename_document", kind: "mutation", scopeId: "doc-1" },
    ]);
  });

  it("authorize receives a copy of the arguments: changing them does not change what the tool runs with", async () => {
    const { agent, store, input, service } = agentWithExtras({
      script: [{ toolCalls: [read("r1")] }, { toolCalls: [rename("w1", "Field notes", 0)] }, { content: "done" }],
      policies: TOOL_POLICIES,
      authorize: (call: AuthorizeCall) => {
        if (typeof call.args === "object" && call.args !== null) {
          const args = call.args as Record<string, unknown>;
          args.title = "Hijacked";
          args.expectedRevision = 0;
        }
        return true;
      },
    });
    await admit(store, input);
    const messages = await invokeTurn(agent, input);
    expect(outcomeOf(messages, "w1").status).toBe("success");
    expect(service.writes).toBe(1);
    expect(service.title).toBe("Field notes");
  });

  it("authorize is asked for every call, a replayed mutation included, and can refuse the replay", async () => {
    const store = new InMemoryGuardrailStore();
    const service = new DocumentService();
    const input = turnInput();
    await admit(store, input);
    const script = (): ScriptStep[] => [{ toolCalls: [read("r1")] }, { toolCalls: [rename("w1")] }, { content: "done" }];
    const asked: string[] = [];

    // First delivery: runs the write.
    const first = agentWithExtras({
      script: script(),
      policies: TOOL_POLICIES,
      store,
      service,
      input,
      authorize: (call) => {
        asked.push(call.id);
        return true;
      },
    });
    const firstMessages = await invokeTurn(first.agent, input);
    expect(outcomeOf(firstMessages, "w1").status).toBe("success");
    expect(service.writes).toBe(1);

    // Transport retry of the same turn: the write is replayed, and authorize was still asked.
    const second = agentWithExtras({
      script: script(),
      policies: TOOL_POLICIES,
      store,
      service,
      input,
      authorize: (call) => {
        asked.push(call.id);
        return true;
      },
    });
    const secondMessages = await invokeTurn(second.agent, input);
    expect(outcomeOf(secondMessages, "w1").content).toBe(outcomeOf(firstMessages, "w1").content);
    expect(service.writes).toBe(1);
    expect(asked).toEqual(["r1", "w1", "r1", "w1"]);

    // A retry after the user lost access: the stored result is not handed out.
    const third = agentWithExtras({
      script: script(),
      policies: TOOL_POLICIES,
      store,
      service,
      input,
      authorize: (call) => call.kind !== "mutation",
    });
    const thirdMessages = await invokeTurn(third.agent, input);
    expect(outcomeOf(thirdMessages, "w1").code).toBe("unauthorized");
    expect(service.writes).toBe(1);
  });
});

describe("an interrupt raised inside authorize propagates (design §3: interrupts always propagate)", () => {
  /** An agent whose authorize asks a human (via interrupt) before any mutation. */
  function approvalAgent() {
    const warnings: string[] = [];
    const built = agentWithExtras({
      script: [{ toolCalls: [read("r1")] }, { toolCalls: [rename("w1")] }, { content: "done" }],
      policies: TOOL_POLICIES,
      checkpointer: new MemorySaver(),
      logger: { warn: (message) => warnings.push(message) },
      authorize: (call) => call.kind !== "mutation" || interrupt({ approve: call.name }) === "approve",
    });
    return { ...built, warnings };
  }

  it.each([
    ["approve", "success", 1],
    ["reject", "unauthorized", 0],
  ])("the run pauses for approval; resuming with %s decides the call", async (answer, expected, writes) => {
    const { agent, store, input, service, warnings } = approvalAgent();
    await admit(store, input);
    const config = { configurable: { thread_id: `approval-${answer}` } };
    const paused = await agent.invoke({ messages: [new HumanMessage(userText(input))] }, config);
    expect(paused.__interrupt__?.[0]?.value).toEqual({ approve: "rename_document" });
    expect(service.writes).toBe(0);
    expect(warnings).not.toContain("authorize threw; the call is refused");

    const resumed = await agent.invoke(new Command({ resume: answer }), config);
    const outcome = outcomeOf(resumed.messages, "w1");
    expect(outcome.code ?? outcome.status).toBe(expected);
    expect(service.writes).toBe(writes);
  });
});

describe("createDocumentGuardrails rejects bad options at construction", () => {
  it("accepts the valid baseline (control)", () => {
    expect(() => createDocumentGuardrails(validOptions())).not.toThrow();
  });

  it("an unknown option key names the key", () => {
    const error = configurationError(() => createDocumentGuardrails(validOptions({ retries: 3 })));
    expect(error.message).toMatch(/retries/);
  });

  it("a store missing a method names the methods to implement", () => {
    const store = new InMemoryGuardrailStore();
    const partial = {
      getReceipt: store.getReceipt.bind(store),
      putReceiptIfAbsent: store.putReceiptIfAbsent.bind(store),
      recordSuccessfulRead: store.recordSuccessfulRead.bind(store),
      hasSuccessfulRead: store.hasSuccessfulRead.bind(store),
      settleMutation: store.settleMutation.bind(store),
    };
    const error = configurationError(() => createDocumentGuardrails(validOptions({ store: partial })));
    expect(error.message).toMatch(/store must implement GuardrailStore/);
    expect(error.message).toMatch(/claimMutation/);
  });

  it("no tools: asks to register at least one", () => {
    const error = configurationError(() => createDocumentGuardrails(validOptions({ tools: {} })));
    expect(error.message).toMatch(/register at least one tool/);
  });

  it("an unknown tool kind names the tool", () => {
    const error = configurationError(() =>
      createDocumentGuardrails(validOptions({ tools: { ...TOOL_POLICIES, wipe: { kind: "write" } } })),
    );
    expect(error.message).toMatch(/wipe/);
  });

  it("an input without the user segment label names the label", () => {
    const input = turnInput({ segments: [{ label: "prompt", content: "hello" }] });
    const error = configurationError(() => createDocumentGuardrails(validOptions({ input })));
    expect(error.message).toMatch(/"user"/);
    expect(error.message).toMatch(/userMessageLabel/);
  });

  it("an invalid input is a configuration error naming the field", () => {
    const error = configurationError(() => createDocumentGuardrails(validOptions({ input: turnInput({ scopeId: "" }) })));
    expect(error.message).toMatch(/scopeId/);
  });

  it("authorize that is not a function, or an empty userMessageLabel, are refused", () => {
    expect(configurationError(() => createDocumentGuardrails(validOptions({ authorize: true }))).message).toMatch(
      /authorize must be a function/,
    );
    expect(configurationError(() => createDocumentGuardrails(validOptions({ userMessageLabel: "" }))).message).toMatch(
      /userMessageLabel/,
    );
  });

  it.each<[string, Record<string, unknown>, RegExp]>([
    ["a logger without warn", { logger: {} }, /logger must have a warn/],
    ["a non-boolean requireResolvedScope", { requireResolvedScope: "yes" }, /requireResolvedScope/],
    ["a store that is not an object", { store: "memory" }, /store must implement GuardrailStore/],
  ])("%s is refused, naming the fix", (_name, overrides, pattern) => {
    expect(configurationError(() => createDocumentGuardrails(validOptions(overrides))).message).toMatch(pattern);
  });

  it('owner "tool" with maxAttempts > 1 says to remove maxAttempts or let the middleware own retries', () => {
    const error = configurationError(() =>
      createDocumentGuardrails(
        validOptions({ tools: { ...TOOL_POLICIES, read_document: { kind: "document-read", retry: { owner: "tool", maxAttempts: 3 } } } }),
      ),
    );
    expect(error.message).toMatch(/tools\.read_document\.retry/);
    expect(error.message).toMatch(/remove maxAttempts|owner "middleware"/);
  });

  it("a mutation with maxAttempts > 1 but not idempotent says to set idempotent: true", () => {
    const error = configurationError(() =>
      createDocumentGuardrails(
        validOptions({ tools: { ...TOOL_POLICIES, rename_document: { kind: "mutation", retry: { maxAttempts: 2 } } } }),
      ),
    );
    expect(error.message).toMatch(/tools\.rename_document\.retry/);
    expect(error.message).toMatch(/idempotent: true/);
    // The fix it names works.
    expect(() =>
      createDocumentGuardrails(
        validOptions({
          tools: { ...TOOL_POLICIES, rename_document: { kind: "mutation", retry: { maxAttempts: 2, idempotent: true } } },
        }),
      ),
    ).not.toThrow();
  });

  it.each([
    ["maxAttempts 6", { maxAttempts: 6 }, /maxAttempts/],
    ["maxAttempts 0", { maxAttempts: 0 }, /maxAttempts/],
    ["a negative delay", { delayMs: -1 }, /delayMs/],
    ["an unknown retry key", { retries: 2 }, /retries/],
  ])("a retry policy with %s is refused, naming the field", (_name, retry, pattern) => {
    const error = configurationError(() =>
      createDocumentGuardrails(validOptions({ tools: { ...TOOL_POLICIES, read_document: { kind: "document-read", retry } } })),
    );
    expect(error.message).toMatch(pattern);
  });
});
