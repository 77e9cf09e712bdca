/**
 * One process of the cross-process approval flow, for test/processes/approval-across-processes.test.ts:
 * a guarded agent built from scratch on a durable guardrail store and a durable LangGraph
 * checkpointer (SQLite files, or PostgreSQL schemas), as a server would build it after a restart.
 *
 *   node --import tsx approval-agent.ts '<ApprovalAgentSpec as JSON>'
 *
 * Phases:
 * - `pause`: admit the turn and run it; the model reads, then asks to rename, and `requireApproval`
 *   pauses the run. Reports `{ type: "paused", interrupts, outcomes }`.
 * - `resume`: resume the thread with `new Command({ resume: spec.resume })`. Reports
 *   `{ type: "resumed", outcomes, answer }`.
 *
 * The rename tool's body appends one line to the effects file each time it runs: the durable count
 * of real executions, whatever process ran it.
 */
import { AIMessage, HumanMessage, type BaseMessage } from "@langchain/core/messages";
import { Command, type BaseCheckpointSaver } from "@langchain/langgraph";
import { PostgresSaver } from "@langchain/langgraph-checkpoint-postgres";
import { SqliteSaver } from "@langchain/langgraph-checkpoint-sqlite";
import { createAgent, tool } from "langchain";
import { z } from "zod";
import { createDocumentGuardrails, requireApproval, type GuardrailStore } from "arkah-agent-guardrails";
import { PostgresGuardrailStore } from "arkah-agent-guardrails/postgres";
import { SqliteGuardrailStore } from "arkah-agent-guardrails/sqlite";
import { ScriptedModel, type ScriptStep } from "arkah-agent-guardrails/testing";
import { admit, read, rename, TOOL_POLICIES, toolOutcomes, userText, type ToolOutcome } from "../../support/fixtures.js";
import { processTurn, recordEffect, WRITE_CALL_ID, WRITE_RESULT } from "./guarded-turn.js";

export type Durable =
  | { readonly kind: "sqlite"; readonly path: string }
  | { readonly kind: "postgres"; readonly url: string; readonly schema: string };

export interface ApprovalAgentSpec {
  readonly phase: "pause" | "resume";
  /** The guardrail store. */
  readonly store: Durable;
  /** The LangGraph checkpointer. */
  readonly checkpoints: Durable;
  readonly effectsFile: string;
  readonly turnId: string;
  /** With `resume`: the value passed to `new Command({ resume })`. */
  readonly resume?: unknown;
}

export interface PausedInterrupt {
  readonly id: string | undefined;
  readonly value: { readonly approvalId: string; readonly tool: string; readonly args: Record<string, unknown>; readonly reason?: string };
}

export type ApprovalAgentReport =
  | { readonly type: "paused"; readonly pid: number; readonly interrupts: PausedInterrupt[]; readonly outcomes: ToolOutcome[] }
  | { readonly type: "resumed"; readonly pid: number; readonly outcomes: ToolOutcome[]; readonly answer: string }
  | { readonly type: "error"; readonly message: string };

const spec = JSON.parse(process.argv[2] ?? "null") as ApprovalAgentSpec | null;
if (spec === null) throw new Error("usage: approval-agent.ts '<spec JSON>'");

const send = (report: ApprovalAgentReport) =>
  new Promise<void>((resolve, reject) => {
    process.send?.(report, (error: Error | null) => {
      if (error === null) resolve();
      else reject(error);
    });
  });

async function openStore(target: Durable): Promise<{ store: GuardrailStore; close: () => Promise<void> }> {
  if (target.kind === "sqlite") {
    const store = SqliteGuardrailStore.open({ path: target.path, busyTimeoutMs: 30_000 });
    return { store, close: async () => store.close() };
  }
  const store = await PostgresGuardrailStore.open({ connectionString: target.url }, { schema: target.schema });
  return { store, close: () => store.close() };
}

async function openCheckpointer(target: Durable): Promise<{ checkpointer: BaseCheckpointSaver; close: () => Promise<void> }> {
  if (target.kind === "sqlite") {
    const checkpointer = SqliteSaver.fromConnString(target.path);
    return {
      checkpointer,
      close: async () => {
        checkpointer.db.close();
      },
    };
  }
  const checkpointer = PostgresSaver.fromConnString(target.url, { schema: target.schema });
  await checkpointer.setup();
  return { checkpointer, close: () => checkpointer.end() };
}

/** The model's answers by how many it has given in this thread: a fresh process continues the script. */
const SCRIPT: ScriptStep[] = [{ toolCalls: [read("read-1")] }, { toolCalls: [rename(WRITE_CALL_ID)] }, { content: "Done." }];
const byTranscript: ScriptStep = (messages) => {
  const step = SCRIPT[messages.filter((message) => AIMessage.isInstance(message)).length];
  if (step === undefined || typeof step === "function" || AIMessage.isInstance(step)) throw new Error("the script ran out");
  return step;
};

const { store, close: closeStore } = await openStore(spec.store);
const { checkpointer, close: closeCheckpointer } = await openCheckpointer(spec.checkpoints);
try {
  const input = processTurn(spec.turnId);
  const readDocument = tool(() => JSON.stringify({ title: "Untitled", revision: 0 }), {
    name: "read_document",
    description: "Read the document.",
    schema: z.object({}),
  });
  const renameDocument = tool(
    () => {
      recordEffect(spec.effectsFile, { turnId: spec.turnId, worker: spec.phase, pid: process.pid });
      return WRITE_RESULT;
    },
    {
      name: "rename_document",
      description: "Rename the document.",
      schema: z.object({ title: z.string().min(1), expectedRevision: z.number().int().min(0) }),
    },
  );
  const agent = createAgent({
    model: new ScriptedModel(SCRIPT.map(() => byTranscript)),
    tools: [readDocument, renameDocument],
    checkpointer,
    middleware: [
      createDocumentGuardrails({
        input,
        store,
        userMessageLabel: "user",
        authorize: () => true,
        tools: TOOL_POLICIES,
        guardrails: [requireApproval({ tools: ["rename_document"], describe: ({ args }) => `Rename to ${JSON.stringify(args.title)}?` })],
        logger: { warn: () => undefined },
      }),
    ],
  });
  const config = { configurable: { thread_id: `thread-${spec.turnId}` } };
  if (spec.phase === "pause") {
    await admit(store, input);
    const result = await agent.invoke({ messages: [new HumanMessage(userText(input))] }, config);
    const interrupts = (result.__interrupt__ ?? []).map((pending) => ({ id: pending.id, value: pending.value as PausedInterrupt["value"] }));
    await send({ type: "paused", pid: process.pid, interrupts, outcomes: toolOutcomes(result.messages) });
  } else {
    const before = ((await agent.graph.getState(config)).values as { messages: BaseMessage[] }).messages.length;
    const result = await agent.invoke(new Command({ resume: spec.resume }), config);
    const answer = result.messages.at(-1)?.text ?? "";
    await send({ type: "resumed", pid: process.pid, outcomes: toolOutcomes(result.messages.slice(before)), answer });
  }
} catch (error) {
  await send({ type: "error", message: error instanceof Error ? (error.stack ?? error.message) : String(error) });
} finally {
  await closeCheckpointer();
  await closeStore();
  process.disconnect();
}
