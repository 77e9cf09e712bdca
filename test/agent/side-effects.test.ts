/**
 * `side-effect` tools through the real `createAgent` loop: each distinct call (turn, tool,
 * arguments) is claimed in the store before it runs and settled after, so a transport retry of the
 * turn, a LangGraph resume, or the model asking again under a new call id replays the first
 * answer instead of sending again. Ambiguous outcomes close the effect (`effect_unknown`) until an
 * operator reconciles it; `NoEffectError` gives it back; `maxPerTurn` caps a tool's effects per
 * turn. A side effect needs no read and leaves the turn's one mutation alone.
 *
 * Every assertion counts real effects: the messages the `send_email` tool puts in its outbox.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { HumanMessage, type BaseMessage } from "@langchain/core/messages";
import type { StructuredTool } from "@langchain/core/tools";
import { Command, interrupt, MemorySaver } from "@langchain/langgraph";
import { createAgent, tool } from "langchain";
import { afterAll, describe, expect, it } from "vitest";
import { z } from "zod";
import {
  ConfigurationError,
  createDocumentGuardrails,
  effectKey,
  InMemoryGuardrailStore,
  NoEffectError,
  requireApproval,
  turnKey,
  type Guardrail,
  type GuardrailStore,
  type ToolPolicy,
  type TurnInput,
} from "arkah-agent-guardrails";
import { SqliteGuardrailStore } from "arkah-agent-guardrails/sqlite";
import { ScriptedModel, type ScriptStep, type ScriptedToolCall } from "arkah-agent-guardrails/testing";
import { CORE_STORE_METHODS } from "../../src/store/capabilities.js";
import { duplicateEffectContent } from "../../src/tool-messages.js";
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

/** One sent message: what the outside world saw. */
interface Sent {
  readonly to: string;
  readonly subject: string;
}

/** How the mail service answers the next sends, in order; then it sends. */
type Behaviour = "send" | "throw" | "no-effect" | "ask";

/** A mail service and a chat service: the outboxes the tests count. */
class Services {
  readonly outbox: Sent[] = [];
  readonly chat: string[] = [];
  readonly plan: Behaviour[] = [];
}

function effectTools(services: Services) {
  const sendEmail = tool(
    ({ to, subject }) => {
      const behaviour = services.plan.shift() ?? "send";
      if (behaviour === "throw") {
        // The request may have reached the mail server before the connection dropped.
        services.outbox.push({ to, subject });
        throw new Error("connection reset by smtp.internal");
      }
      if (behaviour === "no-effect") throw new NoEffectError("mailbox full: nothing was sent");
      services.outbox.push({ to, subject });
      return `sent to ${to}`;
    },
    { name: "send_email", description: "Send an email.", schema: z.object({ to: z.string(), subject: z.string() }) },
  );
  const postChat = tool(
    ({ text }) => {
      services.chat.push(text);
      return "posted";
    },
    { name: "post_chat", description: "Post to the team chat.", schema: z.object({ text: z.string() }) },
  );
  /** Asks a person something (a LangGraph interrupt); on resume, answers. */
  const askHuman = tool(
    ({ question }) => String(interrupt({ question })),
    { name: "ask_human", description: "Ask a person.", schema: z.object({ question: z.string() }) },
  );
  return [sendEmail, postChat, askHuman] as const;
}

const POLICIES: Record<string, ToolPolicy> = {
  ...TOOL_POLICIES,
  send_email: { kind: "side-effect" },
  post_chat: { kind: "side-effect" },
  ask_human: { kind: "auxiliary" },
};

const send = (id: string, to = "ana@example.com", subject = "Renamed"): ScriptedToolCall => ({ id, name: "send_email", args: { to, subject } });
const post = (id: string, text = "renamed"): ScriptedToolCall => ({ id, name: "post_chat", args: { text } });

interface World {
  readonly store: GuardrailStore;
  readonly services: Services;
  readonly document: DocumentService;
  readonly input: TurnInput;
}

interface RunOptions {
  readonly policies?: Record<string, ToolPolicy>;
  readonly guardrails?: readonly Guardrail[];
  readonly checkpointer?: MemorySaver;
  readonly thread?: string;
  /** LangGraph's tool execution: `v1` re-runs the whole tools node on resume, siblings included. */
  readonly version?: "v1" | "v2";
}

/** A real agent over the world's store and services, with a scripted model. */
function agentFor(world: World, script: readonly ScriptStep[], options: RunOptions = {}) {
  const [sendEmail, postChat, askHuman] = effectTools(world.services);
  const tools: StructuredTool[] = [...documentTools(world.document).all, sendEmail, postChat, askHuman];
  const agent = createAgent({
    model: new ScriptedModel(script),
    tools,
    middleware: [
      createDocumentGuardrails({
        input: world.input,
        store: world.store,
        userMessageLabel: "user",
        authorize: () => true,
        tools: options.policies ?? POLICIES,
        ...(options.guardrails === undefined ? {} : { guardrails: options.guardrails }),
        logger: { warn: () => undefined },
      }),
    ],
    // Each agent its own saver unless a test shares one: a fresh agent is a transport retry.
    checkpointer: options.checkpointer ?? new MemorySaver(),
    ...(options.version === undefined ? {} : { version: options.version }),
  });
  const config = { configurable: { thread_id: options.thread ?? "effects" } };
  return {
    agent,
    start: async () => agent.invoke({ messages: [new HumanMessage(USER_MESSAGE)] }, config),
    resume: async (value: unknown) => agent.invoke(new Command({ resume: value }), config),
  };
}

/** One run of the turn (admitted first) through a fresh agent: what a transport retry does. */
async function runTurn(world: World, script: readonly ScriptStep[], options: RunOptions = {}): Promise<BaseMessage[]> {
  await admit(world.store, world.input);
  return (await agentFor(world, script, options).start()).messages;
}

/** The audit trail of the turn as `tool decision[:code]`. */
async function trail(world: World): Promise<string[]> {
  const events = await world.store.readAudit({ turnKey: turnKey(world.input) });
  return events.map((event) => `${event.toolName ?? ""} ${event.decision}${event.code === undefined ? "" : `:${event.code}`}`);
}

const closers: (() => void)[] = [];
afterAll(() => {
  for (const close of closers) close();
});

const STORES: Record<string, () => GuardrailStore> = {
  memory: () => new InMemoryGuardrailStore(),
  sqlite: () => {
    const dir = mkdtempSync(join(tmpdir(), "arkah-effects-"));
    const store = SqliteGuardrailStore.open({ path: join(dir, "guardrails.sqlite") });
    closers.push(() => {
      store.close();
      rmSync(dir, { recursive: true, force: true });
    });
    return store;
  },
};

describe.each(Object.keys(STORES))("side effects (%s store)", (storeName) => {
  const world = (): World => ({
    store: (STORES[storeName] as () => GuardrailStore)(),
    services: new Services(),
    document: new DocumentService(),
    input: turnInput(),
  });

  it("runs once, and a transport retry of the turn (same input, same call ids) replays it", async () => {
    const w = world();
    const script = [{ toolCalls: [send("e1")] }, { content: "Sent." }];
    const first = await runTurn(w, script);
    expect(outcomeOf(first, "e1")).toMatchObject({ status: "success", content: "sent to ana@example.com" });
    const retried = await runTurn(w, script);
    expect(outcomeOf(retried, "e1")).toMatchObject({ status: "success", content: "sent to ana@example.com" });
    expect(w.services.outbox).toHaveLength(1);
    expect(await trail(w)).toEqual(["send_email executed", "send_email replayed"]);
    const events = await w.store.readAudit({ turnKey: turnKey(w.input) });
    const key = effectKey(w.input, { name: "send_email", args: { to: "ana@example.com", subject: "Renamed" } });
    expect(events.map((event) => [event.kind, event.effectKey, event.mutationKey])).toEqual([
      ["side-effect", key, undefined],
      ["side-effect", key, undefined],
    ]);
  });

  it("a LangGraph resume re-runs the tools node (v1): the effect sent before the pause is replayed, not sent again", async () => {
    const w = world();
    await admit(w.store, w.input);
    const run = agentFor(w, [{ toolCalls: [send("e1"), { id: "q1", name: "ask_human", args: { question: "Anything else?" } }] }, { content: "Done." }], {
      checkpointer: new MemorySaver(),
      version: "v1",
    });
    const paused = await run.start();
    expect(paused.__interrupt__).toHaveLength(1);
    expect(w.services.outbox).toHaveLength(1);
    const resumed = await run.resume("no");
    expect(resumed.__interrupt__).toBeUndefined();
    expect(outcomeOf(resumed.messages, "e1")).toMatchObject({ status: "success", content: "sent to ana@example.com" });
    expect(w.services.outbox).toHaveLength(1);
    expect(await trail(w)).toEqual(["send_email executed", "send_email replayed", "ask_human executed"]);
  });

  it("the same effect asked again in a later step under a new call id replays; different arguments run", async () => {
    const w = world();
    const messages = await runTurn(w, [
      { toolCalls: [send("e1")] },
      { toolCalls: [send("e2")] },
      { toolCalls: [send("e3", "bo@example.com")] },
      { content: "Sent." },
    ]);
    expect(outcomeOf(messages, "e2")).toMatchObject({ status: "success", content: duplicateEffectContent("sent to ana@example.com", "e1") });
    expect(outcomeOf(messages, "e3")).toMatchObject({ status: "success", content: "sent to bo@example.com" });
    expect(w.services.outbox).toEqual([
      { to: "ana@example.com", subject: "Renamed" },
      { to: "bo@example.com", subject: "Renamed" },
    ]);
  });

  it("two identical calls in one step: one effect; the other is refused effect_pending or replayed", async () => {
    const w = world();
    const messages = await runTurn(w, [{ toolCalls: [send("e1"), send("e2")] }, { content: "Sent." }]);
    expect(w.services.outbox).toHaveLength(1);
    const answers = [outcomeOf(messages, "e1"), outcomeOf(messages, "e2")];
    const other = answers.find((answer) => answer.code !== undefined) ?? answers[1];
    const replayed = [duplicateEffectContent("sent to ana@example.com", "e1"), duplicateEffectContent("sent to ana@example.com", "e2")];
    expect(other?.code === "effect_pending" || replayed.includes(other?.content ?? "")).toBe(true);
  });

  it("two identical sends in one turn: one real send; the second call's result tells the model it was not sent again, with the first's result", async () => {
    const w = world();
    const messages = await runTurn(w, [{ toolCalls: [send("e1")] }, { toolCalls: [send("e2")] }, { content: "Sent twice?" }]);
    expect(w.services.outbox).toHaveLength(1);
    expect(outcomeOf(messages, "e1")).toMatchObject({ status: "success", content: "sent to ana@example.com" });
    const second = outcomeOf(messages, "e2");
    // Still a successful result carrying the first call's, behind a note naming that call.
    expect(second.status).toBe("success");
    expect(second.content).toMatch(/^\[Not carried out again: an identical call \(call e1\) with the same tool and arguments already ran in this turn/);
    expect(second.content.endsWith("\n\nsent to ana@example.com")).toBe(true);
    expect(await trail(w)).toEqual(["send_email executed", "send_email replayed"]);
  });

  it("a discriminator that tells identical calls apart (the call id): two identical sends in one turn are two sends; each replays its own", async () => {
    const w = world();
    const policies = { ...POLICIES, send_email: { kind: "side-effect", discriminator: (_args, call) => call.id } } satisfies Record<string, ToolPolicy>;
    const script = [{ toolCalls: [send("e1")] }, { toolCalls: [send("e2")] }, { content: "Sent twice." }];
    const messages = await runTurn(w, script, { policies });
    expect(w.services.outbox).toHaveLength(2);
    for (const id of ["e1", "e2"]) expect(outcomeOf(messages, id)).toMatchObject({ status: "success", content: "sent to ana@example.com" });
    // The turn retried with the same call ids: each replays its own effect, no note, nothing sent.
    const retried = await runTurn(w, script, { policies });
    for (const id of ["e1", "e2"]) expect(outcomeOf(retried, id)).toMatchObject({ status: "success", content: "sent to ana@example.com" });
    expect(w.services.outbox).toHaveLength(2);
    // The key the service can be given: effectKey with the discriminator's answer.
    const args = { to: "ana@example.com", subject: "Renamed" };
    const events = await w.store.readAudit({ turnKey: turnKey(w.input) });
    expect(events.filter((event) => event.decision === "executed").map((event) => event.effectKey)).toEqual([
      effectKey(w.input, { name: "send_email", args, discriminator: "e1" }),
      effectKey(w.input, { name: "send_email", args, discriminator: "e2" }),
    ]);
  });

  it("a step retried with fresh provider call ids sends once by default (told so); a call-id discriminator sends again, its documented price", async () => {
    const w = world();
    await runTurn(w, [{ toolCalls: [send("e1")] }, { content: "Sent." }]);
    // The transport retries the turn; the provider answers the same step with a new call id.
    const retried = await runTurn(w, [{ toolCalls: [send("e1-retry")] }, { content: "Sent." }]);
    expect(outcomeOf(retried, "e1-retry")).toMatchObject({ status: "success", content: duplicateEffectContent("sent to ana@example.com", "e1") });
    expect(w.services.outbox).toHaveLength(1);

    const v = world();
    const policies = { ...POLICIES, send_email: { kind: "side-effect", discriminator: (_args, call) => call.id } } satisfies Record<string, ToolPolicy>;
    await runTurn(v, [{ toolCalls: [send("e1")] }, { content: "Sent." }], { policies });
    await runTurn(v, [{ toolCalls: [send("e1-retry")] }, { content: "Sent." }], { policies });
    expect(v.services.outbox).toHaveLength(2);
  });

  it("a discriminator answering null keeps the key identical calls share: one send, and the effect key is the one without a discriminator", async () => {
    const w = world();
    const policies = { ...POLICIES, send_email: { kind: "side-effect", discriminator: () => null } } satisfies Record<string, ToolPolicy>;
    const messages = await runTurn(w, [{ toolCalls: [send("e1")] }, { toolCalls: [send("e2")] }, { content: "Sent." }], { policies });
    expect(w.services.outbox).toHaveLength(1);
    expect(outcomeOf(messages, "e2").content).toBe(duplicateEffectContent("sent to ana@example.com", "e1"));
    const [executed] = await w.store.readAudit({ turnKey: turnKey(w.input) });
    const args = { to: "ana@example.com", subject: "Renamed" };
    expect(executed?.effectKey).toBe(effectKey(w.input, { name: "send_email", args }));
    expect(effectKey(w.input, { name: "send_email", args, discriminator: null })).toBe(executed?.effectKey);
  });

  it("maxPerTurn refuses the effect beyond the limit (effect_limit), per tool; a replay is not limited", async () => {
    const w = world();
    const policies = { ...POLICIES, send_email: { kind: "side-effect", maxPerTurn: 2 } } satisfies Record<string, ToolPolicy>;
    const messages = await runTurn(
      w,
      [
        { toolCalls: [send("e1", "a@example.com"), send("e2", "b@example.com")] },
        { toolCalls: [send("e3", "c@example.com"), send("e4", "a@example.com"), post("p1")] },
        { content: "Sent." },
      ],
      { policies },
    );
    expect(outcomeOf(messages, "e3").code).toBe("effect_limit");
    expect(outcomeOf(messages, "e4")).toMatchObject({ status: "success", content: duplicateEffectContent("sent to a@example.com", "e1") });
    expect(outcomeOf(messages, "p1")).toMatchObject({ status: "success", content: "posted" });
    expect(w.services.outbox.map((sent) => sent.to)).toEqual(["a@example.com", "b@example.com"]);
    expect(w.services.chat).toEqual(["renamed"]);
  });

  it("an exception leaves the effect unknown: never run again until reconciled; completed then replays", async () => {
    const w = world();
    w.services.plan.push("throw");
    const script = [{ toolCalls: [send("e1")] }, { content: "Sorry." }];
    const first = await runTurn(w, script);
    expect(outcomeOf(first, "e1").code).toBe("effect_unknown");
    expect(outcomeOf(first, "e1").content).not.toContain("smtp.internal");
    const again = await runTurn(w, [{ toolCalls: [send("e2")] }, { content: "Sorry." }]);
    expect(outcomeOf(again, "e2").code).toBe("effect_unknown");
    expect(w.services.outbox).toHaveLength(1);

    const [unresolved] = await w.store.listUnresolvedEffects();
    expect(unresolved).toMatchObject({ state: "unknown", toolName: "send_email", toolCallId: "e1" });
    const key = unresolved?.effectKey ?? "";
    expect(await w.store.reconcileEffect({ effectKey: key, resolution: "completed", result: { content: "sent (confirmed)", status: "success" }, operatorRef: "ops-1" })).toMatchObject({
      reconciled: true,
    });
    const replayed = await runTurn(w, [{ toolCalls: [send("e3")] }, { content: "Sent." }]);
    expect(outcomeOf(replayed, "e3")).toMatchObject({ status: "success", content: duplicateEffectContent("sent (confirmed)", "e1") });
    expect(w.services.outbox).toHaveLength(1);
  });

  it("an unknown effect reconciled no-effect runs again, once", async () => {
    const w = world();
    w.services.plan.push("throw");
    await runTurn(w, [{ toolCalls: [send("e1")] }, { content: "Sorry." }]);
    w.services.outbox.length = 0; // the operator checked: the server never delivered it
    const [unresolved] = await w.store.listUnresolvedEffects();
    await w.store.reconcileEffect({ effectKey: unresolved?.effectKey ?? "", resolution: "no-effect", operatorRef: "ops-1" });
    const messages = await runTurn(w, [{ toolCalls: [send("e2")] }, { toolCalls: [send("e3")] }, { content: "Sent." }]);
    expect(outcomeOf(messages, "e2")).toMatchObject({ status: "success" });
    expect(outcomeOf(messages, "e3")).toMatchObject({ status: "success", content: duplicateEffectContent("sent to ana@example.com", "e2") });
    expect(w.services.outbox).toHaveLength(1);
    expect(await w.store.listUnresolvedEffects()).toEqual([]);
  });

  it("NoEffectError releases the claim (no_effect): the next step sends it, once", async () => {
    const w = world();
    w.services.plan.push("no-effect");
    const messages = await runTurn(w, [{ toolCalls: [send("e1")] }, { toolCalls: [send("e2")] }, { toolCalls: [send("e3")] }, { content: "Sent." }]);
    expect(outcomeOf(messages, "e1").code).toBe("no_effect");
    expect(outcomeOf(messages, "e2")).toMatchObject({ status: "success" });
    expect(outcomeOf(messages, "e3")).toMatchObject({ status: "success" });
    expect(w.services.outbox).toHaveLength(1);
    expect(await trail(w)).toEqual([
      "send_email failed:no_effect",
      "send_email released",
      "send_email executed",
      "send_email replayed",
    ]);
  });

  it("a side effect needs no read and leaves the turn's mutation slot alone; a mutation without a read is still refused", async () => {
    const w = world();
    const messages = await runTurn(w, [
      { toolCalls: [send("e1"), rename("w0")] },
      { toolCalls: [read("r1"), send("e2", "bo@example.com")] },
      { toolCalls: [rename("w1"), post("p1")] },
      { content: "Done." },
    ]);
    expect(outcomeOf(messages, "e1")).toMatchObject({ status: "success" });
    expect(outcomeOf(messages, "w0").code).toBe("read_required");
    expect(outcomeOf(messages, "e2")).toMatchObject({ status: "success" }); // shares a step with a read
    expect(outcomeOf(messages, "w1")).toMatchObject({ status: "success" }); // the turn's one change
    expect(outcomeOf(messages, "p1")).toMatchObject({ status: "success" }); // shares a step with the mutation
    expect(w.services.outbox).toHaveLength(2);
    expect(w.document.writes).toBe(1);
  });

  it("requireApproval: the person is asked, and the effect runs once across the resume and a resume replayed", async () => {
    const w = world();
    await admit(w.store, w.input);
    const checkpointer = new MemorySaver();
    const guardrails = [requireApproval({ tools: ["send_email"] })];
    const run = agentFor(w, [{ toolCalls: [send("e1")] }, { content: "Sent." }], { checkpointer, guardrails });
    const paused = await run.start();
    expect(paused.__interrupt__).toHaveLength(1);
    expect(w.services.outbox).toHaveLength(0);
    const resumed = await run.resume({ decision: "approve" });
    expect(outcomeOf(resumed.messages, "e1")).toMatchObject({ status: "success" });
    expect(w.services.outbox).toHaveLength(1);
    // The same turn run again on a fresh thread: the approval it used covers the replay only.
    const again = agentFor(w, [{ toolCalls: [send("e1")] }, { content: "Sent." }], { checkpointer, guardrails, thread: "other" });
    const replayed = await again.start();
    expect(outcomeOf(replayed.messages, "e1")).toMatchObject({ status: "success", content: "sent to ana@example.com" });
    expect(w.services.outbox).toHaveLength(1);
  });

  it("a completed effect asked again under a new call id replays without asking anyone (nothing would run)", async () => {
    const w = world();
    await admit(w.store, w.input);
    const checkpointer = new MemorySaver();
    const guardrails = [requireApproval({ tools: ["send_email"] })];
    const run = agentFor(w, [{ toolCalls: [send("e1")] }, { content: "Sent." }], { checkpointer, guardrails });
    expect((await run.start()).__interrupt__).toHaveLength(1);
    await run.resume({ decision: "approve" });
    expect(w.services.outbox).toHaveLength(1);
    const requested = (await w.store.listApprovals({ turnKey: turnKey(w.input) })).length;
    // The model asks for the same email again, under a new id, on another thread of the turn.
    const again = agentFor(w, [{ toolCalls: [send("e9")] }, { content: "Sent." }], { checkpointer, guardrails, thread: "again" });
    const replayed = await again.start();
    expect(replayed.__interrupt__, "nobody is asked about an effect that already happened").toBeUndefined();
    expect(outcomeOf(replayed.messages, "e9")).toMatchObject({ status: "success", content: duplicateEffectContent("sent to ana@example.com", "e1") });
    expect(await w.store.listApprovals({ turnKey: turnKey(w.input) }), "no new approval request").toHaveLength(requested);
    expect(w.services.outbox).toHaveLength(1);
    // Another email (other arguments) still needs a person.
    const other = agentFor(w, [{ toolCalls: [send("e10", "bo@example.com")] }, { content: "Sent." }], { checkpointer, guardrails, thread: "other" });
    expect((await other.start()).__interrupt__).toHaveLength(1);
    expect(w.services.outbox).toHaveLength(1);
  });

  it("an effect whose outcome is unknown is refused before a person is asked (no approval request)", async () => {
    const w = world();
    w.services.plan.push("throw");
    await runTurn(w, [{ toolCalls: [send("e1")] }, { content: "Sorry." }]);
    const checkpointer = new MemorySaver();
    const run = agentFor(w, [{ toolCalls: [send("e2")] }, { content: "Sorry." }], {
      checkpointer,
      guardrails: [requireApproval({ tools: ["send_email"] })],
    });
    const result = await run.start();
    expect(result.__interrupt__).toBeUndefined();
    expect(outcomeOf(result.messages, "e2").code).toBe("effect_unknown");
    expect(await w.store.listApprovals({ turnKey: turnKey(w.input) })).toEqual([]);
    expect(w.services.outbox).toHaveLength(1);
  });
});

describe("side effects: configuration", () => {
  const base = {
    input: turnInput(),
    userMessageLabel: "user",
    authorize: () => true,
    logger: { warn: () => undefined },
  };

  it("a store without the effects part is a ConfigurationError at build, naming it", () => {
    const inner = new InMemoryGuardrailStore();
    const core = Object.fromEntries(CORE_STORE_METHODS.map((name) => [name, (inner[name] as (...args: unknown[]) => unknown).bind(inner)]));
    let error: unknown;
    try {
      createDocumentGuardrails({ ...base, store: core as never, tools: POLICIES });
    } catch (caught) {
      error = caught;
    }
    expect(ConfigurationError.isInstance(error)).toBe(true);
    expect((error as Error).message).toContain("effects");
    expect(() => createDocumentGuardrails({ ...base, store: core as never, tools: TOOL_POLICIES }), "no side-effect tool: the core is enough").not.toThrow();
  });

  it("more than one attempt needs idempotent: true, as for a mutation", () => {
    const store = new InMemoryGuardrailStore();
    const retried = { kind: "side-effect", retry: { maxAttempts: 2 } } satisfies ToolPolicy;
    expect(() => createDocumentGuardrails({ ...base, store, tools: { send_email: retried } })).toThrow(/effectKey/);
    expect(() =>
      createDocumentGuardrails({ ...base, store, tools: { send_email: { ...retried, retry: { maxAttempts: 2, idempotent: true } } } }),
    ).not.toThrow();
  });

  it("maxPerTurn is for side-effect tools only", () => {
    expect(() =>
      createDocumentGuardrails({ ...base, store: new InMemoryGuardrailStore(), tools: { remember: { kind: "auxiliary", maxPerTurn: 1 } } }),
    ).toThrow(ConfigurationError);
  });

  it("a discriminator is for side-effect tools only, and must be a function", () => {
    const store = new InMemoryGuardrailStore();
    expect(() => createDocumentGuardrails({ ...base, store, tools: { rename: { kind: "mutation", discriminator: () => 1 } } })).toThrow(/discriminator/);
    expect(() => createDocumentGuardrails({ ...base, store, tools: { send_email: { kind: "side-effect", discriminator: "id" as never } } })).toThrow(
      /discriminator must be a function/,
    );
  });
});
