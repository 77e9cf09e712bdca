import { existsSync } from "node:fs";
import { defineConfig } from "tsup";

/**
 * Every public entry point: output path under dist/ (without extension) -> source file.
 * The output names must match package.json `exports` (and `bin`). Adding an entry is one line here,
 * plus its `exports` entry and its tsconfig `paths` line (vitest derives its aliases from those).
 * Entries whose source does not exist yet are skipped, except those that must always ship.
 */
const ENTRIES: Record<string, string> = {
  index: "src/index.ts",
  "testing/index": "src/testing/index.ts",
  // Not an export: the child process raceGuardrailStore forks, found beside testing/index.
  "testing/race-child": "src/testing/race/child.ts",
  store: "src/store/index.ts",
  sqlite: "src/adapters/sqlite/index.ts",
  postgres: "src/adapters/postgres/index.ts",
  "cli/index": "src/cli/index.ts",
  otel: "src/otel/index.ts",
};

const REQUIRED = new Set(["index", "testing/index", "testing/race-child", "store"]);

const entry = Object.fromEntries(
  Object.entries(ENTRIES).filter(([name, source]) => REQUIRED.has(name) || existsSync(source)),
);

/**
 * Never bundled: the peers, the optional peers, and the package's own name (a module that imports
 * `arkah-agent-guardrails/...` must get the consumer's single installed copy).
 */
const EXTERNAL: (string | RegExp)[] = [
  /^langchain(\/.*)?$/,
  /^@langchain\//,
  /^zod(\/.*)?$/,
  /^better-sqlite3(\/.*)?$/,
  /^pg(\/.*)?$/,
  /^pg-[a-z-]+$/,
  /^@cfworker\/json-schema(\/.*)?$/,
  /^@opentelemetry\//,
  /^vitest(\/.*)?$/,
  /^arkah-agent-guardrails(\/.*)?$/,
];

export default defineConfig({
  entry,
  format: ["esm", "cjs"],
  // package.json is `"type": "module"`: ESM -> .js / .d.ts, CJS -> .cjs / .d.cts.
  dts: true,
  clean: true,
  sourcemap: true,
  target: "node20",
  platform: "node",
  treeshake: true,
  // Shared modules become chunks in both formats, so the CJS entries (index, testing, stores) share
  // one copy of each class instead of each bundling its own.
  splitting: true,
  external: EXTERNAL,
  skipNodeModulesBundle: true,
  outDir: "dist",
  shims: false,
  minify: false,
});
