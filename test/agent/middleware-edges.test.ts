/**
 * createDocumentGuardrails at its edges, through the real `createAgent` loop: the defaults it
 * applies (`requireResolvedScope`, `unregisteredTools`), what it demands of the tools it does not
 * govern, a read whose result is not text, and what its errors carry. Most of these were surviving
 * mutants of src/middleware.ts (docs/reliability.md, "Mutation score").
 */
import { HumanMessage } from "@langchain/core/messages";
import { RunnableLambda } from "@langchain/core/runnables";
import type { ClientTool, ServerTool } from "@langchain/core/tools";
import { createAgent, tool } from "langchain";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import {
  AdmissionError,
  ConfigurationError,
  createDocumentGuardrails,
  InMemoryGuardrailStore,
  type DocumentGuardrailsOptions,
} from "arkah-agent-guardrails";
import { ScriptedModel } from "arkah-agent-guardrails/testing";
import {
  admit,
  DocumentService,
  documentTools,
  guardedAgent,
  invokeTurn,
  outcomeOf,
  read,
  rename,
  TOOL_POLICIES,
  turnInput,
  userText,
} from "../support/fixtures.js";

const READ_THEN_RENAME = [{ toolCalls: [read("r1")] }, { toolCalls: [rename("w1")] }, { content: "done" }];

function baseOptions(): DocumentGuardrailsOptions {
  return {
    store: new InMemoryGuardrailStore(),
    userMessageLabel: "user",
    authorize: () => true,
    tools: TOOL_POLICIES,
    logger: { warn: () => undefined },
  };
}

describe("an unknown outcome in the scope blocks the scope's other turns by default", () => {
  /** Turn 1 writes, then its tool throws: the write landed, its outcome is unknown. */
  async function scopeWithUnknown(guardrails: Partial<DocumentGuardrailsOptions> = {}) {
    const store = new InMemoryGuardrailStore();
    const service = new DocumentService();
    const first = turnInput({ turnId: "turn-1" });
    await admit(store, first);
    const one = guardedAgent({
      script: READ_THEN_RENAME,
      store,
      service,
      input: first,
      hooks: {
        afterWrite: () => {
          throw new Error("connection reset after the write");
        },
      },
    });
    expect(outcomeOf(await invokeTurn(one.agent, first), "w1").status).toBe("error");
    expect(service.writes).toBe(1);

    // The second turn writes through its own service (the scripted write expects revision 0).
    const second = turnInput({ turnId: "turn-2" });
    await admit(store, second);
    const two = guardedAgent({ script: READ_THEN_RENAME, store, input: second, guardrails });
    return { messages: await invokeTurn(two.agent, second), service: two.service };
  }

  it("requireResolvedScope omitted: the next turn's write is refused scope_unresolved; nothing is written", async () => {
    const { messages, service } = await scopeWithUnknown();
    expect(outcomeOf(messages, "w1").code).toBe("scope_unresolved");
    expect(service.writes).toBe(0);
  });

  it("requireResolvedScope: false lets the next turn write", async () => {
    const { messages, service } = await scopeWithUnknown({ requireResolvedScope: false });
    expect(outcomeOf(messages, "w1").status).toBe("success");
    expect(service.writes).toBe(1);
  });
});

describe("tools the guardrails do not govern", () => {
  /** A tool LangChain can call but the guardrails cannot seal (not a StructuredTool). */
  function lookupTool() {
    let runs = 0;
    const lookup = RunnableLambda.from(() => {
      runs += 1;
      return "looked up";
    }).asTool({ name: "lookup", description: "Look something up.", schema: z.object({ query: z.string() }) });
    return { lookup, runs: () => runs };
  }

  it.each<[string, Partial<DocumentGuardrailsOptions>]>([
    ["by default", {}],
    ['with unregisteredTools: "refuse" given explicitly', { unregisteredTools: "refuse" }],
  ])("an unregistered tool that cannot be sealed, %s: refused unregistered_tool, never run; the governed calls run", async (_name, extra) => {
    const store = new InMemoryGuardrailStore();
    const service = new DocumentService();
    const input = turnInput();
    await admit(store, input);
    const { lookup, runs } = lookupTool();
    const tools: (ClientTool | ServerTool)[] = [...documentTools(service).all, lookup];
    const agent = createAgent({
      model: new ScriptedModel([
        { toolCalls: [{ id: "x1", name: "lookup", args: { query: "q" } }] },
        ...READ_THEN_RENAME,
      ]),
      tools,
      middleware: [createDocumentGuardrails({ ...baseOptions(), store, input, ...extra })],
    });
    const { messages } = await agent.invoke({ messages: [new HumanMessage(userText(input))] });
    expect(outcomeOf(messages, "x1").code).toBe("unregistered_tool");
    expect(runs()).toBe(0);
    expect(outcomeOf(messages, "w1").status).toBe("success");
    expect(service.writes).toBe(1);
  });
});

describe("a read whose result is not text", () => {
  it("is withheld from the model as unsupported_result and counts as no read evidence", async () => {
    const store = new InMemoryGuardrailStore();
    const service = new DocumentService();
    const input = turnInput();
    await admit(store, input);
    const picture = tool(
      () => {
        service.reads += 1;
        return [{ type: "image_url", image_url: { url: "data:image/png;base64,iVBORw0KGgo=" } }];
      },
      { name: "read_document", description: "Read the document as a picture.", schema: z.object({}) },
    );
    const { renameDocument } = documentTools(service);
    const agent = createAgent({
      model: new ScriptedModel(READ_THEN_RENAME),
      tools: [picture, renameDocument],
      middleware: [createDocumentGuardrails({ ...baseOptions(), store, input })],
    });
    const messages = await invokeTurn(agent, input);
    const outcome = outcomeOf(messages, "r1");
    expect(outcome.code).toBe("unsupported_result");
    expect(outcome.content).not.toContain("iVBORw0KGgo");
    expect(service.reads).toBe(1);
    // Without read evidence the write is refused, and nothing is written.
    expect(outcomeOf(messages, "w1").code).toBe("read_required");
    expect(service.writes).toBe(0);
  });
});

describe("the middleware itself", () => {
  it('is named "DocumentGuardrails" (LangChain tells middleware apart by name)', () => {
    expect(createDocumentGuardrails(baseOptions()).name).toBe("DocumentGuardrails");
  });

  it("an invalid fixed turn is a ConfigurationError whose cause is the AdmissionError", () => {
    let caught: unknown;
    try {
      createDocumentGuardrails({ ...baseOptions(), input: turnInput({ scopeId: "" }) });
    } catch (error) {
      caught = error;
    }
    expect(ConfigurationError.isInstance(caught)).toBe(true);
    expect((caught as Error).message).toMatch(/^invalid createDocumentGuardrails input: /);
    const cause = (caught as Error).cause;
    expect(AdmissionError.isInstance(cause)).toBe(true);
    expect((cause as AdmissionError).code).toBe("invalid_input");
  });

  it("a fixed turn runs with a user message taken from its segments", async () => {
    const store = new InMemoryGuardrailStore();
    const input = turnInput();
    await admit(store, input);
    const { agent, service } = guardedAgent({ script: READ_THEN_RENAME, store, input });
    const result = await agent.invoke({ messages: [new HumanMessage(userText(input))] });
    expect(outcomeOf(result.messages, "w1").status).toBe("success");
    expect(service.writes).toBe(1);
  });
});
