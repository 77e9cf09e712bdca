/**
 * The CLI without the process: parses argv, validates every flag before the store is opened,
 * dispatches to a command, and maps every failure to an exit code and one message on stderr.
 * index.ts wires it to the process; tests call `main` in-process.
 */
import { readFile } from "node:fs/promises";
import { parseArgs, type ParseArgsConfig } from "node:util";
import { z } from "zod";
import packageJson from "../../package.json" with { type: "json" };
import {
  audit,
  CliError,
  EXIT,
  inspect,
  parseTurnKey,
  printable,
  reconcile,
  type ExitCode,
  type OutputSink,
} from "./commands.js";
import { openStore, redactSecrets, type StoreTarget } from "./open-store.js";

export interface CliIo extends OutputSink {
  /** The environment (`ARKAH_DEBUG=1` prints stack traces). */
  readonly env: Readonly<Record<string, string | undefined>>;
  /** The clock for `inspect` ages and the store. Default: the system clock. */
  readonly now?: () => Date;
}

const BIN = "arkah-guardrails";

type Options = NonNullable<ParseArgsConfig["options"]>;

const GLOBAL_OPTIONS = {
  sqlite: { type: "string" },
  postgres: { type: "string" },
  schema: { type: "string" },
  help: { type: "boolean", short: "h" },
  version: { type: "boolean" },
} as const satisfies Options;

const COMMAND_OPTIONS = {
  inspect: { json: { type: "boolean" } },
  reconcile: {
    "turn-key": { type: "string" },
    completed: { type: "boolean" },
    "no-effect": { type: "boolean" },
    "result-file": { type: "string" },
    "result-status": { type: "string" },
    "operator-ref": { type: "string" },
  },
  audit: {
    since: { type: "string" },
    "after-seq": { type: "string" },
    limit: { type: "string" },
  },
} as const satisfies Record<string, Options>;

type Command = keyof typeof COMMAND_OPTIONS;

const isCommand = (name: string): name is Command => Object.hasOwn(COMMAND_OPTIONS, name);

const STORE_HELP = `Store (exactly one):
  --sqlite PATH        an existing SQLite store file (the CLI never creates one)
  --postgres URL       postgres://USER@HOST:PORT/DATABASE; put the password in PGPASSWORD or
                       ~/.pgpass rather than in the URL (a password is never printed)
  --schema NAME        with --postgres: the store's schema (default: the store's default)`;

const EXIT_HELP = `Exit codes:
  0  ok
  1  operational failure (cannot open the store, I/O error, unexpected store error)
  2  usage error (unknown or missing flags, malformed values)
  3  not found (reconcile: the turn key has no mutation claim)
  4  wrong state (reconcile: the claim is not pending or unknown, e.g. already reconciled)

Set ARKAH_DEBUG=1 to print stack traces.`;

const HELP: Record<Command | "global", string> = {
  global: `${BIN}: operator CLI for arkah-agent-guardrails stores.

Usage:
  ${BIN} (--sqlite PATH | --postgres URL [--schema NAME]) COMMAND [options]
  ${BIN} COMMAND --help
  ${BIN} --version

Commands:
  inspect     list unresolved (pending or unknown) mutations, oldest first
  reconcile   resolve one unresolved mutation on an operator's word
  audit       export the audit trail as JSON lines

${STORE_HELP}

${EXIT_HELP}
`,
  inspect: `Usage: ${BIN} STORE inspect [--json]

Lists every mutation whose outcome nobody recorded, oldest claim first: its age, state, scope,
tool, call id, turn key and mutationKey.
  pending   claimed and never settled: still running, or the worker died mid-call
  unknown   the call ran and its outcome is ambiguous (it threw, was cancelled or interrupted)

Options:
  --json    print a JSON array (the same fields, plus claimedAt, ageSeconds and argsDigest)

${STORE_HELP}

${EXIT_HELP}
`,
  reconcile: `Usage:
  ${BIN} STORE reconcile --turn-key KEY --completed --result-file FILE [--result-status success|error] --operator-ref REF
  ${BIN} STORE reconcile --turn-key KEY --no-effect --operator-ref REF

Resolves one pending or unknown mutation, after you checked the write service by its mutationKey.
  --completed        the write happened: FILE holds the tool's result text, stored verbatim (UTF-8);
                     retries of the same call replay it and the tool never runs again
  --no-effect        the write did not happen: the turn's mutation slot reopens, and a new attempt
                     may write once
  --turn-key KEY     the turn key, 64 lowercase hex characters, as 'inspect' shows it
  --result-file FILE with --completed: the verified result text
  --result-status S  with --completed: success (default) or error
  --operator-ref REF your ticket or incident reference, recorded in the audit trail

${STORE_HELP}

${EXIT_HELP}
`,
  audit: `Usage: ${BIN} STORE audit [--since ISO-TIME] [--after-seq N] [--limit N]

Writes the audit trail to stdout as JSON lines, oldest first, one event per line with its seq.
  --since ISO-TIME   events at or after this time, e.g. 2026-11-29T18:00:00Z (a date alone,
                     2026-11-29, means midnight UTC); default: from the beginning
  --after-seq N      events after sequence number N (resume an earlier export)
  --limit N          at most N events; default: all

${STORE_HELP}

${EXIT_HELP}
`,
};

function usage(message: string, command?: Command): CliError {
  return new CliError(EXIT.usage, `${message}\nRun '${BIN}${command === undefined ? "" : ` ${command}`} --help' for usage.`);
}

// ---------------------------------------------------------------------------------------------
// Flag values

const IsoTimeSchema = z.iso.datetime({ offset: true });
const IsoDateSchema = z.iso.date();

/** An ISO 8601 time with a zone (or a date: midnight UTC), normalised to UTC `...Z`. */
export function parseIsoTime(flag: string, value: string): string {
  const candidate = IsoDateSchema.safeParse(value).success ? `${value}T00:00:00Z` : value;
  const ms = Date.parse(candidate);
  if (!IsoTimeSchema.safeParse(candidate).success || Number.isNaN(ms)) {
    throw usage(`${flag}: expected an ISO 8601 time with a zone, e.g. 2026-11-29T18:00:00Z, got "${value}"`, "audit");
  }
  return new Date(ms).toISOString();
}

function parseCount(flag: string, value: string, min: number): number {
  const n = /^\d+$/.test(value) ? Number(value) : Number.NaN;
  if (!Number.isSafeInteger(n) || n < min) {
    throw usage(`${flag}: expected a whole number of at least ${String(min)}, got "${value}"`, "audit");
  }
  return n;
}

async function readResultFile(path: string): Promise<string> {
  let bytes: Buffer;
  try {
    bytes = await readFile(path);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const why =
      code === "ENOENT"
        ? "the file does not exist"
        : code === "EISDIR"
          ? "it is a directory"
          : code === "EACCES"
            ? "permission denied"
            : (error as Error).message;
    throw new CliError(EXIT.failure, `--result-file: cannot read ${path}: ${why}`, { cause: error });
  }
  try {
    return new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(bytes);
  } catch (error) {
    throw new CliError(EXIT.usage, `--result-file: ${path} is not UTF-8 text`, { cause: error });
  }
}

// ---------------------------------------------------------------------------------------------

interface Parsed {
  readonly command: Command | undefined;
  readonly values: Readonly<Record<string, string | boolean | undefined>>;
}

function parse(argv: readonly string[]): Parsed {
  const options: Options = { ...GLOBAL_OPTIONS };
  for (const commandOptions of Object.values(COMMAND_OPTIONS)) Object.assign(options, commandOptions);
  let parsed;
  try {
    parsed = parseArgs({ args: [...argv], options, strict: true, allowPositionals: true, tokens: true });
  } catch (error) {
    throw usage(error instanceof Error ? error.message : String(error));
  }
  const [name, ...extra] = parsed.positionals;
  if (name !== undefined && !isCommand(name)) throw usage(`unknown command "${name}"`);
  const command = name;
  if (extra.length > 0) throw usage(`unexpected argument "${extra.join(" ")}"`, command);
  const seen = new Set<string>();
  for (const token of parsed.tokens) {
    if (token.kind !== "option") continue;
    if (seen.has(token.name)) throw usage(`--${token.name} given more than once`, command);
    seen.add(token.name);
    const allowed = Object.hasOwn(GLOBAL_OPTIONS, token.name) || (command !== undefined && Object.hasOwn(COMMAND_OPTIONS[command], token.name));
    if (!allowed) {
      throw usage(
        command === undefined ? `--${token.name} needs a command before it is meaningful` : `--${token.name} is not an option of ${command}`,
        command,
      );
    }
  }
  // No option is `multiple`, so every value is a string or a boolean.
  return { command, values: parsed.values as Parsed["values"] };
}

const str = (values: Parsed["values"], name: string): string | undefined => {
  const value = values[name];
  return typeof value === "string" ? value : undefined;
};

function storeTarget(values: Parsed["values"], command: Command): StoreTarget {
  const sqlite = str(values, "sqlite");
  const postgres = str(values, "postgres");
  const schema = str(values, "schema");
  if ((sqlite === undefined) === (postgres === undefined)) {
    throw usage("give exactly one store: --sqlite PATH or --postgres URL", command);
  }
  if (sqlite !== undefined) {
    if (schema !== undefined) throw usage("--schema applies to --postgres only", command);
    if (sqlite === "") throw usage("--sqlite: the path is empty", command);
    return { kind: "sqlite", path: sqlite };
  }
  if (schema === "") throw usage("--schema: the name is empty", command);
  return { kind: "postgres", url: postgres ?? "", schema };
}

type Job = (store: Parameters<typeof inspect>[0], sink: OutputSink) => Promise<ExitCode>;

/** Every flag of the command checked, and its file read, before any store is opened. */
async function prepare(command: Command, values: Parsed["values"], io: CliIo): Promise<Job> {
  switch (command) {
    case "inspect": {
      const json = values.json === true;
      return (store, sink) => inspect(store, { json, ...(io.now === undefined ? {} : { now: io.now }) }, sink);
    }
    case "audit": {
      const since = str(values, "since");
      const afterSeq = str(values, "after-seq");
      const limit = str(values, "limit");
      const options = {
        ...(since === undefined ? {} : { since: parseIsoTime("--since", since) }),
        ...(afterSeq === undefined ? {} : { afterSeq: parseCount("--after-seq", afterSeq, 0) }),
        ...(limit === undefined ? {} : { limit: parseCount("--limit", limit, 1) }),
      };
      return (store, sink) => audit(store, options, sink);
    }
    case "reconcile":
      return prepareReconcile(values);
  }
}

async function prepareReconcile(values: Parsed["values"]): Promise<Job> {
  const rawKey = str(values, "turn-key");
  if (rawKey === undefined) throw usage("--turn-key KEY is required", "reconcile");
  let turnKey: string;
  try {
    turnKey = parseTurnKey(rawKey);
  } catch (error) {
    throw usage((error as Error).message, "reconcile");
  }
  const operatorRef = str(values, "operator-ref");
  if (operatorRef === undefined || operatorRef.trim() === "") {
    throw usage("--operator-ref REF is required (your ticket or incident reference)", "reconcile");
  }
  const completed = values.completed === true;
  const noEffect = values["no-effect"] === true;
  if (completed === noEffect) throw usage("give exactly one of --completed or --no-effect", "reconcile");
  const resultFile = str(values, "result-file");
  const resultStatus = str(values, "result-status");
  if (noEffect) {
    if (resultFile !== undefined || resultStatus !== undefined) {
      throw usage("--result-file and --result-status apply to --completed only", "reconcile");
    }
    return (store, sink) => reconcile(store, { turnKey, resolution: "no-effect", operatorRef }, sink);
  }
  if (resultFile === undefined) throw usage("--completed needs --result-file FILE (the verified result text)", "reconcile");
  if (resultStatus !== undefined && resultStatus !== "success" && resultStatus !== "error") {
    throw usage(`--result-status: expected success or error, got "${resultStatus}"`, "reconcile");
  }
  const content = await readResultFile(resultFile);
  const result = { content, status: resultStatus ?? "success" } as const;
  return (store, sink) => reconcile(store, { turnKey, resolution: "completed", result, operatorRef }, sink);
}

async function run(argv: readonly string[], io: CliIo): Promise<ExitCode> {
  const { command, values } = parse(argv);
  if (values.version === true) {
    await io.out(`${packageJson.version}\n`);
    return EXIT.ok;
  }
  if (values.help === true) {
    await io.out(HELP[command ?? "global"]);
    return EXIT.ok;
  }
  if (command === undefined) throw usage("missing command (inspect, reconcile or audit)");
  const target = storeTarget(values, command);
  const job = await prepare(command, values, io);
  const opened = await openStore(target, io.now === undefined ? {} : { now: io.now });
  let code: ExitCode;
  try {
    code = await job(opened.store, io);
  } finally {
    await opened.close();
  }
  return code;
}

/** Runs the CLI; resolves to the exit code. Never rejects. */
export async function main(argv: readonly string[], io: CliIo): Promise<ExitCode> {
  try {
    return await run(argv, io);
  } catch (error) {
    const secrets = secretsIn(argv);
    const debug = io.env.ARKAH_DEBUG === "1";
    const code = error instanceof CliError ? error.exitCode : EXIT.failure;
    const message = error instanceof Error ? error.message : String(error);
    const hint = code === EXIT.usage && !message.includes("--help' for usage") ? `\nRun '${BIN} --help' for usage.` : "";
    await io.err(`${BIN}: ${terminalLines(redactSecrets(message, secrets))}${hint}\n`);
    if (debug && error instanceof Error && error.stack !== undefined) {
      await io.err(`${terminalLines(redactSecrets(stackWithCauses(error), secrets))}\n`);
    }
    return code;
  }
}

/** Text for stderr, line by line escaped like stored values: an error message may quote one. */
function terminalLines(text: string): string {
  return text.split("\n").map(printable).join("\n");
}

function stackWithCauses(error: Error): string {
  const parts: string[] = [];
  for (let current: unknown = error; current instanceof Error && parts.length < 8; current = current.cause) {
    parts.push(current.stack ?? current.message);
  }
  return parts.join("\ncaused by: ");
}

/** Every `--postgres` value in argv: its password must never be printed, even after a parse error. */
function secretsIn(argv: readonly string[]): string[] {
  const urls: string[] = [];
  argv.forEach((arg, index) => {
    if (arg === "--postgres" && index + 1 < argv.length) urls.push(argv[index + 1] ?? "");
    else if (arg.startsWith("--postgres=")) urls.push(arg.slice("--postgres=".length));
  });
  return urls;
}
