/**
 * Just the telemetry benchmarks of `pnpm bench` (bench/telemetry.ts), printed, nothing written:
 *
 *   pnpm tsx bench/run-telemetry.ts            full (about a minute)
 *   pnpm tsx bench/run-telemetry.ts --quick    a few rounds, to check they run
 */
import { loadavg } from "node:os";
import { log, renderNotes, renderTable } from "./harness.js";
import { benchTelemetry } from "./telemetry.js";

const quick = process.argv.includes("--quick");
const load = () =>
  loadavg()
    .map((value) => value.toFixed(2))
    .join(" / ");
const before = load();
const started = performance.now();
const rows = await benchTelemetry({ quick, log });
log(`done in ${((performance.now() - started) / 1000).toFixed(0)} s; load average ${before} before, ${load()} after`);
console.log(`\n${renderTable(rows)}\n\n${renderNotes(rows)}\n`);
