/**
 * The CLI without the process: parses argv, validates every flag before the store is opened,
 * dispatches to a command, and maps every failure to an exit code and one message on stderr.
 * index.ts wires it to the process; tests call `main` in-process.
 */
import { readFile } from "node:fs/promises";
import { parseArgs, type ParseArgsConfig } from "node:util";
import { z } from "zod";
import packageJson from "../../package.json" with { type: "json" };
import { APPROVAL_STATUSES, ApprovalDecisionSchema, type ApprovalDecision, type ApprovalStatus, type JsonValue } from "../contracts/index.js";
import {
  approvals,
  audit,
  CliError,
  decide,
  EXIT,
  expire,
  orphan,
  inspect,
  MAX_APPROVALS,
  parseApprovalId,
  parseEffectKey,
  parseMutationKey,
  parseTurnKey,
  printable,
  reconcile,
  reconcileAuto,
  reconcileEffect,
  type ExitCode,
  type OutputSink,
} from "./commands.js";
import { DEFAULT_SCHEMA } from "../adapters/postgres/schema-name.js";
import { compare, moduleConfirms, moduleManifest, parseManifestText, printManifest } from "./inventory.js";
import { openStore, redactSecrets, suggestedStore, type StoreTarget } from "./open-store.js";

export interface CliIo extends OutputSink {
  /** The environment (`ARKAH_DEBUG=1` prints stack traces). */
  readonly env: Readonly<Record<string, string | undefined>>;
  /** The clock for ages, decisions, expiry cutoffs and the store. Default: the system clock. */
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
  inspect: { json: { type: "boolean" }, effects: { type: "boolean" } },
  reconcile: {
    "turn-key": { type: "string" },
    "mutation-key": { type: "string" },
    effect: { type: "string" },
    completed: { type: "boolean" },
    "no-effect": { type: "boolean" },
    "result-file": { type: "string" },
    "result-status": { type: "string" },
    "operator-ref": { type: "string" },
    auto: { type: "boolean" },
    module: { type: "string" },
    export: { type: "string" },
  },
  audit: {
    since: { type: "string" },
    "after-seq": { type: "string" },
    limit: { type: "string" },
    "turn-key": { type: "string" },
    scope: { type: "string" },
    "approval-id": { type: "string" },
  },
  approvals: {
    status: { type: "string" },
    limit: { type: "string" },
    json: { type: "boolean" },
  },
  decide: {
    "approval-id": { type: "string" },
    approve: { type: "boolean" },
    reject: { type: "boolean" },
    message: { type: "string" },
    "edit-file": { type: "string" },
    "operator-ref": { type: "string" },
  },
  expire: {
    "older-than": { type: "string" },
  },
  orphan: {
    "older-than": { type: "string" },
  },
  manifest: {
    module: { type: "string" },
    export: { type: "string" },
  },
  compare: {
    expected: { type: "string" },
    actual: { type: "string" },
    module: { type: "string" },
    export: { type: "string" },
  },
} as const satisfies Record<string, Options>;

/** Commands that read no store. */
const STORELESS = new Set<Command>(["manifest", "compare"]);

type Command = keyof typeof COMMAND_OPTIONS;

const isCommand = (name: string): name is Command => Object.hasOwn(COMMAND_OPTIONS, name);

const STORE_HELP = `Store (exactly one):
  --sqlite PATH        an existing SQLite store file (the CLI never creates one)
  --postgres URL       postgres://USER@HOST:PORT/DATABASE; put the password in PGPASSWORD or
                       ~/.pgpass rather than in the URL (a password is never printed)
  --schema NAME        with --postgres: the store's schema (default: ${DEFAULT_SCHEMA})`;

const EXIT_HELP = `Exit codes:
  0  ok
  1  operational failure (cannot open the store, I/O error, unexpected store error)
  2  usage error (unknown or missing flags, malformed values)
  3  not found (reconcile: no claim under the turn key or effect key; decide: no request has the approval id)
  4  wrong state (reconcile: the claim is not pending or unknown, e.g. already reconciled,
     or it is another call's than --mutation-key names; decide: the request is not pending: decided by another decision, applied, expired or
     orphaned); nothing changed
  5  drift (compare: the tools do not match the reviewed manifest)
  6  left for an operator (reconcile --auto: some unresolved claims stay; the others were settled)

Set ARKAH_DEBUG=1 to print stack traces.`;

const HELP: Record<Command | "global", string> = {
  global: `${BIN}: operator CLI for arkah-agent-guardrails stores.

Usage:
  ${BIN} (--sqlite PATH | --postgres URL [--schema NAME]) COMMAND [options]
  ${BIN} (manifest | compare) [options]     (no store)
  ${BIN} COMMAND --help
  ${BIN} --version

Commands:
  inspect     list unresolved (pending or unknown) mutations and side effects, oldest first
  reconcile   resolve one unresolved mutation or side effect on an operator's word
  audit       export the audit trail as JSON lines
  approvals   list approval requests (the calls waiting for a person, and what became of them)
  decide      approve, reject or edit one pending approval request
  expire      expire pending approval requests older than a duration
  orphan      orphan approved or edited requests whose call never ran, decided longer ago than a duration
  manifest    print the tool manifest of a module's guardrails (no store)
  compare     compare a reviewed tool manifest with another or with a module's (no store)

${STORE_HELP}

${EXIT_HELP}
`,
  inspect: `Usage: ${BIN} STORE inspect [--json] [--effects]

Lists every mutation whose outcome nobody recorded, oldest claim first: its age, state, scope,
tool, call id, turn key and mutationKey; then, when the store keeps side effects, every side
effect whose outcome nobody recorded: its age, state, scope, tool, call id, claim time and effectKey.
  pending   claimed and never settled: still running, or the worker died mid-call
  unknown   the call ran and its outcome is ambiguous (it threw, was cancelled or interrupted)

Options:
  --json    print a JSON array of the mutations (the same fields, plus claimedAt, ageSeconds and argsDigest)
  --effects list the side effects only (with --json: a JSON array of them, with effectKey,
            turnKey, claimedAt, ageSeconds and argsDigest)

${STORE_HELP}

${EXIT_HELP}
`,
  reconcile: `Usage:
  ${BIN} STORE reconcile --turn-key KEY [--mutation-key KEY] --completed --result-file FILE [--result-status success|error] --operator-ref REF
  ${BIN} STORE reconcile --turn-key KEY [--mutation-key KEY] --no-effect --operator-ref REF
  ${BIN} STORE reconcile --effect KEY --completed --result-file FILE [--result-status success|error] --operator-ref REF
  ${BIN} STORE reconcile --effect KEY --no-effect --operator-ref REF
  ${BIN} STORE reconcile --auto --module PATH [--export NAME]

Resolves one pending or unknown mutation, after you checked the write service by its mutationKey.
  --completed        the write happened: FILE holds the tool's result text, stored verbatim (UTF-8);
                     retries of the same call replay it and the tool never runs again
  --no-effect        the write did not happen: the turn's mutation slot reopens, and a new attempt
                     may write once
  --turn-key KEY     the turn key, 64 lowercase hex characters, as 'inspect' shows it
  --mutation-key KEY with --turn-key: the mutationKey you checked, as 'inspect' shows it; the
                     claim is reconciled only if it is still that call's (else exit 4, nothing
                     changed), so a slot another call claimed meanwhile is never settled
  --effect KEY       instead of --turn-key: a side effect's effect key, as 'inspect' shows it;
                     --completed: the effect happened (the same call replays FILE);
                     --no-effect: it did not (the same call may run again, once)
  --result-file FILE with --completed: the verified result text
  --result-status S  with --completed: success (default) or error
  --operator-ref REF your ticket or incident reference, recorded in the audit trail
  --auto             instead: put every unresolved mutation and side effect to its tool's confirm
                     (the tool policy's confirm, which asks the write service by the key) and settle
                     it with the answer (operator reference confirm:TOOL); a claim whose tool has no
                     confirm, or whose confirm does not know, is listed as left for an operator
  --module PATH      with --auto: a JavaScript module whose export is { guardrails, tools }, as for
                     'manifest' (the guardrails createDocumentGuardrails built, with the confirms)
  --export NAME      with --auto: the export to use (default: default)

${STORE_HELP}

${EXIT_HELP}
`,
  audit: `Usage: ${BIN} STORE audit [--since ISO-TIME] [--after-seq N] [--limit N] [--turn-key K] [--scope S] [--approval-id ID]

Writes the audit trail to stdout as JSON lines, oldest first, one event per line with its seq.
  --since ISO-TIME   events at or after this time, e.g. 2026-11-29T18:00:00Z (a date alone,
                     2026-11-29, means midnight UTC); default: from the beginning
  --after-seq N      events after sequence number N (resume an earlier export)
  --limit N          at most N events; default: all
  --turn-key K       only the events of this turn (its 64-hex turn key, as inspect shows it)
  --scope S          only the events of this scope (the document's scopeId)
  --approval-id ID   only the events of this approval request: its history (requested, decisions,
                     refused decisions and answers, applied, expired or orphaned, a refused call)

${STORE_HELP}

${EXIT_HELP}
`,
  approvals: `Usage: ${BIN} STORE approvals [--status STATUS] [--limit N] [--json]

Lists approval requests, oldest first: a call some guardrail (requireApproval) paused for a
person, with its age, status, scope, tool, call id, approval id and the arguments it would run
with, the guardrails' reason, and the decision once there is one.
  pending    waiting for a decision; its run is paused
  approved   approved; the call runs when its run resumes
  rejected   rejected; when its run resumes the model gets approval_rejected
  edited     approved with other arguments; the call runs with them when its run resumes
  applied    approved or edited, and the call it allowed ran (one approval covers one execution)
  expired    nobody decided it in time ('expire'); its call is refused approval_expired
  orphaned   approved or edited, but its call never ran in time ('orphan'): the worker that was
             to resume it died; its call is refused approval_orphaned

Options:
  --status STATUS   only requests in this status (one of the above); default: all
  --limit N         at most N requests, the oldest (1 to ${String(MAX_APPROVALS)}); default: ${String(MAX_APPROVALS)}
  --json            print a JSON array of the stored records (their own field names: approvalId,
                    turnKey, scopeId, toolCallId, toolName, argsDigest, args, guardrails, reason,
                    requestedAt, status, decision, operatorRef, decidedAt, appliedAt, expiredAt,
                    orphanedAt),
                    each with ageSeconds

${STORE_HELP}

${EXIT_HELP}
`,
  decide: `Usage:
  ${BIN} STORE decide --approval-id ID --approve --operator-ref REF
  ${BIN} STORE decide --approval-id ID --reject [--message TEXT] --operator-ref REF
  ${BIN} STORE decide --approval-id ID --edit-file FILE --operator-ref REF

Decides one pending approval request. The first decision stored wins: the paused run applies it
when it resumes, whatever the resume value says. A request that is not pending is left as it is;
the same decision given again (same kind, message or arguments, and operator reference) is
answered as the first time (exit 0, nothing changes), any other is refused (exit 4) and audited.
  --approval-id ID   the request, 64 lowercase hex characters, as 'approvals' shows it
  --approve          the call runs with the arguments shown
  --reject           the call does not run; the model gets approval_rejected
  --message TEXT     with --reject: shown to the model as reviewerMessage
  --edit-file FILE   the call runs with the arguments in FILE instead: a JSON object (UTF-8).
                     Only its JSON shape is checked here; the full check (the tool's schema, its
                     scope, authorize, every guardrail) happens when the run resumes: if it
                     fails, the call is refused with that check's code, nothing runs, and the
                     request is closed (it stays edited and is never carried out)
  --operator-ref REF your ticket or incident reference, recorded with the decision and in the
                     audit trail

${STORE_HELP}

${EXIT_HELP}
`,
  manifest: `Usage: ${BIN} manifest --module PATH [--export NAME]

Prints the tool manifest of a module's guardrails as JSON: every governed tool the module's tools
include, with its kind and fingerprint (its code, description, schema and declared configuration).
Check it in after review, and pass it to createDocumentGuardrails as inventory: { manifest }.
  --module PATH   a JavaScript module whose export is { guardrails, tools }: the
                  createDocumentGuardrails middleware and the tools given to createAgent (or a
                  function, possibly async, returning them). It is imported: its top level runs
  --export NAME   the export to read (default: default)

${EXIT_HELP}
`,
  compare: `Usage:
  ${BIN} compare --expected FILE --actual FILE
  ${BIN} compare --expected FILE --module PATH [--export NAME]

Compares the reviewed manifest (--expected) with another manifest or with the manifest of a
module's guardrails (as 'manifest' prints it), and prints each difference: a tool missing, an
extra tool, a kind or a fingerprint changed. Exits 5 when there is any, 0 when they match.

${EXIT_HELP}
`,
  expire: `Usage: ${BIN} STORE expire --older-than DURATION

Expires every pending approval request made more than DURATION ago, and prints how many. An
expired request can no longer be decided; when its run resumes, its call is refused
approval_expired (the model is told, and nothing runs).
  --older-than DURATION   a whole number and a unit: s, m, h or d, e.g. 30m, 24h, 7d

${STORE_HELP}

${EXIT_HELP}
`,
  orphan: `Usage: ${BIN} STORE orphan --older-than DURATION

Orphans every approved or edited request decided more than DURATION ago whose call never ran
(the worker that was to resume the run died), and prints how many. An orphaned request keeps its
decision but can no longer be applied or decided: when a worker resumes its run, the call is
refused approval_orphaned (the model is told, nothing runs, the turn's write stays open). Pick a
DURATION well above the turn service's lease (leaseMs, default 5m): a live worker is never cut off.
  --older-than DURATION   a whole number and a unit: s, m, h or d, e.g. 30m, 24h, 7d

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

function parseCount(flag: string, value: string, min: number, command: Command, max = Number.MAX_SAFE_INTEGER): number {
  const n = /^\d+$/.test(value) ? Number(value) : Number.NaN;
  if (!Number.isSafeInteger(n) || n < min || n > max) {
    const range = max === Number.MAX_SAFE_INTEGER ? `of at least ${String(min)}` : `from ${String(min)} to ${String(max)}`;
    throw usage(`${flag}: expected a whole number ${range}, got "${value}"`, command);
  }
  return n;
}

const DURATION_UNITS_MS = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

/** `30m`, `24h`, `7d`: a positive whole number and a unit, in milliseconds. */
export function parseDuration(flag: string, value: string, command: Command): number {
  const match = /^(\d+)([smhd])$/.exec(value);
  const amount = match === null ? Number.NaN : Number(match[1]);
  const unit = match?.[2] as keyof typeof DURATION_UNITS_MS | undefined;
  const ms = unit === undefined ? Number.NaN : amount * DURATION_UNITS_MS[unit];
  if (!Number.isSafeInteger(ms) || ms <= 0) {
    throw usage(`${flag}: expected a duration such as 30m, 24h or 7d (a whole number of at least 1, then s, m, h or d), got "${value}"`, command);
  }
  return ms;
}

/** The file's text, read and decoded before the store is opened. */
async function readTextFile(flag: string, path: string): Promise<string> {
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
    throw new CliError(EXIT.failure, `${flag}: cannot read ${path}: ${why}`, { cause: error });
  }
  try {
    return new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(bytes);
  } catch (error) {
    throw new CliError(EXIT.usage, `${flag}: ${path} is not UTF-8 text`, { cause: error });
  }
}

/** A JSON Pointer segment. */
const pointerSegment = (key: string) => key.split("~").join("~0").split("/").join("~1");

/** The first thing in a parsed JSON value the store would not keep as it is, with its pointer. */
function jsonProblem(value: unknown, pointer: string): string | undefined {
  if (typeof value === "string") {
    return /\p{Cs}/u.test(value) ? `${pointer || "/"}: a string with a lone surrogate (not valid Unicode)` : undefined;
  }
  if (typeof value === "number") {
    return Number.isFinite(value) ? undefined : `${pointer || "/"}: a number too large for JSON to keep`;
  }
  if (Array.isArray(value)) {
    for (const [index, item] of value.entries()) {
      const problem = jsonProblem(item, `${pointer}/${String(index)}`);
      if (problem !== undefined) return problem;
    }
    return undefined;
  }
  if (typeof value === "object" && value !== null) {
    for (const [key, item] of Object.entries(value)) {
      if (/\p{Cs}/u.test(key)) return `${pointer}/${pointerSegment(key)}: a key with a lone surrogate (not valid Unicode)`;
      const problem = jsonProblem(item, `${pointer}/${pointerSegment(key)}`);
      if (problem !== undefined) return problem;
    }
  }
  return undefined;
}

/** The edited arguments: one JSON object in a UTF-8 file, checked before the store is opened. */
export function parseEditedArgs(path: string, text: string): Record<string, JsonValue> {
  const fail = (why: string) =>
    usage(`--edit-file: ${path} ${why}; it must hold the edited arguments as one JSON object, e.g. {"title": "Field notes"}`, "decide");
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw fail(`is not JSON (${error instanceof Error ? error.message : String(error)})`);
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw fail(`holds ${value === null ? "null" : Array.isArray(value) ? "an array" : `a ${typeof value}`}, not an object`);
  }
  const problem = jsonProblem(value, "");
  if (problem !== undefined) throw fail(`has a value the store cannot keep at ${problem}`);
  const parsed = ApprovalDecisionSchema.safeParse({ decision: "edit", args: value });
  if (!parsed.success || parsed.data.decision !== "edit") {
    throw fail(`is not a JSON object of arguments (${parsed.success ? "not an edit" : z.prettifyError(parsed.error)})`);
  }
  return parsed.data.args;
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
async function prepare(command: Command, values: Parsed["values"], io: CliIo, target: StoreTarget): Promise<Job> {
  const clock = io.now === undefined ? {} : { now: io.now };
  switch (command) {
    case "inspect": {
      const json = values.json === true;
      const effects = values.effects === true;
      const store = suggestedStore(target);
      return (opened, sink) => inspect(opened, { json, store, ...(effects ? { effects } : {}), ...clock }, sink);
    }
    case "audit": {
      const since = str(values, "since");
      const afterSeq = str(values, "after-seq");
      const limit = str(values, "limit");
      const turnKey = str(values, "turn-key");
      const scope = str(values, "scope");
      const approvalId = str(values, "approval-id");
      if (turnKey !== undefined && !/^[0-9a-f]{64}$/.test(turnKey)) {
        throw usage(`--turn-key: expected a turn key (64 lowercase hex characters), got "${turnKey}"`, "audit");
      }
      if (approvalId !== undefined && !/^[0-9a-f]{64}$/.test(approvalId)) {
        throw usage(`--approval-id: expected an approval id (64 lowercase hex characters), got "${approvalId}"`, "audit");
      }
      if (scope === "") throw usage("--scope: expected a scope id, got an empty string", "audit");
      const options = {
        ...(since === undefined ? {} : { since: parseIsoTime("--since", since) }),
        ...(afterSeq === undefined ? {} : { afterSeq: parseCount("--after-seq", afterSeq, 0, command) }),
        ...(limit === undefined ? {} : { limit: parseCount("--limit", limit, 1, command) }),
        ...(turnKey === undefined ? {} : { turnKey }),
        ...(scope === undefined ? {} : { scopeId: scope }),
        ...(approvalId === undefined ? {} : { approvalId }),
      };
      return (store, sink) => audit(store, options, sink);
    }
    case "reconcile":
      return prepareReconcile(values);
    case "approvals": {
      const status = str(values, "status");
      const limit = str(values, "limit");
      if (status !== undefined && !isApprovalStatus(status)) {
        throw usage(`--status: expected one of ${APPROVAL_STATUSES.join(", ")}, got "${status}"`, command);
      }
      const options = {
        json: values.json === true,
        store: suggestedStore(target),
        ...(status === undefined ? {} : { status }),
        ...(limit === undefined ? {} : { limit: parseCount("--limit", limit, 1, command, MAX_APPROVALS) }),
        ...clock,
      };
      return (store, sink) => approvals(store, options, sink);
    }
    case "decide":
      return prepareDecide(values, io);
    case "manifest":
    case "compare":
      throw new Error("unreachable: inventory commands read no store");
    case "expire": {
      const olderThan = str(values, "older-than");
      if (olderThan === undefined) throw usage("--older-than DURATION is required (e.g. 24h)", command);
      const olderThanMs = parseDuration("--older-than", olderThan, command);
      return (store, sink) => expire(store, { olderThan, olderThanMs, ...clock }, sink);
    }
    case "orphan": {
      const olderThan = str(values, "older-than");
      if (olderThan === undefined) throw usage("--older-than DURATION is required (e.g. 1h)", command);
      const olderThanMs = parseDuration("--older-than", olderThan, command);
      return (store, sink) => orphan(store, { olderThan, olderThanMs, ...clock }, sink);
    }
  }
}

const isApprovalStatus = (value: string): value is ApprovalStatus => (APPROVAL_STATUSES as readonly string[]).includes(value);

async function prepareDecide(values: Parsed["values"], io: CliIo): Promise<Job> {
  const rawId = str(values, "approval-id");
  if (rawId === undefined) throw usage("--approval-id ID is required", "decide");
  let approvalId: string;
  try {
    approvalId = parseApprovalId(rawId);
  } catch (error) {
    throw usage((error as Error).message, "decide");
  }
  const operatorRef = str(values, "operator-ref");
  if (operatorRef === undefined || operatorRef.trim() === "") {
    throw usage("--operator-ref REF is required (your ticket or incident reference)", "decide");
  }
  const editFile = str(values, "edit-file");
  const message = str(values, "message");
  const chosen = [values.approve === true, values.reject === true, editFile !== undefined].filter(Boolean).length;
  if (chosen !== 1) throw usage("give exactly one of --approve, --reject or --edit-file FILE", "decide");
  if (message !== undefined && values.reject !== true) throw usage("--message applies to --reject only", "decide");
  let decision: ApprovalDecision;
  if (values.approve === true) decision = { decision: "approve" };
  else if (values.reject === true) decision = { decision: "reject", ...(message === undefined ? {} : { message }) };
  else {
    const path = editFile ?? "";
    decision = { decision: "edit", args: parseEditedArgs(path, await readTextFile("--edit-file", path)) };
  }
  const clock = io.now === undefined ? {} : { now: io.now };
  return (store, sink) => decide(store, { approvalId, decision, operatorRef, ...clock }, sink);
}

async function prepareReconcile(values: Parsed["values"]): Promise<Job> {
  const modulePath = str(values, "module");
  if (values.auto === true) {
    const others = ["turn-key", "mutation-key", "effect", "completed", "no-effect", "result-file", "result-status", "operator-ref"].filter((flag) => values[flag] !== undefined);
    if (others.length > 0) throw usage(`--auto takes no --${others.join(", --")}: confirm answers for each claim`, "reconcile");
    if (modulePath === undefined || modulePath === "") throw usage("--auto needs --module PATH (the module exporting { guardrails, tools })", "reconcile");
    // Loaded before the store is opened: a module that does not load changes nothing.
    const confirmOf = await moduleConfirms(modulePath, str(values, "export") ?? "default");
    return (store, sink) => reconcileAuto(store, confirmOf, sink);
  }
  if (modulePath !== undefined || values.export !== undefined) throw usage("--module and --export apply to --auto only", "reconcile");
  const rawKey = str(values, "turn-key");
  const rawEffect = str(values, "effect");
  if ((rawKey === undefined) === (rawEffect === undefined)) {
    throw usage("give exactly one of --turn-key KEY (a mutation) or --effect KEY (a side effect)", "reconcile");
  }
  const rawMutationKey = str(values, "mutation-key");
  if (rawMutationKey !== undefined && rawEffect !== undefined) throw usage("--mutation-key applies to --turn-key only", "reconcile");
  let key: { readonly turnKey: string; readonly mutationKey?: string } | { readonly effectKey: string };
  try {
    key =
      rawEffect === undefined
        ? { turnKey: parseTurnKey(rawKey ?? ""), ...(rawMutationKey === undefined ? {} : { mutationKey: parseMutationKey(rawMutationKey) }) }
        : { effectKey: parseEffectKey(rawEffect) };
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
    return (store, sink) =>
      "effectKey" in key
        ? reconcileEffect(store, { effectKey: key.effectKey, resolution: "no-effect", operatorRef }, sink)
        : reconcile(store, { ...key, resolution: "no-effect", operatorRef }, sink);
  }
  if (resultFile === undefined) throw usage("--completed needs --result-file FILE (the verified result text)", "reconcile");
  if (resultStatus !== undefined && resultStatus !== "success" && resultStatus !== "error") {
    throw usage(`--result-status: expected success or error, got "${resultStatus}"`, "reconcile");
  }
  const content = await readTextFile("--result-file", resultFile);
  const result = { content, status: resultStatus ?? "success" } as const;
  return (store, sink) =>
    "effectKey" in key
      ? reconcileEffect(store, { effectKey: key.effectKey, resolution: "completed", result, operatorRef }, sink)
      : reconcile(store, { ...key, resolution: "completed", result, operatorRef }, sink);
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
  if (command === undefined) throw usage("missing command (inspect, reconcile, audit, approvals, decide, expire, orphan, manifest or compare)");
  if (STORELESS.has(command)) return runInventory(command, values, io);
  const target = storeTarget(values, command);
  const job = await prepare(command, values, io, target);
  const opened = await openStore(target, io.now === undefined ? {} : { now: io.now });
  let code: ExitCode;
  try {
    code = await job(opened.store, io);
  } finally {
    await opened.close();
  }
  return code;
}

/** `manifest` and `compare`: every flag checked before a module is loaded or a file read. */
async function runInventory(command: Command, values: Parsed["values"], io: CliIo): Promise<ExitCode> {
  for (const flag of ["sqlite", "postgres", "schema"]) {
    if (values[flag] !== undefined) throw usage(`--${flag}: ${command} reads no store`, command);
  }
  const modulePath = str(values, "module");
  const exportName = str(values, "export") ?? "default";
  if (modulePath === "") throw usage("--module: the path is empty", command);
  if (exportName === "") throw usage("--export: the name is empty", command);
  if (modulePath === undefined && values.export !== undefined) throw usage("--export applies to --module only", command);
  if (command === "manifest") {
    if (modulePath === undefined) throw usage("--module PATH is required", command);
    return printManifest(await moduleManifest(modulePath, exportName), io);
  }
  const expected = str(values, "expected");
  const actual = str(values, "actual");
  if (expected === undefined) throw usage("--expected FILE is required (the reviewed manifest)", command);
  if ((actual === undefined) === (modulePath === undefined)) throw usage("give exactly one of --actual FILE or --module PATH", command);
  const reviewed = parseManifestText("--expected", expected, await readTextFile("--expected", expected));
  const running =
    actual === undefined
      ? await moduleManifest(modulePath ?? "", exportName)
      : parseManifestText("--actual", actual, await readTextFile("--actual", actual));
  return compare(reviewed, running, io);
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
