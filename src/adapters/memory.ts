/**
 * An in-process `GuardrailStore`: correct for one process, lost on restart. Use it for tests and
 * single-process development; use the SQLite or PostgreSQL store in production.
 *
 * Methods are `async` without awaiting so that a validation error becomes a rejection. Built from
 * the steps `arkah-agent-guardrails/store` exports (parsing, events, decision rules), with Map
 * updates as its atomic step, not on `KeyValueGuardrailStore`: that base's generator driver and
 * write buffer cost 1.5 to 2 times as much per claim and settlement, measured on this store.
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
import { existingClaimAnswer, existingEffectAnswer, reconcileAnswer, tokenHoldsClaim } from "../store/decisions.js";
import {
  appliedApprovalRecord,
  approvalEvent,
  approvalDecisionOutcome,
  expiredApprovalRecord,
  orphanedApprovalRecord,
  effectReconciledEvent,
  effectReleasedEvent,
  reconciledEvent,
  releasedEvent,
} from "../store/events.js";
import {
  beginTransition,
  finishTransition,
  liveTurnKeys,
  listedTurn,
  parseBeginTurn,
  parseFinishTurn,
  parseListTurns,
  parseRenewTurn,
  parseResumeTurn,
  parseTakePrunableTurn,
  prunableTurn,
  takePrunableTransition,
  renewTransition,
  resumeTransition,
} from "../store/turns.js";
import {
  brandTrustedStore,
  parseAuditEvent,
  parseClaimOptions,
  parseDigest,
  parseEvidence,
  parseIdentity,
  parseReadOptions,
  parseRelease,
  parseSettlement,
  parseStoreValue,
} from "../store/validate.js";

interface ClaimRecord {
  readonly identity: MutationIdentity;
  readonly token: string;
  /** Epoch milliseconds from the store's clock: formatted only when listed. */
  readonly claimedAt: number;
  /** `pruned`: a tombstone; the turn's slot is used and its result is gone. */
  state: "pending" | "complete" | "unknown" | "pruned";
  result: MutationResult | undefined;
  /** Epoch milliseconds, for retention. */
  settledAt: number | undefined;
}

interface EffectRecord {
  readonly identity: EffectIdentity;
  readonly token: string;
  readonly claimedAt: number;
  /** `pruned`: a tombstone; the effect happened and its result is gone. */
  state: "pending" | "complete" | "unknown" | "pruned";
  result: MutationResult | undefined;
  settledAt: number | undefined;
}

/** A claim's status as `getMutation` and `getEffect` answer it: the result only when complete, copied. */
function statusOf(claim: ClaimRecord | EffectRecord | undefined): MutationStatus | undefined {
  if (claim === undefined) return undefined;
  const { toolName, toolCallId } = claim.identity;
  return claim.result === undefined || claim.state !== "complete"
    ? { state: claim.state, toolName, toolCallId }
    : { state: claim.state, toolName, toolCallId, result: { ...claim.result } };
}

/** The `pending` and `unknown` claims, with their identity, oldest first. */
function unresolvedOf<R extends ClaimRecord | EffectRecord>(
  claims: Iterable<R>,
): (R["identity"] & { state: "pending" | "unknown"; claimedAt: string })[] {
  const unresolved: (R["identity"] & { state: "pending" | "unknown"; claimedAt: string })[] = [];
  for (const claim of claims) {
    if (claim.state === "pending" || claim.state === "unknown") {
      unresolved.push({ ...claim.identity, state: claim.state, claimedAt: new Date(claim.claimedAt).toISOString() });
    }
  }
  // Map order is claim order; a stable sort keeps it among equal times.
  return unresolved.sort((a, b) => Date.parse(a.claimedAt) - Date.parse(b.claimedAt));
}

/** `InMemoryGuardrailStore`'s options. */
export interface InMemoryGuardrailStoreOptions {
  /** Clock for claim, settlement and audit times. Default: the system clock. */
  readonly now?: () => Date;
}

const verdictKey = (key: VerdictKey) =>
  JSON.stringify([key.turnKey, key.toolCallId, key.toolName, key.toolFingerprint, key.guardrail, key.argsDigest]);

export class InMemoryGuardrailStore implements GuardrailStore {
  readonly #now: () => Date;
  /**
   * The given clock in epoch milliseconds; undefined for the system clock, which `#time` calls as
   * `Date.now()`: measured cheaper per claim than a call through a stored reference to it.
   */
  readonly #clock: (() => number) | undefined;
  readonly #receipts = new Map<string, AdmissionReceipt>();
  /** turn key -> evidence digests. */
  readonly #reads = new Map<string, Set<string>>();
  readonly #claims = new Map<string, ClaimRecord>();
  /** Turn keys with an `unknown` claim, per scope: they block the scope's other turns. */
  readonly #unknownByScope = new Map<string, Set<string>>();
  readonly #verdicts = new Map<string, VerdictRecord>();
  /** approval id -> request; Map order is request order, the tie-break of listApprovals. */
  readonly #approvals = new Map<string, ApprovalRecord>();
  /** The trail: the event of seq n at index n - 1. */
  readonly #audit: StoredAuditEvent[] = [];
  /** turn key -> the turn's events, in seq order (the same objects as in `#audit`), so `readAudit({ turnKey })` reads no other turn's. */
  readonly #auditByTurn = new Map<string, StoredAuditEvent[]>();
  /** sink name -> the seq delivered up to. */
  readonly #cursors = new Map<string, number>();
  /** turn key -> the turn service's record. */
  readonly #turns = new Map<string, TurnRecord>();
  /** request key -> the turn key that holds it (one turn per request). */
  readonly #turnRequests = new Map<string, string>();
  /** effect key -> its claim. */
  readonly #effects = new Map<string, EffectRecord>();
  /** JSON [turn key, tool name] -> that tool's effect keys in the turn, for `maxPerTurn`. */
  readonly #effectsByTurnTool = new Map<string, Set<string>>();

  constructor(options: InMemoryGuardrailStoreOptions = {}) {
    const now = options.now;
    this.#now = now ?? (() => new Date());
    this.#clock = now === undefined ? undefined : () => now().getTime();
    // A subclass may answer otherwise: only this class's own instances are trusted.
    if (new.target === InMemoryGuardrailStore) brandTrustedStore(this, InMemoryGuardrailStore.prototype);
  }

  #timestamp(): string {
    return this.#now().toISOString();
  }

  /** The clock's time in epoch milliseconds; a clock that answers an invalid date throws, as `#timestamp` would. */
  #time(): number {
    const ms = this.#clock === undefined ? Date.now() : this.#clock();
    if (Number.isNaN(ms)) throw new RangeError("Invalid time value");
    return ms;
  }

  // -- admission ------------------------------------------------------------------------------

  async getReceipt(turnKey: string): Promise<AdmissionReceipt | undefined> {
    const receipt = this.#receipts.get(parseDigest(turnKey, "turn key"));
    return receipt === undefined ? undefined : { ...receipt };
  }

  async putReceiptIfAbsent(receipt: AdmissionReceipt): Promise<AdmissionReceipt> {
    const candidate = parseStoreValue(AdmissionReceiptSchema, receipt, "admission receipt");
    const winner = this.#receipts.get(candidate.turnKey) ?? candidate;
    this.#receipts.set(candidate.turnKey, winner);
    return { ...winner };
  }

  // -- read evidence --------------------------------------------------------------------------

  async recordSuccessfulRead(evidence: ReadEvidence, options?: RecordReadOptions): Promise<void> {
    const { turnKey, evidenceDigest } = parseEvidence(evidence);
    const audit = parseReadOptions(options);
    const digests = this.#reads.get(turnKey);
    if (digests === undefined) this.#reads.set(turnKey, new Set([evidenceDigest]));
    else digests.add(evidenceDigest);
    if (audit !== undefined) this.#append(audit);
  }

  async hasSuccessfulRead(evidence: ReadEvidence): Promise<boolean> {
    const { turnKey, evidenceDigest } = parseEvidence(evidence);
    return this.#reads.get(turnKey)?.has(evidenceDigest) === true;
  }

  // -- mutation claims ------------------------------------------------------------------------

  async claimMutation(identity: MutationIdentity, options?: ClaimOptions): Promise<ClaimResult> {
    const parsed = parseIdentity(identity);
    const { requireResolvedScope, readEvidence } = parseClaimOptions(options);
    // The evidence first: without it nothing else is decided.
    if (readEvidence !== undefined && !this.#hasAnyRead(parsed.turnKey, readEvidence)) return { status: "read_required" };
    return this.#claim(parsed, requireResolvedScope);
  }

  #hasAnyRead(turnKey: string, evidence: readonly string[]): boolean {
    const digests = this.#reads.get(turnKey);
    return digests !== undefined && evidence.some((digest) => digests.has(digest));
  }

  #claim(identity: MutationIdentity, requireResolvedScope: boolean): ClaimResult {
    const existing = this.#claims.get(identity.turnKey);
    if (existing !== undefined) return existingClaimAnswer(existing, identity.mutationKey);
    if (requireResolvedScope && this.#unknownByScope.size > 0 && this.#unknownByScope.has(identity.scopeId)) {
      return { status: "scope_unresolved" };
    }
    const token = randomUUID();
    this.#claims.set(identity.turnKey, {
      identity,
      token,
      claimedAt: this.#time(),
      state: "pending",
      result: undefined,
      settledAt: undefined,
    });
    return { status: "acquired", token };
  }

  async settleMutation(settlement: MutationSettlement): Promise<boolean> {
    const parsed = parseSettlement(settlement);
    const claim = this.#claims.get(parsed.turnKey);
    if (claim === undefined || !tokenHoldsClaim(claim, parsed.token)) return false;
    claim.settledAt = this.#time();
    if (parsed.outcome === "complete") {
      claim.state = "complete";
      claim.result = parsed.result;
    } else {
      claim.state = "unknown";
      this.#markUnknown(claim.identity, true);
    }
    if (parsed.audit !== undefined) this.#append(parsed.audit);
    return true;
  }

  async releaseMutation(release: MutationRelease): Promise<boolean> {
    const parsed = parseRelease(release);
    const claim = this.#claims.get(parsed.turnKey);
    if (claim === undefined || !tokenHoldsClaim(claim, parsed.token)) return false;
    // A pending claim is not counted against its scope: deleting it is all there is to undo.
    this.#claims.delete(parsed.turnKey);
    this.#append(releasedEvent(claim.identity, this.#timestamp()));
    return true;
  }

  #markUnknown(identity: MutationIdentity, unknown: boolean): void {
    const turns = this.#unknownByScope.get(identity.scopeId) ?? new Set<string>();
    if (unknown) turns.add(identity.turnKey);
    else turns.delete(identity.turnKey);
    if (turns.size > 0) this.#unknownByScope.set(identity.scopeId, turns);
    else this.#unknownByScope.delete(identity.scopeId);
  }

  // -- verdicts --------------------------------------------------------------------------------

  async recordVerdict(record: VerdictRecord): Promise<VerdictRecord> {
    const candidate = parseStoreValue(VerdictRecordSchema, record, "verdict record");
    const key = verdictKey(candidate);
    const winner = this.#verdicts.get(key) ?? candidate;
    this.#verdicts.set(key, winner);
    return structuredClone(winner);
  }

  async getVerdict(key: VerdictKey): Promise<VerdictRecord | undefined> {
    const record = this.#verdicts.get(verdictKey(parseStoreValue(VerdictKeySchema, key, "verdict key")));
    return record === undefined ? undefined : structuredClone(record);
  }

  // -- approval requests ----------------------------------------------------------------------

  async requestApproval(request: ApprovalSubmission): Promise<ApprovalRecord> {
    const candidate = parseStoreValue(ApprovalRequestSchema, request, "approval request");
    const existing = this.#approvals.get(candidate.approvalId);
    if (existing !== undefined) return structuredClone(existing);
    const record: ApprovalRecord = { ...candidate, status: "pending" };
    this.#approvals.set(record.approvalId, record);
    this.#append(approvalEvent(record, "requested", this.#timestamp()));
    return structuredClone(record);
  }

  async getApproval(approvalId: string): Promise<ApprovalRecord | undefined> {
    const record = this.#approvals.get(parseDigest(approvalId, "approval id"));
    return record === undefined ? undefined : structuredClone(record);
  }

  async decideApproval(input: DecideApprovalInput): Promise<ApprovalDecisionResult> {
    const parsed = parseStoreValue(DecideApprovalInputSchema, input, "approval decision");
    const { result, changed, event } = approvalDecisionOutcome(this.#approvals.get(parsed.approvalId), parsed, this.#timestamp());
    if (changed !== undefined) this.#approvals.set(changed.approvalId, changed);
    if (event !== undefined) this.#append(event);
    return structuredClone(result);
  }

  async applyApproval(input: ApplyApprovalInput): Promise<boolean> {
    const parsed = parseStoreValue(ApplyApprovalInputSchema, input, "approval application");
    const applied = appliedApprovalRecord(this.#approvals.get(parsed.approvalId), parsed.appliedAt);
    if (applied === undefined) return false;
    this.#approvals.set(applied.approvalId, applied);
    this.#append(approvalEvent(applied, "applied", this.#timestamp()));
    return true;
  }

  async listApprovals(query: ApprovalQuery = {}): Promise<ApprovalRecord[]> {
    const { status, turnKey, limit = 10_000 } = parseStoreValue(ApprovalQuerySchema, query, "approval query");
    return this.#approvalsByTime()
      .filter((record) => (status === undefined || record.status === status) && (turnKey === undefined || record.turnKey === turnKey))
      .slice(0, limit)
      .map((record) => structuredClone(record));
  }

  async expireApprovals(input: ExpireApprovalsInput): Promise<ExpireApprovalsResult> {
    const cutoff = Date.parse(parseStoreValue(ExpireApprovalsInputSchema, input, "approval expiry").olderThan);
    const at = this.#timestamp();
    let expired = 0;
    for (const record of this.#approvalsByTime()) {
      if (record.status !== "pending" || !(Date.parse(record.requestedAt) < cutoff)) continue;
      const retired = expiredApprovalRecord(record, at);
      this.#approvals.set(retired.approvalId, retired);
      this.#append(approvalEvent(retired, "expired", at));
      expired++;
    }
    return { expired };
  }

  async orphanApprovals(input: OrphanApprovalsInput): Promise<OrphanApprovalsResult> {
    const cutoff = Date.parse(parseStoreValue(OrphanApprovalsInputSchema, input, "approval orphaning").decidedBefore);
    const at = this.#timestamp();
    let orphaned = 0;
    for (const record of this.#approvalsByTime()) {
      const retired = orphanedApprovalRecord(record, cutoff, at);
      if (retired === undefined) continue;
      this.#approvals.set(retired.approvalId, retired);
      this.#append(approvalEvent(retired, "orphaned", at));
      orphaned++;
    }
    return { orphaned };
  }

  /** Oldest request first; a stable sort keeps request order among equal times. */
  #approvalsByTime(): ApprovalRecord[] {
    return [...this.#approvals.values()].sort((a, b) => Date.parse(a.requestedAt) - Date.parse(b.requestedAt));
  }

  // -- audit trail ----------------------------------------------------------------------------

  async appendAudit(event: AuditEvent): Promise<void> {
    this.#append(parseAuditEvent(event));
  }

  #append(event: AuditEvent): void {
    const stored: StoredAuditEvent = { ...event, seq: this.#audit.length + 1 };
    this.#audit.push(stored);
    const turnEvents = this.#auditByTurn.get(stored.turnKey);
    if (turnEvents === undefined) this.#auditByTurn.set(stored.turnKey, [stored]);
    else turnEvents.push(stored);
  }

  async readAudit(query: AuditQuery = {}): Promise<StoredAuditEvent[]> {
    const { since, afterSeq = 0, turnKey, scopeId, approvalId, limit = 10_000 } = parseStoreValue(AuditQuerySchema, query, "audit query");
    const from = since === undefined ? undefined : Date.parse(since);
    const events: StoredAuditEvent[] = [];
    // A turn's events alone when the query names one; otherwise the trail, from `afterSeq`'s index.
    const trail = turnKey === undefined ? this.#audit : (this.#auditByTurn.get(turnKey) ?? []);
    for (let index = turnKey === undefined ? afterSeq : 0; index < trail.length; index++) {
      const event = trail[index];
      if (event === undefined) break;
      if (events.length >= limit) break;
      if (event.seq <= afterSeq || (from !== undefined && Date.parse(event.at) < from)) continue;
      if ((turnKey !== undefined && event.turnKey !== turnKey) || (scopeId !== undefined && event.scopeId !== scopeId)) continue;
      if (approvalId !== undefined && event.approvalId !== approvalId) continue;
      events.push(structuredClone(event));
    }
    return events;
  }

  async getAuditCursor(sink: string): Promise<number> {
    return this.#cursors.get(parseStoreValue(AuditSinkNameSchema, sink, "audit sink name")) ?? 0;
  }

  async advanceAuditCursor(input: AdvanceAuditCursorInput): Promise<boolean> {
    const { sink, seq } = parseStoreValue(AdvanceAuditCursorInputSchema, input, "audit cursor advance");
    if (seq <= (this.#cursors.get(sink) ?? 0)) return false;
    this.#cursors.set(sink, seq);
    return true;
  }

  // -- reconciliation and retention -----------------------------------------------------------

  async listUnresolved(): Promise<UnresolvedMutation[]> {
    return unresolvedOf(this.#claims.values());
  }

  async reconcileMutation(reconciliation: Reconciliation): Promise<ReconcileResult> {
    const parsed = parseStoreValue(ReconciliationSchema, reconciliation, "reconciliation");
    const claim = this.#claims.get(parsed.turnKey);
    if (claim === undefined) return { reconciled: false, reason: "not_found" };
    const answer = reconcileAnswer(claim, parsed.mutationKey);
    if (!answer.reconciled) return answer;
    const time = this.#time();
    const at = new Date(time).toISOString();
    this.#markUnknown(claim.identity, false);
    if (parsed.resolution === "completed") {
      claim.state = "complete";
      claim.result = parsed.result;
      claim.settledAt = time;
    } else {
      this.#claims.delete(parsed.turnKey);
    }
    const { identity } = claim;
    this.#append(reconciledEvent(identity, parsed, at));
    return answer;
  }

  async prune(options: PruneOptions): Promise<PruneResult> {
    const cutoff = Date.parse(parseStoreValue(PruneOptionsSchema, options, "prune options").olderThan);
    const live = liveTurnKeys(this.#turns.values(), this.#approvals.values());
    const pruned = new Set<string>();
    for (const [turnKey, claim] of this.#claims) {
      if (claim.state === "complete" && claim.settledAt !== undefined && claim.settledAt < cutoff && !live.has(turnKey)) {
        claim.state = "pruned";
        claim.result = undefined;
        pruned.add(turnKey);
      }
    }
    for (const turnKey of pruned) this.#reads.delete(turnKey);
    for (const records of [this.#verdicts, this.#approvals]) {
      for (const [key, record] of records) if (pruned.has(record.turnKey)) records.delete(key);
    }
    for (const [turnKey, record] of this.#turns) {
      if (!prunableTurn(record, cutoff)) continue;
      this.#turns.delete(turnKey);
      // The request goes with its turn: a retry after prune runs as a new turn (docs/turns.md).
      if (record.requestKey !== undefined && this.#turnRequests.get(record.requestKey) === turnKey) this.#turnRequests.delete(record.requestKey);
    }
    let effects = 0;
    for (const claim of this.#effects.values()) {
      if (claim.state === "complete" && claim.settledAt !== undefined && claim.settledAt < cutoff && !live.has(claim.identity.turnKey)) {
        claim.state = "pruned";
        claim.result = undefined;
        effects++;
      }
    }
    return { turns: pruned.size, effects };
  }

  async getMutation(turnKey: string): Promise<MutationStatus | undefined> {
    return statusOf(this.#claims.get(parseDigest(turnKey, "turn key")));
  }

  // -- turn records ---------------------------------------------------------------------------

  async beginTurn(input: BeginTurnInput): Promise<BeginTurnResult> {
    const parsed = parseBeginTurn(input);
    const { turnKey, requestKey } = parsed.turn;
    const holder = this.#turnRequests.get(requestKey);
    const { answer, write } = beginTransition(this.#turns.get(turnKey), parsed, this.#timestamp(), randomUUID(), holder);
    if (write !== undefined) {
      this.#turns.set(write.turnKey, write);
      if (holder === undefined) this.#turnRequests.set(requestKey, turnKey);
    }
    return structuredClone(answer);
  }

  async finishTurn(input: FinishTurnInput): Promise<boolean> {
    const parsed = parseFinishTurn(input);
    const { answer, write } = finishTransition(this.#turns.get(parsed.turnKey), parsed, this.#timestamp());
    if (write !== undefined) this.#turns.set(write.turnKey, write);
    return answer;
  }

  async resumeTurn(input: ResumeTurnInput): Promise<ResumeTurnResult> {
    const parsed = parseResumeTurn(input);
    const { answer, write } = resumeTransition(this.#turns.get(parsed.turnKey), parsed, this.#timestamp(), randomUUID());
    if (write !== undefined) this.#turns.set(write.turnKey, write);
    return structuredClone(answer);
  }

  async renewTurn(input: RenewTurnInput): Promise<boolean> {
    const parsed = parseRenewTurn(input);
    const { answer, write } = renewTransition(this.#turns.get(parsed.turnKey), parsed, this.#timestamp());
    if (write !== undefined) this.#turns.set(write.turnKey, write);
    return answer;
  }

  async listTurns(query: ListTurnsQuery): Promise<TurnRecord[]> {
    const parsed = parseListTurns(query);
    const now = this.#timestamp();
    const waiting = new Set<string>();
    if (parsed.decided) for (const approval of this.#approvals.values()) if (approval.status === "pending") waiting.add(approval.turnKey);
    return [...this.#turns.values()]
      .filter((record) => (parsed.after === undefined || record.turnKey > parsed.after) && listedTurn(record, parsed, now) && !waiting.has(record.turnKey))
      .sort((a, b) => (a.turnKey < b.turnKey ? -1 : 1))
      .slice(0, parsed.limit)
      .map((record) => structuredClone(record));
  }

  async getTurn(turnKey: string): Promise<TurnRecord | undefined> {
    const record = this.#turns.get(parseDigest(turnKey, "turn key"));
    return record === undefined ? undefined : structuredClone(record);
  }

  async takePrunableTurn(input: TakePrunableTurnInput): Promise<boolean> {
    const parsed = parseTakePrunableTurn(input);
    const { answer, write } = takePrunableTransition(this.#turns.get(parsed.turnKey), parsed);
    if (write !== undefined) this.#turns.set(write.turnKey, write);
    return answer;
  }

  // -- side effects ---------------------------------------------------------------------------

  async claimEffect(identity: EffectIdentity, options?: EffectClaimOptions): Promise<EffectClaimResult> {
    const parsed = parseStoreValue(EffectIdentitySchema, identity, "effect identity");
    const { maxPerTurn } = parseStoreValue(EffectClaimOptionsSchema, options ?? {}, "effect claim options");
    const existing = this.#effects.get(parsed.effectKey);
    if (existing !== undefined) return existingEffectAnswer(existing);
    const groupKey = JSON.stringify([parsed.turnKey, parsed.toolName]);
    const group = this.#effectsByTurnTool.get(groupKey);
    if (maxPerTurn !== undefined && (group?.size ?? 0) >= maxPerTurn) return { status: "limit_reached" };
    const token = randomUUID();
    this.#effects.set(parsed.effectKey, { identity: parsed, token, claimedAt: this.#time(), state: "pending", result: undefined, settledAt: undefined });
    if (group === undefined) this.#effectsByTurnTool.set(groupKey, new Set([parsed.effectKey]));
    else group.add(parsed.effectKey);
    return { status: "acquired", token };
  }

  async settleEffect(settlement: EffectSettlement): Promise<boolean> {
    const parsed = parseStoreValue(EffectSettlementSchema, settlement, "effect settlement");
    const claim = this.#effects.get(parsed.effectKey);
    if (claim === undefined || !tokenHoldsClaim(claim, parsed.token)) return false;
    claim.settledAt = this.#time();
    if (parsed.outcome === "complete") {
      claim.state = "complete";
      claim.result = parsed.result;
    } else {
      claim.state = "unknown";
    }
    if (parsed.audit !== undefined) this.#append(parsed.audit);
    return true;
  }

  async releaseEffect(release: EffectRelease): Promise<boolean> {
    const parsed = parseStoreValue(EffectReleaseSchema, release, "effect release");
    const claim = this.#effects.get(parsed.effectKey);
    if (claim === undefined || !tokenHoldsClaim(claim, parsed.token)) return false;
    this.#forgetEffect(claim.identity);
    this.#append(effectReleasedEvent(claim.identity, this.#timestamp()));
    return true;
  }

  #forgetEffect(identity: EffectIdentity): void {
    this.#effects.delete(identity.effectKey);
    const groupKey = JSON.stringify([identity.turnKey, identity.toolName]);
    const group = this.#effectsByTurnTool.get(groupKey);
    group?.delete(identity.effectKey);
    if (group?.size === 0) this.#effectsByTurnTool.delete(groupKey);
  }

  async getEffect(effectKey: string): Promise<EffectStatus | undefined> {
    return statusOf(this.#effects.get(parseDigest(effectKey, "effect key")));
  }

  async listUnresolvedEffects(): Promise<UnresolvedEffect[]> {
    return unresolvedOf(this.#effects.values());
  }

  async reconcileEffect(reconciliation: EffectReconciliation): Promise<ReconcileResult> {
    const parsed = parseStoreValue(EffectReconciliationSchema, reconciliation, "effect reconciliation");
    const claim = this.#effects.get(parsed.effectKey);
    if (claim === undefined) return { reconciled: false, reason: "not_found" };
    if (claim.state !== "pending" && claim.state !== "unknown") return { reconciled: false, reason: "not_unresolved" };
    const state = claim.state;
    const time = this.#time();
    if (parsed.resolution === "completed") {
      claim.state = "complete";
      claim.result = parsed.result;
      claim.settledAt = time;
    } else {
      this.#forgetEffect(claim.identity);
    }
    this.#append(effectReconciledEvent(claim.identity, parsed, new Date(time).toISOString()));
    return { reconciled: true, state };
  }
}
