/**
 * Where the guarded read loop allocates: V8's sampling heap profiler (collected objects included),
 * bytes per tool call by allocating function, guarded against the no-op middleware. A companion to
 * bench/allocation.ts, which counts the total exactly; this one says where it goes (sampled, so
 * each figure is an estimate).
 *
 *   TSX_TSCONFIG_PATH=bench/tsconfig.dist.json pnpm tsx bench/allocation-sites.ts [steps] [invokes]
 *
 * (after `pnpm build`, to profile the build as it ships; without the variable it profiles src/.)
 */
import { Session } from "node:inspector/promises";
import { HumanMessage } from "@langchain/core/messages";
import { InMemoryGuardrailStore } from "arkah-agent-guardrails";
import { admit, buildAgent, INVOKE_CONFIG, readLoopScript, turnInput, USER_MESSAGE, type AgentSetup } from "./agent.js";

interface HeapNode {
  readonly callFrame: { readonly functionName: string; readonly url: string; readonly lineNumber: number };
  readonly selfSize: number;
  readonly children: readonly HeapNode[];
}

const steps = Number(process.argv[2] ?? 120);
const invokes = Number(process.argv[3] ?? 20);

async function sites(setup: AgentSetup): Promise<Map<string, number>> {
  const once = async () => {
    await buildAgent(readLoopScript(steps), setup).invoke({ messages: [new HumanMessage(USER_MESSAGE)] }, INVOKE_CONFIG);
  };
  for (let index = 0; index < 3; index++) await once();
  const session = new Session();
  session.connect();
  await session.post("HeapProfiler.enable");
  await session.post("HeapProfiler.startSampling", {
    samplingInterval: 256,
    includeObjectsCollectedByMajorGC: true,
    includeObjectsCollectedByMinorGC: true,
  });
  for (let index = 0; index < invokes; index++) await once();
  const { profile } = (await session.post("HeapProfiler.stopSampling")) as unknown as { profile: { head: HeapNode } };
  session.disconnect();
  const bySite = new Map<string, number>();
  const walk = (node: HeapNode) => {
    const { functionName, url, lineNumber } = node.callFrame;
    const file = url.replace(/^.*\/(node_modules\/\.pnpm\/[^/]+\/node_modules\/|dist\/|src\/|bench\/)/, "$1").replace(/^node_modules\/\.pnpm\/[^/]+\/node_modules\//, "");
    const key = `${functionName || "(anonymous)"} ${file}:${String(lineNumber + 1)}`;
    bySite.set(key, (bySite.get(key) ?? 0) + node.selfSize);
    for (const child of node.children) walk(child);
  };
  walk(profile.head);
  return bySite;
}

const store = new InMemoryGuardrailStore();
const input = turnInput("alloc-sites");
await admit(store, input);
const noop = await sites({ noop: true });
const guarded = await sites({ turn: { input, store } });
const calls = steps * invokes;
const total = (map: Map<string, number>) => [...map.values()].reduce((sum, bytes) => sum + bytes, 0);
console.log(`per tool call (sampled): no-op ${(total(noop) / calls / 1024).toFixed(1)} KB, guarded ${(total(guarded) / calls / 1024).toFixed(1)} KB`);
const difference = [...new Set([...noop.keys(), ...guarded.keys()])]
  .map((key) => [key, ((guarded.get(key) ?? 0) - (noop.get(key) ?? 0)) / calls] as const)
  .sort((a, b) => b[1] - a[1]);
console.log("\nguarded − no-op, bytes per tool call, by allocating function:");
for (const [key, bytes] of difference.slice(0, 45)) console.log(`${bytes.toFixed(0).padStart(7)} B  ${key}`);
