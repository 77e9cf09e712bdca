/**
 * The store rows of `pnpm bench` alone (stages 7 and 9): in-memory and SQLite claim+settle pairs
 * against their baselines, printed, not written. `pnpm tsx bench/run-stores.ts`.
 */
import { loadavg } from "node:os";
import { benchSqliteClaimSettle } from "./sqlite.js";
import { benchStore } from "./store.js";

const memory = await benchStore({ pairs: 500, rounds: 400, minRounds: 30, budgetMs: 6_000, warmup: 30 });
console.log(
  `in-memory claim+settle pair vs bare async Map: ${memory.ratio.toFixed(2)}x time (target ≤ 1.50x), cpu ${memory.cpu.ratio.toFixed(2)}x`,
);
const sqlite = await benchSqliteClaimSettle({ pairs: 200, rounds: 60, minRounds: 10, budgetMs: 15_000, warmup: 3 });
console.log(
  `sqlite claim+settle vs the same statements through better-sqlite3: ${sqlite.rateRatio.toFixed(2)}x pairs/s (target ≥ 0.70x)`,
);
console.log(`load average ${loadavg().map((n) => n.toFixed(1)).join(" ")}`);
