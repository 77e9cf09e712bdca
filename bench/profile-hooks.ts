/**
 * CPU profile of the read loop (or, with `turn`, of read-then-write turns with admitTurn, one
 * server-wide middleware), summarised as self time by module: the guard's own code against
 * LangChain, LangGraph, zod and the rest. `pnpm bench` reports the guard's share of the guarded
 * read loop's CPU from it (issue 24's target: under 3 %).
 *
 *   pnpm tsx bench/profile-hooks.ts [historySize | turn] [invokes] [--side guarded|noop|unguarded] [--steps N] [--warmup N]
 *
 * Profiled after `--warmup` unprofiled runs (default 300), so the JIT has compiled what a server
 * that has run a while runs: the guard's functions run once or twice a tool call, against the
 * framework's dozens, and reach their optimized code last (after 3 warm-up runs the guard's self
 * time reads about twice its steady value).
 *
 * The guard's code is this package's own: `src/` when run from source, `dist/` when the benchmarks
 * run the build (`pnpm bench` does: see bench/tsconfig.dist.json); the testing entry (`ScriptedModel`)
 * and bench/ count as the harness.
 */
import { Session } from "node:inspector/promises";
import { HumanMessage } from "@langchain/core/messages";
import { randomUUID } from "node:crypto";
import { fileURLToPath } from "node:url";
import { InMemoryGuardrailStore, turnContext } from "arkah-agent-guardrails";
import { admit, buildAgent, INVOKE_CONFIG, readLoopScript, readWriteScript, turnInput, USER_MESSAGE, type AgentSetup } from "./agent.js";
import { earlierTurns } from "./history.js";

interface ProfileNode {
  readonly id: number;
  readonly children?: readonly number[];
  readonly callFrame: { readonly url: string; readonly functionName: string; readonly lineNumber: number };
}
interface Profile {
  readonly nodes: readonly ProfileNode[];
  readonly samples: readonly number[];
  readonly timeDeltas: readonly number[];
}

export type ProfileSide = "guarded" | "noop" | "unguarded";

export interface ProfileOptions {
  /** Earlier messages in the loop's input (ignored for turns). */
  readonly historySize?: number;
  /** Read-then-write turns instead of the read loop. */
  readonly turns?: boolean;
  readonly invokes?: number;
  /** Unprofiled runs first, to reach the JIT's steady state (default 300). */
  readonly warmup?: number;
  readonly side?: ProfileSide;
  /** Read steps per invoke of the loop (default 20). */
  readonly steps?: number;
}

export interface ProfileResult {
  /** Profiled CPU time, µs. */
  readonly totalUs: number;
  readonly calls: number;
  /** Self time by module, µs, largest first. */
  readonly buckets: readonly (readonly [string, number])[];
  /** Self time of the guard's own functions, µs, largest first. */
  readonly functions: readonly (readonly [string, number])[];
  /** The guard's own self time over the profile's total. */
  readonly guardShare: number;
  /** Inclusive time of the guard's functions (each sample counted once per function on its stack), µs. */
  readonly inclusive: readonly (readonly [string, number])[];
}

export const GUARD_BUCKET = "guard (this package)";
/** Unprofiled runs before the profile: enough for the guard's functions to reach optimized code. */
const DEFAULT_WARMUP = 300;

/** Issue 24's target for the guard's own self time, as a share of the read loop's CPU. */
export const GUARD_SELF_TIME_TARGET = 0.03;

function bucketOf(url: string, functionName: string): string {
  if (url.includes("node_modules")) return /node_modules\/(?:\.pnpm\/)?((?:@[^/+]+[/+])?[^/@]+)/.exec(url)?.[1] ?? "node_modules";
  if (url === "") return functionName === "(garbage collector)" ? "GC" : `(${functionName || "native"})`;
  if (url.startsWith("node:")) return "node internals";
  if (/\/(src|dist)\/testing\//.test(url) || url.includes("/bench/")) return "bench harness and ScriptedModel";
  if (/\/(src|dist)\//.test(url)) return GUARD_BUCKET;
  return url;
}

export async function profileLoop(options: ProfileOptions = {}): Promise<ProfileResult> {
  const turns = options.turns === true;
  const side = options.side ?? "guarded";
  const invokes = options.invokes ?? 40;
  /** Tool calls per invoke: the loop's read steps, or a turn's read and write. */
  const steps = turns ? 2 : (options.steps ?? 20);
  const store = new InMemoryGuardrailStore();
  const input = turnInput("turn-profile");
  await admit(store, input);
  const history = earlierTurns(options.historySize ?? 0);
  const loopSetup: AgentSetup = side === "guarded" ? { turn: { input, store } } : side === "noop" ? { noop: true } : {};
  const loopOnce = async () => {
    const agent = buildAgent(readLoopScript(steps), loopSetup);
    await agent.invoke({ messages: [...history, new HumanMessage(USER_MESSAGE)] }, INVOKE_CONFIG);
  };
  // As bench/agent.ts's turn benchmark: one agent serves ten turns, each admitted first.
  const turnsOnce = async () => {
    const script = Array.from({ length: 10 }, (_, turn) => readWriteScript(turn)).flat();
    const agent = buildAgent(script, { server: { store } });
    for (let turn = 0; turn < 10; turn++) {
      const turnInputs = turnInput(randomUUID());
      await admit(store, turnInputs);
      await agent.invoke({ messages: [new HumanMessage(USER_MESSAGE)] }, { ...INVOKE_CONFIG, context: turnContext(turnInputs) });
    }
  };
  const once = turns ? turnsOnce : loopOnce;
  for (let index = 0; index < (options.warmup ?? DEFAULT_WARMUP); index++) await once();

  const session = new Session();
  session.connect();
  await session.post("Profiler.enable");
  await session.post("Profiler.setSamplingInterval", { interval: 50 });
  await session.post("Profiler.start");
  for (let index = 0; index < invokes; index++) await once();
  const { profile } = (await session.post("Profiler.stop")) as unknown as { profile: Profile };
  await session.post("Profiler.disable");
  session.disconnect();

  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const parents = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parents.set(child, node.id);
  const inclusive = new Map<string, number>();
  const buckets = new Map<string, number>();
  const functions = new Map<string, number>();
  let total = 0;
  profile.samples.forEach((id, index) => {
    const delta = profile.timeDeltas[index] ?? 0;
    total += delta;
    const { url, functionName, lineNumber } = byId.get(id)?.callFrame ?? { url: "", functionName: "", lineNumber: 0 };
    const bucket = bucketOf(url, functionName);
    buckets.set(bucket, (buckets.get(bucket) ?? 0) + delta);
    if (bucket === GUARD_BUCKET) {
      const file = url.slice(url.search(/\/(src|dist)\//) + 1);
      const key = `${functionName || "(anonymous)"} ${file}:${String(lineNumber + 1)}`;
      functions.set(key, (functions.get(key) ?? 0) + delta);
    }
    const seen = new Set<string>();
    for (let at: number | undefined = id; at !== undefined; at = parents.get(at)) {
      const frame = byId.get(at)?.callFrame;
      if (frame === undefined || bucketOf(frame.url, frame.functionName) !== GUARD_BUCKET) continue;
      const key = `${frame.functionName || "(anonymous)"} ${frame.url.slice(frame.url.search(/\/(src|dist)\//) + 1)}`;
      if (seen.has(key)) continue;
      seen.add(key);
      inclusive.set(key, (inclusive.get(key) ?? 0) + delta);
    }
  });
  const sorted = (map: Map<string, number>) => [...map].sort((a, b) => b[1] - a[1]);
  return {
    totalUs: total,
    calls: invokes * steps * (turns ? 10 : 1),
    buckets: sorted(buckets),
    functions: sorted(functions),
    guardShare: (buckets.get(GUARD_BUCKET) ?? 0) / total,
    inclusive: sorted(inclusive),
  };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  const sideAt = args.indexOf("--side");
  const side = (sideAt >= 0 ? args.splice(sideAt, 2)[1] : "guarded") as ProfileSide;
  const stepsAt = args.indexOf("--steps");
  const steps = stepsAt >= 0 ? Number(args.splice(stepsAt, 2)[1]) : 20;
  const warmupAt = args.indexOf("--warmup");
  const warmup = warmupAt >= 0 ? Number(args.splice(warmupAt, 2)[1]) : DEFAULT_WARMUP;
  const turns = args[0] === "turn";
  const size = turns ? 0 : Number(args[0] ?? 0);
  const invokes = Number(args[1] ?? 40);
  const result = await profileLoop({ turns, historySize: size, invokes, side, steps, warmup });
  const line = ([name, us]: readonly [string, number]) =>
    `${name.padEnd(60)} ${(us / 1000).toFixed(1).padStart(8)} ms ${((100 * us) / result.totalUs).toFixed(1).padStart(5)} % ${(us / result.calls).toFixed(1).padStart(7)} µs/call`;
  console.log(
    turns
      ? `read-then-write turns (${side}): ${String(invokes * 10)} turns, per tool call (2 a turn), total ${(result.totalUs / 1000).toFixed(0)} ms`
      : `history ${String(size)} (${side}), ${String(invokes)} invokes x ${String(steps)} steps, total ${(result.totalUs / 1000).toFixed(0)} ms`,
  );
  for (const entry of result.buckets.slice(0, 16)) console.log(line(entry));
  console.log("\nguard functions:");
  for (const entry of result.functions.slice(0, 25)) console.log(line(entry));
  if (process.argv.includes("--inclusive")) {
    console.log("\nguard functions, inclusive (callees counted):");
    for (const entry of result.inclusive.slice(0, 40)) console.log(line(entry));
  }
}
