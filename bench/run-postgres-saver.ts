/**
 * Just the PostgresSaver comparison of `pnpm bench` (bench/postgres-saver.ts, issue 39), printed,
 * nothing written, so it can be re-run quickly on a quiet machine:
 *
 *   pnpm bench:postgres-saver            full (about 2 minutes)
 *   pnpm bench:postgres-saver --quick    one short slice of each, to check it runs
 *
 * On ARKAH_PG_URL when it is set (with synchronous_commit=on per session), otherwise on a
 * throwaway embedded server with fsync, synchronous_commit and full_page_writes on.
 */
import { loadavg } from "node:os";
import { log, renderNotes, renderTable } from "./harness.js";
import { benchPostgresSaver, SAVER_FULL, SAVER_QUICK, saverRows } from "./postgres-saver.js";

const load = () =>
  loadavg()
    .map((value) => value.toFixed(2))
    .join(" / ");
const before = load();
const started = performance.now();
const rows = saverRows(await benchPostgresSaver(process.argv.includes("--quick") ? SAVER_QUICK : SAVER_FULL));
log(`done in ${((performance.now() - started) / 1000).toFixed(0)} s; load average ${before} before, ${load()} after`);
console.log(`\n${renderTable(rows)}\n\n${renderNotes(rows)}\n`);
