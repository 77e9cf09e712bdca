/**
 * Workers for the outage tests (test/stores/postgres-outages.test.ts): several workers in this
 * process, each with its own store (its own pool), run guarded read-then-write turns through the
 * real `createAgent` while a test breaks the database under them. A turn that fails is retried with
 * the same turn id, as a client would, until it ends. Every write that runs is counted per turn;
 * every failure is kept, to check that it is typed and says what happened.
 *
 * The model answers from the transcript (read, then write, then text), not from a script, so a run
 * that fails half-way does not shift the next turn's answers.
 */
import { HumanMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import { createAgent, tool } from "langchain";
import { z } from "zod";
import { createDocumentGuardrails, turnContext, type GuardrailStore, type TurnInput } from "arkah-agent-guardrails";
import { ScriptedModel, type ScriptReply } from "arkah-agent-guardrails/testing";
import { admit, outcomeOf, read, rename, TOOL_POLICIES, turnInput, userText } from "./fixtures.js";

export const WRITE_CALL_ID = "write-1";
export const WRITE_RESULT = JSON.stringify({ title: "Field notes", revision: 1 });

/** Read first, then write, then answer: decided from the tool results since the user's message. */
function respond(messages: readonly BaseMessage[]): ScriptReply {
  const start = messages.findLastIndex((message) => HumanMessage.isInstance(message));
  const results = messages.slice(start + 1).filter((message) => ToolMessage.isInstance(message));
  if (results.length === 0) return { toolCalls: [read("read-1")] };
  if (!results.some((message) => message.tool_call_id === WRITE_CALL_ID)) return { toolCalls: [rename(WRITE_CALL_ID)] };
  return { content: "Renamed." };
}

/** How one attempt at a turn ended. */
export type Attempt =
  | { readonly type: "executed" | "replayed" }
  | { readonly type: "refused"; readonly code: string }
  | { readonly type: "failed"; readonly error: unknown };

export interface TurnRecord {
  readonly turnId: string;
  readonly scopeId: string;
  readonly attempts: Attempt[];
}

/** Writes that ran, per turn id, across every worker: the side effect the tests count. */
export class WriteLedger {
  readonly #writes = new Map<string, number>();

  record(turnId: string): void {
    this.#writes.set(turnId, (this.#writes.get(turnId) ?? 0) + 1);
  }

  of(turnId: string): number {
    return this.#writes.get(turnId) ?? 0;
  }

  get total(): number {
    let total = 0;
    for (const count of this.#writes.values()) total += count;
    return total;
  }
}

/** One worker: one compiled agent over its own store, running turns one after another. */
export class OutageWorker {
  readonly #store: GuardrailStore;
  readonly #ledger: WriteLedger;
  readonly #agent;
  #current: { turnId: string; ran: boolean } | undefined;

  constructor(store: GuardrailStore, ledger: WriteLedger) {
    this.#store = store;
    this.#ledger = ledger;
    const readDocument = tool(() => JSON.stringify({ title: "Untitled", revision: 0 }), {
      name: "read_document",
      description: "Read the document.",
      schema: z.object({}),
    });
    const renameDocument = tool(
      () => {
        const current = this.#current;
        if (current === undefined) throw new Error("no turn is running");
        current.ran = true;
        this.#ledger.record(current.turnId);
        return WRITE_RESULT;
      },
      {
        name: "rename_document",
        description: "Rename the document.",
        schema: z.object({ title: z.string().min(1), expectedRevision: z.number().int().min(0) }),
      },
    );
    this.#agent = createAgent({
      model: new ScriptedModel(respond),
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

  /** One attempt at a turn: admit it, run it; a failure is returned, not thrown. */
  async attempt(input: TurnInput): Promise<Attempt> {
    const current = { turnId: input.turnId, ran: false };
    this.#current = current;
    try {
      await admit(this.#store, input);
      const result = await this.#agent.invoke({ messages: [new HumanMessage(userText(input))] }, { context: turnContext(input) });
      const outcome = outcomeOf(result.messages, WRITE_CALL_ID);
      if (current.ran) return { type: "executed" };
      return outcome.code === undefined ? { type: "replayed" } : { type: "refused", code: outcome.code };
    } catch (error) {
      return { type: "failed", error };
    } finally {
      this.#current = undefined;
    }
  }
}

export interface RunOptions {
  /** Turns each worker runs at least. */
  readonly minTurns: number;
  /** Workers keep starting turns until this resolves (and they ran `minTurns`). */
  readonly until: Promise<void>;
  /** Called after every attempt, e.g. to start the outage once some turns ran. */
  readonly onAttempt?: (attempt: Attempt) => void;
  /** A pause between failed attempts of one turn, so a server that is down is not hammered. */
  readonly retryPauseMs?: number;
  /** Attempts a turn gets once `until` resolved, before the test gives up on it. */
  readonly attemptsAfterOutage?: number;
}

/**
 * Runs every worker until `until` resolves; each turn is retried (same turn id) until an attempt
 * does not fail. Returns every turn with its attempts.
 */
export async function runWorkers(workers: readonly OutageWorker[], prefix: string, options: RunOptions): Promise<TurnRecord[]> {
  let over = false;
  void options.until.then(() => {
    over = true;
  });
  const turns: TurnRecord[] = [];
  await Promise.all(
    workers.map(async (worker, index) => {
      for (let n = 0; n < options.minTurns || !over; n++) {
        const turnId = `${prefix}-w${String(index)}-t${String(n)}`;
        // A scope per turn: one turn's closed claim never decides another's outcome.
        const input = turnInput({ scopeId: `doc-${turnId}`, turnId });
        const record: TurnRecord = { turnId: input.turnId, scopeId: input.scopeId, attempts: [] };
        turns.push(record);
        let afterOutage = 0;
        for (;;) {
          const attempt = await worker.attempt(input);
          record.attempts.push(attempt);
          options.onAttempt?.(attempt);
          if (attempt.type !== "failed") break;
          if (over && ++afterOutage >= (options.attemptsAfterOutage ?? 5)) break;
          await new Promise((resolve) => setTimeout(resolve, options.retryPauseMs ?? 20));
        }
      }
    }),
  );
  return turns;
}

/** The failed attempts of every turn. */
export function failures(turns: readonly TurnRecord[]): unknown[] {
  return turns.flatMap((turn) => turn.attempts.flatMap((attempt) => (attempt.type === "failed" ? [attempt.error] : [])));
}

/** The last attempt of a turn. */
export function finalAttempt(turn: TurnRecord): Attempt {
  const last = turn.attempts.at(-1);
  if (last === undefined) throw new Error(`turn ${turn.turnId} has no attempt`);
  return last;
}
