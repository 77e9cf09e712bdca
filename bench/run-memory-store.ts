/**
 * The in-memory claim+settle row of `pnpm bench` alone (stage 7), with the same settings, printed,
 * not written. Build first: `pnpm build && TSX_TSCONFIG_PATH=bench/tsconfig.dist.json tsx
 * bench/run-memory-store.ts` (the row measures dist/, as `pnpm bench` does).
 */
import { loadavg } from "node:os";
import { formatNs } from "./harness.js";
import { benchStore } from "./store.js";

const memory = await benchStore({ pairs: 500, rounds: 400, minRounds: 30, budgetMs: 6_000, warmup: 30 });
console.log(
  `in-memory claim+settle pair vs bare async Map: ${memory.ratio.toFixed(2)}x time (target ≤ 1.50x), ` +
    `cpu ${memory.cpu.ratio.toFixed(2)}x, paired ${memory.pairedRatio.toFixed(2)}x; ` +
    `${formatNs(memory.subject)}/pair vs ${formatNs(memory.baseline)}/pair; ` +
    `${String(memory.subjectSamples.length)} rounds; load ${loadavg().map((n) => n.toFixed(1)).join(" ")}`,
);
