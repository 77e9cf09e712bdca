import { HumanMessage } from "@langchain/core/messages";
import { createAgent, tool } from "langchain";
import { z } from "zod";
import {
  admitTurn,
  createDocumentGuardrails,
  InMemoryGuardrailStore,
  turnContext,
  type TurnInput,
} from "arkah-agent-guardrails";
import { ScriptedModel } from "arkah-agent-guardrails/testing";

// Your document service. The guardrails sit between the model and these calls.
const notes = new Map([["note-7", { body: "Buy milk", revision: 3 }]]);
const userMayEdit = new Set(["note-7"]);

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

// Once per server: a durable store (use the SQLite or PostgreSQL store in production),
// and one agent whose middleware gets each turn through `context`.
const store = new InMemoryGuardrailStore();
const agent = createAgent({
  // Any tool-calling chat model; this one answers from a script, offline.
  model: new ScriptedModel([
    { toolCalls: [{ id: "call-1", name: "read_note", args: { noteId: "note-7" } }] },
    { toolCalls: [{ id: "call-2", name: "edit_note", args: { noteId: "note-7", body: "Buy oat milk" } }] },
    { content: "Done: the note now says “Buy oat milk”." },
  ]),
  tools: [readNote, editNote],
  middleware: [
    createDocumentGuardrails({
      store,
      userMessageLabel: "user",
      // Your authorization check, asked for every call: only literally `true` allows it.
      authorize: (_call, turn) => userMayEdit.has(turn.scopeId),
      // `scope` names the note a call touches (from its parsed arguments): a call outside the
      // turn's note is refused `out_of_scope`, and a read of another note is no evidence.
      tools: {
        read_note: { kind: "document-read", scope: (args) => args.noteId as string },
        edit_note: { kind: "mutation", scope: (args) => args.noteId as string },
      },
    }),
  ],
});

// Per user request: a server-issued turn id (keep it across transport retries),
// admitted once by your moderation provider.
const userMessage = "Change my note to say oat milk.";
const turn: TurnInput = {
  scopeId: "note-7",
  turnId: "req-81f2",
  policyVersion: "2026-11",
  segments: [{ label: "user", content: userMessage }],
};
const receipt = await admitTurn({ store, input: turn, moderate: () => true });
if (!receipt.allowed) throw new Error("refused by moderation");

const result = await agent.invoke({ messages: [new HumanMessage(userMessage)] }, { context: turnContext(turn) });
console.log(result.messages.at(-1)?.text); // Done: the note now says “Buy oat milk”.
console.log(notes.get("note-7")); // { body: 'Buy oat milk', revision: 4 }
