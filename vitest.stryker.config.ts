/**
 * The test files Stryker runs (`pnpm test:mutation`): those that exercise the mutated sources
 * (decision, middleware, admission, guardrails, stores) in one process. Multi-process tests
 * (test/processes), the CLI and the docs check are left out: they reach these sources through paths
 * the in-process tests already cover, and each of their runs costs seconds.
 */
import type { ViteUserConfig } from "vitest/config";
import base from "./vitest.config.js";

const ALL = [
  "test/unit/**/*.test.ts",
  "test/agent/**/*.test.ts",
  "test/security/**/*.test.ts",
  "test/stores/**/*.test.ts",
  "test/properties/**/*.test.ts",
];

/**
 * `ARKAH_MUTATION_TESTS` (comma-separated globs) narrows the set for one area's run. Not Stryker's
 * `--testFiles`: with it, Stryker 9.6 activates static mutants (those in code run at module load,
 * such as a module-level arrow function) only after the module has loaded, so they always survive.
 */
const narrowed = process.env.ARKAH_MUTATION_TESTS?.split(",").map((glob) => glob.trim()).filter((glob) => glob !== "");

// Not mergeConfig: it concatenates arrays, and `include` must replace the full suite's list.
const config: ViteUserConfig = {
  ...base,
  test: {
    ...base.test,
    include: narrowed !== undefined && narrowed.length > 0 ? narrowed : ALL,
    // No JSON report: .ci/run reads .vitest-results.json, which must come from the full suite.
    reporters: ["default"],
  },
};

export default config;
