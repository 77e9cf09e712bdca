/**
 * Promises created per tool call in the read loop, through a no-op middleware and through the
 * guardrails (an async hook counts PROMISE inits over one invoke, after three warm-up invokes). On
 * Node 20 every promise also runs AsyncLocalStorage's propagation for each enabled store, so the
 * guard's extra promises cost more than their allocation.
 *
 *   pnpm build && TSX_TSCONFIG_PATH=bench/tsconfig.dist.json pnpm tsx bench/promises.ts [steps]
 */
import { createHook } from "node:async_hooks";
import { HumanMessage } from "@langchain/core/messages";
import { InMemoryGuardrailStore } from "arkah-agent-guardrails";
import { admit, buildAgent, INVOKE_CONFIG, readLoopScript, turnInput, USER_MESSAGE, type AgentSetup } from "./agent.js";

const steps = Number(process.argv[2] ?? 20);
let promises = 0;
const hook = createHook({
  init(_id, type) {
    if (type === "PROMISE") promises++;
  },
});
const store = new InMemoryGuardrailStore();
const input = turnInput("turn-promises");
await admit(store, input);
const sides: readonly (readonly [string, AgentSetup])[] = [
  ["no-op middleware", { noop: true }],
  ["guardrails", { turn: { input, store } }],
];
const perCall: number[] = [];
for (const [name, setup] of sides) {
  const invoke = (agent: ReturnType<typeof buildAgent>) => agent.invoke({ messages: [new HumanMessage(USER_MESSAGE)] }, INVOKE_CONFIG);
  for (let warmup = 0; warmup < 3; warmup++) await invoke(buildAgent(readLoopScript(steps), setup));
  const agent = buildAgent(readLoopScript(steps), setup);
  promises = 0;
  hook.enable();
  await invoke(agent);
  hook.disable();
  perCall.push(promises / steps);
  console.log(`${name}: ${(promises / steps).toFixed(1)} promises per tool call (${String(steps)}-step read loop)`);
}
console.log(`the guard's own: ${((perCall[1] ?? 0) - (perCall[0] ?? 0)).toFixed(1)} promises per tool call`);
