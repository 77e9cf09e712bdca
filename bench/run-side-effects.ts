/**
 * Just the side-effect row of `pnpm bench` (bench/side-effects.ts), printed, nothing written:
 *
 *   pnpm tsx bench/run-side-effects.ts            full (about 20 seconds)
 *   pnpm tsx bench/run-side-effects.ts --quick    a few rounds, to check it runs
 */
import { log, renderNotes, renderTable } from "./harness.js";
import { benchSideEffects, SIDE_EFFECT_ROUNDS } from "./side-effects.js";

const quick = process.argv.includes("--quick");
const started = performance.now();
const rows = await benchSideEffects(quick ? { rounds: 3, warmup: 1, calls: 10 } : SIDE_EFFECT_ROUNDS);
log(`done in ${((performance.now() - started) / 1000).toFixed(0)} s`);
console.log(`\n${renderTable(rows)}\n\n${renderNotes(rows)}\n`);
