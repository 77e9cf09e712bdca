// `pnpm verify`: the full check, one `pnpm <script>` at a time, stopping at the first failure, then
// a table of what each step took. The tests start their own throwaway PostgreSQL (see
// test/setup/postgres.ts) unless ARKAH_PG_URL points at one.
import { spawnSync } from "node:child_process";

const STEPS = [
  "lint",
  "typecheck",
  // The API reference, with every export documented: TypeDoc warnings fail it (typedoc.json).
  "docs:api",
  "test:coverage",
  "check:package",
  "demo",
  "example:guardrails",
  "example:durable",
  "example:approvals",
  "smoke",
];

const timings = [];
let failed;
for (const step of STEPS) {
  process.stdout.write(`\n=== verify: ${step}\n`);
  const started = process.hrtime.bigint();
  const run = spawnSync("pnpm", [step], { stdio: "inherit" });
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  const status = run.status ?? 1;
  timings.push({ step, seconds, status });
  if (status !== 0) {
    failed = step;
    break;
  }
}

process.stdout.write("\n=== verify: timings\n");
for (const { step, seconds, status } of timings) {
  const outcome = status === 0 ? "ok" : `FAILED (exit ${String(status)})`;
  process.stdout.write(`${`verify: ${step}`.padEnd(34)} ${seconds.toFixed(1).padStart(7)}s  ${outcome}\n`);
}
const total = timings.reduce((sum, { seconds }) => sum + seconds, 0);
process.stdout.write(`${"verify: total".padEnd(34)} ${total.toFixed(1).padStart(7)}s\n`);
if (failed !== undefined) {
  process.stdout.write(`verify: FAILED at ${failed}\n`);
  process.exit(1);
}
process.stdout.write("verify: passed\n");
