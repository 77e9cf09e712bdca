/**
 * `KeyValueGuardrailStore`: every `GuardrailStore` operation on a handful of storage primitives
 * (get, put, delete, scan) inside one atomic step. An adapter implements `atomic` and nothing
 * else; the base parses every input, checks every record it reads against its schema and the key
 * it was read by, writes the audit events a store writes itself, and decides each operation with
 * the same rules as the shipped stores.
 *
 * The hot path (record a read, claim, settle, release) does only gets and puts; the indexes it
 * needs (a scope's `unknown` claims, which block the scope; the unresolved claims and effects) are
 * records the base keeps itself, each under the turn's or the effect's own key. No step of a turn
 * writes a key that a step of another turn writes: no shared counter (docs/storage-adapters.md,
 * "Hot keys and the layout"). An audited step writes its event under a key of its own
 * (`auditPending`); `readAudit` numbers the waiting events from the one audit counter before it
 * reads, so `seq` stays one total order and no event appears below a seq a reader has passed.
 * `listUnresolved`, `listUnresolvedEffects`, `expireApprovals`, `orphanApprovals`, `listApprovals`
 * and `prune` read indexes of the records they act on; `readAudit({ turnKey })` reads the turn's
 * audit index (`turnAudit`) and gets each of its events by `seq`; with another filter or none it
 * walks the trail from `afterSeq`. `listTurns` walks the `liveTurns` index the turn transitions keep (never the
 * finished turns); its `decided` filter reads the pending-approvals index, and its `finished`
 * listing (what `prune` would remove) scans the turns, in turn-key order.
 * Each store object's first step checks the records' layout version and migrates layouts 1 and 2.
 */
import { randomUUID } from "node:crypto";
import {
  AdmissionReceiptSchema,
  AdvanceAuditCursorInputSchema,
  ApplyApprovalInputSchema,
  ApprovalQuerySchema,
  ApprovalRequestSchema,
  AuditQuerySchema,
  AuditSinkNameSchema,
  DecideApprovalInputSchema,
  EffectClaimOptionsSchema,
  EffectIdentitySchema,
  EffectReconciliationSchema,
  EffectReleaseSchema,
  EffectSettlementSchema,
  ExpireApprovalsInputSchema,
  OrphanApprovalsInputSchema,
  PruneOptionsSchema,
  ReconciliationSchema,
  VerdictKeySchema,
  VerdictRecordSchema,
  type AdmissionReceipt,
  type AdvanceAuditCursorInput,
  type ApplyApprovalInput,
  type ApprovalDecisionResult,
  type ApprovalQuery,
  type ApprovalRecord,
  type ApprovalSubmission,
  type AuditEvent,
  type AuditQuery,
  type BeginTurnInput,
  type BeginTurnResult,
  type ClaimOptions,
  type ClaimResult,
  type DecideApprovalInput,
  type EffectClaimOptions,
  type EffectClaimResult,
  type EffectIdentity,
  type EffectReconciliation,
  type EffectRelease,
  type EffectSettlement,
  type EffectStatus,
  type ExpireApprovalsInput,
  type ExpireApprovalsResult,
  type OrphanApprovalsInput,
  type OrphanApprovalsResult,
  type FinishTurnInput,
  type GuardrailStore,
  type JsonValue,
  type MutationIdentity,
  type MutationRelease,
  type MutationResult,
  type MutationSettlement,
  type MutationStatus,
  type PruneOptions,
  type PruneResult,
  type ReadEvidence,
  type RecordReadOptions,
  type Reconciliation,
  type ReconcileResult,
  type ListTurnsQuery,
  type RenewTurnInput,
  type ResumeTurnInput,
  type ResumeTurnResult,
  type TakePrunableTurnInput,
  type StoredAuditEvent,
  type TurnRecord,
  type UnresolvedEffect,
  type UnresolvedMutation,
  type VerdictKey,
  type VerdictRecord,
} from "../contracts/index.js";
import { StoreContractError } from "../errors.js";
import {
  appliedApprovalRecord,
  approvalDecisionOutcome,
  approvalEvent,
  effectReconciledEvent,
  effectReleasedEvent,
  expiredApprovalRecord,
  orphanedApprovalRecord,
  reconciledEvent,
  releasedEvent,
} from "./events.js";
import {
  beginTransition,
  finishTransition,
  listedTurn,
  parseListTurns,
  parseRenewTurn,
  renewTransition,
  type ParsedListTurns,
  parseBeginTurn,
  parseFinishTurn,
  parseResumeTurn,
  parseTakePrunableTurn,
  prunableTurn,
  takePrunableTransition,
  PRUNABLE_TURN_STATES,
  resumeTransition,
} from "./turns.js";
import {
  parseAuditEvent,
  parseClaimOptions,
  parseDigest,
  parseEvidence,
  parseIdentity,
  parseReadOptions,
  parseRelease,
  parseSettlement,
  parseStoreValue,
} from "./validate.js";
import { existingClaimAnswer, existingEffectAnswer, instantMs, reconcileAnswer, tokenHoldsClaim } from "./decisions.js";
import {
  effectGroupKey,
  KEY_VALUE_COLLECTIONS as C,
  KEY_VALUE_LAYOUT,
  LAYOUT_KEY,
  approvalTimeKey,
  pendingAuditKey,
  RECORD_KINDS as K,
  sequenceKey,
  timedKey,
  turnApprovalKey,
  turnAuditKey,
  verdictStorageKey,
  type ApprovalIndexEntry,
  type KeyValueCollection,
  type KeyValueCounter,
  type TimedEntry,
  type RecordKind,
  type StoredApproval,
  type StoredClaim,
  type StoredEffect,
} from "./records.js";

/** `scan`'s options. */
export interface KeyValueScanOptions {
  /** Only keys after this one (exclusive), in the scan's order. */
  readonly after?: string;
  /** At most this many entries. */
  readonly limit?: number;
}

/**
 * One atomic step's view of the storage. Values are JSON; collections and keys are strings the
 * base chooses, which the adapter stores opaquely (any string, lone surrogates included, must stay
 * distinct: encode it, never transcode it).
 */
export interface KeyValueTransaction {
  /** The value stored under (collection, key), as written, or undefined. Sees this step's own writes. */
  get(collection: string, key: string): Promise<unknown>;
  /** Buffered: visible to this step's later gets and scans, committed with the step. */
  put(collection: string, key: string, value: JsonValue): void;
  /** Buffered like `put`. Deleting an absent key does nothing. */
  delete(collection: string, key: string): void;
  /**
   * Entries of a collection in ascending key order (UTF-16 code unit order, as JavaScript's `<`
   * compares strings), starting after `after`, at most `limit`. Sees this step's own writes.
   */
  scan(collection: string, options?: KeyValueScanOptions): Promise<(readonly [string, unknown])[]>;
}

/**
 * {@link KeyValueTransaction} for storage that answers in-process and synchronously (Maps,
 * better-sqlite3, `node:sqlite`): the same operations, answered without a promise.
 */
export interface KeyValueSyncTransaction {
  /** As {@link KeyValueTransaction.get}. */
  get(collection: string, key: string): unknown;
  /** As {@link KeyValueTransaction.put}. */
  put(collection: string, key: string, value: JsonValue): void;
  /** As {@link KeyValueTransaction.delete}. */
  delete(collection: string, key: string): void;
  /** As {@link KeyValueTransaction.scan}. */
  scan(collection: string, options?: KeyValueScanOptions): (readonly [string, unknown])[];
}

/**
 * What a step of the base reads through: either transaction. A step yields each `get` and `scan`
 * answer (a value, or a promise the driver awaits) and gets the value back, so one step runs on
 * synchronous and asynchronous storage alike.
 */
interface StepTransaction {
  get(collection: string, key: string): unknown;
  put(collection: string, key: string, value: JsonValue): void;
  delete(collection: string, key: string): void;
  scan(collection: string, options?: KeyValueScanOptions): unknown;
}

/** Records the keys a step touches while passing every call through to the adapter's transaction. */
class StepFootprint {
  readonly #reads = new Map<string, KeyValueKeyRef>();
  readonly #scans = new Set<string>();
  readonly #writes = new Map<string, KeyValueKeyRef>();

  wrap(tx: StepTransaction): StepTransaction {
    // JSON of the pair: collection and key may hold any character, so no separator is safe.
    const note = (into: Map<string, KeyValueKeyRef>, collection: string, key: string) => {
      const id = JSON.stringify([collection, key]);
      if (!into.has(id)) into.set(id, { collection, key });
    };
    return {
      get: (collection, key) => {
        note(this.#reads, collection, key);
        return tx.get(collection, key);
      },
      put: (collection, key, value) => {
        note(this.#writes, collection, key);
        tx.put(collection, key, value);
      },
      delete: (collection, key) => {
        note(this.#writes, collection, key);
        tx.delete(collection, key);
      },
      scan: (collection, options) => {
        this.#scans.add(collection);
        return tx.scan(collection, options);
      },
    };
  }

  done(): KeyValueStepFootprint {
    return { reads: [...this.#reads.values()], scans: [...this.#scans], writes: [...this.#writes.values()] };
  }
}

/** One operation's step: yields reads, returns the answer. */
type Step<T> = Generator<unknown, T, unknown>;

function runSync<T>(step: Step<T>): T {
  let next = step.next();
  while (next.done !== true) next = step.next(next.value);
  return next.value;
}

async function runAsync<T>(step: Step<T>): Promise<T> {
  let next = step.next();
  while (next.done !== true) next = step.next(await next.value);
  return next.value;
}

/** One (collection, key) a step read or wrote. */
export interface KeyValueKeyRef {
  /** The collection. */
  readonly collection: string;
  /** The key in it. */
  readonly key: string;
}

/**
 * What one committed step touched: the keys it read and wrote and the collections it scanned. Two
 * steps conflict when one writes what the other read, scanned or wrote: on storage with optimistic
 * concurrency (Redis `WATCH`, conditional writes), one of them aborts and runs again.
 */
export interface KeyValueStepFootprint {
  /** Keys the step read with `get`, each once, in first-read order. */
  readonly reads: readonly KeyValueKeyRef[];
  /** Collections the step scanned, each once. */
  readonly scans: readonly string[];
  /** Keys the step put or deleted, each once, in first-write order. */
  readonly writes: readonly KeyValueKeyRef[];
}

/** `KeyValueGuardrailStore`'s options. */
export interface KeyValueGuardrailStoreOptions {
  /** Clock for every time the store records (claims, settlements, audit events, leases). Default: the system clock. */
  readonly now?: () => Date;
  /**
   * Measurement only: called with the footprint of each step that committed (the last run, when
   * the adapter re-ran it), after it committed. Keys and collection names only, never a value.
   * Anything it throws is ignored: the step has committed. Default: none (no footprint is kept).
   */
  readonly onStep?: (footprint: KeyValueStepFootprint) => void;
}

/** Oldest `requestedAt` first; ties in request order. Sorts in place. */
function sortByRequestTime(stored: StoredApproval[]): StoredApproval[] {
  return stored.sort((a, b) => instantMs(a.record.requestedAt) - instantMs(b.record.requestedAt) || a.seq - b.seq);
}

/** Where one kind of claim (a turn's mutation claim, a side effect's) is kept: its records and its two indexes. */
interface ClaimCollections<T> {
  /** The claims. */
  readonly record: RecordKind<T>;
  /** The index of its `pending` and `unknown` claims. */
  readonly unresolved: KeyValueCollection;
  /** The index of its `complete` claims by settlement time. */
  readonly settled: RecordKind<TimedEntry>;
}

const MUTATION_CLAIMS: ClaimCollections<StoredClaim> = { record: K.claim, unresolved: C.unresolvedClaims, settled: K.settledClaim };
const EFFECT_CLAIMS: ClaimCollections<StoredEffect> = { record: K.effect, unresolved: C.unresolvedEffects, settled: K.settledEffect };

/** The one counter the base writes: `readAudit` numbers the pending audit events from it. */
const AUDIT_COUNTER: KeyValueCounter = "audit";

/** Entries a base scan asks for at once: a page, so an adapter never has to hold a whole collection. */
const SCAN_PAGE = 1_000;

type Entries = readonly (readonly [string, unknown])[];

/**
 * A `GuardrailStore` on key-value primitives. Subclass it and implement {@link atomic} (or, for
 * storage that answers synchronously in-process, {@link atomicSync}); run `validateGuardrailStore`
 * from `arkah-agent-guardrails/testing` against the subclass.
 *
 * The base never mutates a value after passing it to `put`, nor a value `get` or `scan` returned,
 * and never hands either to a caller: its answers are fresh copies.
 */
export abstract class KeyValueGuardrailStore implements GuardrailStore {
  readonly #now: () => Date;
  /** The clock in epoch milliseconds (`Date.now` unless a clock was given). */
  readonly #clock: () => number;
  readonly #trusted: boolean;
  readonly #sync: boolean;
  readonly #onStep: ((footprint: KeyValueStepFootprint) => void) | undefined;
  /** Set once this object's layout step committed: the records are in {@link KEY_VALUE_LAYOUT}. */
  #layoutReady = false;
  /** The layout step under way, shared by the operations that wait for it; cleared if it fails, so the next one tries again. */
  #layoutCheck: Promise<void> | undefined;
  /**
   * This object's claim counter: the tie-break of a claim's (and a side effect's) time. Kept in
   * memory, not in a shared record, so that two claims of different turns never write one key.
   */
  #claims = 0;
  /** This object's request counter: the tie-break of an approval request's time, kept in memory for the same reason. */
  #requests = 0;
  /** This object's id in the keys of the audit events it appends ({@link pendingAuditKey}): no other object writes them. */
  readonly #writer = randomUUID();
  /** Audit events this object appended: their order within one millisecond. */
  #appended = 0;
  /** The latest clock time an appended event was keyed by: an object's pending keys never step back. */
  #auditMs = Number.NEGATIVE_INFINITY;

  constructor(options: KeyValueGuardrailStoreOptions = {}) {
    const now = options.now;
    if (options.onStep !== undefined && typeof options.onStep !== "function") throw new TypeError(`${new.target.name}: onStep must be a function`);
    this.#onStep = options.onStep;
    this.#now = now ?? (() => new Date());
    this.#clock = now === undefined ? Date.now : () => now().getTime();
    this.#trusted = this.recordsAreTrusted();
    this.#sync = this.atomicSync !== undefined;
    if (!this.#sync && this.atomic === KeyValueGuardrailStore.prototype.atomic) {
      throw new TypeError(`${new.target.name} implements neither atomic nor atomicSync`);
    }
  }

  /**
   * Runs `step` atomically: serializable against every other step on the same storage (all
   * processes), its writes committed all together only if it resolves, none if it rejects. The
   * base's steps have no effect outside the transaction, so an adapter MAY re-run `step` after a
   * write conflict (optimistic concurrency: WATCH/MULTI, conditional writes).
   *
   * Every adapter implements it, unless it implements {@link atomicSync}, which then takes every step.
   */
  protected atomic<T>(_step: (tx: KeyValueTransaction) => Promise<T>): Promise<T> {
    return Promise.reject(new TypeError(`${this.constructor.name} does not implement atomic`));
  }

  /**
   * Optional, for storage that answers synchronously in-process: runs `step` as {@link atomic}
   * does, returning its value or throwing its error, writes committed only if it returns. Nothing
   * else can run while it does, so it is serializable by construction. When a subclass implements
   * it, the base runs every step through it (no promise per read) and never calls `atomic`.
   */
  protected atomicSync?<T>(step: (tx: KeyValueSyncTransaction) => T): T;

  /**
   * Whether `get` and `scan` return exactly the values this base passed to `put` (an in-process
   * store keeping them by reference). Then the base skips re-parsing its records with their
   * schemas; it still checks each against the key it was read by. Asked once, by the constructor
   * (before the subclass's fields exist: answer from the prototype, not from fields). Leave it
   * false for any storage another process, a serializer or a person can write to.
   */
  protected recordsAreTrusted(): boolean {
    return false;
  }

  /**
   * Runs one operation's step in one transaction: synchronously when the adapter can. A store
   * object's first operation waits for its layout step ({@link #layoutStep}).
   */
  #run<T>(step: (tx: StepTransaction) => Step<T>): T | Promise<T> {
    if (!this.#layoutReady) return this.#checkLayout().then(() => this.#runStep(step));
    return this.#runStep(step);
  }

  #runStep<T>(step: (tx: StepTransaction) => Step<T>): T | Promise<T> {
    if (this.#onStep !== undefined) return this.#observed(step, this.#onStep);
    if (this.#sync && this.atomicSync !== undefined) return this.atomicSync((tx) => runSync(step(tx)));
    return this.atomic((tx) => runAsync(step(tx)));
  }

  /** `#run` with every key the step touches recorded, reported to `onStep` once the step committed. */
  #observed<T>(step: (tx: StepTransaction) => Step<T>, onStep: (footprint: KeyValueStepFootprint) => void): T | Promise<T> {
    let footprint = new StepFootprint();
    const report = (value: T): T => {
      try {
        onStep(footprint.done());
      } catch {
        // Measurement only: the step has committed, so its caller gets its answer.
      }
      return value;
    };
    if (this.#sync && this.atomicSync !== undefined) {
      return report(
        this.atomicSync((tx) => {
          footprint = new StepFootprint();
          return runSync(step(footprint.wrap(tx)));
        }),
      );
    }
    return this.atomic((tx) => {
      footprint = new StepFootprint();
      return runAsync(step(footprint.wrap(tx)));
    }).then(report);
  }

  // -- layout ---------------------------------------------------------------------------------

  #checkLayout(): Promise<void> {
    this.#layoutCheck ??= (async () => {
      await this.#runStep((tx) => this.#layoutStep(tx));
      this.#layoutReady = true;
    })().catch((error: unknown) => {
      this.#layoutCheck = undefined;
      throw error;
    });
    return this.#layoutCheck;
  }

  /**
   * The first step of each store object: reads the layout version and migrates an older store, in
   * one step (a crash leaves it as it was; every later object finds layout 3 and writes nothing).
   * Layout 1 gets the unresolved-claim, unresolved-effect and approval-status indexes; layouts 1
   * and 2 the time and turn indexes `prune` and `listApprovals` read, each from one scan of the
   * claims, effects, turns and requests, and the turn audit index from one scan of the numbered
   * events (which keep their numbers; new ones wait in `auditPending` until `readAudit` numbers
   * them after those). A store
   * written by a newer layout is refused: this version would not keep that layout's records.
   */
  *#layoutStep(tx: StepTransaction): Step<void> {
    const layout = yield* this.#get(tx, K.layout, LAYOUT_KEY);
    if (layout === KEY_VALUE_LAYOUT) return;
    if (layout !== undefined && layout > KEY_VALUE_LAYOUT) {
      throw new StoreContractError(
        `the store's records are in key-value layout ${String(layout)}, written by a newer arkah-agent-guardrails; this version reads layout ${String(KEY_VALUE_LAYOUT)} and older: upgrade it`,
      );
    }
    const first = layout === undefined;
    for (const [turnKey, claim] of yield* this.#all(tx, K.claim)) {
      if (first && (claim.state === "pending" || claim.state === "unknown")) this.#put(tx, K.unresolvedClaim, turnKey, { turnKey });
      if (claim.state === "complete" && claim.settledAtMs !== undefined) this.#putTimed(tx, K.settledClaim, turnKey, claim.settledAtMs);
    }
    for (const [effectKey, effect] of yield* this.#all(tx, K.effect)) {
      if (first && (effect.state === "pending" || effect.state === "unknown")) this.#put(tx, K.unresolvedEffect, effectKey, { effectKey });
      if (effect.state === "complete" && effect.settledAtMs !== undefined) this.#putTimed(tx, K.settledEffect, effectKey, effect.settledAtMs);
    }
    for (const [turnKey, turn] of yield* this.#all(tx, K.turn)) {
      if (PRUNABLE_TURN_STATES.includes(turn.state)) this.#putTimed(tx, K.finishedTurn, turnKey, instantMs(turn.updatedAt));
    }
    for (const [, stored] of yield* this.#all(tx, K.approval)) {
      if (first) this.#indexApproval(tx, undefined, stored.record);
      this.#indexRequest(tx, stored);
    }
    // Layouts 1 and 2 numbered every event as it was appended: none waits in `auditPending`.
    for (const [key, event] of yield* this.#all(tx, K.audit)) {
      this.#put(tx, K.turnAudit, turnAuditKey(event.turnKey, key), { turnKey: event.turnKey, key, seq: event.seq });
    }
    this.#put(tx, K.layout, LAYOUT_KEY, KEY_VALUE_LAYOUT);
  }

  // -- records --------------------------------------------------------------------------------

  /** A record read under `key`: parsed (unless trusted) and checked against the key; corrupt fails closed. */
  #check<T>(kind: RecordKind<T>, key: string, value: unknown): T | undefined {
    if (value === undefined) return undefined;
    const record = this.#trusted ? (value as T) : parseStoreValue(kind.schema, value, `stored ${kind.what}`);
    if (kind.keyOf(record, key) !== key) {
      throw new StoreContractError(`corrupt ${kind.what}: the record in "${kind.collection}" names another key than the one it is stored under`);
    }
    return record;
  }

  /** Reads and checks one record. */
  *#get<T>(tx: StepTransaction, kind: RecordKind<T>, key: string): Step<T | undefined> {
    return this.#check(kind, key, yield tx.get(kind.collection, key));
  }

  /** Writes a record of `kind` under `key` (the base's records are JSON by construction). */
  #put<T>(tx: StepTransaction, kind: RecordKind<T>, key: string, record: T): void {
    tx.put(kind.collection, key, record as JsonValue);
  }

  /** One page of a scan. */
  *#scan(tx: StepTransaction, collection: string, after: string | undefined): Step<Entries> {
    const page: unknown = yield tx.scan(collection, after === undefined ? { limit: SCAN_PAGE } : { after, limit: SCAN_PAGE });
    if (!Array.isArray(page)) throw new StoreContractError(`the adapter's scan of "${collection}" answered something other than an array`);
    return page as Entries;
  }

  /**
   * Walks a collection's records after `after`, in key order, checked, read in pages, until `visit`
   * answers true (enough).
   */
  *#walk<T>(tx: StepTransaction, kind: RecordKind<T>, after: string | undefined, visit: (key: string, record: T) => boolean): Step<void> {
    // eslint-disable-next-line require-yield -- a visit that reads nothing more
    yield* this.#walkReading(tx, kind, after, function* (key, record) {
      return visit(key, record);
    });
  }

  /** Every record of a collection, in key order, checked; read in pages. */
  *#all<T>(tx: StepTransaction, kind: RecordKind<T>): Step<(readonly [string, T])[]> {
    const records: (readonly [string, T])[] = [];
    yield* this.#walk(tx, kind, undefined, (key, record) => {
      records.push([key, record]);
      return false;
    });
    return records;
  }

  /** Like {@link #walk}, for a visit that reads more records: walks after `after` until `visit` answers true. */
  *#walkReading<T>(tx: StepTransaction, kind: RecordKind<T>, after: string | undefined, visit: (key: string, record: T) => Step<boolean>): Step<void> {
    let from = after;
    for (;;) {
      const page = yield* this.#scan(tx, kind.collection, from);
      for (const [key, value] of page) {
        const record = this.#check(kind, key, value);
        if (record !== undefined && (yield* visit(key, record))) return;
      }
      const last = page.at(-1);
      if (page.length < SCAN_PAGE || last === undefined) return;
      from = last[0];
    }
  }

  /** The records whose keys start with `prefix`, in key order: a scan from `prefix` that stops at the first key without it. */
  *#prefixed<T>(tx: StepTransaction, kind: RecordKind<T>, prefix: string): Step<(readonly [string, T])[]> {
    const records: (readonly [string, T])[] = [];
    yield* this.#walk(tx, kind, prefix, (key, record) => {
      if (!key.startsWith(prefix)) return true;
      records.push([key, record]);
      return false;
    });
    return records;
  }

  /** A time index's entries before `cutoffMs` (exclusive), oldest first: the index is in time order, so the walk stops at the first later one. */
  *#before(tx: StepTransaction, kind: RecordKind<TimedEntry>, cutoffMs: number): Step<(readonly [string, TimedEntry])[]> {
    const entries: (readonly [string, TimedEntry])[] = [];
    yield* this.#walk(tx, kind, undefined, (key, entry) => {
      if (!(entry.atMs < cutoffMs)) return true;
      entries.push([key, entry]);
      return false;
    });
    return entries;
  }

  /** Writes a record's entry in a time index. */
  #putTimed(tx: StepTransaction, kind: RecordKind<TimedEntry>, key: string, atMs: number): void {
    this.#put(tx, kind, timedKey(atMs, key), { key, atMs });
  }

  /**
   * Settles a claim (a turn's or a side effect's) `complete` with `result`: its record, out of the
   * unresolved index, into the settled index `prune` reads. Every path to `complete` (a
   * settlement, a reconciliation) writes these three together.
   */
  #putComplete<T extends StoredClaim | StoredEffect>(
    tx: StepTransaction,
    claims: ClaimCollections<T>,
    key: string,
    claim: T,
    result: MutationResult,
    settledAtMs: number,
  ): void {
    // Field by field: a spread followed by more fields is several times slower on V8, on the hot path.
    const { identity, token, seq, claimedAtMs } = claim;
    this.#put(tx, claims.record, key, { identity, token, seq, claimedAtMs, state: "complete", result, settledAtMs } as T);
    tx.delete(claims.unresolved, key);
    this.#putTimed(tx, claims.settled, key, settledAtMs);
  }

  /**
   * Appends `event` to the pending events, under a key only this store object writes: no counter
   * is read or written, so audited steps of different turns share no key. `readAudit` numbers it.
   * The event's entry in its turn's audit index is under a key of its own too.
   */
  #append(tx: StepTransaction, event: AuditEvent): void {
    // Never stepping back within this object: its events sort in its append order.
    this.#auditMs = Math.max(this.#auditMs, this.#time());
    const key = pendingAuditKey(this.#auditMs, ++this.#appended, this.#writer);
    this.#put(tx, K.pendingAudit, key, { key, event });
    this.#put(tx, K.turnAudit, turnAuditKey(event.turnKey, key), { turnKey: event.turnKey, key });
  }

  /**
   * Numbers every pending event, in key order, from `counters/audit` and moves it into `audit`, in
   * one step: the only writer of the counter. An event becomes visible only with a `seq` above
   * every one already visible, so a reader paging with `afterSeq` never skips one. Each event's
   * `seq` goes into its turn audit entry, which `readAudit({ turnKey })` gets it by.
   */
  *#sequence(tx: StepTransaction): Step<void> {
    const pending = yield* this.#all(tx, K.pendingAudit);
    if (pending.length === 0) return;
    let seq = this.#check(K.counter, AUDIT_COUNTER, yield tx.get(C.counters, AUDIT_COUNTER)) ?? 0;
    for (const [key, { event }] of pending) {
      const stored: StoredAuditEvent = { ...event, seq: ++seq };
      this.#put(tx, K.audit, sequenceKey(seq), stored);
      tx.delete(C.auditPending, key);
      this.#put(tx, K.turnAudit, turnAuditKey(event.turnKey, key), { turnKey: event.turnKey, key, seq });
    }
    this.#put(tx, K.counter, AUDIT_COUNTER, seq);
  }

  #timestamp(): string {
    return this.#now().toISOString();
  }

  /** The clock's time in epoch milliseconds; a clock that answers an invalid date throws, as `#timestamp` would. */
  #time(): number {
    const ms = this.#clock();
    if (Number.isNaN(ms)) throw new RangeError("Invalid time value");
    return ms;
  }

  // -- admission ------------------------------------------------------------------------------

  async getReceipt(turnKey: string): Promise<AdmissionReceipt | undefined> {
    const key = parseDigest(turnKey, "turn key");
    return this.#run((tx) => this.#getReceipt(tx, key));
  }

  *#getReceipt(tx: StepTransaction, key: string): Step<AdmissionReceipt | undefined> {
    const receipt = yield* this.#get(tx, K.receipt, key);
    return receipt === undefined ? undefined : { ...receipt };
  }

  async putReceiptIfAbsent(receipt: AdmissionReceipt): Promise<AdmissionReceipt> {
    const candidate = parseStoreValue(AdmissionReceiptSchema, receipt, "admission receipt");
    return this.#run((tx) => this.#putReceipt(tx, candidate));
  }

  *#putReceipt(tx: StepTransaction, candidate: AdmissionReceipt): Step<AdmissionReceipt> {
    const existing = yield* this.#get(tx, K.receipt, candidate.turnKey);
    if (existing !== undefined) return { ...existing };
    this.#put(tx, K.receipt, candidate.turnKey, candidate);
    return { ...candidate };
  }

  // -- read evidence --------------------------------------------------------------------------

  async recordSuccessfulRead(evidence: ReadEvidence, options?: RecordReadOptions): Promise<void> {
    const parsed = parseEvidence(evidence);
    const audit = parseReadOptions(options);
    return this.#run((tx) => this.#recordRead(tx, parsed, audit));
  }

  *#recordRead(tx: StepTransaction, { turnKey, evidenceDigest }: ReadEvidence, audit: AuditEvent | undefined): Step<void> {
    const reads = this.#check(K.reads, turnKey, yield tx.get(C.reads, turnKey));
    if (reads?.digests.includes(evidenceDigest) !== true) {
      this.#put(tx, K.reads, turnKey, { turnKey, digests: reads === undefined ? [evidenceDigest] : [...reads.digests, evidenceDigest] });
    }
    if (audit !== undefined) this.#append(tx, audit);
  }

  async hasSuccessfulRead(evidence: ReadEvidence): Promise<boolean> {
    const { turnKey, evidenceDigest } = parseEvidence(evidence);
    return this.#run((tx) => this.#hasRead(tx, turnKey, [evidenceDigest]));
  }

  /** Whether any of `evidence` is recorded for the turn. */
  *#hasRead(tx: StepTransaction, turnKey: string, evidence: readonly string[]): Step<boolean> {
    const reads = yield* this.#get(tx, K.reads, turnKey);
    return reads !== undefined && evidence.some((digest) => reads.digests.includes(digest));
  }

  // -- mutation claims ------------------------------------------------------------------------

  async claimMutation(identity: MutationIdentity, options?: ClaimOptions): Promise<ClaimResult> {
    const parsed = parseIdentity(identity);
    const { requireResolvedScope, readEvidence } = parseClaimOptions(options);
    return this.#run((tx) => this.#claim(tx, parsed, requireResolvedScope, readEvidence));
  }

  *#claim(
    tx: StepTransaction,
    identity: MutationIdentity,
    requireResolvedScope: boolean,
    readEvidence: readonly string[] | undefined,
  ): Step<ClaimResult> {
    const { turnKey, scopeId } = identity;
    // The evidence first: without it nothing else is decided.
    if (readEvidence !== undefined && !(yield* this.#hasRead(tx, turnKey, readEvidence))) return { status: "read_required" };
    // Reads yielded here rather than through #get: one generator per claim, not four (the hot path).
    const existing = this.#check(K.claim, turnKey, yield tx.get(C.claims, turnKey));
    if (existing !== undefined) return existingClaimAnswer(existing, identity.mutationKey);
    if (requireResolvedScope && this.#check(K.unknownScope, scopeId, yield tx.get(C.unknownScopes, scopeId)) !== undefined) {
      return { status: "scope_unresolved" };
    }
    const token = randomUUID();
    const claimedAtMs = this.#time();
    const seq = ++this.#claims;
    this.#put(tx, K.claim, turnKey, { identity, token, seq, claimedAtMs, state: "pending" });
    this.#put(tx, K.unresolvedClaim, turnKey, { turnKey });
    return { status: "acquired", token };
  }

  async settleMutation(settlement: MutationSettlement): Promise<boolean> {
    const parsed = parseSettlement(settlement);
    return this.#run((tx) => this.#settle(tx, parsed));
  }

  *#settle(tx: StepTransaction, settlement: MutationSettlement): Step<boolean> {
    const { turnKey } = settlement;
    const claim = this.#check(K.claim, turnKey, yield tx.get(C.claims, turnKey));
    if (claim === undefined || !tokenHoldsClaim(claim, settlement.token)) return false;
    const settledAtMs = this.#time();
    if (settlement.outcome === "complete") {
      this.#putComplete(tx, MUTATION_CLAIMS, turnKey, claim, settlement.result, settledAtMs);
    } else {
      const { identity, token, seq, claimedAtMs } = claim;
      this.#put(tx, K.claim, turnKey, { identity, token, seq, claimedAtMs, state: "unknown", settledAtMs });
      yield* this.#markUnknown(tx, identity, true);
    }
    if (settlement.audit !== undefined) this.#append(tx, settlement.audit);
    return true;
  }

  async releaseMutation(release: MutationRelease): Promise<boolean> {
    const parsed = parseRelease(release);
    return this.#run((tx) => this.#release(tx, parsed));
  }

  *#release(tx: StepTransaction, { turnKey, token }: MutationRelease): Step<boolean> {
    const claim = yield* this.#get(tx, K.claim, turnKey);
    if (claim === undefined || !tokenHoldsClaim(claim, token)) return false;
    // A pending claim is not counted against its scope: deleting it is all there is to undo.
    tx.delete(C.claims, turnKey);
    tx.delete(C.unresolvedClaims, turnKey);
    this.#append(tx, releasedEvent(claim.identity, this.#timestamp()));
    return true;
  }

  /** Adds the turn to (or removes it from) its scope's unknown claims. */
  *#markUnknown(tx: StepTransaction, identity: MutationIdentity, unknown: boolean): Step<void> {
    const { scopeId, turnKey } = identity;
    const entry = yield* this.#get(tx, K.unknownScope, scopeId);
    const turnKeys = entry?.turnKeys.filter((each) => each !== turnKey) ?? [];
    if (unknown) turnKeys.push(turnKey);
    if (turnKeys.length > 0) this.#put(tx, K.unknownScope, scopeId, { scopeId, turnKeys });
    else if (entry !== undefined) tx.delete(C.unknownScopes, scopeId);
  }

  // -- verdicts --------------------------------------------------------------------------------

  async recordVerdict(record: VerdictRecord): Promise<VerdictRecord> {
    const candidate = parseStoreValue(VerdictRecordSchema, record, "verdict record");
    return this.#run((tx) => this.#recordVerdict(tx, candidate));
  }

  *#recordVerdict(tx: StepTransaction, candidate: VerdictRecord): Step<VerdictRecord> {
    const key = verdictStorageKey(candidate);
    const existing = yield* this.#get(tx, K.verdict, key);
    if (existing !== undefined) return structuredClone(existing);
    this.#put(tx, K.verdict, key, candidate);
    return structuredClone(candidate);
  }

  async getVerdict(key: VerdictKey): Promise<VerdictRecord | undefined> {
    const storageKey = verdictStorageKey(parseStoreValue(VerdictKeySchema, key, "verdict key"));
    return this.#run((tx) => this.#getCopy(tx, K.verdict, storageKey));
  }

  /** A detached copy of one record. */
  *#getCopy<T>(tx: StepTransaction, kind: RecordKind<T>, key: string): Step<T | undefined> {
    const record = yield* this.#get(tx, kind, key);
    return record === undefined ? undefined : structuredClone(record);
  }

  // -- approval requests ----------------------------------------------------------------------

  async requestApproval(request: ApprovalSubmission): Promise<ApprovalRecord> {
    const candidate = parseStoreValue(ApprovalRequestSchema, request, "approval request");
    return this.#run((tx) => this.#requestApproval(tx, candidate));
  }

  *#requestApproval(tx: StepTransaction, candidate: ApprovalSubmission): Step<ApprovalRecord> {
    const { approvalId } = candidate;
    const existing = yield* this.#get(tx, K.approval, approvalId);
    if (existing !== undefined) return structuredClone(existing.record);
    const record: ApprovalRecord = { ...candidate, status: "pending" };
    const seq = ++this.#requests;
    this.#put(tx, K.approval, approvalId, { seq, record });
    this.#indexApproval(tx, undefined, record);
    this.#indexRequest(tx, { seq, record });
    this.#append(tx, approvalEvent(record, "requested", this.#timestamp()));
    return structuredClone(record);
  }

  async getApproval(approvalId: string): Promise<ApprovalRecord | undefined> {
    const key = parseDigest(approvalId, "approval id");
    return this.#run((tx) => this.#getApproval(tx, key));
  }

  *#getApproval(tx: StepTransaction, key: string): Step<ApprovalRecord | undefined> {
    const stored = yield* this.#get(tx, K.approval, key);
    return stored === undefined ? undefined : structuredClone(stored.record);
  }

  async decideApproval(input: DecideApprovalInput): Promise<ApprovalDecisionResult> {
    const parsed = parseStoreValue(DecideApprovalInputSchema, input, "approval decision");
    return this.#run((tx) => this.#decideApproval(tx, parsed));
  }

  *#decideApproval(tx: StepTransaction, input: DecideApprovalInput): Step<ApprovalDecisionResult> {
    const stored = yield* this.#get(tx, K.approval, input.approvalId);
    const outcome = approvalDecisionOutcome(stored?.record, input, this.#timestamp());
    if (stored !== undefined && outcome.changed !== undefined) {
      this.#put(tx, K.approval, input.approvalId, { seq: stored.seq, record: outcome.changed });
      this.#indexApproval(tx, stored.record, outcome.changed);
    }
    if (outcome.event !== undefined) this.#append(tx, outcome.event);
    return structuredClone(outcome.result);
  }

  async applyApproval(input: ApplyApprovalInput): Promise<boolean> {
    const parsed = parseStoreValue(ApplyApprovalInputSchema, input, "approval application");
    return this.#run((tx) => this.#applyApproval(tx, parsed));
  }

  *#applyApproval(tx: StepTransaction, input: ApplyApprovalInput): Step<boolean> {
    const stored = yield* this.#get(tx, K.approval, input.approvalId);
    const applied = appliedApprovalRecord(stored?.record, input.appliedAt);
    if (stored === undefined || applied === undefined) return false;
    this.#put(tx, K.approval, input.approvalId, { seq: stored.seq, record: applied });
    this.#indexApproval(tx, stored.record, applied);
    this.#append(tx, approvalEvent(applied, "applied", this.#timestamp()));
    return true;
  }

  async listApprovals(query: ApprovalQuery = {}): Promise<ApprovalRecord[]> {
    const parsed = parseStoreValue(ApprovalQuerySchema, query, "approval query");
    return this.#run((tx) => this.#listApprovals(tx, parsed));
  }

  /**
   * Reads an index, never the whole collection: a turn's requests through `turnApprovals`; `pending`
   * and `approved`/`edited` through the status indexes; otherwise `approvalsByTime`, in order,
   * reading requests until `limit` match.
   */
  *#listApprovals(tx: StepTransaction, { status, turnKey, limit = 10_000 }: ApprovalQuery): Step<ApprovalRecord[]> {
    const matches = ({ record }: StoredApproval) => (status === undefined || record.status === status) && (turnKey === undefined || record.turnKey === turnKey);
    const answer = (stored: readonly StoredApproval[]) => stored.filter(matches).slice(0, limit).map(({ record }) => structuredClone(record));
    if (turnKey !== undefined) {
      const stored: StoredApproval[] = [];
      for (const [, { approvalId }] of yield* this.#prefixed(tx, K.turnApproval, turnApprovalKey(turnKey, ""))) {
        const approval = yield* this.#get(tx, K.approval, approvalId);
        if (approval !== undefined) stored.push(approval);
      }
      return answer(sortByRequestTime(stored));
    }
    if (status === "pending") return answer(yield* this.#indexedApprovals(tx, K.pendingApproval));
    if (status === "approved" || status === "edited") return answer(yield* this.#indexedApprovals(tx, K.decidedApproval));
    const listed: ApprovalRecord[] = [];
    const read = (approvalId: string) => this.#get(tx, K.approval, approvalId);
    yield* this.#walkReading(tx, K.approvalByTime, undefined, function* (_key, { approvalId }) {
      const approval = yield* read(approvalId);
      if (approval !== undefined && matches(approval)) listed.push(structuredClone(approval.record));
      return listed.length >= limit;
    });
    return listed;
  }

  async expireApprovals(input: ExpireApprovalsInput): Promise<ExpireApprovalsResult> {
    const cutoff = instantMs(parseStoreValue(ExpireApprovalsInputSchema, input, "approval expiry").olderThan);
    return this.#run((tx) => this.#expireApprovals(tx, cutoff));
  }

  *#expireApprovals(tx: StepTransaction, cutoff: number): Step<ExpireApprovalsResult> {
    const at = this.#timestamp();
    let expired = 0;
    for (const { seq, record } of yield* this.#indexedApprovals(tx, K.pendingApproval)) {
      if (record.status !== "pending" || !(instantMs(record.requestedAt) < cutoff)) continue;
      const retired = expiredApprovalRecord(record, at);
      this.#put(tx, K.approval, retired.approvalId, { seq, record: retired });
      this.#indexApproval(tx, record, retired);
      this.#append(tx, approvalEvent(retired, "expired", at));
      expired++;
    }
    return { expired };
  }

  async orphanApprovals(input: OrphanApprovalsInput): Promise<OrphanApprovalsResult> {
    const cutoff = instantMs(parseStoreValue(OrphanApprovalsInputSchema, input, "approval orphaning").decidedBefore);
    return this.#run((tx) => this.#orphanApprovals(tx, cutoff));
  }

  *#orphanApprovals(tx: StepTransaction, cutoff: number): Step<OrphanApprovalsResult> {
    const at = this.#timestamp();
    let orphaned = 0;
    for (const { seq, record } of yield* this.#indexedApprovals(tx, K.decidedApproval)) {
      const retired = orphanedApprovalRecord(record, cutoff, at);
      if (retired === undefined) continue;
      this.#put(tx, K.approval, retired.approvalId, { seq, record: retired });
      this.#indexApproval(tx, record, retired);
      this.#append(tx, approvalEvent(retired, "orphaned", at));
      orphaned++;
    }
    return { orphaned };
  }

  /** Writes a request's entries in `approvalsByTime` and `turnApprovals`: they stay until `prune` removes the request. */
  #indexRequest(tx: StepTransaction, { seq, record }: StoredApproval): void {
    const { approvalId, turnKey } = record;
    const entry = { approvalId, requestedAtMs: instantMs(record.requestedAt), seq };
    this.#put(tx, K.approvalByTime, approvalTimeKey(entry), entry);
    this.#put(tx, K.turnApproval, turnApprovalKey(turnKey, approvalId), { turnKey, approvalId });
  }

  /** Deletes a request and every index entry it has. */
  #deleteRequest(tx: StepTransaction, { seq, record }: StoredApproval): void {
    const { approvalId, turnKey } = record;
    tx.delete(C.approvals, approvalId);
    this.#indexApproval(tx, record, undefined);
    tx.delete(C.approvalsByTime, approvalTimeKey({ approvalId, requestedAtMs: instantMs(record.requestedAt), seq }));
    tx.delete(C.turnApprovals, turnApprovalKey(turnKey, approvalId));
  }

  /** The requests an approval index names, oldest `requestedAt` first (ties in request order); never the others. */
  *#indexedApprovals(tx: StepTransaction, index: RecordKind<ApprovalIndexEntry>): Step<StoredApproval[]> {
    const stored: StoredApproval[] = [];
    for (const [approvalId] of yield* this.#all(tx, index)) {
      const approval = yield* this.#get(tx, K.approval, approvalId);
      if (approval !== undefined) stored.push(approval);
    }
    return sortByRequestTime(stored);
  }

  /**
   * Keeps the request's entries in `pendingApprovals` and `decidedApprovals` in step with its
   * status, from `before` (undefined: a new request) to `after` (undefined: the request is gone).
   */
  #indexApproval(tx: StepTransaction, before: ApprovalRecord | undefined, after: ApprovalRecord | undefined): void {
    const approvalId = (after ?? before)?.approvalId;
    if (approvalId === undefined) return;
    for (const [index, holds] of [
      [K.pendingApproval, (record: ApprovalRecord | undefined) => record?.status === "pending"],
      [K.decidedApproval, (record: ApprovalRecord | undefined) => record?.status === "approved" || record?.status === "edited"],
    ] as const) {
      const was = before !== undefined && holds(before);
      const is = holds(after);
      if (is && !was) this.#put(tx, index, approvalId, { approvalId });
      else if (was && !is) tx.delete(index.collection, approvalId);
    }
  }

  // -- audit trail ----------------------------------------------------------------------------

  async appendAudit(event: AuditEvent): Promise<void> {
    const parsed = parseAuditEvent(event);
    return this.#run((tx) => this.#appendStep(tx, parsed));
  }

  /** `appendAudit`'s step: a step of its own that reads nothing. */
  // eslint-disable-next-line require-yield -- a step is a generator; this one has nothing to read.
  *#appendStep(tx: StepTransaction, event: AuditEvent): Step<void> {
    this.#append(tx, event);
  }

  async readAudit(query: AuditQuery = {}): Promise<StoredAuditEvent[]> {
    const parsed = parseStoreValue(AuditQuerySchema, query, "audit query");
    return this.#run((tx) => this.#readAudit(tx, parsed));
  }

  *#readAudit(tx: StepTransaction, { since, afterSeq = 0, turnKey, scopeId, approvalId, limit = 10_000 }: AuditQuery): Step<StoredAuditEvent[]> {
    yield* this.#sequence(tx);
    const from = since === undefined ? undefined : instantMs(since);
    const matched: StoredAuditEvent[] = [];
    const visit = (event: StoredAuditEvent): boolean => {
      if (from !== undefined && instantMs(event.at) < from) return false;
      if ((turnKey !== undefined && event.turnKey !== turnKey) || (scopeId !== undefined && event.scopeId !== scopeId)) return false;
      if (approvalId !== undefined && event.approvalId !== approvalId) return false;
      matched.push(structuredClone(event));
      return matched.length >= limit;
    };
    if (turnKey === undefined) {
      yield* this.#walk(tx, K.audit, sequenceKey(afterSeq), (_key, event) => visit(event));
      return matched;
    }
    // The turn's events alone, never the trail: its index entries, then each event by its seq.
    for (const seq of yield* this.#turnAuditSeqs(tx, turnKey, afterSeq)) {
      const key = sequenceKey(seq);
      const event = yield* this.#get(tx, K.audit, key);
      if (event?.turnKey !== turnKey) {
        throw new StoreContractError(`corrupt turn-audit index entry: it names audit event ${key}, which is ${event === undefined ? "absent" : "another turn's"}`);
      }
      if (visit(event)) break;
    }
    return matched;
  }

  /**
   * The seqs of a turn's numbered events above `afterSeq`, ascending. Sorted here: entry key order
   * is append order per store object, not seq order (another object's clock may run behind).
   */
  *#turnAuditSeqs(tx: StepTransaction, turnKey: string, afterSeq: number): Step<number[]> {
    const seqs: number[] = [];
    for (const [, entry] of yield* this.#prefixed(tx, K.turnAudit, turnAuditKey(turnKey, ""))) {
      // `#sequence` ran first in this step: every entry whose event exists has its seq.
      if (entry.seq === undefined) throw new StoreContractError(`corrupt turn-audit index entry: it names pending audit event ${entry.key}, which is absent`);
      if (entry.seq > afterSeq) seqs.push(entry.seq);
    }
    return seqs.sort((a, b) => a - b);
  }

  async getAuditCursor(sink: string): Promise<number> {
    const name = parseStoreValue(AuditSinkNameSchema, sink, "audit sink name");
    return this.#run((tx) => this.#cursor(tx, name));
  }

  *#cursor(tx: StepTransaction, sink: string): Step<number> {
    return (yield* this.#get(tx, K.cursor, sink))?.seq ?? 0;
  }

  async advanceAuditCursor(input: AdvanceAuditCursorInput): Promise<boolean> {
    const parsed = parseStoreValue(AdvanceAuditCursorInputSchema, input, "audit cursor advance");
    return this.#run((tx) => this.#advanceCursor(tx, parsed));
  }

  *#advanceCursor(tx: StepTransaction, { sink, seq }: AdvanceAuditCursorInput): Step<boolean> {
    if (seq <= (yield* this.#cursor(tx, sink))) return false;
    this.#put(tx, K.cursor, sink, { sink, seq });
    return true;
  }

  // -- reconciliation and retention -----------------------------------------------------------

  async listUnresolved(): Promise<UnresolvedMutation[]> {
    return this.#run((tx) => this.#listUnresolved(tx));
  }

  /** Reads the claims the unresolved-claims index names, never the settled ones. */
  *#listUnresolved(tx: StepTransaction): Step<UnresolvedMutation[]> {
    const unresolved: StoredClaim[] = [];
    for (const [turnKey] of yield* this.#all(tx, K.unresolvedClaim)) {
      const claim = yield* this.#get(tx, K.claim, turnKey);
      if (claim?.state === "pending" || claim?.state === "unknown") unresolved.push(claim);
    }
    // Oldest claim time first; ties in claim order.
    return unresolved
      .sort((a, b) => a.claimedAtMs - b.claimedAtMs || a.seq - b.seq)
      .map(({ identity, state, claimedAtMs }) => ({ ...identity, state: state as UnresolvedMutation["state"], claimedAt: new Date(claimedAtMs).toISOString() }));
  }

  async reconcileMutation(reconciliation: Reconciliation): Promise<ReconcileResult> {
    const parsed = parseStoreValue(ReconciliationSchema, reconciliation, "reconciliation");
    return this.#run((tx) => this.#reconcile(tx, parsed));
  }

  *#reconcile(tx: StepTransaction, reconciliation: Reconciliation): Step<ReconcileResult> {
    const { turnKey } = reconciliation;
    const claim = yield* this.#get(tx, K.claim, turnKey);
    if (claim === undefined) return { reconciled: false, reason: "not_found" };
    const answer = reconcileAnswer(claim, reconciliation.mutationKey);
    if (!answer.reconciled) return answer;
    const time = this.#time();
    const at = new Date(time).toISOString();
    if (answer.state === "unknown") yield* this.#markUnknown(tx, claim.identity, false);
    if (reconciliation.resolution === "completed") {
      this.#putComplete(tx, MUTATION_CLAIMS, turnKey, claim, reconciliation.result, time);
    } else {
      tx.delete(C.claims, turnKey);
      tx.delete(C.unresolvedClaims, turnKey);
    }
    this.#append(tx, reconciledEvent(claim.identity, reconciliation, at));
    return answer;
  }

  async prune(options: PruneOptions): Promise<PruneResult> {
    const cutoff = instantMs(parseStoreValue(PruneOptionsSchema, options, "prune options").olderThan);
    return this.#run((tx) => this.#prune(tx, cutoff));
  }

  /** The turns with a `pending` approval request, read through the pending-requests index. */
  *#waitingTurns(tx: StepTransaction): Step<Set<string>> {
    const waiting = new Set<string>();
    for (const { record } of yield* this.#indexedApprovals(tx, K.pendingApproval)) if (record.status === "pending") waiting.add(record.turnKey);
    return waiting;
  }

  /**
   * Reads the time indexes from their oldest entry up to the cut-off, never the collections: the
   * complete claims and effects settled before it, the finished turns updated before it. A turn
   * that is live (its record running or paused, in `liveTurns`) or has a pending request keeps
   * everything; its entries stay for a later prune.
   */
  *#prune(tx: StepTransaction, cutoff: number): Step<PruneResult> {
    const waiting = yield* this.#waitingTurns(tx);
    const known = new Map<string, boolean>();
    const live = (turnKey: string) => this.#liveOrWaiting(tx, waiting, known, turnKey);
    const pruned = new Set<string>();
    for (const [indexKey, { key: turnKey }] of yield* this.#before(tx, K.settledClaim, cutoff)) {
      if (yield* live(turnKey)) continue;
      tx.delete(C.settledClaims, indexKey);
      const claim = yield* this.#get(tx, K.claim, turnKey);
      if (claim?.state !== "complete") continue;
      const { result: _dropped, ...rest } = claim;
      this.#put(tx, K.claim, turnKey, { ...rest, state: "pruned" });
      tx.delete(C.reads, turnKey);
      pruned.add(turnKey);
    }
    for (const turnKey of pruned) {
      // A verdict's key is JSON of its key fields, the turn key first: the turn's verdicts are one key range.
      for (const [key] of yield* this.#prefixed(tx, K.verdict, `[${JSON.stringify(turnKey)},`)) tx.delete(C.verdicts, key);
      for (const [, { approvalId }] of yield* this.#prefixed(tx, K.turnApproval, turnApprovalKey(turnKey, ""))) {
        const stored = yield* this.#get(tx, K.approval, approvalId);
        if (stored !== undefined) this.#deleteRequest(tx, stored);
        else tx.delete(C.turnApprovals, turnApprovalKey(turnKey, approvalId));
      }
    }
    for (const [indexKey, { key: turnKey }] of yield* this.#before(tx, K.finishedTurn, cutoff)) {
      const record = yield* this.#get(tx, K.turn, turnKey);
      tx.delete(C.finishedTurns, indexKey);
      if (record === undefined || !prunableTurn(record, cutoff)) continue;
      tx.delete(C.turns, turnKey);
      // The request goes with its turn: a retry after prune runs as a new turn (docs/turns.md).
      if (record.requestKey !== undefined && (yield* this.#get(tx, K.turnRequest, record.requestKey))?.turnKey === turnKey) {
        tx.delete(C.turnRequests, record.requestKey);
      }
    }
    // A pruned effect stays in its group: it happened, so it still counts toward `maxPerTurn`.
    let effects = 0;
    for (const [indexKey, { key: effectKey }] of yield* this.#before(tx, K.settledEffect, cutoff)) {
      const effect = yield* this.#get(tx, K.effect, effectKey);
      if (effect?.state === "complete" && (yield* live(effect.identity.turnKey))) continue;
      tx.delete(C.settledEffects, indexKey);
      if (effect?.state !== "complete") continue;
      const { result: _dropped, ...rest } = effect;
      this.#put(tx, K.effect, effectKey, { ...rest, state: "pruned" });
      effects++;
    }
    return { turns: pruned.size, effects };
  }

  /**
   * Whether `prune` keeps the turn whole: its record is live (`liveTurns`) or it has a pending
   * request. Read once per turn in a step and kept in `known` (a turn may have many settled
   * effects): `prune` writes no `liveTurns` entry, so the answer holds for the whole step.
   */
  *#liveOrWaiting(tx: StepTransaction, waiting: ReadonlySet<string>, known: Map<string, boolean>, turnKey: string): Step<boolean> {
    const answer = known.get(turnKey);
    if (answer !== undefined) return answer;
    const live = waiting.has(turnKey) || (yield* this.#get(tx, K.liveTurn, turnKey)) !== undefined;
    known.set(turnKey, live);
    return live;
  }

  async getMutation(turnKey: string): Promise<MutationStatus | undefined> {
    const key = parseDigest(turnKey, "turn key");
    return this.#run((tx) => this.#getMutation(tx, key));
  }

  *#getMutation(tx: StepTransaction, key: string): Step<MutationStatus | undefined> {
    const claim = yield* this.#get(tx, K.claim, key);
    if (claim === undefined) return undefined;
    const { toolName, toolCallId } = claim.identity;
    return claim.result === undefined || claim.state !== "complete"
      ? { state: claim.state, toolName, toolCallId }
      : { state: claim.state, toolName, toolCallId, result: { content: claim.result.content, status: claim.result.status } };
  }

  // -- turn records ---------------------------------------------------------------------------

  async beginTurn(input: BeginTurnInput): Promise<BeginTurnResult> {
    const parsed = parseBeginTurn(input);
    return this.#run((tx) => this.#beginTurn(tx, parsed));
  }

  *#beginTurn(tx: StepTransaction, input: BeginTurnInput): Step<BeginTurnResult> {
    const { turnKey, requestKey } = input.turn;
    const existing = yield* this.#get(tx, K.turn, turnKey);
    // The request's entry is read (and, for a new turn, written) in this step: two new turns of
    // one request conflict on it even on storage with optimistic concurrency.
    const holder = existing === undefined ? yield* this.#requestHolder(tx, requestKey) : undefined;
    const { answer, write } = beginTransition(existing, input, this.#timestamp(), randomUUID(), holder);
    this.#putTurn(tx, existing, write);
    if (write !== undefined && existing === undefined) this.#put(tx, K.turnRequest, requestKey, { requestKey, turnKey });
    return structuredClone(answer);
  }

  /** The turn key holding `requestKey`: its entry's, while that turn's record exists (an entry left without one holds nothing). */
  *#requestHolder(tx: StepTransaction, requestKey: string): Step<string | undefined> {
    const entry = yield* this.#get(tx, K.turnRequest, requestKey);
    if (entry === undefined) return undefined;
    return (yield* this.#get(tx, K.turn, entry.turnKey)) === undefined ? undefined : entry.turnKey;
  }

  async finishTurn(input: FinishTurnInput): Promise<boolean> {
    const parsed = parseFinishTurn(input);
    return this.#run((tx) => this.#finishTurn(tx, parsed));
  }

  *#finishTurn(tx: StepTransaction, input: FinishTurnInput): Step<boolean> {
    const existing = yield* this.#get(tx, K.turn, input.turnKey);
    const { answer, write } = finishTransition(existing, input, this.#timestamp());
    this.#putTurn(tx, existing, write);
    return answer;
  }

  async resumeTurn(input: ResumeTurnInput): Promise<ResumeTurnResult> {
    const parsed = parseResumeTurn(input);
    return this.#run((tx) => this.#resumeTurn(tx, parsed));
  }

  *#resumeTurn(tx: StepTransaction, input: ResumeTurnInput): Step<ResumeTurnResult> {
    const existing = yield* this.#get(tx, K.turn, input.turnKey);
    const { answer, write } = resumeTransition(existing, input, this.#timestamp(), randomUUID());
    this.#putTurn(tx, existing, write);
    return structuredClone(answer);
  }

  async getTurn(turnKey: string): Promise<TurnRecord | undefined> {
    const key = parseDigest(turnKey, "turn key");
    return this.#run((tx) => this.#getCopy(tx, K.turn, key));
  }

  async takePrunableTurn(input: TakePrunableTurnInput): Promise<boolean> {
    const parsed = parseTakePrunableTurn(input);
    return this.#run((tx) => this.#takePrunableTurn(tx, parsed));
  }

  *#takePrunableTurn(tx: StepTransaction, input: TakePrunableTurnInput): Step<boolean> {
    const existing = yield* this.#get(tx, K.turn, input.turnKey);
    const { answer, write } = takePrunableTransition(existing, input);
    // The state and `updatedAt` stay: the live-turn and finished-turn indexes need no change.
    this.#putTurn(tx, existing, write);
    return answer;
  }

  /** Writes a turn's new record (none: nothing changes) and keeps the live-turn and finished-turn indexes in step with it. */
  #putTurn(tx: StepTransaction, existing: TurnRecord | undefined, write: TurnRecord | undefined): void {
    if (write === undefined) return;
    this.#put(tx, K.turn, write.turnKey, write);
    const finished = (record: TurnRecord | undefined) => (record !== undefined && PRUNABLE_TURN_STATES.includes(record.state) ? timedKey(instantMs(record.updatedAt), record.turnKey) : undefined);
    const was = finished(existing);
    const is = finished(write);
    if (was !== undefined && was !== is) tx.delete(C.finishedTurns, was);
    if (is !== undefined && is !== was) this.#putTimed(tx, K.finishedTurn, write.turnKey, instantMs(write.updatedAt));
    if (write.state === existing?.state) return;
    if (write.state === "running" || write.state === "awaiting_approval") this.#put(tx, K.liveTurn, write.turnKey, { turnKey: write.turnKey, state: write.state });
    else tx.delete(C.liveTurns, write.turnKey);
  }

  async renewTurn(input: RenewTurnInput): Promise<boolean> {
    const parsed = parseRenewTurn(input);
    return this.#run((tx) => this.#renewTurn(tx, parsed));
  }

  *#renewTurn(tx: StepTransaction, input: RenewTurnInput): Step<boolean> {
    const existing = yield* this.#get(tx, K.turn, input.turnKey);
    const { answer, write } = renewTransition(existing, input, this.#timestamp());
    this.#putTurn(tx, existing, write);
    return answer;
  }

  async listTurns(query: ListTurnsQuery): Promise<TurnRecord[]> {
    const parsed = parseListTurns(query);
    return this.#run((tx) => this.#listTurns(tx, parsed));
  }

  /**
   * Walks the live-turn index (never the finished turns) in key order. `decided` reads the
   * pending-approvals index and the requests it names; `finished` scans the turns, as `prune`
   * does.
   */
  *#listTurns(tx: StepTransaction, query: ParsedListTurns): Step<TurnRecord[]> {
    const now = this.#timestamp();
    if (query.state === "finished") return yield* this.#listFinishedTurns(tx, query, now);
    const waiting = query.decided ? yield* this.#waitingTurns(tx) : new Set<string>();
    const listed: TurnRecord[] = [];
    const read = (turnKey: string) => this.#get(tx, K.turn, turnKey);
    yield* this.#walkReading(tx, K.liveTurn, query.after, function* (key, entry) {
      if (entry.state !== query.state || waiting.has(key)) return false;
      const record = yield* read(key);
      if (record === undefined || !listedTurn(record, query, now)) return false;
      listed.push(structuredClone(record));
      return listed.length === query.limit;
    });
    return listed;
  }

  /** The finished turns `prune` with the query's cut-off would remove, in key order, from the turns collection. */
  *#listFinishedTurns(tx: StepTransaction, query: ParsedListTurns, now: string): Step<TurnRecord[]> {
    const listed: TurnRecord[] = [];
    yield* this.#walk(tx, K.turn, query.after, (_key, record) => {
      if (!listedTurn(record, query, now)) return false;
      listed.push(structuredClone(record));
      return listed.length === query.limit;
    });
    return listed;
  }

  // -- side effects ---------------------------------------------------------------------------

  async claimEffect(identity: EffectIdentity, options?: EffectClaimOptions): Promise<EffectClaimResult> {
    const parsed = parseStoreValue(EffectIdentitySchema, identity, "effect identity");
    const { maxPerTurn } = parseStoreValue(EffectClaimOptionsSchema, options ?? {}, "effect claim options");
    return this.#run((tx) => this.#claimEffect(tx, parsed, maxPerTurn));
  }

  *#claimEffect(tx: StepTransaction, identity: EffectIdentity, maxPerTurn: number | undefined): Step<EffectClaimResult> {
    const { effectKey, turnKey, toolName } = identity;
    const existing = yield* this.#get(tx, K.effect, effectKey);
    if (existing !== undefined) return existingEffectAnswer(existing);
    // The group is read and written by every claim of this (turn, tool), in this step: the count
    // and the claim it admits are one decision.
    const groupKey = effectGroupKey(turnKey, toolName);
    const group = yield* this.#get(tx, K.effectGroup, groupKey);
    if (maxPerTurn !== undefined && (group?.effectKeys.length ?? 0) >= maxPerTurn) return { status: "limit_reached" };
    const token = randomUUID();
    const claimedAtMs = this.#time();
    const seq = ++this.#claims;
    this.#put(tx, K.effect, effectKey, { identity, token, seq, claimedAtMs, state: "pending" });
    this.#put(tx, K.unresolvedEffect, effectKey, { effectKey });
    this.#put(tx, K.effectGroup, groupKey, { turnKey, toolName, effectKeys: [...(group?.effectKeys ?? []), effectKey] });
    return { status: "acquired", token };
  }

  async settleEffect(settlement: EffectSettlement): Promise<boolean> {
    const parsed = parseStoreValue(EffectSettlementSchema, settlement, "effect settlement");
    return this.#run((tx) => this.#settleEffect(tx, parsed));
  }

  *#settleEffect(tx: StepTransaction, settlement: EffectSettlement): Step<boolean> {
    const effect = yield* this.#get(tx, K.effect, settlement.effectKey);
    if (effect === undefined || !tokenHoldsClaim(effect, settlement.token)) return false;
    const settledAtMs = this.#time();
    if (settlement.outcome === "complete") {
      this.#putComplete(tx, EFFECT_CLAIMS, settlement.effectKey, effect, settlement.result, settledAtMs);
    } else {
      const { identity, token, seq, claimedAtMs } = effect;
      this.#put(tx, K.effect, settlement.effectKey, { identity, token, seq, claimedAtMs, state: "unknown", settledAtMs });
    }
    if (settlement.audit !== undefined) this.#append(tx, settlement.audit);
    return true;
  }

  async releaseEffect(release: EffectRelease): Promise<boolean> {
    const parsed = parseStoreValue(EffectReleaseSchema, release, "effect release");
    return this.#run((tx) => this.#releaseEffect(tx, parsed));
  }

  *#releaseEffect(tx: StepTransaction, { effectKey, token }: EffectRelease): Step<boolean> {
    const effect = yield* this.#get(tx, K.effect, effectKey);
    if (effect === undefined || !tokenHoldsClaim(effect, token)) return false;
    yield* this.#forgetEffect(tx, effect.identity);
    this.#append(tx, effectReleasedEvent(effect.identity, this.#timestamp()));
    return true;
  }

  /** Deletes an effect's claim and takes it out of its group: it no longer counts toward `maxPerTurn`. */
  *#forgetEffect(tx: StepTransaction, { effectKey, turnKey, toolName }: EffectIdentity): Step<void> {
    tx.delete(C.effects, effectKey);
    tx.delete(C.unresolvedEffects, effectKey);
    const groupKey = effectGroupKey(turnKey, toolName);
    const group = yield* this.#get(tx, K.effectGroup, groupKey);
    const effectKeys = group?.effectKeys.filter((each) => each !== effectKey) ?? [];
    if (effectKeys.length > 0) this.#put(tx, K.effectGroup, groupKey, { turnKey, toolName, effectKeys });
    else if (group !== undefined) tx.delete(C.effectGroups, groupKey);
  }

  async getEffect(effectKey: string): Promise<EffectStatus | undefined> {
    const key = parseDigest(effectKey, "effect key");
    return this.#run((tx) => this.#getEffect(tx, key));
  }

  *#getEffect(tx: StepTransaction, key: string): Step<EffectStatus | undefined> {
    const effect = yield* this.#get(tx, K.effect, key);
    if (effect === undefined) return undefined;
    const { toolName, toolCallId } = effect.identity;
    return effect.result === undefined || effect.state !== "complete"
      ? { state: effect.state, toolName, toolCallId }
      : { state: effect.state, toolName, toolCallId, result: { content: effect.result.content, status: effect.result.status } };
  }

  async listUnresolvedEffects(): Promise<UnresolvedEffect[]> {
    return this.#run((tx) => this.#listUnresolvedEffects(tx));
  }

  /** Reads the effects the unresolved-effects index names, never the settled ones. */
  *#listUnresolvedEffects(tx: StepTransaction): Step<UnresolvedEffect[]> {
    const unresolved: StoredEffect[] = [];
    for (const [effectKey] of yield* this.#all(tx, K.unresolvedEffect)) {
      const effect = yield* this.#get(tx, K.effect, effectKey);
      if (effect?.state === "pending" || effect?.state === "unknown") unresolved.push(effect);
    }
    // Oldest claim time first; ties in claim order.
    return unresolved
      .sort((a, b) => a.claimedAtMs - b.claimedAtMs || a.seq - b.seq)
      .map(({ identity, state, claimedAtMs }) => ({ ...identity, state: state as UnresolvedEffect["state"], claimedAt: new Date(claimedAtMs).toISOString() }));
  }

  async reconcileEffect(reconciliation: EffectReconciliation): Promise<ReconcileResult> {
    const parsed = parseStoreValue(EffectReconciliationSchema, reconciliation, "effect reconciliation");
    return this.#run((tx) => this.#reconcileEffect(tx, parsed));
  }

  *#reconcileEffect(tx: StepTransaction, reconciliation: EffectReconciliation): Step<ReconcileResult> {
    const { effectKey } = reconciliation;
    const effect = yield* this.#get(tx, K.effect, effectKey);
    if (effect === undefined) return { reconciled: false, reason: "not_found" };
    if (effect.state !== "pending" && effect.state !== "unknown") return { reconciled: false, reason: "not_unresolved" };
    const { state } = effect;
    const time = this.#time();
    if (reconciliation.resolution === "completed") {
      this.#putComplete(tx, EFFECT_CLAIMS, effectKey, effect, reconciliation.result, time);
    } else {
      yield* this.#forgetEffect(tx, effect.identity);
    }
    this.#append(tx, effectReconciledEvent(effect.identity, reconciliation, new Date(time).toISOString()));
    return { reconciled: true, state };
  }
}
