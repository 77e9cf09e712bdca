/**
 * `pnpm test:peers [VITEST ARGS]`: runs the agent and security suites against the newest
 * `langchain`, `@langchain/core` and `@langchain/langgraph` on the npm registry, and prints the
 * versions it tested.
 *
 * It works on a throwaway copy (the working tree's files, without node_modules, dist and .git) in
 * the temp directory, where `pnpm add <peer>@latest` rewrites the copy's package.json and lockfile;
 * this checkout's lockfile is never touched. Needs the registry and a few minutes, so CI (`.ci/run`)
 * does not run it. Set ARKAH_PEERS_KEEP=1 to keep the copy for inspection.
 */
import { spawnSync } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const PEERS = ["langchain", "@langchain/core", "@langchain/langgraph"] as const;
const SUITES = ["test/agent", "test/security"] as const;

function say(line: string): void {
  process.stdout.write(`test:peers: ${line}\n`);
}

/** Runs a command with inherited output; exits the script when it fails. */
function must(command: string, args: readonly string[], cwd: string): void {
  const run = spawnSync(command, args, { cwd, stdio: "inherit" });
  if (run.status !== 0) {
    say(`FAILED: ${command} ${args.join(" ")} (exit ${String(run.status ?? run.signal)})`);
    process.exit(1);
  }
}

function installedVersion(dir: string, name: string): string {
  const pkg = JSON.parse(readFileSync(join(dir, "node_modules", name, "package.json"), "utf8")) as { version: string };
  return pkg.version;
}

const work = mkdtempSync(join(tmpdir(), "arkah-peers-"));
const copy = join(work, "repo");
let status: number | undefined;
try {
  // The files git would commit (tracked, and untracked but not ignored), so local edits are tested.
  const listed = spawnSync("git", ["ls-files", "-z", "--cached", "--others", "--exclude-standard"], { cwd: ROOT, encoding: "utf8" });
  if (listed.status !== 0) throw new Error(`git ls-files failed: ${listed.stderr}`);
  for (const file of listed.stdout.split("\0").filter((name) => name !== "")) {
    mkdirSync(dirname(join(copy, file)), { recursive: true });
    cpSync(join(ROOT, file), join(copy, file), { verbatimSymlinks: true });
  }
  say(`copy in ${copy}`);

  const pinned = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { devDependencies: Record<string, string> };
  say(`this repo's lockfile: ${PEERS.map((name) => `${name} ${pinned.devDependencies[name] ?? "?"}`).join(", ")}`);
  must("pnpm", ["install", "--frozen-lockfile", "--prefer-offline", "--reporter=append-only"], copy);
  must("pnpm", ["add", "--save-dev", "--reporter=append-only", ...PEERS.map((name) => `${name}@latest`)], copy);
  const tested = PEERS.map((name) => `${name} ${installedVersion(copy, name)}`).join(", ");
  say(`testing with ${tested}`);

  const report = join(work, "vitest.json");
  const run = spawnSync(
    "pnpm",
    ["vitest", "run", ...SUITES, "--reporter=default", "--reporter=json", `--outputFile.json=${report}`, ...process.argv.slice(2)],
    { cwd: copy, stdio: "inherit" },
  );
  status = run.status ?? 1;
  try {
    const counts = JSON.parse(readFileSync(report, "utf8")) as { numPassedTests: number; numFailedTests: number; numTotalTests: number };
    say(`${tested}: ${String(counts.numPassedTests)} passed, ${String(counts.numFailedTests)} failed of ${String(counts.numTotalTests)}`);
  } catch {
    say(`${tested}: no vitest report (exit ${String(status)})`);
  }
} finally {
  if (process.env.ARKAH_PEERS_KEEP === "1") say(`kept ${work}`);
  else rmSync(work, { recursive: true, force: true });
}
process.exit(status ?? 1);
