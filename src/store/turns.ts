/**
 * The turn record's transitions, decided once for every store: each store reads the turn's record
 * (under its lock or transaction), asks one of these what to answer and what to write, and writes
 * it. Pure: the time and the new lease token come from the caller.
 */
import {
  BeginTurnInputSchema,
  FinishTurnInputSchema,
  ListTurnsQuerySchema,
  RenewTurnInputSchema,
  ResumeTurnInputSchema,
  TakePrunableTurnInputSchema,
  TurnRecordSchema,
  type ApprovalRecord,
  type BeginTurnInput,
  type BeginTurnResult,
  type FinishTurnInput,
  type ListTurnsQuery,
  type RenewTurnInput,
  type ResumeTurnInput,
  type ResumeTurnResult,
  type TakePrunableTurnInput,
  type TurnRecord,
} from "../contracts/index.js";
import { parseStoreValue } from "./validate.js";

/** What a transition answers, and the record to store (none: nothing changes). */
export interface TurnTransition<A> {
  /** What the store answers. */
  readonly answer: A;
  /** The record to store, in the same transaction; undefined: nothing changes. */
  readonly write: TurnRecord | undefined;
}

const plus = (at: string, ms: number): string => new Date(Date.parse(at) + ms).toISOString();

/** `beginTurn`'s input, detached; a `StoreContractError` if invalid. */
export const parseBeginTurn = (input: unknown): BeginTurnInput => parseStoreValue(BeginTurnInputSchema, input, "beginTurn input");
/** `finishTurn`'s input, detached. */
export const parseFinishTurn = (input: unknown): FinishTurnInput => parseStoreValue(FinishTurnInputSchema, input, "finishTurn input");
/** `resumeTurn`'s input, detached. */
export const parseResumeTurn = (input: unknown): ResumeTurnInput => parseStoreValue(ResumeTurnInputSchema, input, "resumeTurn input");
/** `takePrunableTurn`'s input, detached. */
export const parseTakePrunableTurn = (input: unknown): TakePrunableTurnInput => parseStoreValue(TakePrunableTurnInputSchema, input, "takePrunableTurn input");
/** `renewTurn`'s input, detached. */
export const parseRenewTurn = (input: unknown): RenewTurnInput => parseStoreValue(RenewTurnInputSchema, input, "renewTurn input");

/** A `listTurns` query with its defaults: every field a store's listing needs. */
export interface ParsedListTurns {
  /** The state listed. */
  readonly state: ListTurnsQuery["state"];
  /** Only running turns whose lease expired. */
  readonly expired: boolean;
  /** Only paused turns with no pending approval request. */
  readonly decided: boolean;
  /** With `finished`: the cut-off (ISO 8601); only turns last updated strictly before it. Undefined otherwise. */
  readonly olderThan: string | undefined;
  /** Only turn keys after this one; undefined: from the first. */
  readonly after: string | undefined;
  /** At most this many. */
  readonly limit: number;
}
/** `listTurns`' query, detached, with its defaults (limit 100). */
export function parseListTurns(query: unknown): ParsedListTurns {
  const parsed = parseStoreValue(ListTurnsQuerySchema, query, "listTurns query");
  return {
    state: parsed.state,
    expired: parsed.expired ?? false,
    decided: parsed.decided ?? false,
    olderThan: parsed.olderThan,
    after: parsed.after,
    limit: parsed.limit ?? 100,
  };
}

/** A stored turn record, as read back (a row, a map entry): a corrupt one fails closed. */
export const parseTurnRecord = (value: unknown, what = "turn record"): TurnRecord => parseStoreValue(TurnRecordSchema, value, what);

/**
 * `beginTurn`: insert if absent, take over an expired lease, else answer what the turn is.
 * `requestHolder` is the turn key that holds the input's request key, if any turn does (the
 * store reads it in the same transaction; it matters only when `existing` is undefined): a new
 * turn whose request is another turn's (the same idempotency key for another scope) is
 * `input_mismatch`, and nothing is stored.
 */
export function beginTransition(
  existing: TurnRecord | undefined,
  input: BeginTurnInput,
  now: string,
  token: string,
  requestHolder: string | undefined,
): TurnTransition<BeginTurnResult> {
  const lease = { token, expiresAt: plus(now, input.leaseMs) };
  if (existing === undefined) {
    if (requestHolder !== undefined && requestHolder !== input.turn.turnKey) return { answer: { status: "input_mismatch" }, write: undefined };
    const record: TurnRecord = { ...input.turn, state: "running", lease, createdAt: now, updatedAt: now };
    return { answer: { status: "started", token, record }, write: record };
  }
  if (existing.inputDigest !== input.turn.inputDigest) return { answer: { status: "input_mismatch" }, write: undefined };
  if (existing.state !== "running") return { answer: { status: "finished", record: existing }, write: undefined };
  // An unparseable expiry never expires: a corrupt lease is not a reason to run a turn twice.
  const expires = Date.parse(existing.lease?.expiresAt ?? "");
  if (!(expires <= Date.parse(now))) return { answer: { status: "running", record: existing }, write: undefined };
  const record: TurnRecord = { ...existing, lease, updatedAt: now };
  return { answer: { status: "taken_over", token, record }, write: record };
}

/** `finishTurn`: compare-and-set from `running` by the lease token. */
export function finishTransition(existing: TurnRecord | undefined, input: FinishTurnInput, now: string): TurnTransition<boolean> {
  if (existing?.state !== "running" || existing.lease?.token !== input.token) return { answer: false, write: undefined };
  const { lease: _dropped, ...rest } = existing;
  const record: TurnRecord = { ...rest, state: input.state, outcome: input.outcome, updatedAt: now };
  return { answer: true, write: record };
}

/** `resumeTurn`: compare-and-set from `awaiting_approval` (or `input.from`) to `running` under a new lease. */
export function resumeTransition(
  existing: TurnRecord | undefined,
  input: ResumeTurnInput,
  now: string,
  token: string,
): TurnTransition<ResumeTurnResult> {
  if (existing === undefined) return { answer: { resumed: false }, write: undefined };
  // A turn prune took is losing its thread: running it again would run on a thread being deleted.
  if (existing.state !== (input.from ?? "awaiting_approval") || existing.pruning === true) return { answer: { resumed: false, record: existing }, write: undefined };
  const { outcome: _previous, ...rest } = existing;
  const record: TurnRecord = { ...rest, state: "running", lease: { token, expiresAt: plus(now, input.leaseMs) }, updatedAt: now };
  return { answer: { resumed: true, token, record }, write: record };
}

/**
 * `takePrunableTurn`: compare-and-set on the finished record as listed (its `updatedAt`), marking
 * it `pruning`; a record already taken is answered true again and not rewritten. Everything else
 * of the record stays (its state and `updatedAt`: `listTurns` and `prune` go on finding it).
 */
export function takePrunableTransition(existing: TurnRecord | undefined, input: TakePrunableTurnInput): TurnTransition<boolean> {
  // Compared as instants (a store may write a time in another representation than it was given);
  // an unparseable one never matches.
  const asListed = existing !== undefined && Date.parse(existing.updatedAt) === Date.parse(input.updatedAt);
  if (existing === undefined || !asListed || !PRUNABLE_TURN_STATES.includes(existing.state)) return { answer: false, write: undefined };
  if (existing.pruning === true) return { answer: true, write: undefined };
  return { answer: true, write: { ...existing, pruning: true } };
}

/**
 * `renewTurn`: compare-and-set by the lease token while `running`; moves only the lease's expiry
 * (expired or not: a holder nobody took over is still the holder).
 */
export function renewTransition(existing: TurnRecord | undefined, input: RenewTurnInput, now: string): TurnTransition<boolean> {
  if (existing?.state !== "running" || existing.lease?.token !== input.token) return { answer: false, write: undefined };
  return { answer: true, write: { ...existing, lease: { token: input.token, expiresAt: plus(now, input.leaseMs) } } };
}

/**
 * Whether `listTurns` lists a record (the caller has selected the state and, for `decided`, the
 * absence of pending requests): with `expired`, a lease that expired at `now`; with `finished`, a
 * finished state and an update strictly before `olderThan`, as `prune` compares (an unparseable
 * time is never before anything). An unparseable expiry never expires, as in `beginTurn`.
 */
export function listedTurn(record: TurnRecord, query: ParsedListTurns, now: string): boolean {
  if (query.state === "finished") return prunableTurn(record, Date.parse(query.olderThan ?? ""));
  if (record.state !== query.state) return false;
  if (!query.expired) return true;
  const expires = Date.parse(record.lease?.expiresAt ?? "");
  return expires <= Date.parse(now);
}

/** Finished states `prune` may remove: a paused or running turn is kept. */
export const PRUNABLE_TURN_STATES: readonly TurnRecord["state"][] = ["completed", "refused", "failed"];

/** Whether `prune` with the cut-off `cutoffMs` (epoch ms) removes this turn record: finished, last updated before it. */
export function prunableTurn(record: Pick<TurnRecord, "state" | "updatedAt">, cutoffMs: number): boolean {
  return PRUNABLE_TURN_STATES.includes(record.state) && Date.parse(record.updatedAt) < cutoffMs;
}

/**
 * The turns `prune` leaves whole, whatever their age (their claims, effects, read evidence,
 * verdicts and approval requests): a turn whose record is running or paused on approval, and a
 * turn with a `pending` approval request, which a person can still decide (with or without the
 * turn service, which a store may be used without). Pure.
 */
export function liveTurnKeys(
  turns: Iterable<Pick<TurnRecord, "turnKey" | "state">>,
  approvals: Iterable<Pick<ApprovalRecord, "turnKey" | "status">>,
): Set<string> {
  const live = new Set<string>();
  for (const { turnKey, state } of turns) if (!PRUNABLE_TURN_STATES.includes(state)) live.add(turnKey);
  for (const { turnKey, status } of approvals) if (status === "pending") live.add(turnKey);
  return live;
}
