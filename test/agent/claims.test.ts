/**
 * Step 7d of the decision (design §3) through the real `createAgent` loop: the atomic claim of the
 * turn's one mutation slot. A completed call is replayed from the store, never executed again; any
 * other call of the turn is a conflict; a claim still running elsewhere is pending; and `authorize`
 * is asked before a replay reveals anything.
 *
 * Each "invocation" below is a fresh agent and middleware over the same store and document
 * service, as a transport retry or a second worker would be. Every assertion is on a real side
 * effect (`service.writes`, `service.title`) or on the ToolMessage the model receives.
 */
import { HumanMessage, ToolMessage } from "@langchain/core/messages";
import { Command, interrupt, MemorySaver } from "@langchain/langgraph";
import { createAgent, createMiddleware, tool } from "langchain";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import {
  createDocumentGuardrails,
  InMemoryGuardrailStore,
  type Authorize,
  type TurnInput,
} from "arkah-agent-guardrails";
import { ScriptedModel, type ScriptedToolCall } from "arkah-agent-guardrails/testing";
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
  type ToolHooks,
} from "../support/fixtures.js";

const RENAMED = '{"title":"Field notes","revision":1}';

// ---------------------------------------------------------------------------------------------
// Local helpers

/** A promise with its resolver, to hold a tool at a point the test controls. */
function gate() {
  let open: () => void = () => undefined;
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { opened, open };
}

interface Shared {
  store: InMemoryGuardrailStore;
  service: DocumentService;
  input: TurnInput;
}

async function sharedTurn(): Promise<Shared> {
  const shared = { store: new InMemoryGuardrailStore(), service: new DocumentService(), input: turnInput() };
  await admit(shared.store, shared.input);
  return shared;
}

/** One invocation of the shared turn: read under `readId`, then propose `mutation`. */
async function attempt(
  shared: Shared,
  readId: string,
  mutation: ScriptedToolCall,
  options: { authorize?: Authorize; hooks?: ToolHooks } = {},
) {
  const { agent } = guardedAgent({
    ...shared,
    script: [{ toolCalls: [read(readId)] }, { toolCalls: [mutation] }, { content: "done" }],
    ...(options.hooks === undefined ? {} : { hooks: options.hooks }),
    ...(options.authorize === undefined ? {} : { guardrails: { authorize: options.authorize } }),
  });
  return invokeTurn(agent, shared.input);
}

// ---------------------------------------------------------------------------------------------

describe("a completed mutation is replayed, never executed again", () => {
  it("returns the stored result for a transport retry of the same call, although its expectedRevision is now stale", async () => {
    const shared = await sharedTurn();
    const first = await attempt(shared, "r1", rename("w1", "Field notes", 0));
    const original = outcomeOf(first, "w1");
    expect(original).toMatchObject({ status: "success", content: RENAMED });
    expect(shared.service.writes).toBe(1);

    const retry = await attempt(shared, "r2", rename("w1", "Field notes", 0));

    // The retry's read shows revision 1: executing expectedRevision 0 again would throw.
    expect(outcomeOf(retry, "r2").content).toBe(RENAMED);
    const replayed = outcomeOf(retry, "w1");
    expect(replayed.status).toBe("success");
    expect(replayed.content).toBe(original.content);
    expect(shared.service.writes).toBe(1);
    expect(shared.service.revision).toBe(1);
  });
});

describe("a resume that re-runs a completed mutation", () => {
  it.each(["v1", "v2"] as const)(
    "(%s) replays it when a sibling call of its step interrupted the run",
    async (version) => {
      const shared = await sharedTurn();
      // The sibling asks the user only once the mutation's result has been returned (and so
      // settled): under v1 the resume re-runs the whole tool step, the completed mutation included.
      let mutationReturned: () => void = () => undefined;
      const returned = new Promise<void>((resolve) => {
        mutationReturned = resolve;
      });
      const observer = createMiddleware({
        name: "MutationObserver",
        wrapToolCall: async (request, handler) => {
          const result = await handler(request);
          if (ToolMessage.isInstance(result) && result.tool_call_id === "w1") mutationReturned();
          return result;
        },
      });
      const askUser = tool(
        async () => {
          await returned;
          const answer: unknown = interrupt({ question: "Keep short titles from now on?" });
          return `noted: ${String(answer)}`;
        },
        { name: "ask_user", description: "Ask the user something.", schema: z.object({}) },
      );
      const { readDocument, renameDocument } = documentTools(shared.service);
      const agent = createAgent({
        model: new ScriptedModel([
          { toolCalls: [read("r1")] },
          { toolCalls: [rename("w1"), { id: "q1", name: "ask_user", args: {} }] },
          { content: "done" },
        ]),
        tools: [readDocument, renameDocument, askUser],
        middleware: [
          observer,
          createDocumentGuardrails({
            input: shared.input,
            store: shared.store,
            userMessageLabel: "user",
            authorize: () => true,
            tools: { ...TOOL_POLICIES, ask_user: { kind: "auxiliary" } },
            logger: { warn: () => undefined },
          }),
        ],
        checkpointer: new MemorySaver(),
        version,
      });
      const config = { configurable: { thread_id: `thread-resume-${version}` } };

      const paused = await agent.invoke({ messages: [new HumanMessage(USER_MESSAGE)] }, config);
      expect(paused.__interrupt__).toHaveLength(1);
      expect(shared.service.writes).toBe(1);

      const resumed = await agent.invoke(new Command({ resume: "yes" }), config);

      expect(outcomeOf(resumed.messages, "q1")).toMatchObject({ status: "success", content: "noted: yes" });
      expect(outcomeOf(resumed.messages, "w1")).toMatchObject({ status: "success", content: RENAMED });
      expect(shared.service.writes).toBe(1);
    },
  );
});

describe("any other call of the turn is a conflict (mutation_conflict)", () => {
  it("refuses the same call id with changed arguments, and a new call id with the same arguments", async () => {
    const shared = await sharedTurn();
    await attempt(shared, "r1", rename("w1", "Field notes", 0));
    expect(shared.service.writes).toBe(1);

    // Same id, changed arguments, valid against the current revision: only the claim stops it.
    const changedArgs = await attempt(shared, "r2", rename("w1", "Other title", 1));
    expect(outcomeOf(changedArgs, "w1")).toMatchObject({ status: "error", code: "mutation_conflict" });
    expect(shared.service.writes).toBe(1);

    // A new id with the first call's arguments is another call, not a retry.
    const newId = await attempt(shared, "r3", rename("w9", "Field notes", 0));
    expect(outcomeOf(newId, "w9")).toMatchObject({ status: "error", code: "mutation_conflict" });
    expect(shared.service.writes).toBe(1);
    expect(shared.service.title).toBe("Field notes");
  });
});

describe("a claim still running elsewhere is pending (mutation_pending)", () => {
  it("refuses the same call from a concurrent invocation of the turn, then replays once the first settles", async () => {
    const shared = await sharedTurn();
    const writeStarted = gate();
    const releaseWrite = gate();

    // Invocation A claims the slot, then its write blocks until released.
    const runA = attempt(shared, "r1", rename("w1"), {
      hooks: {
        beforeWrite: async () => {
          writeStarted.open();
          await releaseWrite.opened;
        },
      },
    });
    await writeStarted.opened;

    // Invocation B runs the same turn and the same scripted call meanwhile.
    const runB = await attempt(shared, "r2", rename("w1"));
    expect(outcomeOf(runB, "w1")).toMatchObject({ status: "error", code: "mutation_pending" });
    expect(shared.service.writes).toBe(0);

    releaseWrite.open();
    const messagesA = await runA;
    expect(outcomeOf(messagesA, "w1")).toMatchObject({ status: "success", content: RENAMED });
    expect(shared.service.writes).toBe(1);

    // A later retry replays A's stored result.
    const retry = await attempt(shared, "r3", rename("w1"));
    expect(outcomeOf(retry, "w1")).toMatchObject({ status: "success", content: RENAMED });
    expect(shared.service.writes).toBe(1);
  });
});

describe("one winner across concurrent invocations", () => {
  it("lets exactly one of two racing invocations with different call ids write; the other is mutation_conflict", async () => {
    const shared = await sharedTurn();

    const [a, b] = await Promise.all([
      attempt(shared, "ra", rename("wa", "Field notes", 0)),
      attempt(shared, "rb", rename("wb", "Field notes", 0)),
    ]);

    const outcomes = [outcomeOf(a, "wa"), outcomeOf(b, "wb")];
    const winners = outcomes.filter((outcome) => outcome.status === "success");
    const losers = outcomes.filter((outcome) => outcome.status === "error");
    expect(winners).toHaveLength(1);
    expect(winners[0]?.content).toBe(RENAMED);
    expect(losers.map((outcome) => outcome.code)).toEqual(["mutation_conflict"]);
    expect(shared.service.writes).toBe(1);
  });
});

describe("authorize is asked for replays too", () => {
  it("refuses a replay that authorize rejects, without revealing the stored result", async () => {
    const shared = await sharedTurn();
    await attempt(shared, "r1", rename("w1"));
    expect(shared.service.writes).toBe(1);

    const denied = await attempt(shared, "r2", rename("w1"), {
      authorize: (call) => call.kind !== "mutation",
    });
    const refusal = outcomeOf(denied, "w1");
    expect(refusal).toMatchObject({ status: "error", code: "unauthorized" });
    expect(refusal.content).not.toContain("Field notes");
    expect(refusal.content).not.toContain("revision");
    expect(shared.service.writes).toBe(1);

    // Control: authorized, the same retry is a replay of that result.
    const allowed = await attempt(shared, "r3", rename("w1"));
    expect(outcomeOf(allowed, "w1")).toMatchObject({ status: "success", content: RENAMED });
    expect(shared.service.writes).toBe(1);
  });
});
