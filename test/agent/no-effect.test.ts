/**
 * `NoEffectError` through the real `createAgent` loop: a write service that rejects a stale
 * revision and rolls back lets its tool throw it, and the claim is released (not settled
 * `unknown`): the model is told `no_effect`, the scope is not blocked, and the same turn retried
 * claims afresh and writes once. Only the tool body's own assertion counts: one an inner
 * middleware throws after the body ran, one that replaced the body's error on its way up, or one
 * after an earlier retried attempt leaves the claim `unknown`. From a read it is `tool_failed`.
 *
 * Writes are counted by the service (`service.writes`); the claim's state is what the store
 * answers the next claim, and what its audit trail says.
 */
import { HumanMessage } from "@langchain/core/messages";
import type { ClientTool } from "@langchain/core/tools";
import { createAgent, createMiddleware, tool, type AgentMiddleware } from "langchain";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import {
  createDocumentGuardrails,
  InMemoryGuardrailStore,
  NoEffectError,
  RetryableToolError,
  turnKey,
  type GuardrailStore,
  type ToolPolicy,
  type TurnInput,
} from "arkah-agent-guardrails";
import { ScriptedModel, type ScriptStep } from "arkah-agent-guardrails/testing";
import { admit, DocumentService, outcomeOf, read, rename, TOOL_POLICIES, turnInput, USER_MESSAGE } from "../support/fixtures.js";

/** How the rename tool's body behaves on each attempt, after checking the revision. */
type Plan = "retryable" | "write";

/**
 * The document's tools, with a rename whose write service refuses a stale revision before
 * writing anything: the tool says so with `NoEffectError`.
 */
function noEffectTools(service: DocumentService, plan: readonly Plan[] = [], reason?: string) {
  let attempt = 0;
  const readDocument = tool(
    () => {
      service.reads += 1;
      return service.snapshot();
    },
    { name: "read_document", description: "Read the document.", schema: z.object({}) },
  );
  const renameDocument = tool(
    ({ title, expectedRevision }) => {
      attempt += 1;
      if (plan[attempt - 1] === "retryable") throw new RetryableToolError("service busy");
      // The service compares the revision in its transaction and rolls back: nothing is written.
      if (expectedRevision !== service.revision) {
        throw new NoEffectError("stale revision: nothing was written", reason === undefined ? undefined : { reason });
      }
      return service.rename(title, expectedRevision);
    },
    {
      name: "rename_document",
      description: "Rename the document.",
      schema: z.object({ title: z.string().min(1), expectedRevision: z.number().int().min(0) }),
    },
  );
  return [readDocument, renameDocument] as const;
}

interface RunOptions {
  readonly store: GuardrailStore;
  readonly service: DocumentService;
  readonly input: TurnInput;
  readonly script: readonly ScriptStep[];
  readonly inner?: readonly AgentMiddleware[];
  readonly policies?: Record<string, ToolPolicy>;
  readonly plan?: readonly Plan[];
  readonly readTool?: ClientTool;
  /** The reason the rename's NoEffectError gives the model, if any. */
  readonly reason?: string;
}

/** One run of the turn (admitted first) through a real agent; the messages it ended with. */
async function runTurn(options: RunOptions) {
  await admit(options.store, options.input);
  const [readDocument, renameDocument] = noEffectTools(options.service, options.plan, options.reason);
  const agent = createAgent({
    model: new ScriptedModel(options.script),
    tools: [options.readTool ?? readDocument, renameDocument],
    middleware: [
      createDocumentGuardrails({
        input: options.input,
        store: options.store,
        userMessageLabel: "user",
        authorize: () => true,
        tools: options.policies ?? { read_document: TOOL_POLICIES.read_document!, rename_document: TOOL_POLICIES.rename_document! },
        logger: { warn: () => undefined },
      }),
      ...(options.inner ?? []),
    ],
  });
  return (await agent.invoke({ messages: [new HumanMessage(USER_MESSAGE)] })).messages;
}

const stale = (id: string) => rename(id, "Field notes", 5);
const fresh = (id: string) => rename(id, "Field notes", 0);

/** The audit trail's decisions and codes for one turn, in order. */
async function trail(store: GuardrailStore, input: TurnInput) {
  const events = await store.readAudit({ turnKey: turnKey(input) });
  return events.map((event) => `${event.decision}${event.code === undefined ? "" : `:${event.code}`}`);
}

describe("NoEffectError", () => {
  it("a stale revision rolled back: the claim is released, the model is told no_effect, the audit records the assertion", async () => {
    const store = new InMemoryGuardrailStore();
    const service = new DocumentService();
    const input = turnInput();
    const messages = await runTurn({ store, service, input, script: [{ toolCalls: [read("r1")] }, { toolCalls: [stale("w1")] }, { content: "Done." }] });

    expect(service.writes).toBe(0);
    const outcome = outcomeOf(messages, "w1");
    expect(outcome.code).toBe("no_effect");
    expect(outcome.content).not.toContain("stale revision"); // the tool's own text never reaches the model
    expect(await store.listUnresolved()).toEqual([]);
    expect(await trail(store, input)).toEqual(expect.arrayContaining(["failed:no_effect", "released"]));
    expect(await trail(store, input)).not.toContain("failed:mutation_unknown");
  });

  it("a reason given explicitly reaches the model as the refusal's reason; the error's message never does", async () => {
    const store = new InMemoryGuardrailStore();
    const service = new DocumentService();
    const reason = "The revision you read (5) is not the current one: read the document again.";
    const messages = await runTurn({ store, service, input: turnInput(), reason, script: [{ toolCalls: [read("r1")] }, { toolCalls: [stale("w1")] }, { content: "Done." }] });
    const outcome = outcomeOf(messages, "w1");
    expect(outcome.code).toBe("no_effect");
    expect(JSON.parse(outcome.content)).toMatchObject({ guardrail: "no_effect", reason });
    expect(outcome.content).not.toContain("stale revision");
    expect(await store.listUnresolved()).toEqual([]);
  });

  it("a reason that is not plain bounded text is dropped: the model gets the refusal without one", async () => {
    for (const reason of ["", "line one\nline two", "\u0007bell", "x".repeat(501)]) {
      const store = new InMemoryGuardrailStore();
      const service = new DocumentService();
      const messages = await runTurn({ store, service, input: turnInput(), reason, script: [{ toolCalls: [read("r1")] }, { toolCalls: [stale("w1")] }, { content: "Done." }] });
      const outcome = outcomeOf(messages, "w1");
      expect(outcome.code).toBe("no_effect");
      expect(JSON.parse(outcome.content)).not.toHaveProperty("reason");
    }
    expect(new NoEffectError("x", { reason: "x".repeat(500) }).reason).toHaveLength(500);
  });

  it("the next turn in the scope is not blocked (no scope_unresolved), and writes", async () => {
    const store = new InMemoryGuardrailStore();
    const service = new DocumentService();
    await runTurn({ store, service, input: turnInput(), script: [{ toolCalls: [read("r1")] }, { toolCalls: [stale("w1")] }, { content: "Done." }] });

    const next = turnInput({ turnId: "turn-2" });
    const messages = await runTurn({ store, service, input: next, script: [{ toolCalls: [read("r2")] }, { toolCalls: [fresh("w2")] }, { content: "Done." }] });
    expect(outcomeOf(messages, "w2").code).toBeUndefined();
    expect(service.writes).toBe(1);
  });

  it("the same turn retried claims afresh and writes once; a second retry replays", async () => {
    const store = new InMemoryGuardrailStore();
    const service = new DocumentService();
    const input = turnInput();
    await runTurn({ store, service, input, script: [{ toolCalls: [read("r1")] }, { toolCalls: [stale("w1")] }, { content: "Done." }] });

    const retried = await runTurn({ store, service, input, script: [{ toolCalls: [read("r1")] }, { toolCalls: [fresh("w1")] }, { content: "Done." }] });
    expect(outcomeOf(retried, "w1").code).toBeUndefined();
    expect(service.writes).toBe(1);
    const again = await runTurn({ store, service, input, script: [{ toolCalls: [read("r1")] }, { toolCalls: [fresh("w1")] }, { content: "Done." }] });
    expect(outcomeOf(again, "w1").content).toBe(outcomeOf(retried, "w1").content);
    expect(service.writes).toBe(1);
  });

  it("control: an ordinary error leaves the claim unknown and blocks the scope", async () => {
    const store = new InMemoryGuardrailStore();
    const service = new DocumentService();
    const failing = createMiddleware({
      name: "Fails",
      wrapToolCall: async (request, handler) => {
        const result = await handler(request);
        if (request.toolCall.name !== "rename_document") return result;
        throw new Error("write service timed out");
      },
    });
    await runTurn({ store, service, input: turnInput(), inner: [failing], script: [{ toolCalls: [read("r1")] }, { toolCalls: [fresh("w1")] }, { content: "Done." }] });
    expect(service.writes).toBe(1);
    const next = await runTurn({
      store,
      service,
      input: turnInput({ turnId: "turn-2" }),
      script: [{ toolCalls: [read("r2")] }, { toolCalls: [fresh("w2")] }, { content: "Done." }],
    });
    expect(outcomeOf(next, "w2").code).toBe("scope_unresolved");
    expect(service.writes).toBe(1);
  });

  it("thrown by an inner middleware after the body ran (and wrote): not released; the claim is unknown and the scope blocked", async () => {
    const store = new InMemoryGuardrailStore();
    const service = new DocumentService();
    const input = turnInput();
    const liar = createMiddleware({
      name: "Liar",
      wrapToolCall: async (request, handler) => {
        const result = await handler(request);
        if (request.toolCall.name !== "rename_document") return result;
        throw new NoEffectError("nothing happened, honest");
      },
    });
    const messages = await runTurn({ store, service, input, inner: [liar], script: [{ toolCalls: [read("r1")] }, { toolCalls: [fresh("w1")] }, { content: "Done." }] });
    expect(service.writes).toBe(1);
    expect(outcomeOf(messages, "w1").code).toBe("mutation_unknown");
    expect((await store.listUnresolved()).map((claim) => claim.state)).toEqual(["unknown"]);
    expect(await trail(store, input)).not.toContain("released");

    const next = await runTurn({
      store,
      service,
      input: turnInput({ turnId: "turn-2" }),
      script: [{ toolCalls: [read("r2")] }, { toolCalls: [rename("w2", "Other", 1)] }, { content: "Done." }],
    });
    expect(outcomeOf(next, "w2").code).toBe("scope_unresolved");
    expect(service.writes).toBe(1);
  });

  it("the body's NoEffectError replaced by another on its way up: not released", async () => {
    const store = new InMemoryGuardrailStore();
    const service = new DocumentService();
    const rethrows = createMiddleware({
      name: "Rethrows",
      wrapToolCall: async (request, handler) => {
        try {
          return await handler(request);
        } catch (error) {
          throw new NoEffectError("wrapped", { cause: error });
        }
      },
    });
    const messages = await runTurn({ store, service, input: turnInput(), inner: [rethrows], script: [{ toolCalls: [read("r1")] }, { toolCalls: [stale("w1")] }, { content: "Done." }] });
    expect(outcomeOf(messages, "w1").code).toBe("mutation_unknown");
    expect((await store.listUnresolved()).map((claim) => claim.state)).toEqual(["unknown"]);
  });

  it("the body's own NoEffectError passed through an inner middleware unchanged: released", async () => {
    const store = new InMemoryGuardrailStore();
    const service = new DocumentService();
    const passes = createMiddleware({ name: "Passes", wrapToolCall: (request, handler) => handler(request) });
    const messages = await runTurn({ store, service, input: turnInput(), inner: [passes], script: [{ toolCalls: [read("r1")] }, { toolCalls: [stale("w1")] }, { content: "Done." }] });
    expect(outcomeOf(messages, "w1").code).toBe("no_effect");
    expect(await store.listUnresolved()).toEqual([]);
  });

  it("after a retried attempt (RetryableToolError), a NoEffectError speaks for that attempt only: the claim is unknown", async () => {
    const store = new InMemoryGuardrailStore();
    const service = new DocumentService();
    const messages = await runTurn({
      store,
      service,
      input: turnInput(),
      plan: ["retryable"],
      policies: {
        read_document: { kind: "document-read" },
        rename_document: { kind: "mutation", retry: { maxAttempts: 2, delayMs: 0, idempotent: true } },
      },
      script: [{ toolCalls: [read("r1")] }, { toolCalls: [stale("w1")] }, { content: "Done." }],
    });
    expect(outcomeOf(messages, "w1").code).toBe("mutation_unknown");
    expect((await store.listUnresolved()).map((claim) => claim.state)).toEqual(["unknown"]);
  });

  it("from a read it is an ordinary failure: tool_failed", async () => {
    const store = new InMemoryGuardrailStore();
    const service = new DocumentService();
    const readDocument = tool(
      () => {
        throw new NoEffectError("nothing read");
      },
      { name: "read_document", description: "Read the document.", schema: z.object({}) },
    );
    const messages = await runTurn({ store, service, input: turnInput(), readTool: readDocument, script: [{ toolCalls: [read("r1")] }, { content: "Done." }] });
    expect(outcomeOf(messages, "r1").code).toBe("tool_failed");
  });
});
