/**
 * The turn service: the one way to run turns in a server. It owns the lifecycle around the agent
 * that every service otherwise writes itself: idempotency by turn key (a retry answers the stored
 * outcome and runs nothing), admission, one thread per turn (derived from the turn key, so no
 * mapping table), the pending approvals of a paused run, who may decide them, resuming with the
 * turn's `context`, and taking over a turn whose worker died (its lease expired) from the
 * checkpoint. Framework-neutral: an HTTP route maps its answers to status codes (docs/turns.md).
 */
import { BaseMessage, HumanMessage } from "@langchain/core/messages";
import { Command, MemorySaver } from "@langchain/langgraph";
import { z } from "zod";
import { admitTurn, resolveTurn, type Moderate } from "../admission.js";
import {
  ApprovalDecisionSchema,
  ApprovalRecordSchema,
  BeginTurnResultSchema,
  DigestSchema,
  JsonValueSchema,
  MutationStatusSchema,
  PruneOptionsSchema,
  PruneResultSchema,
  ResumeTurnResultSchema,
  StoredAuditEventSchema,
  TurnRecordSchema,
  type ApprovalDecision,
  type ApprovalRecord,
  type PruneResult,
  type StoredAuditEvent,
  type TurnInput,
  type TurnRecord,
  type TurnStart,
  type TurnState,
} from "../contracts/index.js";
import { digest } from "../digest.js";
import { AdmissionError, ConfigurationError, SettlementError, StoreContractError } from "../errors.js";
import { hitlResponse } from "../guardrails/langchain-format.js";
import { resolveLogger, sanitizeError, type GuardrailLogger, type LoggedError } from "../logger.js";
import { documentGuardrailsLabel } from "../middleware.js";
import { LoggerSchema, StoreShape } from "../options.js";
import { hasStorePart, withStoreParts, type AnyGuardrailStore } from "../store/capabilities.js";
import { prunableTurn } from "../store/turns.js";
import { parseStoreValue } from "../store/validate.js";
import { TelemetrySchema, type GuardrailTelemetry, type TelemetryApprovalWait, type TelemetryTurnEnd } from "../telemetry.js";
import { turnContext, userSegment } from "../turn-gate.js";
import { TurnServiceError } from "./errors.js";
import { keepLease } from "./lease.js";
import { observeTurn, type TurnNotes } from "./observe.js";
import {
  approvalInterrupts,
  completedOutcome,
  hasErrorResult,
  pauseWaitsOn,
  turnMutation,
  TurnOutcomeSchema,
  type DecideAnswer,
  type PendingInterrupt,
  type TurnAnswer,
  type TurnMutation,
  type TurnOutcome,
  type TurnView,
} from "./outcome.js";

/** The thread config a run and `getState` are given. */
export interface ThreadConfig {
  /** LangGraph's configurable: the turn's thread. */
  readonly configurable: { readonly thread_id: string };
}

/** What the service needs of a compiled agent (`createAgent(...)` with a checkpointer and the guardrails reading the turn from `context`). */
export interface TurnAgent {
  /** Runs, or resumes (`null`: from the checkpoint; a `Command`: with resume values), the turn's thread. */
  invoke(
    input: { messages: BaseMessage[] } | Command | null,
    config: ThreadConfig & { readonly context: ReturnType<typeof turnContext>; readonly signal?: AbortSignal },
  ): Promise<{ messages: BaseMessage[] }>;
  /** The compiled graph: the service reads a thread's checkpoint (pending interrupts, next steps). */
  readonly graph: {
    /** The thread's latest checkpoint. */
    getState(config: ThreadConfig): Promise<{
      readonly values: unknown;
      readonly next: readonly string[];
      readonly tasks: readonly { readonly interrupts: readonly { readonly id?: string; readonly value?: unknown }[] }[];
    }>;
  };
}

/** Whether `principal` may decide `approval` of `turn`. Default: only the turn's own principal. */
export type MayDecide = (principal: string, turn: TurnInput, approval: ApprovalRecord) => boolean | Promise<boolean>;

/** `createTurnService`'s options. */
export interface TurnServiceOptions {
  /** The compiled agent: a checkpointer, and `createDocumentGuardrails` without a fixed `input`. */
  readonly agent: TurnAgent;
  /**
   * The guardrail store the agent's guardrails use: it holds the turn records too, so it needs
   * the `turns` part, and `approvals` (a paused turn's requests are read and decided through it).
   */
  readonly store: AnyGuardrailStore;
  /** Your moderation provider, called once per turn (`admitTurn`). */
  readonly moderate: Moderate;
  /**
   * The segment whose text is the user's message when `submit` is given no messages. Default: the
   * `userMessageLabel` of the agent's `createDocumentGuardrails` (read from `createAgent`'s
   * middleware), else `"user"`. One that differs from the guardrails' is a `ConfigurationError`:
   * every turn would fail admission.
   */
  readonly userMessageLabel?: string;
  /**
   * How long a running turn's lease lasts, in ms (default 30 000). The worker running the turn
   * renews it every third of that while the run lives, so a live run is never taken over however
   * long it takes; a worker that died (no renewals) loses the turn about one lease later.
   */
  readonly leaseMs?: number;
  /** Who may decide an approval request. Default: only the turn's principal (a turn without one: nobody). */
  readonly mayDecide?: MayDecide;
  /**
   * How many runs a turn gets when its runs fail before any effect (default 3, at most 10): such a
   * failure (a provider outage, say) is stored `retryable`, and a `submit` of the same key runs the
   * turn again from its checkpoint. A failure after a mutation or side effect was claimed is final.
   */
  readonly maxAttempts?: number;
  /** Put each tool call's result text, and a completed mutation's result, in outcomes. Default false. */
  readonly includeToolResults?: boolean;
  /** Clock for admission receipts and decisions. Default: the system clock. */
  readonly now?: () => Date;
  /**
   * A span per `submit` and `decide`, parenting the run's tool-call spans, and how long approvals
   * waited: pass the same `openTelemetry()` the guardrails get (docs/telemetry.md#turns).
   */
  readonly telemetry?: GuardrailTelemetry;
  /**
   * Receives a warning for every failed run (the error's class and code, the package's failure
   * code, never argument values or tool results) and when the telemetry backend throws. Default
   * `console.warn`.
   */
  readonly logger?: GuardrailLogger;
  /**
   * Accept an agent whose checkpointer is LangGraph's in-memory `MemorySaver`. Default false: a
   * paused run lives in its checkpoint, and an in-memory one is gone with the process while its
   * approval requests stay decidable in the store. For tests and demos only.
   */
  readonly allowInMemoryCheckpointer?: boolean;
}

/** `submit`'s input. */
export interface SubmitTurnInput {
  /** The trusted turn, as your server built it: its `turnId` is the idempotency key. */
  readonly turn: TurnInput;
  /** The first run's input messages; default one `HumanMessage` of the user segment. Read only when the turn first runs. */
  readonly messages?: readonly BaseMessage[];
  /** Aborts the run: the turn stays running and a later `submit` takes it over once its lease expired. */
  readonly signal?: AbortSignal;
}

/** `decide`'s input. */
export interface DecideTurnInput {
  /** The approval request to decide (a `PendingApproval`'s `approvalId`). */
  readonly approvalId: string;
  /** Who decides, as your server authenticated them: checked by `mayDecide`, recorded as `operatorRef`. */
  readonly principal: string;
  /** The person's decision: approve, reject (with an optional message) or edit (with the arguments to run). */
  readonly decision: ApprovalDecision;
}

/** `recover`'s options. */
export interface RecoverTurnsOptions {
  /** At most this many turns per call (1 to 1000; default 100), so a backlog does not hold up startup: call again for more. */
  readonly limit?: number;
  /** Aborts the runs this call makes: an aborted turn stays running and is recovered once its lease expired. */
  readonly signal?: AbortSignal;
}

/** One turn a `recover` call looked at, and where it left it. */
export interface RecoveredTurn {
  /** The turn. */
  readonly turnKey: string;
  /**
   * Its answer's status: `completed`, `refused`, `failed` or `awaiting_approval` (driven to an
   * outcome or a new pause by this call), `running` (another worker holds it), or `error` (its
   * recovery threw; the logger has the error, and the turn is looked at again by a later call).
   */
  readonly status: TurnAnswer["status"] | "error";
}

/** What one `recover` call did. */
export interface RecoverySummary {
  /** Every turn it looked at, in the order it did. */
  readonly turns: readonly RecoveredTurn[];
  /** How many turns ended in each status. */
  readonly counts: Readonly<Partial<Record<RecoveredTurn["status"], number>>>;
}

/** `prune`'s options. */
export interface PruneTurnsOptions {
  /**
   * The retention cut-off (ISO 8601), not later than the service's clock (`now`): finished turns
   * last updated before it are pruned, with their checkpoint threads, as `store.prune` compares.
   */
  readonly olderThan: string;
}

/** What one `prune` call did. */
export interface TurnPruneResult {
  /**
   * Checkpoint threads deleted: one per finished turn the store listed before the cut-off and this
   * call took (`takePrunableTurn`). A thread an interrupted or concurrent call took and deleted
   * already, its record not yet pruned, is deleted (a no-op) and counted again; a turn that changed
   * since it was listed (a retry ran it again) is not taken, and its thread stays.
   */
  readonly threads: number;
  /** The store's own `prune` answer: turns whose completed claims became tombstones, and side effects. */
  readonly store: PruneResult;
}

/** Runs turns: see the module comment and docs/turns.md. */
export interface TurnService {
  /** Runs the turn once; a retry answers the stored outcome (`replayed: true`) without running anything. */
  submit(input: SubmitTurnInput): Promise<TurnAnswer>;
  /** The turn's state, outcome and mutation claim, read only. */
  get(turnKey: string): Promise<TurnView>;
  /** Records a decision on a pending approval request and, once the pause is fully answered, resumes the turn. */
  decide(input: DecideTurnInput): Promise<DecideAnswer>;
  /**
   * Recovers turns no client comes back for: takes over every running turn whose lease expired
   * (its worker died) and resumes every paused turn whose requests were all decided but that
   * never resumed (its decider died), each exactly as a `submit` of it would, from the stored turn
   * input. Call it at startup and on an interval; with several workers each turn is recovered by
   * one (the takeover and the resume are compare-and-sets). One turn's failure is logged and
   * answered `error`, never thrown; it rejects only when the store cannot list the turns.
   */
  recover(options?: RecoverTurnsOptions): Promise<RecoverySummary>;
  /**
   * Retention, the one maintenance call: deletes the checkpoint thread of every finished turn
   * (`completed`, `refused`, `failed`) last updated before `olderThan`, then prunes the store with
   * that cut-off (`store.prune`: those turn records, and what `prune` removes of finished turns).
   * A running or paused turn, and its thread, are never touched: each listed turn is taken first
   * (`takePrunableTurn`, a compare-and-set), so a retry that runs a failed turn again either wins
   * (its thread stays) or is answered the stored outcome. Threads go before the records, so a call
   * that fails or dies half-way leaves the turn records, and the next call finishes the job. Safe
   * with several workers calling it at once, and on an interval. Needs the store's `operator` and
   * `turnPrune` parts and a checkpointer with `deleteThread`.
   */
  prune(options: PruneTurnsOptions): Promise<TurnPruneResult>;
}

const DEFAULT_LEASE_MS = 30_000;
const DEFAULT_MAX_ATTEMPTS = 3;
const DEFAULT_RECOVER_LIMIT = 100;
/** Audit events read per page for a completed turn's outcome (as `deliverAudit` pages). */
const AUDIT_PAGE = 1000;
/** Turns listed per page by `prune` (the most one `listTurns` answers). */
const PRUNE_PAGE = 1000;

const RecoverOptionsSchema = z
  .strictObject({
    limit: z.int().min(1).max(1000).optional(),
    signal: z.custom<AbortSignal>((value) => value instanceof AbortSignal, "signal must be an AbortSignal").optional(),
  })
  .optional();

const OptionsSchema = z.object({
  agent: z.custom<TurnAgent>(
    (value) =>
      typeof value === "object" &&
      value !== null &&
      typeof (value as Partial<TurnAgent>).invoke === "function" &&
      typeof (value as Partial<TurnAgent>).graph?.getState === "function",
    "agent must be a compiled agent (createAgent) with a checkpointer",
  ),
  store: StoreShape,
  moderate: z.custom<Moderate>((value) => typeof value === "function", "moderate must be a function"),
  userMessageLabel: z.string().min(1).optional(),
  leaseMs: z.int().min(1).max(86_400_000).optional(),
  mayDecide: z.custom<MayDecide>((value) => typeof value === "function", "mayDecide must be a function").optional(),
  maxAttempts: z.int().min(1).max(10).optional(),
  includeToolResults: z.boolean().optional(),
  now: z.custom<() => Date>((value) => typeof value === "function", "now must be a function returning a Date").optional(),
  telemetry: TelemetrySchema.optional(),
  logger: LoggerSchema.optional(),
  allowInMemoryCheckpointer: z.boolean().optional(),
});

const DecideInputSchema = z.strictObject({
  // Any string: one that is no approval id names no request, and is answered `not_found` as an
  // unknown one is (an HTTP route passes its path segment as it is).
  approvalId: z.string(),
  principal: z.string().min(1),
  decision: ApprovalDecisionSchema,
});

const MessagesSchema = z.array(z.custom<BaseMessage>((value) => BaseMessage.isInstance(value), "a LangChain message")).min(1).optional();

/** A turn's audit trail, as `readAudit` answers it. */
const StoredAuditEventsSchema = z.array(StoredAuditEventSchema);

const ownPrincipal: MayDecide = (principal, turn) => turn.principal !== undefined && turn.principal === principal;

/**
 * The thread a turn runs on: a UUID derived from the turn key, so every worker finds it, and
 * LangGraph Server, whose API takes only UUIDs as thread ids, accepts it
 * (`client.threads.create({ threadId: turnThreadId(turnKey) })`). The service runs a stored turn
 * on the thread its record names (`threadId`), so a turn begun with an earlier derivation keeps
 * its thread. Throws `TurnServiceError` (`invalid_input`) for a `turnKey` that is not a turn key.
 */
export function turnThreadId(turnKey: string): string {
  if (!DigestSchema.safeParse(turnKey).success) throw new TurnServiceError("invalid_input", "turnKey must be a turn key (a lowercase hex SHA-256)");
  // RFC 9562 version 8, the layout its appendix B.2 gives a SHA-256 name-based UUID (version 5
  // means SHA-1): the digest's first 16 bytes with the version (8) and variant (10) bits set.
  // @langchain/langgraph-api validates thread ids with zod's v3 `uuid()` (any 8-4-4-4-12 hex);
  // zod 4's `z.uuid()` (versions 1-8, variant 10), Python's `uuid.UUID` (LangGraph Platform)
  // and PostgreSQL's `uuid` take it too.
  const hex = digest({ kind: "arkah.turn-thread", v: 1, turnKey }).slice(0, 32);
  const variant = ((Number.parseInt(hex.charAt(16), 16) & 0x3) | 0x8).toString(16);
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-8${hex.slice(13, 16)}-${variant}${hex.slice(17, 20)}-${hex.slice(20, 32)}`;
}

/** The digest a reused turn key is compared by: the whole turn input, canonically. */
function inputDigest(input: TurnInput): string {
  return digest({
    kind: "arkah.turn-input",
    v: 1,
    scopeId: input.scopeId,
    turnId: input.turnId,
    policyVersion: input.policyVersion,
    principal: input.principal ?? null,
    segments: input.segments.map(({ label, content }) => ({ label, content })),
  });
}

/**
 * The request a turn answers: its idempotency key (`turnId`) as its principal sent it. One request
 * is one turn: the same key and principal with another `scopeId` is another turn key, and the
 * store refuses it `input_mismatch` by this key. Not the scope: that is what it must catch.
 */
function requestKey(input: TurnInput): string {
  return digest({ kind: "arkah.turn-request", v: 1, principal: input.principal ?? null, turnId: input.turnId });
}

/**
 * Builds the turn service. Throws `ConfigurationError` for invalid options, among them a store
 * without the `turns` and `approvals` parts.
 */
export function createTurnService(options: TurnServiceOptions): TurnService {
  const parsed = OptionsSchema.safeParse(options);
  if (!parsed.success) throw new ConfigurationError(`invalid createTurnService options: ${z.prettifyError(parsed.error)}`);
  const { agent, moderate } = parsed.data;
  const store = withStoreParts(parsed.data.store, ["turns", "approvals"], "createTurnService", "the turn service needs (turn records; a paused turn's approval requests)");
  const label = userMessageLabelOf(agent, parsed.data.userMessageLabel);
  const leaseMs = parsed.data.leaseMs ?? DEFAULT_LEASE_MS;
  const mayDecide = parsed.data.mayDecide ?? ownPrincipal;
  const maxAttempts = parsed.data.maxAttempts ?? DEFAULT_MAX_ATTEMPTS;
  const includeToolResults = parsed.data.includeToolResults ?? false;
  const now = parsed.data.now ?? (() => new Date());
  const { telemetry } = parsed.data;
  const logger = resolveLogger(parsed.data.logger);
  const checkpointer = durableCheckpointer(agent, parsed.data.allowInMemoryCheckpointer ?? false);

  const threadOf = (record: TurnRecord): ThreadConfig => ({ configurable: { thread_id: record.threadId } });
  const answerOf = (outcome: TurnOutcome, turnKey: string, replayed: boolean): TurnAnswer => ({ ...outcome, turnKey, replayed });
  const storedOutcome = (record: TurnRecord): TurnOutcome => parseStoreValue(TurnOutcomeSchema, record.outcome, "stored turn outcome");

  async function getTurn(turnKey: string): Promise<TurnRecord | undefined> {
    const record = await store.getTurn(turnKey);
    return record === undefined ? undefined : parseStoreValue(TurnRecordSchema, record, "getTurn answer");
  }

  async function getMutation(turnKey: string): Promise<TurnMutation | undefined> {
    const status = await store.getMutation(turnKey);
    return status === undefined ? undefined : turnMutation(parseStoreValue(MutationStatusSchema, status, "getMutation answer"), includeToolResults);
  }

  /** The turn as it stands, as an answer: running, or its stored outcome. */
  async function current(turnKey: string): Promise<TurnAnswer> {
    const record = await getTurn(turnKey);
    if (record === undefined || record.state === "running") return { status: "running", turnKey };
    return answerOf(storedOutcome(record), turnKey, true);
  }

  /** Stores the outcome under our lease. Lost the lease to a takeover: the turn is the other worker's. */
  async function finish(record: TurnRecord, token: string, outcome: TurnOutcome): Promise<TurnAnswer> {
    // Checked as every read of it will check it: an outcome the service cannot read back would
    // fail every retry and `get` of the turn. A bug here fails this call; the turn stays running.
    const checked = TurnOutcomeSchema.safeParse(outcome);
    if (!checked.success) {
      throw new Error(`the turn service built a ${outcome.status} outcome it could not read back (a bug; nothing stored): ${z.prettifyError(checked.error)}`);
    }
    // Stored as plain JSON (the outcome's interfaces are not index-signature records to the compiler).
    const json = parseStoreValue(JsonValueSchema, checked.data, "turn outcome");
    const applied = await store.finishTurn({ turnKey: record.turnKey, token, state: outcome.status, outcome: json });
    if (parseStoreValue(z.boolean(), applied, "finishTurn answer")) return answerOf(outcome, record.turnKey, false);
    return current(record.turnKey);
  }

  /**
   * A run's failure, as a code and what it left: never the error's text. A run that failed before
   * any effect was claimed (`run_failed`, nothing claimed) is retryable while attempts are left.
   */
  async function failure(record: TurnRecord, error: unknown, scope: RunScope): Promise<TurnOutcome> {
    const mutation = await getMutation(record.turnKey).then(
      (status) => ({ status }),
      () => undefined,
    );
    const left = mutation?.status === undefined ? {} : { mutation: mutation.status };
    const admission = AdmissionError.find(error);
    let outcome: TurnOutcome;
    if (admission !== undefined) outcome = { status: "failed", code: "admission_failed", detail: admission.code, ...left };
    else {
      const name = failureClass(sanitizeError(error));
      // A lookup that failed is no proof that nothing was claimed: final, as after a claim.
      const noEffect = mutation !== undefined && mutation.status === undefined && SettlementError.find(error) === undefined && !(await effectClaimed(record.turnKey));
      outcome = { status: "failed", code: "run_failed", error: name, ...left, ...attempts(noEffect, scope.attempt) };
    }
    failed(record, outcome, error, scope);
    return outcome;
  }

  /** The retry fields of a failure that left no effect: whether a retry of the key runs the turn again. */
  function attempts(noEffect: boolean, attempt: number): { retryable?: boolean; attempts?: number } {
    return noEffect ? { retryable: attempt < maxAttempts, attempts: attempt } : {};
  }

  /** A failed run, told to the host's logger and to telemetry: the error's class and code, never its values. */
  function failed(record: TurnRecord, outcome: TurnOutcome, error: unknown, scope: RunScope): void {
    if (outcome.status !== "failed") return;
    const logged = sanitizeError(error);
    scope.notes.failure(logged);
    logger.warn("turn run failed", {
      turnKey: record.turnKey,
      code: outcome.code,
      ...(outcome.detail === undefined ? {} : { detail: outcome.detail }),
      ...(outcome.retryable === undefined ? {} : { retryable: outcome.retryable, attempts: outcome.attempts }),
      error: logged,
    });
  }

  /**
   * Whether the turn claimed a side effect that is still claimed (pending, unknown, complete or
   * pruned). The audit trail names every effect a turn settled or released; a released one has no
   * claim left. A store that cannot say is taken as yes.
   */
  async function effectClaimed(turnKey: string): Promise<boolean> {
    try {
      // The whole trail: an effect claimed past one page is still claimed.
      const events = await trailOf(turnKey);
      const keys = new Set(events.flatMap((event) => (event.effectKey === undefined ? [] : [event.effectKey])));
      if (keys.size === 0) return false;
      if (!hasStorePart(store, "effects")) return true;
      for (const key of keys) if ((await store.getEffect(key)) !== undefined) return true;
      return false;
    } catch {
      return true;
    }
  }

  /**
   * Where a run stopped: paused on approvals, on something the service cannot answer, or done (its
   * messages: the completed outcome is built outside the run's failure handling, by `completed`).
   */
  async function stoppedAt(record: TurnRecord, messages: readonly BaseMessage[] | undefined): Promise<TurnOutcome | { readonly done: readonly BaseMessage[] }> {
    const snapshot = await agent.graph.getState(threadOf(record));
    const interrupts = snapshot.tasks.flatMap((task) => task.interrupts);
    if (interrupts.length > 0) {
      const pending = await pendingOf(record, interrupts);
      if (pending === undefined) return { status: "failed", code: "unsupported_interrupt" };
      return { status: "awaiting_approval", approvals: pending.map((each) => each.approval) };
    }
    return { done: messages ?? messagesOf(snapshot.values) };
  }

  /**
   * A completed run's outcome, with the turn's mutation claim: its calls' refusals come from the
   * turn's audit trail (read whole, when any result is an error), never from a tool result's text,
   * which a tool body may shape as a refusal. A trail the store cannot answer now (it fails, or
   * answers what is no trail: `StoreContractError`) fails this call and stores nothing: the run
   * completed, its writes stay settled, and the turn stays running until a takeover (`recover`,
   * or a `submit` once the lease expired) builds the outcome again, from the checkpoint, with its
   * refusals. A completed outcome is never stored without them.
   */
  async function completed(record: TurnRecord, messages: readonly BaseMessage[]): Promise<TurnOutcome> {
    // Only an error result can be a refusal: a run without one reads nothing.
    const trail = hasErrorResult(messages) ? await trailOf(record.turnKey) : [];
    return withMutation(record, completedOutcome(messages, includeToolResults, trail));
  }

  /**
   * The turn's whole audit trail, page by page (one `readAudit` page has a limit; a long turn's
   * refusals may be past it), each page checked to be this turn's and to go forward.
   */
  async function trailOf(turnKey: string): Promise<StoredAuditEvent[]> {
    const trail: StoredAuditEvent[] = [];
    let afterSeq = 0;
    for (;;) {
      const page = parseStoreValue(StoredAuditEventsSchema.max(AUDIT_PAGE), await store.readAudit({ turnKey, afterSeq, limit: AUDIT_PAGE }), "readAudit answer");
      for (const event of page) {
        if (event.turnKey !== turnKey) throw new StoreContractError("readAudit({ turnKey }) answered another turn's event");
        if (event.seq <= afterSeq) throw new StoreContractError(`readAudit answered event ${String(event.seq)} to a query for events after ${String(afterSeq)}`);
        trail.push(event);
        afterSeq = event.seq;
      }
      if (page.length < AUDIT_PAGE) return trail;
    }
  }

  /** A completed outcome with the turn's mutation claim, so a refused write shows without reading `calls`. */
  async function withMutation(record: TurnRecord, outcome: TurnOutcome): Promise<TurnOutcome> {
    if (outcome.status !== "completed") return outcome;
    // What the claim says is information, not the outcome: a store that cannot answer it now does
    // not fail a run that completed (`get` reads the claim later).
    const mutation = await getMutation(record.turnKey).catch((error: unknown) => {
      logger.warn("turn mutation read failed; the completed answer is stored without it", { turnKey: record.turnKey, error: sanitizeError(error) });
      return undefined;
    });
    return mutation === undefined ? outcome : { ...outcome, mutation };
  }

  /** Runs (or resumes) the turn's graph under our lease and stores where it stopped. */
  async function run(record: TurnRecord, token: string, input: { messages: BaseMessage[] } | Command | null, scope: RunScope) {
    const { signal } = scope;
    let stopped: TurnOutcome | { readonly done: readonly BaseMessage[] };
    const runSignal = perRunSignal(signal);
    try {
      const result = await agent.invoke(input, {
        ...threadOf(record),
        // Context is per invocation, never checkpointed: every run and resume passes the turn again.
        context: turnContext(record.input),
        ...(runSignal === undefined ? {} : { signal: runSignal.signal }),
      });
      stopped = await stoppedAt(record, result.messages);
    } catch (error) {
      // The caller gave up, the turn did not fail: it stays running, and is taken over once the lease expires.
      if (signal?.aborted === true) throw error;
      stopped = await failure(record, error, scope);
    } finally {
      runSignal?.dispose();
    }
    // Not a run failure when its trail cannot be read: the run completed (see `completed`).
    return finish(record, token, "done" in stopped ? await completed(record, stopped.done) : stopped);
  }

  /** Admits the turn (a stored receipt is reused: moderation runs once per turn) and runs it from the start. */
  async function first(record: TurnRecord, token: string, messages: BaseMessage[], scope: RunScope): Promise<TurnAnswer> {
    const { signal } = scope;
    let allowed: boolean;
    try {
      const receipt = await admitTurn({ store, input: record.input, moderate, now, ...(signal === undefined ? {} : { signal }) });
      allowed = receipt.allowed;
    } catch (error) {
      if (signal?.aborted === true) throw error;
      const admission = AdmissionError.find(error);
      if (admission?.code === "moderation_failed") {
        // Nothing ran: the provider's outage does not use up the key.
        const outcome: TurnOutcome = { status: "failed", code: "moderation_failed", ...attempts(true, scope.attempt) };
        failed(record, outcome, error, scope);
        return finish(record, token, outcome);
      }
      // A receipt for this turn key binds other input (admitted before the service knew the turn).
      if (admission?.code === "input_mismatch") return finish(record, token, { status: "refused", code: "input_mismatch" });
      throw error;
    }
    if (!allowed) return finish(record, token, { status: "refused", code: "denied" });
    return run(record, token, { messages }, scope);
  }

  /**
   * The approval requests a paused run waits on, from its interrupts, in either approval format;
   * `undefined` when one is not this library's approval request. A LangChain-format interrupt
   * carries the request's id, tool and arguments: the rest is the store's record, which must be
   * this turn's request for that tool and those arguments (else the pause is not ours to answer).
   */
  async function pendingOf(record: TurnRecord, interrupts: readonly Interrupt[]): Promise<PendingInterrupt[] | undefined> {
    const found = approvalInterrupts(interrupts);
    if (found === undefined) return undefined;
    const pending: PendingInterrupt[] = [];
    for (const each of found) {
      if (each.format === "arkah") {
        pending.push(each);
        continue;
      }
      const answer = await store.getApproval(each.approvalId);
      const asked = answer === undefined ? undefined : parseStoreValue(ApprovalRecordSchema, answer, "getApproval answer");
      if (asked?.turnKey !== record.turnKey || asked.toolName !== each.tool || digest(asked.args) !== digest(each.args)) return undefined;
      const { approvalId, toolName, toolCallId, args, guardrails, reason } = asked;
      pending.push({
        id: each.id,
        format: "langchain",
        approval: { approvalId, tool: toolName, toolCallId, args, guardrails, ...(reason === undefined ? {} : { reason }) },
      });
    }
    return pending;
  }

  /**
   * The resume value for a pause whose every request is decided (or expired), keyed by interrupt
   * id, each in the format its interrupt asked in; `undefined` while one is pending. The store's
   * record is the decision: a resume value can only repeat it.
   */
  async function resumeValue(pending: readonly PendingInterrupt[]): Promise<Resume | undefined> {
    const resume: Record<string, unknown> = {};
    const waits: TelemetryApprovalWait[] = [];
    for (const { id, format, approval } of pending) {
      const answer = await store.getApproval(approval.approvalId);
      const record = answer === undefined ? undefined : parseStoreValue(ApprovalRecordSchema, answer, "getApproval answer");
      if (record === undefined || record.status === "pending") return undefined;
      // An expired request is refused by the guardrails whatever the value says.
      const decision = record.decision ?? { decision: "reject" };
      resume[id] = format === "langchain" ? hitlResponse(decision, approval.tool, approval.approvalId) : { ...decision, approvalId: approval.approvalId };
      waits.push(approvalWait(record));
    }
    return { command: new Command({ resume }), waits };
  }

  /** Resumes the turn's run with the stored decisions; the taker of the resume tells telemetry how long each waited. */
  function resumeWith(record: TurnRecord, token: string, resume: Resume, scope: RunScope): Promise<TurnAnswer> {
    for (const wait of resume.waits) scope.notes.approvalWait(wait);
    return run(record, token, resume.command, scope);
  }

  /** The pause's interrupts, if the run waits only on this library's approval requests. */
  async function pausedOn(record: TurnRecord): Promise<PendingInterrupt[] | undefined> {
    const snapshot = await agent.graph.getState(threadOf(record));
    const pending = await pendingOf(record, snapshot.tasks.flatMap((task) => task.interrupts));
    return pending === undefined || pending.length === 0 ? undefined : pending;
  }

  /**
   * Resumes a paused turn whose every request is answered: one caller takes it (`resumeTurn`).
   * `undefined` when something is still pending.
   */
  async function continueAfterDecisions(record: TurnRecord, scope: RunScope): Promise<TurnAnswer | undefined> {
    const pending = await pausedOn(record);
    const resume = pending === undefined ? undefined : await resumeValue(pending);
    if (resume === undefined) return undefined;
    const taken = parseStoreValue(ResumeTurnResultSchema, await store.resumeTurn({ turnKey: record.turnKey, leaseMs }), "resumeTurn answer");
    if (!taken.resumed) return current(record.turnKey);
    return holding(taken.record, taken.token, scope, (held) => resumeWith(taken.record, taken.token, resume, held));
  }

  /**
   * A paused turn's outcome with only the requests still pending: none once every one is decided
   * and the resume is still to come (its decider failed before resuming; the next `submit` resumes).
   */
  async function stillWaiting(record: TurnRecord): Promise<TurnOutcome> {
    const outcome = storedOutcome(record);
    if (outcome.status === "completed" || outcome.status === "failed") return followsClaim(outcome, record);
    if (outcome.status !== "awaiting_approval") return outcome;
    const approvals = [];
    for (const approval of outcome.approvals) {
      const answer = await store.getApproval(approval.approvalId);
      if (answer === undefined || parseStoreValue(ApprovalRecordSchema, answer, "getApproval answer").status === "pending") approvals.push(approval);
    }
    return { status: "awaiting_approval", approvals };
  }

  /**
   * A finished outcome whose write was left `pending` or `unknown` follows the claim once it is
   * settled (by the tool's `confirm` or an operator's reconcile): its answer then shows the write
   * as it was resolved, never "in progress" for good. Read only: the stored outcome stays.
   */
  async function followsClaim(outcome: Extract<TurnOutcome, { status: "completed" | "failed" }>, record: TurnRecord): Promise<TurnOutcome> {
    const stored = outcome.mutation;
    if (stored === undefined || (stored.state !== "pending" && stored.state !== "unknown")) return outcome;
    const now = await getMutation(record.turnKey);
    if (now === undefined) {
      // Reconciled no-effect: the slot reopened, nothing was written.
      const { mutation: _unresolved, ...rest } = outcome;
      return rest;
    }
    return now.state === stored.state ? outcome : { ...outcome, mutation: now };
  }

  /**
   * A turn whose worker's lease expired: resume from the checkpoint, never from the start. Paused
   * (decided or not), mid-run, finished but not stored, or not yet checkpointed at all.
   */
  async function recover(record: TurnRecord, token: string, messages: BaseMessage[], scope: RunScope): Promise<TurnAnswer> {
    const snapshot = await agent.graph.getState(threadOf(record));
    const interrupts = snapshot.tasks.flatMap((task) => task.interrupts);
    if (interrupts.length > 0) {
      const pending = await pendingOf(record, interrupts);
      if (pending === undefined) return finish(record, token, { status: "failed", code: "unsupported_interrupt" });
      const resume = await resumeValue(pending);
      if (resume === undefined) return finish(record, token, { status: "awaiting_approval", approvals: pending.map((each) => each.approval) });
      return resumeWith(record, token, resume, scope);
    }
    // Tasks left means the graph did not reach its end, even when `next` is empty: LangGraph writes a
    // step's checkpoint while the next step runs, so a worker that died may leave the last step's
    // task writes saved (its values show them) and the checkpoint after it unsaved. Resuming applies
    // those writes and goes on; only a graph with no task left finished.
    if (snapshot.next.length > 0 || snapshot.tasks.length > 0) return run(record, token, null, scope);
    const checkpointed = messagesOf(snapshot.values);
    if (checkpointed.length === 0) return first(record, token, messages, scope);
    return finish(record, token, await completed(record, checkpointed));
  }

  /**
   * A failed turn whose failure left no effect and has attempts left runs again from its
   * checkpoint, under a new lease (one caller takes it: `resumeTurn` from `failed`); `undefined`
   * for any other finished turn.
   */
  async function retryFailed(record: TurnRecord, messages: BaseMessage[], scope: Omit<RunScope, "attempt">): Promise<TurnAnswer | undefined> {
    if (record.state !== "failed") return undefined;
    const outcome = storedOutcome(record);
    if (outcome.status !== "failed" || outcome.retryable !== true) return undefined;
    const taken = parseStoreValue(ResumeTurnResultSchema, await store.resumeTurn({ turnKey: record.turnKey, leaseMs, from: "failed" }), "resumeTurn answer");
    if (!taken.resumed) return current(record.turnKey);
    const attempt = (outcome.attempts ?? 1) + 1;
    return holding(taken.record, taken.token, { ...scope, attempt }, (held) => recover(taken.record, taken.token, messages, held));
  }

  /**
   * Runs `body` while holding the turn's lease (`token`): renewed every third of the lease until
   * `body` settles. If a renewal answers false another worker took the turn over: the run is
   * aborted through its signal, and the answer is the turn as that worker leaves it.
   */
  async function holding(record: TurnRecord, token: string, scope: RunScope, body: (held: RunScope) => Promise<TurnAnswer>): Promise<TurnAnswer> {
    const lease = keepLease({
      renew: async () => parseStoreValue(z.boolean(), await store.renewTurn({ turnKey: record.turnKey, token, leaseMs }), "renewTurn answer"),
      everyMs: Math.floor(leaseMs / 3),
      signal: scope.signal,
      failed: (error) => {
        logger.warn("turn lease renewal failed", { turnKey: record.turnKey, error: sanitizeError(error) });
      },
    });
    try {
      return await body({ ...scope, signal: lease.signal });
    } catch (error) {
      if (lease.lost()) return await current(record.turnKey);
      throw error;
    } finally {
      lease.stop();
    }
  }

  async function submit(input: SubmitTurnInput, notes: TurnNotes): Promise<Step<TurnAnswer>> {
    const { turn, messages } = parseSubmit(input, label);
    notes.turn(turn.turnKey);
    const scope = { notes, ...(input.signal === undefined ? {} : { signal: input.signal }) };
    const start: TurnStart = {
      turnKey: turn.turnKey,
      scopeId: turn.input.scopeId,
      ...(turn.input.principal === undefined ? {} : { principal: turn.input.principal }),
      input: turn.input,
      inputDigest: inputDigest(turn.input),
      requestKey: requestKey(turn.input),
      threadId: turnThreadId(turn.turnKey),
    };
    const begun = parseStoreValue(BeginTurnResultSchema, await store.beginTurn({ turn: start, leaseMs }), "beginTurn answer");
    switch (begun.status) {
      case "input_mismatch":
        // The record under this key (or the turn holding this request) is another input's: its state is not this request's.
        return { answer: { status: "refused", code: "input_mismatch", turnKey: turn.turnKey, replayed: false }, state: undefined };
      case "running":
        return stepOf({ status: "running", turnKey: turn.turnKey });
      case "started":
        return stepOf(await holding(begun.record, begun.token, { ...scope, attempt: 1 }, (held) => first(begun.record, begun.token, messages, held)));
      case "taken_over":
        return stepOf(await holding(begun.record, begun.token, { ...scope, attempt: 1 }, (held) => recover(begun.record, begun.token, messages, held)));
      case "finished": {
        // Decided, but the decider died before resuming: resume now. Failed before any effect:
        // run again. Otherwise replay.
        const continued =
          begun.record.state === "awaiting_approval"
            ? await continueAfterDecisions(begun.record, { ...scope, attempt: 1 })
            : await retryFailed(begun.record, messages, scope);
        return stepOf(continued ?? answerOf(await stillWaiting(begun.record), turn.turnKey, true));
      }
    }
  }

  async function decide(input: DecideTurnInput, notes: TurnNotes): Promise<Step<DecideAnswer>> {
    const parsedInput = DecideInputSchema.safeParse(input);
    if (!parsedInput.success) throw new TurnServiceError("invalid_input", `invalid decision: ${z.prettifyError(parsedInput.error)}`);
    const { approvalId, principal, decision } = parsedInput.data;
    if (!DigestSchema.safeParse(approvalId).success) return { answer: { status: "not_found" }, state: undefined };
    const answer = await store.getApproval(approvalId);
    const approval = answer === undefined ? undefined : parseStoreValue(ApprovalRecordSchema, answer, "getApproval answer");
    const record = approval === undefined ? undefined : await getTurn(approval.turnKey);
    if (approval === undefined || record === undefined) return { answer: { status: "not_found" }, state: undefined };
    notes.turn(record.turnKey);
    // Fail closed: only a literal true lets the principal decide.
    const allowed: unknown = await mayDecide(principal, record.input, approval);
    if (allowed !== true) return { answer: { status: "forbidden" }, state: record.state };
    // A request is decidable only once the pause that waits on it is durable: the run returned,
    // its checkpoint holds the interrupt, and the turn record lists the request. Before that (the
    // run is still writing its checkpoint, or died before it) a decision could approve a run that
    // no longer exists; nothing is recorded. A decided request goes on to the store, which answers
    // a re-delivered decision as the first time.
    if (approval.status === "pending" && !pauseWaitsOn(record, approvalId)) {
      if (record.state === "running") return stepOf({ status: "running", turnKey: record.turnKey });
      return { answer: { status: "not_found" }, state: record.state };
    }
    // Asked whatever the request's status: the store answers a re-delivered decision (a retried
    // request) as the first time, `repeated`, and refuses and audits any other on a decided request.
    const decided = await store.decideApproval({ approvalId, decision, operatorRef: principal, decidedAt: now().toISOString() });
    if (!decided.decided) {
      const refused: DecideAnswer =
        decided.record === undefined ? { status: "not_found" } : { status: "not_pending", approvalStatus: decided.record.status };
      return { answer: refused, state: record.state };
    }
    // A repeated decision goes the same way: the turn resumed already (it is not awaiting_approval,
    // and is answered as it stands) or, if its decider died before resuming, resumes now, once:
    // resumeTurn is a compare-and-set.
    const latest = await getTurn(record.turnKey);
    if (latest === undefined) return { answer: { status: "not_found" }, state: undefined };
    if (latest.state !== "awaiting_approval") return stepOf(await current(latest.turnKey));
    return stepOf((await continueAfterDecisions(latest, { notes, attempt: 1 })) ?? answerOf(await stillWaiting(latest), latest.turnKey, false));
  }

  /** Where the last `recover` listing of each kind stopped: the next call goes on from there, so a turn that cannot be recovered never hides the ones after it. */
  const recoveryCursor: { running?: string; awaiting_approval?: string } = {};

  /** One page of stalled turns of `state`, from where the last call stopped (from the start again once a page comes back short). */
  async function stalled(state: "running" | "awaiting_approval", limit: number): Promise<TurnRecord[]> {
    const after = recoveryCursor[state];
    const query = state === "running" ? { state, expired: true } : { state, decided: true };
    const answer = await store.listTurns({ ...query, limit, ...(after === undefined ? {} : { after }) });
    const records = parseStoreValue(z.array(TurnRecordSchema).max(limit), answer, "listTurns answer");
    recoveryCursor[state] = records.length < limit ? undefined : records.at(-1)?.turnKey;
    return records;
  }

  /** See `TurnService.recover`: each listed turn goes the way a `submit` of it goes. */
  async function recoverStalled(options: RecoverTurnsOptions | undefined): Promise<RecoverySummary> {
    const parsedOptions = RecoverOptionsSchema.safeParse(options);
    if (!parsedOptions.success) throw new TurnServiceError("invalid_input", `invalid recover options: ${z.prettifyError(parsedOptions.error)}`);
    const limit = parsedOptions.data?.limit ?? DEFAULT_RECOVER_LIMIT;
    const signal = parsedOptions.data?.signal;
    const expired = await stalled("running", limit);
    const decided = expired.length < limit ? await stalled("awaiting_approval", limit - expired.length) : [];
    const turns: RecoveredTurn[] = [];
    for (const record of [...expired, ...decided]) {
      if (signal?.aborted === true) break;
      try {
        const step = await observeTurn(telemetry, logger, { operation: "submit" }, (notes) => submit({ turn: record.input, ...(signal === undefined ? {} : { signal }) }, notes), endOf);
        turns.push({ turnKey: record.turnKey, status: step.answer.status });
      } catch (error) {
        logger.warn("turn recovery failed", { turnKey: record.turnKey, error: sanitizeError(error) });
        turns.push({ turnKey: record.turnKey, status: "error" });
      }
    }
    const counts: Partial<Record<RecoveredTurn["status"], number>> = {};
    for (const { status } of turns) counts[status] = (counts[status] ?? 0) + 1;
    return { turns, counts };
  }

  /**
   * See `TurnService.prune`. Each listed turn is taken first (`takePrunableTurn`, a compare-and-set
   * on the record as listed, so no retry runs it again), then its thread goes, then the record: a
   * crash after the take leaves the taken record, which the next call lists, takes again and
   * finishes (deleting a thread twice is a no-op). Without the take, a retry of a failed turn
   * between the listing and `deleteThread` would lose its thread mid-run; the other order (record
   * first) would leave a thread nobody can find, or delete the thread of a retry that, after the
   * record went, began the key as a new turn on the same thread. A record that changed since it
   * was listed (run again; or pruned by another call and begun anew) is not taken: its thread stays.
   */
  async function pruneFinished(options: PruneTurnsOptions): Promise<TurnPruneResult> {
    const parsedOptions = PruneOptionsSchema.safeParse(options);
    if (!parsedOptions.success) throw new TurnServiceError("invalid_input", `invalid prune options: ${z.prettifyError(parsedOptions.error)}`);
    const { olderThan } = parsedOptions.data;
    const cutoff = Date.parse(olderThan);
    // A cut-off in the future would let a turn that finishes during this call be pruned without
    // having been listed, and so keep its thread for ever.
    if (!(cutoff <= now().getTime())) throw new TurnServiceError("invalid_input", "invalid prune options: olderThan must not be later than now");
    const operator = withStoreParts(
      store,
      ["operator", "turnPrune"],
      "the turn service's prune",
      "it takes each finished turn out of the lifecycle before deleting its thread (takePrunableTurn) and prunes the store (prune)",
    );
    const deleteThread = threadDeleter(checkpointer);
    let threads = 0;
    let after: string | undefined;
    for (;;) {
      const answer = await store.listTurns({ state: "finished", olderThan, limit: PRUNE_PAGE, ...(after === undefined ? {} : { after }) });
      const records = parseStoreValue(z.array(TurnRecordSchema).max(PRUNE_PAGE), answer, "listTurns answer");
      for (const record of records) {
        // Deleting a live turn's thread would lose its run (a pause resumes from it): a listing that
        // names one, or goes backwards (it would never end), is a broken store.
        if (!prunableTurn(record, cutoff)) throw new StoreContractError("listTurns (finished) answered a turn that is not finished before the cut-off");
        if (after !== undefined && !(record.turnKey > after)) throw new StoreContractError("listTurns answered turns out of key order");
        after = record.turnKey;
        const taken = await operator.takePrunableTurn({ turnKey: record.turnKey, updatedAt: record.updatedAt });
        if (!parseStoreValue(z.boolean(), taken, "takePrunableTurn answer")) continue;
        await deleteThread(record.threadId);
        threads += 1;
      }
      if (records.length < PRUNE_PAGE) break;
    }
    const pruned = parseStoreValue(PruneResultSchema, await operator.prune({ olderThan }), "prune answer");
    return { threads, store: pruned };
  }

  return {
    async recover(options) {
      return recoverStalled(options);
    },

    async prune(options) {
      return pruneFinished(options);
    },

    async submit(input) {
      const step = await observeTurn(telemetry, logger, { operation: "submit" }, (notes) => submit(input, notes), endOf);
      return step.answer;
    },

    async get(turnKey) {
      const key = DigestSchema.safeParse(turnKey);
      if (!key.success) throw new TurnServiceError("invalid_input", "turnKey must be a turn key (a lowercase hex SHA-256)");
      const record = await getTurn(key.data);
      if (record === undefined) return { status: "not_found" };
      return {
        status: "found",
        turnKey: record.turnKey,
        scopeId: record.scopeId,
        principal: record.principal,
        state: record.state,
        outcome: record.state === "running" ? undefined : await stillWaiting(record),
        mutation: await getMutation(record.turnKey),
        createdAt: record.createdAt,
        updatedAt: record.updatedAt,
      };
    },

    async decide(input) {
      const step = await observeTurn(telemetry, logger, { operation: "decide" }, (notes) => decide(input, notes), endOf);
      return step.answer;
    },
  };
}

/**
 * The label of the user's segment: the guardrails' own (`createAgent` keeps its `middleware` in
 * `agent.options`), so it is set once; a service option that disagrees would fail every turn's
 * admission (`transcript_mismatch`), so it is refused here. A hand-built graph has no such list:
 * the option, or `"user"`.
 */
function userMessageLabelOf(agent: TurnAgent, given: string | undefined): string {
  const own = documentGuardrailsLabel((agent as { readonly options?: { readonly middleware?: unknown } }).options?.middleware);
  if (given !== undefined && own !== undefined && given !== own) {
    throw new ConfigurationError(
      `createTurnService's userMessageLabel "${given}" is not the agent's createDocumentGuardrails userMessageLabel "${own}": ` +
        "every turn would fail admission (transcript_mismatch). Omit it: the service reads the guardrails' label",
    );
  }
  return given ?? own ?? "user";
}

/**
 * The agent's checkpointer. The service keeps a paused run in it: it needs one, and one that
 * outlives the process unless the host says this is a test.
 */
function durableCheckpointer(agent: TurnAgent, allowInMemory: boolean): unknown {
  const own = (agent as { readonly checkpointer?: unknown }).checkpointer;
  const graph = (agent.graph as { readonly checkpointer?: unknown }).checkpointer;
  const checkpointer = own ?? graph;
  if (checkpointer === undefined || checkpointer === false || checkpointer === null) {
    throw new ConfigurationError("createTurnService needs an agent compiled with a checkpointer (createAgent({ checkpointer })): a turn's run, its pause and its takeover live in the checkpoint");
  }
  if (checkpointer instanceof MemorySaver && !allowInMemory) {
    throw new ConfigurationError(
      "createTurnService was given an agent whose checkpointer is the in-memory MemorySaver: a paused run would be lost with the process while its approval requests stay decidable. Use a durable checkpointer (SqliteSaver, PostgresSaver), or pass allowInMemoryCheckpointer: true in tests",
    );
  }
  return checkpointer;
}

/** The checkpointer's `deleteThread` (LangGraph's `BaseCheckpointSaver` has it since @langchain/langgraph-checkpoint 0.1), bound. */
function threadDeleter(checkpointer: unknown): (threadId: string) => Promise<void> {
  const saver = (typeof checkpointer === "object" && checkpointer !== null ? checkpointer : {}) as { readonly deleteThread?: unknown };
  if (typeof saver.deleteThread !== "function") {
    throw new ConfigurationError("the turn service's prune needs a checkpointer with deleteThread(threadId) (LangGraph's BaseCheckpointSaver): it deletes finished turns' threads");
  }
  const deleteThread = saver.deleteThread as (threadId: string) => Promise<void>;
  return async (threadId) => {
    await deleteThread.call(checkpointer, threadId);
  };
}

/**
 * The class a failed run's answer names: the error's, or, for LangChain's `MiddlewareError` (which
 * wraps whatever a middleware's hook threw, a provider's error among them), its cause's.
 */
function failureClass(error: LoggedError): string {
  let current = error;
  while (current.name === "MiddlewareError" && current.cause !== undefined) current = current.cause;
  return /^[A-Za-z][\w.]{0,63}$/.test(current.name) ? current.name : "Error";
}

/** What one operation's runs share: the caller's signal, telemetry's notes, and which attempt of the turn this is. */
interface RunScope {
  readonly signal?: AbortSignal;
  readonly notes: TurnNotes;
  /** 1 for the turn's first run (and a takeover or resume of it); n for the n-th run after failures that left no effect. */
  readonly attempt: number;
}

/** An interrupt of a paused run, as `graph.getState` lists it. */
interface Interrupt {
  readonly id?: string;
  readonly value?: unknown;
}

/** Decisions a resume answers the pause with, and how long each waited. */
interface Resume {
  readonly command: Command;
  readonly waits: readonly TelemetryApprovalWait[];
}

/** An operation's answer, and the turn's state as it left it (when the service knows it), for telemetry. */
interface Step<A extends DecideAnswer> {
  readonly answer: A;
  readonly state: TurnState | undefined;
}

/** A turn answer's step: its status is the turn's state. */
function stepOf(answer: TurnAnswer): Step<TurnAnswer> {
  return { answer, state: answer.status };
}

/** How an operation ended, for telemetry: the answer's status, code and replay flag, no text. */
function endOf(step: Step<DecideAnswer>): Omit<TelemetryTurnEnd, "errorType"> {
  const { answer, state } = step;
  const turnKey = "turnKey" in answer ? answer.turnKey : undefined;
  const code = "code" in answer ? answer.code : undefined;
  const replayed = "replayed" in answer && answer.replayed;
  return { turnKey, status: answer.status, code, replayed, state };
}

/** How long a decided (or expired) request waited for its person. */
function approvalWait(record: ApprovalRecord): TelemetryApprovalWait {
  const until = record.decidedAt ?? record.expiredAt ?? record.requestedAt;
  return {
    toolName: record.toolName,
    decision: record.decision?.decision ?? "expired",
    waitMs: Math.max(0, Date.parse(until) - Date.parse(record.requestedAt)),
  };
}

/** The turn and the first run's messages, validated: invalid input is a `TurnServiceError`, nothing stored. */
function parseSubmit(input: SubmitTurnInput, label: string) {
  let turn;
  try {
    turn = resolveTurn(input.turn);
  } catch (error) {
    throw new TurnServiceError("invalid_input", AdmissionError.find(error)?.message ?? "invalid turn input", { cause: error });
  }
  const messages = MessagesSchema.safeParse(input.messages);
  if (!messages.success) throw new TurnServiceError("invalid_input", `invalid messages: ${z.prettifyError(messages.error)}`);
  if (messages.data !== undefined) return { turn, messages: [...messages.data] };
  try {
    return { turn, messages: [new HumanMessage(userSegment(turn.input, label))] };
  } catch (error) {
    throw new TurnServiceError("invalid_input", `the turn has no segment labelled "${label}" (userMessageLabel)`, { cause: error });
  }
}

/** The messages of a checkpoint's values. */
function messagesOf(values: unknown): BaseMessage[] {
  const messages = typeof values === "object" && values !== null ? (values as { messages?: unknown }).messages : undefined;
  return Array.isArray(messages) ? messages.filter((message): message is BaseMessage => BaseMessage.isInstance(message)) : [];
}

/**
 * A signal for one `agent.invoke` that aborts when the caller's does. LangGraph's `Pregel.stream`
 * (@langchain/langgraph 1.7.3) adds an abort listener to the signal it is given and never removes
 * it, about 2 KB held per run for as long as that signal lives: a long-lived caller signal (a
 * server's shutdown signal) would keep every run. Ours is removed when the run ends.
 */
function perRunSignal(signal: AbortSignal | undefined): { signal: AbortSignal; dispose: () => void } | undefined {
  if (signal === undefined) return undefined;
  const controller = new AbortController();
  const abort = () => {
    controller.abort(signal.reason);
  };
  if (signal.aborted) abort();
  else signal.addEventListener("abort", abort, { once: true });
  return {
    signal: controller.signal,
    dispose: () => {
      signal.removeEventListener("abort", abort);
    },
  };
}
