/**
 * The read loop three ways (no middleware, a no-op middleware, the guardrails) at 10 and 120 steps,
 * alone: `pnpm bench`'s first rows, without writing docs/benchmarks.md.
 *
 *   pnpm build && TSX_TSCONFIG_PATH=bench/tsconfig.dist.json pnpm tsx bench/run-loop.ts [--quick] [--no-gc] [steps...]
 *
 * `--no-gc`: no full GC before each sample (`pnpm bench` does one), as a server runs.
 */
import { benchLoopAgainstNoop } from "./agent.js";
import { formatNs, log } from "./harness.js";

const args = process.argv.slice(2);
const quick = args.includes("--quick");
const collectGarbage = !args.includes("--no-gc");
const lengths = args.filter((arg) => /^\d+$/.test(arg)).map(Number);
for (const steps of lengths.length === 0 ? [10, 120] : lengths) {
  const three = await benchLoopAgainstNoop(
    quick
      ? { steps, rounds: 2, warmup: 1, collectGarbage }
      : { steps, rounds: 60, minRounds: 10, budgetMs: steps > 50 ? 60_000 : 20_000, warmup: 3, collectGarbage },
  );
  log(
    `${String(steps)} steps${collectGarbage ? "" : " (no GC before samples)"}: unguarded ${formatNs(three.guarded.baseline)}/call; no-op ${three.noop.ratio.toFixed(3)}x, guarded ${three.guarded.ratio.toFixed(3)}x ` +
      `(margin ${(three.guarded.ratio - three.noop.ratio).toFixed(3)}; CPU ${(three.guarded.cpu.ratio - three.noop.cpu.ratio).toFixed(3)}); ` +
      `guard over no-op ${formatNs(three.guardOverNoop.pairedDifference)} ± ${formatNs(three.guardOverNoop.pairedDifferenceError)} a call; ` +
      `${String(three.guarded.baselineSamples.length)} rounds`,
  );
}
