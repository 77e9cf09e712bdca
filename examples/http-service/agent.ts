/**
 * The one compiled agent the service runs and the turn service around it: the note tools, the
 * document guardrails on a SQLite guardrail store (which holds the turn records too), and a SQLite
 * LangGraph checkpointer, so a run paused on an approval is on disk and a new server process
 * resumes it.
 */
import { join } from "node:path";
import { SqliteSaver } from "@langchain/langgraph-checkpoint-sqlite";
import type { BaseChatModel } from "@langchain/core/language_models/chat_models";
import { createAgent, tool, type ToolRuntime } from "langchain";
import { z } from "zod";
import {
  createDocumentGuardrails,
  createTurnService,
  mutationKey,
  TURN_CONTEXT_KEY,
  TurnInputSchema,
  type Guardrail,
  type TurnInput,
} from "arkah-agent-guardrails";
import { SqliteGuardrailStore } from "arkah-agent-guardrails/sqlite";
import { chatModel, SYSTEM_PROMPT } from "./model.js";
import { NoteService } from "./notes.js";

/**
 * The turn this tool call belongs to, from the invocation's `context` (a tool's runtime gets the
 * raw context the server passed, `turnContext(turn)`). Validated: the key must come from a real turn.
 */
function turnOf(runtime: ToolRuntime<unknown, Record<string, unknown>>): TurnInput {
  return TurnInputSchema.parse(runtime.context[TURN_CONTEXT_KEY]);
}

function noteTools(notes: NoteService) {
  const readNote = tool(({ noteId }) => JSON.stringify(notes.note(noteId) ?? null), {
    name: "read_note",
    description: "Read a note: its body and revision.",
    schema: z.object({ noteId: z.string() }),
  });
  const editNote = tool(
    (args, runtime: ToolRuntime<unknown, Record<string, unknown>>) => {
      // The claim's key: the turn, this tool, the arguments the body was given (the ones the
      // guardrails checked and claimed) and the call id. The write service dedupes on it.
      const key = mutationKey(turnOf(runtime), { id: runtime.toolCallId, name: "edit_note", args });
      return notes.write({ mutationKey: key, noteId: args.noteId, body: args.body });
    },
    {
      name: "edit_note",
      description: "Replace a note's body. An empty body clears the note, which a person must approve.",
      schema: z.object({ noteId: z.string(), body: z.string() }),
    },
  );
  return [readNote, editNote];
}

/** Clearing a note waits for a person: the run pauses (202) until `POST /approvals/:id`. */
const clearingNeedsApproval: Guardrail = {
  name: "clearing-needs-approval",
  placements: ["tool-args"],
  tools: ["edit_note"],
  deterministic: true,
  check: ({ toolCall }) => {
    const clears = typeof toolCall.args.body === "string" && toolCall.args.body.trim() === "";
    return clears
      ? {
          action: "approve",
          outcome: "complete",
          detections: [{ rule: "clears-note", detected: true }],
          reason: `Clear ${JSON.stringify(toolCall.args.noteId)}?`,
        }
      : { action: "allow", outcome: "complete", detections: [] };
  },
};

/** What a server adds to the files: who may decide anyone's approvals, and a model of its own. */
export interface ServiceOptions {
  /** The approver role: these users may decide any turn's approvals. Default: nobody (a turn's own user always may). */
  readonly approvers?: readonly string[];
  /** Default: `chatModel(env)`, a real provider when its API key is set, else the offline model. */
  readonly model?: BaseChatModel;
}

/** Everything one server process holds open, built on the files in `dataDir`. */
export async function buildService(dataDir: string, env: NodeJS.ProcessEnv, options: ServiceOptions = {}) {
  const notes = NoteService.open(join(dataDir, "notes.sqlite"));
  const store = SqliteGuardrailStore.open({ path: join(dataDir, "guardrails.sqlite") });
  const checkpointer = SqliteSaver.fromConnString(join(dataDir, "checkpoints.sqlite"));
  const guardrails = createDocumentGuardrails({
    store,
    userMessageLabel: "user",
    // Anyone may read; only a note's owner may change it. `principal` is who the server
    // authenticated, bound into the turn's receipt.
    authorize: (call, turn) => call.kind === "document-read" || notes.note(turn.scopeId)?.owner === turn.principal,
    tools: {
      read_note: { kind: "document-read", scope: (args) => args.noteId as string },
      edit_note: {
        kind: "mutation",
        scope: (args) => args.noteId as string,
        // A write left pending (its worker died mid-call) or unknown is settled from the note
        // service's record of its key when the call comes again (a recovered turn), not by an operator.
        confirm: (claim) => {
          const result = claim.kind === "mutation" ? notes.writeOf(claim.mutationKey) : undefined;
          return result === undefined ? { outcome: "no-effect" } : { outcome: "completed", result };
        },
      },
    },
    guardrails: [clearingNeedsApproval],
  });
  const model = options.model ?? (await chatModel(env));
  const agent = createAgent({ model, systemPrompt: SYSTEM_PROMPT, tools: noteTools(notes), checkpointer, middleware: [guardrails] });
  const approvers = new Set(options.approvers ?? []);
  const turns = createTurnService({
    agent,
    store,
    // Stand-in moderation: your provider's verdict on exactly these segments (once per turn).
    moderate: ({ segments }) => !segments.some((segment) => /password/i.test(segment.content)),
    // The turn's own user (its principal), or an approver: anyone else's decision is 403.
    mayDecide: (user, turn) => turn.principal === user || approvers.has(user),
  });
  const close = () => {
    checkpointer.db.close();
    store.close();
    notes.close();
  };
  return { turns, store, notes, model, close };
}

export type Service = Awaited<ReturnType<typeof buildService>>;
