/**
 * Shared by the process workers: guarded turns through the real `createAgent`, one compiled agent
 * per process with the server-wide middleware (each turn passed through `context`), as a server
 * would run it. The scripted model reads, then renames, then answers; the call ids are the same in
 * every process, so every process claims the same mutation for a turn. The write's side effect is
 * recorded durably by the caller's hook, outside the store.
 */
import { appendFileSync } from "node:fs";
import { HumanMessage } from "@langchain/core/messages";
import { createAgent, tool } from "langchain";
import { z } from "zod";
import { createDocumentGuardrails, turnContext, type GuardrailStore, type TurnInput } from "arkah-agent-guardrails";
import { ScriptedModel, type ScriptStep } from "arkah-agent-guardrails/testing";
import { admit, outcomeOf, read, rename, TOOL_POLICIES, turnInput, userText } from "../../support/fixtures.js";

/** What one process saw for the turn's mutation call. */
export interface MutationOutcome {
  readonly turnId: string;
  /** `executed`: this process ran the write; `replayed`: a stored result came back without running. */
  readonly kind: "executed" | "replayed" | "refused";
  /** The refusal code when refused. */
  readonly code: string | undefined;
  readonly status: "success" | "error";
  readonly content: string;
}

/** One line of the side-effect log: a write that ran. */
export interface EffectLine {
  readonly turnId: string;
  readonly worker: string;
  readonly pid: number;
}

export const WRITE_CALL_ID = "write-1";
export const WRITE_ARGS = { title: "Field notes", expectedRevision: 0 } as const;
export const WRITE_RESULT = JSON.stringify({ title: "Field notes", revision: 1 });
export const SCOPE_ID = "doc-processes";

export function processTurn(turnId: string, scopeId: string = SCOPE_ID): TurnInput {
  return turnInput({ scopeId, turnId });
}

/** Appends one line per executed write: `appendFileSync` is on the kernel's page cache before it returns. */
export function recordEffect(effectsFile: string, line: EffectLine): void {
  appendFileSync(effectsFile, `${JSON.stringify(line)}\n`);
}

/** Runs up to `turns` turns, one after another, through one agent. */
export class TurnRunner {
  readonly #store: GuardrailStore;
  readonly #agent;
  #current: { turnId: string; ran: boolean; beforeWrite: (turnId: string) => Promise<void> | void } | undefined;

  constructor(store: GuardrailStore, turns: number) {
    this.#store = store;
    // Every turn makes exactly three model calls (read, write, answer), whatever the guard decides.
    const script: ScriptStep[] = [];
    for (let turn = 0; turn < turns; turn++) {
      script.push({ toolCalls: [read("read-1")] }, { toolCalls: [rename(WRITE_CALL_ID)] }, { content: "Renamed." });
    }
    const readDocument = tool(() => JSON.stringify({ title: "Untitled", revision: 0 }), {
      name: "read_document",
      description: "Read the document.",
      schema: z.object({}),
    });
    const renameDocument = tool(
      async () => {
        const current = this.#current;
        if (current === undefined) throw new Error("no turn is running");
        current.ran = true;
        await current.beforeWrite(current.turnId);
        return WRITE_RESULT;
      },
      {
        name: "rename_document",
        description: "Rename the document.",
        schema: z.object({ title: z.string().min(1), expectedRevision: z.number().int().min(0) }),
      },
    );
    this.#agent = createAgent({
      model: new ScriptedModel(script),
      tools: [readDocument, renameDocument],
      middleware: [
        createDocumentGuardrails({
          store,
          userMessageLabel: "user",
          authorize: () => true,
          tools: TOOL_POLICIES,
          logger: { warn: () => undefined },
        }),
      ],
    });
  }

  /** Admits and runs one turn; `beforeWrite` runs inside the write tool, after the claim. */
  async run(
    turnId: string,
    beforeWrite: (turnId: string) => Promise<void> | void,
    scopeId: string = SCOPE_ID,
  ): Promise<MutationOutcome> {
    const input = processTurn(turnId, scopeId);
    await admit(this.#store, input);
    const current = { turnId, ran: false, beforeWrite };
    this.#current = current;
    try {
      const result = await this.#agent.invoke(
        { messages: [new HumanMessage(userText(input))] },
        { context: turnContext(input) },
      );
      const outcome = outcomeOf(result.messages, WRITE_CALL_ID);
      return {
        turnId,
        kind: current.ran ? "executed" : outcome.code === undefined ? "replayed" : "refused",
        code: outcome.code,
        status: outcome.status,
        content: outcome.content,
      };
    } finally {
      this.#current = undefined;
    }
  }
}
