/**
 * No pointless approvals, through the real `createAgent` loop with a `MemorySaver`: before a
 * person is asked about a mutation, the refusals its claim would certainly answer are found
 * without claiming (the step rules, the transcript's reads, the turn's slot by `getMutation`, the
 * scope by `listUnresolved`). Such a call is refused with the claim's code: no approval request
 * is stored, no interrupt raised, nothing written. A replay of the completed call needs no new
 * approval; a call whose slot is open is asked as before.
 *
 * Writes are counted by the document service; requests are what the store lists for the turn.
 */
import { HumanMessage } from "@langchain/core/messages";
import { Command, MemorySaver } from "@langchain/langgraph";
import { createAgent } from "langchain";
import { describe, expect, it } from "vitest";
import {
  createDocumentGuardrails,
  InMemoryGuardrailStore,
  requireApproval,
  turnKey,
  type DocumentGuardrailsOptions,
  type GuardrailStore,
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
  TOOL_POLICIES,
  turnInput,
  USER_MESSAGE,
  type ToolHooks,
} from "../support/fixtures.js";

interface RunOptions {
  readonly store: GuardrailStore;
  readonly service: DocumentService;
  readonly input: TurnInput;
  readonly script: readonly ScriptStep[];
  readonly thread: string;
  readonly hooks?: ToolHooks;
  readonly options?: Partial<DocumentGuardrailsOptions>;
}

/** A real agent whose renames need a person's approval; each run on a thread of its own. */
function approvalRun(options: RunOptions) {
  const agent = createAgent({
    model: new ScriptedModel(options.script),
    tools: documentTools(options.service, options.hooks).all,
    middleware: [
      createDocumentGuardrails({
        input: options.input,
        store: options.store,
        userMessageLabel: "user",
        authorize: () => true,
        tools: TOOL_POLICIES,
        guardrails: [requireApproval({ tools: ["rename_document"] })],
        logger: { warn: () => undefined },
        ...options.options,
      }),
    ],
    checkpointer: new MemorySaver(),
  });
  const config = { configurable: { thread_id: options.thread } };
  return {
    start: async () => {
      await admit(options.store, options.input);
      return agent.invoke({ messages: [new HumanMessage(USER_MESSAGE)] }, config);
    },
    resume: (value: unknown) => agent.invoke(new Command({ resume: value }), config),
  };
}

const requests = async (store: GuardrailStore, input: TurnInput) =>
  (await store.listApprovals({ turnKey: turnKey(input) })).map((request) => request.toolCallId);

/** Turn 1 on its first thread: the rename `w1` approved and written. */
async function approvedWrite(store: GuardrailStore, service: DocumentService, input: TurnInput = turnInput()) {
  const run = approvalRun({ store, service, input, thread: "first", script: [{ toolCalls: [read("r1")] }, { toolCalls: [rename("w1")] }, { content: "done" }] });
  const paused = await run.start();
  expect(paused.__interrupt__).toHaveLength(1);
  const done = await run.resume({ decision: "approve" });
  expect(done.__interrupt__ ?? []).toEqual([]);
  expect(outcomeOf(done.messages, "w1").code).toBeUndefined();
}

describe("a person is never asked about a write its claim will refuse", () => {
  it("a retried turn whose model proposes a different write after the first completed: mutation_conflict with the stored result, no request, no interrupt, no write", async () => {
    const store = new InMemoryGuardrailStore();
    const service = new DocumentService();
    await approvedWrite(store, service);
    expect(service.writes).toBe(1);

    // The retried request runs the model again: fresh call ids, a revision that has since changed.
    const retried = approvalRun({
      store,
      service,
      input: turnInput(),
      thread: "retry",
      script: [{ toolCalls: [read("r2")] }, { toolCalls: [rename("w2", "Field notes v2", 1)] }, { content: "done" }],
    });
    const result = await retried.start();
    expect(result.__interrupt__ ?? []).toEqual([]);
    const outcome = outcomeOf(result.messages, "w2");
    expect(outcome.code).toBe("mutation_conflict");
    expect(JSON.parse(outcome.content)).toMatchObject({
      completed: { tool: "rename_document", status: "success", result: '{"title":"Field notes","revision":1}' },
    });
    expect(await requests(store, turnInput())).toEqual(["w1"]);
    expect(service.writes).toBe(1);
    const events = await store.readAudit({ turnKey: turnKey(turnInput()) });
    expect(events.filter((event) => event.toolCallId === "w2").map((event) => `${event.decision}:${event.action ?? event.code ?? ""}`)).toEqual([
      "verdict:approve", // the guardrail's verdict is audited as ever
      "refused:mutation_conflict",
    ]);
  });

  it("a replay of the completed call needs no new approval: the stored result, no request, no write", async () => {
    const store = new InMemoryGuardrailStore();
    const service = new DocumentService();
    await approvedWrite(store, service);
    const retried = approvalRun({
      store,
      service,
      input: turnInput(),
      thread: "retry",
      script: [{ toolCalls: [read("r1")] }, { toolCalls: [rename("w1")] }, { content: "done" }],
    });
    const result = await retried.start();
    expect(result.__interrupt__ ?? []).toEqual([]);
    expect(outcomeOf(result.messages, "w1").content).toBe('{"title":"Field notes","revision":1}');
    expect(await requests(store, turnInput())).toEqual(["w1"]);
    expect(service.writes).toBe(1);
  });

  it("an unknown slot: the same call is mutation_unknown, another mutation_conflict, neither asks", async () => {
    const store = new InMemoryGuardrailStore();
    const service = new DocumentService();
    const input = turnInput();
    const failing = approvalRun({
      store,
      service,
      input,
      thread: "first",
      hooks: { afterWrite: () => Promise.reject(new Error("connection reset")) },
      script: [{ toolCalls: [read("r1")] }, { toolCalls: [rename("w1")] }, { content: "done" }],
    });
    await failing.start();
    const failed = await failing.resume({ decision: "approve" });
    expect(outcomeOf(failed.messages, "w1").code).toBe("mutation_unknown");
    expect(service.writes).toBe(1);

    for (const [thread, call, code] of [
      ["same", rename("w1"), "mutation_unknown"],
      ["other", rename("w2", "Other", 1), "mutation_conflict"],
    ] as const) {
      const retried = approvalRun({ store, service, input, thread, script: [{ toolCalls: [read("r1")] }, { toolCalls: [call] }, { content: "done" }] });
      const result = await retried.start();
      expect(result.__interrupt__ ?? [], thread).toEqual([]);
      expect(outcomeOf(result.messages, call.id).code, thread).toBe(code);
    }
    expect(await requests(store, input)).toEqual(["w1"]);
    expect(service.writes).toBe(1);
  });

  it("an unknown write in another turn of the scope: scope_unresolved without asking; with requireResolvedScope false the person is asked", async () => {
    const store = new InMemoryGuardrailStore();
    const service = new DocumentService();
    const failing = approvalRun({
      store,
      service,
      input: turnInput(),
      thread: "first",
      hooks: { afterWrite: () => Promise.reject(new Error("connection reset")) },
      script: [{ toolCalls: [read("r1")] }, { toolCalls: [rename("w1")] }, { content: "done" }],
    });
    await failing.start();
    await failing.resume({ decision: "approve" });

    const next = turnInput({ turnId: "turn-2" });
    const blocked = approvalRun({
      store,
      service,
      input: next,
      thread: "next",
      script: [{ toolCalls: [read("r2")] }, { toolCalls: [rename("w2", "Other", 1)] }, { content: "done" }],
    });
    const result = await blocked.start();
    expect(result.__interrupt__ ?? []).toEqual([]);
    expect(outcomeOf(result.messages, "w2").code).toBe("scope_unresolved");
    expect(await requests(store, next)).toEqual([]);

    const unblocked = approvalRun({
      store,
      service,
      input: turnInput({ turnId: "turn-3" }),
      thread: "unblocked",
      options: { requireResolvedScope: false },
      script: [{ toolCalls: [read("r3")] }, { toolCalls: [rename("w3", "Other", 1)] }, { content: "done" }],
    });
    expect((await unblocked.start()).__interrupt__).toHaveLength(1);
    expect(service.writes).toBe(1);
  });

  it("the step rules and the transcript's reads first: a rename beside a read, or with no read, asks nobody", async () => {
    const store = new InMemoryGuardrailStore();
    const service = new DocumentService();
    const input = turnInput();
    const batched = approvalRun({
      store,
      service,
      input,
      thread: "batched",
      script: [{ toolCalls: [read("r1"), rename("w1")] }, { content: "done" }],
    });
    const result = await batched.start();
    expect(result.__interrupt__ ?? []).toEqual([]);
    expect(outcomeOf(result.messages, "w1").code).toBe("read_batch_deferred");

    const unread = approvalRun({ store, service, input, thread: "unread", script: [{ toolCalls: [rename("w2")] }, { content: "done" }] });
    const second = await unread.start();
    expect(second.__interrupt__ ?? []).toEqual([]);
    expect(outcomeOf(second.messages, "w2").code).toBe("read_required");
    expect(await requests(store, input)).toEqual([]);
    expect(service.writes).toBe(0);
  });

  it("a pending slot decides nothing yet: the person is asked", async () => {
    const store = new InMemoryGuardrailStore();
    const service = new DocumentService();
    const input = turnInput();
    // Another worker holds the slot for w1 right now.
    await store.claimMutation({
      turnKey: turnKey(input),
      scopeId: input.scopeId,
      toolCallId: "w0",
      toolName: "rename_document",
      argsDigest: "0".repeat(64),
      mutationKey: "1".repeat(64),
      toolFingerprint: "2".repeat(64),
    });
    const run = approvalRun({ store, service, input, thread: "pending", script: [{ toolCalls: [read("r1")] }, { toolCalls: [rename("w1")] }, { content: "done" }] });
    expect((await run.start()).__interrupt__).toHaveLength(1);
    expect(await requests(store, input)).toEqual(["w1"]);
  });
});
