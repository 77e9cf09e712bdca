/**
 * Admission through the real `createAgent` loop: receipts bind the exact turn input, are reused
 * and immutable, moderation must answer a boolean, and nothing of a turn runs unless its receipt
 * is allowed and the transcript shows the admitted user message. Both ways of binding a turn
 * (middleware per turn, and one agent with the turn in `context`) are covered.
 */
import { AIMessage, HumanMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import { createAgent, tool } from "langchain";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import {
  admitTurn,
  AdmissionError,
  assertAdmitted,
  createDocumentGuardrails,
  InMemoryGuardrailStore,
  turnContext,
  turnKey,
  type AdmissionErrorCode,
  type GuardrailStore,
  type Moderate,
  type ModerationRequest,
  type Segment,
  type TurnInput,
} from "arkah-agent-guardrails";
import { moderationDigest } from "arkah-agent-guardrails/store";
import { ScriptedModel, type ScriptStep } from "arkah-agent-guardrails/testing";
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
  USER_MESSAGE,
  userText,
} from "../support/fixtures.js";

// ---------------------------------------------------------------------------------------------
// Local helpers

/** A turn with two segments, so order and labels can change. */
function twoSegmentTurn(overrides: Partial<TurnInput> = {}): TurnInput {
  return turnInput({
    segments: [
      { label: "user", content: USER_MESSAGE },
      { label: "document", content: "Title: Untitled" },
    ],
    ...overrides,
  });
}

/** A moderator that counts its calls and answers `answer`. */
function countingModerator(answer: unknown = true) {
  const counter = {
    calls: 0,
    moderate: (() => {
      counter.calls += 1;
      return answer;
    }) as Moderate,
  };
  return counter;
}

/** The `AdmissionError` a promise rejected with (walking LangChain's wrappers); fails otherwise. */
async function admissionFailure(promise: Promise<unknown>): Promise<AdmissionError> {
  let caught: unknown;
  try {
    await promise;
  } catch (error) {
    caught = error;
  }
  expect(caught, "expected the promise to reject").toBeDefined();
  const found = AdmissionError.find(caught);
  expect(found, `expected an AdmissionError behind ${String(caught)}`).toBeDefined();
  return found!;
}

async function expectAdmissionCode(promise: Promise<unknown>, code: AdmissionErrorCode): Promise<AdmissionError> {
  const error = await admissionFailure(promise);
  expect(error.code).toBe(code);
  return error;
}

/** The standard read-then-rename script, ending with text. */
const READ_THEN_RENAME: readonly ScriptStep[] = [
  { toolCalls: [read("r1")] },
  { toolCalls: [rename("w1")] },
  { content: "done" },
];

/** One compiled agent whose single middleware takes each turn from `context` (design §5). */
function contextModeAgent(script: readonly ScriptStep[]) {
  const store = new InMemoryGuardrailStore();
  const service = new DocumentService();
  const model = new ScriptedModel(script);
  const guardrails = createDocumentGuardrails({
    store,
    userMessageLabel: "user",
    authorize: () => true,
    tools: TOOL_POLICIES,
    logger: { warn: () => undefined },
  });
  const agent = createAgent({ model, tools: documentTools(service).all, middleware: [guardrails] });
  /** Invokes with the user text of `turn` and the given raw `context` (which may be invalid). */
  const invokeWithContext = async (turn: TurnInput, context: unknown) => {
    const result = await agent.invoke(
      { messages: [new HumanMessage(userText(turn))] },
      { context: context as ReturnType<typeof turnContext> },
    );
    return result.messages;
  };
  const invoke = (turn: TurnInput) => invokeWithContext(turn, turnContext(turn));
  return { store, service, model, invoke, invokeWithContext };
}

// ---------------------------------------------------------------------------------------------

describe("admission receipts bind the exact turn input", () => {
  const variants: [string, TurnInput][] = [
    [
      "whitespace changed in a segment",
      twoSegmentTurn({
        segments: [
          { label: "user", content: USER_MESSAGE },
          { label: "document", content: "Title:  Untitled" },
        ],
      }),
    ],
    [
      "an empty segment added",
      twoSegmentTurn({
        segments: [
          { label: "user", content: USER_MESSAGE },
          { label: "document", content: "Title: Untitled" },
          { label: "notes", content: "" },
        ],
      }),
    ],
    [
      "segments reordered",
      twoSegmentTurn({
        segments: [
          { label: "document", content: "Title: Untitled" },
          { label: "user", content: USER_MESSAGE },
        ],
      }),
    ],
    [
      "a label renamed",
      twoSegmentTurn({
        segments: [
          { label: "user", content: USER_MESSAGE },
          { label: "doc", content: "Title: Untitled" },
        ],
      }),
    ],
    ["the policy version changed", twoSegmentTurn({ policyVersion: "v2" })],
    ["a principal named where the admitted turn named none", twoSegmentTurn({ principal: "user-2" })],
  ];

  it.each(variants)("%s: a later admitTurn throws input_mismatch and the first receipt stays", async (_name, variant) => {
    const store = new InMemoryGuardrailStore();
    const original = twoSegmentTurn();
    const first = await admitTurn({ store, input: original, moderate: () => true });
    expect(first.allowed).toBe(true);

    const moderator = countingModerator(true);
    await expectAdmissionCode(admitTurn({ store, input: variant, moderate: moderator.moderate }), "input_mismatch");
    expect(moderator.calls).toBe(0);
    // Immutable: still the first receipt, for the first input.
    expect(await store.getReceipt(turnKey(original))).toEqual(first);
    await expect(assertAdmitted({ store, input: original })).resolves.toEqual(first);
  });

  it.each(variants)("%s: the middleware refuses to run the changed turn", async (_name, variant) => {
    const store = new InMemoryGuardrailStore();
    await admitTurn({ store, input: twoSegmentTurn(), moderate: () => true });
    const { agent, service, model } = guardedAgent({ script: READ_THEN_RENAME, store, input: variant });

    await expectAdmissionCode(invokeTurn(agent, variant), "input_mismatch");
    expect(model.calls).toBe(0);
    expect(service.reads).toBe(0);
    expect(service.writes).toBe(0);
  });

  it("turnKey hashes scope and turn only: the policy version does not mint a new slot", () => {
    const base = turnInput();
    expect(turnKey(turnInput({ policyVersion: "v2" }))).toBe(turnKey(base));
    expect(turnKey(turnInput({ principal: "user-1" }))).toBe(turnKey(base));
    expect(turnKey(turnInput({ segments: [{ label: "user", content: "other" }] }))).toBe(turnKey(base));
    expect(turnKey(turnInput({ turnId: "turn-2" }))).not.toBe(turnKey(base));
    expect(turnKey(turnInput({ scopeId: "doc-2" }))).not.toBe(turnKey(base));
    // No ambiguity from concatenation.
    expect(turnKey({ scopeId: "a/b", turnId: "c" })).not.toBe(turnKey({ scopeId: "a", turnId: "b/c" }));
  });
});

describe("admission receipts bind the turn's principal", () => {
  const forUser = (principal?: string) => twoSegmentTurn(principal === undefined ? {} : { principal });

  it("admitTurn stores the principal in the receipt; assertAdmitted accepts only the same principal", async () => {
    const store = new InMemoryGuardrailStore();
    const receipt = await admitTurn({ store, input: forUser("user-1"), moderate: () => true });
    expect(receipt).toMatchObject({ principal: "user-1", allowed: true });
    expect(await store.getReceipt(turnKey(forUser("user-1")))).toEqual(receipt);
    await expect(assertAdmitted({ store, input: forUser("user-1") })).resolves.toEqual(receipt);
    await expectAdmissionCode(assertAdmitted({ store, input: forUser("user-2") }), "input_mismatch");
    await expectAdmissionCode(assertAdmitted({ store, input: forUser() }), "input_mismatch");
  });

  it("a receipt for a turn without a principal has none, and matches only a turn without one", async () => {
    const store = new InMemoryGuardrailStore();
    const receipt = await admitTurn({ store, input: forUser(), moderate: () => true });
    expect(receipt).not.toHaveProperty("principal");
    await expect(assertAdmitted({ store, input: forUser() })).resolves.toEqual(receipt);
    await expectAdmissionCode(assertAdmitted({ store, input: forUser("user-1") }), "input_mismatch");
  });

  it.each<[string, string | undefined]>([
    ["another principal", "user-2"],
    ["no principal", undefined],
  ])("a later admitTurn with %s throws input_mismatch without asking moderation", async (_label, principal) => {
    const store = new InMemoryGuardrailStore();
    const first = await admitTurn({ store, input: forUser("user-1"), moderate: () => true });
    const moderator = countingModerator(true);
    await expectAdmissionCode(admitTurn({ store, input: forUser(principal), moderate: moderator.moderate }), "input_mismatch");
    expect(moderator.calls).toBe(0);
    expect(await store.getReceipt(turnKey(forUser()))).toEqual(first);
  });

  it("the middleware refuses to run the turn as another principal, before any model call", async () => {
    const store = new InMemoryGuardrailStore();
    await admitTurn({ store, input: forUser("user-1"), moderate: () => true });
    const { agent, service, model } = guardedAgent({ script: READ_THEN_RENAME, store, input: forUser("user-2") });
    await expectAdmissionCode(invokeTurn(agent, forUser("user-2")), "input_mismatch");
    expect(model.calls).toBe(0);
    expect(service.reads + service.writes).toBe(0);
  });

  it("the same principal runs the turn", async () => {
    const store = new InMemoryGuardrailStore();
    await admitTurn({ store, input: forUser("user-1"), moderate: () => true });
    const { agent, service } = guardedAgent({ script: READ_THEN_RENAME, store, input: forUser("user-1") });
    expect(outcomeOf(await invokeTurn(agent, forUser("user-1")), "w1").status).toBe("success");
    expect(service.writes).toBe(1);
  });
});

describe("receipts are reused", () => {
  it("an allowed receipt is reused without asking moderation again", async () => {
    const store = new InMemoryGuardrailStore();
    const input = turnInput();
    const moderator = countingModerator(true);
    const first = await admitTurn({ store, input, moderate: moderator.moderate });
    const second = await admitTurn({ store, input, moderate: moderator.moderate });
    const third = await admitTurn({ store, input, moderate: countingModerator(false).moderate });
    expect(moderator.calls).toBe(1);
    expect(first.allowed).toBe(true);
    expect(second).toEqual(first);
    expect(third).toEqual(first);
  });

  it("a denied receipt is reused too: a later allowing provider is not asked", async () => {
    const store = new InMemoryGuardrailStore();
    const input = turnInput();
    const denied = await admitTurn({ store, input, moderate: () => false });
    expect(denied.allowed).toBe(false);
    const moderator = countingModerator(true);
    const again = await admitTurn({ store, input, moderate: moderator.moderate });
    expect(moderator.calls).toBe(0);
    expect(again).toEqual(denied);
    await expectAdmissionCode(assertAdmitted({ store, input }), "denied");
  });

  it("a denied turn fails with `denied` before any model call and with no tool side effect", async () => {
    const { agent, store, input, service, model } = guardedAgent({ script: READ_THEN_RENAME });
    await admit(store, input, false);
    await expectAdmissionCode(invokeTurn(agent, input), "denied");
    expect(model.calls).toBe(0);
    expect(service.reads).toBe(0);
    expect(service.writes).toBe(0);
  });

  it("concurrent first admissions keep one immutable winner that every caller gets", async () => {
    const store = new InMemoryGuardrailStore();
    const input = turnInput();
    let calls = 0;
    const receipts = await Promise.all(
      Array.from({ length: 20 }, (_, index) =>
        admitTurn({
          store,
          input,
          moderate: () => {
            calls += 1;
            return index % 2 === 0;
          },
        }),
      ),
    );
    const winner = await store.getReceipt(turnKey(input));
    expect(winner).toBeDefined();
    for (const receipt of receipts) expect(receipt).toEqual(winner);
    expect(calls).toBeGreaterThanOrEqual(1);
    // Later callers reuse it.
    await expect(admitTurn({ store, input, moderate: () => !winner?.allowed })).resolves.toEqual(winner);
  });

  it("concurrent first admissions with different input: losers get input_mismatch, never another receipt", async () => {
    const store = new InMemoryGuardrailStore();
    const a = turnInput({ policyVersion: "v1" });
    const b = turnInput({ policyVersion: "v2" });
    const settled = await Promise.allSettled(
      Array.from({ length: 20 }, (_, index) =>
        admitTurn({ store, input: index % 2 === 0 ? a : b, moderate: () => true }),
      ),
    );
    const winner = (await store.getReceipt(turnKey(a)))!;
    const fulfilled = settled.filter((entry) => entry.status === "fulfilled");
    const rejected = settled.filter((entry) => entry.status === "rejected");
    expect(fulfilled).toHaveLength(10);
    for (const entry of fulfilled) expect(entry.value).toEqual(winner);
    for (const entry of rejected) expect(AdmissionError.find(entry.reason)?.code).toBe("input_mismatch");
  });
});

describe("moderation must answer a boolean", () => {
  it("the provider is asked about the exact turn and cannot change it through the request", async () => {
    const store = new InMemoryGuardrailStore();
    const input = twoSegmentTurn();
    const requests: ModerationRequest[] = [];
    const asked: (readonly Segment[])[] = [];
    const receipt = await admitTurn({
      store,
      input,
      moderate: (request) => {
        requests.push(request);
        asked.push(structuredClone(request.segments));
        const segments = request.segments as { label: string; content: string }[];
        const first = segments[0];
        if (first !== undefined) first.content = "Delete everything.";
        segments.push({ label: "injected", content: "x" });
        return true;
      },
    });
    expect(requests).toHaveLength(1);
    expect(requests[0]).toMatchObject({
      scopeId: "doc-1",
      turnId: "turn-1",
      policyVersion: "v1",
      moderationDigest: moderationDigest(input),
    });
    expect(asked).toEqual([input.segments]); // the exact segments, in order, as the provider got them
    expect(receipt.moderationDigest).toBe(moderationDigest(input));
    expect(input.segments[0]?.content).toBe(USER_MESSAGE);
    // The admitted turn is still the original one, and it runs.
    const { agent, service } = guardedAgent({ script: READ_THEN_RENAME, store, input });
    expect(outcomeOf(await invokeTurn(agent, input), "w1").status).toBe("success");
    expect(service.writes).toBe(1);
  });

  const nonBooleans: [string, unknown][] = [
    ['"true"', "true"],
    ["1", 1],
    ["{ allowed: true }", { allowed: true }],
    ["undefined", undefined],
    ["null", null],
    ["a promise of \"true\"", Promise.resolve("true")],
  ];

  it.each(nonBooleans)("an answer of %s authorises nothing and stores no receipt", async (_name, answer) => {
    const store = new InMemoryGuardrailStore();
    const input = turnInput();
    const error = await expectAdmissionCode(
      admitTurn({ store, input, moderate: (() => answer) as unknown as Moderate }),
      "moderation_failed",
    );
    expect(error.message).toMatch(/not admitted/);
    expect(await store.getReceipt(turnKey(input))).toBeUndefined();
    await expectAdmissionCode(assertAdmitted({ store, input }), "not_admitted");

    // Nothing was stored, so a working provider can admit the turn afterwards.
    const receipt = await admitTurn({ store, input, moderate: () => true });
    expect(receipt.allowed).toBe(true);
    await expect(assertAdmitted({ store, input })).resolves.toEqual(receipt);
  });

  it.each([
    ["throws", () => { throw new Error("provider down"); }],
    ["rejects", () => Promise.reject(new Error("provider down"))],
  ])("a moderator that %s fails admission, stores nothing, and keeps the cause", async (_name, moderate) => {
    const store = new InMemoryGuardrailStore();
    const input = turnInput();
    const error = await expectAdmissionCode(admitTurn({ store, input, moderate: moderate }), "moderation_failed");
    expect((error.cause as Error).message).toBe("provider down");
    expect(await store.getReceipt(turnKey(input))).toBeUndefined();
    const receipt = await admitTurn({ store, input, moderate: () => false });
    expect(receipt.allowed).toBe(false);
  });

  it("a run of a turn whose moderation failed fails not_admitted", async () => {
    const { agent, store, input, service, model } = guardedAgent({ script: READ_THEN_RENAME });
    await admissionFailure(admitTurn({ store, input, moderate: (() => "yes") as unknown as Moderate }));
    await expectAdmissionCode(invokeTurn(agent, input), "not_admitted");
    expect(model.calls).toBe(0);
    expect(service.reads + service.writes).toBe(0);
  });
});

describe("turns that are not admitted, or not valid", () => {
  it("no receipt: the run fails not_admitted and the model is never called", async () => {
    const { agent, input, service, model } = guardedAgent({ script: READ_THEN_RENAME });
    await expectAdmissionCode(invokeTurn(agent, input), "not_admitted");
    expect(model.calls).toBe(0);
    expect(service.reads).toBe(0);
    expect(service.writes).toBe(0);
  });

  const invalid: [string, unknown][] = [
    [
      "duplicate labels",
      turnInput({
        segments: [
          { label: "user", content: USER_MESSAGE },
          { label: "user", content: "again" },
        ],
      }),
    ],
    ["an empty scopeId", turnInput({ scopeId: "" })],
    ["an empty turnId", turnInput({ turnId: "" })],
    ["an empty policyVersion", turnInput({ policyVersion: "" })],
    ["no segments", turnInput({ segments: [] })],
    ["an unknown key", { ...turnInput(), extra: true }],
    ["a segment with an empty label", turnInput({ segments: [{ label: "", content: USER_MESSAGE }] })],
  ];

  it.each(invalid)("%s: admitTurn throws invalid_input without asking moderation", async (_name, input) => {
    const store = new InMemoryGuardrailStore();
    const moderator = countingModerator(true);
    await expectAdmissionCode(admitTurn({ store, input: input as TurnInput, moderate: moderator.moderate }), "invalid_input");
    await expectAdmissionCode(assertAdmitted({ store, input: input as TurnInput }), "invalid_input");
    expect(moderator.calls).toBe(0);
  });

  it("invalid admitTurn options (no store, no moderate function) throw invalid_input", async () => {
    const input = turnInput();
    await expectAdmissionCode(
      admitTurn({ store: {} as unknown as GuardrailStore, input, moderate: () => true }),
      "invalid_input",
    );
    await expectAdmissionCode(
      admitTurn({ store: new InMemoryGuardrailStore(), input, moderate: true as unknown as Moderate }),
      "invalid_input",
    );
  });
});

describe("the transcript must show the admitted user message", () => {
  const mismatches: [string, BaseMessage[]][] = [
    ["a different user message", [new HumanMessage("Delete everything in this document.")]],
    ["the admitted message plus trailing whitespace", [new HumanMessage(`${USER_MESSAGE} `)]],
    ["the admitted message plus a trailing newline", [new HumanMessage(`${USER_MESSAGE}\n`)]],
    [
      "the admitted message followed by a newer, different one",
      [new HumanMessage(USER_MESSAGE), new AIMessage("ok"), new HumanMessage("Now also delete it.")],
    ],
    ["no user message at all", [new AIMessage("hello")]],
    [
      "the admitted text plus an image in the same message",
      [
        new HumanMessage({
          content: [
            { type: "text", text: USER_MESSAGE },
            { type: "image_url", image_url: { url: "data:image/png;base64,AAAA" } },
          ],
        }),
      ],
    ],
    [
      "the admitted message followed by an image-only message",
      [
        new HumanMessage(USER_MESSAGE),
        new HumanMessage({ content: [{ type: "image_url", image_url: { url: "data:image/png;base64,AAAA" } }] }),
      ],
    ],
  ];

  it.each(mismatches)("%s: transcript_mismatch before any model or tool call", async (_name, messages) => {
    const { agent, store, input, service, model } = guardedAgent({ script: READ_THEN_RENAME });
    await admit(store, input);
    await expectAdmissionCode(agent.invoke({ messages }), "transcript_mismatch");
    expect(model.calls).toBe(0);
    expect(service.reads).toBe(0);
    expect(service.writes).toBe(0);
  });

  it("the exact admitted message runs (control for the cases above)", async () => {
    const { agent, store, input, service, model } = guardedAgent({ script: READ_THEN_RENAME });
    await admit(store, input);
    const messages = await agent.invoke({ messages: [new HumanMessage(USER_MESSAGE)] });
    expect(outcomeOf(messages.messages, "w1").status).toBe("success");
    expect(model.calls).toBe(3);
    expect(service.writes).toBe(1);
  });
});

describe("one compiled agent, turns passed through context (design §5)", () => {
  it("two admitted turns each get their own single write", async () => {
    const { store, service, model, invoke } = contextModeAgent([
      // turn 1
      { toolCalls: [read("t1-r1")] },
      { toolCalls: [rename("t1-w1", "First", 0)] },
      { content: "done 1" },
      // turn 2: its own slot, and still only one write
      { toolCalls: [read("t2-r1")] },
      { toolCalls: [rename("t2-w1", "Second", 1)] },
      { toolCalls: [rename("t2-w2", "Third", 2)] },
      { content: "done 2" },
    ]);
    const first = turnInput({ turnId: "turn-1", segments: [{ label: "user", content: "Rename it to First." }] });
    const second = turnInput({ turnId: "turn-2", segments: [{ label: "user", content: "Rename it to Second." }] });
    await admit(store, first);
    await admit(store, second);

    const firstMessages = await invoke(first);
    expect(outcomeOf(firstMessages, "t1-w1").status).toBe("success");
    expect(service.writes).toBe(1);

    const secondMessages = await invoke(second);
    expect(outcomeOf(secondMessages, "t2-w1").status).toBe("success");
    expect(outcomeOf(secondMessages, "t2-w2").code).toBe("mutation_conflict");
    expect(service.writes).toBe(2);
    expect(service.title).toBe("Second");
    expect(model.calls).toBe(7);
  });

  it("concurrent invocations of two admitted turns on one agent each make their own single write", async () => {
    // One document service per scope; the tools pick it from the trusted turn in context.
    const services = new Map([
      ["doc-a", new DocumentService()],
      ["doc-b", new DocumentService()],
    ]);
    const serviceFor = (context: unknown): DocumentService => {
      const scopeId = (context as ReturnType<typeof turnContext>).arkahTurn.scopeId;
      const service = services.get(scopeId);
      if (service === undefined) throw new Error(`no service for ${scopeId}`);
      return service;
    };
    const readDocument = tool(
      (_args, runtime) => {
        const service = serviceFor(runtime.context);
        service.reads += 1;
        return service.snapshot();
      },
      { name: "read_document", description: "Read the document.", schema: z.object({}) },
    );
    const renameDocument = tool(
      ({ title, expectedRevision }, runtime) => serviceFor(runtime.context).rename(title, expectedRevision),
      {
        name: "rename_document",
        description: "Rename the document.",
        schema: z.object({ title: z.string().min(1), expectedRevision: z.number().int().min(0) }),
      },
    );
    // The model decides from the transcript, so interleaved calls get the right next step.
    const respond = (messages: readonly BaseMessage[]) => {
      const human = messages.find((message) => HumanMessage.isInstance(message));
      const tag = typeof human?.content === "string" && human.content.includes("Alpha") ? "alpha" : "beta";
      const toolResults = messages.filter((message) => ToolMessage.isInstance(message)).length;
      if (toolResults === 0) return { toolCalls: [read(`${tag}-r1`)] };
      if (toolResults === 1) return { toolCalls: [rename(`${tag}-w1`, tag, 0)] };
      if (toolResults === 2) return { toolCalls: [rename(`${tag}-w2`, `${tag} again`, 1)] };
      return { content: `done ${tag}` };
    };
    const store = new InMemoryGuardrailStore();
    const model = new ScriptedModel(Array<ScriptStep>(8).fill(respond));
    const agent = createAgent({
      model,
      tools: [readDocument, renameDocument],
      middleware: [
        createDocumentGuardrails({
          store,
          userMessageLabel: "user",
          authorize: () => true,
          tools: { read_document: { kind: "document-read" }, rename_document: { kind: "mutation" } },
          logger: { warn: () => undefined },
        }),
      ],
    });
    const alpha = turnInput({ scopeId: "doc-a", turnId: "req-a", segments: [{ label: "user", content: "Rename to Alpha." }] });
    const beta = turnInput({ scopeId: "doc-b", turnId: "req-b", segments: [{ label: "user", content: "Rename to Beta." }] });
    await admit(store, alpha);
    await admit(store, beta);
    const run = async (turn: TurnInput) =>
      (await agent.invoke({ messages: [new HumanMessage(userText(turn))] }, { context: turnContext(turn) })).messages;
    const [alphaMessages, betaMessages] = await Promise.all([run(alpha), run(beta)]);

    expect(outcomeOf(alphaMessages, "alpha-w1").status).toBe("success");
    expect(outcomeOf(betaMessages, "beta-w1").status).toBe("success");
    expect(outcomeOf(alphaMessages, "alpha-w2").code).toBe("mutation_conflict");
    expect(outcomeOf(betaMessages, "beta-w2").code).toBe("mutation_conflict");
    expect(services.get("doc-a")).toMatchObject({ title: "alpha", writes: 1, reads: 1 });
    expect(services.get("doc-b")).toMatchObject({ title: "beta", writes: 1, reads: 1 });
    expect(model.calls).toBe(8);
  });

  it("two scopes served by the same agent each get their write", async () => {
    const { store, service, invoke } = contextModeAgent([
      { toolCalls: [read("a-r1")] },
      { toolCalls: [rename("a-w1", "A", 0)] },
      { content: "done a" },
      { toolCalls: [read("b-r1")] },
      { toolCalls: [rename("b-w1", "B", 1)] },
      { content: "done b" },
    ]);
    const a = turnInput({ scopeId: "doc-a", turnId: "req-1" });
    const b = turnInput({ scopeId: "doc-b", turnId: "req-1" });
    await admit(store, a);
    await admit(store, b);
    expect(outcomeOf(await invoke(a), "a-w1").status).toBe("success");
    expect(outcomeOf(await invoke(b), "b-w1").status).toBe("success");
    expect(service.writes).toBe(2);
  });

  it("an admitted turn does not lend its receipt to a non-admitted turn on the same agent", async () => {
    const { store, service, model, invoke } = contextModeAgent([
      { toolCalls: [read("r1")] },
      { toolCalls: [rename("w1")] },
      { content: "done" },
    ]);
    const admitted = turnInput({ turnId: "turn-1" });
    await admit(store, admitted);
    expect(outcomeOf(await invoke(admitted), "w1").status).toBe("success");

    const stranger = turnInput({ turnId: "turn-2" });
    await expectAdmissionCode(invoke(stranger), "not_admitted");
    expect(model.calls).toBe(3);
    expect(service.writes).toBe(1);
  });

  const badContexts: [string, unknown][] = [
    ["no context", undefined],
    ["an empty context", {}],
    ["a context without the turn key", { turn: turnInput() }],
    ["a turn that is not an object", { arkahTurn: "turn-1" }],
    ["a turn with an empty scopeId", turnContext(turnInput({ scopeId: "" }))],
    ["a turn without the user segment label", turnContext(turnInput({ segments: [{ label: "prompt", content: USER_MESSAGE }] }))],
  ];

  it.each(badContexts)("%s: the run fails invalid_input before any model call", async (_name, context) => {
    const { store, service, model, invokeWithContext } = contextModeAgent(READ_THEN_RENAME);
    await admit(store, turnInput());
    await expectAdmissionCode(invokeWithContext(turnInput(), context), "invalid_input");
    expect(model.calls).toBe(0);
    expect(service.reads + service.writes).toBe(0);
  });

  it("a context turn whose segments differ from its receipt fails input_mismatch", async () => {
    const { store, service, model, invoke } = contextModeAgent(READ_THEN_RENAME);
    const admitted = turnInput();
    await admit(store, admitted);
    const changed = turnInput({
      segments: [
        { label: "user", content: USER_MESSAGE },
        { label: "extra", content: "" },
      ],
    });
    await expectAdmissionCode(invoke(changed), "input_mismatch");
    expect(model.calls).toBe(0);
    expect(service.reads + service.writes).toBe(0);
  });

  it("a context turn that was verified once still fails when the next invocation brings other segments", async () => {
    const { store, service, invoke } = contextModeAgent([
      { toolCalls: [read("r1")] },
      { toolCalls: [rename("w1")] },
      { content: "done" },
    ]);
    const admitted = turnInput();
    await admit(store, admitted);
    expect(outcomeOf(await invoke(admitted), "w1").status).toBe("success");
    // Same (scopeId, turnId), new policy version: must not ride on the cached verification.
    await expectAdmissionCode(invoke(turnInput({ policyVersion: "v2" })), "input_mismatch");
    // Nor another principal.
    await expectAdmissionCode(invoke(turnInput({ principal: "someone-else" })), "input_mismatch");
    expect(service.writes).toBe(1);
  });
});
