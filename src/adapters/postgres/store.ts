/**
 * `PostgresGuardrailStore`: a `GuardrailStore` in PostgreSQL (the `pg` driver, an optional peer
 * dependency imported only by this entry point), safe for any number of workers on any number of
 * hosts.
 *
 * Semantics are exactly `InMemoryGuardrailStore`'s; docs/storage-adapters.md ("PostgreSQL") states
 * the schema and the locking, and why. A turn's atomic steps (read, claim, settle, release) are in
 * steps.ts; the audit trail's sequence numbers are taken under a transaction-scoped advisory lock
 * held until commit (connection.ts), so `seq` order is commit order and paging with `afterSeq`
 * never skips an event. Every row read back is parsed with the exported zod schemas; a corrupt row
 * is a `StoreContractError` (fail closed).
 */
import pg from "pg";
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
  ClaimedIdentitySchema,
  PruneOptionsSchema,
  ReconciliationSchema,
  StoredAuditEventSchema,
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
  appliedApprovalRecord,
  approvalEvent,
  approvalDecisionOutcome,
  expiredApprovalRecord,
  orphanedApprovalRecord,
  reconciledEvent,
} from "../../store/events.js";
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
import { appendEvent, awaitFlushed, lockKey, query, transaction, type Queryable, type Session } from "./connection.js";
import {
  approvalFromRow,
  CLAIM_STATES,
  decodeJson,
  encodeText,
  epochMs,
  identityFromRow,
  parseRow,
  receiptFromRow,
  verdictFromRow,
  verdictKeyValues,
} from "./encoding.js";
import { authenticationProblem, errorCode, errorText, FAILURE_STATE, PostgresStoreError, redact, sanitizedCause } from "./errors.js";
import { migrate } from "./migrations.js";
import {
  checkConnectionString,
  connectionSchema,
  describeTarget,
  OptionsSchema,
  type PostgresConnection,
  type PostgresGuardrailStoreOptions,
} from "./options.js";
import { DEFAULT_SCHEMA } from "./schema-name.js";
import { statements, type Statement, type Statements } from "./statements.js";
import { claim, recordRead, release, settle } from "./steps.js";
import { reconcileAnswer } from "../../store/decisions.js";
import * as effects from "./effects.js";
import { parseBeginTurn, parseFinishTurn, parseListTurns, parseRenewTurn, parseResumeTurn, parseTakePrunableTurn } from "../../store/turns.js";
import * as turns from "./turns.js";

/**
 * A `GuardrailStore` in PostgreSQL. Create it with `PostgresGuardrailStore.open(...)`, which
 * migrates its schema; call `close()` when done (it ends the pool only if it created it).
 */
export class PostgresGuardrailStore implements GuardrailStore {
  readonly #pool: pg.Pool;
  readonly #ownsPool: boolean;
  readonly #now: () => Date;
  readonly #schema: string;
  readonly #where: string;
  readonly #password: string | undefined;
  readonly #auditLock: string;
  readonly #pruneLock: string;
  readonly #expiryLock: string;
  readonly #sql: Statements;
  /** What the atomic steps (steps.ts) use. */
  readonly #session: Session;
  #closed = false;

  private constructor(init: {
    pool: pg.Pool;
    ownsPool: boolean;
    now: () => Date;
    schema: string;
    where: string;
    password: string | undefined;
  }) {
    // A subclass may answer otherwise: only this class's own instances are trusted.
    if (new.target === PostgresGuardrailStore) brandTrustedStore(this, PostgresGuardrailStore.prototype);
    this.#pool = init.pool;
    this.#ownsPool = init.ownsPool;
    this.#now = init.now;
    this.#schema = init.schema;
    this.#where = init.where;
    this.#password = init.password;
    this.#auditLock = lockKey(`arkah-agent-guardrails:audit:${init.schema}`);
    this.#pruneLock = lockKey(`arkah-agent-guardrails:prune:${init.schema}`);
    this.#expiryLock = lockKey(`arkah-agent-guardrails:expire-approvals:${init.schema}`);
    this.#sql = statements(init.schema);
    this.#session = {
      pool: init.pool,
      sql: this.#sql,
      auditLock: this.#auditLock,
      schema: init.schema,
      timestamp: () => this.#timestamp(),
    };
  }

  /**
   * Connects, checks the server answers, and migrates the schema (under a transaction-scoped
   * advisory lock, so any number of workers may open concurrently); with `migrate: false`, only
   * checks that it is at this package's version, running no DDL. Rejects with an `Error` naming
   * the host and port (never the password) if the server cannot be reached, and with a
   * `ConfigurationError` for invalid arguments or a database migrated by a newer version.
   */
  static async open(
    connection: PostgresConnection,
    options: PostgresGuardrailStoreOptions = {},
  ): Promise<PostgresGuardrailStore> {
    const parsedConnection = connectionSchema(connection).safeParse(connection);
    if (!parsedConnection.success) {
      throw new ConfigurationError(
        `invalid PostgresGuardrailStore connection: pass { connectionString: "postgres://..." } or { pool: new pg.Pool(...) }: ${redact(z.prettifyError(parsedConnection.error), undefined)}`,
      );
    }
    const parsedOptions = OptionsSchema.safeParse(options);
    if (!parsedOptions.success) {
      throw new ConfigurationError(`invalid PostgresGuardrailStore options: ${z.prettifyError(parsedOptions.error)}`);
    }
    const schema = parsedOptions.data.schema ?? DEFAULT_SCHEMA;
    const now = parsedOptions.data.now ?? (() => new Date());

    const target = parsedConnection.data;
    let pool: pg.Pool;
    let ownsPool: boolean;
    let config: pg.ClientConfig;
    if ("connectionString" in target) {
      config = { connectionString: checkConnectionString(target.connectionString) };
      pool = new pg.Pool({ ...config, connectionTimeoutMillis: 10_000 });
      // An idle client whose server connection dies emits 'error' on the pool; the pool drops the
      // client, and the next operation gets a fresh one. Without a listener it would crash.
      pool.on("error", () => undefined);
      ownsPool = true;
    } else {
      pool = target.pool;
      config = pool.options;
      ownsPool = false;
    }
    const { where, password } = describeTarget(config);

    const store = new PostgresGuardrailStore({ pool, ownsPool, now, schema, where, password });
    try {
      await migrate(pool, { schema, where, password, timestamp: () => now().toISOString(), apply: parsedOptions.data.migrate ?? true });
    } catch (error) {
      if (ownsPool) await pool.end().catch(() => undefined);
      throw error;
    }
    return store;
  }

  /** Ends the pool if the store created it (a pool you passed stays yours). Idempotent. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#ownsPool) await this.#pool.end();
  }

  /** The schema this store uses. */
  get schema(): string {
    return this.#schema;
  }

  // -- plumbing -------------------------------------------------------------------------------

  #timestamp(): string {
    return this.#now().toISOString();
  }

  #query(statement: Statement, values: readonly unknown[], client: Queryable = this.#pool) {
    return query(client, statement, values);
  }

  /** Runs an operation; any failure other than a contract violation becomes a `PostgresStoreError`. */
  async #run<T>(operation: string, fn: () => Promise<T>): Promise<T> {
    if (this.#closed) {
      throw new PostgresStoreError(operation, `PostgresGuardrailStore.${operation}: the store is closed`, {
        cause: undefined,
      });
    }
    try {
      return await fn();
    } catch (error) {
      throw this.#wrap(operation, error);
    }
  }

  #wrap(operation: string, error: unknown): unknown {
    if (StoreContractError.isInstance(error) || ConfigurationError.isInstance(error)) return error;
    if (PostgresStoreError.isInstance(error)) return error;
    const code = errorCode(error);
    const state = FAILURE_STATE[operation];
    const problem = authenticationProblem(error);
    const message =
      `PostgresGuardrailStore.${operation} failed against ${this.#where}: ` +
      (problem ?? `${redact(errorText(error), this.#password)}${code === undefined ? "" : ` (${code})`}`) +
      (state === undefined ? "" : `; ${state}`);
    return new PostgresStoreError(operation, message, { cause: sanitizedCause(error, this.#password), code });
  }

  #transaction<T>(fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    return transaction(this.#pool, fn);
  }

  // -- admission ------------------------------------------------------------------------------

  async getReceipt(turnKey: string): Promise<AdmissionReceipt | undefined> {
    const key = parseDigest(turnKey, "turn key");
    return this.#run("getReceipt", async () => {
      const { rows } = await this.#query(this.#sql.getReceipt, [key]);
      return rows[0] === undefined ? undefined : receiptFromRow(rows[0]);
    });
  }

  async putReceiptIfAbsent(receipt: AdmissionReceipt): Promise<AdmissionReceipt> {
    const candidate = parseStoreValue(AdmissionReceiptSchema, receipt, "admission receipt");
    return this.#run("putReceiptIfAbsent", async () => {
      const values = [
        candidate.turnKey,
        encodeText(candidate.scopeId),
        encodeText(candidate.turnId),
        encodeText(candidate.policyVersion),
        candidate.moderationDigest,
        candidate.allowed,
        candidate.decidedAt,
        candidate.principal === undefined ? null : encodeText(candidate.principal),
      ];
      // An allowed receipt does not wait for its flush: lost in a crash, the retried turn is admitted
      // again, and no write can rely on it before the claim's synchronous commit has flushed it. A
      // refusal waits: it is the answer the caller acts on, and must stand on a retry.
      const put = candidate.allowed ? this.#sql.putReceiptUnflushed : this.#sql.putReceipt;
      for (let attempt = 0; attempt < 16; attempt++) {
        const inserted = await this.#query(put, values);
        if (inserted.rows[0] !== undefined) return receiptFromRow(inserted.rows[0]);
        const { rows } = await this.#query(this.#sql.getReceipt, [candidate.turnKey]);
        if (rows[0] !== undefined) return receiptFromRow(rows[0]);
        // Receipts are never deleted, so this is unreachable short of a hand edit; try again.
      }
      throw new Error("the receipt was neither inserted nor found after 16 attempts");
    });
  }

  // -- read evidence --------------------------------------------------------------------------

  async recordSuccessfulRead(evidence: ReadEvidence, options?: RecordReadOptions): Promise<void> {
    const parsed = parseEvidence(evidence);
    const audit = parseReadOptions(options);
    await this.#run("recordSuccessfulRead", () => recordRead(this.#session, parsed, audit));
  }

  async hasSuccessfulRead(evidence: ReadEvidence): Promise<boolean> {
    const { turnKey, evidenceDigest } = parseEvidence(evidence);
    return this.#run("hasSuccessfulRead", async () => {
      const { rowCount } = await this.#query(this.#sql.hasRead, [turnKey, evidenceDigest]);
      return rowCount === 1;
    });
  }

  // -- mutation claims ------------------------------------------------------------------------

  async claimMutation(identity: MutationIdentity, options?: ClaimOptions): Promise<ClaimResult> {
    const parsed = parseIdentity(identity);
    const { requireResolvedScope, readEvidence } = parseClaimOptions(options);
    return this.#run("claimMutation", () => claim(this.#session, parsed, requireResolvedScope, readEvidence));
  }

  async settleMutation(settlement: MutationSettlement): Promise<boolean> {
    const parsed = parseSettlement(settlement);
    return this.#run("settleMutation", () => settle(this.#session, parsed));
  }

  async releaseMutation(input: MutationRelease): Promise<boolean> {
    const parsed = parseRelease(input);
    return this.#run("releaseMutation", () => release(this.#session, parsed));
  }

  // -- verdicts --------------------------------------------------------------------------------

  async recordVerdict(record: VerdictRecord): Promise<VerdictRecord> {
    const candidate = parseStoreValue(VerdictRecordSchema, record, "verdict record");
    return this.#run("recordVerdict", async () => {
      const key = verdictKeyValues(candidate);
      for (let attempt = 0; attempt < 16; attempt++) {
        const inserted = await this.#query(this.#sql.putVerdict, [...key, JSON.stringify(candidate)]);
        if (inserted.rows[0] !== undefined) return verdictFromRow(inserted.rows[0], candidate);
        const { rows } = await this.#query(this.#sql.getVerdict, key);
        if (rows[0] !== undefined) return verdictFromRow(rows[0], candidate);
        // Only prune deletes verdicts; after it, the next insert wins.
      }
      throw new Error("the verdict record was neither inserted nor found after 16 attempts");
    });
  }

  async getVerdict(key: VerdictKey): Promise<VerdictRecord | undefined> {
    const parsed = parseStoreValue(VerdictKeySchema, key, "verdict key");
    return this.#run("getVerdict", async () => {
      const { rows } = await this.#query(this.#sql.getVerdict, verdictKeyValues(parsed));
      return rows[0] === undefined ? undefined : verdictFromRow(rows[0], parsed);
    });
  }

  // -- approval requests ----------------------------------------------------------------------

  async requestApproval(request: ApprovalSubmission): Promise<ApprovalRecord> {
    const candidate = parseStoreValue(ApprovalRequestSchema, request, "approval request");
    const record: ApprovalRecord = { ...candidate, status: "pending" };
    return this.#run("requestApproval", async () => {
      for (let attempt = 0; attempt < 16; attempt++) {
        const stored = await this.#transaction(async (client): Promise<ApprovalRecord | undefined> => {
          // ON CONFLICT waits for a concurrent insert of the same id to commit or roll back.
          const inserted = await this.#query(
            this.#sql.insertApproval,
            [record.approvalId, record.turnKey, epochMs(record.requestedAt), JSON.stringify(record)],
            client,
          );
          if (inserted.rowCount === 1) {
            await this.#append(approvalEvent(record, "requested", this.#timestamp()), client);
            return structuredClone(record);
          }
          const { rows } = await this.#query(this.#sql.getApproval, [record.approvalId], client);
          return rows[0] === undefined ? undefined : approvalFromRow(rows[0]);
        });
        // Undefined: pruned between the insert and the read. Try again.
        if (stored !== undefined) return stored;
      }
      throw new Error("the approval request was neither inserted nor found after 16 attempts");
    });
  }

  async getApproval(approvalId: string): Promise<ApprovalRecord | undefined> {
    const id = parseDigest(approvalId, "approval id");
    return this.#run("getApproval", async () => {
      const { rows } = await this.#query(this.#sql.getApproval, [id]);
      return rows[0] === undefined ? undefined : approvalFromRow(rows[0]);
    });
  }

  async decideApproval(input: DecideApprovalInput): Promise<ApprovalDecisionResult> {
    const parsed = parseStoreValue(DecideApprovalInputSchema, input, "approval decision");
    return this.#run("decideApproval", () =>
      // The row lock serializes decisions: the first to commit wins, the others read its result.
      this.#transaction(async (client) => {
        const { rows } = await this.#query(this.#sql.lockApproval, [parsed.approvalId], client);
        const current = rows[0] === undefined ? undefined : approvalFromRow(rows[0]);
        const { result, changed, event } = approvalDecisionOutcome(current, parsed, this.#timestamp());
        if (changed !== undefined) await this.#storeApproval(changed, client);
        if (event !== undefined) await this.#append(event, client);
        return structuredClone(result);
      }),
    );
  }

  async applyApproval(input: ApplyApprovalInput): Promise<boolean> {
    const parsed = parseStoreValue(ApplyApprovalInputSchema, input, "approval application");
    return this.#run("applyApproval", () =>
      this.#transaction(async (client) => {
        const { rows } = await this.#query(this.#sql.lockApproval, [parsed.approvalId], client);
        const applied = appliedApprovalRecord(rows[0] === undefined ? undefined : approvalFromRow(rows[0]), parsed.appliedAt);
        if (applied === undefined) return false;
        await this.#storeApproval(applied, client);
        await this.#append(approvalEvent(applied, "applied", this.#timestamp()), client);
        return true;
      }),
    );
  }

  async listApprovals(query: ApprovalQuery = {}): Promise<ApprovalRecord[]> {
    const { status, turnKey, limit = 10_000 } = parseStoreValue(ApprovalQuerySchema, query, "approval query");
    return this.#run("listApprovals", async () => {
      const { rows } = await this.#query(this.#sql.listApprovals, [status ?? null, turnKey ?? null, limit]);
      return rows.map(approvalFromRow);
    });
  }

  async expireApprovals(input: ExpireApprovalsInput): Promise<ExpireApprovalsResult> {
    const { olderThan } = parseStoreValue(ExpireApprovalsInputSchema, input, "approval expiry");
    return this.#run("expireApprovals", () =>
      this.#transaction(async (client) => {
        // One expiry at a time per schema, so two never wait on each other's row locks.
        await client.query("SELECT pg_advisory_xact_lock($1::bigint)", [this.#expiryLock]);
        // FOR UPDATE re-checks each row once locked: one decided meanwhile is no longer pending.
        const { rows } = await this.#query(this.#sql.lockPendingBefore, [epochMs(olderThan)], client);
        const at = this.#timestamp();
        for (const row of rows) {
          const retired = expiredApprovalRecord(approvalFromRow(row), at);
          await this.#storeApproval(retired, client);
          await this.#append(approvalEvent(retired, "expired", at), client);
        }
        return { expired: rows.length };
      }),
    );
  }

  async orphanApprovals(input: OrphanApprovalsInput): Promise<OrphanApprovalsResult> {
    const { decidedBefore } = parseStoreValue(OrphanApprovalsInputSchema, input, "approval orphaning");
    const cutoff = epochMs(decidedBefore);
    return this.#run("orphanApprovals", () =>
      this.#transaction(async (client) => {
        // One sweep (expiry or orphaning) at a time per schema, so two never wait on each other's row locks.
        await client.query("SELECT pg_advisory_xact_lock($1::bigint)", [this.#expiryLock]);
        // FOR UPDATE re-checks each row once locked: one applied meanwhile is no longer approved or edited.
        // Decided requests wait only for their resume: the rows are few, their decision times compared here.
        const { rows } = await this.#query(this.#sql.lockDecided, [], client);
        const at = this.#timestamp();
        let orphaned = 0;
        for (const row of rows) {
          const retired = cutoff === null ? undefined : orphanedApprovalRecord(approvalFromRow(row), cutoff, at);
          if (retired === undefined) continue;
          await this.#storeApproval(retired, client);
          await this.#append(approvalEvent(retired, "orphaned", at), client);
          orphaned++;
        }
        return { orphaned };
      }),
    );
  }

  async #storeApproval(record: ApprovalRecord, client: Queryable): Promise<void> {
    await this.#query(this.#sql.updateApproval, [record.approvalId, record.status, JSON.stringify(record)], client);
  }

  // -- audit trail ----------------------------------------------------------------------------

  async appendAudit(event: AuditEvent): Promise<void> {
    const parsed = parseAuditEvent(event);
    await this.#run("appendAudit", () => this.#append(parsed, this.#pool));
  }

  #append(event: AuditEvent, client: Queryable): Promise<void> {
    return appendEvent(this.#session, event, client);
  }

  async readAudit(query: AuditQuery = {}): Promise<StoredAuditEvent[]> {
    const { since, afterSeq = 0, turnKey, scopeId, approvalId, limit = 10_000 } = parseStoreValue(AuditQuerySchema, query, "audit query");
    return this.#run("readAudit", async () => {
      const from = since === undefined ? null : epochMs(since);
      const scope = scopeId === undefined ? null : encodeText(scopeId);
      // One statement per index it walks: the trail in seq order, or one request's, one turn's or one scope's events.
      const { rows } =
        approvalId !== undefined
          ? await this.#query(this.#sql.readAuditByApproval, [afterSeq, from, limit, approvalId, turnKey ?? null, scope])
          : turnKey !== undefined
          ? await this.#query(this.#sql.readAuditByTurn, [afterSeq, from, limit, turnKey, scope])
          : scope !== null
            ? await this.#query(this.#sql.readAuditByScope, [afterSeq, from, limit, scope])
            : await this.#query(this.#sql.readAudit, [afterSeq, from, limit]);
      // A read's event may have been committed without waiting for its flush: answered only once on
      // disk. The statement said whether everything it saw is flushed (usually): no second round trip then.
      if (rows.length > 0) await awaitFlushed(this.#session, rows[0]?.flushed);
      return rows.map((row) => {
        const event = decodeJson(row.event, "audit event");
        const seq = Number(row.seq);
        if (typeof event !== "object" || event === null || Array.isArray(event)) {
          throw new StoreContractError("corrupt audit event: not an object");
        }
        return parseStoreValue(StoredAuditEventSchema, { ...event, seq }, "stored audit event");
      });
    });
  }

  async getAuditCursor(sink: string): Promise<number> {
    const name = parseStoreValue(AuditSinkNameSchema, sink, "audit sink name");
    return this.#run("getAuditCursor", async () => {
      const { rows } = await this.#query(this.#sql.getAuditCursor, [encodeText(name)]);
      const seq = rows[0] === undefined ? 0 : Number(rows[0].seq);
      return parseStoreValue(AuditCursorSchema, seq, "stored audit cursor");
    });
  }

  async advanceAuditCursor(input: AdvanceAuditCursorInput): Promise<boolean> {
    const { sink, seq } = parseStoreValue(AdvanceAuditCursorInputSchema, input, "audit cursor advance");
    // A cursor is never below 0: advancing to 0 moves nothing (and inserts no row).
    if (seq === 0) return false;
    return this.#run("advanceAuditCursor", async () => {
      // One statement: the upsert's row lock orders concurrent advances, and each applies only
      // over a lower cursor.
      const { rowCount } = await this.#query(this.#sql.advanceAuditCursor, [encodeText(sink), seq]);
      return rowCount === 1;
    });
  }

  // -- reconciliation and retention -----------------------------------------------------------

  async listUnresolved(): Promise<UnresolvedMutation[]> {
    return this.#run("listUnresolved", async () => {
      const { rows } = await this.#query(this.#sql.listUnresolved, []);
      return rows.map((row) =>
        parseStoreValue(
          UnresolvedMutationSchema,
          {
            ...identityFromRow(row),
            state: row.state,
            claimedAt: row.claimed_at,
          },
          "unresolved mutation",
        ),
      );
    });
  }

  async reconcileMutation(reconciliation: Reconciliation): Promise<ReconcileResult> {
    const parsed = parseStoreValue(ReconciliationSchema, reconciliation, "reconciliation");
    return this.#run("reconcileMutation", async () => {
      for (let attempt = 0; attempt < 16; attempt++) {
        const result = await this.#transaction(async (client): Promise<ReconcileResult | undefined> => {
          const first = await this.#query(this.#sql.readScope, [parsed.turnKey], client);
          const scopeId = first.rows[0]?.scope_id;
          if (scopeId === undefined) return { reconciled: false, reason: "not_found" };
          await this.#query(this.#sql.lockScope, [scopeId], client);
          const locked = await this.#query(this.#sql.lockClaim, [parsed.turnKey], client);
          const row = locked.rows[0];
          if (row === undefined) return { reconciled: false, reason: "not_found" };
          if (row.scope_id !== scopeId) return undefined; // deleted and claimed again elsewhere: retry
          const state = parseRow(z.enum(CLAIM_STATES), row.state, "claim state");
          const identity = parseStoreValue(ClaimedIdentitySchema, identityFromRow(row), "claim row");
          const answer = reconcileAnswer({ state, identity }, parsed.mutationKey);
          if (!answer.reconciled) return answer;
          const at = this.#timestamp();
          if (parsed.resolution === "completed") {
            await this.#query(
              this.#sql.reconcileComplete,
              [parsed.turnKey, encodeText(parsed.result.content), parsed.result.status, at, Date.parse(at)],
              client,
            );
          } else {
            await this.#query(this.#sql.deleteClaim, [parsed.turnKey], client);
          }
          if (state === "unknown") await this.#query(this.#sql.releaseScope, [scopeId], client);
          await this.#append(reconciledEvent(identity, parsed, at), client);
          return answer;
        });
        if (result !== undefined) return result;
      }
      throw new Error("the reconciliation did not settle on an answer after 16 attempts under concurrent changes");
    });
  }

  async prune(options: PruneOptions): Promise<PruneResult> {
    const { olderThan } = parseStoreValue(PruneOptionsSchema, options, "prune options");
    return this.#run("prune", () =>
      // One prune at a time per schema: two would lock the same claim rows, maybe in different
      // orders (a deadlock PostgreSQL would break by failing one of them).
      this.#transaction(async (client) => {
        await client.query("SELECT pg_advisory_xact_lock($1::bigint)", [this.#pruneLock]);
        const { rows } = await this.#query(this.#sql.prune, [epochMs(olderThan)], client);
        await this.#query(this.#sql.pruneTurns, [epochMs(olderThan)], client);
        const prunedEffects = await effects.pruneEffects(this.#session, client, epochMs(olderThan));
        return { turns: Number(rows[0]?.turns ?? 0), effects: prunedEffects };
      }),
    );
  }

  async getMutation(turnKey: string): Promise<MutationStatus | undefined> {
    const key = parseDigest(turnKey, "turn key");
    return this.#run("getMutation", () => turns.getMutation(this.#session, key));
  }

  // -- turn records ---------------------------------------------------------------------------

  async beginTurn(input: BeginTurnInput): Promise<BeginTurnResult> {
    const parsed = parseBeginTurn(input);
    return this.#run("beginTurn", () => turns.beginTurn(this.#session, parsed));
  }

  async finishTurn(input: FinishTurnInput): Promise<boolean> {
    const parsed = parseFinishTurn(input);
    return this.#run("finishTurn", () => turns.finishTurn(this.#session, parsed));
  }

  async resumeTurn(input: ResumeTurnInput): Promise<ResumeTurnResult> {
    const parsed = parseResumeTurn(input);
    return this.#run("resumeTurn", () => turns.resumeTurn(this.#session, parsed));
  }

  async renewTurn(input: RenewTurnInput): Promise<boolean> {
    const parsed = parseRenewTurn(input);
    return this.#run("renewTurn", () => turns.renewTurn(this.#session, parsed));
  }

  async listTurns(query: ListTurnsQuery): Promise<TurnRecord[]> {
    const parsed = parseListTurns(query);
    return this.#run("listTurns", () => turns.listTurns(this.#session, parsed));
  }

  async getTurn(turnKey: string): Promise<TurnRecord | undefined> {
    const key = parseDigest(turnKey, "turn key");
    return this.#run("getTurn", () => turns.getTurn(this.#session, key));
  }

  async takePrunableTurn(input: TakePrunableTurnInput): Promise<boolean> {
    const parsed = parseTakePrunableTurn(input);
    return this.#run("takePrunableTurn", () => turns.takePrunableTurn(this.#session, parsed));
  }

  // -- side effects ---------------------------------------------------------------------------

  async claimEffect(identity: EffectIdentity, options?: EffectClaimOptions): Promise<EffectClaimResult> {
    const parsed = parseStoreValue(EffectIdentitySchema, identity, "effect identity");
    const { maxPerTurn } = parseStoreValue(EffectClaimOptionsSchema, options ?? {}, "effect claim options");
    return this.#run("claimEffect", () => effects.claimEffect(this.#session, parsed, maxPerTurn));
  }

  async settleEffect(settlement: EffectSettlement): Promise<boolean> {
    const parsed = parseStoreValue(EffectSettlementSchema, settlement, "effect settlement");
    return this.#run("settleEffect", () => effects.settleEffect(this.#session, parsed));
  }

  async releaseEffect(release: EffectRelease): Promise<boolean> {
    const parsed = parseStoreValue(EffectReleaseSchema, release, "effect release");
    return this.#run("releaseEffect", () => effects.releaseEffect(this.#session, parsed));
  }

  async getEffect(effectKey: string): Promise<EffectStatus | undefined> {
    const key = parseDigest(effectKey, "effect key");
    return this.#run("getEffect", () => effects.getEffect(this.#session, key));
  }

  async listUnresolvedEffects(): Promise<UnresolvedEffect[]> {
    return this.#run("listUnresolvedEffects", () => effects.listUnresolvedEffects(this.#session));
  }

  async reconcileEffect(reconciliation: EffectReconciliation): Promise<ReconcileResult> {
    const parsed = parseStoreValue(EffectReconciliationSchema, reconciliation, "effect reconciliation");
    return this.#run("reconcileEffect", () => effects.reconcileEffect(this.#session, parsed));
  }
}
