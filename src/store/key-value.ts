/**
 * `KeyValueGuardrailStore`: every `GuardrailStore` operation on a handful of storage primitives
 * (get, put, delete, scan) inside one atomic step. An adapter implements `atomic` and nothing
 * else; the base parses every input, checks every record it reads against its schema and the key
 * it was read by, writes the audit events a store writes itself, and decides each operation with
 * the same rules as the shipped stores.
 *
 * The hot path (record a read, claim, settle, release) does only gets and puts; the index records
 * it needs (unknown claims per scope, unresolved claims in claim order) are kept by the base.
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
  ExpireApprovalsInputSchema,
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
  type ExpireApprovalsInput,
  type ExpireApprovalsResult,
  type FinishTurnInput,
  type GuardrailStore,
  type JsonValue,
  type MutationIdentity,
  type MutationRelease,
  type MutationSettlement,
  type MutationStatus,
  type PruneOptions,
  type PruneResult,
  type ReadEvidence,
  type RecordReadOptions,
  type Reconciliation,
  type ReconcileResult,
  type ResumeTurnInput,
  type ResumeTurnResult,
  type StoredAuditEvent,
  type TurnRecord,
  type UnresolvedMutation,
  type VerdictKey,
  type VerdictRecord,
} from "../contracts.js";
import { StoreContractError } from "../errors.js";
import { appliedApprovalRecord, approvalDecisionOutcome, approvalEvent, expiredApprovalRecord, reconciledEvent, releasedEvent } from "../stores/events.js";
import {
  beginTransition,
  finishTransition,
  parseBeginTurn,
  parseFinishTurn,
  parseResumeTurn,
  PRUNABLE_TURN_STATES,
  resumeTransition,
} from "../stores/turns.js";
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
} from "../stores/validate.js";
import { existingClaimAnswer, instantMs, tokenHoldsClaim } from "./decisions.js";
import {
  KEY_VALUE_COLLECTIONS as C,
  RECORD_KINDS as K,
  sequenceKey,
  verdictStorageKey,
  type KeyValueCounter,
  type RecordKind,
  type StoredApproval,
  type StoredClaim,
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

/** `KeyValueGuardrailStore`'s options. */
export interface KeyValueGuardrailStoreOptions {
  /** Clock for every time the store records (claims, settlements, audit events, leases). Default: the system clock. */
  readonly now?: () => Date;
}

/** Entries a base scan asks for at once: a page, so an adapter never has to hold a whole collection. */
const SCAN_PAGE = 1_000;

/**
 * A `GuardrailStore` on key-value primitives. Subclass it and implement {@link atomic}; run
 * `validateGuardrailStore` from `arkah-agent-guardrails/testing` against the subclass.
 *
 * The base never mutates a value after passing it to `put`, nor a value `get` or `scan` returned,
 * and never hands either to a caller: its answers are fresh copies.
 */
export abstract class KeyValueGuardrailStore implements GuardrailStore {
  readonly #now: () => Date;
  /** The clock in epoch milliseconds (`Date.now` unless a clock was given). */
  readonly #clock: () => number;
  readonly #trusted: boolean;

  constructor(options: KeyValueGuardrailStoreOptions = {}) {
    const now = options.now;
    this.#now = now ?? (() => new Date());
    this.#clock = now === undefined ? Date.now : () => now().getTime();
    this.#trusted = this.recordsAreTrusted();
  }

  /**
   * Runs `step` atomically: serializable against every other step on the same storage (all
   * processes), its writes committed all together only if it resolves, none if it rejects. The
   * base's steps have no effect outside the transaction, so an adapter MAY re-run `step` after a
   * write conflict (optimistic concurrency: WATCH/MULTI, conditional writes).
   */
  protected abstract atomic<T>(step: (tx: KeyValueTransaction) => Promise<T>): Promise<T>;

  /**
   * Whether `get` and `scan` return exactly the values this base passed to `put` (an in-process
   * store keeping them by reference). Then the base skips re-parsing its records with their
   * schemas; it still checks each against the key it was read by. Asked once, by the constructor
   * (before the subclass's fields exist: answer from the prototype, not from fields).
   * Leave it false for any storage another process, a serializer or a person can write to.
   */
  protected recordsAreTrusted(): boolean {
    return false;
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

  /** Writes a record of `kind` under `key` (the base's records are JSON by construction). */
  #write<T>(tx: KeyValueTransaction, kind: RecordKind<T>, key: string, record: T): void {
    tx.put(kind.collection, key, record as JsonValue);
  }

  /** Every record of a collection, in key order, checked; read in pages. */
  async #all<T>(tx: KeyValueTransaction, kind: RecordKind<T>): Promise<(readonly [string, T])[]> {
    const records: (readonly [string, T])[] = [];
    let after: string | undefined;
    for (;;) {
      const page = await tx.scan(kind.collection, after === undefined ? { limit: SCAN_PAGE } : { after, limit: SCAN_PAGE });
      for (const [key, value] of page) {
        const record = this.#check(kind, key, value);
        if (record !== undefined) records.push([key, record]);
      }
      const last = page.at(-1);
      if (page.length < SCAN_PAGE || last === undefined) return records;
      after = last[0];
    }
  }

  /** The counter's next number, written in the same step. */
  async #next(tx: KeyValueTransaction, counter: KeyValueCounter): Promise<number> {
    const next = (this.#check(K.counter, counter, await tx.get(C.counters, counter)) ?? 0) + 1;
    this.#write(tx, K.counter, counter, next);
    return next;
  }

  async #append(tx: KeyValueTransaction, event: AuditEvent): Promise<void> {
    const seq = await this.#next(tx, "audit");
    const stored: StoredAuditEvent = { ...event, seq };
    this.#write(tx, K.audit, sequenceKey(seq), stored);
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
    const receipt = await this.atomic(async (tx) => this.#check(K.receipt, key, await tx.get(C.receipts, key)));
    return receipt === undefined ? undefined : { ...receipt };
  }

  async putReceiptIfAbsent(receipt: AdmissionReceipt): Promise<AdmissionReceipt> {
    const candidate = parseStoreValue(AdmissionReceiptSchema, receipt, "admission receipt");
    const winner = await this.atomic(async (tx) => {
      const existing = this.#check(K.receipt, candidate.turnKey, await tx.get(C.receipts, candidate.turnKey));
      if (existing !== undefined) return existing;
      this.#write(tx, K.receipt, candidate.turnKey, candidate);
      return candidate;
    });
    return { ...winner };
  }

  // -- read evidence --------------------------------------------------------------------------

  async recordSuccessfulRead(evidence: ReadEvidence, options?: RecordReadOptions): Promise<void> {
    const { turnKey, evidenceDigest } = parseEvidence(evidence);
    const audit = parseReadOptions(options);
    await this.atomic(async (tx) => {
      const reads = this.#check(K.reads, turnKey, await tx.get(C.reads, turnKey));
      if (reads?.digests.includes(evidenceDigest) !== true) {
        this.#write(tx, K.reads, turnKey, { turnKey, digests: reads === undefined ? [evidenceDigest] : [...reads.digests, evidenceDigest] });
      }
      if (audit !== undefined) await this.#append(tx, audit);
    });
  }

  async hasSuccessfulRead(evidence: ReadEvidence): Promise<boolean> {
    const { turnKey, evidenceDigest } = parseEvidence(evidence);
    return this.atomic(async (tx) => this.#check(K.reads, turnKey, await tx.get(C.reads, turnKey))?.digests.includes(evidenceDigest) === true);
  }

  // -- mutation claims ------------------------------------------------------------------------

  async claimMutation(identity: MutationIdentity, options?: ClaimOptions): Promise<ClaimResult> {
    const parsed = parseIdentity(identity);
    const { requireResolvedScope, readEvidence } = parseClaimOptions(options);
    const { turnKey, scopeId } = parsed;
    return this.atomic(async (tx): Promise<ClaimResult> => {
      // The evidence first: without it nothing else is decided.
      if (readEvidence !== undefined) {
        const reads = this.#check(K.reads, turnKey, await tx.get(C.reads, turnKey));
        if (reads === undefined || !readEvidence.some((digest) => reads.digests.includes(digest))) return { status: "read_required" };
      }
      const existing = this.#check(K.claim, turnKey, await tx.get(C.claims, turnKey));
      if (existing !== undefined) return existingClaimAnswer(existing, parsed.mutationKey);
      if (requireResolvedScope && this.#check(K.unknownScope, scopeId, await tx.get(C.unknownScopes, scopeId)) !== undefined) {
        return { status: "scope_unresolved" };
      }
      const token = randomUUID();
      const claimedAtMs = this.#time();
      const seq = await this.#next(tx, "claim");
      const claim: StoredClaim = { identity: parsed, token, seq, claimedAtMs, state: "pending" };
      this.#write(tx, K.claim, turnKey, claim);
      this.#write(tx, K.unresolved, sequenceKey(seq), { turnKey });
      return { status: "acquired", token };
    });
  }

  async settleMutation(settlement: MutationSettlement): Promise<boolean> {
    const parsed = parseSettlement(settlement);
    const { turnKey } = parsed;
    return this.atomic(async (tx) => {
      const claim = this.#check(K.claim, turnKey, await tx.get(C.claims, turnKey));
      if (claim === undefined || !tokenHoldsClaim(claim, parsed.token)) return false;
      const settledAtMs = this.#time();
      if (parsed.outcome === "complete") {
        const settled: StoredClaim = { ...claim, state: "complete", result: parsed.result, settledAtMs };
        this.#write(tx, K.claim, turnKey, settled);
        tx.delete(C.unresolved, sequenceKey(claim.seq));
      } else {
        const settled: StoredClaim = { ...claim, state: "unknown", settledAtMs };
        this.#write(tx, K.claim, turnKey, settled);
        await this.#markUnknown(tx, claim.identity, true);
      }
      if (parsed.audit !== undefined) await this.#append(tx, parsed.audit);
      return true;
    });
  }

  async releaseMutation(release: MutationRelease): Promise<boolean> {
    const parsed = parseRelease(release);
    const { turnKey } = parsed;
    return this.atomic(async (tx) => {
      const claim = this.#check(K.claim, turnKey, await tx.get(C.claims, turnKey));
      if (claim === undefined || !tokenHoldsClaim(claim, parsed.token)) return false;
      // A pending claim is not counted against its scope: deleting it is all there is to undo.
      tx.delete(C.claims, turnKey);
      tx.delete(C.unresolved, sequenceKey(claim.seq));
      await this.#append(tx, releasedEvent(claim.identity, this.#timestamp()));
      return true;
    });
  }

  /** Adds the turn to (or removes it from) its scope's unknown claims. */
  async #markUnknown(tx: KeyValueTransaction, identity: MutationIdentity, unknown: boolean): Promise<void> {
    const { scopeId, turnKey } = identity;
    const entry = this.#check(K.unknownScope, scopeId, await tx.get(C.unknownScopes, scopeId));
    const turnKeys = entry?.turnKeys.filter((each) => each !== turnKey) ?? [];
    if (unknown) turnKeys.push(turnKey);
    if (turnKeys.length > 0) this.#write(tx, K.unknownScope, scopeId, { scopeId, turnKeys });
    else if (entry !== undefined) tx.delete(C.unknownScopes, scopeId);
  }

  // -- verdicts --------------------------------------------------------------------------------

  async recordVerdict(record: VerdictRecord): Promise<VerdictRecord> {
    const candidate = parseStoreValue(VerdictRecordSchema, record, "verdict record");
    const key = verdictStorageKey(candidate);
    const winner = await this.atomic(async (tx) => {
      const existing = this.#check(K.verdict, key, await tx.get(C.verdicts, key));
      if (existing !== undefined) return existing;
      this.#write(tx, K.verdict, key, candidate);
      return candidate;
    });
    return structuredClone(winner);
  }

  async getVerdict(key: VerdictKey): Promise<VerdictRecord | undefined> {
    const storageKey = verdictStorageKey(parseStoreValue(VerdictKeySchema, key, "verdict key"));
    const record = await this.atomic(async (tx) => this.#check(K.verdict, storageKey, await tx.get(C.verdicts, storageKey)));
    return record === undefined ? undefined : structuredClone(record);
  }

  // -- approval requests ----------------------------------------------------------------------

  async requestApproval(request: ApprovalSubmission): Promise<ApprovalRecord> {
    const candidate = parseStoreValue(ApprovalRequestSchema, request, "approval request");
    const { approvalId } = candidate;
    const stored = await this.atomic(async (tx) => {
      const existing = this.#check(K.approval, approvalId, await tx.get(C.approvals, approvalId));
      if (existing !== undefined) return existing.record;
      const record: ApprovalRecord = { ...candidate, status: "pending" };
      const seq = await this.#next(tx, "approval");
      this.#write(tx, K.approval, approvalId, { seq, record });
      await this.#append(tx, approvalEvent(record, "requested", this.#timestamp()));
      return record;
    });
    return structuredClone(stored);
  }

  async getApproval(approvalId: string): Promise<ApprovalRecord | undefined> {
    const key = parseDigest(approvalId, "approval id");
    const stored = await this.atomic(async (tx) => this.#check(K.approval, key, await tx.get(C.approvals, key)));
    return stored === undefined ? undefined : structuredClone(stored.record);
  }

  async decideApproval(input: DecideApprovalInput): Promise<ApprovalDecisionResult> {
    const parsed = parseStoreValue(DecideApprovalInputSchema, input, "approval decision");
    const { approvalId } = parsed;
    const result = await this.atomic(async (tx) => {
      const stored = this.#check(K.approval, approvalId, await tx.get(C.approvals, approvalId));
      const outcome = approvalDecisionOutcome(stored?.record, parsed, this.#timestamp());
      if (stored !== undefined && outcome.changed !== undefined) this.#putApproval(tx, stored.seq, outcome.changed);
      if (outcome.event !== undefined) await this.#append(tx, outcome.event);
      return outcome.result;
    });
    return structuredClone(result);
  }

  async applyApproval(input: ApplyApprovalInput): Promise<boolean> {
    const parsed = parseStoreValue(ApplyApprovalInputSchema, input, "approval application");
    const { approvalId } = parsed;
    return this.atomic(async (tx) => {
      const stored = this.#check(K.approval, approvalId, await tx.get(C.approvals, approvalId));
      const applied = appliedApprovalRecord(stored?.record, parsed.appliedAt);
      if (stored === undefined || applied === undefined) return false;
      this.#putApproval(tx, stored.seq, applied);
      await this.#append(tx, approvalEvent(applied, "applied", this.#timestamp()));
      return true;
    });
  }

  #putApproval(tx: KeyValueTransaction, seq: number, record: ApprovalRecord): void {
    this.#write(tx, K.approval, record.approvalId, { seq, record });
  }

  async listApprovals(query: ApprovalQuery = {}): Promise<ApprovalRecord[]> {
    const { status, turnKey, limit = 10_000 } = parseStoreValue(ApprovalQuerySchema, query, "approval query");
    const listed = await this.atomic(async (tx) =>
      (await this.#approvalsByTime(tx))
        .filter((record) => (status === undefined || record.status === status) && (turnKey === undefined || record.turnKey === turnKey))
        .slice(0, limit),
    );
    return listed.map((record) => structuredClone(record));
  }

  async expireApprovals(input: ExpireApprovalsInput): Promise<ExpireApprovalsResult> {
    const cutoff = instantMs(parseStoreValue(ExpireApprovalsInputSchema, input, "approval expiry").olderThan);
    return this.atomic(async (tx) => {
      const at = this.#timestamp();
      let expired = 0;
      for (const stored of await this.#storedApprovalsByTime(tx)) {
        const { record } = stored;
        if (record.status !== "pending" || !(instantMs(record.requestedAt) < cutoff)) continue;
        const retired = expiredApprovalRecord(record, at);
        this.#putApproval(tx, stored.seq, retired);
        await this.#append(tx, approvalEvent(retired, "expired", at));
        expired++;
      }
      return { expired };
    });
  }

  /** Oldest `requestedAt` first; ties in request order. */
  async #storedApprovalsByTime(tx: KeyValueTransaction): Promise<StoredApproval[]> {
    const stored = (await this.#all(tx, K.approval)).map(([, each]) => each);
    return stored.sort((a, b) => instantMs(a.record.requestedAt) - instantMs(b.record.requestedAt) || a.seq - b.seq);
  }

  async #approvalsByTime(tx: KeyValueTransaction): Promise<ApprovalRecord[]> {
    return (await this.#storedApprovalsByTime(tx)).map((stored) => stored.record);
  }

  // -- audit trail ----------------------------------------------------------------------------

  async appendAudit(event: AuditEvent): Promise<void> {
    const parsed = parseAuditEvent(event);
    await this.atomic((tx) => this.#append(tx, parsed));
  }

  async readAudit(query: AuditQuery = {}): Promise<StoredAuditEvent[]> {
    const { since, afterSeq = 0, turnKey, scopeId, limit = 10_000 } = parseStoreValue(AuditQuerySchema, query, "audit query");
    const from = since === undefined ? undefined : instantMs(since);
    const events = await this.atomic(async (tx) => {
      const matched: StoredAuditEvent[] = [];
      let after = sequenceKey(afterSeq);
      for (;;) {
        const page = await tx.scan(C.audit, { after, limit: SCAN_PAGE });
        for (const [key, value] of page) {
          const event = this.#check(K.audit, key, value);
          if (event === undefined) continue;
          if (from !== undefined && instantMs(event.at) < from) continue;
          if ((turnKey !== undefined && event.turnKey !== turnKey) || (scopeId !== undefined && event.scopeId !== scopeId)) continue;
          matched.push(event);
          if (matched.length >= limit) return matched;
        }
        const last = page.at(-1);
        if (page.length < SCAN_PAGE || last === undefined) return matched;
        after = last[0];
      }
    });
    return events.map((event) => structuredClone(event));
  }

  async getAuditCursor(sink: string): Promise<number> {
    const name = parseStoreValue(AuditSinkNameSchema, sink, "audit sink name");
    return this.atomic(async (tx) => this.#check(K.cursor, name, await tx.get(C.cursors, name))?.seq ?? 0);
  }

  async advanceAuditCursor(input: AdvanceAuditCursorInput): Promise<boolean> {
    const { sink, seq } = parseStoreValue(AdvanceAuditCursorInputSchema, input, "audit cursor advance");
    return this.atomic(async (tx) => {
      const current = this.#check(K.cursor, sink, await tx.get(C.cursors, sink))?.seq ?? 0;
      if (seq <= current) return false;
      this.#write(tx, K.cursor, sink, { sink, seq });
      return true;
    });
  }

  // -- reconciliation and retention -----------------------------------------------------------

  async listUnresolved(): Promise<UnresolvedMutation[]> {
    return this.atomic(async (tx) => {
      const unresolved: { readonly at: number; readonly entry: UnresolvedMutation }[] = [];
      for (const [key, { turnKey }] of await this.#all(tx, K.unresolved)) {
        const claim = this.#check(K.claim, turnKey, await tx.get(C.claims, turnKey));
        if (claim === undefined || sequenceKey(claim.seq) !== key || (claim.state !== "pending" && claim.state !== "unknown")) {
          throw new StoreContractError(`corrupt ${K.unresolved.what}: it names no unresolved claim with its number`);
        }
        unresolved.push({
          at: claim.claimedAtMs,
          entry: { ...claim.identity, state: claim.state, claimedAt: new Date(claim.claimedAtMs).toISOString() },
        });
      }
      // Index order is claim order; a stable sort keeps it among equal times.
      return unresolved.sort((a, b) => a.at - b.at).map(({ entry }) => entry);
    });
  }

  async reconcileMutation(reconciliation: Reconciliation): Promise<ReconcileResult> {
    const parsed = parseStoreValue(ReconciliationSchema, reconciliation, "reconciliation");
    const { turnKey } = parsed;
    return this.atomic(async (tx): Promise<ReconcileResult> => {
      const claim = this.#check(K.claim, turnKey, await tx.get(C.claims, turnKey));
      if (claim === undefined) return { reconciled: false, reason: "not_found" };
      if (claim.state !== "pending" && claim.state !== "unknown") return { reconciled: false, reason: "not_unresolved" };
      const { state } = claim;
      const time = this.#time();
      const at = new Date(time).toISOString();
      if (state === "unknown") await this.#markUnknown(tx, claim.identity, false);
      if (parsed.resolution === "completed") {
        const resolved: StoredClaim = { ...claim, state: "complete", result: parsed.result, settledAtMs: time };
        this.#write(tx, K.claim, turnKey, resolved);
      } else {
        tx.delete(C.claims, turnKey);
      }
      tx.delete(C.unresolved, sequenceKey(claim.seq));
      await this.#append(tx, reconciledEvent(claim.identity, parsed, at));
      return { reconciled: true, state };
    });
  }

  async prune(options: PruneOptions): Promise<PruneResult> {
    const cutoff = instantMs(parseStoreValue(PruneOptionsSchema, options, "prune options").olderThan);
    return this.atomic(async (tx) => {
      const pruned = new Set<string>();
      for (const [turnKey, claim] of await this.#all(tx, K.claim)) {
        if (claim.state !== "complete" || claim.settledAtMs === undefined || !(claim.settledAtMs < cutoff)) continue;
        const { result: _dropped, ...rest } = claim;
        const tombstone: StoredClaim = { ...rest, state: "pruned" };
        this.#write(tx, K.claim, turnKey, tombstone);
        tx.delete(C.reads, turnKey);
        pruned.add(turnKey);
      }
      if (pruned.size > 0) {
        for (const [key, record] of await this.#all(tx, K.verdict)) if (pruned.has(record.turnKey)) tx.delete(C.verdicts, key);
        for (const [key, { record }] of await this.#all(tx, K.approval)) if (pruned.has(record.turnKey)) tx.delete(C.approvals, key);
      }
      for (const [key, record] of await this.#all(tx, K.turn)) {
        if (PRUNABLE_TURN_STATES.includes(record.state) && instantMs(record.updatedAt) < cutoff) tx.delete(C.turns, key);
      }
      return { turns: pruned.size };
    });
  }

  async getMutation(turnKey: string): Promise<MutationStatus | undefined> {
    const key = parseDigest(turnKey, "turn key");
    const claim = await this.atomic(async (tx) => this.#check(K.claim, key, await tx.get(C.claims, key)));
    if (claim === undefined) return undefined;
    const { toolName, toolCallId } = claim.identity;
    return claim.result === undefined || claim.state !== "complete"
      ? { state: claim.state, toolName, toolCallId }
      : { state: claim.state, toolName, toolCallId, result: { content: claim.result.content, status: claim.result.status } };
  }

  // -- turn records ---------------------------------------------------------------------------

  async beginTurn(input: BeginTurnInput): Promise<BeginTurnResult> {
    const parsed = parseBeginTurn(input);
    const { turnKey } = parsed.turn;
    const answer = await this.atomic(async (tx) => {
      const existing = this.#check(K.turn, turnKey, await tx.get(C.turns, turnKey));
      const { answer, write } = beginTransition(existing, parsed, this.#timestamp(), randomUUID());
      if (write !== undefined) this.#putTurn(tx, write);
      return answer;
    });
    return structuredClone(answer);
  }

  async finishTurn(input: FinishTurnInput): Promise<boolean> {
    const parsed = parseFinishTurn(input);
    const { turnKey } = parsed;
    return this.atomic(async (tx) => {
      const existing = this.#check(K.turn, turnKey, await tx.get(C.turns, turnKey));
      const { answer, write } = finishTransition(existing, parsed, this.#timestamp());
      if (write !== undefined) this.#putTurn(tx, write);
      return answer;
    });
  }

  async resumeTurn(input: ResumeTurnInput): Promise<ResumeTurnResult> {
    const parsed = parseResumeTurn(input);
    const { turnKey } = parsed;
    const answer = await this.atomic(async (tx) => {
      const existing = this.#check(K.turn, turnKey, await tx.get(C.turns, turnKey));
      const { answer, write } = resumeTransition(existing, parsed, this.#timestamp(), randomUUID());
      if (write !== undefined) this.#putTurn(tx, write);
      return answer;
    });
    return structuredClone(answer);
  }

  #putTurn(tx: KeyValueTransaction, record: TurnRecord): void {
    this.#write(tx, K.turn, record.turnKey, record);
  }

  async getTurn(turnKey: string): Promise<TurnRecord | undefined> {
    const key = parseDigest(turnKey, "turn key");
    const record = await this.atomic(async (tx) => this.#check(K.turn, key, await tx.get(C.turns, key)));
    return record === undefined ? undefined : structuredClone(record);
  }
}
