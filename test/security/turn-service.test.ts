/**
 * Attack class: the glue around the agent (issue 21). The HTTP example this service replaces let
 * any user decide another user's approval and shared idempotency keys across users. Through the
 * turn service and the real loop: only the turn's principal decides, a reused turn id for another
 * principal (or other input) is refused and learns nothing of the first turn's outcome, and a
 * retried request never asks a person again. An idempotency key is the whole request: the same
 * user's key for another scope (note) is refused and runs nothing (issue 36). A turn that no digest
 * can take (a lone surrogate in any field) is the caller's invalid input, not a crash.
 */
import { interrupt, MemorySaver } from "@langchain/langgraph";
import { createAgent, humanInTheLoopMiddleware, tool } from "langchain";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import {
  AdmissionError,
  admitTurn,
  createDocumentGuardrails,
  createTurnService,
  InMemoryGuardrailStore,
  turnKey,
  TurnServiceError,
  type GuardrailStore,
  type TurnInput,
} from "arkah-agent-guardrails";
import { ScriptedModel, type ScriptStep } from "arkah-agent-guardrails/testing";
import { rejection } from "../support/fixtures.js";
import { NOTE_POLICIES, NotesService } from "./support.js";
import { serviceHarness, turnOf, turnTools } from "../turns/support.js";

/** A service over an agent in LangChain's approval format with the notes tools and `ask_user`, which raises the interrupt it is told to. */
function langchainFormatService(store: GuardrailStore, script: readonly ScriptStep[], options: { readonly hitlOn?: string } = {}) {
  const notes = new NotesService();
  const askUser = tool(
    ({ approvalId }) => {
      notes.entries.push("ask_user");
      // A HITL-shaped question naming whatever request the model said: not one this turn's guardrails asked.
      const answer: unknown = interrupt({
        actionRequests: [{ name: "edit_note", args: { noteId: "note-7", body: "Buy oat milk" } }],
        reviewConfigs: [{ actionName: "edit_note", allowedDecisions: ["approve", "reject"] }],
        approvalId,
      });
      return typeof answer === "string" ? answer : "answered";
    },
    { name: "ask_user", description: "Ask the user.", schema: z.object({ approvalId: z.string() }) },
  );
  const guardrails = createDocumentGuardrails({
    store,
    userMessageLabel: "user",
    authorize: () => true,
    tools: { ...NOTE_POLICIES, ask_user: { kind: "auxiliary" } },
    approvalFormat: "langchain",
  });
  const model = new ScriptedModel(script);
  const tools = [...turnTools(notes), askUser];
  const checkpointer = new MemorySaver();
  const agent =
    options.hitlOn === undefined
      ? createAgent({ model, tools, middleware: [guardrails], checkpointer })
      : createAgent({ model, tools, middleware: [humanInTheLoopMiddleware({ interruptOn: { [options.hitlOn]: true } }), guardrails], checkpointer });
  return { service: createTurnService({ agent, store, moderate: () => true, allowInMemoryCheckpointer: true }), notes };
}

/** A lone UTF-16 surrogate: no digest takes it. */
const LONE = "\uD800";

/** The turn with a lone surrogate in one field that its keys or digests are computed from. */
const SURROGATE_TURNS: readonly (readonly [string, TurnInput])[] = [
  ["scopeId", turnOf({ scopeId: `note-7${LONE}` })],
  ["turnId", turnOf({ turnId: `req-0001${LONE}` })],
  ["policyVersion", turnOf({ policyVersion: `v1${LONE}` })],
  ["principal", turnOf({ principal: `alice${LONE}` })],
  ["a segment's label", turnOf({ segments: [{ label: "user", content: "Hi" }, { label: `ctx${LONE}`, content: "x" }] })],
  ["a segment's content", turnOf({ segments: [{ label: "user", content: `Change my note${LONE}` }] })],
];

/** The turn key, when its two fields are well-formed text. */
function keyOf(turn: TurnInput): string | undefined {
  try {
    return turnKey(turn);
  } catch {
    return undefined;
  }
}

describe("turn service: who may decide, and whose key it is", () => {
  it("another user cannot decide a user's approval: forbidden, nothing recorded, nothing written", async () => {
    const store = new InMemoryGuardrailStore();
    const { service, notes, model } = serviceHarness({ store, approvals: true });
    const paused = await service.submit({ turn: turnOf() });
    if (paused.status !== "awaiting_approval") throw new Error(`expected a pause, got ${paused.status}`);
    const approvalId = paused.approvals[0]?.approvalId ?? "";
    const calls = model.calls;
    for (const decision of [{ decision: "approve" }, { decision: "edit", args: { noteId: "note-7", body: "" } }] as const) {
      expect(await service.decide({ approvalId, principal: "mallory", decision })).toEqual({ status: "forbidden" });
    }
    expect((await store.getApproval(approvalId))?.status).toBe("pending");
    expect(model.calls).toBe(calls);
    expect(notes.writes).toEqual([]);
  });

  it("a turn without a principal is decided by nobody unless mayDecide says so", async () => {
    const { principal: _none, ...anonymous } = turnOf();
    const { service, notes } = serviceHarness({ store: new InMemoryGuardrailStore(), approvals: true });
    const paused = await service.submit({ turn: anonymous });
    if (paused.status !== "awaiting_approval") throw new Error(`expected a pause, got ${paused.status}`);
    const approvalId = paused.approvals[0]?.approvalId ?? "";
    expect(await service.decide({ approvalId, principal: "alice", decision: { decision: "approve" } })).toEqual({ status: "forbidden" });
    expect(notes.writes).toEqual([]);
  });

  it("another user reusing a turn id is refused input_mismatch and gets nothing of the first turn's outcome", async () => {
    const { service, notes, model } = serviceHarness({ store: new InMemoryGuardrailStore() });
    const first = await service.submit({ turn: turnOf() });
    expect(first.status).toBe("completed");
    const calls = model.calls;
    const answer = await service.submit({ turn: turnOf({ principal: "mallory" }) });
    expect(answer).toEqual({ status: "refused", code: "input_mismatch", turnKey: turnKey(turnOf()), replayed: false });
    expect(JSON.stringify(answer)).not.toContain("Done");
    expect(model.calls).toBe(calls);
    expect(notes.writes).toHaveLength(1);
  });

  it("the same user's idempotency key for another note is refused input_mismatch: nothing runs, no second write, nothing stored", async () => {
    const store = new InMemoryGuardrailStore();
    const { service, notes, model, moderations } = serviceHarness({ store });
    expect((await service.submit({ turn: turnOf() })).status).toBe("completed");
    const [calls, moderated] = [model.calls, moderations()];
    for (const other of [turnOf({ scopeId: "note-8" }), turnOf({ scopeId: "note-8", segments: [{ label: "user", content: "Clear note-8." }] })]) {
      expect(await service.submit({ turn: other })).toEqual({ status: "refused", code: "input_mismatch", turnKey: turnKey(other), replayed: false });
      expect(await service.get(turnKey(other))).toEqual({ status: "not_found" });
      expect(await store.getReceipt(turnKey(other))).toBeUndefined();
    }
    expect(model.calls).toBe(calls);
    expect(moderations()).toBe(moderated);
    expect(notes.writes).toHaveLength(1);
    // The key still answers its own request, replayed.
    expect(await service.submit({ turn: turnOf() })).toMatchObject({ status: "completed", replayed: true });
  });

  it.each(SURROGATE_TURNS)(
    "a lone surrogate in the turn's %s is TurnServiceError invalid_input: nothing stored, nobody moderates, nothing runs",
    async (_field, turn) => {
      const store = new InMemoryGuardrailStore();
      const { service, notes, model, moderations } = serviceHarness({ store });
      const error = await rejection(service.submit({ turn }));
      expect(TurnServiceError.isInstance(error) && error.code).toBe("invalid_input");
      expect(moderations()).toBe(0);
      expect(model.calls).toBe(0);
      expect(notes.entries).toEqual([]);
      expect(await store.readAudit()).toEqual([]);
      const key = keyOf(turn);
      if (key !== undefined) {
        expect(await service.get(key)).toEqual({ status: "not_found" });
        expect(await store.getReceipt(key)).toBeUndefined();
      }
    },
  );

  it.each(SURROGATE_TURNS)("admitTurn of a turn with a lone surrogate in its %s is AdmissionError invalid_input: nobody moderates, no receipt", async (_field, turn) => {
    const store = new InMemoryGuardrailStore();
    let moderated = 0;
    const error = await rejection(admitTurn({ store, input: turn, moderate: () => (moderated += 1) > 0 }));
    expect(AdmissionError.isInstance(error) && error.code).toBe("invalid_input");
    expect(moderated).toBe(0);
    const key = keyOf(turn);
    if (key !== undefined) expect(await store.getReceipt(key)).toBeUndefined();
  });

  it("a retried request of a paused turn asks nobody again: one approval request, no model call", async () => {
    const store = new InMemoryGuardrailStore();
    const { service, model } = serviceHarness({ store, approvals: true });
    await service.submit({ turn: turnOf() });
    const calls = model.calls;
    for (let retry = 0; retry < 3; retry++) expect(await service.submit({ turn: turnOf() })).toMatchObject({ status: "awaiting_approval", replayed: true });
    expect(model.calls).toBe(calls);
    expect(await store.listApprovals()).toHaveLength(1);
  });

  it("a LangChain-format pause is answered only with its own turn's request: an interrupt naming another user's request lists nothing of it", async () => {
    const store = new InMemoryGuardrailStore();
    const alice = serviceHarness({ store, approvals: true, approvalFormat: "langchain" });
    const paused = await alice.service.submit({ turn: turnOf() });
    if (paused.status !== "awaiting_approval") throw new Error(`expected a pause, got ${paused.status}`);
    const approvalId = paused.approvals[0]?.approvalId ?? "";

    // Mallory's turn: the model has a tool raise a HITL-shaped interrupt naming alice's request.
    const mallory = langchainFormatService(store, [{ toolCalls: [{ id: "a1", name: "ask_user", args: { approvalId } }] }]);
    const turn = turnOf({ turnId: "req-0002", principal: "mallory", scopeId: "note-8" });
    const answer = await mallory.service.submit({ turn });
    expect(answer).toEqual({ status: "failed", code: "unsupported_interrupt", turnKey: turnKey(turn), replayed: false });
    expect(JSON.stringify(answer)).not.toContain(approvalId);
    expect(await mallory.service.get(turnKey(turn))).toMatchObject({ status: "found", state: "failed" });
    // Alice's request is untouched, mallory cannot decide it, and alice's decision runs her write once.
    expect(await mallory.service.decide({ approvalId, principal: "mallory", decision: { decision: "approve" } })).toEqual({ status: "forbidden" });
    expect((await store.getApproval(approvalId))?.status).toBe("pending");
    expect(await alice.service.decide({ approvalId, principal: "alice", decision: { decision: "approve" } })).toMatchObject({ status: "completed" });
    expect(alice.notes.writes).toHaveLength(1);
    expect(mallory.notes.writes).toEqual([]);
  });

  it("LangChain's own humanInTheLoopMiddleware interrupt is not taken for a guardrail request: unsupported_interrupt, nothing written", async () => {
    const store = new InMemoryGuardrailStore();
    const { service, notes } = langchainFormatService(
      store,
      [
        { toolCalls: [{ id: "r1", name: "read_note", args: { noteId: "note-7" } }] },
        { toolCalls: [{ id: "w1", name: "edit_note", args: { noteId: "note-7", body: "Buy oat milk" } }] },
      ],
      { hitlOn: "edit_note" },
    );
    expect(await service.submit({ turn: turnOf() })).toEqual({ status: "failed", code: "unsupported_interrupt", turnKey: turnKey(turnOf()), replayed: false });
    expect(await store.listApprovals()).toEqual([]);
    expect(notes.writes).toEqual([]);
  });
});
