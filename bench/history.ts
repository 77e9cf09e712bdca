/**
 * History flatness: the guard's own cost per tool call must not grow with the thread's earlier
 * turns. For each history size, a guarded loop (N steps, one `document-read` call each) and the
 * same loop without middleware run in interleaved rounds; the input already holds `size` earlier
 * messages (alternating Human/AI text) before the current turn's `HumanMessage`.
 *
 * The guard's share is guarded − unguarded time per call. The framework's own per-step cost grows
 * with the history (its message reducer is linear in the thread), which is why the share, not the
 * ratio, is the figure that has to stay flat. Because that difference is small against a large,
 * noisy per-step cost on long threads, it is also reported in CPU time, and the guarded side times
 * the guard's own hooks (handlers excluded) directly: the same question, answered with less noise.
 */
import { AIMessage, HumanMessage, type BaseMessage } from "@langchain/core/messages";
import { InMemoryGuardrailStore } from "arkah-agent-guardrails";
import {
  admit,
  assertAllSucceeded,
  buildAgent,
  HookTimer,
  INVOKE_CONFIG,
  readLoopScript,
  turnInput,
  USER_MESSAGE,
  type AgentSetup,
} from "./agent.js";
import { interleave, log, measure, median, per, roundOptions, type Interleaved, type RoundOptions } from "./harness.js";

export interface HistoryOptions extends RoundOptions {
  readonly sizes: readonly number[];
  /** Steps per invoke (one read each). */
  readonly steps: number;
  /** Invokes per timed sample, each on a fresh agent. */
  readonly invokesPerSample: number;
}

export interface HistoryRow {
  readonly size: number;
  readonly result: Interleaved;
  /**
   * Guarded − unguarded, ns per tool call: the median of the per-round differences, which pairs
   * each guarded sample with its neighbouring unguarded one and so cancels slow drifts in load.
   */
  readonly shareNs: number;
  /** Standard error of `shareNs`. */
  readonly shareErrorNs: number;
  /** The same share in process CPU time, and its standard error. */
  readonly cpuShareNs: number;
  readonly cpuShareErrorNs: number;
  /**
   * The guard's own hook time per tool call, handlers excluded: the median `wrapToolCall`
   * invocation plus the median `wrapModelCall` invocation (each step has one of each).
   */
  readonly hookNs: number;
}

/** `size` earlier messages, alternating Human/AI text, with fixed ids like a stored thread. */
export function earlierTurns(size: number): BaseMessage[] {
  const messages: BaseMessage[] = [];
  for (let i = 0; i < size; i++) {
    messages.push(
      i % 2 === 0
        ? new HumanMessage({ id: `h-${String(i)}`, content: `Earlier request number ${String(i)}: tidy the headings.` })
        : new AIMessage({ id: `h-${String(i)}`, content: `Done with request ${String(i - 1)}; the headings are tidy.` }),
    );
  }
  return messages;
}

export async function benchHistory(options: HistoryOptions): Promise<HistoryRow[]> {
  const store = new InMemoryGuardrailStore();
  const input = turnInput("turn-history");
  await admit(store, input);
  const script = readLoopScript(options.steps);
  const calls = options.steps * options.invokesPerSample;

  const rows: HistoryRow[] = [];
  for (const size of options.sizes) {
    const history = earlierTurns(size);
    let hookTimer = new HookTimer();
    let samples = 0;
    const run = (guarded: boolean) => async () => {
      // Hook timings of the warm-up rounds are dropped: start afresh at the first measured one.
      if (guarded && samples++ === (options.warmup ?? 2)) hookTimer = new HookTimer();
      const setup: AgentSetup | undefined = guarded ? { turn: { input, store }, hookTimer } : undefined;
      const agents = Array.from({ length: options.invokesPerSample }, () => buildAgent(script, setup));
      const results: BaseMessage[][] = [];
      const measured = await measure(async () => {
        for (const agent of agents) {
          const result = await agent.invoke({ messages: [...history, new HumanMessage(USER_MESSAGE)] }, INVOKE_CONFIG);
          results.push(result.messages);
        }
      });
      for (const messages of results) assertAllSucceeded(messages, options.steps);
      return per(measured, calls);
    };
    const result = await interleave({
      ...roundOptions(options),
      baseline: run(false),
      subject: run(true),
    });
    log(`  history ${String(size)}: done`);
    const hookNs = median(hookTimer.tool) + median(hookTimer.model);
    rows.push({
      size,
      result,
      shareNs: result.pairedDifference,
      shareErrorNs: result.pairedDifferenceError,
      cpuShareNs: result.cpu.pairedDifference,
      cpuShareErrorNs: result.cpu.pairedDifferenceError,
      hookNs,
    });
  }
  return rows;
}
