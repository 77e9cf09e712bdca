/**
 * The turn service over a real `createAgent` loop: the notes service (counted tool entries and
 * writes), a responder `ScriptedModel` that plans from the transcript (read, then edit, then
 * answer; counted calls), the document guardrails reading the turn from `context`, and a
 * checkpointer. Stores: memory, SQLite and PostgreSQL, each with a clock the test moves.
 */
import { ToolMessage, type BaseMessage } from "@langchain/core/messages";
import { MemorySaver, type BaseCheckpointSaver } from "@langchain/langgraph";
import { createAgent, tool } from "langchain";
import { z } from "zod";
import {
  createDocumentGuardrails,
  createTurnService,
  requireApproval,
  type GuardrailLogger,
  type GuardrailStore,
  type GuardrailTelemetry,
  type ToolPolicy,
  type TurnInput,
  type TurnServiceOptions,
} from "arkah-agent-guardrails";
import { ScriptedModel, type ScriptReply, type ScriptResponder } from "arkah-agent-guardrails/testing";
import { NOTE_POLICIES, NotesService, USER } from "../security/support.js";

/** Runs inside a tool body before its effect (or, `afterWrite`, after the write, before the body returns); may block or throw. */
export interface TurnHooks {
  readonly beforeRead?: () => void | Promise<void>;
  readonly beforeWrite?: () => void | Promise<void>;
  readonly afterWrite?: () => void | Promise<void>;
}

/** The notes tools; `notes.entries` counts every entry into a body, `notes.writes` every write. */
export function turnTools(notes: NotesService, hooks: TurnHooks = {}) {
  const readNote = tool(
    async ({ noteId }) => {
      notes.entries.push("read_note");
      await hooks.beforeRead?.();
      return notes.read(noteId);
    },
    { name: "read_note", description: "Read a note.", schema: z.object({ noteId: z.string() }) },
  );
  const editNote = tool(
    async ({ noteId, body }) => {
      notes.entries.push("edit_note");
      await hooks.beforeWrite?.();
      const result = notes.write(noteId, body);
      await hooks.afterWrite?.();
      return result;
    },
    { name: "edit_note", description: "Replace a note's body.", schema: z.object({ noteId: z.string(), body: z.string() }) },
  );
  return [readNote, editNote];
}

/** A clock only the test moves. */
export class TestClock {
  ms = Date.UTC(2031, 1, 3, 4, 5, 6, 789);
  readonly now = (): Date => new Date(this.ms);
  advance(ms: number): void {
    this.ms += ms;
  }
}

export const NEW_BODY = "Buy oat milk";

/** Reads the note, then edits it, then answers: planned from the transcript, so any worker continues where the checkpoint is. */
export function noteResponder(body = NEW_BODY) {
  return (messages: readonly BaseMessage[]): ScriptReply => {
    const done = new Set(messages.filter((message) => ToolMessage.isInstance(message)).map((message) => message.name));
    if (!done.has("read_note")) return { toolCalls: [{ id: "r1", name: "read_note", args: { noteId: "note-7" } }] };
    if (!done.has("edit_note")) return { toolCalls: [{ id: "w1", name: "edit_note", args: { noteId: "note-7", body } }] };
    return { content: "Done: the note says oat milk now." };
  };
}

/** Reads, then writes, then its next model step fails (a `RangeError`): the turn fails after its write completed. */
export function failsAfterWrite(): ScriptResponder {
  return (messages) => {
    const done = new Set(messages.filter((message) => ToolMessage.isInstance(message)).map((message) => message.name));
    if (!done.has("read_note")) return { toolCalls: [{ id: "r1", name: "read_note", args: { noteId: "note-7" } }] };
    if (!done.has("edit_note")) return { toolCalls: [{ id: "w1", name: "edit_note", args: { noteId: "note-7", body: NEW_BODY } }] };
    throw new RangeError("the model provider failed");
  };
}

export function turnOf(overrides: Partial<TurnInput> = {}): TurnInput {
  return {
    scopeId: "note-7",
    turnId: "req-0001",
    policyVersion: "v1",
    principal: "alice",
    segments: [{ label: "user", content: USER }],
    ...overrides,
  };
}

export interface ServiceHarnessOptions {
  readonly store: GuardrailStore;
  /** The store the agent's guardrails use; default `store` (a fault-injecting view for the service alone). */
  readonly agentStore?: GuardrailStore;
  readonly approvals?: boolean;
  /** The tools `requireApproval` asks about when `approvals` is on; default `["edit_note"]`. */
  readonly approvalTools?: readonly string[];
  /** The guardrails' approval format; default theirs (`"arkah"`). */
  readonly approvalFormat?: "arkah" | "langchain";
  /** The model's responder; default `noteResponder()`. */
  readonly responder?: ScriptResponder;
  readonly hooks?: TurnHooks;
  /** The guardrails' tool policies; default `NOTE_POLICIES`. */
  readonly policies?: Readonly<Record<string, ToolPolicy>>;
  /** The guardrails' logger (a `confirm` that failed warns there); default theirs. */
  readonly guardrailLogger?: GuardrailLogger;
  readonly checkpointer?: BaseCheckpointSaver;
  readonly notes?: NotesService;
  /** Given to the guardrails and the service alike. */
  readonly telemetry?: GuardrailTelemetry;
  readonly service?: Partial<Omit<TurnServiceOptions, "agent" | "store">>;
}

/** One worker: its model, agent and service; notes and checkpointer may be shared between workers. */
export function serviceHarness(options: ServiceHarnessOptions) {
  const notes = options.notes ?? new NotesService();
  const model = new ScriptedModel(options.responder ?? noteResponder());
  let moderations = 0;
  const guardrails = createDocumentGuardrails({
    store: options.agentStore ?? options.store,
    userMessageLabel: "user",
    authorize: () => true,
    tools: options.policies ?? NOTE_POLICIES,
    ...(options.approvals === true ? { guardrails: [requireApproval({ tools: [...(options.approvalTools ?? ["edit_note"])] })] } : {}),
    ...(options.approvalFormat === undefined ? {} : { approvalFormat: options.approvalFormat }),
    ...(options.telemetry === undefined ? {} : { telemetry: options.telemetry }),
    ...(options.guardrailLogger === undefined ? {} : { logger: options.guardrailLogger }),
  });
  const agent = createAgent({
    model,
    tools: turnTools(notes, options.hooks),
    middleware: [guardrails],
    checkpointer: options.checkpointer ?? new MemorySaver(),
  });
  const service = createTurnService({
    agent,
    store: options.store,
    moderate: ({ segments }) => {
      moderations += 1;
      return !segments.some((segment) => /password/i.test(segment.content));
    },
    ...(options.telemetry === undefined ? {} : { telemetry: options.telemetry }),
    // The default checkpointer here is a MemorySaver shared between the test's workers.
    allowInMemoryCheckpointer: true,
    ...options.service,
  });
  return { service, model, notes, agent, moderations: () => moderations };
}
