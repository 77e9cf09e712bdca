/**
 * CPU profile of the guarded read loop at a given history size (or, with `turn`, of read-then-write
 * turns with admitTurn, one server-wide middleware), summarised as self time by module: the guard's
 * own code (src/) against LangChain, LangGraph, zod and the rest. Not part of `pnpm bench`; run
 * `pnpm tsx bench/profile-hooks.ts [historySize | turn] [invokes]`.
 */
import { Session } from "node:inspector/promises";
import { HumanMessage } from "@langchain/core/messages";
import { randomUUID } from "node:crypto";
import { InMemoryGuardrailStore, turnContext } from "../src/index.js";
import { admit, buildAgent, INVOKE_CONFIG, readLoopScript, readWriteScript, turnInput, USER_MESSAGE } from "./agent.js";
import { earlierTurns } from "./history.js";

interface ProfileNode {
  readonly id: number;
  readonly callFrame: { readonly url: string; readonly functionName: string };
}
interface Profile {
  readonly nodes: readonly ProfileNode[];
  readonly samples: readonly number[];
  readonly timeDeltas: readonly number[];
}

const turns = process.argv[2] === "turn";
const size = turns ? 0 : Number(process.argv[2] ?? 0);
const invokes = Number(process.argv[3] ?? 40);
/** Tool calls per invoke: the loop's read steps, or a turn's read and write. */
const steps = turns ? 2 : 20;
const store = new InMemoryGuardrailStore();
const input = turnInput("turn-profile");
await admit(store, input);
const history = earlierTurns(size);
const loopOnce = async () => {
  const agent = buildAgent(readLoopScript(steps), { turn: { input, store } });
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
for (let index = 0; index < 3; index++) await once();

const session = new Session();
session.connect();
await session.post("Profiler.enable");
await session.post("Profiler.setSamplingInterval", { interval: 50 });
await session.post("Profiler.start");
for (let index = 0; index < invokes; index++) await once();
const { profile } = (await session.post("Profiler.stop")) as unknown as { profile: Profile };

const byId = new Map(profile.nodes.map((node) => [node.id, node]));
const buckets = new Map<string, number>();
const functions = new Map<string, number>();
let total = 0;
profile.samples.forEach((id, index) => {
  const delta = profile.timeDeltas[index] ?? 0;
  total += delta;
  const { url, functionName } = byId.get(id)?.callFrame ?? { url: "", functionName: "" };
  const bucket = url.includes("node_modules")
      ? (/node_modules\/(?:\.pnpm\/)?((?:@[^/+]+[/+])?[^/@]+)/.exec(url)?.[1] ?? "node_modules")
      : url === ""
        ? functionName === "(garbage collector)" ? "GC" : `(${functionName || "native"})`
        : url.startsWith("node:")
          ? "node internals"
          : url.includes("/src/testing/") || url.includes("/bench/")
            ? "bench harness and ScriptedModel"
            : url.includes("/src/")
              ? "guard (src/)"
              : url;
  buckets.set(bucket, (buckets.get(bucket) ?? 0) + delta);
  if (bucket === "guard (src/)") {
    const key = `${functionName || "(anonymous)"} ${url.slice(url.indexOf("/src/") + 1)}`;
    functions.set(key, (functions.get(key) ?? 0) + delta);
  }
});
const calls = invokes * steps * (turns ? 10 : 1);
const line = ([name, us]: [string, number]) =>
  `${name.padEnd(60)} ${(us / 1000).toFixed(1).padStart(8)} ms ${((100 * us) / total).toFixed(1).padStart(5)} % ${(us / calls).toFixed(1).padStart(7)} µs/call`;
console.log(
  turns
    ? `read-then-write turns: ${String(invokes * 10)} turns, per tool call (2 a turn), total ${(total / 1000).toFixed(0)} ms`
    : `history ${String(size)}, ${String(invokes)} invokes x ${String(steps)} steps, total ${(total / 1000).toFixed(0)} ms`,
);
for (const entry of [...buckets].sort((a, b) => b[1] - a[1]).slice(0, 14)) console.log(line(entry));
console.log("\nguard functions:");
for (const entry of [...functions].sort((a, b) => b[1] - a[1]).slice(0, 15)) console.log(line(entry));
