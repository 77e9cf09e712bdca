/** The Node matrix's pure decisions (scripts/node-matrix/matrix.ts); `.ci/run` runs the matrix itself. */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { countReport, isGreen, MatrixUsageError, NODE_MATRIX, parseMatrixArgs, reportFileName } from "../../scripts/node-matrix/matrix.js";

function usageError(argv: readonly string[]): MatrixUsageError {
  let caught: unknown;
  try {
    parseMatrixArgs(argv);
  } catch (error) {
    caught = error;
  }
  expect(caught).toBeInstanceOf(MatrixUsageError);
  return caught as MatrixUsageError;
}

/** A vitest JSON report reduced to what a tally reads, with vitest's own field names. */
function report(passed: number, failed: number, files: { status: string; tests: number }[]): unknown {
  return {
    numTotalTests: passed + failed,
    numPassedTests: passed,
    numFailedTests: failed,
    success: failed === 0,
    testResults: files.map(({ status, tests }, index) => ({
      name: `/project/test/file-${index}.test.ts`,
      status,
      assertionResults: Array.from({ length: tests }, (_, test) => ({ title: `test ${test}`, status })),
    })),
  };
}

describe("parseMatrixArgs", () => {
  it("runs every version in the matrix when no major is named", () => {
    expect(parseMatrixArgs([])).toEqual({ nodes: NODE_MATRIX, vitestArgs: [], prepareOnly: false });
    expect(NODE_MATRIX.map((node) => node.major)).toEqual([22, 24]);
  });

  it("picks the named majors, in matrix order, once each", () => {
    expect(parseMatrixArgs(["24"]).nodes.map((node) => node.version)).toEqual(["24.22.3"]);
    expect(parseMatrixArgs(["24", "22", "24"]).nodes.map((node) => node.major)).toEqual([22, 24]);
  });

  it("passes everything after the majors to vitest", () => {
    expect(parseMatrixArgs(["22", "test/stores/sqlite.test.ts", "-t", "claims"])).toEqual({
      nodes: [NODE_MATRIX[0]],
      vitestArgs: ["test/stores/sqlite.test.ts", "-t", "claims"],
      prepareOnly: false,
    });
    // A number after the first vitest argument, or after `--`, is vitest's.
    expect(parseMatrixArgs(["-t", "24"]).vitestArgs).toEqual(["-t", "24"]);
    expect(parseMatrixArgs(["22", "--", "-t", "22"])).toEqual({ nodes: [NODE_MATRIX[0]], vitestArgs: ["-t", "22"], prepareOnly: false });
    expect(parseMatrixArgs(["--", "22"])).toEqual({ nodes: NODE_MATRIX, vitestArgs: ["22"], prepareOnly: false });
  });

  it("--prepare builds without testing, and takes no vitest arguments", () => {
    expect(parseMatrixArgs(["--prepare"])).toEqual({ nodes: NODE_MATRIX, vitestArgs: [], prepareOnly: true });
    expect(parseMatrixArgs(["--prepare", "24"]).nodes.map((node) => node.major)).toEqual([24]);
    expect(usageError(["--prepare", "-t", "x"]).message).toMatch(/--prepare runs no test/);
  });

  it("refuses a major outside the matrix with a typed error", () => {
    const error = usageError(["22", "18"]);
    expect(error.code).toBe("matrix_usage");
    expect(error.message).toContain("Node 18 is not in the matrix (22, 24)");
    expect(usageError(["20"]).message).toContain("`pnpm test`");
  });
});

describe("countReport", () => {
  it("counts passed and failed tests, and files that broke before any test ran", () => {
    const counts = countReport(
      report(7, 1, [
        { status: "passed", tests: 5 },
        { status: "failed", tests: 3 },
        { status: "failed", tests: 0 },
      ]),
    );
    expect(counts).toEqual({ passed: 7, failed: 1, brokenFiles: 1 });
    expect(isGreen(counts)).toBe(false);
  });

  it("is green only when tests ran and none failed or broke", () => {
    expect(isGreen(countReport(report(5, 0, [{ status: "passed", tests: 5 }])))).toBe(true);
    expect(isGreen(countReport(report(0, 0, [])))).toBe(false);
    expect(isGreen(countReport(report(5, 0, [{ status: "passed", tests: 5 }, { status: "failed", tests: 0 }])))).toBe(false);
  });

  it("rejects a value that is not a vitest report", () => {
    expect(() => countReport({})).toThrow();
    expect(() => countReport(report(-1, 0, []))).toThrow();
    expect(() => countReport("tests: 5 passed, 0 failed")).toThrow();
  });
});

describe("where the matrix is stated", () => {
  it("names each run's report so .gitignore keeps it out of commits", () => {
    expect(reportFileName(22)).toBe(".vitest-results-node22.json");
    const ignored = readFileSync(new URL("../../.gitignore", import.meta.url), "utf8").split("\n");
    expect(ignored).toContain(".vitest-results*.json");
  });

  it("lists every version in the README's Tested versions", () => {
    const readme = readFileSync(new URL("../../README.md", import.meta.url), "utf8");
    const section = /^## Tested versions\n([\s\S]*?)^## /m.exec(readme)?.[1] ?? "";
    const nodeRow = section.split("\n").find((line) => line.startsWith("| Node.js"));
    expect(nodeRow).toBeDefined();
    for (const { version } of NODE_MATRIX) expect(nodeRow).toContain(version);
  });
});
