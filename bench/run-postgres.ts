/**
 * Just the PostgreSQL benchmarks of `pnpm bench` (bench/postgres.ts), printed, nothing written:
 *
 *   pnpm tsx bench/run-postgres.ts            full (about 2 minutes)
 *   pnpm tsx bench/run-postgres.ts --quick    a few rounds of each, to check they run
 *
 * On ARKAH_PG_URL when it is set, otherwise on a throwaway embedded server.
 */
import { loadavg } from "node:os";
import { log, renderNotes, renderTable } from "./harness.js";
import { benchPostgres } from "./postgres.js";

const quick = process.argv.includes("--quick");
const load = () =>
  loadavg()
    .map((value) => value.toFixed(2))
    .join(" / ");
const before = load();
const started = performance.now();
const report = await benchPostgres({ quick });
log(`done in ${((performance.now() - started) / 1000).toFixed(0)} s; load average ${before} before, ${load()} after`);
console.log(`\n${renderTable(report.rows)}\n\n${renderNotes(report.rows)}\n`);
if (report.findings.length > 0) console.log(`PostgreSQL, what limits the turn curve:\n${report.findings.map((line) => `- ${line}`).join("\n")}`);
