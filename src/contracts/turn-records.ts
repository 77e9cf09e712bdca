/**
 * Turn records: the turn service's lifecycle as the store keeps it (begin, resume, renew,
 * finish, list), and the status of a turn's mutation.
 */
import { z } from "zod";
import { DigestSchema, IdSchema, type JsonValue, JsonValueSchema, TimestampSchema } from "./primitives.js";
import { type TurnInput, TurnInputSchema } from "./turn-input.js";
import { type MutationResult, MutationResultSchema } from "./claims.js";

/**
 * Where a turn is in the turn service's lifecycle:
 * - `running`: a worker holds its lease and runs it;
 * - `awaiting_approval`: paused on approval requests (a decision resumes it);
 * - `completed`, `refused`, `failed`: finished; a retry answers the stored outcome.
 */
export type TurnState = "running" | "awaiting_approval" | "completed" | "refused" | "failed";
/** Every turn state, in lifecycle order. */
export const TURN_STATES = ["running", "awaiting_approval", "completed", "refused", "failed"] as const satisfies readonly TurnState[];
/** Parses a turn state. */
export const TurnStateSchema = z.enum(TURN_STATES);

/** How long a lease may be asked for: 1 ms to 24 hours. */
const LeaseMsSchema = z.int().min(1).max(86_400_000);

/** What a turn is: everything `beginTurn` stores when it first sees the turn key. */
export interface TurnStart {
  /** `turnKey(input)`. */
  readonly turnKey: string;
  /** The input's `scopeId`. */
  readonly scopeId: string;
  /** The input's `principal`, when it names one. */
  readonly principal?: string;
  /** The trusted turn as admitted: a resume rebuilds the run's `context` from it. */
  readonly input: TurnInput;
  /** Digest of the canonical turn input: the same key with another digest is `input_mismatch`. */
  readonly inputDigest: string;
  /**
   * What identifies the request: `digest({ kind: "arkah.turn-request", v: 1, principal, turnId })`
   * (`principal` null when there is none). A request key belongs to one turn key: `beginTurn` of
   * another turn key (the same request with another `scopeId`) is `input_mismatch`.
   */
  readonly requestKey: string;
  /** The LangGraph thread the turn runs on. */
  readonly threadId: string;
}

const turnStartFields = {
  turnKey: DigestSchema,
  scopeId: IdSchema,
  principal: IdSchema.optional(),
  input: TurnInputSchema,
  inputDigest: DigestSchema,
  threadId: IdSchema,
};

/** Parses a {@link TurnStart}: its `scopeId` and `principal` must be the input's. */
export const TurnStartSchema: z.ZodType<TurnStart> = z.strictObject({ ...turnStartFields, requestKey: DigestSchema }).superRefine((start, ctx) => {
  if (start.scopeId !== start.input.scopeId) ctx.addIssue({ code: "custom", path: ["scopeId"], message: "scopeId must be the input's scopeId" });
  if (start.principal !== start.input.principal) {
    ctx.addIssue({ code: "custom", path: ["principal"], message: "principal must be the input's principal" });
  }
});

/** Who runs a `running` turn, until when. Another worker may take the turn over once it expired. */
export interface TurnLease {
  /** The holder's token: `finishTurn` applies only with it. */
  readonly token: string;
  /** When the lease expires, at the store's clock. */
  readonly expiresAt: string;
}
/** Parses a {@link TurnLease}. */
export const TurnLeaseSchema: z.ZodType<TurnLease> = z.strictObject({ token: IdSchema, expiresAt: TimestampSchema });

/**
 * A stored turn. A `running` turn has a lease and no outcome; every other state has an outcome
 * (the turn service's JSON answer, opaque to the store) and no lease.
 */
export interface TurnRecord extends Omit<TurnStart, "requestKey"> {
  /** The turn's {@link TurnStart.requestKey}; absent on a turn stored before the stores kept one (SQLite and PostgreSQL schema version 7). */
  readonly requestKey?: string;
  /** Where the turn is. */
  readonly state: TurnState;
  /** The stored outcome; present exactly when the turn is not running. */
  readonly outcome?: JsonValue;
  /** The running worker's lease; present exactly when the turn is running. */
  readonly lease?: TurnLease;
  /** When `beginTurn` first stored it. */
  readonly createdAt: string;
  /** When it last changed (prune's clock). */
  readonly updatedAt: string;
  /**
   * Set (only ever `true`, only on a finished turn) when the turn service's `prune` took the turn
   * (`takePrunableTurn`) to delete its checkpoint thread: it is never run again (`resumeTurn`
   * answers `resumed: false`), and `prune` removes it. Absent otherwise.
   */
  readonly pruning?: true;
}
/** Parses a {@link TurnRecord}, checking that its lease and outcome agree with its state. */
export const TurnRecordSchema: z.ZodType<TurnRecord> = z
  .strictObject({
    ...turnStartFields,
    requestKey: DigestSchema.optional(),
    state: TurnStateSchema,
    outcome: JsonValueSchema.optional(),
    lease: TurnLeaseSchema.optional(),
    createdAt: TimestampSchema,
    updatedAt: TimestampSchema,
    pruning: z.literal(true).optional(),
  })
  .superRefine((record, ctx) => {
    if (record.pruning === true && (record.state === "running" || record.state === "awaiting_approval")) {
      ctx.addIssue({ code: "custom", path: ["pruning"], message: "only a finished turn is taken for prune" });
    }
    const running = record.state === "running";
    if (running !== (record.lease !== undefined)) {
      ctx.addIssue({ code: "custom", path: ["lease"], message: "a turn has a lease exactly when it is running" });
    }
    if (running === (record.outcome !== undefined)) {
      ctx.addIssue({ code: "custom", path: ["outcome"], message: "a turn has an outcome exactly when it is not running" });
    }
    if (record.scopeId !== record.input.scopeId || record.principal !== record.input.principal) {
      ctx.addIssue({ code: "custom", path: ["input"], message: "scopeId and principal must be the input's" });
    }
  });

/** `beginTurn`'s input: the turn, and how long the lease it may grant lasts. */
export interface BeginTurnInput {
  /** The turn, stored if it is new. */
  readonly turn: TurnStart;
  /** The lease's length in ms (1 to 86 400 000), from the store's clock. */
  readonly leaseMs: number;
}
/** Parses a {@link BeginTurnInput}. */
export const BeginTurnInputSchema: z.ZodType<BeginTurnInput> = z.strictObject({ turn: TurnStartSchema, leaseMs: LeaseMsSchema });

/**
 * `beginTurn`'s answer; only `started` and `taken_over` let the caller run the turn:
 * - `started`: the turn was new; it is stored `running` and the caller holds its lease (`token`);
 * - `taken_over`: it was `running` under an expired lease; the caller holds a new one and resumes from the checkpoint;
 * - `running`: another worker holds an unexpired lease; nothing changed;
 * - `finished`: it is `awaiting_approval`, `completed`, `refused` or `failed`; nothing changed;
 * - `input_mismatch`: it was begun with another input digest, or it is new and its request key
 *   belongs to another turn; nothing changed.
 */
export type BeginTurnResult =
  | { readonly status: "started" | "taken_over"; readonly token: string; readonly record: TurnRecord }
  | { readonly status: "running" | "finished"; readonly record: TurnRecord }
  | { readonly status: "input_mismatch" };
/** Parses a {@link BeginTurnResult}. */
export const BeginTurnResultSchema: z.ZodType<BeginTurnResult> = z.discriminatedUnion("status", [
  z.strictObject({ status: z.literal("started"), token: IdSchema, record: TurnRecordSchema }),
  z.strictObject({ status: z.literal("taken_over"), token: IdSchema, record: TurnRecordSchema }),
  z.strictObject({ status: z.literal("running"), record: TurnRecordSchema }),
  z.strictObject({ status: z.literal("finished"), record: TurnRecordSchema }),
  z.strictObject({ status: z.literal("input_mismatch") }),
]);

/** `finishTurn`'s input: compare-and-set from `running` by the lease token. */
export interface FinishTurnInput {
  /** The turn. */
  readonly turnKey: string;
  /** The lease token `beginTurn` or `resumeTurn` issued. */
  readonly token: string;
  /** The state to store. */
  readonly state: Exclude<TurnState, "running">;
  /** The outcome to store (JSON). */
  readonly outcome: JsonValue;
}
/** Parses a {@link FinishTurnInput}. */
export const FinishTurnInputSchema: z.ZodType<FinishTurnInput> = z.strictObject({
  turnKey: DigestSchema,
  token: IdSchema,
  state: z.enum(["awaiting_approval", "completed", "refused", "failed"]),
  outcome: JsonValueSchema,
});

/** `resumeTurn`'s input: take an `awaiting_approval` turn back to `running` under a new lease. */
export interface ResumeTurnInput {
  /** The turn. */
  readonly turnKey: string;
  /** The new lease's length in ms (1 to 86 400 000). */
  readonly leaseMs: number;
  /**
   * The state it is taken from: `awaiting_approval` (default: a decided pause resumes) or `failed`
   * (a failure that left no effect is run again: the turn service decides which, from the outcome).
   */
  readonly from?: "awaiting_approval" | "failed";
}
/** Parses a {@link ResumeTurnInput}. */
export const ResumeTurnInputSchema: z.ZodType<ResumeTurnInput> = z.strictObject({
  turnKey: DigestSchema,
  leaseMs: LeaseMsSchema,
  from: z.enum(["awaiting_approval", "failed"]).optional(),
});

/**
 * `resumeTurn`'s answer: the caller holds the new lease (`resumed: true`), or nothing changed: no
 * such turn (no `record`), it is not in the state asked for (`from`), or `prune` took it (`pruning`).
 */
export type ResumeTurnResult =
  | { readonly resumed: true; readonly token: string; readonly record: TurnRecord }
  | { readonly resumed: false; readonly record?: TurnRecord };
/** Parses a {@link ResumeTurnResult}. */
export const ResumeTurnResultSchema: z.ZodType<ResumeTurnResult> = z.discriminatedUnion("resumed", [
  z.strictObject({ resumed: z.literal(true), token: IdSchema, record: TurnRecordSchema }),
  z.strictObject({ resumed: z.literal(false), record: TurnRecordSchema.optional() }),
]);

/**
 * `takePrunableTurn`'s input: the finished turn record `listTurns({ state: "finished", olderThan })`
 * answered, named by its key and compared by its `updatedAt` (the record as listed).
 */
export interface TakePrunableTurnInput {
  /** The turn. */
  readonly turnKey: string;
  /** The listed record's `updatedAt`: a record changed since (run again, or pruned and begun anew) is not taken. */
  readonly updatedAt: string;
}
/** Parses a {@link TakePrunableTurnInput}. */
export const TakePrunableTurnInputSchema: z.ZodType<TakePrunableTurnInput> = z.strictObject({ turnKey: DigestSchema, updatedAt: TimestampSchema });

/** `renewTurn`'s input: extend a running turn's lease, compare-and-set by its token. */
export interface RenewTurnInput {
  /** The turn. */
  readonly turnKey: string;
  /** The lease token `beginTurn` or `resumeTurn` issued. */
  readonly token: string;
  /** The lease's new length in ms (1 to 86 400 000), from the store's clock now. */
  readonly leaseMs: number;
}
/** Parses a {@link RenewTurnInput}. */
export const RenewTurnInputSchema: z.ZodType<RenewTurnInput> = z.strictObject({ turnKey: DigestSchema, token: IdSchema, leaseMs: LeaseMsSchema });

/** The most turns one `listTurns` answers. */
export const MAX_LIST_TURNS = 1000;

/**
 * `listTurns`' query, in turn key order, at most `limit` (default 100), after the turn key `after`
 * (paging): the live turns a recovery sweep looks for (`running`, `awaiting_approval`), or the
 * finished turn records `prune({ olderThan })` would remove (`finished` with `olderThan`), whose
 * checkpoint threads the turn service deletes before it prunes them.
 */
export interface ListTurnsQuery {
  /**
   * `running` or `awaiting_approval`; or `finished`: the turns in a finished state (`completed`,
   * `refused`, `failed`) last updated before `olderThan`, exactly the turn records `prune` removes.
   */
  readonly state: "running" | "awaiting_approval" | "finished";
  /** With `running`: only turns whose lease expired at the store's clock (any other worker may take them over). */
  readonly expired?: boolean;
  /** With `awaiting_approval`: only turns none of whose approval requests is `pending` (every one decided or expired). */
  readonly decided?: boolean;
  /** With `finished`, and required there: only turns last updated strictly before this time, as `prune({ olderThan })` compares. */
  readonly olderThan?: string;
  /** Only turns whose key sorts after this one (the last key of the previous page). */
  readonly after?: string;
  /** At most this many turns (1 to {@link MAX_LIST_TURNS}; default 100). */
  readonly limit?: number;
}
/**
 * Parses a {@link ListTurnsQuery}: `expired` only with `running`, `decided` only with
 * `awaiting_approval`, `olderThan` exactly with `finished`.
 */
export const ListTurnsQuerySchema: z.ZodType<ListTurnsQuery> = z
  .strictObject({
    state: z.enum(["running", "awaiting_approval", "finished"]),
    expired: z.boolean().optional(),
    decided: z.boolean().optional(),
    olderThan: TimestampSchema.optional(),
    after: DigestSchema.optional(),
    limit: z.int().min(1).max(MAX_LIST_TURNS).optional(),
  })
  .superRefine((query, ctx) => {
    if (query.expired !== undefined && query.state !== "running") ctx.addIssue({ code: "custom", path: ["expired"], message: "expired filters running turns only" });
    if (query.decided !== undefined && query.state !== "awaiting_approval") {
      ctx.addIssue({ code: "custom", path: ["decided"], message: "decided filters awaiting_approval turns only" });
    }
    if ((query.olderThan !== undefined) !== (query.state === "finished")) {
      ctx.addIssue({ code: "custom", path: ["olderThan"], message: "olderThan goes with finished, and finished needs it" });
    }
  });

/** A turn's mutation claim as `getMutation` reads it: its state, the call, and the result once complete. */
export interface MutationStatus {
  /** `pruned`: a tombstone, the result is gone. */
  readonly state: "pending" | "complete" | "unknown" | "pruned";
  /** The tool of the call holding the slot. */
  readonly toolName: string;
  /** The call holding the slot. */
  readonly toolCallId: string;
  /** The stored result: present exactly when `complete`. */
  readonly result?: MutationResult;
}
/** Parses a {@link MutationStatus}. */
export const MutationStatusSchema: z.ZodType<MutationStatus> = z
  .strictObject({
    state: z.enum(["pending", "complete", "unknown", "pruned"]),
    toolName: IdSchema,
    toolCallId: IdSchema,
    result: MutationResultSchema.optional(),
  })
  .refine((status) => (status.state === "complete") === (status.result !== undefined), {
    error: "a complete mutation has a result, and no other does",
    path: ["result"],
  });

/** A side effect's claim as `getEffect` reads it: the same shape as a mutation's. */
export type EffectStatus = MutationStatus;
/** Parses an {@link EffectStatus}. */
export const EffectStatusSchema: z.ZodType<EffectStatus> = MutationStatusSchema;
