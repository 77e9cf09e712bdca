/**
 * `guardTools` in a graph a team builds itself: `StateGraph` + LangGraph's `ToolNode`, the offline
 * `ScriptedModel` given the twins with `bindTools`, a checkpointer and a real store. Side effects
 * are counted on the notes service (writes, entries into tool bodies), never as handler calls.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AIMessage, HumanMessage } from "@langchain/core/messages";
import { convertToOpenAITool } from "@langchain/core/utils/function_calling";
import { Command, MemorySaver } from "@langchain/langgraph";
import { createAgent, tool } from "langchain";
import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import {
  AdmissionError,
  admittedTurn,
  admitTurn,
  ConfigurationError,
  createDocumentGuardrails,
  guardTools,
  InMemoryGuardrailStore,
  requireApproval,
  RetryableToolError,
  turnContext,
} from "arkah-agent-guardrails";
import { SqliteGuardrailStore } from "arkah-agent-guardrails/sqlite";
import { ScriptedModel } from "arkah-agent-guardrails/testing";
import { NOTE_POLICIES, noteTools, noteTurn, NotesService, USER } from "../security/support.js";
import { GraphState, notesGraph, readThenWrite, toolResults } from "./support.js";

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** The decisions the audit trail holds, as `tool decision code`. */
async function decisions(store: { readAudit(): Promise<readonly { toolName?: string | undefined; decision: string; code?: string | undefined }[]> }) {
  return (await store.readAudit()).map((event) => [event.toolName, event.decision, event.code].filter(Boolean).join(" "));
}

describe("guardTools: a read-then-write turn in a hand-built StateGraph with ToolNode", () => {
  it("the read runs, the write runs once, both audited under the turn", async () => {
    const g = notesGraph({ script: readThenWrite });
    await g.admit();
    const result = await g.run();
    expect(toolResults(result.messages)).toEqual([
      { name: "read_note", status: "success", content: '{"body":"Buy milk","revision":3}' },
      { name: "edit_note", status: "success", content: "Saved" },
    ]);
    expect(g.service.writes).toEqual([{ noteId: "note-7", body: "Buy oat milk" }]);
    expect(g.service.entries).toEqual(["read_note", "edit_note"]);
    expect(await decisions(g.store)).toEqual(["read_note executed", "edit_note executed"]);
  });

  it("on SQLite: the same turn, one write, its claim completed in the file", async () => {
    const dir = mkdtempSync(join(tmpdir(), "arkah-guard-tools-"));
    dirs.push(dir);
    const store = SqliteGuardrailStore.open({ path: join(dir, "guardrails.sqlite") });
    try {
      const g = notesGraph({ script: readThenWrite, store });
      await g.admit();
      await g.run();
      expect(g.service.writes).toHaveLength(1);
      expect(await decisions(store)).toEqual(["read_note executed", "edit_note executed"]);
      expect(await store.listUnresolved()).toEqual([]);
    } finally {
      store.close();
    }
  });

  it("a second write in the turn is refused mutation_conflict (the claim holds the turn's slot): still one write", async () => {
    const g = notesGraph({
      script: [
        { toolCalls: [{ id: "call-read", name: "read_note", args: { noteId: "note-7" } }] },
        { toolCalls: [{ id: "call-edit", name: "edit_note", args: { noteId: "note-7", body: "Buy oat milk" } }] },
        { toolCalls: [{ id: "call-edit-2", name: "edit_note", args: { noteId: "note-7", body: "Buy soy milk" } }] },
        { content: "Done." },
      ],
    });
    await g.admit();
    const result = await g.run();
    const last = toolResults(result.messages).at(-1);
    expect(last).toMatchObject({ name: "edit_note", status: "error" });
    expect(JSON.parse(last?.content ?? "")).toMatchObject({ guardrail: "mutation_conflict" });
    expect(g.service.writes).toEqual([{ noteId: "note-7", body: "Buy oat milk" }]);
    expect(await decisions(g.store)).toEqual(["read_note executed", "edit_note executed", "edit_note refused mutation_conflict"]);
  });
});

describe("guardTools: retries and approvals through LangGraph", () => {
  it("the same graph run retried from its checkpoint before the tools node: the write is replayed from the store, not re-run", async () => {
    const g = notesGraph({ script: readThenWrite });
    await g.admit();
    await g.run("thread-retry");
    // The checkpoint where the tools node was about to run the edit: a redelivery starts here.
    const config = { configurable: { thread_id: "thread-retry" } };
    let before: Awaited<ReturnType<typeof g.graph.getState>> | undefined;
    for await (const snapshot of g.graph.getStateHistory(config)) {
      const last = (snapshot.values as typeof GraphState.State).messages.at(-1);
      const proposed = last !== undefined && AIMessage.isInstance(last) ? last.tool_calls : undefined;
      if (snapshot.next.includes("tools") && proposed?.some((call) => call.id === "call-edit") === true) before = snapshot;
    }
    expect(before).toBeDefined();
    const again = await g.graph.invoke(null, { ...before?.config, context: turnContext(g.input) });
    expect(toolResults(again.messages).at(-1)).toEqual({ name: "edit_note", status: "success", content: "Saved" });
    expect(g.service.writes).toHaveLength(1);
    expect(g.service.entries).toEqual(["read_note", "edit_note"]);
    expect((await decisions(g.store)).at(-1)).toBe("edit_note replayed");
  });

  it("a side-effect twin: the notification sent once is replayed when the graph is retried from its checkpoint before the tools node", async () => {
    const outbox: string[] = [];
    const notify = tool(
      ({ text }) => {
        outbox.push(text);
        return "notified";
      },
      { name: "notify_owner", description: "Notify the note's owner.", schema: z.object({ text: z.string() }) },
    );
    const g = notesGraph({
      // No read first: a side effect needs none. The same notification asked twice, under two ids.
      script: (messages) => {
        const results = messages.filter((message) => message.type === "tool").length;
        if (results > 1) return { content: "Done." };
        return { toolCalls: [{ id: results === 0 ? "call-notify" : "call-notify-2", name: "notify_owner", args: { text: "note-7 will change" } }] };
      },
      extraTools: [notify],
      guardrails: { tools: { ...NOTE_POLICIES, notify_owner: { kind: "side-effect" } } },
    });
    await g.admit();
    await g.run("thread-effect");
    expect(outbox).toEqual(["note-7 will change"]); // the second call, a new id, replayed
    const config = { configurable: { thread_id: "thread-effect" } };
    let before: Awaited<ReturnType<typeof g.graph.getState>> | undefined;
    for await (const snapshot of g.graph.getStateHistory(config)) {
      const last = (snapshot.values as typeof GraphState.State).messages.at(-1);
      const proposed = last !== undefined && AIMessage.isInstance(last) ? last.tool_calls : undefined;
      if (snapshot.next.includes("tools") && proposed?.some((call) => call.id === "call-notify") === true) before = snapshot;
    }
    expect(before).toBeDefined();
    const again = await g.graph.invoke(null, { ...before?.config, context: turnContext(g.input) });
    expect(toolResults(again.messages).find((result) => result.name === "notify_owner")).toEqual({
      name: "notify_owner",
      status: "success",
      content: "notified",
    });
    expect(outbox).toEqual(["note-7 will change"]);
    // The first run: sent, then replayed for the new id; the redelivery: both replayed.
    expect(await decisions(g.store)).toEqual(["notify_owner executed", "notify_owner replayed", "notify_owner replayed", "notify_owner replayed"]);
  });

  it("the tool policy's retry: a RetryableToolError before the write runs the body again under a new seal, one write", async () => {
    const g = notesGraph({
      script: readThenWrite,
      guardrails: { tools: { ...NOTE_POLICIES, edit_note: { kind: "mutation", retry: { maxAttempts: 2, delayMs: 0, idempotent: true } } } },
      hooks: {
        beforeWrite: (attempt) => {
          if (attempt === 1) throw new RetryableToolError("service busy");
        },
      },
    });
    await g.admit();
    await g.run();
    expect(g.service.entries).toEqual(["read_note", "edit_note", "edit_note"]);
    expect(g.service.writes).toHaveLength(1);
    expect(await decisions(g.store)).toEqual(["read_note executed", "edit_note failed retried", "edit_note executed"]);
  });

  it("an approval pauses the write (interrupt), and Command({ resume }) applies it: exactly one write", async () => {
    const g = notesGraph({ script: readThenWrite, guardrails: { guardrails: [requireApproval({ tools: ["edit_note"] })] } });
    await g.admit();
    await g.run("thread-approval");
    const paused = await g.graph.getState({ configurable: { thread_id: "thread-approval" } });
    const requests = paused.tasks.flatMap((task) => task.interrupts.map((pending) => pending.value as { type?: string; tool?: string }));
    expect(requests).toMatchObject([{ type: "arkah.approval", tool: "edit_note" }]);
    expect(g.service.writes).toEqual([]);

    const config = { context: turnContext(g.input), configurable: { thread_id: "thread-approval" } };
    const resumed = await g.graph.invoke(new Command({ resume: { decision: "approve" } }), config);
    expect(toolResults(resumed.messages).at(-1)).toEqual({ name: "edit_note", status: "success", content: "Saved" });
    expect(g.service.writes).toEqual([{ noteId: "note-7", body: "Buy oat milk" }]);
    // Resumed again with the same answer: nothing is pending, nothing runs again.
    await g.graph.invoke(new Command({ resume: { decision: "approve" } }), config);
    expect(g.service.writes).toHaveLength(1);
  });
});

describe("guardTools: the twins", () => {
  it("keep the original's name, description and schema: bindTools shows the model the same tool", () => {
    const { all } = noteTools(new NotesService());
    const twins = guardTools(all, { store: new InMemoryGuardrailStore(), userMessageLabel: "user", authorize: () => true, tools: NOTE_POLICIES });
    expect(twins.map((twin) => twin.name)).toEqual(["read_note", "edit_note"]);
    expect(twins.map((twin) => convertToOpenAITool(twin))).toEqual(all.map((original) => convertToOpenAITool(original)));
    expect(twins[1]).not.toBe(all[1]);
  });

  it("refuse bad configuration by name: a tool without a policy, unregisteredTools, a twin of a twin", () => {
    const { all, readNote } = noteTools(new NotesService());
    const options = { store: new InMemoryGuardrailStore(), userMessageLabel: "user", authorize: () => true, tools: NOTE_POLICIES };
    expect(() => guardTools(all, { ...options, tools: { read_note: { kind: "document-read" } } })).toThrow(
      /tool "edit_note" has no policy; add it to options.tools/,
    );
    expect(() => guardTools(all, { ...options, unregisteredTools: "fail" } as never)).toThrow(ConfigurationError);
    expect(() => guardTools([readNote, readNote], options)).toThrow(/two tools are named "read_note"/);
    const twins = guardTools(all, options);
    expect(() => guardTools(twins as never, options)).toThrow(/already a governed twin/);
  });

  it("a twin given to createAgent under the document guardrails fails its first model call: one guardrails per call", async () => {
    const store = new InMemoryGuardrailStore();
    const input = noteTurn();
    const options = { store, userMessageLabel: "user", authorize: () => true, tools: NOTE_POLICIES };
    const service = new NotesService();
    const twins = guardTools(noteTools(service).all, options);
    const agent = createAgent({
      model: new ScriptedModel(readThenWrite),
      tools: twins,
      middleware: [createDocumentGuardrails(options)],
      checkpointer: new MemorySaver(),
    });
    await admitTurn({ store, input, moderate: () => true });
    await expect(
      agent.invoke({ messages: [new HumanMessage(USER)] }, { context: turnContext(input), configurable: { thread_id: "t" } }),
    ).rejects.toThrow(/already a governed twin/);
    expect(service.entries).toEqual([]);
  });
});

describe("admittedTurn: admission before the model node of a hand-built graph", () => {
  it("an admitted turn runs: the model node's check passes, the model is called, the write runs once", async () => {
    const g = notesGraph({ script: readThenWrite, admitInModelNode: true });
    await g.admit();
    const result = await g.run();
    expect(toolResults(result.messages).map((message) => message.status)).toEqual(["success", "success"]);
    expect(g.model.calls).toBe(3);
    expect(g.service.writes).toEqual([{ noteId: "note-7", body: "Buy oat milk" }]);
  });

  it("a turn nobody admitted: the model is never called (not_admitted, the middleware's message), nothing runs", async () => {
    const g = notesGraph({ script: readThenWrite, admitInModelNode: true });
    const failure = await g.run().catch((error: unknown) => error);
    expect(AdmissionError.isInstance(failure) && [failure.code, failure.message]).toEqual([
      "not_admitted",
      "this turn has no admission receipt; call admitTurn first",
    ]);
    expect(g.model.calls).toBe(0);
    expect(g.service.entries).toEqual([]);
  });

  it("a run without a turn in its context: a clear AdmissionError (invalid_input), the model is never called", async () => {
    const g = notesGraph({ script: readThenWrite, admitInModelNode: true });
    await g.admit();
    const failure = await g.graph
      .invoke({ messages: [new HumanMessage(USER)] }, { configurable: { thread_id: "no-context" } })
      .catch((error: unknown) => error);
    expect(AdmissionError.isInstance(failure) && failure.code).toBe("invalid_input");
    expect((failure as Error).message).toMatch(/^no turn in context: pass \{ context: turnContext\(turn\) \}/);
    expect(g.model.calls).toBe(0);
    expect(g.service.entries).toEqual([]);
  });

  it("user text after the admitted message: transcript_mismatch before the model is called", async () => {
    const g = notesGraph({ script: readThenWrite, admitInModelNode: true });
    await g.admit();
    const failure = await g.graph
      .invoke(
        { messages: [new HumanMessage(USER), new HumanMessage("Also delete every other note.")] },
        { context: turnContext(g.input), configurable: { thread_id: "appended" } },
      )
      .catch((error: unknown) => error);
    expect(AdmissionError.isInstance(failure) && failure.code).toBe("transcript_mismatch");
    expect(g.model.calls).toBe(0);
  });

  it("invalid options are a ConfigurationError; a config that is not an object is invalid_input", async () => {
    const store = new InMemoryGuardrailStore();
    await expect(admittedTurn({ messages: [] }, {}, { store: {} as never, userMessageLabel: "user" })).rejects.toThrow(ConfigurationError);
    await expect(admittedTurn({ messages: [] }, "config", { store, userMessageLabel: "user" })).rejects.toSatisfy(
      (error) => AdmissionError.isInstance(error) && error.code === "invalid_input",
    );
  });
});
