/**
 * A `GuardrailStore` on one SQLite file (better-sqlite3, an optional peer dependency: only this
 * module imports it). Durable, and safe for several processes sharing the file on one host.
 *
 * - Journal: WAL, so readers never block the writer and one writer commits at a time.
 * - `synchronous = FULL` by default: every commit (a claim above all) is on disk before the
 *   method resolves, so a claim survives an OS crash or power loss and a side effect that ran
 *   after it can never be run again. `"normal"` keeps the database consistent but may lose the
 *   last commits on an OS crash or power loss (not on a process crash): a lost claim would let a
 *   retry run the write a second time. Choose it only where the writes themselves are idempotent.
 * - Every read-then-write operation is ONE `BEGIN IMMEDIATE` transaction: it takes the write lock
 *   before it reads, so two processes can never interleave between the check and the write. A
 *   writer that finds the lock held waits up to `busyTimeoutMs`, then fails (a rejection).
 * - Versioned migrations run at open, in one transaction; a file written by a newer version of
 *   the package is refused, never guessed at.
 * - Every row read back is parsed with the exported zod schemas: a corrupted row (a hand edit,
 *   a bad disk) is a `StoreContractError`: fail closed. A database failure (a lock held past
 *   `busyTimeoutMs`, a full disk) is a `SqliteStoreError` naming the operation and what it left.
 *
 * Semantics are exactly those of `InMemoryGuardrailStore`; the conformance suite in
 * `arkah-agent-guardrails/testing` is the definition. better-sqlite3 is synchronous: each method
 * runs to completion without yielding, and is `async` only so that every error is a rejection.
 * Waiting for another process's lock blocks this process's event loop for at most
 * `busyTimeoutMs`.
 */
import Database from "better-sqlite3";
import { z } from "zod";
import {
  AdmissionReceiptSchema,
  AdvanceAuditCursorInputSchema,
  ApplyApprovalInputSchema,
  ApprovalQuerySchema,
  ApprovalRequestSchema,
  AuditCursorSchema,
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
  StoredAuditEventSchema,
  UnresolvedEffectSchema,
  UnresolvedMutationSchema,
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
} from "../../contracts/index.js";
import { ConfigurationError, StoreContractError } from "../../errors.js";
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
} from "../../store/validate.js";
import { approvalFromRow, claimFromRow, effectFromRow, encodeText, epochMs, keyParams, parseJson, parseRow, receiptFromRow, verdictFromRow } from "./encoding.js";
import { corrupt, isOwnError, openError, ownError, storeFailure } from "./errors.js";
import { migrate } from "./migrations.js";
import { prepareStatements, type Statements } from "./statements.js";
import { prepareSteps, type Steps } from "./steps.js";
import { appendEvent, prepareTransactions, type Transactions } from "./transactions.js";
import { parseBeginTurn, parseFinishTurn, parseListTurns, parseRenewTurn, parseResumeTurn, parseTakePrunableTurn } from "../../store/turns.js";
import { listTurns, prepareTurnSteps, readTurn, type TurnSteps } from "./turns.js";

// ---------------------------------------------------------------------------------------------
// Options

/** `SqliteGuardrailStore.open`'s options. */
export interface SqliteGuardrailStoreOptions {
  /** The database file, created if missing (its directory must exist). `":memory:"` for tests. */
  readonly path: string;
  /** Clock for claim, settlement and reconciliation times. Default: the system clock. */
  readonly now?: () => Date;
  /** How long a write waits for another connection's lock before failing. Default 5000 ms. */
  readonly busyTimeoutMs?: number;
  /**
   * `"full"` (default): every commit is synced to disk before the method resolves.
   * `"normal"`: faster; a commit survives a process crash but may be lost on an OS crash or power
   * loss, and a lost claim lets a retry run its write again. See the module comment.
   */
  readonly synchronous?: "full" | "normal";
}

const OptionsSchema = z.strictObject({
  path: z.string().min(1, "path must name a database file (or be \":memory:\")"),
  now: z.custom<() => Date>((value) => typeof value === "function", "now must be a function returning a Date").optional(),
  busyTimeoutMs: z.int().min(0).max(2_147_483_647).optional(),
  synchronous: z.enum(["full", "normal"]).optional(),
});

const DEFAULT_BUSY_TIMEOUT_MS = 5_000;

export class SqliteGuardrailStore implements GuardrailStore {
  readonly #db: Database.Database;
  readonly #now: () => Date;
  readonly #sql: Statements;
  readonly #steps: Steps;
  readonly #tx: Transactions;
  readonly #turns: TurnSteps;

  /** Where the file is and how long a write waits for a lock, for error messages. */
  readonly #path: string;
  readonly #busyTimeoutMs: number;

  private constructor(db: Database.Database, now: () => Date, path: string, busyTimeoutMs: number) {
    this.#db = db;
    this.#now = now;
    this.#path = path;
    this.#busyTimeoutMs = busyTimeoutMs;
    // A subclass may answer otherwise: only this class's own instances are trusted.
    if (new.target === SqliteGuardrailStore) brandTrustedStore(this, SqliteGuardrailStore.prototype);
    this.#sql = prepareStatements(db);
    this.#steps = prepareSteps(db, this.#sql, () => this.#timestamp());
    this.#tx = prepareTransactions(db, this.#sql, () => this.#timestamp());
    this.#turns = prepareTurnSteps(db, this.#sql, () => this.#timestamp());
  }

  /**
   * Opens (creating if needed) the store at `options.path`, applying pending migrations. Throws
   * `ConfigurationError` for invalid options, and an `Error` naming the path and the cause when the
   * file cannot be opened or was written by a newer version.
   */
  static open(options: SqliteGuardrailStoreOptions): SqliteGuardrailStore {
    const parsed = OptionsSchema.safeParse(options);
    if (!parsed.success) {
      throw new ConfigurationError(`invalid SqliteGuardrailStore options: ${z.prettifyError(parsed.error)}`);
    }
    const { path, now = () => new Date(), busyTimeoutMs = DEFAULT_BUSY_TIMEOUT_MS, synchronous = "full" } = parsed.data;
    let db: Database.Database;
    try {
      db = new Database(path, { timeout: busyTimeoutMs });
    } catch (error) {
      throw openError(path, error);
    }
    try {
      const mode: unknown = db.pragma("journal_mode = WAL", { simple: true });
      if (mode !== "wal" && !(path === ":memory:" && mode === "memory")) {
        throw ownError(
          `the SQLite guardrail store at ${JSON.stringify(path)} cannot use WAL mode (journal_mode is ${String(mode)}); ` +
            "put it on a local file system",
        );
      }
      db.pragma(`synchronous = ${synchronous === "full" ? "FULL" : "NORMAL"}`);
      migrate(db, path);
      return new SqliteGuardrailStore(db, now, path, busyTimeoutMs);
    } catch (error) {
      db.close();
      if (isOwnError(error)) throw error;
      throw openError(path, error);
    }
  }

  /** Closes the connection. Calls after this reject. Idempotent. */
  close(): void {
    if (this.#db.open) this.#db.close();
  }

  #timestamp(): string {
    return this.#now().toISOString();
  }

  /**
   * Runs an operation; a database failure (a lock held past `busyTimeoutMs`, a full disk, a closed
   * store) becomes a `SqliteStoreError` saying what happened. Invalid values and corrupt rows stay
   * `StoreContractError`s.
   */
  #run<T>(operation: string, fn: () => T): T {
    try {
      return fn();
    } catch (error) {
      if (StoreContractError.isInstance(error) || ConfigurationError.isInstance(error)) throw error;
      throw storeFailure(operation, this.#path, this.#busyTimeoutMs, error);
    }
  }

  // -- admission ------------------------------------------------------------------------------

  async getReceipt(turnKey: string): Promise<AdmissionReceipt | undefined> {
    return this.#run("getReceipt", () => {
      const row = this.#sql.getReceipt.get(parseDigest(turnKey, "turn key"));
      return row === undefined ? undefined : receiptFromRow(row);
    });
  }

  async putReceiptIfAbsent(receipt: AdmissionReceipt): Promise<AdmissionReceipt> {
    return this.#run("putReceiptIfAbsent", () => {
      const candidate = parseStoreValue(AdmissionReceiptSchema, receipt, "admission receipt");
      return this.#tx.putReceipt.immediate(candidate);
    });
  }

  // -- read evidence --------------------------------------------------------------------------

  async recordSuccessfulRead(evidence: ReadEvidence, options?: RecordReadOptions): Promise<void> {
    this.#run("recordSuccessfulRead", () => {
      const parsed = parseEvidence(evidence);
      const audit = parseReadOptions(options);
      if (audit === undefined) this.#sql.insertRead.run(parsed.turnKey, parsed.evidenceDigest);
      else this.#steps.recordRead.immediate(parsed, audit);
    });
  }

  async hasSuccessfulRead(evidence: ReadEvidence): Promise<boolean> {
    return this.#run("hasSuccessfulRead", () => {
      const { turnKey, evidenceDigest } = parseEvidence(evidence);
      return this.#sql.hasRead.get(turnKey, evidenceDigest) !== undefined;
    });
  }

  // -- mutation claims ------------------------------------------------------------------------

  async claimMutation(identity: MutationIdentity, options?: ClaimOptions): Promise<ClaimResult> {
    return this.#run("claimMutation", () => {
      const parsed = parseIdentity(identity);
      const { requireResolvedScope, readEvidence } = parseClaimOptions(options);
      return this.#steps.claim.immediate(parsed, requireResolvedScope, readEvidence);
    });
  }

  async settleMutation(settlement: MutationSettlement): Promise<boolean> {
    return this.#run("settleMutation", () => {
      return this.#steps.settle.immediate(parseSettlement(settlement));
    });
  }

  async releaseMutation(release: MutationRelease): Promise<boolean> {
    return this.#run("releaseMutation", () => {
      return this.#steps.release.immediate(parseRelease(release));
    });
  }

  // -- verdicts --------------------------------------------------------------------------------

  async recordVerdict(record: VerdictRecord): Promise<VerdictRecord> {
    return this.#run("recordVerdict", () => {
      const candidate = parseStoreValue(VerdictRecordSchema, record, "verdict record");
      return this.#tx.putVerdict.immediate(candidate);
    });
  }

  async getVerdict(key: VerdictKey): Promise<VerdictRecord | undefined> {
    return this.#run("getVerdict", () => {
      const parsed = parseStoreValue(VerdictKeySchema, key, "verdict key");
      const row = this.#sql.getVerdict.get(...keyParams(parsed));
      return row === undefined ? undefined : verdictFromRow(row, parsed);
    });
  }

  // -- approval requests ----------------------------------------------------------------------

  async requestApproval(request: ApprovalSubmission): Promise<ApprovalRecord> {
    return this.#run("requestApproval", () => {
      const candidate = parseStoreValue(ApprovalRequestSchema, request, "approval request");
      return this.#tx.requestApproval.immediate(candidate);
    });
  }

  async getApproval(approvalId: string): Promise<ApprovalRecord | undefined> {
    return this.#run("getApproval", () => {
      const row = this.#sql.getApproval.get(parseDigest(approvalId, "approval id"));
      return row === undefined ? undefined : approvalFromRow(row);
    });
  }

  async decideApproval(input: DecideApprovalInput): Promise<ApprovalDecisionResult> {
    return this.#run("decideApproval", () => {
      const parsed = parseStoreValue(DecideApprovalInputSchema, input, "approval decision");
      return this.#tx.decideApproval.immediate(parsed);
    });
  }

  async applyApproval(input: ApplyApprovalInput): Promise<boolean> {
    return this.#run("applyApproval", () => {
      const parsed = parseStoreValue(ApplyApprovalInputSchema, input, "approval application");
      return this.#tx.applyApproval.immediate(parsed);
    });
  }

  async listApprovals(query: ApprovalQuery = {}): Promise<ApprovalRecord[]> {
    return this.#run("listApprovals", () => {
      const { status, turnKey, limit = 10_000 } = parseStoreValue(ApprovalQuerySchema, query, "approval query");
      const [byStatus, byTurn] = [status ?? null, turnKey ?? null];
      return this.#sql.listApprovals.all(byStatus, byStatus, byTurn, byTurn, limit).map(approvalFromRow);
    });
  }

  async expireApprovals(input: ExpireApprovalsInput): Promise<ExpireApprovalsResult> {
    return this.#run("expireApprovals", () => {
      const cutoff = epochMs(parseStoreValue(ExpireApprovalsInputSchema, input, "approval expiry").olderThan);
      // An unparseable cutoff compares false with every time, as in the in-memory store.
      if (cutoff === null) return { expired: 0 };
      return this.#tx.expireApprovals.immediate(cutoff);
    });
  }

  async orphanApprovals(input: OrphanApprovalsInput): Promise<OrphanApprovalsResult> {
    return this.#run("orphanApprovals", () => {
      const cutoff = epochMs(parseStoreValue(OrphanApprovalsInputSchema, input, "approval orphaning").decidedBefore);
      if (cutoff === null) return { orphaned: 0 };
      return this.#tx.orphanApprovals.immediate(cutoff);
    });
  }

  // -- audit trail ----------------------------------------------------------------------------

  async appendAudit(event: AuditEvent): Promise<void> {
    this.#run("appendAudit", () => {
      appendEvent(this.#sql, parseAuditEvent(event));
    });
  }


  async readAudit(query: AuditQuery = {}): Promise<StoredAuditEvent[]> {
    return this.#run("readAudit", () => {
      const { since, afterSeq = 0, turnKey, scopeId, approvalId, limit = 10_000 } = parseStoreValue(AuditQuerySchema, query, "audit query");
      const params = {
        afterSeq,
        since: since === undefined ? null : epochMs(since),
        turnKey: turnKey ?? null,
        scopeId: scopeId === undefined ? null : encodeText(scopeId),
        approvalId: approvalId ?? null,
        limit,
      };
      const statement =
        approvalId !== undefined
          ? this.#sql.readAuditByApproval
          : turnKey !== undefined
            ? this.#sql.readAuditByTurn
            : scopeId !== undefined
              ? this.#sql.readAuditByScope
              : this.#sql.readAudit;
      return statement.all(params).map((row) => {
        const what = `audit event ${String(row.seq)}`;
        const event = parseJson(row.event, what);
        if (typeof event !== "object" || event === null || Array.isArray(event)) throw corrupt(what, "not a JSON object");
        return parseRow(StoredAuditEventSchema, { ...event, seq: row.seq }, what);
      });
    });
  }

  async getAuditCursor(sink: string): Promise<number> {
    return this.#run("getAuditCursor", () => {
      const name = parseStoreValue(AuditSinkNameSchema, sink, "audit sink name");
      const seq: unknown = this.#sql.getAuditCursor.get(encodeText(name))?.seq ?? 0;
      return parseRow(AuditCursorSchema, seq, `audit cursor of ${JSON.stringify(name)}`);
    });
  }

  async advanceAuditCursor(input: AdvanceAuditCursorInput): Promise<boolean> {
    return this.#run("advanceAuditCursor", () => {
      const { sink, seq } = parseStoreValue(AdvanceAuditCursorInputSchema, input, "audit cursor advance");
      // A cursor is never below 0: advancing to 0 moves nothing (and inserts no row).
      if (seq === 0) return false;
      return this.#sql.advanceAuditCursor.run(encodeText(sink), seq).changes === 1;
    });
  }

  // -- reconciliation and retention -----------------------------------------------------------

  async listUnresolved(): Promise<UnresolvedMutation[]> {
    return this.#run("listUnresolved", () => {
      return this.#sql.listUnresolved.all().map((row) => {
        const claim = claimFromRow(row);
        return parseRow(
          UnresolvedMutationSchema,
          { ...claim.identity, state: claim.state, claimedAt: claim.claimedAt },
          `claim for turn ${claim.identity.turnKey}`,
        );
      });
    });
  }

  async reconcileMutation(reconciliation: Reconciliation): Promise<ReconcileResult> {
    return this.#run("reconcileMutation", () => {
      const parsed = parseStoreValue(ReconciliationSchema, reconciliation, "reconciliation");
      return this.#tx.reconcile.immediate(parsed);
    });
  }

  async prune(options: PruneOptions): Promise<PruneResult> {
    return this.#run("prune", () => {
      const cutoff = epochMs(parseStoreValue(PruneOptionsSchema, options, "prune options").olderThan);
      // An unparseable cutoff compares false with every time, as in the in-memory store: nothing goes.
      if (cutoff === null) return { turns: 0, effects: 0 };
      return this.#tx.prune.immediate(cutoff);
    });
  }

  async getMutation(turnKey: string): Promise<MutationStatus | undefined> {
    return this.#run("getMutation", () => {
      const row = this.#sql.getClaim.get(parseDigest(turnKey, "turn key"));
      if (row === undefined) return undefined;
      const claim = claimFromRow(row);
      const { toolName, toolCallId } = claim.identity;
      return claim.state === "complete" && claim.result !== undefined
        ? { state: claim.state, toolName, toolCallId, result: claim.result }
        : { state: claim.state, toolName, toolCallId };
    });
  }

  // -- turn records ---------------------------------------------------------------------------

  async beginTurn(input: BeginTurnInput): Promise<BeginTurnResult> {
    return this.#run("beginTurn", () => this.#turns.begin.immediate(parseBeginTurn(input)));
  }

  async finishTurn(input: FinishTurnInput): Promise<boolean> {
    return this.#run("finishTurn", () => this.#turns.finish.immediate(parseFinishTurn(input)));
  }

  async resumeTurn(input: ResumeTurnInput): Promise<ResumeTurnResult> {
    return this.#run("resumeTurn", () => this.#turns.resume.immediate(parseResumeTurn(input)));
  }

  async renewTurn(input: RenewTurnInput): Promise<boolean> {
    return this.#run("renewTurn", () => this.#turns.renew.immediate(parseRenewTurn(input)));
  }

  async listTurns(query: ListTurnsQuery): Promise<TurnRecord[]> {
    return this.#run("listTurns", () => listTurns(this.#db, this.#sql, parseListTurns(query), this.#timestamp()));
  }

  async getTurn(turnKey: string): Promise<TurnRecord | undefined> {
    return this.#run("getTurn", () => readTurn(this.#sql, parseDigest(turnKey, "turn key")));
  }

  async takePrunableTurn(input: TakePrunableTurnInput): Promise<boolean> {
    return this.#run("takePrunableTurn", () => this.#turns.takePrunable.immediate(parseTakePrunableTurn(input)));
  }

  // -- side effects ---------------------------------------------------------------------------

  async claimEffect(identity: EffectIdentity, options?: EffectClaimOptions): Promise<EffectClaimResult> {
    return this.#run("claimEffect", () => {
      const parsed = parseStoreValue(EffectIdentitySchema, identity, "effect identity");
      const { maxPerTurn } = parseStoreValue(EffectClaimOptionsSchema, options ?? {}, "effect claim options");
      return this.#steps.claimEffect.immediate(parsed, maxPerTurn);
    });
  }

  async settleEffect(settlement: EffectSettlement): Promise<boolean> {
    return this.#run("settleEffect", () => {
      return this.#steps.settleEffect.immediate(parseStoreValue(EffectSettlementSchema, settlement, "effect settlement"));
    });
  }

  async releaseEffect(release: EffectRelease): Promise<boolean> {
    return this.#run("releaseEffect", () => {
      return this.#steps.releaseEffect.immediate(parseStoreValue(EffectReleaseSchema, release, "effect release"));
    });
  }

  async getEffect(effectKey: string): Promise<EffectStatus | undefined> {
    return this.#run("getEffect", () => {
      const row = this.#sql.getEffect.get(parseDigest(effectKey, "effect key"));
      if (row === undefined) return undefined;
      const effect = effectFromRow(row);
      const { toolName, toolCallId } = effect.identity;
      return effect.state === "complete" && effect.result !== undefined
        ? { state: effect.state, toolName, toolCallId, result: effect.result }
        : { state: effect.state, toolName, toolCallId };
    });
  }

  async listUnresolvedEffects(): Promise<UnresolvedEffect[]> {
    return this.#run("listUnresolvedEffects", () => {
      return this.#sql.listUnresolvedEffects.all().map((row) => {
        const effect = effectFromRow(row);
        return parseRow(
          UnresolvedEffectSchema,
          { ...effect.identity, state: effect.state, claimedAt: effect.claimedAt },
          `side effect ${effect.identity.effectKey}`,
        );
      });
    });
  }

  async reconcileEffect(reconciliation: EffectReconciliation): Promise<ReconcileResult> {
    return this.#run("reconcileEffect", () => {
      const parsed = parseStoreValue(EffectReconciliationSchema, reconciliation, "effect reconciliation");
      return this.#tx.reconcileEffect.immediate(parsed);
    });
  }
}

