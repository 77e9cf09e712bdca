/**
 * Heap retained per `invoke` by a bare langchain `createAgent` (issue 24, item 1). Needs nothing of
 * this package: a trivial offline chat model, no middleware, no checkpointer.
 *
 *   pnpm tsx --expose-gc bench/retention.ts [invokes]      (default 2000 per variant)
 *
 * Each variant builds its own agent, runs a warm-up, forces GC, runs N invokes, forces GC again and
 * prints (heapUsed after - heapUsed before) / N. Variants run one after another in one process.
 */
import { AIMessage, type BaseMessage } from "@langchain/core/messages";
import { BaseChatModel } from "@langchain/core/language_models/chat_models";
import type { ChatResult } from "@langchain/core/outputs";
import { tool } from "@langchain/core/tools";
import { getEventListeners, setMaxListeners } from "node:events";
import { createAgent } from "langchain";
import { z } from "zod";

const args = process.argv.slice(2);
const invokes = Number(args.find((a) => /^\d+$/.test(a)) ?? 2000);
/** `--naive-gc`: one gc() right after the loop, without letting finalizers run (how a naive probe measures). */
const naiveGc = args.includes("--naive-gc");
/** `--only=a,g`: run only these variants. */
const only = args.find((a) => a.startsWith("--only="))?.slice("--only=".length).split(",");
const warmup = Math.min(500, Math.max(100, Math.floor(invokes / 4)));

if (typeof globalThis.gc !== "function") {
  console.error("run with --expose-gc: pnpm tsx --expose-gc bench/retention.ts [invokes]");
  process.exit(2);
}
const gc = globalThis.gc;

/** Answers with one tool call when it has tools and the last message is the user's, else with text. */
class TrivialModel extends BaseChatModel {
  private readonly withTool: boolean;
  constructor(withTool = false) {
    super({});
    this.withTool = withTool;
  }
  _llmType(): string {
    return "trivial";
  }
  override bindTools(): this {
    return this;
  }
  async _generate(messages: BaseMessage[]): Promise<ChatResult> {
    const last = messages.at(-1);
    const callTool = this.withTool && last?.type === "human";
    const message = callTool
      ? new AIMessage({ content: "", tool_calls: [{ id: "call-1", name: "echo", args: { text: "x" } }] })
      : new AIMessage("done");
    return { generations: [{ message, text: callTool ? "" : "done" }] };
  }
}

const echo = tool(({ text }: { text: string }) => text, {
  name: "echo",
  description: "Echoes its input.",
  schema: z.object({ text: z.string() }),
});

type Agent = ReturnType<typeof createAgent>;
type Invoke = (agent: Agent, i: number) => Promise<unknown>;

const input = () => ({ messages: [{ role: "user" as const, content: "hi" }] });
const longLived = new AbortController();
// Variant (b) adds a listener per invoke to this signal; the warning would only repeat what we print.
setMaxListeners(0, longLived.signal);

async function settle(): Promise<number> {
  if (naiveGc) {
    gc();
    return process.memoryUsage().heapUsed;
  }
  // Several rounds: Node's AbortSignal.any drops its WeakRefs from a FinalizationRegistry callback,
  // which runs only after a GC and a turn of the event loop; a second GC then frees what it dropped.
  for (let i = 0; i < 3; i++) {
    gc();
    await new Promise((resolve) => setImmediate(resolve));
  }
  return process.memoryUsage().heapUsed;
}

async function measure(name: string, agent: Agent, run: Invoke): Promise<void> {
  if (only !== undefined && !only.includes(name.slice(1, 2))) return;
  for (let i = 0; i < warmup; i++) await run(agent, i);
  anyCalls = 0;
  const before = await settle();
  for (let i = 0; i < invokes; i++) await run(agent, i);
  const after = await settle();
  const perInvoke = (after - before) / invokes;
  console.log(
    `${name.padEnd(58)} ${perInvoke.toFixed(0).padStart(6)} B/invoke   AbortSignal.any/invoke ${(anyCalls / invokes).toFixed(1)}` +
      `   listeners on the long-lived signal ${String(getEventListeners(longLived.signal, "abort").length)}`,
  );
}

// Count AbortSignal.any calls in every variant; variant (f) swaps in a non-retaining stand-in.
const nativeAny = AbortSignal.any.bind(AbortSignal);
let anyCalls = 0;
let useStandIn = false;
/**
 * Same contract as AbortSignal.any for the measurement: aborts when any source aborts. Its listeners
 * on the sources are plain ones, so it lives exactly as long as its sources or its holders.
 */
function standInAny(signals: AbortSignal[]): AbortSignal {
  const controller = new AbortController();
  const sources = [...signals];
  const onAbort = (): void => {
    for (const s of sources) s.removeEventListener("abort", onAbort);
    controller.abort(sources.find((s) => s.aborted)?.reason);
  };
  for (const s of sources) {
    if (s.aborted) {
      controller.abort(s.reason);
      return controller.signal;
    }
  }
  for (const s of sources) s.addEventListener("abort", onAbort, { once: true });
  return controller.signal;
}
AbortSignal.any = (signals: AbortSignal[]): AbortSignal => {
  anyCalls++;
  return useStandIn ? standInAny(signals) : nativeAny(signals);
};

const bare = (withTool = false): Agent =>
  createAgent({ model: new TrivialModel(withTool), tools: withTool ? [echo] : [] });

console.log(
  `node ${process.version}, ${invokes} invokes per variant after ${warmup} warm-up, ${naiveGc ? "one gc() (naive)" : "gc + event-loop turns"}, ` +
    `LANGSMITH_TRACING=${process.env.LANGSMITH_TRACING ?? "(unset)"} LANGCHAIN_TRACING_V2=${process.env.LANGCHAIN_TRACING_V2 ?? "(unset)"}`,
);
await measure("(a) invoke(input)", bare(), (a) => a.invoke(input()));
await measure("(b) invoke(input, { signal: one long-lived controller })", bare(), (a) =>
  a.invoke(input(), { signal: longLived.signal }),
);
await measure("(c) invoke(input, { signal: fresh controller per call })", bare(), (a) =>
  a.invoke(input(), { signal: new AbortController().signal }),
);
await measure("(m) as (b), linked through a per-invoke controller (mitigation)", bare(), async (a) => {
  const run = new AbortController();
  const abort = () => {
    run.abort(longLived.signal.reason);
  };
  longLived.signal.addEventListener("abort", abort, { once: true });
  try {
    await a.invoke(input(), { signal: run.signal });
  } finally {
    longLived.signal.removeEventListener("abort", abort);
  }
});
await measure("(d) agent.graph.invoke(input)", bare(), (a) => a.graph.invoke(input()));
await measure("(e) createAgent({ signal: long-lived }) + invoke(input)", createAgent({ model: new TrivialModel(), tools: [], signal: longLived.signal }), (a) =>
  a.invoke(input()),
);
useStandIn = true;
await measure("(f) as (a), AbortSignal.any replaced by a plain stand-in", bare(), (a) => a.invoke(input()));
useStandIn = false;
await measure("(g) one tool call per invoke", bare(true), (a) => a.invoke(input()));
await measure("(h) one tool call, fresh controller per call", bare(true), (a) =>
  a.invoke(input(), { signal: new AbortController().signal }),
);
useStandIn = true;
await measure("(i) one tool call, AbortSignal.any replaced by stand-in", bare(true), (a) => a.invoke(input()));
useStandIn = false;
