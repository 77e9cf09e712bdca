import { HumanMessage } from "@langchain/core/messages";
import { tool } from "@langchain/core/tools";
import { END, MemorySaver, MessagesAnnotation, START, StateGraph } from "@langchain/langgraph";
import { ToolNode, toolsCondition } from "@langchain/langgraph/prebuilt";
import { z } from "zod";
import { admittedTurn, admitTurn, guardTools, InMemoryGuardrailStore, turnContext, type GuardToolsOptions, type TurnInput } from "arkah-agent-guardrails";
import { ScriptedModel } from "arkah-agent-guardrails/testing";

const notes = new Map([["note-7", { body: "Buy milk", revision: 3 }]]);
const readNote = tool(({ noteId }) => JSON.stringify(notes.get(noteId) ?? null), {
  name: "read_note",
  description: "Read a note.",
  schema: z.object({ noteId: z.string() }),
});
const editNote = tool(
  ({ noteId, body }) => {
    const note = notes.get(noteId);
    if (note === undefined) throw new Error("no such note");
    notes.set(noteId, { body, revision: note.revision + 1 });
    return "Saved";
  },
  { name: "edit_note", description: "Replace a note's body.", schema: z.object({ noteId: z.string(), body: z.string() }) },
);

// Governed twins: same names, descriptions and schemas; createDocumentGuardrails' options.
const store = new InMemoryGuardrailStore();
const options: GuardToolsOptions = {
  store,
  userMessageLabel: "user",
  authorize: (_call, turn) => turn.scopeId === "note-7",
  tools: { read_note: { kind: "document-read" }, edit_note: { kind: "mutation" } },
};
const tools = guardTools([readNote, editNote], options);

// Your own graph: any tool-calling model given the twins, and LangGraph's ToolNode running them.
const model = new ScriptedModel([
  { toolCalls: [{ id: "call-1", name: "read_note", args: { noteId: "note-7" } }] },
  { toolCalls: [{ id: "call-2", name: "edit_note", args: { noteId: "note-7", body: "Buy oat milk" } }] },
  { content: "Done." },
]).bindTools(tools);
const graph = new StateGraph(MessagesAnnotation)
  // The model node is yours: admittedTurn first, so the model never sees a turn nobody admitted.
  .addNode("agent", async (state, config) => {
    await admittedTurn(state, config, options);
    return { messages: [await model.invoke(state.messages)] };
  })
  // handleToolErrors: false lets the guardrails' own errors fail the run, as they do in createAgent.
  .addNode("tools", new ToolNode(tools, { handleToolErrors: false }))
  .addEdge(START, "agent")
  .addConditionalEdges("agent", toolsCondition, ["tools", END])
  .addEdge("tools", "agent")
  .compile({ checkpointer: new MemorySaver() });

// Per request: admit the turn, then pass it in the run's context (never in state).
const userMessage = "Change my note to say oat milk.";
const turn: TurnInput = { scopeId: "note-7", turnId: "req-81f2", policyVersion: "2026-11", segments: [{ label: "user", content: userMessage }] };
await admitTurn({ store, input: turn, moderate: () => true });
const result = await graph.invoke(
  { messages: [new HumanMessage(userMessage)] },
  { context: turnContext(turn), configurable: { thread_id: turn.turnId } },
);
console.log(result.messages.at(-1)?.text, notes.get("note-7")); // Done. { body: 'Buy oat milk', revision: 4 }
