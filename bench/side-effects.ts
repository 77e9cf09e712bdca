/**
 * A `side-effect` call against the same call as `auxiliary`, per call, on the in-memory store: the
 * price of the fence (the claim before the body, the settlement after, carrying the audit event: 2
 * store calls where an auxiliary call makes 1, its audit event; counted, not assumed) on
 * top of everything both kinds share (admission check, parse, authorize, the seal, the audit
 * event). One turn per sample, `calls` model steps of one call each, every call a distinct effect
 * (so every claim is acquired, none replayed). Run alone: `pnpm tsx bench/run-side-effects.ts`.
 */
import { HumanMessage, type BaseMessage } from "@langchain/core/messages";
import { createAgent, tool } from "langchain";
import { z } from "zod";
import { createDocumentGuardrails, InMemoryGuardrailStore, type GuardrailStore } from "arkah-agent-guardrails";
import { ScriptedModel } from "arkah-agent-guardrails/testing";
import { admit, assertAllSucceeded, INVOKE_CONFIG, turnInput, USER_MESSAGE } from "./agent.js";
import { formatNs, interleave, log, measure, per, roundOptions, type ResultRow, type RoundOptions } from "./harness.js";

export interface SideEffectOptions extends RoundOptions {
  /** Calls (model steps) per timed sample. */
  readonly calls: number;
}

const notify = tool(({ to }) => `notified ${to}`, {
  name: "notify",
  description: "Notify someone.",
  schema: z.object({ to: z.string() }),
});

/** Counts the store calls a run makes, by method. */
function counting(store: GuardrailStore, counts: Map<string, number>): GuardrailStore {
  return new Proxy(store, {
    get(target, property, receiver) {
      const value: unknown = Reflect.get(target, property, receiver);
      if (typeof value !== "function" || typeof property !== "string") return value;
      return (...args: unknown[]) => {
        counts.set(property, (counts.get(property) ?? 0) + 1);
        return (value as (...inner: unknown[]) => unknown).apply(target, args);
      };
    },
  });
}

export async function benchSideEffects(options: SideEffectOptions): Promise<ResultRow[]> {
  let sample = 0;
  const counts = { auxiliary: new Map<string, number>(), "side-effect": new Map<string, number>() };
  const run = (kind: "auxiliary" | "side-effect") => async () => {
    const store = new InMemoryGuardrailStore();
    const input = turnInput(`turn-effects-${String(sample++)}`);
    await admit(store, input);
    const script = [
      ...Array.from({ length: options.calls }, (_, index) => ({ toolCalls: [{ id: `n-${String(index)}`, name: "notify", args: { to: `user-${String(index)}` } }] })),
      { content: "done" },
    ];
    const tally = new Map<string, number>();
    const agent = createAgent({
      model: new ScriptedModel(script),
      tools: [notify],
      middleware: [
        createDocumentGuardrails({
          input,
          store: counting(store, tally),
          userMessageLabel: "user",
          authorize: () => true,
          tools: { notify: { kind } },
        }),
      ],
    });
    let result: { messages: BaseMessage[] } | undefined;
    const measured = await measure(async () => {
      result = await agent.invoke({ messages: [new HumanMessage(USER_MESSAGE)] }, INVOKE_CONFIG);
    });
    assertAllSucceeded(result?.messages ?? [], options.calls);
    counts[kind] = tally;
    return per(measured, options.calls);
  };
  const result = await interleave({
    ...roundOptions(options),
    baseline: run("auxiliary"),
    subject: run("side-effect"),
    onRound: (round) => {
      if ((round + 1) % 10 === 0) log(`  side effects: round ${String(round + 1)}/${String(options.rounds)}`);
    },
  });
  const perCall = (kind: keyof typeof counts) =>
    [...counts[kind].values()].reduce((sum, n) => sum + n, 0) / options.calls;
  const claims = (counts["side-effect"].get("claimEffect") ?? 0) / options.calls;
  const settles = (counts["side-effect"].get("settleEffect") ?? 0) / options.calls;
  if (claims !== 1 || settles !== 1) throw new Error(`bench: expected one claim and one settlement a call, got ${String(claims)} and ${String(settles)}`);
  const extra = Math.round((perCall("side-effect") - perCall("auxiliary")) * 10) / 10;
  const signed = (ns: number) => `${ns >= 0 ? "+" : ""}${formatNs(ns)}`;
  return [
    {
      benchmark: "side-effect call vs auxiliary call (memory store, per call)",
      baseline: `${formatNs(result.baseline)}/call`,
      subject: `${formatNs(result.subject)}/call`,
      ratio: `${signed(result.pairedDifference)}/call`,
      cpuRatio: `${signed(result.cpu.pairedDifference)}/call`,
      // An auxiliary call appends its audit event (1 store call); a side effect claims, then settles
      // with its audit event in the same store call (2).
      target: "claim + settle: 2 store calls (auxiliary: 1)",
      pass: extra === 1,
      note:
        `store calls a call, the turn's admission check included: ${perCall("auxiliary").toFixed(2)} → ${perCall("side-effect").toFixed(2)} ` +
        `(claimEffect and settleEffect carrying the audit event, instead of appendAudit); ` +
        `paired difference ${formatNs(result.pairedDifference)} ± ${formatNs(result.pairedDifferenceError)} wall, ` +
        `${formatNs(result.cpu.pairedDifference)} ± ${formatNs(result.cpu.pairedDifferenceError)} CPU; ratio ${result.ratio.toFixed(3)}x; ` +
        `${String(options.calls)} calls a sample, ${String(result.baselineSamples.length)} rounds`,
    },
  ];
}

/** The full run's settings (`pnpm bench` and bench/run-side-effects.ts). */
export const SIDE_EFFECT_ROUNDS: SideEffectOptions = { rounds: 80, calls: 10, budgetMs: 30_000, minRounds: 20 };
