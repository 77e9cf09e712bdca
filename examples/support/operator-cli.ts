/**
 * Runs the operator CLI, `arkah-guardrails`, as another OS process, as an operator would: from
 * the sources in a checkout, else from the installed package's bin. Shared by the examples that
 * hand a decision to an operator.
 */
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";

/** The command line that runs the CLI. */
function cliCommand(): string[] {
  const require = createRequire(import.meta.url);
  const packageJson = require.resolve("arkah-agent-guardrails/package.json");
  const root = dirname(packageJson);
  const source = join(root, "src", "cli", "index.ts");
  if (existsSync(source)) return [process.execPath, ...process.execArgv, source];
  const { bin } = JSON.parse(readFileSync(packageJson, "utf8")) as { bin: Record<string, string> };
  return [process.execPath, join(root, bin["arkah-guardrails"] ?? "dist/cli/index.js")];
}

/** Runs `arkah-guardrails ARGS...` and returns its exit code and output. */
export function arkahGuardrails(args: readonly string[]): { code: number | null; stdout: string; stderr: string } {
  const [command = process.execPath, ...prefix] = cliCommand();
  const child = spawnSync(command, [...prefix, ...args], { encoding: "utf8" });
  return { code: child.status, stdout: child.stdout, stderr: child.stderr };
}
