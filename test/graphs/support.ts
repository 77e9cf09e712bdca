/**
 * A hand-built LangGraph graph over the notes service: a model node (the offline `ScriptedModel`,
 * given the twins with `bindTools`) and LangGraph's own `ToolNode` running `guardTools`' twins,
 * compiled with a checkpointer. No `createAgent` anywhere: this is the graph a team writes itself.
 */
import { HumanMessage, type BaseMessage } from "@langchain/core/messages";
import { Annotation, END, MemorySaver, MessagesAnnotation, START, StateGraph, type BaseCheckpointSaver } from "@langchain/langgraph";
import { ToolNode, toolsCondition } from "@langchain/langgraph/prebuilt";
import type { StructuredTool } from "@langchain/core/tools";
import {
  admittedTurn,
  admitTurn,
  guardTools,
  InMemoryGuardrailStore,
  turnContext,
  type GuardrailStore,
  type GuardToolsOptions,
  type TurnInput,
} from "arkah-agent-guardrails";
import { ScriptedModel, type ScriptResponder, type ScriptStep } from "arkah-agent-guardrails/testing";
import { NOTE_POLICIES, noteTools, noteTurn, NotesService, USER, type NoteHooks } from "../security/support.js";

/** The graph state: the messages, and a field anyone writing the input (or a node) may fill. */
export const GraphState = Annotation.Root({
  ...MessagesAnnotation.spec,
  /** Untrusted like all state: what an attacker puts here must never be taken for the turn. */
  arkahTurn: Annotation<unknown>(),
});

export interface NotesGraphOptions {
  readonly script: readonly ScriptStep[] | ScriptResponder;
  readonly store?: GuardrailStore;
  readonly service?: NotesService;
  readonly input?: TurnInput;
  readonly guardrails?: Partial<GuardToolsOptions>;
  readonly checkpointer?: BaseCheckpointSaver;
  /** LangGraph's ToolNode option; default true (errors become error ToolMessages). */
  readonly handleToolErrors?: boolean;
  readonly hooks?: NoteHooks;
  /** More tools beside the notes tools, governed too (their policies in `guardrails.tools`). */
  readonly extraTools?: readonly StructuredTool[];
  /** The model node calls `admittedTurn` (with guardTools' options) before the model. */
  readonly admitInModelNode?: boolean;
}

/** A graph whose tools node runs the governed twins of the notes tools. */
export function notesGraph(options: NotesGraphOptions) {
  const store = options.store ?? new InMemoryGuardrailStore();
  const input = options.input ?? noteTurn();
  const service = options.service ?? new NotesService();
  const warnings: string[] = [];
  const originals = noteTools(service, options.hooks);
  const guardOptions: GuardToolsOptions = {
    store,
    userMessageLabel: "user",
    authorize: () => true,
    tools: NOTE_POLICIES,
    logger: { warn: (message) => warnings.push(message) },
    ...options.guardrails,
  };
  const twins = guardTools([...originals.all, ...(options.extraTools ?? [])], guardOptions);
  const model = new ScriptedModel(options.script);
  const bound = model.bindTools(twins);
  const graph = new StateGraph(GraphState)
    .addNode("agent", async (state, config) => {
      if (options.admitInModelNode === true) await admittedTurn(state, config, guardOptions);
      return { messages: [await bound.invoke(state.messages)] };
    })
    .addNode("tools", new ToolNode(twins, { handleToolErrors: options.handleToolErrors ?? true }))
    .addEdge(START, "agent")
    .addConditionalEdges("agent", toolsCondition, ["tools", END])
    .addEdge("tools", "agent")
    .compile({ checkpointer: options.checkpointer ?? new MemorySaver() });
  const admit = () => admitTurn({ store, input, moderate: () => true });
  /** The turn's first run, on `thread`, with the trusted turn in context. */
  const run = async (thread = "thread-1", extra: { readonly arkahTurn?: unknown } = {}) =>
    graph.invoke({ messages: [new HumanMessage(USER)], ...extra }, { context: turnContext(input), configurable: { thread_id: thread } });
  return { graph, store, input, service, twins, originals, model, warnings, admit, run };
}

/** The tool messages of a run, as `{ name, status, content }`. */
export function toolResults(messages: readonly BaseMessage[]) {
  return messages
    .filter((message) => message.type === "tool")
    .map((message) => ({ name: message.name, status: (message as { status?: string }).status, content: message.text }));
}

/** A responder for a read-then-write turn: read note-7, write it once, then answer. */
export const readThenWrite: ScriptResponder = (messages) => {
  const results = messages.filter((message) => message.type === "tool").length;
  if (results === 0) return { toolCalls: [{ id: "call-read", name: "read_note", args: { noteId: "note-7" } }] };
  if (results === 1) return { toolCalls: [{ id: "call-edit", name: "edit_note", args: { noteId: "note-7", body: "Buy oat milk" } }] };
  return { content: "Done." };
};
