/**
 * Bytes allocated per tool call (issue 24, item 3): the guard's allocation, not only its time.
 *
 * V8 has no allocation counter Node exposes, so this counts what the young generation takes:
 * the process runs with a young generation large enough (`--min-semi-space-size` and
 * `--max-semi-space-size`) that one
 * measured run triggers no GC at all (checked with a `gc` PerformanceObserver: a run during which
 * any GC ran is discarded and retried), and the heap used after the run minus before it is then
 * exactly what the run allocated. `--single-threaded` keeps the JIT's compilations on the main
 * thread, where they land at the same point of every run (concurrent ones land in some runs and
 * not others, up to 1.5 MB a run apart): repeated runs then agree to within 0.1 KB a call. Each side runs the same read loop through the real `createAgent`:
 *
 * - unguarded: no middleware;
 * - no-op: one middleware whose `wrapModelCall` and `wrapToolCall` only call the handler (the cost
 *   of having any middleware at all);
 * - guarded: `createDocumentGuardrails` on the in-memory store.
 *
 * Reported: bytes per tool call for each, and the guard's own share (guarded - no-op).
 *
 *   pnpm tsx bench/allocation.ts [STEPS]        default 120 steps; re-runs itself with the V8 flag
 */
import { spawnSync } from "node:child_process";
import { PerformanceObserver } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import { HumanMessage, type BaseMessage } from "@langchain/core/messages";
import { InMemoryGuardrailStore } from "arkah-agent-guardrails";
import { admit, assertAllSucceeded, buildAgent, INVOKE_CONFIG, readLoopScript, turnInput, USER_MESSAGE } from "./agent.js";
import { collectGarbage, log } from "./harness.js";

/**
 * Young generation per semi-space, in MB, from the start (min = max: V8 otherwise starts at 1 MB
 * and grows only after scavenges): room for a 120-step loop's allocation without one.
 */
const SEMI_SPACE_MB = 256;
const FLAGS = [`--single-threaded`, `--min-semi-space-size=${String(SEMI_SPACE_MB)}`, `--max-semi-space-size=${String(SEMI_SPACE_MB)}`];
/** `gc` performance entries are delivered asynchronously, a few milliseconds late. */
const settleEntries = () => new Promise((resolve) => setTimeout(resolve, 20));
const ROUNDS = 7;
/** The guard's own allocation per call, as a share of the loop's with a no-op middleware: `pnpm bench`'s target. */
export const ALLOCATION_SHARE_TARGET = 0.05;

export interface AllocationResult {
  readonly steps: number;
  /** Bytes allocated per tool call, per side: the least of the runs (see `measureInProcess`). */
  readonly unguarded: number;
  readonly noop: number;
  readonly guarded: number;
  /** Runs discarded because a GC ran during them. */
  readonly discarded: number;
}

type Side = "unguarded" | "noop" | "guarded";

let gcs = 0;
new PerformanceObserver((list) => {
  gcs += list.getEntries().length;
}).observe({ entryTypes: ["gc"] });


async function agentFor(side: Side, steps: number) {
  const script = readLoopScript(steps);
  if (side === "unguarded") return buildAgent(script);
  if (side === "noop") return buildAgent(script, { noop: true });
  const store = new InMemoryGuardrailStore();
  const input = turnInput(`alloc-${String(Math.random()).slice(2)}`);
  await admit(store, input);
  return buildAgent(script, { turn: { input, store } });
}

/** Bytes one run of `steps` reads allocates, or undefined when a GC ran during it. */
async function allocatedOnce(side: Side, steps: number): Promise<number | undefined> {
  const agent = await agentFor(side, steps);
  const messages = [new HumanMessage(USER_MESSAGE)];
  collectGarbage();
  // Let the forced GC's entry land before counting.
  await settleEntries();
  const gcsBefore = gcs;
  const before = process.memoryUsage().heapUsed;
  const result: { messages: BaseMessage[] } = await agent.invoke({ messages }, INVOKE_CONFIG);
  const after = process.memoryUsage().heapUsed;
  await settleEntries();
  assertAllSucceeded(result.messages, steps);
  return gcs === gcsBefore ? (after - before) / steps : undefined;
}

async function measureInProcess(steps: number): Promise<AllocationResult> {
  const samples: Record<Side, number[]> = { unguarded: [], noop: [], guarded: [] };
  let discarded = 0;
  // A warm-up run of each side first: compiled code and hidden classes are not per call.
  for (const side of ["unguarded", "noop", "guarded"] as const) await allocatedOnce(side, steps);
  for (let round = 0; round < ROUNDS; round++) {
    for (const side of ["unguarded", "noop", "guarded"] as const) {
      let bytes: number | undefined;
      for (let attempt = 0; attempt < 3 && bytes === undefined; attempt++) {
        bytes = await allocatedOnce(side, steps);
        if (bytes === undefined) discarded++;
      }
      if (bytes !== undefined) samples[side].push(bytes);
    }
  }
  for (const side of ["unguarded", "noop", "guarded"] as const) {
    if (samples[side].length === 0) throw new Error(`allocation: every ${side} run was interrupted by a GC; raise SEMI_SPACE_MB`);
  }
  // The least of the runs: the program is the same each run, so what varies is only added (code
  // the JIT compiles onto the heap in some runs, about 1.5 MB a run): the minimum is the run's own.
  const least = (values: readonly number[]) => Math.min(...values);
  return { steps, unguarded: least(samples.unguarded), noop: least(samples.noop), guarded: least(samples.guarded), discarded };
}

/** Runs the measurement in a child process with the young generation it needs; answers its result. */
export function measureAllocation(steps: number): AllocationResult {
  const child = spawnSync(process.execPath, [...process.execArgv, ...FLAGS, fileURLToPath(import.meta.url), "--child", String(steps)], {
    encoding: "utf8",
    maxBuffer: 16 * 1024 * 1024,
  });
  const line = child.stdout.split("\n").find((text) => text.startsWith("allocation-result "));
  if (child.status !== 0 || line === undefined) throw new Error(`allocation: the child failed (${String(child.status)}): ${child.stderr.slice(-2000)}`);
  return JSON.parse(line.slice("allocation-result ".length)) as AllocationResult;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const stepsArg = process.argv.find((arg, index) => index >= 2 && /^\d+$/.test(arg));
  const steps = Number(stepsArg ?? 120);
  if (process.argv.includes("--child")) {
    console.log(`allocation-result ${JSON.stringify(await measureInProcess(steps))}`);
  } else {
    const result = measureAllocation(steps);
    const kb = (bytes: number) => `${(bytes / 1024).toFixed(1)} KB`;
    log(
      `${String(steps)}-step read loop, allocated per tool call: unguarded ${kb(result.unguarded)}, no-op middleware ${kb(result.noop)}, ` +
        `guarded ${kb(result.guarded)}; the guard's own ${kb(result.guarded - result.noop)} (${String(result.discarded)} runs discarded for a GC)`,
    );
  }
}
