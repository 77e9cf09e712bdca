import { readdirSync, readFileSync } from "node:fs";
import { availableParallelism } from "node:os";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";
import { defineConfig } from "vitest/config";

const root = dirname(fileURLToPath(import.meta.url));

/**
 * `import ... from "arkah-agent-guardrails[/sub]"` resolves to the TypeScript sources, from the same
 * tsconfig `paths` that tsc and tsx use, so the two can never disagree. Exact matches only, so
 * `arkah-agent-guardrails/testing` is never taken for `arkah-agent-guardrails` + "/testing".
 */
function aliasesFromTsconfig(): { find: RegExp; replacement: string }[] {
  const file = join(root, "tsconfig.json");
  const read = ts.readConfigFile(file, ts.sys.readFile);
  if (read.error) throw new Error(ts.flattenDiagnosticMessageText(read.error.messageText, "\n"));
  const config = read.config as { compilerOptions?: { paths?: Record<string, string[]> } };
  const paths = config.compilerOptions?.paths ?? {};
  return Object.entries(paths).flatMap(([name, targets]) => {
    const target = targets[0];
    if (target === undefined || name.includes("*")) return [];
    const escaped = name.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&");
    return [{ find: new RegExp(`^${escaped}$`), replacement: resolve(root, target) }];
  });
}

/** True when a module only re-exports (`export ... from`, `export type ...`): nothing to cover. */
function isPureReExport(file: string): boolean {
  const source = ts.createSourceFile(file, readFileSync(file, "utf8"), ts.ScriptTarget.Latest);
  return source.statements.every(
    (statement) =>
      (ts.isExportDeclaration(statement) && statement.moduleSpecifier !== undefined) ||
      ts.isInterfaceDeclaration(statement) ||
      ts.isTypeAliasDeclaration(statement) ||
      (ts.isImportDeclaration(statement) && statement.importClause?.phaseModifier === ts.SyntaxKind.TypeKeyword),
  );
}

/** `src/**\/index.ts` barrels that are pure re-exports, as globs relative to the root. */
function reExportBarrels(): string[] {
  const found: string[] = [];
  const walk = (dir: string): void => {
    let entries;
    try {
      entries = readdirSync(dir, { withFileTypes: true });
    } catch {
      return;
    }
    for (const entry of entries) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.name === "index.ts" && isPureReExport(path)) found.push(relative(root, path));
    }
  };
  walk(join(root, "src"));
  return found;
}

export default defineConfig({
  resolve: {
    alias: aliasesFromTsconfig(),
  },
  test: {
    environment: "node",
    globals: false,
    include: ["test/**/*.test.ts"],
    // A PostgreSQL server for the run: ARKAH_PG_URL, or a throwaway embedded one.
    globalSetup: ["test/setup/postgres.ts"],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // At least two test files at once: vitest's default (one fewer than the cores) is a single
    // worker on a two-core machine such as CI's, where the suites spend much of their time waiting
    // on PostgreSQL, child processes and timers (the full suite on Node 20: about 1.5x faster).
    maxWorkers: Math.max(availableParallelism() - 1, 2),
    // `default` for people, `json` for CI (.ci/run reads numPassedTests / numFailedTests).
    reporters: ["default", "json"],
    outputFile: { json: ".vitest-results.json" },
    coverage: {
      provider: "v8",
      include: ["src/**/*.ts"],
      exclude: ["src/**/*.d.ts", ...reExportBarrels()],
      reporter: ["text", "json-summary"],
      reportsDirectory: "coverage",
      thresholds: { lines: 90 },
    },
  },
});
