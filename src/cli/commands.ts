/**
 * The operator commands: `inspect`, `reconcile` and `audit`, each a function of a store, its
 * options and an output sink, so tests run them in-process exactly as the CLI does. Flag parsing,
 * opening the store and exit-code handling live in main.ts.
 */
import {
  DigestSchema,
  type GuardrailStore,
  type Reconciliation,
  type StoredAuditEvent,
  type UnresolvedMutation,
} from "../contracts.js";

/** The CLI's exit codes. */
export const EXIT = {
  ok: 0,
  /** Operational failure: the store cannot be opened or read, an I/O error. */
  failure: 1,
  /** Usage error: unknown or missing flags, malformed values. */
  usage: 2,
  /** The turn key has no mutation claim. */
  notFound: 3,
  /** The claim is not in a state the command acts on (e.g. already reconciled). */
  wrongState: 4,
} as const;
export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

/** A failure the CLI reports as one line on stderr, with its exit code. */
export class CliError extends Error {
  readonly exitCode: ExitCode;

  constructor(exitCode: ExitCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "CliError";
    this.exitCode = exitCode;
  }
}

/** Where a command writes. Each call gets whole lines; a returned promise is awaited (backpressure). */
export interface OutputSink {
  out(text: string): void | Promise<void>;
  err(text: string): void | Promise<void>;
}

/** A turn key as the store uses it: 64 lowercase hex characters. */
export function parseTurnKey(value: string): string {
  if (!DigestSchema.safeParse(value).success) {
    throw new CliError(
      EXIT.usage,
      `--turn-key: expected 64 lowercase hex characters (a turn key as 'inspect' shows it), got ${quote(value)}`,
    );
  }
  return value;
}

/**
 * What a terminal must never receive raw from a stored value: control characters (C0, DEL, C1:
 * escape sequences, U+009B is a CSI in some terminals), Unicode format characters (`Cf`: the bidi
 * overrides and isolates U+202A-U+202E and U+2066-U+2069, U+061C, zero-width U+200B-U+200F, U+FEFF,
 * the soft hyphen U+00AD, tag characters...), which can make a line read differently from what it
 * holds, the line and paragraph separators, and lone surrogates.
 */
const UNSAFE = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Cs}]/gu;

/** The same, less C0: in `JSON.stringify` output a raw C0 character is layout (indentation newlines). */
const UNSAFE_IN_JSON = /[\u007f-\u009f\p{Cf}\p{Zl}\p{Zp}\p{Cs}]/gu;

/** `\uXXXX` for each UTF-16 unit of a match (a format character above U+FFFF is two). */
function escapeUnits(match: string): string {
  let escaped = "";
  for (let index = 0; index < match.length; index++) {
    escaped += `\\u${match.charCodeAt(index).toString(16).padStart(4, "0")}`;
  }
  return escaped;
}

/**
 * A value for a terminal line: control and format characters and lone surrogates (from
 * model-chosen ids, tool results) are escaped as `\uXXXX`, never emitted.
 */
export function printable(value: string): string {
  return value.replace(UNSAFE, escapeUnits);
}

/**
 * JSON for a terminal: `JSON.stringify` escapes C0 controls and lone surrogates; this also escapes
 * DEL, the C1 controls, format characters and the line separators, inside strings, as `\uXXXX`.
 * Still the same JSON.
 */
export function terminalJson(value: unknown, indent?: number): string {
  return JSON.stringify(value, null, indent).replace(UNSAFE_IN_JSON, escapeUnits);
}

function quote(value: string): string {
  return `"${printable(value.length > 80 ? `${value.slice(0, 80)}...` : value)}"`;
}

// ---------------------------------------------------------------------------------------------
// inspect

export interface InspectOptions {
  /** Machine-readable output: a JSON array. */
  readonly json?: boolean;
  /** The clock ages are computed against. Default: the system clock. */
  readonly now?: () => Date;
}

/** One unresolved mutation as `inspect --json` prints it. */
export interface UnresolvedView {
  readonly turnKey: string;
  readonly scopeId: string;
  readonly toolName: string;
  readonly toolCallId: string;
  readonly state: UnresolvedMutation["state"];
  readonly claimedAt: string;
  /** Whole seconds since `claimedAt` (0 if the claim's clock is ahead). */
  readonly ageSeconds: number;
  readonly mutationKey: string;
  readonly argsDigest: string;
}

/** `3s`, `3m12s`, `2h05m`, `3d04h`. */
export function formatAge(seconds: number): string {
  const s = Math.max(0, Math.floor(seconds));
  const pad = (n: number) => String(n).padStart(2, "0");
  if (s < 60) return `${String(s)}s`;
  if (s < 3600) return `${String(Math.floor(s / 60))}m${pad(s % 60)}s`;
  if (s < 86_400) return `${String(Math.floor(s / 3600))}h${pad(Math.floor((s % 3600) / 60))}m`;
  return `${String(Math.floor(s / 86_400))}d${pad(Math.floor((s % 86_400) / 3600))}h`;
}

function view(mutation: UnresolvedMutation, nowMs: number): UnresolvedView {
  return {
    turnKey: mutation.turnKey,
    scopeId: mutation.scopeId,
    toolName: mutation.toolName,
    toolCallId: mutation.toolCallId,
    state: mutation.state,
    claimedAt: mutation.claimedAt,
    ageSeconds: Math.max(0, Math.floor((nowMs - Date.parse(mutation.claimedAt)) / 1000)),
    mutationKey: mutation.mutationKey,
    argsDigest: mutation.argsDigest,
  };
}

function table(header: readonly string[], rows: readonly (readonly string[])[]): string[] {
  const widths = header.map((title, column) => Math.max(title.length, ...rows.map((row) => (row[column] ?? "").length)));
  const line = (cells: readonly string[]) =>
    cells
      .map((cell, column) => (column === cells.length - 1 ? cell : cell.padEnd(widths[column] ?? 0)))
      .join("  ");
  return [line(header), ...rows.map(line)];
}

/** Lists the unresolved (`pending` or `unknown`) mutations, oldest claim first. */
export async function inspect(store: GuardrailStore, options: InspectOptions, sink: OutputSink): Promise<ExitCode> {
  const nowMs = (options.now ?? (() => new Date()))().getTime();
  const unresolved = (await store.listUnresolved()).map((mutation) => view(mutation, nowMs));
  if (options.json === true) {
    await sink.out(`${terminalJson(unresolved, 2)}\n`);
    return EXIT.ok;
  }
  if (unresolved.length === 0) {
    await sink.out("no unresolved mutations\n");
    return EXIT.ok;
  }
  const unknown = unresolved.filter((mutation) => mutation.state === "unknown").length;
  const lines = [
    `${String(unresolved.length)} unresolved mutation${unresolved.length === 1 ? "" : "s"} ` +
      `(${String(unknown)} unknown, ${String(unresolved.length - unknown)} pending), oldest first:`,
    "",
    ...table(
      ["AGE", "STATE", "SCOPE", "TOOL", "CALL ID", "TURN KEY", "MUTATION KEY"],
      unresolved.map((mutation) => [
        formatAge(mutation.ageSeconds),
        mutation.state,
        printable(mutation.scopeId),
        printable(mutation.toolName),
        printable(mutation.toolCallId),
        mutation.turnKey,
        mutation.mutationKey,
      ]),
    ),
    "",
    "Check each write with your write service by its MUTATION KEY, then:",
    "  arkah-guardrails reconcile --turn-key KEY --completed --result-file FILE --operator-ref REF",
    "  arkah-guardrails reconcile --turn-key KEY --no-effect --operator-ref REF",
  ];
  await sink.out(`${lines.join("\n")}\n`);
  return EXIT.ok;
}

// ---------------------------------------------------------------------------------------------
// reconcile

/**
 * Resolves one `pending` or `unknown` mutation on the operator's word. Throws `CliError` with
 * `notFound` when the turn has no claim and `wrongState` when its claim is not unresolved
 * (already completed, or reconciled before): nothing changes in either case.
 */
export async function reconcile(
  store: GuardrailStore,
  reconciliation: Reconciliation,
  sink: OutputSink,
): Promise<ExitCode> {
  const turnKey = parseTurnKey(reconciliation.turnKey);
  // For the report only: the reconciliation itself is one atomic store operation.
  const before = (await store.listUnresolved()).find((mutation) => mutation.turnKey === turnKey);
  const outcome = await store.reconcileMutation(reconciliation);
  if (!outcome.reconciled) {
    if (outcome.reason === "not_found") {
      throw new CliError(
        EXIT.notFound,
        `turn ${turnKey} has no mutation claim: nothing to reconcile (check the key with 'inspect'; ` +
          "a claim reconciled as no-effect is removed, and 'audit' shows that)",
      );
    }
    throw new CliError(
      EXIT.wrongState,
      `the mutation of turn ${turnKey} is not pending or unknown (it completed, or was reconciled before): nothing changed`,
    );
  }
  const lines = [`reconciled turn ${turnKey}`];
  if (before !== undefined) {
    lines.push(
      `  call:         ${printable(before.toolName)} ${printable(before.toolCallId)} in scope ${printable(before.scopeId)}`,
      `  mutationKey:  ${before.mutationKey}`,
    );
  }
  lines.push(`  was:          ${outcome.state}`);
  if (reconciliation.resolution === "completed") {
    const { result } = reconciliation;
    lines.push(
      `  now:          complete, with the operator's result (${result.status}, ${String(result.content.length)} characters` +
        `${result.content.endsWith("\n") ? ", ending with a newline" : ""})`,
      "                retries of this same call replay that result; the tool does not run again",
    );
  } else {
    lines.push(
      "  now:          no claim (no-effect): the turn's mutation slot is open again",
      "                a new attempt of the turn may write once",
    );
  }
  if (outcome.state === "unknown") {
    lines.push(`                the scope${before === undefined ? "" : ` ${printable(before.scopeId)}`} is no longer blocked by this turn`);
  }
  lines.push(`  operatorRef:  ${printable(reconciliation.operatorRef)} (recorded in the audit trail)`);
  await sink.out(`${lines.join("\n")}\n`);
  return EXIT.ok;
}

// ---------------------------------------------------------------------------------------------
// audit

export interface AuditOptions {
  /** Events at or after this ISO time. */
  readonly since?: string;
  /** Events after this sequence number. */
  readonly afterSeq?: number;
  /** At most this many events in total. Default: all. */
  readonly limit?: number;
  /** Events per `readAudit` call. Default 1000. */
  readonly pageSize?: number;
}

/** Writes the audit trail as JSON lines, oldest first, paging through `readAudit` until it is exhausted. */
export async function audit(store: GuardrailStore, options: AuditOptions, sink: OutputSink): Promise<ExitCode> {
  const pageSize = options.pageSize ?? 1000;
  let remaining = options.limit ?? Number.POSITIVE_INFINITY;
  let afterSeq = options.afterSeq ?? 0;
  while (remaining > 0) {
    const page: StoredAuditEvent[] = await store.readAudit({
      ...(options.since === undefined ? {} : { since: options.since }),
      afterSeq,
      limit: Math.min(pageSize, remaining),
    });
    const events = page.slice(0, remaining);
    if (events.length === 0) break;
    for (const event of events) {
      if (event.seq <= afterSeq) {
        throw new CliError(EXIT.failure, `the store returned audit event ${String(event.seq)} out of order (after ${String(afterSeq)})`);
      }
      afterSeq = event.seq;
    }
    await sink.out(events.map((event) => `${terminalJson(event)}\n`).join(""));
    remaining -= events.length;
  }
  return EXIT.ok;
}
