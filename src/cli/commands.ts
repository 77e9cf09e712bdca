/**
 * The operator commands: `inspect`, `reconcile`, `audit`, `approvals`, `decide`, `expire` and `orphan`,
 * each a function of a store, its options and an output sink, so tests run them in-process
 * exactly as the CLI does. Flag parsing, opening the store and exit-code handling live in main.ts.
 */
import {
  APPROVAL_STATUSES,
  DigestSchema,
  type ApprovalDecision,
  type ApprovalRecord,
  type ApprovalStatus,
  type JsonValue,
  type EffectReconciliation,
  type ReconcileResult,
  type Reconciliation,
  type StoredAuditEvent,
  TurnRecordSchema,
  type UnresolvedEffect,
  type UnresolvedMutation,
} from "../contracts/index.js";
import { hasStorePart, withStoreParts, type AnyGuardrailStore } from "../store/capabilities.js";
import { parseStoreValue } from "../store/validate.js";
import { pauseWaitsOn } from "../turns/outcome.js";
import type { ConfirmClaim } from "../contracts/index.js";
import { confirmResolution } from "../decision/plan.js";
import { resolveLogger } from "../logger.js";
import { askConfirm } from "../pipeline/confirm.js";

/** The CLI's exit codes. */
export const EXIT = {
  ok: 0,
  /** Operational failure: the store cannot be opened or read, an I/O error. */
  failure: 1,
  /** Usage error: unknown or missing flags, malformed values. */
  usage: 2,
  /** The turn key has no mutation claim; the approval id has no request. */
  notFound: 3,
  /**
   * The record is not in a state the command acts on: a claim already reconciled, or another
   * call's than `--mutation-key` names; an approval request already decided, applied or expired.
   * Nothing changed.
   */
  wrongState: 4,
  /** compare: the tools do not match the reviewed manifest. */
  drift: 5,
  /** reconcile --auto: some unresolved claims are left for an operator (the others were settled). */
  leftForOperator: 6,
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

/** A value as one POSIX shell word: as it is when it is plain, else single-quoted. */
export function shellWord(value: string): string {
  if (/^[A-Za-z0-9_@%+=:,./-]+$/.test(value)) return value;
  return `'${value.split("'").join(`'\\''`)}'`;
}

/**
 * The store flags of suggested command lines (`--sqlite FILE`, `--postgres URL --schema S`),
 * shell-quoted, so a suggestion can be pasted as it is; `note` says what was left out (a
 * password is never printed).
 */
export interface SuggestedStore {
  readonly flags: string;
  readonly note?: string;
}

/** What suggestions print when the command was not given the store's flags (a direct call). */
const GENERIC_STORE: SuggestedStore = { flags: "STORE" };

/** A suggested command line: the bin, the store flags, then the command. */
function suggestion(store: SuggestedStore, command: string): string {
  return `  arkah-guardrails ${printable(store.flags)} ${command}`;
}

function suggestionNote(store: SuggestedStore): string[] {
  return store.note === undefined ? [] : [`  (${store.note})`];
}

// ---------------------------------------------------------------------------------------------
// inspect

export interface InspectOptions {
  /** Machine-readable output: a JSON array. */
  readonly json?: boolean;
  /** The clock ages are computed against. Default: the system clock. */
  readonly now?: () => Date;
  /** The store flags for the suggested command lines. Default: a generic `STORE` where the flags go. */
  readonly store?: SuggestedStore;
  /**
   * List the unresolved side effects only (`inspect --effects`); with `json`, as a JSON array of
   * {@link UnresolvedEffectView}. Without it, the text lists them after the mutations (when the
   * store has the `effects` part) and `--json` prints the mutations only, as it always did.
   */
  readonly effects?: boolean;
}

/** One unresolved side effect as `inspect --effects --json` prints it. */
export interface UnresolvedEffectView {
  readonly effectKey: string;
  readonly turnKey: string;
  readonly scopeId: string;
  readonly toolName: string;
  readonly toolCallId: string;
  readonly state: UnresolvedEffect["state"];
  readonly claimedAt: string;
  /** Whole seconds since `claimedAt` (0 if the claim's clock is ahead). */
  readonly ageSeconds: number;
  readonly argsDigest: string;
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

/** Why a command needs a part of the store contract, for the `ConfigurationError` of a store without it. */
const OPERATOR_WHY = "operator commands need (listing and reconciling unresolved mutations)";
const EFFECTS_WHY = "side-effect commands need (listing and reconciling unresolved side effects)";
const APPROVALS_WHY = "approval commands need (listing, deciding and expiring approval requests)";

/**
 * Lists the unresolved (`pending` or `unknown`) mutations, oldest claim first, then, when the store
 * has the `effects` part, the unresolved side effects (`effects`: those only).
 */
export async function inspect(given: AnyGuardrailStore, options: InspectOptions, sink: OutputSink): Promise<ExitCode> {
  const nowMs = (options.now ?? (() => new Date()))().getTime();
  const suggested = options.store ?? GENERIC_STORE;
  if (options.effects === true) {
    const store = withStoreParts(given, ["effects"], "inspect --effects", EFFECTS_WHY);
    const effects = (await store.listUnresolvedEffects()).map((effect) => effectView(effect, nowMs));
    await sink.out(options.json === true ? `${terminalJson(effects, 2)}\n` : `${effectLines(effects, suggested).join("\n")}\n`);
    return EXIT.ok;
  }
  const store = withStoreParts(given, ["operator"], "inspect", OPERATOR_WHY);
  const unresolved = (await store.listUnresolved()).map((mutation) => view(mutation, nowMs));
  if (options.json === true) {
    await sink.out(`${terminalJson(unresolved, 2)}\n`);
    return EXIT.ok;
  }
  const lines: string[] = [];
  if (unresolved.length === 0) {
    lines.push("no unresolved mutations");
  } else {
    const unknown = unresolved.filter((mutation) => mutation.state === "unknown").length;
    lines.push(
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
      suggestion(suggested, "reconcile --turn-key KEY --completed --result-file FILE --operator-ref REF"),
      suggestion(suggested, "reconcile --turn-key KEY --no-effect --operator-ref REF"),
      ...suggestionNote(suggested),
    );
  }
  if (hasStorePart(given, "effects")) {
    const effects = (await given.listUnresolvedEffects()).map((effect) => effectView(effect, nowMs));
    lines.push("", ...effectLines(effects, suggested));
  }
  await sink.out(`${lines.join("\n")}\n`);
  return EXIT.ok;
}

function effectView(effect: UnresolvedEffect, nowMs: number): UnresolvedEffectView {
  return {
    effectKey: effect.effectKey,
    turnKey: effect.turnKey,
    scopeId: effect.scopeId,
    toolName: effect.toolName,
    toolCallId: effect.toolCallId,
    state: effect.state,
    claimedAt: effect.claimedAt,
    ageSeconds: Math.max(0, Math.floor((nowMs - Date.parse(effect.claimedAt)) / 1000)),
    argsDigest: effect.argsDigest,
  };
}

/** The side-effect section of `inspect`: its own table, its own reconcile lines. */
function effectLines(effects: readonly UnresolvedEffectView[], suggested: SuggestedStore): string[] {
  if (effects.length === 0) return ["no unresolved side effects"];
  const unknown = effects.filter((effect) => effect.state === "unknown").length;
  return [
    `${String(effects.length)} unresolved side effect${effects.length === 1 ? "" : "s"} ` +
      `(${String(unknown)} unknown, ${String(effects.length - unknown)} pending), oldest first:`,
    "",
    ...table(
      ["AGE", "STATE", "SCOPE", "TOOL", "CALL ID", "CLAIMED AT", "EFFECT KEY"],
      effects.map((effect) => [
        formatAge(effect.ageSeconds),
        effect.state,
        printable(effect.scopeId),
        printable(effect.toolName),
        printable(effect.toolCallId),
        effect.claimedAt,
        effect.effectKey,
      ]),
    ),
    "",
    "Check each effect with the service it acts on (by its EFFECT KEY, if you pass it as an idempotency key), then:",
    suggestion(suggested, "reconcile --effect KEY --completed --result-file FILE --operator-ref REF"),
    suggestion(suggested, "reconcile --effect KEY --no-effect --operator-ref REF"),
    ...suggestionNote(suggested),
  ];
}

// ---------------------------------------------------------------------------------------------
// reconcile

/**
 * Resolves one `pending` or `unknown` mutation on the operator's word (with `mutationKey`, only
 * that call's claim). The same reconciliation repeated answers "already reconciled" with `ok`.
 * Otherwise throws `CliError` with `notFound` when the turn has no claim and `wrongState` when its
 * claim is not unresolved (already completed, or reconciled with another outcome) or is another
 * call's than `mutationKey` names: nothing changes in any of these cases.
 */
export async function reconcile(
  given: AnyGuardrailStore,
  reconciliation: Reconciliation,
  sink: OutputSink,
): Promise<ExitCode> {
  const store = withStoreParts(given, ["operator"], "reconcile", OPERATOR_WHY);
  const turnKey = parseTurnKey(reconciliation.turnKey);
  // For the report only: the reconciliation itself is one atomic store operation.
  const before = (await store.listUnresolved()).find((mutation) => mutation.turnKey === turnKey);
  const outcome = await store.reconcileMutation(reconciliation);
  if (!outcome.reconciled) {
    if (await alreadyReconciled(store, reconciliation, outcome.reason)) {
      const now =
        reconciliation.resolution === "completed" ? "complete, with this same result" : "no claim (no-effect): the turn's mutation slot is open";
      await sink.out(`already reconciled: turn ${turnKey} was reconciled with this same outcome; nothing changed\n  now:          ${now}\n`);
      return EXIT.ok;
    }
    if (outcome.reason === "not_found") {
      throw new CliError(
        EXIT.notFound,
        `turn ${turnKey} has no mutation claim: nothing to reconcile (check the key with 'inspect'; ` +
          "a claim reconciled as no-effect is removed, and 'audit' shows that)",
      );
    }
    if (outcome.reason === "other_call") {
      throw new CliError(
        EXIT.wrongState,
        `the mutation claim of turn ${turnKey} is another call's, not the one --mutation-key names ` +
          "(the slot was reopened and claimed again since you checked; check it with 'inspect'): nothing changed",
      );
    }
    throw new CliError(
      EXIT.wrongState,
      `the mutation of turn ${turnKey} is not pending or unknown (it completed, or was reconciled before with another outcome): nothing changed`,
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

/** Why `reconcileMutation` changed nothing. */
type ReconcileFailure = Extract<ReconcileResult, { reconciled: false }>["reason"];

/**
 * Whether a reconciliation the store refused repeats the last one of its turn (of its call, with
 * `mutationKey`): that latest `reconciled` audit event has this resolution, and the claim is still
 * as it left it (complete with an equal result, or absent after no-effect; with `mutationKey`, the
 * slot may since hold another call's claim). A repeated command (a retried script, a second
 * operator) is then a success, not an error; another outcome stays `wrongState`.
 */
async function alreadyReconciled(store: AnyGuardrailStore, reconciliation: Reconciliation, reason: ReconcileFailure): Promise<boolean> {
  const { mutationKey } = reconciliation;
  const events = await store.readAudit({ turnKey: reconciliation.turnKey });
  const last = events.filter((event) => event.decision === "reconciled" && (mutationKey === undefined || event.mutationKey === mutationKey)).at(-1);
  if (last?.action !== reconciliation.resolution) return false;
  // The named call's claim went with its no-effect; another call claimed the slot afterwards.
  if (reconciliation.resolution === "no-effect" && reason === "other_call") return true;
  const mutation = await store.getMutation(reconciliation.turnKey);
  if (reconciliation.resolution === "no-effect") return mutation === undefined;
  if (reason === "other_call") return false;
  return (
    mutation?.state === "complete" &&
    mutation.result?.status === reconciliation.result.status &&
    mutation.result.content === reconciliation.result.content
  );
}

/**
 * Resolves one `pending` or `unknown` side effect on the operator's word (`reconcile --effect`),
 * as `reconcile` does a mutation. The same `completed` reconciliation repeated answers "already
 * reconciled" with `ok`; an effect with no claim (never claimed, or reconciled `no-effect`, which
 * removes it) is `notFound`; one not unresolved is `wrongState`. Nothing changes in these cases.
 */
export async function reconcileEffect(
  given: AnyGuardrailStore,
  reconciliation: EffectReconciliation,
  sink: OutputSink,
): Promise<ExitCode> {
  const store = withStoreParts(given, ["effects"], "reconcile --effect", EFFECTS_WHY);
  const effectKey = parseEffectKey(reconciliation.effectKey);
  // For the report only: the reconciliation itself is one atomic store operation.
  const before = (await store.listUnresolvedEffects()).find((effect) => effect.effectKey === effectKey);
  const outcome = await store.reconcileEffect(reconciliation);
  if (!outcome.reconciled) {
    const current = await store.getEffect(effectKey);
    if (
      reconciliation.resolution === "completed" &&
      current?.state === "complete" &&
      current.result?.status === reconciliation.result.status &&
      current.result.content === reconciliation.result.content
    ) {
      await sink.out(`already reconciled: side effect ${effectKey} is complete with this same result; nothing changed\n`);
      return EXIT.ok;
    }
    if (outcome.reason === "not_found") {
      throw new CliError(
        EXIT.notFound,
        `side effect ${effectKey} has no claim: nothing to reconcile (check the key with 'inspect'; ` +
          "an effect reconciled as no-effect is removed, and 'audit' shows that)",
      );
    }
    throw new CliError(
      EXIT.wrongState,
      `side effect ${effectKey} is not pending or unknown (it completed, or was reconciled before with another outcome): nothing changed`,
    );
  }
  const lines = [`reconciled side effect ${effectKey}`];
  if (before !== undefined) {
    lines.push(
      `  call:         ${printable(before.toolName)} ${printable(before.toolCallId)} in scope ${printable(before.scopeId)}`,
      `  turnKey:      ${before.turnKey}`,
    );
  }
  lines.push(`  was:          ${outcome.state}`);
  if (reconciliation.resolution === "completed") {
    const { result } = reconciliation;
    lines.push(
      `  now:          complete, with the operator's result (${result.status}, ${String(result.content.length)} characters` +
        `${result.content.endsWith("\n") ? ", ending with a newline" : ""})`,
      "                the same call (turn, tool, arguments) replays that result; the tool does not run again",
    );
  } else {
    lines.push("  now:          no claim (no-effect): the same call may run again, once", "                it no longer counts toward the tool's maxPerTurn");
  }
  lines.push(`  operatorRef:  ${printable(reconciliation.operatorRef)} (recorded in the audit trail)`);
  await sink.out(`${lines.join("\n")}\n`);
  return EXIT.ok;
}

/** An effect key as the store uses it: 64 lowercase hex characters. */
/** Validates `--mutation-key` (64 lowercase hex characters); throws a usage `CliError` otherwise. */
export function parseMutationKey(value: string): string {
  if (!DigestSchema.safeParse(value).success) {
    throw new CliError(
      EXIT.usage,
      `--mutation-key: expected 64 lowercase hex characters (a mutationKey as 'inspect' shows it), got ${quote(value)}`,
    );
  }
  return value;
}

export function parseEffectKey(value: string): string {
  if (!DigestSchema.safeParse(value).success) {
    throw new CliError(
      EXIT.usage,
      `--effect: expected 64 lowercase hex characters (an effect key as 'inspect' shows it), got ${quote(value)}`,
    );
  }
  return value;
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
  /** Only the events of this turn. */
  readonly turnKey?: string;
  /** Only the events of this scope. */
  readonly scopeId?: string;
  /** Only the events of this approval request: its history. */
  readonly approvalId?: string;
}

/** Writes the audit trail as JSON lines, oldest first, paging through `readAudit` until it is exhausted. */
export async function audit(store: AnyGuardrailStore, options: AuditOptions, sink: OutputSink): Promise<ExitCode> {
  const pageSize = options.pageSize ?? 1000;
  let remaining = options.limit ?? Number.POSITIVE_INFINITY;
  let afterSeq = options.afterSeq ?? 0;
  while (remaining > 0) {
    const page: StoredAuditEvent[] = await store.readAudit({
      ...(options.since === undefined ? {} : { since: options.since }),
      ...(options.turnKey === undefined ? {} : { turnKey: options.turnKey }),
      ...(options.scopeId === undefined ? {} : { scopeId: options.scopeId }),
      ...(options.approvalId === undefined ? {} : { approvalId: options.approvalId }),
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

// ---------------------------------------------------------------------------------------------
// approvals

export interface ApprovalsOptions {
  /** Only requests in this status. Default: every status. */
  readonly status?: ApprovalStatus;
  /** At most this many requests (the oldest). Default and maximum: the store's, 10000. */
  readonly limit?: number;
  /** Machine-readable output: a JSON array of the stored records. */
  readonly json?: boolean;
  /** The clock ages are computed against. Default: the system clock. */
  readonly now?: () => Date;
  /** The store flags for the suggested command lines. Default: a generic `STORE` where the flags go. */
  readonly store?: SuggestedStore;
}

/** The most `listApprovals` returns in one call. */
export const MAX_APPROVALS = 10_000;

/** One approval request as `approvals --json` prints it: the stored record, with its age. */
export type ApprovalView = ApprovalRecord & {
  /** Whole seconds since `requestedAt` (0 if the request's clock is ahead). */
  readonly ageSeconds: number;
};

/** Arguments for a terminal line: compact JSON, escaped like every stored value. */
function argsText(args: Readonly<Record<string, JsonValue>>): string {
  return terminalJson(args);
}

/** `approve by OPS-1 at T`, `reject by OPS-2 at T: "message"`, `edit ... to {...}`. */
function decisionText(record: ApprovalRecord): string | undefined {
  const { decision } = record;
  if (decision === undefined) return undefined;
  const by = record.operatorRef === undefined ? "" : ` by ${printable(record.operatorRef)}`;
  const at = record.decidedAt === undefined ? "" : ` at ${record.decidedAt}`;
  const what =
    decision.decision === "reject"
      ? decision.message === undefined
        ? ""
        : `, message ${terminalJson(decision.message)}`
      : decision.decision === "edit"
        ? `, arguments ${argsText(decision.args)}`
        : "";
  return `${decision.decision}${by}${at}${what}`;
}

/** The lines under a request's row: why a person is asked, and what became of it. */
function approvalDetails(record: ApprovalRecord): string[] {
  const lines: string[] = [];
  if (record.reason !== undefined) lines.push(`  reason:    ${printable(record.reason)}`);
  lines.push(`  asked by:  ${record.guardrails.map(printable).join(", ")}, in turn ${record.turnKey}`);
  const decided = decisionText(record);
  if (decided !== undefined) lines.push(`  decision:  ${decided}`);
  if (record.appliedAt !== undefined) lines.push(`  applied:   ${record.appliedAt} (the call it allowed ran)`);
  if (record.expiredAt !== undefined) lines.push(`  expired:   ${record.expiredAt} (nobody decided it in time)`);
  if (record.orphanedAt !== undefined) lines.push(`  orphaned:  ${record.orphanedAt} (decided, but its call never ran in time)`);
  return lines;
}

function countsByStatus(records: readonly ApprovalRecord[]): string {
  return APPROVAL_STATUSES.flatMap((status) => {
    const count = records.filter((record) => record.status === status).length;
    return count === 0 ? [] : [`${String(count)} ${status}`];
  }).join(", ");
}

/** Lists approval requests, oldest first, with the arguments a person is asked about. */
export async function approvals(given: AnyGuardrailStore, options: ApprovalsOptions, sink: OutputSink): Promise<ExitCode> {
  const store = withStoreParts(given, ["approvals"], "approvals", APPROVALS_WHY);
  const nowMs = (options.now ?? (() => new Date()))().getTime();
  const records = await store.listApprovals({
    ...(options.status === undefined ? {} : { status: options.status }),
    ...(options.limit === undefined ? {} : { limit: options.limit }),
  });
  const views: ApprovalView[] = records.map((record) => ({
    ...record,
    ageSeconds: Math.max(0, Math.floor((nowMs - Date.parse(record.requestedAt)) / 1000)),
  }));
  if (options.json === true) {
    await sink.out(`${terminalJson(views, 2)}\n`);
    return EXIT.ok;
  }
  const which = options.status === undefined ? "" : `${options.status} `;
  if (views.length === 0) {
    await sink.out(`no ${which}approval requests\n`);
    return EXIT.ok;
  }
  const header = table(
    ["AGE", "STATUS", "SCOPE", "TOOL", "CALL ID", "APPROVAL ID", "ARGUMENTS"],
    views.map((record) => [
      formatAge(record.ageSeconds),
      record.status,
      printable(record.scopeId),
      printable(record.toolName),
      printable(record.toolCallId),
      record.approvalId,
      argsText(record.args),
    ]),
  );
  const lines = [
    `${String(views.length)} ${which}approval request${views.length === 1 ? "" : "s"}` +
      `${options.status === undefined ? ` (${countsByStatus(views)})` : ""}, oldest first:`,
    "",
    header[0] ?? "",
  ];
  views.forEach((record, index) => {
    lines.push(header[index + 1] ?? "", ...approvalDetails(record));
  });
  const limit = options.limit ?? MAX_APPROVALS;
  if (views.length >= limit) {
    lines.push("", `(the oldest ${String(limit)}: there may be more; narrow with --status)`);
  }
  const pending = views.filter((record) => record.status === "pending");
  if (pending.length > 0) {
    const store = options.store ?? GENERIC_STORE;
    const id = pending.length === 1 ? (pending[0]?.approvalId ?? "ID") : "ID";
    lines.push(
      "",
      `Decide ${pending.length === 1 ? "the pending request" : "a pending request by its APPROVAL ID"} ` +
        "(its run applies the decision when it resumes):",
      suggestion(store, `decide --approval-id ${id} --approve --operator-ref REF`),
      suggestion(store, `decide --approval-id ${id} --reject --message TEXT --operator-ref REF`),
      suggestion(store, `decide --approval-id ${id} --edit-file ARGS.json --operator-ref REF`),
      ...suggestionNote(store),
    );
  }
  await sink.out(`${lines.join("\n")}\n`);
  return EXIT.ok;
}

// ---------------------------------------------------------------------------------------------
// decide

export interface DecideOptions {
  readonly approvalId: string;
  readonly decision: ApprovalDecision;
  readonly operatorRef: string;
  /** The decision's time. Default: the system clock. */
  readonly now?: () => Date;
}

/** A request that is not pending, in words: its status and how it got there. */
function notPending(record: ApprovalRecord): string {
  const decided = decisionText(record);
  switch (record.status) {
    case "expired":
      return `expired (at ${record.expiredAt ?? "?"}; nobody decided it in time), and can no longer be decided: its call is refused approval_expired`;
    case "applied":
      return `applied (${decided ?? "decided"}; the call it allowed ran at ${record.appliedAt ?? "?"})`;
    case "orphaned":
      return (
        `orphaned (at ${record.orphanedAt ?? "?"}; ${decided ?? "decided"}, but its call never ran in time), and can no ` +
        "longer be decided: its call is refused approval_orphaned"
      );
    default:
      return `${record.status} (${decided ?? "decided"})`;
  }
}

/**
 * Decides a pending approval request on the operator's word (`decideApproval`): the first
 * decision stored wins; the same decision given again answers as the first time (nothing changes).
 * Throws `CliError` with `notFound` when there is no such request and `wrongState` when it is not
 * pending and this is another decision (decided, applied, expired or orphaned): nothing changes.
 */
/**
 * A pending request of a turn the turn service runs is decidable only once the turn's pause is
 * stored (its checkpoint written), as through `decide` of the service: before that a decision could
 * approve a run that no longer exists. A request of a turn without a turn record (no turn service)
 * is decided as before.
 */
async function refuseBeforeDurablePause(given: AnyGuardrailStore, store: { getApproval(id: string): Promise<ApprovalRecord | undefined> }, approvalId: string): Promise<void> {
  if (!hasStorePart(given, "turns")) return;
  const request = await store.getApproval(approvalId);
  if (request?.status !== "pending") return;
  const answer = await given.getTurn(request.turnKey);
  if (answer === undefined) return;
  const turn = parseStoreValue(TurnRecordSchema, answer, "getTurn answer");
  if (pauseWaitsOn(turn, approvalId)) return;
  throw new CliError(
    EXIT.wrongState,
    turn.state === "running"
      ? `approval request ${approvalId} is not decidable yet: its turn is still running and its pause is not stored; nothing decided (try again shortly)`
      : `approval request ${approvalId} is not one its turn waits on (the turn is ${turn.state}); nothing decided`,
  );
}

export async function decide(given: AnyGuardrailStore, options: DecideOptions, sink: OutputSink): Promise<ExitCode> {
  const store = withStoreParts(given, ["approvals"], "decide", APPROVALS_WHY);
  const approvalId = parseApprovalId(options.approvalId);
  await refuseBeforeDurablePause(given, store, approvalId);
  const decidedAt = (options.now ?? (() => new Date()))().toISOString();
  const outcome = await store.decideApproval({
    approvalId,
    decision: options.decision,
    operatorRef: options.operatorRef,
    decidedAt,
  });
  if (!outcome.decided) {
    if (outcome.reason === "not_found" || outcome.record === undefined) {
      throw new CliError(
        EXIT.notFound,
        `no approval request ${approvalId}: nothing decided (check the id with 'approvals'; ` +
          "prune removes a finished turn's requests, never a pending one, and 'audit' shows what happened to them)",
      );
    }
    throw new CliError(EXIT.wrongState, `approval request ${approvalId} is ${notPending(outcome.record)}: nothing changed`);
  }
  const { record } = outcome;
  if (outcome.repeated === true) {
    await sink.out(
      `approval request ${approvalId} was already decided this way: ${notPending(record)}; nothing changed\n`,
    );
    return EXIT.ok;
  }
  const lines = [
    `decided approval request ${approvalId}: ${record.status}`,
    `  call:         ${printable(record.toolName)} ${printable(record.toolCallId)} in scope ${printable(record.scopeId)}`,
    `  turn:         ${record.turnKey}`,
    `  arguments:    ${argsText(record.args)}`,
    "  was:          pending",
  ];
  const { decision } = options;
  if (decision.decision === "approve") {
    lines.push(
      "  now:          approved: when its run resumes, the call runs with these arguments and the",
      "                request becomes applied; running the call again asks again",
    );
  } else if (decision.decision === "reject") {
    lines.push(
      "  now:          rejected: when its run resumes, the model gets approval_rejected" +
        (decision.message === undefined ? "" : ` with your message ${terminalJson(decision.message)}`),
      "                and the call does not run",
    );
  } else {
    lines.push(
      `  now:          edited: when its run resumes, the call runs with ${argsText(decision.args)}`,
      "                only the JSON shape was checked here: the full check (the tool's schema, its",
      "                scope, authorize, every guardrail) happens when the run resumes; if it fails,",
      "                the call is refused with that check's code, nothing runs, and the request is",
      "                closed (it stays edited and is never carried out)",
    );
  }
  lines.push(
    "                the run resumes when its host resumes it (Command({ resume })): this decision",
    "                stands, whatever the resume value says",
    `  operatorRef:  ${printable(options.operatorRef)} (recorded in the audit trail)`,
  );
  await sink.out(`${lines.join("\n")}\n`);
  return EXIT.ok;
}

/** An approval id as the store uses it: 64 lowercase hex characters. */
export function parseApprovalId(value: string): string {
  if (!DigestSchema.safeParse(value).success) {
    throw new CliError(
      EXIT.usage,
      `--approval-id: expected 64 lowercase hex characters (an APPROVAL ID as 'approvals' shows it), got ${quote(value)}`,
    );
  }
  return value;
}

// ---------------------------------------------------------------------------------------------
// expire

export interface ExpireOptions {
  /** Pending requests made more than this many milliseconds ago expire. */
  readonly olderThanMs: number;
  /** The duration as the operator wrote it, for the report. */
  readonly olderThan: string;
  /** The clock the cutoff is computed against. Default: the system clock. */
  readonly now?: () => Date;
}

/** Expires every pending request older than the duration (`expireApprovals`). */
export async function expire(given: AnyGuardrailStore, options: ExpireOptions, sink: OutputSink): Promise<ExitCode> {
  const store = withStoreParts(given, ["approvals"], "expire", APPROVALS_WHY);
  const nowMs = (options.now ?? (() => new Date()))().getTime();
  const cutoff = new Date(nowMs - options.olderThanMs);
  if (Number.isNaN(cutoff.getTime())) {
    throw new CliError(EXIT.usage, `--older-than: ${quote(options.olderThan)} reaches before the earliest time a date can hold`);
  }
  const olderThan = cutoff.toISOString();
  const { expired } = await store.expireApprovals({ olderThan });
  const what = `pending approval request${expired === 1 ? "" : "s"} made before ${olderThan} (older than ${printable(options.olderThan)})`;
  const lines =
    expired === 0
      ? [`expired 0 ${what}: nothing changed`]
      : [
          `expired ${String(expired)} ${what}`,
          "  they can no longer be decided; when their runs resume, their calls are refused approval_expired",
        ];
  await sink.out(`${lines.join("\n")}\n`);
  return EXIT.ok;
}

// ---------------------------------------------------------------------------------------------
// orphan

/** `orphan`'s options: the age, as given and in milliseconds. */
export interface OrphanOptions {
  /** The duration as the operator typed it (for the message). */
  readonly olderThan: string;
  readonly olderThanMs: number;
  /** The clock the age is computed against. Default: the system clock. */
  readonly now?: () => Date;
}

const ORPHANS_WHY = "orphan needs (retiring approved or edited requests whose call never ran)";

/** Orphans every approved or edited request decided more than `olderThanMs` ago and never applied. */
export async function orphan(given: AnyGuardrailStore, options: OrphanOptions, sink: OutputSink): Promise<ExitCode> {
  const store = withStoreParts(given, ["approvalOrphans"], "orphan", ORPHANS_WHY);
  const nowMs = (options.now ?? (() => new Date()))().getTime();
  const cutoff = new Date(nowMs - options.olderThanMs);
  if (Number.isNaN(cutoff.getTime())) {
    throw new CliError(EXIT.usage, `--older-than: ${quote(options.olderThan)} reaches before the earliest time a date can hold`);
  }
  const decidedBefore = cutoff.toISOString();
  const { orphaned } = await store.orphanApprovals({ decidedBefore });
  const what = `approved or edited request${orphaned === 1 ? "" : "s"} decided before ${decidedBefore} (older than ${printable(options.olderThan)}) whose call never ran`;
  const lines =
    orphaned === 0
      ? [`orphaned 0 ${what}: nothing changed`]
      : [
          `orphaned ${String(orphaned)} ${what}`,
          "  they can no longer be applied or decided; when their runs resume, their calls are refused approval_orphaned",
          "  and nothing runs; 'approvals --status orphaned' lists them, 'audit --approval-id ID' shows each one's history",
        ];
  await sink.out(`${lines.join("\n")}\n`);
  return EXIT.ok;
}

// ---------------------------------------------------------------------------------------------
// reconcile --auto

/**
 * `reconcile --auto`: every unresolved claim (`listUnresolved`, and `listUnresolvedEffects` when
 * the store has side effects) is put to its tool's `confirm`, and settled with its answer as an
 * operator's reconciliation would be (operator reference `confirm:<tool>`). A claim whose tool has
 * no `confirm`, or whose `confirm` cannot tell (`unknown`, a throw, a timeout, an answer that is
 * not valid), is listed as left for an operator: `EXIT.leftForOperator` when there is any, else ok.
 */
export async function reconcileAuto(
  given: AnyGuardrailStore,
  confirmOf: (toolName: string) => ConfirmClaim | undefined,
  sink: OutputSink,
): Promise<ExitCode> {
  const store = withStoreParts(given, ["operator"], "reconcile --auto", OPERATOR_WHY);
  // confirm's failures are warned with the error's class only, never its text.
  const logger = resolveLogger({
    warn: (message, fields) => {
      void sink.err(`warning: ${message} (${printable(JSON.stringify(fields))})\n`);
    },
  });
  let settled = 0;
  const left: string[] = [];
  const settle = async (
    claim: UnresolvedMutation | UnresolvedEffect,
    reconcileWith: (resolution: NonNullable<ReturnType<typeof confirmResolution>>, operatorRef: string) => Promise<boolean>,
  ): Promise<void> => {
    const named = "effectKey" in claim ? `side effect ${claim.effectKey}` : `mutation of turn ${claim.turnKey}`;
    const call = `${printable(claim.toolName)} ${printable(claim.toolCallId)}`;
    const confirm = confirmOf(claim.toolName);
    if (confirm === undefined) {
      left.push(`left for an operator: ${named} (${call}, ${claim.state}): its tool has no confirm`);
      return;
    }
    const key = "effectKey" in claim ? { kind: "side-effect" as const, effectKey: claim.effectKey } : { kind: "mutation" as const, mutationKey: claim.mutationKey };
    const answer = await askConfirm(
      confirm,
      { ...key, toolName: claim.toolName, toolCallId: claim.toolCallId, scopeId: claim.scopeId, turnKey: claim.turnKey, state: claim.state },
      { signal: undefined, logger, log: { toolName: claim.toolName, toolCallId: claim.toolCallId } },
    );
    const resolution = confirmResolution(answer);
    if (resolution === undefined) {
      left.push(`left for an operator: ${named} (${call}, ${claim.state}): confirm does not know`);
      return;
    }
    if (!(await reconcileWith(resolution, `confirm:${claim.toolName}`))) {
      left.push(`left for an operator: ${named} (${call}): it changed meanwhile; check it with 'inspect'`);
      return;
    }
    settled += 1;
    await sink.out(`settled ${named} (${call}, was ${claim.state}): ${resolution.resolution}, by confirm:${printable(claim.toolName)}\n`);
  };
  for (const claim of await store.listUnresolved()) {
    // Reconciled by the turn's slot, only while it is still this claim's: confirm took time, and
    // the store checks the mutationKey in the reconciliation's own transaction.
    await settle(
      claim,
      async (resolution, operatorRef) =>
        (await store.reconcileMutation({ turnKey: claim.turnKey, ...resolution, operatorRef, mutationKey: claim.mutationKey })).reconciled,
    );
  }
  if (hasStorePart(given, "effects")) {
    const effects = withStoreParts(given, ["effects"], "reconcile --auto", EFFECTS_WHY);
    for (const claim of await effects.listUnresolvedEffects()) {
      await settle(claim, async (resolution, operatorRef) => (await effects.reconcileEffect({ effectKey: claim.effectKey, ...resolution, operatorRef })).reconciled);
    }
  }
  for (const line of left) await sink.out(`${line}\n`);
  await sink.out(`${String(settled)} settled by confirm, ${String(left.length)} left for an operator\n`);
  return left.length === 0 ? EXIT.ok : EXIT.leftForOperator;
}
