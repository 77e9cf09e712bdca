/**
 * Mutation testing (`pnpm test:mutation`): Stryker mutates the decision pipeline, the middleware,
 * admission, the guardrails, the store adapters and the contract steps they share (validate, events,
 * turns), and runs the tests that cover each mutant (perTest).
 * Narrow a run with `pnpm test:mutation --mutate 'src/decision/**'`. See docs/reliability.md.
 */
export default {
  testRunner: "vitest",
  vitest: { configFile: "vitest.stryker.config.ts", related: false },
  plugins: ["@stryker-mutator/vitest-runner"],
  mutate: [
    "src/decision/**/*.ts",
    "src/middleware.ts",
    "src/admission.ts",
    "src/guardrails/**/*.ts",
    "src/adapters/**/*.ts",
    "src/store/validate.ts",
    "src/store/events.ts",
    "src/store/turns.ts",
    // Barrels only re-export: no behaviour to mutate.
    "!src/adapters/sqlite/index.ts",
    "!src/adapters/postgres/index.ts",
  ],
  coverageAnalysis: "perTest",
  // Results of earlier runs are reused for unchanged code and tests; a local cache, gitignored
  // (docs/reliability.md says why). `--force` ignores it.
  incremental: true,
  incrementalFile: "reports/stryker-incremental.json",
  // Two cores shared with other work: one test runner each, generous timeouts so load is not a kill.
  concurrency: 2,
  timeoutMS: 60_000,
  timeoutFactor: 3,
  dryRunTimeoutMinutes: 30,
  reporters: ["clear-text", "progress-append-only", "html", "json"],
  htmlReporter: { fileName: "reports/mutation/index.html" },
  jsonReporter: { fileName: "reports/mutation/mutation.json" },
  clearTextReporter: { allowColor: false, logTests: false, reportScoreTable: true },
  thresholds: { high: 85, low: 70, break: null },
  tempDirName: ".stryker-tmp",
  cleanTempDir: "always",
};
