/**
 * The graph LangGraph Server serves (`langgraph.json`'s `notes`): one guarded `createAgent` for
 * every run. No checkpointer (the server brings its own, which `requireApproval` pauses on) and no fixed turn: each run's turn is in
 * its `context`, put there by the server's auth handler (`auth.ts`) after it admitted the turn, so
 * a client never supplies it.
 */
import { createAgent, tool } from "langchain";
import { z } from "zod";
import { createDocumentGuardrails, requireApproval } from "arkah-agent-guardrails";
import { chatModel, SYSTEM_PROMPT } from "../http-service/model.js";
import { notes, store } from "./service.js";

const readNote = tool(({ noteId }) => JSON.stringify({ noteId, body: notes.body(noteId) ?? null }), {
  name: "read_note",
  description: "Read a note's body.",
  schema: z.object({ noteId: z.string() }),
});

const editNote = tool(({ noteId, body }) => notes.write(noteId, body), {
  name: "edit_note",
  description: "Replace a note's body.",
  schema: z.object({ noteId: z.string(), body: z.string() }),
});

export const agent = createAgent({
  model: await chatModel(process.env),
  systemPrompt: SYSTEM_PROMPT,
  tools: [readNote, editNote],
  middleware: [
    createDocumentGuardrails({
      store,
      userMessageLabel: "user",
      // Anyone may read; only a note's owner may change it. The turn's `principal` is who the
      // auth handler authenticated: the client cannot name it.
      authorize: (call, turn) => call.kind === "document-read" || notes.owner(turn.scopeId) === turn.principal,
      tools: {
        read_note: { kind: "document-read", scope: (args) => args.noteId as string },
        edit_note: { kind: "mutation", scope: (args) => args.noteId as string },
      },
      // Clearing a note waits for a person: the run pauses, and a resume run answers it.
      guardrails: [requireApproval({ tools: ["edit_note"], when: (args) => args.body === "" })],
    }),
  ],
});
