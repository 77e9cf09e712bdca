/**
 * `pnpm test:mutation:area <area...> [stryker options]`: Stryker over one area of the mutated code
 * with the tests that reach it, each area with its own incremental cache and report, then a summary
 * (per file, and every surviving mutant). `pnpm test:mutation` is the whole set in one run.
 * See docs/reliability.md, "Mutation score".
 */
import { spawnSync } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { summarize } from "./summary.js";

interface Area {
  readonly mutate: readonly string[];
  /** Test globs, passed as ARKAH_MUTATION_TESTS (vitest.stryker.config.ts says why not --testFiles). */
  readonly tests: readonly string[];
}

const IN_PROCESS = ["test/unit/**/*.test.ts", "test/agent/**/*.test.ts", "test/security/**/*.test.ts"];
/** The agent tests that reach src/decision/ directly: narrower than the whole agent suite, for speed. */
const DECISION_AGENT_TESTS = ["call-checks", "mutation-batch", "claims", "read-evidence", "admission", "inner-refusal", "middleware-edges"];
/**
 * In every area: a static mutant that makes a module throw while loading stops each test file that
 * imports it from loading, which the vitest runner reports as no tests, so Stryker as a survivor.
 * This file imports the entry points inside its tests, where such a throw fails a test.
 */
const ENTRY_POINTS = "test/unit/entry-points.test.ts";
const PROPERTIES = ["test/properties/agent-oracle.test.ts", "test/properties/regressions.test.ts"];

export const AREAS: Readonly<Record<string, Area>> = {
  decision: {
    mutate: ["src/decision/**/*.ts"],
    tests: [
      ENTRY_POINTS,
      "test/unit/plan.test.ts",
      "test/unit/transcript.test.ts",
      "test/security/**/*.test.ts",
      ...DECISION_AGENT_TESTS.map((name) => `test/agent/${name}.test.ts`),
      ...PROPERTIES,
    ],
  },
  admission: { mutate: ["src/admission.ts"], tests: IN_PROCESS },
  middleware: { mutate: ["src/middleware.ts"], tests: [...IN_PROCESS, ...PROPERTIES] },
  guardrails: { mutate: ["src/guardrails/**/*.ts"], tests: IN_PROCESS },
  validate: {
    mutate: ["src/store/validate.ts", "src/store/events.ts"],
    tests: [
      ENTRY_POINTS,
      "test/unit/store-validate.test.ts",
      "test/unit/memory-store.test.ts",
      "test/stores/memory.conformance.test.ts",
      "test/agent/store-fault-regressions.test.ts",
      "test/agent/audit.test.ts",
    ],
  },
  memory: {
    mutate: ["src/adapters/memory.ts"],
    tests: [ENTRY_POINTS, "test/unit/memory-store.test.ts", "test/stores/memory.conformance.test.ts", "test/properties/store-model.test.ts"],
  },
  sqlite: {
    mutate: ["src/adapters/sqlite/**/*.ts", "!src/adapters/sqlite/index.ts"],
    tests: [ENTRY_POINTS, "test/stores/sqlite.test.ts", "test/stores/sqlite-errors.test.ts", "test/stores/sqlite.conformance.test.ts"],
  },
  postgres: {
    mutate: ["src/adapters/postgres/**/*.ts", "!src/adapters/postgres/index.ts"],
    tests: [ENTRY_POINTS, "test/stores/postgres.test.ts", "test/stores/postgres-errors.test.ts", "test/stores/postgres.conformance.test.ts", "test/stores/postgres-terminate.test.ts"],
  },
};

const RERUN_SURVIVORS = "--rerun-survivors";
const FILES = "--files";

interface Results {
  files: Record<string, unknown>;
}

const readResults = (path: string): Results | undefined =>
  existsSync(path) ? (JSON.parse(readFileSync(path, "utf8")) as Results) : undefined;

/**
 * A run narrowed with `--files` writes a cache and a report of those files only: the area's other
 * files' results are put back, so an area too long for one sitting is measured in parts.
 */
function keepOtherFiles(path: string, before: Results | undefined, measured: readonly string[]): void {
  const after = readResults(path);
  if (before === undefined || after === undefined) return;
  for (const [file, result] of Object.entries(before.files)) {
    if (!measured.includes(file) && !(file in after.files)) after.files[file] = result;
  }
  writeFileSync(path, JSON.stringify(after));
}

/** `--files a.ts,b.ts`: files of the area to measure alone; each must exist and lie in the area. */
function narrowTo(area: Area, list: string): string[] | string {
  const files = list.split(",").filter((file) => file !== "");
  const roots = area.mutate.filter((glob) => !glob.startsWith("!")).map((glob) => glob.split("*")[0] ?? glob);
  for (const file of files) {
    if (!existsSync(file)) return `${FILES}: no such file: ${file}`;
    if (!roots.some((root) => file === root || (root.endsWith("/") && file.startsWith(root)))) {
      return `${FILES}: ${file} is not in the area (${area.mutate.join(", ")})`;
    }
  }
  return files.length === 0 ? `${FILES} needs a comma-separated list of files` : files;
}

/**
 * Drops the survivors (and uncovered mutants) from an area's incremental cache, so the next run
 * tests them again against the current tests while killed mutants keep their result. Stryker's own
 * diff reuses a static survivor as a survivor even after a new test kills it; this is the cheap
 * alternative to `--force`. Returns how many were dropped.
 */
function forgetSurvivors(cache: string): number {
  if (!existsSync(cache)) return 0;
  const report = JSON.parse(readFileSync(cache, "utf8")) as { files: Record<string, { mutants: { status: string }[] }> };
  let dropped = 0;
  for (const file of Object.values(report.files)) {
    const kept = file.mutants.filter((mutant) => mutant.status !== "Survived" && mutant.status !== "NoCoverage");
    dropped += file.mutants.length - kept.length;
    file.mutants = kept;
  }
  writeFileSync(cache, JSON.stringify(report));
  return dropped;
}

function main(argv: readonly string[]): number {
  const names = argv.filter((arg) => arg in AREAS);
  const rerunSurvivors = argv.includes(RERUN_SURVIVORS);
  const filesAt = argv.indexOf(FILES);
  const fileList = filesAt === -1 ? undefined : (argv[filesAt + 1] ?? "");
  const passThrough = argv.filter(
    (arg, index) => !(arg in AREAS) && arg !== RERUN_SURVIVORS && (filesAt === -1 || (index !== filesAt && index !== filesAt + 1)),
  );
  if (names.length === 0 || (fileList !== undefined && names.length !== 1)) {
    console.error(
      `usage: pnpm test:mutation:area <${Object.keys(AREAS).join("|")}>... [${RERUN_SURVIVORS}] [stryker options]\n` +
        `       pnpm test:mutation:area <area> ${FILES} <file,...> [${RERUN_SURVIVORS}] [stryker options]`,
    );
    return 2;
  }
  mkdirSync("reports/mutation", { recursive: true });
  let status = 0;
  for (const name of names) {
    const area = AREAS[name] as Area;
    const cache = `reports/stryker-incremental-${name}.json`;
    const report = `reports/mutation/${name}.json`;
    const narrowed = fileList === undefined ? undefined : narrowTo(area, fileList);
    if (typeof narrowed === "string") {
      console.error(`[mutation] ${narrowed}`);
      return 2;
    }
    const [cacheBefore, reportBefore] = [readResults(cache), readResults(report)];
    if (rerunSurvivors) console.log(`[mutation] ${name}: ${String(forgetSurvivors(cache))} survivors dropped from ${cache}, to be run again`);
    const started = Date.now();
    const result = spawnSync(
      "pnpm",
      [
        "exec",
        "stryker",
        "run",
        "--mutate",
        (narrowed ?? area.mutate).join(","),
        "--incrementalFile",
        cache,
        ...passThrough,
      ],
      { stdio: "inherit", env: { ...process.env, ARKAH_MUTATION_TESTS: area.tests.join(",") } },
    );
    const minutes = ((Date.now() - started) / 60_000).toFixed(1);
    if (result.status !== 0 || !existsSync("reports/mutation/mutation.json")) {
      console.error(`[mutation] ${name}: stryker exited ${String(result.status)} after ${minutes} min`);
      status = 1;
      continue;
    }
    copyFileSync("reports/mutation/mutation.json", report);
    if (narrowed !== undefined) {
      keepOtherFiles(cache, cacheBefore, narrowed);
      keepOtherFiles(report, reportBefore, narrowed);
    }
    console.log(`\n[mutation] ${name}: ${minutes} min, report ${report}`);
    console.log(summarize(report));
  }
  return status;
}

process.exitCode = main(process.argv.slice(2));
