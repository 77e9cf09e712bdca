/**
 * The read loop three ways (no middleware, a no-op middleware, the guardrails), each in a process
 * of its own: what a server running only that agent pays, including what a side leaves on the
 * whole process. The interleaved rows (bench/agent.ts) run all sides in one process, so a cost the
 * guard puts on every promise of the process is charged to the unguarded and no-op sides there too:
 * the seal's AsyncLocalStorage, enabled from the first governed call on, adds work to every promise
 * on Node 20 and 22 (about 40 ns each; some 480 promises a tool call of this loop). This
 * cross-check shows what the interleaved rows cannot.
 *
 *   pnpm build && TSX_TSCONFIG_PATH=bench/tsconfig.dist.json pnpm tsx bench/processes.ts [rounds]
 *
 * Each round starts one child per side, in an order rotated every round; a child warms up, then
 * times a fixed number of invokes and reports its CPU time (user + system) and wall time per tool
 * call. Ratios are medians over the rounds of each round's subject/baseline.
 */
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { HumanMessage } from "@langchain/core/messages";
import { InMemoryGuardrailStore } from "arkah-agent-guardrails";
import { admit, buildAgent, INVOKE_CONFIG, readLoopScript, turnInput, USER_MESSAGE, type AgentSetup } from "./agent.js";
import { formatNs, log, measure, median, per, type Measurement } from "./harness.js";

const SIDES = ["unguarded", "noop", "guarded"] as const;
type Side = (typeof SIDES)[number];

export interface ProcessesOptions {
  readonly rounds: number;
  readonly steps: number;
  /** Untimed invokes first, in each child. */
  readonly warmup: number;
  /** Timed invokes in each child. */
  readonly invokes: number;
}

export interface ProcessesResult {
  readonly steps: number;
  /** Median per-call CPU and wall time of each side's children. */
  readonly perCall: Readonly<Record<Side, Measurement>>;
  /** Medians over rounds of the round's side/unguarded ratio, in CPU and wall time. */
  readonly cpuRatio: Readonly<Record<Exclude<Side, "unguarded">, number>>;
  readonly wallRatio: Readonly<Record<Exclude<Side, "unguarded">, number>>;
  readonly rounds: number;
}

async function runChild(side: Side, options: Omit<ProcessesOptions, "rounds">): Promise<Measurement> {
  const store = new InMemoryGuardrailStore();
  const input = turnInput("turn-processes");
  await admit(store, input);
  const setup: AgentSetup = side === "guarded" ? { turn: { input, store } } : side === "noop" ? { noop: true } : {};
  const script = readLoopScript(options.steps);
  const once = async () => {
    const agent = buildAgent(script, setup);
    await agent.invoke({ messages: [new HumanMessage(USER_MESSAGE)] }, INVOKE_CONFIG);
  };
  for (let index = 0; index < options.warmup; index++) await once();
  const measured = await measure(async () => {
    for (let index = 0; index < options.invokes; index++) await once();
  });
  return per(measured, options.invokes * options.steps);
}

function spawnChild(side: Side, options: Omit<ProcessesOptions, "rounds">): Measurement {
  const args = [...process.execArgv, fileURLToPath(import.meta.url), "--child", side, String(options.steps), String(options.warmup), String(options.invokes)];
  const child = spawnSync(process.execPath, args, { encoding: "utf8", maxBuffer: 16 * 1024 * 1024 });
  const line = child.stdout.split("\n").find((text) => text.startsWith("processes-result "));
  if (child.status !== 0 || line === undefined) throw new Error(`processes: the ${side} child failed (${String(child.status)}): ${child.stderr.slice(-2000)}`);
  return JSON.parse(line.slice("processes-result ".length)) as Measurement;
}

export function benchLoopInProcesses(options: ProcessesOptions): ProcessesResult {
  const taken: Record<Side, Measurement[]> = { unguarded: [], noop: [], guarded: [] };
  for (let round = 0; round < options.rounds; round++) {
    for (let step = 0; step < SIDES.length; step++) {
      const side = SIDES[(step + round) % SIDES.length] as Side;
      taken[side].push(spawnChild(side, options));
    }
    log(`  processes: round ${String(round + 1)}/${String(options.rounds)}`);
  }
  const perSide = (side: Side): Measurement => ({ cpu: median(taken[side].map((r) => r.cpu)), wall: median(taken[side].map((r) => r.wall)) });
  const ratio = (side: Exclude<Side, "unguarded">, key: keyof Measurement) =>
    median(taken[side].map((result, index) => result[key] / (taken.unguarded[index] as Measurement)[key]));
  return {
    steps: options.steps,
    perCall: { unguarded: perSide("unguarded"), noop: perSide("noop"), guarded: perSide("guarded") },
    cpuRatio: { noop: ratio("noop", "cpu"), guarded: ratio("guarded", "cpu") },
    wallRatio: { noop: ratio("noop", "wall"), guarded: ratio("guarded", "wall") },
    rounds: options.rounds,
  };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  if (args[0] === "--child") {
    const [, side, steps, warmup, invokes] = args;
    const result = await runChild(side as Side, { steps: Number(steps), warmup: Number(warmup), invokes: Number(invokes) });
    console.log(`processes-result ${JSON.stringify(result)}`);
  } else {
    const result = benchLoopInProcesses({ rounds: Number(args[0] ?? 3), steps: 20, warmup: 60, invokes: 100 });
    const { perCall, cpuRatio, wallRatio } = result;
    log(
      `${String(result.steps)}-step read loop, each side in a process of its own (${String(result.rounds)} rounds), per tool call: ` +
        `unguarded ${formatNs(perCall.unguarded.cpu)} CPU; no-op ${cpuRatio.noop.toFixed(3)}x, guarded ${cpuRatio.guarded.toFixed(3)}x ` +
        `(margin ${(cpuRatio.guarded - cpuRatio.noop).toFixed(3)}); wall: no-op ${wallRatio.noop.toFixed(3)}x, guarded ${wallRatio.guarded.toFixed(3)}x`,
    );
  }
}
