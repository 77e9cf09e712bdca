/**
 * Composition with LangChain's built-in middleware, through the real `createAgent` loop with a
 * `MemorySaver` checkpointer, one compiled agent and each turn passed through `context`.
 *
 * - `summarizationMiddleware` (beforeModel) replaces the older messages with one `HumanMessage`
 *   summary (`additional_kwargs.lc_source: "summarization"`) placed first, and keeps the newest
 *   `keep` messages after it. A summary before the admitted message is history; the turn goes on.
 *   A summary that replaced the admitted message cannot be told apart from forged user text, so
 *   the turn fails `transcript_mismatch` before the model sees it.
 * - `humanInTheLoopMiddleware` (afterModel), `toolCallLimitMiddleware` (afterModel) and
 *   `modelRetryMiddleware` (wrapModelCall, inside the guardrails): guardrails first, the others in
 *   the order LangChain's own agent stacks use (summarization early, human in the loop last), and
 *   again with the node-hook middleware before the guardrails. `modelRetryMiddleware` outside the
 *   guardrails is shown not to be supported. docs/composing.md has the table.
 *
 * Side effects are counted by the document service (`writes`, `reads`) and the search tool.
 */
import { HumanMessage, type BaseMessage } from "@langchain/core/messages";
import { Command, MemorySaver } from "@langchain/langgraph";
import {
  createAgent,
  humanInTheLoopMiddleware,
  modelRetryMiddleware,
  summarizationMiddleware,
  tool,
  toolCallLimitMiddleware,
  type AgentMiddleware,
} from "langchain";
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
  type TurnInput,
} from "arkah-agent-guardrails";
import { ScriptedModel, type ScriptStep } from "arkah-agent-guardrails/testing";
import {
  admit,
  DocumentService,
  documentTools,
  outcomeOf,
  read,
  rename,
  search,
  TOOL_POLICIES,
  turnInput,
} from "../support/fixtures.js";

// ---------------------------------------------------------------------------------------------
// Local helpers

const SUMMARY = "The user had the document renamed to First.";

const isSummary = (message: BaseMessage) =>
  HumanMessage.isInstance(message) && (message.additional_kwargs as { lc_source?: unknown }).lc_source === "summarization";

const turn = (id: string, text: string): TurnInput => turnInput({ turnId: id, segments: [{ label: "user", content: text }] });
const FIRST = turn("turn-1", "Rename the document to First.");
const SECOND = turn("turn-2", "Now rename it to Second.");

/** The summarization middleware with its own scripted model, which counts the summaries it wrote. */
function summarizer(trigger: { messages: number }, keep: { messages: number }) {
  const model = new ScriptedModel(Array<ScriptStep>(4).fill({ content: SUMMARY }));
  return { model, middleware: summarizationMiddleware({ model, trigger, keep }) };
}

interface ComposedOptions {
  readonly script: readonly ScriptStep[];
  /** Middleware before the guardrails in the array, and after them. */
  readonly before?: readonly AgentMiddleware[];
  readonly after?: readonly AgentMiddleware[];
}

/** One compiled agent on one thread; `run(turn)` admits nothing, `admitted(turn)` does. */
function composedAgent(options: ComposedOptions) {
  const store = new InMemoryGuardrailStore();
  const service = new DocumentService();
  const model = new ScriptedModel(options.script);
  const searched = { count: 0 };
  const tools = documentTools(service);
  const searchSources = tool(
    () => {
      searched.count += 1;
      return "source: style guide says short titles";
    },
    { name: "search_sources", description: "Search other sources.", schema: z.object({ query: z.string() }) },
  );
  const agent = createAgent({
    model,
    tools: [tools.readDocument, searchSources, tools.renameDocument, tools.remember],
    middleware: [
      ...(options.before ?? []),
      createDocumentGuardrails({
        store,
        userMessageLabel: "user",
        authorize: () => true,
        tools: TOOL_POLICIES,
        logger: { warn: () => undefined },
      }),
      ...(options.after ?? []),
    ],
    checkpointer: new MemorySaver(),
  });
  const config = (input: TurnInput) => ({ context: turnContext(input), configurable: { thread_id: "thread-1" } });
  const start = async (input: TurnInput) => {
    await admit(store, input);
    return agent.invoke({ messages: [new HumanMessage(input.segments[0]?.content ?? "")] }, config(input));
  };
  const resume = (input: TurnInput, value: unknown) => agent.invoke(new Command({ resume: value }), config(input));
  const messages = async () => ((await agent.graph.getState(config(FIRST))).values as { messages: BaseMessage[] }).messages;
  return { agent, store, service, model, searched, start, resume, messages };
}

async function admissionCode(promise: Promise<unknown>): Promise<string | undefined> {
  try {
    await promise;
  } catch (error) {
    return AdmissionError.find(error)?.code;
  }
  return undefined;
}

/** A model step that fails once, as a provider's transient error would. */
const transientFailure: ScriptStep = () => {
  throw new Error("503 Service Unavailable");
};

// ---------------------------------------------------------------------------------------------

describe("summarizationMiddleware", () => {
  it.each([
    ["after the guardrails", "after"],
    ["before the guardrails", "before"],
  ] as const)("(%s) a summary between a turn's read and its write keeps the admitted message: each turn writes once", async (_name, side) => {
    // Turn 1 leaves 6 messages; turn 2 reaches 9 after its read, which triggers a summary of
    // everything before its own user message (keep 3: the user message, the read and its result).
    const summary = summarizer({ messages: 9 }, { messages: 3 });
    const run = composedAgent({
      script: [
        { toolCalls: [read("r1")] },
        { toolCalls: [rename("w1", "First", 0)] },
        { content: "Renamed to First." },
        { toolCalls: [read("r2")] },
        { toolCalls: [rename("w2", "Second", 1)] },
        { content: "Renamed to Second." },
      ],
      [side]: [summary.middleware],
    });
    const first = await run.start(FIRST);
    expect(outcomeOf(first.messages, "w1").status).toBe("success");
    expect(summary.model.calls).toBe(0);

    const second = await run.start(SECOND);
    expect(summary.model.calls).toBe(1);
    expect(outcomeOf(second.messages, "w2").status).toBe("success");
    expect(run.service.writes).toBe(2);
    expect(run.service.title).toBe("Second");
    const state = await run.messages();
    expect(isSummary(state[0]!)).toBe(true);
    expect(state[0]?.text).toContain(SUMMARY);
    expect(state[1]?.text).toBe("Now rename it to Second.");
    expect(state.filter(isSummary)).toHaveLength(1);
  });

  it("a summary at the start of a turn, before its user message, is history: the turn writes once", async () => {
    const summary = summarizer({ messages: 7 }, { messages: 1 });
    const run = composedAgent({
      script: [
        { toolCalls: [read("r1")] },
        { toolCalls: [rename("w1", "First", 0)] },
        { content: "Renamed to First." },
        { toolCalls: [read("r2")] },
        { toolCalls: [rename("w2", "Second", 1)] },
        { content: "Renamed to Second." },
      ],
      after: [summary.middleware],
    });
    await run.start(FIRST);
    const second = await run.start(SECOND);
    expect(summary.model.calls).toBe(1);
    expect(outcomeOf(second.messages, "w2").status).toBe("success");
    expect(run.service.writes).toBe(2);
  });

  it("a keep smaller than the turn summarizes its user message away between its read and its write: transcript_mismatch, no second write", async () => {
    const summary = summarizer({ messages: 9 }, { messages: 2 });
    const run = composedAgent({
      script: [
        { toolCalls: [read("r1")] },
        { toolCalls: [rename("w1", "First", 0)] },
        { content: "Renamed to First." },
        { toolCalls: [read("r2")] },
        { toolCalls: [rename("w2", "Second", 1)] },
        { content: "Renamed to Second." },
      ],
      after: [summary.middleware],
    });
    await run.start(FIRST);
    expect(await admissionCode(run.start(SECOND))).toBe("transcript_mismatch");
    expect(summary.model.calls).toBe(1);
    expect(run.model.calls).toBe(4); // turn 1's three, and turn 2's read
    expect(run.service.writes).toBe(1);
    expect(run.service.title).toBe("First");
  });

  it("a summary that replaced the admitted message fails transcript_mismatch: the model is not called with it, nothing is written", async () => {
    // In a thread's first turn the admitted message is the oldest one, so any summary replaces it.
    const summary = summarizer({ messages: 3 }, { messages: 2 });
    const run = composedAgent({
      script: [{ toolCalls: [read("r1")] }, { toolCalls: [rename("w1", "First", 0)] }, { content: "done" }],
      after: [summary.middleware],
    });
    let caught: unknown;
    try {
      await run.start(FIRST);
    } catch (error) {
      caught = error;
    }
    const admission = AdmissionError.find(caught);
    expect(admission?.code).toBe("transcript_mismatch");
    expect(admission?.message).toMatch(/a summary replaced the admitted user message/);
    expect(summary.model.calls).toBe(1);
    expect(run.model.calls).toBe(1); // the call that proposed the read, before the summary
    expect(run.service.reads).toBe(1);
    expect(run.service.writes).toBe(0);
  });
});

describe("LangChain's middleware together (summarization, tool call limit, model retry, human in the loop)", () => {
  const ORDERS: [string, (parts: Record<"summary" | "limit" | "retry" | "hitl", AgentMiddleware>) => Pick<ComposedOptions, "before" | "after">][] = [
    [
      "guardrails first, then summarization, tool call limit, model retry, HITL last",
      ({ summary, limit, retry, hitl }) => ({ after: [summary, limit, retry, hitl] }),
    ],
    [
      "summarization, tool call limit and HITL before the guardrails, model retry after them",
      ({ summary, limit, retry, hitl }) => ({ before: [summary, limit, hitl], after: [retry] }),
    ],
  ];

  it.each(ORDERS)("(%s) two turns, one write each", async (_name, place) => {
    // keep 8 covers every message turn 2 adds before its last model call (7), so its user message
    // always stays; summaries happen during turn 2.
    const summary = summarizer({ messages: 11 }, { messages: 8 });
    const run = composedAgent({
      script: [
        // Turn 1: the model fails once (retried), searches twice in one step (the limit blocks
        // the second), reads, then renames (HITL asks; approved).
        transientFailure,
        { toolCalls: [search("s1"), search("s2")] },
        { toolCalls: [read("r1")] },
        { toolCalls: [rename("w1", "First", 0)] },
        { content: "Renamed to First." },
        // Turn 2: reads, renames (HITL approves), and a second rename is the turn's second
        // mutation: refused. Summaries happen before each of its later model calls.
        { toolCalls: [read("r2")] },
        { toolCalls: [rename("w2", "Second", 1)] },
        { toolCalls: [rename("w3", "Third", 2)] },
        { content: "Renamed to Second." },
      ],
      ...place({
        summary: summary.middleware,
        limit: toolCallLimitMiddleware({ toolName: "search_sources", runLimit: 1 }),
        retry: modelRetryMiddleware({ maxRetries: 1, initialDelayMs: 0, jitter: false }),
        hitl: humanInTheLoopMiddleware({ interruptOn: { rename_document: true } }),
      }),
    });

    const paused = await run.start(FIRST);
    expect(paused.__interrupt__).toHaveLength(1);
    expect(run.service.writes).toBe(0);
    const first = await run.resume(FIRST, { decisions: [{ type: "approve" }] });
    expect(outcomeOf(first.messages, "s1").status).toBe("success");
    expect(outcomeOf(first.messages, "s2")).toMatchObject({ status: "error" });
    expect(outcomeOf(first.messages, "s2").content).toMatch(/limit/i);
    expect(run.searched.count).toBe(1);
    expect(outcomeOf(first.messages, "w1").status).toBe("success");
    expect(run.service.writes).toBe(1);

    const pausedAgain = await run.start(SECOND);
    expect(pausedAgain.__interrupt__).toHaveLength(1);
    const afterW2 = await run.resume(SECOND, { decisions: [{ type: "approve" }] });
    expect(afterW2.__interrupt__).toHaveLength(1); // HITL asks about w3 too
    const second = await run.resume(SECOND, { decisions: [{ type: "approve" }] });
    expect(outcomeOf(second.messages, "w2").status).toBe("success");
    expect(outcomeOf(second.messages, "w3").code).toBe("mutation_conflict");
    expect(summary.model.calls).toBe(3); // before w2, before w3 and before the last answer
    expect((await run.messages()).some(isSummary)).toBe(true);
    expect(run.service.writes).toBe(2);
    expect(run.service.title).toBe("Second");
    expect(run.model.calls).toBe(9);
  });

  it("modelRetryMiddleware outside the guardrails is not supported: it retries an AdmissionError and returns it as a model message", async () => {
    const run = composedAgent({
      script: [{ toolCalls: [read("r1")] }, { toolCalls: [rename("w1")] }, { content: "done" }],
      before: [modelRetryMiddleware({ maxRetries: 1, initialDelayMs: 0, jitter: false })],
    });
    // Not admitted: inside, the guardrails would fail the run with not_admitted.
    const result = await run.agent.invoke(
      { messages: [new HumanMessage(FIRST.segments[0]?.content ?? "")] },
      { context: turnContext(FIRST), configurable: { thread_id: "thread-1" } },
    );
    expect(result.messages.at(-1)?.text).toMatch(/Model call failed after 2 attempts/);
    expect(run.model.calls).toBe(0);
    expect(run.service.reads + run.service.writes).toBe(0);

    // The same agent with the retry inside fails the run with the AdmissionError.
    const inside = composedAgent({
      script: [{ toolCalls: [read("r1")] }],
      after: [modelRetryMiddleware({ maxRetries: 1, initialDelayMs: 0, jitter: false })],
    });
    expect(
      await admissionCode(
        inside.agent.invoke(
          { messages: [new HumanMessage(FIRST.segments[0]?.content ?? "")] },
          { context: turnContext(FIRST), configurable: { thread_id: "thread-1" } },
        ),
      ),
    ).toBe("not_admitted");
    expect(inside.model.calls).toBe(0);
  });
});

describe("one guardrails middleware per agent", () => {
  /** The ConfigurationError a run failed with (LangChain wraps it in a MiddlewareError). */
  async function configurationError(promise: Promise<unknown>): Promise<ConfigurationError> {
    let caught: unknown;
    try {
      await promise;
    } catch (error) {
      caught = error;
    }
    for (let current = caught; current !== undefined && current !== null; current = (current as { cause?: unknown }).cause) {
      if (ConfigurationError.isInstance(current)) return current;
    }
    throw new Error(`expected a ConfigurationError, got ${String(caught)}`);
  }

  const toolGuardrails = () =>
    createToolGuardrails({
      guardrails: [],
      tools: ["read_document", "search_sources", "rename_document", "remember"],
      authorize: allowAllCalls,
      logger: { warn: () => undefined },
    });
  const script: ScriptStep[] = [{ toolCalls: [read("r1")] }, { toolCalls: [rename("w1")] }, { content: "done" }];

  it.each<[string, () => Pick<ComposedOptions, "before" | "after">, RegExp]>([
    ["createToolGuardrails outside createDocumentGuardrails", () => ({ before: [toolGuardrails()] }), /createDocumentGuardrails inside createToolGuardrails/],
    ["createToolGuardrails inside createDocumentGuardrails", () => ({ after: [toolGuardrails()] }), /createToolGuardrails inside createDocumentGuardrails/],
    ["two createToolGuardrails (one renamed) inside the document guardrails", () => ({ after: [toolGuardrails(), { ...toolGuardrails(), name: "MoreToolGuardrails" }] }), /createToolGuardrails inside createDocumentGuardrails/],
  ])("%s: a ConfigurationError at the first model call naming the fix; the model is never called, nothing is read or written", async (_name, place, message) => {
    const { start, model, service, searched } = composedAgent({ script, ...place() });
    const error = await configurationError(start(FIRST));
    expect(error.message).toMatch(message);
    expect(error.message).toContain("use createDocumentGuardrails alone and pass the tool guardrails' checks to its guardrails option");
    expect(model.calls).toBe(0);
    expect([service.reads, service.writes, searched.count]).toEqual([0, 0, 0]);
  });

  it("two createDocumentGuardrails: LangChain refuses the agent at build by name; a renamed copy is a ConfigurationError at the first model call", async () => {
    const guardrails = () =>
      createDocumentGuardrails({ store: new InMemoryGuardrailStore(), userMessageLabel: "user", authorize: () => true, tools: TOOL_POLICIES });
    const tools = documentTools(new DocumentService());
    expect(() => createAgent({ model: new ScriptedModel(script), tools: tools.all, middleware: [guardrails(), guardrails()] })).toThrow(
      "Middleware DocumentGuardrails is defined multiple times",
    );

    const { start, model, service } = composedAgent({ script, after: [{ ...guardrails(), name: "MoreDocumentGuardrails" }] });
    const error = await configurationError(start(FIRST));
    expect(error.message).toBe(
      "two createDocumentGuardrails middlewares in one agent: each would check, claim and audit every call again; build one createDocumentGuardrails and list every tool in its tools",
    );
    expect(model.calls).toBe(0);
    expect([service.reads, service.writes]).toEqual([0, 0]);
  });

  it("two createToolGuardrails, one renamed: a ConfigurationError at the first model call", async () => {
    const effects = { lookups: 0 };
    const lookup = tool(
      () => {
        effects.lookups += 1;
        return "ok";
      },
      { name: "lookup", description: "Look up.", schema: z.object({}) },
    );
    const guardrails = () => createToolGuardrails({ guardrails: [], tools: ["lookup"], authorize: allowAllCalls });
    const model = new ScriptedModel([{ toolCalls: [{ id: "l1", name: "lookup", args: {} }] }, { content: "done" }]);
    const agent = createAgent({ model, tools: [lookup], middleware: [guardrails(), { ...guardrails(), name: "MoreToolGuardrails" }] });
    const error = await configurationError(agent.invoke({ messages: [new HumanMessage("Look it up.")] }));
    expect(error.message).toMatch(/^two createToolGuardrails middlewares in one agent/);
    expect([model.calls, effects.lookups]).toEqual([0, 0]);
  });
});
