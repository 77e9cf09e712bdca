/**
 * Cancellation and interrupts through the real `createAgent` loop. An aborted run executes
 * nothing more; an abort before the claim leaves the turn's slot free; interrupts raised by reads
 * and auxiliary tools propagate (never swallowed or retried) and the run resumes with a
 * checkpointer, keeping the read evidence the later mutation needs.
 */
import { HumanMessage, type BaseMessage } from "@langchain/core/messages";
import { Command, interrupt, MemorySaver } from "@langchain/langgraph";
import { createAgent, createMiddleware, tool, type AgentMiddleware } from "langchain";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import {
  AdmissionError,
  createDocumentGuardrails,
  InMemoryGuardrailStore,
  NoEffectError,
  type ToolPolicy,
  type TurnInput,
} from "arkah-agent-guardrails";
import {
  type ClaimOptions,
  type ClaimResult,
  type EffectClaimOptions,
  type EffectClaimResult,
  type EffectIdentity,
  type MutationIdentity,
  type ReadEvidence,
} from "arkah-agent-guardrails/store";
import { ScriptedModel, type ScriptStep } from "arkah-agent-guardrails/testing";
import {
  deferred,
  admit,
  DocumentService,
  documentTools,
  guardedAgent,
  invokeTurn,
  outcomeOf,
  read,
  remember,
  rename,
  TOOL_POLICIES,
  toolOutcomes,
  turnInput,
  userText,
  type ToolHooks,
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

/** A memory store that records the evidence and claims it was asked to store, and can pause. */
class RecordingStore extends InMemoryGuardrailStore {
  readonly evidence: ReadEvidence[] = [];
  readonly claims: MutationIdentity[] = [];
  /** Awaited inside `claimMutation` before it claims: after a mutation's step checks. */
  beforeClaim: (() => Promise<void>) | undefined;

  override async recordSuccessfulRead(evidence: ReadEvidence, options?: Parameters<InMemoryGuardrailStore["recordSuccessfulRead"]>[1]): Promise<void> {
    this.evidence.push(evidence);
    return super.recordSuccessfulRead(evidence, options);
  }

  override async claimMutation(identity: MutationIdentity, options?: ClaimOptions): Promise<ClaimResult> {
    await this.beforeClaim?.();
    this.claims.push(identity);
    return super.claimMutation(identity, options);
  }

  /** Claims the side effect, then awaits `afterEffectClaim`: between a side effect's claim and its body. */
  afterEffectClaim: (() => Promise<void>) | undefined;

  override async claimEffect(identity: EffectIdentity, options?: EffectClaimOptions): Promise<EffectClaimResult> {
    const claimed = await super.claimEffect(identity, options);
    await this.afterEffectClaim?.();
    return claimed;
  }
}

/** Resolves when `signal` aborts: a body honouring its signal waits on this instead of its client. */
function aborted(signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    if (signal === undefined) return;
    if (signal.aborted) resolve();
    signal.addEventListener("abort", () => resolve(), { once: true });
  });
}

/** An outer wrapper (outside the guardrails) that resolves once per settled tool call. */
function settleObserver() {
  const settled: { callId: string | undefined; how: "returned" | "threw" }[] = [];
  const waiters: (() => void)[] = [];
  const middleware = createMiddleware({
    name: "SettleObserver",
    wrapToolCall: async (request, handler) => {
      let how: "returned" | "threw" = "threw";
      try {
        const result = await handler(request);
        how = "returned";
        return result;
      } finally {
        settled.push({ callId: request.toolCall.id, how });
        for (const wake of waiters.splice(0)) wake();
      }
    },
  });
  const untilSettled = async (count: number) => {
    while (settled.length < count) {
      const next = deferred();
      waiters.push(next.resolve);
      await next.promise;
    }
  };
  return { middleware, settled, untilSettled };
}

/**
 * A real agent with the fixture's read and rename (their hooks), a `remember` auxiliary tool
 * with its own hook and counter, an optional checkpointer and optional outer middleware.
 */
function cancellableAgent(options: {
  script: readonly ScriptStep[];
  hooks?: ToolHooks;
  beforeRemember?: (signal: AbortSignal | undefined) => unknown;
  policies?: Record<string, ToolPolicy>;
  store?: RecordingStore;
  checkpointer?: MemorySaver;
  outer?: AgentMiddleware;
  input?: TurnInput;
}) {
  const store = options.store ?? new RecordingStore();
  const input = options.input ?? turnInput();
  const service = new DocumentService();
  const effects = { remembered: 0, answers: [] as unknown[] };
  const { readDocument, renameDocument } = documentTools(service, options.hooks);
  const rememberTool = tool(
    async (_args, config) => {
      const answer = await options.beforeRemember?.(config.signal as AbortSignal | undefined);
      effects.answers.push(answer);
      effects.remembered += 1;
      return "Preference saved";
    },
    { name: "remember", description: "Remember a preference.", schema: z.object({ preference: z.string() }) },
  );
  const model = new ScriptedModel(options.script);
  const guardrails = createDocumentGuardrails({
    input,
    store,
    userMessageLabel: "user",
    authorize: () => true,
    tools: options.policies ?? TOOL_POLICIES,
    logger: { warn: () => undefined },
  });
  // The outer middleware (if any) comes first, so it wraps the guardrails' tool wrapper.
  const outer = options.outer ?? createMiddleware({ name: "NoOuterMiddleware" });
  const agent = createAgent({
    model,
    tools: [readDocument, renameDocument, rememberTool],
    middleware: [outer, guardrails],
    ...(options.checkpointer === undefined ? {} : { checkpointer: options.checkpointer }),
  });
  return { agent, store, input, service, effects, model };
}

const READ_THEN_RENAME: readonly ScriptStep[] = [
  { toolCalls: [read("r1")] },
  { toolCalls: [rename("w1")] },
  { content: "done" },
];

// ---------------------------------------------------------------------------------------------

describe("an aborted run executes nothing", () => {
  it("an already-aborted signal: invoke rejects, nothing is read or written", async () => {
    const { agent, store, input, service, model } = guardedAgent({ script: READ_THEN_RENAME });
    await admit(store, input);
    const controller = new AbortController();
    controller.abort(new Error("client went away"));
    await expect(invokeTurn(agent, input, { signal: controller.signal })).rejects.toThrow();
    expect(service.reads).toBe(0);
    expect(service.writes).toBe(0);
    expect(model.calls).toBe(0);
  });

  it("an abort while a step-1 read is in flight: the step-2 mutation never runs or claims", async () => {
    const readStarted = deferred();
    const releaseRead = deferred();
    const observer = settleObserver();
    const { agent, store, input, service, model } = cancellableAgent({
      script: READ_THEN_RENAME,
      hooks: {
        beforeRead: async () => {
          readStarted.resolve();
          await releaseRead.promise;
        },
      },
      outer: observer.middleware,
    });
    await admit(store, input);
    const controller = new AbortController();
    const run = agent.invoke({ messages: [new HumanMessage(userText(input))] }, { signal: controller.signal });
    const outcome = run.then(
      () => "resolved",
      () => "rejected",
    );
    await readStarted.promise;
    controller.abort(new Error("client went away"));
    releaseRead.resolve();

    expect(await outcome).toBe("rejected");
    await observer.untilSettled(1);
    // The read's invocation was cut short (its body may still finish); nothing after it ran.
    expect(observer.settled).toEqual([{ callId: "r1", how: "threw" }]);
    expect(service.reads).toBeLessThanOrEqual(1);
    expect(service.writes).toBe(0);
    expect(model.calls).toBe(1);
    expect(store.claims).toHaveLength(0);
  });

  it("an abort while the mutation is being claimed: the body never starts, the claim is released, the slot stays free", async () => {
    const store = new RecordingStore();
    const checking = deferred();
    const releaseCheck = deferred();
    const observer = settleObserver();
    const first = cancellableAgent({ script: READ_THEN_RENAME, store, outer: observer.middleware });
    await admit(store, first.input);
    store.beforeClaim = async () => {
      checking.resolve();
      await releaseCheck.promise;
    };
    const controller = new AbortController();
    const outcome = first.agent
      .invoke({ messages: [new HumanMessage(userText(first.input))] }, { signal: controller.signal })
      .then(
        () => "resolved",
        () => "rejected",
      );
    await checking.promise;
    controller.abort(new Error("client went away"));
    releaseCheck.resolve();
    expect(await outcome).toBe("rejected");
    await observer.untilSettled(2);
    expect(observer.settled.map((entry) => `${String(entry.callId)}:${entry.how}`)).toEqual(["r1:returned", "w1:threw"]);
    expect(first.service.writes).toBe(0);
    expect(await store.listUnresolved()).toEqual([]);
    expect((await store.readAudit()).filter((event) => event.toolCallId === "w1").map((event) => event.decision)).toContain("released");

    // The transport retry of the same turn can still make its one write.
    store.beforeClaim = undefined;
    const retry = cancellableAgent({ script: READ_THEN_RENAME, store });
    const messages = await runTurn(retry.agent, retry.input);
    expect(outcomeOf(messages, "w1").status).toBe("success");
    expect(retry.service.writes).toBe(1);
  });

  it("an abort during a mutation that ignores the signal: the write lands and is settled complete, a retry replays it", async () => {
    const store = new RecordingStore();
    const writing = deferred();
    const releaseWrite = deferred();
    const observer = settleObserver();
    const first = cancellableAgent({
      script: READ_THEN_RENAME,
      store,
      outer: observer.middleware,
      hooks: {
        beforeWrite: async () => {
          writing.resolve();
          await releaseWrite.promise;
        },
      },
    });
    await admit(store, first.input);
    const controller = new AbortController();
    const outcome = first.agent
      .invoke({ messages: [new HumanMessage(userText(first.input))] }, { signal: controller.signal })
      .then(
        () => "resolved",
        () => "rejected",
      );
    await writing.promise;
    controller.abort(new Error("client went away"));
    releaseWrite.resolve();
    expect(await outcome).toBe("rejected");
    await observer.untilSettled(2);
    expect(first.service.writes).toBe(1);

    // The guardrails waited for the body (the run itself had already ended) and settled the write
    // it made: the retry replays it and writes nothing.
    expect(observer.settled.at(-1)).toEqual({ callId: "w1", how: "returned" });
    expect(await store.listUnresolved()).toEqual([]);
    const retry = cancellableAgent({ script: READ_THEN_RENAME, store });
    const messages = await runTurn(retry.agent, retry.input);
    expect(outcomeOf(messages, "w1").status).toBe("success");
    expect(first.service.writes + retry.service.writes).toBe(1);
    expect(store.claims).toHaveLength(2);
  });

  it("an abort during a mutation that honours the signal leaves it unknown: a retry does not rerun it", async () => {
    const store = new RecordingStore();
    const writing = deferred();
    const observer = settleObserver();
    const first = cancellableAgent({
      script: READ_THEN_RENAME,
      store,
      outer: observer.middleware,
      hooks: {
        beforeWrite: async (signal) => {
          writing.resolve();
          await new Promise<void>((_resolve, reject) => {
            signal?.addEventListener("abort", () => reject(new Error("write cancelled")), { once: true });
          });
        },
      },
    });
    await admit(store, first.input);
    const controller = new AbortController();
    const outcome = first.agent
      .invoke({ messages: [new HumanMessage(userText(first.input))] }, { signal: controller.signal })
      .then(
        () => "resolved",
        () => "rejected",
      );
    await writing.promise;
    controller.abort(new Error("client went away"));
    expect(await outcome).toBe("rejected");
    await observer.untilSettled(2);
    expect(store.claims).toHaveLength(1);

    const retry = cancellableAgent({ script: READ_THEN_RENAME, store });
    const messages = await runTurn(retry.agent, retry.input);
    expect(outcomeOf(messages, "w1").code).toBe("mutation_unknown");
    expect(first.service.writes + retry.service.writes).toBe(0);
  });
});

describe("a cancel needs no operator unless a body may have written", () => {
  it.each([
    ["throws NoEffectError: the claim is released, the next turn on the document writes", "no-effect"],
    ["throws an ordinary error (control): the claim is unknown, the next turn is scope_unresolved", "error"],
  ] as const)("a mutation that honours the signal and %s", async (_name, answer) => {
    const store = new RecordingStore();
    const writing = deferred();
    const observer = settleObserver();
    const first = cancellableAgent({
      script: READ_THEN_RENAME,
      store,
      outer: observer.middleware,
      hooks: {
        beforeWrite: async (signal) => {
          writing.resolve();
          await aborted(signal);
          // The write service was never called: the body knows nothing was written.
          throw answer === "no-effect" ? new NoEffectError("cancelled before the write") : new Error("write cancelled");
        },
      },
    });
    await admit(store, first.input);
    const controller = new AbortController();
    const outcome = first.agent
      .invoke({ messages: [new HumanMessage(userText(first.input))] }, { signal: controller.signal })
      .then(
        () => "resolved",
        () => "rejected",
      );
    await writing.promise;
    controller.abort(new Error("client went away"));
    expect(await outcome).toBe("rejected");
    await observer.untilSettled(2);
    expect(first.service.writes).toBe(0);
    const w1 = (await store.readAudit()).filter((event) => event.toolCallId === "w1").map((event) => [event.decision, event.code]);
    const unresolved = await store.listUnresolved();

    // The next turn on the same document.
    const next = cancellableAgent({ script: READ_THEN_RENAME, store, input: turnInput({ turnId: "turn-2" }) });
    await admit(store, next.input);
    const messages = await runTurn(next.agent, next.input);
    if (answer === "no-effect") {
      expect(w1).toEqual([
        ["failed", "no_effect"],
        ["released", undefined],
      ]);
      expect(unresolved).toEqual([]);
      expect(outcomeOf(messages, "w1").status).toBe("success");
      expect(next.service.writes).toBe(1);
    } else {
      expect(w1).toEqual([["failed", "mutation_unknown"]]);
      expect(unresolved.map((claim) => [claim.toolCallId, claim.state])).toEqual([["w1", "unknown"]]);
      expect(outcomeOf(messages, "w1").code).toBe("scope_unresolved");
      expect(next.service.writes).toBe(0);
    }
  });

  it("a side effect that honours the signal and throws NoEffectError is released: the same call runs again, once", async () => {
    const store = new RecordingStore();
    const sending = deferred();
    const observer = settleObserver();
    let cancel = true;
    const policies = { ...TOOL_POLICIES, remember: { kind: "side-effect" } } satisfies Record<string, ToolPolicy>;
    const script: ScriptStep[] = [{ toolCalls: [remember("m1")] }, { content: "done" }];
    const first = cancellableAgent({
      script,
      store,
      policies,
      outer: observer.middleware,
      beforeRemember: async (signal) => {
        if (!cancel) return;
        sending.resolve();
        await aborted(signal);
        throw new NoEffectError("cancelled before sending");
      },
    });
    await admit(store, first.input);
    const controller = new AbortController();
    const outcome = first.agent
      .invoke({ messages: [new HumanMessage(userText(first.input))] }, { signal: controller.signal })
      .then(
        () => "resolved",
        () => "rejected",
      );
    await sending.promise;
    controller.abort(new Error("client went away"));
    expect(await outcome).toBe("rejected");
    await observer.untilSettled(1);
    expect(first.effects.remembered).toBe(0);
    expect(await store.listUnresolvedEffects()).toEqual([]);
    expect((await store.readAudit()).filter((event) => event.toolCallId === "m1").map((event) => event.decision)).toEqual(["failed", "released"]);

    // The transport retry of the turn: the same call claims afresh and runs once.
    cancel = false;
    const retry = cancellableAgent({ script, store, policies, beforeRemember: () => undefined });
    const messages = await runTurn(retry.agent, retry.input);
    expect(outcomeOf(messages, "m1")).toMatchObject({ status: "success", content: "Preference saved" });
    expect(first.effects.remembered + retry.effects.remembered).toBe(1);
  });

  it("an abort between a side effect's claim and its body: the body never starts, the claim is released", async () => {
    const store = new RecordingStore();
    const claimed = deferred();
    const releaseClaim = deferred();
    const observer = settleObserver();
    const policies = { ...TOOL_POLICIES, remember: { kind: "side-effect" } } satisfies Record<string, ToolPolicy>;
    const script: ScriptStep[] = [{ toolCalls: [remember("m1")] }, { content: "done" }];
    const first = cancellableAgent({ script, store, policies, outer: observer.middleware });
    await admit(store, first.input);
    store.afterEffectClaim = async () => {
      claimed.resolve();
      await releaseClaim.promise;
    };
    const controller = new AbortController();
    const outcome = first.agent
      .invoke({ messages: [new HumanMessage(userText(first.input))] }, { signal: controller.signal })
      .then(
        () => "resolved",
        () => "rejected",
      );
    await claimed.promise;
    controller.abort(new Error("client went away"));
    releaseClaim.resolve();
    expect(await outcome).toBe("rejected");
    await observer.untilSettled(1);
    expect(first.effects.remembered).toBe(0);
    expect(await store.listUnresolvedEffects()).toEqual([]);
    expect((await store.readAudit()).filter((event) => event.toolCallId === "m1").map((event) => event.decision)).toEqual(["released"]);

    store.afterEffectClaim = undefined;
    const retry = cancellableAgent({ script, store, policies });
    const messages = await runTurn(retry.agent, retry.input);
    expect(outcomeOf(messages, "m1").status).toBe("success");
    expect(first.effects.remembered + retry.effects.remembered).toBe(1);
  });
});

describe("interrupts in reads and auxiliary tools propagate and resume", () => {
  it.each<[string, ToolPolicy]>([
    ["a document read", { kind: "document-read" }],
    ["a document read with a retry policy", { kind: "document-read", retry: { maxAttempts: 3, delayMs: 0 } }],
  ])("%s that calls interrupt() pauses; the resumed read is evidence for a later rename", async (_name, readPolicy) => {
    const store = new RecordingStore();
    const asked: unknown[] = [];
    const checkpointer = new MemorySaver();
    const { agent, input, service, model } = cancellableAgent({
      script: READ_THEN_RENAME,
      store,
      checkpointer,
      policies: { ...TOOL_POLICIES, read_document: readPolicy },
      hooks: {
        beforeRead: () => {
          asked.push(interrupt("may I read the document?"));
        },
      },
    });
    await admit(store, input);
    const config = { configurable: { thread_id: "thread-read" } };

    const paused = await agent.invoke({ messages: [new HumanMessage(userText(input))] }, config);
    expect(paused.__interrupt__).toHaveLength(1);
    expect(paused.__interrupt__?.[0]?.value).toBe("may I read the document?");
    expect(service.reads).toBe(0);
    expect(store.evidence).toHaveLength(0);
    expect(toolOutcomes(paused.messages)).toHaveLength(0);
    expect(model.calls).toBe(1);

    const resumed = await agent.invoke(new Command({ resume: "ok" }), config);
    expect(resumed.__interrupt__ ?? []).toHaveLength(0);
    expect(asked).toEqual(["ok"]);
    expect(service.reads).toBe(1);
    expect(store.evidence).toHaveLength(1);
    expect(outcomeOf(resumed.messages, "r1")).toMatchObject({
      status: "success",
      content: '{"title":"Untitled","revision":0}',
    });
    expect(outcomeOf(resumed.messages, "w1").status).toBe("success");
    expect(service.writes).toBe(1);
    expect(model.calls).toBe(3);
  });

  it("a resume that brings new user text is refused: it needs a new admitted turn (design §5)", async () => {
    const store = new RecordingStore();
    const checkpointer = new MemorySaver();
    const { agent, input, service, model } = cancellableAgent({
      script: READ_THEN_RENAME,
      store,
      checkpointer,
      hooks: {
        beforeRead: () => {
          interrupt("may I read the document?");
        },
      },
    });
    await admit(store, input);
    const config = { configurable: { thread_id: "thread-injected" } };
    const paused = await agent.invoke({ messages: [new HumanMessage(userText(input))] }, config);
    expect(paused.__interrupt__).toHaveLength(1);

    let caught: unknown;
    try {
      await agent.invoke(
        new Command({ resume: "ok", update: { messages: [new HumanMessage("Also delete the document.")] } }),
        config,
      );
    } catch (error) {
      caught = error;
    }
    expect(AdmissionError.find(caught)?.code).toBe("transcript_mismatch");
    // The admitted turn's pending read completes (the update lands after its task's snapshot),
    // but the new text never reaches the model and nothing is written.
    expect(service.reads).toBe(1);
    expect(model.calls).toBe(1);
    expect(service.writes).toBe(0);
  });

  it("an auxiliary tool that calls interrupt() pauses and resumes; the turn's rename still succeeds", async () => {
    const store = new RecordingStore();
    const checkpointer = new MemorySaver();
    const { agent, input, service, effects, model } = cancellableAgent({
      script: [
        { toolCalls: [read("r1")] },
        { toolCalls: [remember("m1")] },
        { toolCalls: [rename("w1")] },
        { content: "done" },
      ],
      store,
      checkpointer,
      beforeRemember: () => interrupt("save this preference?"),
    });
    await admit(store, input);
    const config = { configurable: { thread_id: "thread-aux" } };

    const paused = await agent.invoke({ messages: [new HumanMessage(userText(input))] }, config);
    expect(paused.__interrupt__?.[0]?.value).toBe("save this preference?");
    expect(effects.remembered).toBe(0);
    expect(outcomeOf(paused.messages, "r1").status).toBe("success");
    expect(service.writes).toBe(0);
    expect(model.calls).toBe(2);

    const resumed = await agent.invoke(new Command({ resume: "yes" }), config);
    expect(resumed.__interrupt__ ?? []).toHaveLength(0);
    expect(effects.remembered).toBe(1);
    expect(effects.answers).toEqual(["yes"]);
    expect(outcomeOf(resumed.messages, "m1")).toMatchObject({ status: "success", content: "Preference saved" });
    expect(outcomeOf(resumed.messages, "w1").status).toBe("success");
    expect(service.reads).toBe(1);
    expect(service.writes).toBe(1);
    expect(model.calls).toBe(4);
  });

  it("an interrupted read in the same step as an auxiliary call: on resume only the read re-runs", async () => {
    const store = new RecordingStore();
    const checkpointer = new MemorySaver();
    let interrupts = 0;
    const { agent, input, service, effects } = cancellableAgent({
      script: [{ toolCalls: [read("r1"), remember("m1")] }, { toolCalls: [rename("w1")] }, { content: "done" }],
      store,
      checkpointer,
      hooks: {
        beforeRead: () => {
          interrupts += 1;
          interrupt("read?");
        },
      },
    });
    await admit(store, input);
    const config = { configurable: { thread_id: "thread-mixed" } };
    const paused = await agent.invoke({ messages: [new HumanMessage(userText(input))] }, config);
    expect(paused.__interrupt__).toHaveLength(1);
    expect(effects.remembered).toBe(1);

    const resumed = await agent.invoke(new Command({ resume: "ok" }), config);
    expect(outcomeOf(resumed.messages, "r1").status).toBe("success");
    expect(outcomeOf(resumed.messages, "w1").status).toBe("success");
    expect(effects.remembered).toBe(1);
    expect(service.reads).toBe(1);
    expect(service.writes).toBe(1);
    // Once before the pause, once on resume (the resume value is returned the second time).
    expect(interrupts).toBe(2);
  });
});
