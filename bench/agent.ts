/**
 * The guard's cost inside a real `createAgent` loop, against the same loop without middleware.
 * Only the model is stubbed (`ScriptedModel`); tools, the agent graph and the store are real.
 *
 * - `benchGuardedLoop`: one admitted turn, N steps of one `document-read` call each, then a final
 *   answer. Figure: time per tool call, guarded / unguarded.
 * - `benchReadWriteTurn`: whole turns (admitTurn with a fresh turn id, so moderation and the
 *   receipt write really run, then read, write, answer) on one server-wide middleware that gets
 *   each turn through `context`. Figure: time per turn, guarded / unguarded.
 *
 * Agents and scripted models are built before each timed region; only `admitTurn` and
 * `agent.invoke` are timed.
 */
import { randomUUID } from "node:crypto";
import { AIMessage, HumanMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import { createAgent, createMiddleware, tool } from "langchain";
import { z } from "zod";
import {
  admitTurn,
  createDocumentGuardrails,
  InMemoryGuardrailStore,
  turnContext,
  type Guardrail,
  type GuardrailStore,
  type GuardrailTelemetry,
  type TurnInput,
} from "arkah-agent-guardrails";
import { ScriptedModel, type ScriptStep } from "arkah-agent-guardrails/testing";
import { interleave, interleaveSides, log, measure, median, per, roundOptions, summarize, type Interleaved, type Measurement, type RoundOptions } from "./harness.js";

export const USER_MESSAGE = "Please rename this document to Field notes.";

const DOCUMENT = JSON.stringify({
  id: "doc-1",
  title: "Untitled",
  revision: 0,
  body: "Meeting notes: ship the guardrails, then measure them. ".repeat(8),
});

const readDocument = tool(() => DOCUMENT, {
  name: "read_document",
  description: "Read the document.",
  schema: z.object({ documentId: z.string() }),
});

const renameDocument = tool(({ documentId, title }) => JSON.stringify({ id: documentId, title, revision: 1 }), {
  name: "rename_document",
  description: "Rename the document.",
  schema: z.object({ documentId: z.string(), title: z.string().min(1) }),
});

export const TOOLS = [readDocument, renameDocument];
const POLICIES = {
  read_document: { kind: "document-read" },
  rename_document: { kind: "mutation" },
} as const;

/** Enough for any script here: each step is a model node and a tools node. */
export const INVOKE_CONFIG = { recursionLimit: 100_000 } as const;

export function turnInput(turnId: string): TurnInput {
  return {
    scopeId: "doc-1",
    turnId,
    policyVersion: "bench-1",
    segments: [{ label: "user", content: USER_MESSAGE }],
  };
}

export async function admit(store: GuardrailStore, input: TurnInput): Promise<void> {
  const receipt = await admitTurn({ store, input, moderate: () => true });
  if (!receipt.allowed) throw new Error("bench: the turn was not admitted");
}

export const readCall = (id: string) => ({ id, name: "read_document", args: { documentId: "doc-1" } });
const renameCall = (id: string) => ({ id, name: "rename_document", args: { documentId: "doc-1", title: "Field notes" } });

/** `steps` steps of one read each, then a final answer. */
export function readLoopScript(steps: number): ScriptStep[] {
  const script: ScriptStep[] = [];
  for (let i = 0; i < steps; i++) script.push({ toolCalls: [readCall(`read-${String(i)}`)] });
  script.push({ content: "Read it." });
  return script;
}

export interface AgentSetup {
  /** Guarded with the middleware built for one turn (`input`), the seed's way. */
  readonly turn?: { readonly input: TurnInput; readonly store: GuardrailStore };
  /** Guarded with one middleware for many turns, each passed through `context`. */
  readonly server?: { readonly store: GuardrailStore };
  /** Accumulates the guard's own time in its hooks (see `timedHooks`). */
  readonly hookTimer?: HookTimer;
  /** The middleware's `guardrails` option (default: none given, so the schema guardrail alone). */
  readonly guardrails?: readonly Guardrail[];
  /** The middleware's `telemetry` option (default: none). */
  readonly telemetry?: GuardrailTelemetry;
  /** Unguarded, with one middleware whose hooks only call the handler: the cost of any middleware. */
  readonly noop?: boolean;
}

/** A middleware that does nothing but call through: the baseline for "the cost of a middleware". */
export const noopMiddleware = createMiddleware({
  name: "NoOp",
  wrapModelCall: (request, handler) => handler(request),
  wrapToolCall: (request, handler) => handler(request),
});

/**
 * The guard's own time inside its `wrapModelCall` / `wrapToolCall` hooks, handlers excluded: one
 * wall-clock figure per hook invocation, so a median can drop the invocations that another
 * process preempted.
 */
export class HookTimer {
  readonly model: number[] = [];
  readonly tool: number[] = [];
}

type Hook = (request: never, handler: (request: never) => Promise<unknown>) => Promise<unknown>;

/**
 * The middleware with each hook wrapped to time the hook minus the handler it calls (the model
 * call or the tool run). That is the guard's own code, free of the framework's per-step costs,
 * which dwarf it on long threads. Costs two clock reads per boundary.
 */
function timedHooks<M extends object>(middleware: M, timer: HookTimer): M {
  const wrap = (hook: unknown, into: number[]) => {
    if (typeof hook !== "function") return hook;
    const inner = hook as Hook;
    return async (request: never, handler: (request: never) => Promise<unknown>) => {
      let handlerNs = 0n;
      const start = process.hrtime.bigint();
      try {
        return await inner(request, async (forwarded) => {
          const handlerStart = process.hrtime.bigint();
          try {
            return await handler(forwarded);
          } finally {
            handlerNs += process.hrtime.bigint() - handlerStart;
          }
        });
      } finally {
        into.push(Number(process.hrtime.bigint() - start - handlerNs));
      }
    };
  };
  const hooks = middleware as { wrapModelCall?: unknown; wrapToolCall?: unknown };
  return {
    ...middleware,
    wrapModelCall: wrap(hooks.wrapModelCall, timer.model),
    wrapToolCall: wrap(hooks.wrapToolCall, timer.tool),
  };
}

/** A fresh agent and scripted model; without `turn` or `server`, no middleware at all. */
export function buildAgent(script: readonly ScriptStep[], setup: AgentSetup = {}) {
  const guardStore = setup.turn?.store ?? setup.server?.store;
  const guard =
    guardStore === undefined
      ? undefined
      : createDocumentGuardrails({
          ...(setup.turn === undefined ? {} : { input: setup.turn.input }),
          store: guardStore,
          userMessageLabel: "user",
          authorize: (_call, turn) => turn.scopeId === "doc-1",
          tools: POLICIES,
          ...(setup.guardrails === undefined ? {} : { guardrails: setup.guardrails }),
          ...(setup.telemetry === undefined ? {} : { telemetry: setup.telemetry }),
        });
  const middleware =
    guard === undefined ? (setup.noop === true ? [noopMiddleware] : []) : [setup.hookTimer === undefined ? guard : timedHooks(guard, setup.hookTimer)];
  return createAgent({ model: new ScriptedModel(script), tools: TOOLS, middleware });
}

export type BenchAgent = ReturnType<typeof buildAgent>;

/** Throws unless every tool call in `messages` succeeded: a refused call would fake a speed-up. */
export function assertAllSucceeded(messages: readonly BaseMessage[], expectedToolCalls: number): void {
  const results = messages.filter(ToolMessage.isInstance);
  const failed = results.find((message) => message.status === "error");
  if (failed !== undefined) throw new Error(`bench: tool call failed: ${JSON.stringify(failed.content)}`);
  if (results.length !== expectedToolCalls) {
    throw new Error(`bench: expected ${String(expectedToolCalls)} tool results, got ${String(results.length)}`);
  }
  const last = messages.at(-1);
  if (!AIMessage.isInstance(last) || (last.tool_calls?.length ?? 0) > 0) throw new Error("bench: no final answer");
}

// ---------------------------------------------------------------------------------------------
// 1. Guarded loop overhead

export interface LoopOptions extends RoundOptions {
  readonly steps: number;
}

/**
 * One timed sample of the read loop of `steps` steps on a fresh agent built with `setup` (outside
 * the timed region); throws unless every call succeeded. Time per tool call.
 */
function loopSample(steps: number): (setup: AgentSetup | undefined) => () => Promise<Measurement> {
  const script = readLoopScript(steps);
  return (setup) => async () => {
    const agent = buildAgent(script, setup);
    let result: { messages: BaseMessage[] } | undefined;
    const measured = await measure(async () => {
      result = await agent.invoke({ messages: [new HumanMessage(USER_MESSAGE)] }, INVOKE_CONFIG);
    });
    assertAllSucceeded(result?.messages ?? [], steps);
    return per(measured, steps);
  };
}

export async function benchGuardedLoop(
  options: LoopOptions,
  /** Compare two guarded setups instead of unguarded (baseline) vs guarded (subject). */
  sides?: { readonly baseline: Partial<AgentSetup>; readonly subject: Partial<AgentSetup> },
): Promise<Interleaved> {
  const store = new InMemoryGuardrailStore();
  const input = turnInput("turn-loop");
  await admit(store, input);
  const run = loopSample(options.steps);
  const guarded = { turn: { input, store } };

  return interleave({
    ...roundOptions(options),
    baseline: run(sides === undefined ? undefined : { ...guarded, ...sides.baseline }),
    subject: run(sides === undefined ? guarded : { ...guarded, ...sides.subject }),
    onRound: (round) => {
      if ((round + 1) % 10 === 0) log(`  loop: round ${String(round + 1)}/${String(options.rounds)}`);
    },
  });
}

// ---------------------------------------------------------------------------------------------
// 2. Read-then-write turn, admission included

export interface TurnOptions extends RoundOptions {
  /** Turns per timed sample. */
  readonly turnsPerSample: number;
}

/** read, write, answer: one turn's script. */
export function readWriteScript(turn: number): ScriptStep[] {
  return [
    { toolCalls: [readCall(`read-${String(turn)}`)] },
    { toolCalls: [renameCall(`rename-${String(turn)}`)] },
    { content: "Renamed the document to Field notes." },
  ];
}

export interface TurnResult extends Interleaved {
  /** Median wall-clock ns per turn spent in `admitTurn` (part of the guarded side's time). */
  readonly admitNs: number;
}

export async function benchReadWriteTurn(options: TurnOptions): Promise<TurnResult> {
  const turns = options.turnsPerSample;
  // One model serves every turn of a sample in order: its script is the turns' scripts back to back.
  const script = Array.from({ length: turns }, (_, turn) => readWriteScript(turn)).flat();

  const admitSamples: number[] = [];
  const run = (guarded: boolean) => async () => {
    const store = new InMemoryGuardrailStore();
    const agent = buildAgent(script, guarded ? { server: { store } } : {});
    const inputs = Array.from({ length: turns }, () => turnInput(randomUUID()));
    const results: BaseMessage[][] = [];
    let admitNs = 0n;
    const measured = await measure(async () => {
      for (const input of inputs) {
        if (guarded) {
          const admitStart = process.hrtime.bigint();
          await admit(store, input);
          admitNs += process.hrtime.bigint() - admitStart;
        }
        const result = await agent.invoke(
          { messages: [new HumanMessage(USER_MESSAGE)] },
          { ...INVOKE_CONFIG, context: turnContext(input) },
        );
        results.push(result.messages);
      }
    });
    for (const messages of results) assertAllSucceeded(messages, 2);
    if (guarded) admitSamples.push(Number(admitNs) / turns);
    return per(measured, turns);
  };

  const result = await interleave({
    ...roundOptions(options),
    baseline: run(false),
    subject: run(true),
    onRound: (round) => {
      if ((round + 1) % 10 === 0) log(`  turn: round ${String(round + 1)}/${String(options.rounds)}`);
    },
  });
  return { ...result, admitNs: median(admitSamples.slice(options.warmup ?? 2)) };
}

// ---------------------------------------------------------------------------------------------
// 3. The guard against the cost of any middleware

export interface LoopAgainstNoop {
  readonly steps: number;
  /** No middleware (baseline) against the guarded loop. */
  readonly guarded: Interleaved;
  /** No middleware (baseline) against a no-op middleware: the price of having a middleware at all. */
  readonly noop: Interleaved;
  /** No-op middleware (baseline) against the guarded loop: the guard's own cost. */
  readonly guardOverNoop: Interleaved;
}

/**
 * The read loop three ways in the same rounds (rotated order): no middleware, a no-op middleware,
 * the guardrails. Issue 24's target compares guarded/unguarded with noop/unguarded.
 */
export async function benchLoopAgainstNoop(options: LoopOptions): Promise<LoopAgainstNoop> {
  const store = new InMemoryGuardrailStore();
  const input = turnInput(`turn-loop-${String(options.steps)}`);
  await admit(store, input);
  const run = loopSample(options.steps);
  const [unguarded, noop, guarded] = await interleaveSides([run({}), run({ noop: true }), run({ turn: { input, store } })], {
    ...roundOptions(options),
    onRound: (round) => {
      if ((round + 1) % 10 === 0) log(`  loop of ${String(options.steps)}: round ${String(round + 1)}/${String(options.rounds)}`);
    },
  });
  const [u, n, g] = [unguarded, noop, guarded] as [Measurement[], Measurement[], Measurement[]];
  return { steps: options.steps, guarded: summarize(u, g), noop: summarize(u, n), guardOverNoop: summarize(n, g) };
}
