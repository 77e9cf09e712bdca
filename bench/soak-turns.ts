/**
 * The soak's turns (bench/soak.ts): one server-wide `createDocumentGuardrails` and one
 * `createAgent` over a store, whose offline `ScriptedModel` answers every turn from its transcript
 * (read, rename, answer). A turn is `admitTurn` then `agent.invoke` with the turn in `context`; its
 * latency is both. Every write tool run is counted per turn id where it runs.
 */
import { HumanMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import { createAgent, tool } from "langchain";
import { z } from "zod";
import { admitTurn, createDocumentGuardrails, turnContext, type GuardrailStore, type TurnInput } from "arkah-agent-guardrails";
import { ScriptedModel, type ScriptReply } from "arkah-agent-guardrails/testing";
import { INVOKE_CONFIG, USER_MESSAGE } from "./agent.js";

const READ_ID = "read-1";
const WRITE_ID = "rename-1";

function respond(messages: readonly BaseMessage[]): ScriptReply {
  const results = messages.filter(ToolMessage.isInstance).length;
  if (results === 0) return { toolCalls: [{ id: READ_ID, name: "read_document", args: {} }] };
  if (results === 1) return { toolCalls: [{ id: WRITE_ID, name: "rename_document", args: { title: "Field notes" } }] };
  return { content: "Renamed." };
}

/** How a turn's write ended: run here, replayed from the store, or refused (the code). */
export type WriteOutcome = "executed" | "replayed" | `refused:${string}`;

export function soakInput(turnId: string, scopeId: string): TurnInput {
  return { scopeId, turnId, policyVersion: "soak-1", segments: [{ label: "user", content: USER_MESSAGE }] };
}

/** The same agent without the guardrails: the baseline of the memory soak's heap growth. */
export function plainAgent() {
  const readDocument = tool(() => JSON.stringify({ title: "Untitled", revision: 0 }), {
    name: "read_document",
    description: "Read the document.",
    schema: z.object({}),
  });
  const renameDocument = tool(({ title }) => JSON.stringify({ title, revision: 1 }), {
    name: "rename_document",
    description: "Rename the document.",
    schema: z.object({ title: z.string().min(1) }),
  });
  const agent = createAgent({ model: new ScriptedModel(respond), tools: [readDocument, renameDocument] });
  return { turn: () => agent.invoke({ messages: [new HumanMessage(USER_MESSAGE)] }, INVOKE_CONFIG) };
}

export class SoakAgent {
  /** Writes that ran here, per turn id. */
  readonly writes = new Map<string, number>();
  readonly #store: GuardrailStore;
  readonly #agent;
  #running: string | undefined;

  constructor(store: GuardrailStore) {
    this.#store = store;
    const readDocument = tool(() => JSON.stringify({ title: "Untitled", revision: 0 }), {
      name: "read_document",
      description: "Read the document.",
      schema: z.object({}),
    });
    const renameDocument = tool(
      ({ title }) => {
        const turnId = this.#running;
        if (turnId === undefined) throw new Error("soak: a write outside a turn");
        this.writes.set(turnId, (this.writes.get(turnId) ?? 0) + 1);
        return JSON.stringify({ title, revision: 1 });
      },
      { name: "rename_document", description: "Rename the document.", schema: z.object({ title: z.string().min(1) }) },
    );
    this.#agent = createAgent({
      model: new ScriptedModel(respond),
      tools: [readDocument, renameDocument],
      middleware: [
        createDocumentGuardrails({
          store,
          userMessageLabel: "user",
          authorize: () => true,
          tools: { read_document: { kind: "document-read" }, rename_document: { kind: "mutation" } },
        }),
      ],
    });
  }

  /** Admits and runs one turn (one at a time per agent: the write is attributed to `#running`). */
  async turn(input: TurnInput): Promise<WriteOutcome> {
    const before = this.writes.get(input.turnId) ?? 0;
    this.#running = input.turnId;
    try {
      await admitTurn({ store: this.#store, input, moderate: () => true });
      const result = await this.#agent.invoke({ messages: [new HumanMessage(USER_MESSAGE)] }, { ...INVOKE_CONFIG, context: turnContext(input) });
      const write = result.messages.filter(ToolMessage.isInstance).find((message) => message.tool_call_id === WRITE_ID);
      if (write === undefined) throw new Error(`soak: turn ${input.turnId} made no write call`);
      if ((this.writes.get(input.turnId) ?? 0) > before) return "executed";
      if (write.status !== "error") return "replayed";
      const parsed = JSON.parse(typeof write.content === "string" ? write.content : "{}") as { guardrail?: unknown };
      return `refused:${typeof parsed.guardrail === "string" ? parsed.guardrail : "error"}`;
    } finally {
      this.#running = undefined;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// What bench/soak.ts and its worker processes (bench/soak-worker.ts) say to each other

export type SoakCommand =
  | {
      readonly type: "run";
      readonly kind: "sqlite" | "postgres";
      /** The SQLite file, or the PostgreSQL URL. */
      readonly target: string;
      readonly schema: string;
      readonly worker: number;
      readonly turns: number;
    }
  | { readonly type: "replay"; readonly turnIds: readonly string[] }
  | { readonly type: "exit" };

export type SoakReport =
  | {
      readonly type: "ran";
      /** Per turn, admitTurn + invoke, in milliseconds. */
      readonly latenciesMs: number[];
      readonly outcomes: Record<string, number>;
      readonly errors: number;
      readonly errorSamples: string[];
      /** Turn ids whose write ran here, with how many times. */
      readonly writes: [string, number][];
      readonly elapsedMs: number;
    }
  | { readonly type: "replayed"; readonly outcomes: Record<string, number>; readonly writes: number; readonly errors: number }
  | { readonly type: "failed"; readonly message: string };

export const soakTurnId = (worker: number, n: number) => `soak-w${String(worker)}-t${String(n)}`;
