/**
 * Support for the security suite: a notes service whose side effects are counted (every entry
 * into a tool body, every write), its tools, and a real `createAgent` loop guarded by
 * `createDocumentGuardrails` with a scripted model. Attacks are model output and transcript; the
 * assertions are on real side effects and on the store.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { HumanMessage } from "@langchain/core/messages";
import type { ClientTool, ServerTool } from "@langchain/core/tools";
import type { BaseCheckpointSaver } from "@langchain/langgraph";
import { createAgent, tool, type AgentMiddleware } from "langchain";
import { z } from "zod";
import {
  admitTurn,
  createDocumentGuardrails,
  InMemoryGuardrailStore,
  type DocumentGuardrailsOptions,
  type GuardrailStore,
  type ToolPolicy,
  type TurnInput,
} from "arkah-agent-guardrails";
import { SqliteGuardrailStore } from "arkah-agent-guardrails/sqlite";
import { ScriptedModel, type ScriptResponder, type ScriptStep } from "arkah-agent-guardrails/testing";
import { afterAll } from "vitest";

/** Notes by id. `entries` counts entries into a tool body; `writes` lists completed writes. */
export class NotesService {
  readonly notes = new Map<string, { body: string; revision: number }>([
    ["note-7", { body: "Buy milk", revision: 3 }],
    ["note-8", { body: "Private: salary review", revision: 1 }],
  ]);
  readonly entries: string[] = [];
  readonly writes: { noteId: string; body: string }[] = [];
  readonly reads: string[] = [];

  read(noteId: string): string {
    this.reads.push(noteId);
    return JSON.stringify(this.notes.get(noteId) ?? null);
  }

  write(noteId: string, body: string): string {
    const note = this.notes.get(noteId);
    if (note === undefined) throw new Error("no such note");
    this.notes.set(noteId, { body, revision: note.revision + 1 });
    this.writes.push({ noteId, body });
    return "Saved";
  }
}

export interface NoteHooks {
  /** Runs inside the edit body, before the write; may throw. */
  beforeWrite?: (attempt: number) => void | Promise<void>;
}

export function noteTools(service: NotesService, hooks: NoteHooks = {}) {
  const readNote = tool(
    ({ noteId }) => {
      service.entries.push("read_note");
      return service.read(noteId);
    },
    { name: "read_note", description: "Read a note.", schema: z.object({ noteId: z.string() }) },
  );
  let attempts = 0;
  const editNote = tool(
    async ({ noteId, body }) => {
      service.entries.push("edit_note");
      attempts += 1;
      await hooks.beforeWrite?.(attempts);
      return service.write(noteId, body);
    },
    { name: "edit_note", description: "Replace a note's body.", schema: z.object({ noteId: z.string(), body: z.string() }) },
  );
  return { readNote, editNote, all: [readNote, editNote] };
}

export const NOTE_POLICIES: Record<string, ToolPolicy> = {
  read_note: { kind: "document-read" },
  edit_note: { kind: "mutation" },
};

export const USER = "Change my shopping note to oat milk.";

export function noteTurn(overrides: Partial<TurnInput> = {}): TurnInput {
  return {
    scopeId: "note-7",
    turnId: "turn-1",
    policyVersion: "v1",
    segments: [{ label: "user", content: USER }],
    ...overrides,
  };
}

export interface SecureAgentOptions {
  readonly script: readonly ScriptStep[] | ScriptResponder;
  readonly tools?: readonly (ClientTool | ServerTool)[];
  readonly policies?: Record<string, ToolPolicy>;
  readonly service?: NotesService;
  readonly store?: GuardrailStore;
  readonly input?: TurnInput;
  readonly guardrails?: Partial<DocumentGuardrailsOptions>;
  /** Placed before the guardrails (outer layers). */
  readonly outer?: readonly AgentMiddleware[];
  /** Placed after the guardrails (inner layers). */
  readonly inner?: readonly AgentMiddleware[];
  readonly checkpointer?: BaseCheckpointSaver;
  readonly hooks?: NoteHooks;
}

/** A real agent over the notes service; the turn is admitted by `run`. */
export function secureAgent(options: SecureAgentOptions) {
  const store = options.store ?? new InMemoryGuardrailStore();
  const input = options.input ?? noteTurn();
  const service = options.service ?? new NotesService();
  const warnings: { message: string; fields: Readonly<Record<string, unknown>> }[] = [];
  const guardrails = createDocumentGuardrails({
    input,
    store,
    userMessageLabel: "user",
    authorize: () => true,
    tools: options.policies ?? NOTE_POLICIES,
    logger: { warn: (message, fields) => warnings.push({ message, fields }) },
    ...options.guardrails,
  });
  const agent = createAgent({
    model: new ScriptedModel(options.script),
    tools: [...(options.tools ?? noteTools(service, options.hooks).all)],
    middleware: [...(options.outer ?? []), guardrails, ...(options.inner ?? [])],
    ...(options.checkpointer === undefined ? {} : { checkpointer: options.checkpointer }),
  });
  const run = async (config: Parameters<typeof agent.invoke>[1] = {}) => {
    await admitTurn({ store, input, moderate: () => true });
    return (await agent.invoke({ messages: [new HumanMessage(USER)] }, config)).messages;
  };
  return { agent, store, input, service, warnings, run };
}

export { rejection } from "../support/fixtures.js";

/**
 * The in-memory store and a SQLite store in a fresh directory per call (removed after the file's
 * tests), by name: the two stores a security test runs its attack on.
 */
export function memoryAndSqliteStores(prefix: string): readonly (readonly [string, () => GuardrailStore])[] {
  const dirs: string[] = [];
  afterAll(() => {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });
  return [
    ["memory", () => new InMemoryGuardrailStore()],
    [
      "SQLite",
      () => {
        const dir = mkdtempSync(join(tmpdir(), prefix));
        dirs.push(dir);
        return SqliteGuardrailStore.open({ path: join(dir, "guardrails.db") });
      },
    ],
  ];
}
