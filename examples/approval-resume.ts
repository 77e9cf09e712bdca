import { HumanMessage } from "@langchain/core/messages";
import { Command, MemorySaver } from "@langchain/langgraph";
import { createAgent, tool } from "langchain";
import { z } from "zod";
import {
  admitTurn,
  createDocumentGuardrails,
  InMemoryGuardrailStore,
  requireApproval,
  turnContext,
  type ApprovalRequest,
  type TurnInput,
} from "arkah-agent-guardrails";
import { ScriptedModel } from "arkah-agent-guardrails/testing";

const notes = new Map([["note-7", "Buy milk"]]);
const readNote = tool(({ noteId }) => notes.get(noteId) ?? "", {
  name: "read_note",
  description: "Read a note.",
  schema: z.object({ noteId: z.string() }),
});
const editNote = tool(
  ({ noteId, body }) => {
    notes.set(noteId, body);
    return "Saved";
  },
  { name: "edit_note", description: "Replace a note's body.", schema: z.object({ noteId: z.string(), body: z.string() }) },
);

// One agent for the whole server: the turn comes from `context`, on every invoke.
const store = new InMemoryGuardrailStore();
const agent = createAgent({
  model: new ScriptedModel([
    { toolCalls: [{ id: "call-1", name: "read_note", args: { noteId: "note-7" } }] },
    { toolCalls: [{ id: "call-2", name: "edit_note", args: { noteId: "note-7", body: "Buy oat milk" } }] },
    { content: "Done." },
  ]),
  tools: [readNote, editNote],
  // A paused run lives in the checkpointer: use a durable one in production.
  checkpointer: new MemorySaver(),
  middleware: [
    createDocumentGuardrails({
      store,
      userMessageLabel: "user",
      authorize: () => true,
      tools: {
        read_note: { kind: "document-read", scope: (args) => args.noteId as string },
        edit_note: { kind: "mutation", scope: (args) => args.noteId as string },
      },
      guardrails: [requireApproval({ tools: ["edit_note"] })],
    }),
  ],
});

const userMessage = "Change my note to say oat milk.";
const turn: TurnInput = {
  scopeId: "note-7",
  turnId: "req-81f2",
  policyVersion: "2026-11",
  segments: [{ label: "user", content: userMessage }],
};
await admitTurn({ store, input: turn, moderate: () => true });

// The thread and the turn, together: the resume needs both again.
const config = { configurable: { thread_id: "req-81f2" }, context: turnContext(turn) };

const paused = await agent.invoke({ messages: [new HumanMessage(userMessage)] }, config);
const request = paused.__interrupt__?.[0]?.value as ApprovalRequest;
console.log(`waiting for approval: ${request.tool} ${JSON.stringify(request.args)}`);

// Later (another HTTP request, another process): same thread_id, same `context`.
const resumed = await agent.invoke(
  new Command({ resume: { decision: "approve", approvalId: request.approvalId } }),
  config,
);
console.log(resumed.messages.at(-1)?.text, notes.get("note-7"));
