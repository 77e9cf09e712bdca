/**
 * The test files Stryker runs (`pnpm test:mutation`): those that exercise the mutated sources
 * (decision, middleware, admission, guardrails, stores) in one process. Multi-process tests
 * (test/processes), the CLI and the docs check are left out: they reach these sources through paths
 * the in-process tests already cover, and each of their runs costs seconds.
 */
import type { ViteUserConfig } from "vitest/config";
import base from "./vitest.config.js";

// Not mergeConfig: it concatenates arrays, and `include` must replace the full suite's list.
const config: ViteUserConfig = {
  ...base,
  test: {
    ...base.test,
    include: [
      "test/unit/**/*.test.ts",
      "test/agent/**/*.test.ts",
      "test/security/**/*.test.ts",
      "test/stores/**/*.test.ts",
    ],
    // No JSON report: .ci/run reads .vitest-results.json, which must come from the full suite.
    reporters: ["default"],
  },
};

export default config;
