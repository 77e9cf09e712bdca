/**
 * Retries are owned by exactly one layer: the guardrails' retry boundary. Through the real
 * `createAgent` loop: how many times a tool actually ran under each policy, and that a long
 * backoff sleep ends when the run is aborted. Then `runWithRetryBoundary` on its own.
 */
import { HumanMessage, type BaseMessage } from "@langchain/core/messages";
import { GraphInterrupt } from "@langchain/langgraph";
import { createAgent, createMiddleware, tool, type AgentMiddleware } from "langchain";
import { afterEach, describe, expect, it, vi } from "vitest";
import { z } from "zod";
import {
  ConfigurationError,
  createDocumentGuardrails,
  InMemoryGuardrailStore,
  RetryableToolError,
  runWithRetryBoundary,
  type RetryBoundaryOptions,
  type ToolPolicy,
  type TurnInput,
} from "arkah-agent-guardrails";
import { ScriptedModel, type ScriptStep } from "arkah-agent-guardrails/testing";
import {
  deferred,
  admit,
  DocumentService,
  outcomeOf,
  read,
  rename,
  TOOL_POLICIES,
  toolOutcomes,
  turnInput,
  userText,
} from "../support/fixtures.js";

// ---------------------------------------------------------------------------------------------
// Local helpers

/** Runs one invocation of any agent with the turn's user message; returns the messages. */
async function runTurn(
  agent: { invoke(input: { messages: BaseMessage[] }, config?: { signal?: AbortSignal }): Promise<{ messages: BaseMessage[] }> },
  input: TurnInput,
): Promise<BaseMessage[]> {
  const result = await agent.invoke({ messages: [new HumanMessage(userText(input))] });
  return result.messages;
}

/** What a tool does on one attempt. */
type Attempt = "retryable" | "error" | "ok";

/**
 * A real agent whose read and rename tools follow a plan per attempt. `attempts` counts every
 * time a tool body started (the side effect of calling the service); `service.reads` and
 * `service.writes` count the successful ones.
 */
function retryAgent(options: {
  script: readonly ScriptStep[];
  policies?: Record<string, ToolPolicy>;
  readPlan?: Attempt[];
  writePlan?: Attempt[];
  onReadAttempt?: (attempt: number) => void;
  /** Middleware placed before (outside) the guardrails. */
  outer?: AgentMiddleware;
}) {
  const store = new InMemoryGuardrailStore();
  const input = turnInput();
  const service = new DocumentService();
  const attempts = { read: 0, write: 0 };
  const step = (plan: Attempt[] | undefined, attempt: number): Attempt => plan?.[attempt - 1] ?? "ok";
  const fail = (what: Attempt) => {
    if (what === "retryable") throw new RetryableToolError("service busy");
    if (what === "error") throw new Error("service exploded");
  };
  const readDocument = tool(
    () => {
      attempts.read += 1;
      options.onReadAttempt?.(attempts.read);
      fail(step(options.readPlan, attempts.read));
      service.reads += 1;
      return service.snapshot();
    },
    { name: "read_document", description: "Read the document.", schema: z.object({}) },
  );
  const renameDocument = tool(
    ({ title, expectedRevision }) => {
      attempts.write += 1;
      fail(step(options.writePlan, attempts.write));
      return service.rename(title, expectedRevision);
    },
    {
      name: "rename_document",
      description: "Rename the document.",
      schema: z.object({ title: z.string().min(1), expectedRevision: z.number().int().min(0) }),
    },
  );
  const model = new ScriptedModel(options.script);
  const guardrails = createDocumentGuardrails({
    input,
    store,
    userMessageLabel: "user",
    authorize: () => true,
    tools: options.policies ?? {
      read_document: TOOL_POLICIES.read_document!,
      rename_document: TOOL_POLICIES.rename_document!,
    },
    logger: { warn: () => undefined },
  });
  // The outer middleware (if any) comes first, so it wraps the guardrails' tool wrapper.
  const outer = options.outer ?? createMiddleware({ name: "NoOuterMiddleware" });
  const agent = createAgent({
    model,
    tools: [readDocument, renameDocument],
    middleware: [outer, guardrails],
  });
  return { agent, store, input, service, attempts, model };
}

const READ_ONLY: readonly ScriptStep[] = [{ toolCalls: [read("r1")] }, { content: "done" }];
const READ_THEN_RENAME: readonly ScriptStep[] = [
  { toolCalls: [read("r1")] },
  { toolCalls: [rename("w1")] },
  { content: "done" },
];

// ---------------------------------------------------------------------------------------------

describe("retry policies through createAgent", () => {
  it("default: one attempt; a RetryableToolError becomes tool_failed and the run goes on", async () => {
    const { agent, store, input, service, attempts, model } = retryAgent({
      script: READ_ONLY,
      readPlan: ["retryable", "ok"],
    });
    await admit(store, input);
    const messages = await runTurn(agent, input);
    expect(outcomeOf(messages, "r1")).toMatchObject({ status: "error", code: "tool_failed" });
    expect(attempts.read).toBe(1);
    expect(service.reads).toBe(0);
    expect(model.calls).toBe(2);
  });

  it("maxAttempts 3: a read failing retryably twice succeeds on the third attempt and counts as evidence", async () => {
    const { agent, store, input, service, attempts } = retryAgent({
      script: READ_THEN_RENAME,
      readPlan: ["retryable", "retryable", "ok"],
      policies: {
        read_document: { kind: "document-read", retry: { maxAttempts: 3, delayMs: 0 } },
        rename_document: { kind: "mutation" },
      },
    });
    await admit(store, input);
    const messages = await runTurn(agent, input);
    expect(outcomeOf(messages, "r1")).toMatchObject({ status: "success", content: '{"title":"Untitled","revision":0}' });
    expect(attempts.read).toBe(3);
    expect(service.reads).toBe(1);
    // The retried read is the turn's read evidence: the rename may run.
    expect(outcomeOf(messages, "w1").status).toBe("success");
    expect(service.writes).toBe(1);
  });

  it("maxAttempts 3: retryable failures on every attempt stop after 3, as tool_failed", async () => {
    const { agent, store, input, service, attempts } = retryAgent({
      script: READ_ONLY,
      readPlan: ["retryable", "retryable", "retryable", "ok"],
      policies: { read_document: { kind: "document-read", retry: { maxAttempts: 3, delayMs: 0 } } },
    });
    await admit(store, input);
    const messages = await runTurn(agent, input);
    expect(outcomeOf(messages, "r1").code).toBe("tool_failed");
    expect(attempts.read).toBe(3);
    expect(service.reads).toBe(0);
  });

  it("maxAttempts 3: a plain Error is not retried", async () => {
    const { agent, store, input, service, attempts } = retryAgent({
      script: READ_ONLY,
      readPlan: ["error", "ok"],
      policies: { read_document: { kind: "document-read", retry: { maxAttempts: 3, delayMs: 0 } } },
    });
    await admit(store, input);
    const messages = await runTurn(agent, input);
    expect(outcomeOf(messages, "r1").code).toBe("tool_failed");
    expect(attempts.read).toBe(1);
    expect(service.reads).toBe(0);
  });

  it('owner "tool": the middleware makes exactly one attempt', async () => {
    const { agent, store, input, service, attempts } = retryAgent({
      script: READ_ONLY,
      readPlan: ["retryable", "ok"],
      policies: { read_document: { kind: "document-read", retry: { owner: "tool", delayMs: 0 } } },
    });
    await admit(store, input);
    const messages = await runTurn(agent, input);
    expect(outcomeOf(messages, "r1").code).toBe("tool_failed");
    expect(attempts.read).toBe(1);
    expect(service.reads).toBe(0);
  });

  it("a mutation gets one attempt by default: a retryable failure leaves it unknown, never rerun", async () => {
    const { agent, store, input, service, attempts } = retryAgent({
      script: [...READ_THEN_RENAME.slice(0, 2), { toolCalls: [rename("w1")] }, { content: "done" }],
      writePlan: ["retryable", "ok"],
    });
    await admit(store, input);
    const messages = await runTurn(agent, input);
    expect(toolOutcomes(messages).map((outcome) => outcome.code ?? outcome.status)).toEqual([
      "success",
      "mutation_unknown",
      // The model proposes the same call again: refused as unknown, not rerun.
      "mutation_unknown",
    ]);
    expect(attempts.write).toBe(1);
    expect(service.writes).toBe(0);
  });

  it("an idempotent mutation with maxAttempts 2 gets two attempts", async () => {
    const { agent, store, input, service, attempts } = retryAgent({
      script: READ_THEN_RENAME,
      writePlan: ["retryable", "ok"],
      policies: {
        read_document: { kind: "document-read" },
        rename_document: { kind: "mutation", retry: { maxAttempts: 2, delayMs: 0, idempotent: true } },
      },
    });
    await admit(store, input);
    const messages = await runTurn(agent, input);
    expect(outcomeOf(messages, "w1").status).toBe("success");
    expect(attempts.write).toBe(2);
    expect(service.writes).toBe(1);
  });

  it("an abort during a long backoff sleep ends the run: no further attempt, the wrapper returns at once", async () => {
    // The sleep is the only 30 s+ timer: spot it, then abort while it is pending.
    const sleepStarted = deferred();
    const realSetTimeout = globalThis.setTimeout;
    const spy = vi.spyOn(globalThis, "setTimeout").mockImplementation((handler: () => void, ms?: number) => {
      if ((ms ?? 0) >= 30_000) sleepStarted.resolve();
      return realSetTimeout(handler, ms);
    });

    // An outer wrapper that reports when the guardrails' tool wrapper has settled.
    const wrapperSettled = deferred<string>();
    const observer = createMiddleware({
      name: "SettleObserver",
      wrapToolCall: async (request, handler) => {
        try {
          return await handler(request);
        } catch (error) {
          wrapperSettled.resolve("threw");
          throw error;
        } finally {
          wrapperSettled.resolve("returned");
        }
      },
    });

    try {
      const { agent, store, input, service, attempts, model } = retryAgent({
        script: READ_THEN_RENAME,
        readPlan: ["retryable", "ok"],
        policies: {
          read_document: { kind: "document-read", retry: { maxAttempts: 2, delayMs: 60_000 } },
          rename_document: { kind: "mutation" },
        },
        outer: observer,
      });
      await admit(store, input);
      const controller = new AbortController();
      const run = agent.invoke({ messages: [new HumanMessage(userText(input))] }, { signal: controller.signal });
      const outcome = run.then(
        () => "resolved",
        () => "rejected",
      );
      const first = await Promise.race([sleepStarted.promise.then(() => "sleeping"), outcome]);
      expect(first).toBe("sleeping");
      expect(attempts.read).toBe(1);
      controller.abort(new Error("client went away"));

      expect(await outcome).toBe("rejected");
      // Without an abortable sleep this would wait 30 s and time the test out.
      expect(await wrapperSettled.promise).toBe("threw");
      expect(attempts.read).toBe(1);
      expect(service.reads).toBe(0);
      expect(service.writes).toBe(0);
      expect(model.calls).toBe(1);
    } finally {
      spy.mockRestore();
    }
  }, 10_000);
});

// ---------------------------------------------------------------------------------------------

describe("runWithRetryBoundary", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  /** An operation following `plan`, counting attempts and recording the attempt numbers it got. */
  function planned(plan: (Attempt | Error)[]) {
    const state = { attempts: 0, numbers: [] as number[], thrown: [] as unknown[] };
    const operation = async (attempt: number) => {
      state.attempts += 1;
      state.numbers.push(attempt);
      const what = plan[state.attempts - 1] ?? "ok";
      if (what instanceof Error) {
        state.thrown.push(what);
        throw what;
      }
      if (what !== "ok") {
        const error = what === "retryable" ? new RetryableToolError(`busy ${state.attempts}`) : new Error("boom");
        state.thrown.push(error);
        throw error;
      }
      return `ok after ${state.attempts}`;
    };
    return { state, operation };
  }

  it("defaults to one attempt", async () => {
    const { state, operation } = planned(["retryable", "ok"]);
    await expect(runWithRetryBoundary(operation)).rejects.toBe(state.thrown[0] ?? "never");
    expect(state.attempts).toBe(1);
  });

  it("retries RetryableToolError up to maxAttempts and passes 1-based attempt numbers", async () => {
    const { state, operation } = planned(["retryable", "retryable", "ok"]);
    await expect(runWithRetryBoundary(operation, { maxAttempts: 3, delayMs: 0 })).resolves.toBe("ok after 3");
    expect(state.numbers).toEqual([1, 2, 3]);
  });

  it("allows at most 5 attempts and rethrows the last retryable error", async () => {
    const { state, operation } = planned(Array<Attempt>(10).fill("retryable"));
    let caught: unknown;
    try {
      await runWithRetryBoundary(operation, { maxAttempts: 5, delayMs: 0 });
    } catch (error) {
      caught = error;
    }
    expect(state.attempts).toBe(5);
    expect(caught).toBe(state.thrown[4]);
  });

  it.each<[string, RetryBoundaryOptions & Record<string, unknown>, RegExp]>([
    ["maxAttempts 6", { maxAttempts: 6 }, /maxAttempts/],
    ["maxAttempts 0", { maxAttempts: 0 }, /maxAttempts/],
    ["a fractional maxAttempts", { maxAttempts: 2.5 }, /maxAttempts/],
    ["a negative delayMs", { delayMs: -1 }, /delayMs/],
    ["delayMs over 60 s", { delayMs: 60_001 }, /delayMs/],
    ["an unknown option", { retries: 3 }, /retries/],
    ["a signal that is not an AbortSignal", { signal: {} as AbortSignal }, /signal/],
  ])("rejects %s with ConfigurationError before any attempt", async (_name, options, pattern) => {
    const { state, operation } = planned(["ok"]);
    let caught: unknown;
    try {
      await runWithRetryBoundary(operation, options);
    } catch (error) {
      caught = error;
    }
    expect(ConfigurationError.isInstance(caught)).toBe(true);
    expect((caught as Error).message).toMatch(pattern);
    expect(state.attempts).toBe(0);
  });

  it.each<[string, Error]>([
    ["a GraphInterrupt", new GraphInterrupt([{ id: "i1", value: "approve?" }])],
    ["a plain Error", new Error("not retryable")],
    ["an error caused by a RetryableToolError", new Error("wrapped", { cause: new RetryableToolError("inner") })],
  ])("%s passes through on the first attempt, unchanged", async (_name, error) => {
    const { state, operation } = planned([error, "ok"]);
    let caught: unknown;
    try {
      await runWithRetryBoundary(operation, { maxAttempts: 5, delayMs: 0 });
    } catch (thrown) {
      caught = thrown;
    }
    expect(caught).toBe(error);
    expect(state.attempts).toBe(1);
  });

  it("waits delayMs before the second attempt and doubles it for the third", async () => {
    vi.useFakeTimers();
    const { state, operation } = planned(["retryable", "retryable", "ok"]);
    const result = runWithRetryBoundary(operation, { maxAttempts: 3, delayMs: 100 });
    await vi.advanceTimersByTimeAsync(99);
    expect(state.attempts).toBe(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(state.attempts).toBe(2);
    await vi.advanceTimersByTimeAsync(199);
    expect(state.attempts).toBe(2);
    await vi.advanceTimersByTimeAsync(1);
    expect(state.attempts).toBe(3);
    await expect(result).resolves.toBe("ok after 3");
  });

  it("honours retryAfterMs when it is longer than the backoff", async () => {
    vi.useFakeTimers();
    let attempts = 0;
    const result = runWithRetryBoundary(
      async () => {
        attempts += 1;
        if (attempts === 1) throw new RetryableToolError("rate limited", { retryAfterMs: 5_000 });
        return "ok";
      },
      { maxAttempts: 2, delayMs: 10 },
    );
    await vi.advanceTimersByTimeAsync(4_999);
    expect(attempts).toBe(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(attempts).toBe(2);
    await expect(result).resolves.toBe("ok");
  });

  it("keeps the backoff when retryAfterMs is shorter", async () => {
    vi.useFakeTimers();
    let attempts = 0;
    const result = runWithRetryBoundary(
      async () => {
        attempts += 1;
        if (attempts === 1) throw new RetryableToolError("rate limited", { retryAfterMs: 10 });
        return "ok";
      },
      { maxAttempts: 2, delayMs: 1_000 },
    );
    await vi.advanceTimersByTimeAsync(999);
    expect(attempts).toBe(1);
    await vi.advanceTimersByTimeAsync(1);
    await expect(result).resolves.toBe("ok");
    expect(attempts).toBe(2);
  });

  it("an already-aborted signal: no attempt, rejects with the abort reason", async () => {
    const { state, operation } = planned(["ok"]);
    const controller = new AbortController();
    const reason = new Error("cancelled");
    controller.abort(reason);
    await expect(runWithRetryBoundary(operation, { maxAttempts: 3, signal: controller.signal })).rejects.toBe(reason);
    expect(state.attempts).toBe(0);
  });

  it("an abort during the sleep ends it at once: no further attempt, rejects with the abort reason", async () => {
    vi.useFakeTimers();
    const { state, operation } = planned(["retryable", "ok"]);
    const controller = new AbortController();
    const reason = new Error("cancelled");
    const result = runWithRetryBoundary(operation, { maxAttempts: 2, delayMs: 60_000, signal: controller.signal });
    const settled = result.then(
      () => "resolved",
      (error: unknown) => error,
    );
    await vi.advanceTimersByTimeAsync(1_000);
    expect(state.attempts).toBe(1);
    controller.abort(reason);
    // No timer needs to fire for the rejection.
    expect(await settled).toBe(reason);
    await vi.advanceTimersByTimeAsync(120_000);
    expect(state.attempts).toBe(1);
    expect(vi.getTimerCount()).toBe(0);
  });
});
