/**
 * The `GuardrailStore` contract: every operation a store provides, over the records of the
 * other files in this folder.
 */
import type { AdvanceAuditCursorInput, AuditEvent, AuditQuery, StoredAuditEvent } from "./audit.js";
import type {
  AdmissionReceipt,
  ClaimOptions,
  ClaimResult,
  MutationIdentity,
  MutationRelease,
  MutationSettlement,
  ReadEvidence,
  RecordReadOptions,
} from "./claims.js";
import type {
  EffectClaimOptions,
  EffectClaimResult,
  EffectIdentity,
  EffectRelease,
  EffectSettlement,
} from "./effects.js";
import type {
  ApplyApprovalInput,
  ApprovalDecisionResult,
  ApprovalQuery,
  ApprovalRecord,
  ApprovalSubmission,
  DecideApprovalInput,
  ExpireApprovalsInput,
  ExpireApprovalsResult,
  OrphanApprovalsInput,
  OrphanApprovalsResult,
  VerdictKey,
  VerdictRecord,
} from "./approvals.js";
import type {
  EffectReconciliation,
  PruneOptions,
  PruneResult,
  ReconcileResult,
  Reconciliation,
  UnresolvedEffect,
  UnresolvedMutation,
} from "./reconciliation.js";
import type {
  BeginTurnInput,
  BeginTurnResult,
  EffectStatus,
  FinishTurnInput,
  ListTurnsQuery,
  MutationStatus,
  RenewTurnInput,
  ResumeTurnInput,
  ResumeTurnResult,
  TakePrunableTurnInput,
  TurnRecord,
} from "./turn-records.js";

/**
 * Durable, trusted server-side storage for the guardrails. Its methods are server operations:
 * never expose them as tools or client endpoints. Implementations validate every value crossing
 * the boundary and never hand out references to their internal state.
 *
 * Run `arkah-agent-guardrails/testing`'s conformance suite against any implementation.
 */
export interface GuardrailStore {
  /** The receipt stored for `turnKey`, if any. */
  getReceipt(turnKey: string): Promise<AdmissionReceipt | undefined>;
  /** Stores `receipt` unless one exists for its turn key; returns whichever receipt won. */
  putReceiptIfAbsent(receipt: AdmissionReceipt): Promise<AdmissionReceipt>;
  /**
   * Records read evidence: an idempotent insert. With `options.audit`, appends that event in the
   * same transaction, every time it is given (also when the evidence was already recorded).
   */
  recordSuccessfulRead(evidence: ReadEvidence, options?: RecordReadOptions): Promise<void>;
  /**
   * True only for evidence recorded for exactly this turn key and digest. The middleware does not
   * ask it: it passes the evidence to `claimMutation` as `readEvidence`, checked in the claim's own
   * transaction. Kept for custom stores and hosts.
   */
  hasSuccessfulRead(evidence: ReadEvidence): Promise<boolean>;
  /**
   * Atomically claims the turn's single mutation slot. One winner across all workers. A turn
   * whose completed claim was pruned answers `conflict`: it is never reopened. With
   * `options.readEvidence`, the claim first requires one of those digests recorded for the turn,
   * else answers `read_required` and changes nothing; all in one transaction.
   */
  claimMutation(identity: MutationIdentity, options?: ClaimOptions): Promise<ClaimResult>;
  /**
   * Settles a pending claim. Returns false, changing nothing, unless the claim is pending and
   * `token` is the one `claimMutation` issued. A settlement that throws leaves the claim pending.
   * `settlement.audit` is appended in the same transaction exactly when it returns true.
   */
  settleMutation(settlement: MutationSettlement): Promise<boolean>;
  /**
   * Releases a pending claim whose tool body provably never started, with a `released` audit
   * event, atomically: the turn's slot is open again as if it had never been claimed. Returns
   * false, changing nothing, unless the claim is pending and `token` is the one `claimMutation`
   * issued. Never use it for a body that may have started: settle that `unknown` (the one
   * exception: a body that threw `NoEffectError`, asserting nothing was written).
   */
  releaseMutation(release: MutationRelease): Promise<boolean>;
  /** Stores a guardrail's verdict unless one exists for its key; returns whichever won. */
  recordVerdict(record: VerdictRecord): Promise<VerdictRecord>;
  /** The verdict recorded for exactly this key (turn, call id, tool, guardrail, arguments). */
  getVerdict(key: VerdictKey): Promise<VerdictRecord | undefined>;
  /**
   * Stores `request` as a `pending` approval unless one exists for its `approvalId`, appending a
   * `requested` audit event with it, atomically. Returns the stored record: the new one, or the
   * existing one, unchanged, whatever its status.
   */
  requestApproval(request: ApprovalSubmission): Promise<ApprovalRecord>;
  /** The stored request with this id, whatever its status; `undefined` when there is none. */
  getApproval(approvalId: string): Promise<ApprovalRecord | undefined>;
  /**
   * Decides a pending request (the first decision wins) and audits it, atomically. A refused
   * decision (`already_decided`, `expired`, `orphaned`) changes nothing but is audited
   * (`decision_refused`); `not_found` changes and appends nothing. The recorded decision
   * re-delivered, on a request still decided or applied by it, answers `decided: true,
   * repeated: true` and appends nothing.
   */
  decideApproval(input: DecideApprovalInput): Promise<ApprovalDecisionResult>;
  /**
   * Compare-and-set of an `approved` or `edited` request to `applied`, audited. False, changing
   * nothing, for any other status or no request.
   */
  applyApproval(input: ApplyApprovalInput): Promise<boolean>;
  /** Approval requests, oldest `requestedAt` first; ties in the order they were requested (between requests made concurrently, unspecified). */
  listApprovals(query?: ApprovalQuery): Promise<ApprovalRecord[]>;
  /** Expires every `pending` request made before `olderThan`, one audit event each. */
  expireApprovals(input: ExpireApprovalsInput): Promise<ExpireApprovalsResult>;
  /**
   * Orphans every `approved` or `edited` request decided before `decidedBefore` (never pending,
   * rejected, applied, expired or orphaned ones), one `orphaned` audit event each, atomically per
   * request: `applyApproval` answers false for it from then on.
   */
  orphanApprovals(input: OrphanApprovalsInput): Promise<OrphanApprovalsResult>;
  /** Appends to the audit trail. Append-only: events are never changed or removed by the store. */
  appendAudit(event: AuditEvent): Promise<void>;
  /** Audit events in the order they were appended, oldest first; `turnKey`, `scopeId` and `approvalId` filter exactly. */
  readAudit(query?: AuditQuery): Promise<StoredAuditEvent[]>;
  /** The sequence number `sink` has been delivered up to: 0 when it has no cursor. */
  getAuditCursor(sink: string): Promise<number>;
  /**
   * Moves `sink`'s cursor forward to `seq`, atomically under concurrency. Returns true if it moved;
   * false, changing nothing, when `seq` is at or below the cursor.
   */
  advanceAuditCursor(input: AdvanceAuditCursorInput): Promise<boolean>;
  /** Every `pending` or `unknown` mutation, oldest claim first. */
  listUnresolved(): Promise<UnresolvedMutation[]>;
  /**
   * Resolves a `pending` or `unknown` mutation on an operator's word, and appends a `reconciled`
   * audit event, atomically. With `mutationKey`, only the claim of that call (`other_call`
   * otherwise). Anything else changes nothing and says why.
   */
  reconcileMutation(reconciliation: Reconciliation): Promise<ReconcileResult>;
  /**
   * Removes completed mutations settled before `olderThan`, with their turns' read evidence,
   * verdicts and approval requests, keeping a tombstone per turn so a replay is refused, not reopened.
   * Unresolved claims, receipts and the audit trail are kept. Finished turn records
   * (`completed`, `refused`, `failed`) last updated before `olderThan` are removed too. A store
   * with the `effects` part also prunes completed side effects settled before `olderThan` to
   * tombstones (a later claim of one answers `pruned`), and counts them in `effects`.
   */
  prune(options: PruneOptions): Promise<PruneResult>;
  /** The state of the turn's mutation claim, if it has one; read only. */
  getMutation(turnKey: string): Promise<MutationStatus | undefined>;
  /**
   * Begins or joins a turn, atomically: stores it `running` under a new lease if it is new
   * (`started`), takes over a `running` turn whose lease expired at the store's clock
   * (`taken_over`, the old token no longer finishes it), else changes nothing and answers
   * `running`, `finished` (with the record) or `input_mismatch` (another input digest).
   */
  beginTurn(input: BeginTurnInput): Promise<BeginTurnResult>;
  /**
   * Compare-and-set from `running` by the lease token (expired or not, as long as nobody took the
   * turn over): stores the state and outcome and drops the lease. False, changing nothing, otherwise.
   */
  finishTurn(input: FinishTurnInput): Promise<boolean>;
  /**
   * Compare-and-set from `awaiting_approval` (or `input.from`: `failed`) to `running` under a new
   * lease, dropping the outcome: of concurrent callers, one resumes. A turn `takePrunableTurn` took
   * (`pruning`) is never resumed. Anything else changes nothing.
   */
  resumeTurn(input: ResumeTurnInput): Promise<ResumeTurnResult>;
  /**
   * Extends a running turn's lease to `leaseMs` from the store's clock now: compare-and-set by the
   * lease token while the turn is `running` (expired or not, as long as nobody took it over).
   * False, changing nothing, otherwise: the holder lost the turn. Changes nothing else (not `updatedAt`).
   */
  renewTurn(input: RenewTurnInput): Promise<boolean>;
  /**
   * Live turns, in turn key order: `running` ones (with `expired`, only those whose lease expired
   * at the store's clock) or `awaiting_approval` ones (with `decided`, only those with no `pending`
   * approval request). Read only; served by an index of live turns, never a scan of finished ones.
   */
  listTurns(query: ListTurnsQuery): Promise<TurnRecord[]>;
  /** The stored turn, whatever its state; `undefined` when there is none. */
  getTurn(turnKey: string): Promise<TurnRecord | undefined>;
  /**
   * Takes a finished turn for the turn service's `prune`, before its checkpoint thread is deleted:
   * compare-and-set on the record as `listTurns({ state: "finished" })` listed it (still in a
   * finished state, with `input.updatedAt`), marking it `pruning` (nothing else changes, not
   * `updatedAt`), so `resumeTurn` never runs it again; `prune` removes it as before. True when the
   * record is taken (again, if it was already: a crashed or concurrent prune's take is finished by
   * the next); false, changing nothing, when there is no such record or it changed (run again,
   * or pruned and begun anew). Of a take and a `resumeTurn({ from: "failed" })` of one record,
   * exactly one wins.
   */
  takePrunableTurn(input: TakePrunableTurnInput): Promise<boolean>;
  /**
   * Atomically claims one side effect by its `effectKey`: one winner across all workers. An
   * existing claim answers `replay`, `pending`, `unknown` or `pruned`; with `options.maxPerTurn`,
   * a new effect beyond the turn's limit for its tool answers `limit_reached`. Never touches the
   * turn's mutation slot, and needs no read.
   */
  claimEffect(identity: EffectIdentity, options?: EffectClaimOptions): Promise<EffectClaimResult>;
  /** Settles a pending effect claim, as `settleMutation` does a mutation's. */
  settleEffect(settlement: EffectSettlement): Promise<boolean>;
  /**
   * Releases a pending effect claim, with a `released` audit event, atomically, as
   * `releaseMutation` does: the effect's claim is gone and it no longer counts toward `maxPerTurn`.
   */
  releaseEffect(release: EffectRelease): Promise<boolean>;
  /** The state of one side effect's claim, if it has one; read only. */
  getEffect(effectKey: string): Promise<EffectStatus | undefined>;
  /** Every `pending` or `unknown` side effect, oldest claim first. */
  listUnresolvedEffects(): Promise<UnresolvedEffect[]>;
  /**
   * Resolves a `pending` or `unknown` side effect on an operator's word, with a `reconciled` audit
   * event, atomically: `completed` stores the result later replays return; `no-effect` removes
   * the claim. Anything else changes nothing and says why.
   */
  reconcileEffect(reconciliation: EffectReconciliation): Promise<ReconcileResult>;
}
