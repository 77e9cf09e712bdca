/**
 * Opens the store named by the CLI's flags. The adapters are loaded with a dynamic `import()`, so
 * the core never loads a database driver and the CLI loads only the one it uses. Every failure is
 * a `CliError` whose message names the path or the server (never a password) and what is wrong.
 */
import { open as openFile, stat } from "node:fs/promises";
import { dirname, resolve } from "node:path";
import type { AnyGuardrailStore } from "../store/capabilities.js";
import { ConfigurationError } from "../errors.js";
import type { PostgresGuardrailStore } from "../adapters/postgres/index.js";
// Not the adapter: this module loads no driver, so `--schema` is checked before `pg` is loaded.
import { DEFAULT_SCHEMA, isReservedSchemaName, SCHEMA_NAME } from "../adapters/postgres/schema-name.js";
import type { SqliteGuardrailStore } from "../adapters/sqlite/index.js";
import { CliError, EXIT, shellWord, type SuggestedStore } from "./commands.js";

export type StoreTarget =
  | { readonly kind: "sqlite"; readonly path: string }
  | { readonly kind: "postgres"; readonly url: string; readonly schema: string | undefined };

export interface OpenedStore {
  /** The stores this package ships have every part; the commands still check the parts they need. */
  readonly store: AnyGuardrailStore;
  close(): Promise<void>;
}

export interface OpenStoreOptions {
  /** The store's clock (reconciliation and audit times). Default: the system clock. */
  readonly now?: () => Date;
}

/** How long the CLI waits for a PostgreSQL connection before it reports the server unreachable. */
const CONNECT_TIMEOUT_MS = 10_000;

export async function openStore(target: StoreTarget, options: OpenStoreOptions = {}): Promise<OpenedStore> {
  return target.kind === "sqlite" ? openSqlite(target.path, options) : openPostgres(target, options);
}

// ---------------------------------------------------------------------------------------------
// Secrets

/** Replaces every password in `text`: those of `urls`, raw and decoded, and any in a postgres URL. */
export function redactSecrets(text: string, urls: readonly string[] = []): string {
  let redacted = text;
  for (const url of urls) {
    for (const secret of passwordsOf(url)) redacted = redacted.split(secret).join("***");
  }
  return redacted.replace(/(postgres(?:ql)?:\/\/[^\s:/@]*:)[^\s@]*@/gi, "$1***@");
}

/** The password of a connection URL, raw and percent-decoded, from its userinfo or `?password=`. */
function passwordsOf(url: string): string[] {
  const found: string[] = [];
  // Greedy up to the last "@": an unencoded "@" in a password is still covered (over-redaction is safe).
  const userinfo = /^[a-z][a-z0-9+.-]*:\/\/[^:/@]*:(.*)@/i.exec(url)?.[1];
  if (userinfo !== undefined) found.push(userinfo);
  try {
    const parsed = new URL(url);
    found.push(parsed.password, parsed.searchParams.get("password") ?? "");
  } catch {
    // Not a URL: the pattern above is all there is.
  }
  const decoded = found.map((secret) => {
    try {
      return decodeURIComponent(secret);
    } catch {
      return secret;
    }
  });
  return [...new Set([...found, ...decoded])].filter((secret) => secret.length > 0);
}

/**
 * The flags that name `target` in a suggested command line, shell-quoted: the SQLite path as
 * given, or the PostgreSQL URL without its password (and `--schema` when one was given).
 */
export function suggestedStore(target: StoreTarget): SuggestedStore {
  if (target.kind === "sqlite") return { flags: `--sqlite ${shellWord(target.path)}` };
  const url = parsePostgresUrl(target.url);
  let omitted = false;
  if (url.password !== "") {
    url.password = "";
    omitted = true;
  }
  if (url.searchParams.has("password")) {
    url.searchParams.delete("password");
    omitted = true;
  }
  // Over-redaction is safe: nothing of the password reaches stdout even if the URL parser and pg disagree.
  const shown = redactSecrets(omitted ? url.href : target.url, [target.url]);
  const schema = target.schema === undefined ? "" : ` --schema ${shellWord(target.schema)}`;
  return {
    flags: `--postgres ${shellWord(shown)}${schema}`,
    ...(omitted ? { note: "the password is left out of these lines: put it in PGPASSWORD or ~/.pgpass" } : {}),
  };
}

/** `postgres://user:***@host:port/db`: a URL fit for a message. */
export function describeUrl(url: URL): string {
  const copy = new URL(url.href);
  if (copy.password !== "") copy.password = "***";
  copy.search = "";
  return copy.href;
}

// ---------------------------------------------------------------------------------------------
// SQLite

const SQLITE_HEADER = "SQLite format 3\0";

function cannotOpen(what: string, why: string, cause?: unknown): CliError {
  return new CliError(EXIT.failure, `cannot open the store at ${what}: ${why}`, cause === undefined ? undefined : { cause });
}

/** Checks the path before the adapter sees it: the CLI never creates a store by mistake. */
async function checkSqlitePath(path: string): Promise<void> {
  const absolute = resolve(path);
  const directory = dirname(absolute);
  const dirStat = await stat(directory).catch(() => undefined);
  if (dirStat === undefined) throw cannotOpen(path, `the directory ${directory} does not exist`);
  if (!dirStat.isDirectory()) throw cannotOpen(path, `${directory} is not a directory`);
  const fileStat = await stat(absolute).catch(() => undefined);
  if (fileStat === undefined) {
    throw cannotOpen(path, "the file does not exist (the CLI opens existing stores only; check the path)");
  }
  if (fileStat.isDirectory()) throw cannotOpen(path, "it is a directory, not a SQLite database file");
  if (fileStat.size === 0) throw cannotOpen(path, "the file is empty: not an arkah-agent-guardrails store");
  let header: string;
  try {
    const handle = await openFile(absolute, "r");
    try {
      const buffer = Buffer.alloc(SQLITE_HEADER.length);
      const { bytesRead } = await handle.read(buffer, 0, buffer.length, 0);
      header = buffer.subarray(0, bytesRead).toString("latin1");
    } finally {
      await handle.close();
    }
  } catch (error) {
    throw cannotOpen(path, `cannot read the file (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`, error);
  }
  if (header !== SQLITE_HEADER) throw cannotOpen(path, "it is not a SQLite database");
}

/**
 * A SQLite database that is not a guardrail store (another application's file, a fresh empty
 * file) is refused: opening it with the adapter would create the store's tables in it.
 */
async function checkIsGuardrailStore(path: string): Promise<void> {
  const sqlite = await loadAdapter("SQLite", "better-sqlite3", () => import("better-sqlite3"));
  let tables: unknown[];
  try {
    const db = new sqlite.default(path, { readonly: true, fileMustExist: true });
    try {
      tables = db
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name IN ('schema_migrations', 'claims')")
        .pluck()
        .all();
    } finally {
      db.close();
    }
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    throw cannotOpen(path, code === "SQLITE_NOTADB" ? "it is not a SQLite database" : (error as Error).message, error);
  }
  if (tables.length < 2) {
    throw cannotOpen(path, "it is a SQLite database but not an arkah-agent-guardrails store (no schema_migrations and claims tables)");
  }
}

async function openSqlite(path: string, options: OpenStoreOptions): Promise<OpenedStore> {
  await checkSqlitePath(path);
  await checkIsGuardrailStore(path);
  const adapter = await loadAdapter("SQLite", "better-sqlite3", () => import("../adapters/sqlite/index.js"));
  let store: SqliteGuardrailStore;
  try {
    store = adapter.SqliteGuardrailStore.open({ path, ...(options.now === undefined ? {} : { now: options.now }) });
  } catch (error) {
    if (ConfigurationError.isInstance(error)) throw error;
    // The adapter's message names the path and the cause.
    throw new CliError(EXIT.failure, (error as Error).message, { cause: error });
  }
  return {
    store,
    close: async () => {
      store.close();
    },
  };
}

// ---------------------------------------------------------------------------------------------
// PostgreSQL

function parsePostgresUrl(url: string): URL {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new CliError(EXIT.usage, "--postgres: not a valid URL (expected postgres://USER@HOST:PORT/DATABASE)");
  }
  if (parsed.protocol !== "postgres:" && parsed.protocol !== "postgresql:") {
    throw new CliError(
      EXIT.usage,
      `--postgres: expected a postgres:// or postgresql:// URL, got a ${parsed.protocol.replace(/:$/, "")}: URL`,
    );
  }
  return parsed;
}

/** A message for a connection failure; pg's error codes, never its raw text with the URL in it. */
function postgresFailure(error: unknown, url: URL): string {
  const { code, message } = error as { code?: unknown; message?: unknown };
  const host = url.hostname === "" ? "the local socket" : `${url.hostname}:${url.port === "" ? "5432" : url.port}`;
  const user = decodeURIComponent(url.username);
  const database = decodeURIComponent(url.pathname.replace(/^\//, ""));
  switch (code) {
    case "ECONNREFUSED":
      return `the server at ${host} refused the connection (is PostgreSQL running there?)`;
    case "ENOTFOUND":
    case "EAI_AGAIN":
      return `the host ${url.hostname} cannot be resolved`;
    case "ETIMEDOUT":
    case "EHOSTUNREACH":
    case "ENETUNREACH":
      return `the server at ${host} is unreachable (${code})`;
    case "28P01":
      return `password authentication failed for user "${user}": the server refused the password; correct it in the URL, PGPASSWORD or ~/.pgpass`;
    case "28000":
      return `the server rejected user "${user}" (pg_hba.conf or role)`;
    case "3D000":
      return `the database "${database}" does not exist`;
    default:
      // pg's text when it found no password (none in the URL, PGPASSWORD or ~/.pgpass) for a SCRAM server.
      if (typeof message === "string" && /client password must be a string/i.test(message)) {
        return `no password was given for user "${user}" and the server asks for one: set PGPASSWORD, add it to ~/.pgpass, or put it in the URL`;
      }
      if (typeof message === "string" && /timeout/i.test(message)) {
        return `no connection to ${host} within ${String(CONNECT_TIMEOUT_MS / 1000)} s (is the server reachable?)`;
      }
      return typeof message === "string" ? message : String(error);
  }
}

async function openPostgres(
  target: Extract<StoreTarget, { kind: "postgres" }>,
  options: OpenStoreOptions,
): Promise<OpenedStore> {
  const url = parsePostgresUrl(target.url);
  const schema = target.schema ?? DEFAULT_SCHEMA;
  // The names the adapter accepts, checked here so a typo is a usage error.
  if (!SCHEMA_NAME.test(schema) || isReservedSchemaName(schema)) {
    throw new CliError(EXIT.usage, `--schema: "${schema}" is not a schema name the store accepts (letters, digits and _, not starting with pg_)`);
  }
  const where = describeUrl(url);
  const pg = await loadAdapter("PostgreSQL", "pg", () => import("pg"));
  const adapter = await loadAdapter("PostgreSQL", "pg", () => import("../adapters/postgres/index.js"));
  // The CLI's own pool: a server that never answers fails within CONNECT_TIMEOUT_MS, and the
  // store's schema is checked before the adapter would create it.
  const pool = new pg.default.Pool({ connectionString: target.url, max: 2, connectionTimeoutMillis: CONNECT_TIMEOUT_MS });
  // An idle client's error (the server went away) must not crash the process; the query fails instead.
  pool.on("error", () => undefined);
  const fail = async (why: string, cause: unknown): Promise<never> => {
    await pool.end().catch(() => undefined);
    throw new CliError(EXIT.failure, redactSecrets(`cannot open the store at ${where}: ${why}`, [target.url]), { cause });
  };
  let tables: number;
  try {
    const found = await pool.query(
      "SELECT count(*)::int AS n FROM pg_catalog.pg_tables WHERE schemaname = $1 AND tablename IN ('schema_migrations', 'claims')",
      [schema],
    );
    tables = Number((found.rows[0] as { n?: unknown } | undefined)?.n ?? 0);
  } catch (error) {
    return fail(postgresFailure(error, url), error);
  }
  if (tables < 2) {
    return fail(`the schema "${schema}" holds no arkah-agent-guardrails store (check --schema; the CLI never creates one)`, undefined);
  }
  let store: PostgresGuardrailStore;
  try {
    // migrate: false: the CLI never changes the schema (an operator's newer CLI does not upgrade
    // the workers' schema); one at another version is refused with both versions named.
    store = await adapter.PostgresGuardrailStore.open(
      { pool },
      { schema, migrate: false, ...(options.now === undefined ? {} : { now: options.now }) },
    );
  } catch (error) {
    return fail(error instanceof Error ? error.message : String(error), error);
  }
  return {
    store,
    close: async () => {
      try {
        await store.close();
      } finally {
        await pool.end();
      }
    },
  };
}

// ---------------------------------------------------------------------------------------------

/** A dynamic import whose failure to find the driver says which package to install. */
async function loadAdapter<T>(what: string, driver: string, load: () => Promise<T>): Promise<T> {
  try {
    return await load();
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    if (code === "ERR_MODULE_NOT_FOUND" || code === "MODULE_NOT_FOUND") {
      throw new CliError(
        EXIT.failure,
        `the ${what} store needs the optional peer dependency ${driver}: install it next to arkah-agent-guardrails (npm install ${driver})`,
        { cause: error },
      );
    }
    throw error;
  }
}
