/**
 * Governance surfaces through the real `createAgent` loop: what `report()` says is governed (and
 * `unregisteredTools: "fail"`), `authorize` with the invocation's context, and
 * `createToolGuardrails` failing closed (a tool registry, no permission without `authorize`).
 */
import { HumanMessage } from "@langchain/core/messages";
import type { ClientTool } from "@langchain/core/tools";
import { createAgent, tool } from "langchain";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import {
  AdmissionError,
  allowAllCalls,
  ConfigurationError,
  createDocumentGuardrails,
  createToolGuardrails,
  InMemoryGuardrailStore,
  turnContext,
} from "arkah-agent-guardrails";
import { toolFingerprint } from "arkah-agent-guardrails/store";
import { ScriptedModel } from "arkah-agent-guardrails/testing";
import {
  admit,
  DocumentService,
  documentTools,
  outcomeOf,
  read,
  rename,
  TOOL_POLICIES,
  turnInput,
  USER_MESSAGE,
} from "../support/fixtures.js";

/** A tool nobody registered with the guardrails. */
function peekTool(runs: { peeks: number }) {
  return tool(
    () => {
      runs.peeks += 1;
      return "peeked";
    },
    { name: "peek", description: "Peek at something.", schema: z.object({}) },
  );
}

describe("report(): what the guardrails govern of the agent", () => {
  it("lists every registered tool; coverage appears once the agent ran, naming the tools it does not govern", async () => {
    const store = new InMemoryGuardrailStore();
    const input = turnInput();
    await admit(store, input);
    const service = new DocumentService();
    const runs = { peeks: 0 };
    const guardrails = createDocumentGuardrails({ input, store, userMessageLabel: "user", authorize: () => true, tools: TOOL_POLICIES });
    const agent = createAgent({
      model: new ScriptedModel([{ toolCalls: [{ id: "p1", name: "peek", args: {} }] }, { content: "done" }]),
      tools: [...documentTools(service).all, peekTool(runs)] as ClientTool[],
      middleware: [guardrails],
    });
    expect(guardrails.report().coverage).toBeUndefined();
    expect(guardrails.report().tools.map((entry) => entry.name)).toEqual(Object.keys(TOOL_POLICIES));
    expect(guardrails.report().tools.map((entry) => entry.fingerprint)).toEqual(Object.keys(TOOL_POLICIES).map(() => undefined));

    const { messages } = await agent.invoke({ messages: [new HumanMessage(USER_MESSAGE)] });
    expect(outcomeOf(messages, "p1").code).toBe("unregistered_tool");
    expect(runs.peeks).toBe(0);
    const byName = Object.fromEntries(documentTools(service).all.map((entry) => [entry.name, toolFingerprint(entry)]));
    expect(Object.fromEntries(guardrails.report().tools.map((entry) => [entry.name, entry.fingerprint]))).toEqual(byName);
    expect(guardrails.report().coverage).toEqual({
      agentTools: ["peek", "read_document", "remember", "rename_document", "search_sources"],
      governed: ["read_document", "remember", "rename_document", "search_sources"],
      ungoverned: ["peek"],
      level: "partial",
      inventory: "unpinned",
      drift: [],
    });
    // The manifest a reviewer checks in: the governed tools the agent exposed, by name.
    expect(guardrails.report().manifest).toEqual({
      format: "arkah.tool-manifest",
      version: 2,
      tools: Object.keys(byName)
        .sort()
        .map((name) => ({ name, kind: TOOL_POLICIES[name]?.kind, fingerprint: byName[name] })),
    });
  });

  it('unregisteredTools: "fail" fails the run at the first model call, naming the tools; the model is never called', async () => {
    const store = new InMemoryGuardrailStore();
    const input = turnInput();
    await admit(store, input);
    const runs = { peeks: 0 };
    const model = new ScriptedModel([{ toolCalls: [{ id: "p1", name: "peek", args: {} }] }, { content: "done" }]);
    const agent = createAgent({
      model,
      tools: [...documentTools(new DocumentService()).all, peekTool(runs)] as ClientTool[],
      middleware: [
        createDocumentGuardrails({
          input,
          store,
          userMessageLabel: "user",
          authorize: () => true,
          tools: TOOL_POLICIES,
          unregisteredTools: "fail",
        }),
      ],
    });
    const failure = await agent.invoke({ messages: [new HumanMessage(USER_MESSAGE)] }).then(
      () => undefined,
      (error: unknown) => error,
    );
    const cause = (failure as { cause?: unknown }).cause;
    expect(ConfigurationError.isInstance(failure) || ConfigurationError.isInstance(cause)).toBe(true);
    expect(String(failure)).toContain("peek");
    expect(model.calls).toBe(0);
    expect(runs.peeks).toBe(0);
  });
});

describe("authorize sees the invocation's context", () => {
  it("a per-user check lives in the guardrails: the host's own context fields reach authorize", async () => {
    const store = new InMemoryGuardrailStore();
    const service = new DocumentService();
    const seen: unknown[] = [];
    const guardrails = createDocumentGuardrails({
      store,
      userMessageLabel: "user",
      authorize: (call, turn, { context }) => {
        seen.push({ userId: context.userId, scopeId: turn.scopeId });
        return context.userId === "owner";
      },
      tools: TOOL_POLICIES,
    });
    const agent = createAgent({
      model: new ScriptedModel([
        { toolCalls: [read("r1")] },
        { toolCalls: [rename("w1")] },
        { content: "done" },
        { toolCalls: [read("r2")] },
        { toolCalls: [rename("w2")] },
        { content: "done" },
      ]),
      tools: documentTools(service).all,
      middleware: [guardrails],
    });
    const stranger = turnInput({ turnId: "turn-stranger" });
    await admit(store, stranger);
    const refused = await agent.invoke(
      { messages: [new HumanMessage(USER_MESSAGE)] },
      { context: { ...turnContext(stranger), userId: "stranger" } },
    );
    expect(outcomeOf(refused.messages, "w1").code).toBe("unauthorized");
    expect(service.writes).toBe(0);

    const owner = turnInput({ turnId: "turn-owner" });
    await admit(store, owner);
    const allowed = await agent.invoke({ messages: [new HumanMessage(USER_MESSAGE)] }, { context: { ...turnContext(owner), userId: "owner" } });
    expect(outcomeOf(allowed.messages, "w2").status).toBe("success");
    expect(service.writes).toBe(1);
    expect(seen).toContainEqual({ userId: "stranger", scopeId: "doc-1" });
    expect(seen).toContainEqual({ userId: "owner", scopeId: "doc-1" });
  });

  it("forgetting the turn in context is a type error for a middleware built without input", async () => {
    const store = new InMemoryGuardrailStore();
    const agent = createAgent({
      model: new ScriptedModel([{ content: "hi" }]),
      tools: documentTools(new DocumentService()).all,
      middleware: [createDocumentGuardrails({ store, userMessageLabel: "user", authorize: () => true, tools: TOOL_POLICIES })],
    });
    const failure = await agent
      // @ts-expect-error -- the context must carry the turn (turnContext(turn)).
      .invoke({ messages: [new HumanMessage(USER_MESSAGE)] }, { context: { userId: "u1" } })
      .then(
        () => undefined,
        (error: unknown) => error,
      );
    expect(String(failure)).toContain("no turn in context");
  });

  // The middleware has no contextSchema at run time: a context that is not an object reaches the
  // turn gate, whose error names the fix, and nothing runs (the model is never called).
  it("a context that is not an object: AdmissionError invalid_input before the model is called", async () => {
    const store = new InMemoryGuardrailStore();
    const service = new DocumentService();
    const model = new ScriptedModel([{ toolCalls: [read("r1")] }, { content: "done" }]);
    const agent = createAgent({
      model,
      tools: documentTools(service).all,
      middleware: [createDocumentGuardrails({ store, userMessageLabel: "user", authorize: () => true, tools: TOOL_POLICIES })],
    });
    const failure = await agent
      .invoke({ messages: [new HumanMessage(USER_MESSAGE)] }, { context: "turn-1" as unknown as ReturnType<typeof turnContext> })
      .then(
        () => undefined,
        (error: unknown) => error,
      );
    expect(AdmissionError.find(failure)).toMatchObject({ code: "invalid_input" });
    expect(String(failure)).toContain("no turn in context");
    expect(model.calls).toBe(0);
    expect(service.reads).toBe(0);
  });
});

describe("createToolGuardrails fails closed", () => {
  function toolAgent(options: Partial<Parameters<typeof createToolGuardrails>[0]>) {
    const runs = { peeks: 0, reads: 0 };
    const lookup = tool(
      () => {
        runs.reads += 1;
        return "found";
      },
      { name: "lookup", description: "Look up.", schema: z.object({}) },
    );
    const guardrails = createToolGuardrails({ guardrails: [], tools: ["lookup"], logger: { warn: () => undefined }, ...options });
    const agent = createAgent({
      model: new ScriptedModel([{ toolCalls: [{ id: "l1", name: "lookup", args: {} }, { id: "p1", name: "peek", args: {} }] }, { content: "done" }]),
      tools: [lookup, peekTool(runs)],
      middleware: [guardrails],
    });
    return { agent, runs, guardrails };
  }

  it("without authorize, every call is refused unauthorized and nothing runs", async () => {
    const { agent, runs } = toolAgent({});
    const { messages } = await agent.invoke({ messages: [new HumanMessage(USER_MESSAGE)] });
    expect(outcomeOf(messages, "l1").code).toBe("unauthorized");
    expect(runs).toEqual({ peeks: 0, reads: 0 });
  });

  it("allowAllCalls allows the listed tools only: a tool the registry does not list is unregistered_tool", async () => {
    const { agent, runs, guardrails } = toolAgent({ authorize: allowAllCalls });
    const { messages } = await agent.invoke({ messages: [new HumanMessage(USER_MESSAGE)] });
    expect(outcomeOf(messages, "l1").status).toBe("success");
    expect(outcomeOf(messages, "p1").code).toBe("unregistered_tool");
    expect(runs).toEqual({ peeks: 0, reads: 1 });
    expect(guardrails.report()).toEqual({
      tools: [{ name: "lookup", fingerprint: expect.stringMatching(/^[0-9a-f]{64}$/) as string, guardrails: ["schema"] }],
      coverage: { agentTools: ["lookup", "peek"], governed: ["lookup"], ungoverned: ["peek"], level: "partial", inventory: "unpinned", drift: [] },
    });
  });

  it("authorize gets the invocation's context", async () => {
    const seen: unknown[] = [];
    const { agent } = toolAgent({
      authorize: (_call, { context }) => {
        seen.push(context.userId);
        return true;
      },
    });
    await agent.invoke({ messages: [new HumanMessage(USER_MESSAGE)] }, { context: { userId: "u-7" } });
    expect(seen).toEqual(["u-7"]);
  });
});

describe("a conflict says what the turn's one change did", () => {
  it("a transport retry whose model mints a new call id gets mutation_conflict naming the completed change and its result", async () => {
    const store = new InMemoryGuardrailStore();
    const input = turnInput();
    await admit(store, input);
    const service = new DocumentService();
    const run = (script: ConstructorParameters<typeof ScriptedModel>[0]) =>
      createAgent({
        model: new ScriptedModel(script),
        tools: documentTools(service).all,
        middleware: [createDocumentGuardrails({ input, store, userMessageLabel: "user", authorize: () => true, tools: TOOL_POLICIES })],
      }).invoke({ messages: [new HumanMessage(USER_MESSAGE)] });
    await run([{ toolCalls: [read("r1")] }, { toolCalls: [rename("w1")] }, { content: "done" }]);
    expect(service.writes).toBe(1);

    // The retry of the same turn: a real provider plans the same change under a fresh id.
    const retried = await run([{ toolCalls: [read("r2")] }, { toolCalls: [rename("w9")] }, { content: "done" }]);
    const conflict = outcomeOf(retried.messages, "w9");
    expect(conflict.code).toBe("mutation_conflict");
    expect(JSON.parse(conflict.content)).toMatchObject({
      completed: { tool: "rename_document", status: "success", result: '{"title":"Field notes","revision":1}' },
    });
    expect(service.writes).toBe(1);
  });

  it("an unauthorized call is never told what the turn did", async () => {
    const store = new InMemoryGuardrailStore();
    const input = turnInput();
    await admit(store, input);
    const service = new DocumentService();
    let allow = true;
    const agent = (script: ConstructorParameters<typeof ScriptedModel>[0]) =>
      createAgent({
        model: new ScriptedModel(script),
        tools: documentTools(service).all,
        middleware: [createDocumentGuardrails({ input, store, userMessageLabel: "user", authorize: () => allow, tools: TOOL_POLICIES })],
      });
    await agent([{ toolCalls: [read("r1")] }, { toolCalls: [rename("w1")] }, { content: "done" }]).invoke({
      messages: [new HumanMessage(USER_MESSAGE)],
    });
    allow = false;
    const retried = await agent([{ toolCalls: [rename("w9")] }, { content: "done" }]).invoke({ messages: [new HumanMessage(USER_MESSAGE)] });
    const refused = outcomeOf(retried.messages, "w9");
    expect(refused.code).toBe("unauthorized");
    expect(refused.content).not.toContain("Field notes");
  });
});
