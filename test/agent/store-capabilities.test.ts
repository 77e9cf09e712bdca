/**
 * Store capabilities through the real `createAgent` loop: a store with only the core of the
 * contract runs the core rule (one write per turn, after a read), and every configuration that
 * needs an optional part fails when it is built, with a `ConfigurationError` naming the part and
 * its methods, before anything is written.
 */
import { HumanMessage } from "@langchain/core/messages";
import { createAgent } from "langchain";
import { describe, expect, it } from "vitest";
import {
  admitTurn,
  ConfigurationError,
  createDocumentGuardrails,
  createToolGuardrails,
  createTurnService,
  deliverAudit,
  InMemoryGuardrailStore,
  type AnyGuardrailStore,
  type GuardrailStoreCore,
} from "arkah-agent-guardrails";
import { ScriptedModel, type ScriptStep } from "arkah-agent-guardrails/testing";
import { approvals, inspect, reconcile } from "../../src/cli/commands.js";
import { CORE_STORE_METHODS, detectStoreParts, STORE_PARTS } from "../../src/store/capabilities.js";
import { detector, DocumentService, documentTools, outcomeOf, read, rename, TOOL_POLICIES, turnInput, userText } from "../support/fixtures.js";

/** Only the core of `inner`, bound to it: what a minimal adapter offers. */
function coreOnly(inner: InMemoryGuardrailStore): GuardrailStoreCore {
  const methods = Object.fromEntries(
    CORE_STORE_METHODS.map((name) => [name, (inner[name] as (...args: unknown[]) => unknown).bind(inner)]),
  );
  return methods as unknown as GuardrailStoreCore;
}

/** The core plus the named methods of `inner`. */
function withMethods(inner: InMemoryGuardrailStore, names: readonly (keyof InMemoryGuardrailStore)[]): AnyGuardrailStore {
  const extra = Object.fromEntries(names.map((name) => [name, (inner[name] as (...args: unknown[]) => unknown).bind(inner)]));
  return { ...coreOnly(inner), ...extra };
}

function agentOver(store: AnyGuardrailStore, script: readonly ScriptStep[], service = new DocumentService()) {
  const input = turnInput();
  const guardrails = createDocumentGuardrails({
    input,
    store,
    userMessageLabel: "user",
    authorize: () => true,
    tools: TOOL_POLICIES,
    logger: { warn: () => undefined },
  });
  const agent = createAgent({ model: new ScriptedModel(script), tools: documentTools(service).all, middleware: [guardrails] });
  const run = async () => {
    await admitTurn({ store, input, moderate: () => true });
    return (await agent.invoke({ messages: [new HumanMessage(userText(input))] })).messages;
  };
  return { run, service };
}

/** What a build-time failure throws, for assertions on its type and message. */
function buildFailure(build: () => unknown): Error {
  try {
    build();
  } catch (error) {
    return error as Error;
  }
  throw new Error("expected the build to throw");
}

describe("a store with only the core of the contract", () => {
  it("has no optional part, and every core method", () => {
    const found = detectStoreParts(coreOnly(new InMemoryGuardrailStore()));
    expect(found, "a core-only wrapper: core complete, no part, none half present").toEqual({ missingCore: [], parts: [], incomplete: [] });
    expect(detectStoreParts(new InMemoryGuardrailStore()).parts, "the shipped store has every part").toEqual(Object.keys(STORE_PARTS));
  });

  it("runs the core rule: one write after a read, a second mutation in the turn refused", async () => {
    const inner = new InMemoryGuardrailStore();
    const { run, service } = agentOver(coreOnly(inner), [
      { toolCalls: [read("read-1")] },
      { toolCalls: [rename("rename-1")] },
      { toolCalls: [rename("rename-2", "Other title", 1)] },
      { content: "done" },
    ]);
    const messages = await run();
    expect(service.writes, "the first rename writes once; the second is refused by the claim").toBe(1);
    expect(outcomeOf(messages, "rename-2").code, "one mutation per turn holds with the core alone").toBe("mutation_conflict");
    const decisions = (await inner.readAudit()).map((event) => event.decision);
    expect(decisions, "the audit trail is kept by the core").toContain("executed");
  });

  it("refuses a mutation without a read, writing nothing", async () => {
    const { run, service } = agentOver(coreOnly(new InMemoryGuardrailStore()), [{ toolCalls: [rename("rename-1")] }, { content: "done" }]);
    const messages = await run();
    expect(service.writes, "no read, no write").toBe(0);
    expect(outcomeOf(messages, "rename-1").code, "read evidence is checked by the core claim").toBe("read_required");
  });
});

describe("a configuration that needs a part fails at build, naming it, and writes nothing", () => {
  const base = {
    input: turnInput(),
    userMessageLabel: "user",
    authorize: () => true,
    tools: TOOL_POLICIES,
    logger: { warn: () => undefined },
  } as const;

  it("guardrails beyond the schema guardrail need approvals", async () => {
    const inner = new InMemoryGuardrailStore();
    const error = buildFailure(() =>
      createDocumentGuardrails({ ...base, store: coreOnly(inner), guardrails: [detector("topic", { action: "allow", outcome: "complete", detections: [] }).guardrail] }),
    );
    expect(ConfigurationError.isInstance(error), "a ConfigurationError at build").toBe(true);
    expect(error.message, "names the part and its methods").toContain('"approvals" (recordVerdict, getVerdict, requestApproval');
    expect(error.message, "says who needs it").toContain("createDocumentGuardrails");
    expect(await inner.readAudit(), "nothing was written").toEqual([]);
  });

  it("the schema guardrail alone needs no part", () => {
    expect(() => createDocumentGuardrails({ ...base, store: coreOnly(new InMemoryGuardrailStore()), guardrails: [] }), "core is enough").not.toThrow();
  });

  it("an audit sink needs auditDelivery", () => {
    const error = buildFailure(() => createDocumentGuardrails({ ...base, store: coreOnly(new InMemoryGuardrailStore()), audit: { sink: () => undefined } }));
    expect(ConfigurationError.isInstance(error), "a ConfigurationError at build").toBe(true);
    expect(error.message, "names the part and its methods").toContain('"auditDelivery" (getAuditCursor, advanceAuditCursor)');
  });

  it("createToolGuardrails with a store and a guardrail needs approvals", () => {
    const error = buildFailure(() =>
      createToolGuardrails({ store: coreOnly(new InMemoryGuardrailStore()), tools: ["read_document"], guardrails: [detector("topic", { action: "allow", outcome: "complete", detections: [] }).guardrail] }),
    );
    expect(ConfigurationError.isInstance(error), "a ConfigurationError at build").toBe(true);
    expect(error.message, "names the part").toContain('"approvals"');
  });

  it("a part half present is a ConfigurationError naming the missing methods", async () => {
    const inner = new InMemoryGuardrailStore();
    const half = withMethods(inner, ["getAuditCursor"]);
    expect(detectStoreParts(half).incomplete, "detected as half present").toEqual([{ part: "auditDelivery", missing: ["advanceAuditCursor"] }]);
    const error = buildFailure(() => createDocumentGuardrails({ ...base, store: half }));
    expect(ConfigurationError.isInstance(error), "even when the configuration does not need the part").toBe(true);
    expect(error.message, "names the missing method").toContain('part of "auditDelivery" but not advanceAuditCursor');
    expect(await inner.readAudit(), "nothing was written").toEqual([]);
  });

  it("a store missing a core method is refused", () => {
    const store = coreOnly(new InMemoryGuardrailStore()) as Partial<GuardrailStoreCore>;
    delete store.readAudit;
    const error = buildFailure(() => createDocumentGuardrails({ ...base, store: store as GuardrailStoreCore }));
    expect(ConfigurationError.isInstance(error), "a ConfigurationError at build").toBe(true);
    expect(error.message, "lists the core").toContain("readAudit");
  });

  it("the turn service needs turns and approvals", async () => {
    const inner = new InMemoryGuardrailStore();
    const agent = createAgent({ model: new ScriptedModel([{ content: "hi" }]), tools: [] });
    const error = buildFailure(() => createTurnService({ agent: agent as never, store: coreOnly(inner), moderate: () => true }));
    expect(ConfigurationError.isInstance(error), "a ConfigurationError at build").toBe(true);
    expect(error.message, "names both parts").toMatch(/"turns" \(beginTurn, finishTurn, resumeTurn, renewTurn, listTurns, getTurn\) and "approvals"/);
    expect(await inner.getTurn("0".repeat(64)), "no turn was written").toBeUndefined();
  });

  it("deliverAudit needs auditDelivery", async () => {
    const delivered: unknown[] = [];
    const error = await deliverAudit({ store: coreOnly(new InMemoryGuardrailStore()), sink: (event) => void delivered.push(event), sinkName: "siem" }).then(
      () => new Error("resolved"),
      (reason: unknown) => reason as Error,
    );
    expect(ConfigurationError.isInstance(error), "rejects with a ConfigurationError").toBe(true);
    expect(error.message, "names the part").toContain('"auditDelivery"');
    expect(delivered, "nothing delivered").toEqual([]);
  });

  it("the CLI's operator and approval commands need their parts", async () => {
    const out: string[] = [];
    const sink = { out: (text: string) => void out.push(text), err: (text: string) => void out.push(text) };
    const store = coreOnly(new InMemoryGuardrailStore());
    for (const [name, command, part] of [
      ["inspect", () => inspect(store, {}, sink), "operator"],
      ["reconcile", () => reconcile(store, { turnKey: "a".repeat(64), resolution: "no-effect", operatorRef: "op" }, sink), "operator"],
      ["approvals", () => approvals(store, {}, sink), "approvals"],
    ] as const) {
      const error = await command().then(
        () => new Error("resolved"),
        (reason: unknown) => reason as Error,
      );
      expect(ConfigurationError.isInstance(error), `${name}: a ConfigurationError`).toBe(true);
      expect(error.message, `${name}: names the ${part} part`).toContain(`"${part}"`);
    }
    expect(out, "nothing printed").toEqual([]);
  });
});
