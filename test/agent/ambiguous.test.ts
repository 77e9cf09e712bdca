/**
 * Ambiguous outcomes (design §1, §3 step 7, §4) through the real `createAgent` loop: once the
 * mutation slot is claimed, an exception, a cancellation, an interrupt or a lost settlement leaves
 * the claim closed (`unknown`, or `pending` when the settlement itself failed). Nothing reruns the
 * mutation automatically, and no server error detail reaches the model. A result that is already
 * known when the run is cancelled is settled and replayed.
 *
 * Failures are injected for real: tools that throw, honour or ignore the abort signal, or call
 * `interrupt()`, and a store wrapper whose `settleMutation` throws. Every assertion is on a real
 * side effect (`service.writes`, what the store answers a retry) or on what the model receives.
 */
import { HumanMessage, type BaseMessage } from "@langchain/core/messages";
import { StructuredTool } from "@langchain/core/tools";
import { Command, interrupt, MemorySaver } from "@langchain/langgraph";
import { createAgent } from "langchain";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import {
  createDocumentGuardrails,
  InMemoryGuardrailStore,
  type GuardrailStore,
  type TurnInput,
} from "arkah-agent-guardrails";
import {
  type MutationSettlement,
} from "arkah-agent-guardrails/store";
import { ScriptedModel, type ScriptedToolCall } from "arkah-agent-guardrails/testing";
import {
  admit,
  DocumentService,
  ForwardingStore,
  documentTools,
  guardedAgent,
  invokeTurn,
  outcomeOf,
  read,
  rename,
  TOOL_POLICIES,
  turnInput,
  USER_MESSAGE,
  type ToolHooks,
} from "../support/fixtures.js";

const RENAMED = '{"title":"Field notes","revision":1}';
const SECRET = "/srv/docs/secret-path";

// ---------------------------------------------------------------------------------------------
// Local helpers

/** A promise with its resolver, to hold a tool at a point the test controls. */
function gate<T = undefined>() {
  let open: (value: T) => void = () => undefined;
  const opened = new Promise<T>((resolve) => {
    open = resolve;
  });
  return { opened, open };
}

/** Failure injection: a view of the shared store whose settlement write always fails. */
const SETTLEMENT_ERROR = "guardrail ledger unavailable: settlement write timed out";
class SettlementFailsStore extends ForwardingStore {
  override async settleMutation(_settlement: MutationSettlement): Promise<boolean> {
    throw new Error(SETTLEMENT_ERROR);
  }
}

/**
 * A view that lets a test wait for the first settlement to be stored, so a retry after a
 * cancellation never races the cancelled run's own settlement.
 */
class SettlementWatchStore extends ForwardingStore {
  readonly #first = gate<{ outcome: MutationSettlement["outcome"]; accepted: boolean }>();
  get settled() {
    return this.#first.opened;
  }
  override async settleMutation(settlement: MutationSettlement): Promise<boolean> {
    const accepted = await this.inner.settleMutation(settlement);
    this.#first.open({ outcome: settlement.outcome, accepted });
    return accepted;
  }
}

/** Every error on the `cause` chain of `error`. */
function causeChain(error: unknown): unknown[] {
  const chain: unknown[] = [];
  for (let current = error; current !== undefined && current !== null && chain.length < 16; ) {
    chain.push(current);
    current = (current as { cause?: unknown }).cause;
  }
  return chain;
}

/** The text of every message, as the model (or a log of the transcript) would see it. */
function transcriptText(messages: readonly BaseMessage[]): string {
  return messages
    .map((message) => (typeof message.content === "string" ? message.content : JSON.stringify(message.content)))
    .join("\n");
}

/** One invocation of a turn on a fresh guarded agent: read under `readId`, then `mutation`. */
async function attempt(
  shared: { store: GuardrailStore; service: DocumentService; input: TurnInput },
  readId: string,
  mutation: ScriptedToolCall,
  options: { hooks?: ToolHooks; signal?: AbortSignal } = {},
) {
  const { agent } = guardedAgent({
    ...shared,
    script: [{ toolCalls: [read(readId)] }, { toolCalls: [mutation] }, { content: "done" }],
    ...(options.hooks === undefined ? {} : { hooks: options.hooks }),
  });
  return invokeTurn(agent, shared.input, options.signal === undefined ? {} : { signal: options.signal });
}

const renameSchema = z.object({ title: z.string().min(1), expectedRevision: z.number().int().min(0) });

/**
 * A rename tool that really ignores cancellation: a `StructuredTool` subclass, whose result the
 * framework waits for (the `tool()` helper would abandon its function when the signal aborts; the
 * seal has it wait for a mutation's too, as the `tool()` test below shows).
 */
class SignalIgnoringRename extends StructuredTool<typeof renameSchema> {
  name = "rename_document";
  description = "Rename the document.";
  schema = renameSchema;

  constructor(
    private readonly service: DocumentService,
    private readonly hooks: { beforeWrite: () => Promise<void>; afterWrite: () => void },
  ) {
    super();
  }

  async _call({ title, expectedRevision }: z.infer<typeof renameSchema>): Promise<string> {
    await this.hooks.beforeWrite();
    const result = this.service.rename(title, expectedRevision);
    this.hooks.afterWrite();
    return result;
  }
}

// ---------------------------------------------------------------------------------------------

describe("an exception after the claim settles unknown (mutation_unknown)", () => {
  it("hides the server error from the model and never reruns the call on retry", async () => {
    const store = new InMemoryGuardrailStore();
    const service = new DocumentService();
    const input = turnInput();
    await admit(store, input);
    const logged: unknown[] = [];
    const { agent } = guardedAgent({
      store,
      service,
      input,
      // expectedRevision 3 while the document is at 0: the service throws its revision-conflict
      // error, whose message names a server path.
      script: [{ toolCalls: [read("r1")] }, { toolCalls: [rename("w1", "Field notes", 3)] }, { content: "done" }],
      guardrails: { logger: { warn: (_message, fields) => logged.push(fields.error) } },
    });

    const messages = await invokeTurn(agent, input);

    const outcome = outcomeOf(messages, "w1");
    expect(outcome).toMatchObject({ status: "error", code: "mutation_unknown" });
    const text = transcriptText(messages);
    expect(text).not.toContain(SECRET);
    expect(text).not.toContain("revision conflict");
    expect(text).not.toMatch(/\n\s+at /); // no stack frame
    expect(Object.keys(JSON.parse(outcome.content) as object).sort()).toEqual(["guardrail", "message"]);
    // The server log gets the error's class, not its text (a tool's error may quote results).
    expect(logged).toEqual([{ name: "Error" }]);
    expect(service.writes).toBe(0);

    // The document now is at the revision the call expected: a rerun would write.
    service.revision = 3;
    const retry = await attempt({ store, service, input }, "r2", rename("w1", "Field notes", 3));
    expect(outcomeOf(retry, "r2").content).toBe('{"title":"Untitled","revision":3}');
    expect(outcomeOf(retry, "w1")).toMatchObject({ status: "error", code: "mutation_unknown" });
    expect(transcriptText(retry)).not.toContain(SECRET);
    expect(service.writes).toBe(0);
  });

  it("reports unknown, not success, when the write happened and the tool threw afterwards", async () => {
    const shared = { store: new InMemoryGuardrailStore(), service: new DocumentService(), input: turnInput() };
    await admit(shared.store, shared.input);

    const messages = await attempt(shared, "r1", rename("w1"), {
      hooks: {
        afterWrite: () => {
          throw new Error(`connection reset reading the reply from ${SECRET}`);
        },
      },
    });

    expect(shared.service.writes).toBe(1);
    expect(outcomeOf(messages, "w1")).toMatchObject({ status: "error", code: "mutation_unknown" });
    expect(transcriptText(messages)).not.toContain(SECRET);
    expect(transcriptText(messages)).not.toContain(RENAMED.slice(1, -1));
  });
});

describe("cancellation after the claim", () => {
  it("settles unknown when the run is aborted and the tool honours the signal", async () => {
    const inner = new InMemoryGuardrailStore();
    const store = new SettlementWatchStore(inner);
    const service = new DocumentService();
    const input = turnInput();
    await admit(inner, input);
    const writeStarted = gate();
    const controller = new AbortController();

    const run = attempt({ store, service, input }, "r1", rename("w1"), {
      signal: controller.signal,
      hooks: {
        beforeWrite: (signal) =>
          new Promise<void>((_resolve, reject) => {
            if (signal === undefined) {
              reject(new Error("the tool was given no abort signal"));
              return;
            }
            signal.addEventListener("abort", () => reject(signal.reason as Error), { once: true });
            writeStarted.open(undefined);
          }),
      },
    });
    await writeStarted.opened;
    controller.abort();

    await expect(run).rejects.toMatchObject({ name: "AbortError" });
    expect(await store.settled).toEqual({ outcome: "unknown", accepted: true });
    expect(service.writes).toBe(0);

    // A retry (no hooks now: a rerun would write) meets the closed claim.
    const retry = await attempt({ store: inner, service, input }, "r2", rename("w1"));
    expect(outcomeOf(retry, "w1")).toMatchObject({ status: "error", code: "mutation_unknown" });
    expect(service.writes).toBe(0);
  });

  it("settles and replays a result that completed after the abort, from a tool that ignores the signal", async () => {
    const inner = new InMemoryGuardrailStore();
    const store = new SettlementWatchStore(inner);
    const service = new DocumentService();
    const input = turnInput();
    await admit(inner, input);
    const writeStarted = gate();
    const releaseWrite = gate();
    const written = gate();
    const agent = createAgent({
      model: new ScriptedModel([{ toolCalls: [read("r1")] }, { toolCalls: [rename("w1")] }, { content: "done" }]),
      tools: [
        documentTools(service).readDocument,
        new SignalIgnoringRename(service, {
          beforeWrite: async () => {
            writeStarted.open(undefined);
            await releaseWrite.opened;
          },
          afterWrite: () => written.open(undefined),
        }),
      ],
      middleware: [
        createDocumentGuardrails({
          input,
          store,
          userMessageLabel: "user",
          authorize: () => true,
          tools: TOOL_POLICIES,
          logger: { warn: () => undefined },
        }),
      ],
    });
    const controller = new AbortController();

    const run = agent.invoke({ messages: [new HumanMessage(USER_MESSAGE)] }, { signal: controller.signal });
    await writeStarted.opened;
    controller.abort();
    await expect(run).rejects.toMatchObject({ name: "AbortError" });

    // The write completes after the run was cancelled...
    releaseWrite.open(undefined);
    await written.opened;
    expect(service.writes).toBe(1);
    // ...and its known result is settled, not left unknown.
    expect(await store.settled).toEqual({ outcome: "complete", accepted: true });

    const retry = await attempt({ store: inner, service, input }, "r2", rename("w1"));
    expect(outcomeOf(retry, "w1")).toMatchObject({ status: "success", content: RENAMED });
    expect(service.writes).toBe(1);
  });

  it("settles and replays a result that completed after the abort, from a tool() function that ignores the signal", async () => {
    const inner = new InMemoryGuardrailStore();
    const store = new SettlementWatchStore(inner);
    const service = new DocumentService();
    const input = turnInput();
    await admit(inner, input);
    const writeStarted = gate();
    const releaseWrite = gate();
    const written = gate();
    const controller = new AbortController();

    const run = attempt({ store, service, input }, "r1", rename("w1"), {
      signal: controller.signal,
      hooks: {
        beforeWrite: async () => {
          writeStarted.open(undefined);
          await releaseWrite.opened; // ignores the signal
        },
        afterWrite: () => written.open(undefined),
      },
    });
    await writeStarted.opened;
    controller.abort();
    await expect(run).rejects.toMatchObject({ name: "AbortError" });

    releaseWrite.open(undefined);
    await written.opened;
    // `tool()` would drop its function at the abort; the seal has it run unraced for a claimed
    // call, so the guardrails wait for it as for a subclass, and settle the write it made.
    expect(service.writes).toBe(1);
    expect(await store.settled).toEqual({ outcome: "complete", accepted: true });

    const retry = await attempt({ store: inner, service, input }, "r2", rename("w1"));
    expect(outcomeOf(retry, "w1")).toMatchObject({ status: "success", content: RENAMED });
    expect(service.writes).toBe(1);
  });
});

describe("an interrupt inside the mutation after the claim", () => {
  it("settles unknown; on resume the mutation is not rerun and gets mutation_unknown", async () => {
    const store = new InMemoryGuardrailStore();
    const service = new DocumentService();
    const input = turnInput();
    await admit(store, input);
    const config = { configurable: { thread_id: "thread-interrupt" } };
    const { agent } = guardedAgent({
      store,
      service,
      input,
      checkpointer: new MemorySaver(),
      script: [{ toolCalls: [read("r1")] }, { toolCalls: [rename("w1")] }, { content: "done" }],
      hooks: {
        // Asks a human before writing; on resume `interrupt` returns the answer and the write runs.
        beforeWrite: () => {
          interrupt({ question: "Apply the rename?" });
        },
      },
    });

    const paused = await agent.invoke({ messages: [new HumanMessage(USER_MESSAGE)] }, config);
    expect(paused.__interrupt__).toHaveLength(1);
    expect(service.writes).toBe(0);

    const resumed = await agent.invoke(new Command({ resume: "approved" }), config);

    expect(resumed.__interrupt__).toBeUndefined();
    expect(outcomeOf(resumed.messages, "w1")).toMatchObject({ status: "error", code: "mutation_unknown" });
    expect(service.writes).toBe(0);
  });
});

describe("a settlement that fails", () => {
  it("fails the run, and leaves the claim pending (closed) for a healthy view of the same store", async () => {
    const shared = new InMemoryGuardrailStore();
    const service = new DocumentService();
    const input = turnInput();
    await admit(shared, input);

    const failing = attempt({ store: new SettlementFailsStore(shared), service, input }, "r1", rename("w1"));

    const error = await failing.then(
      () => undefined,
      (rejection: unknown) => rejection,
    );
    expect(error).toBeInstanceOf(Error);
    expect(causeChain(error).some((cause) => cause instanceof Error && cause.message === SETTLEMENT_ERROR)).toBe(true);
    expect(service.writes).toBe(1);

    const retry = await attempt({ store: shared, service, input }, "r2", rename("w1"));
    expect(outcomeOf(retry, "w1")).toMatchObject({ status: "error", code: "mutation_pending" });
    expect(service.writes).toBe(1);
  });
});
