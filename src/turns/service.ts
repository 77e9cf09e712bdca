/**
 * The turn service: the one way to run turns in a server. It owns the lifecycle around the agent
 * that every service otherwise writes itself: idempotency by turn key (a retry answers the stored
 * outcome and runs nothing), admission, one thread per turn (derived from the turn key, so no
 * mapping table), the pending approvals of a paused run, who may decide them, resuming with the
 * turn's `context`, and taking over a turn whose worker died (its lease expired) from the
 * checkpoint. Framework-neutral: an HTTP route maps its answers to status codes (docs/turns.md).
 */
import { BaseMessage, HumanMessage } from "@langchain/core/messages";
import { Command } from "@langchain/langgraph";
import { z } from "zod";
import { admitTurn, resolveTurn, type Moderate } from "../admission.js";
import {
  ApprovalDecisionSchema,
  ApprovalRecordSchema,
  BeginTurnResultSchema,
  DigestSchema,
  JsonValueSchema,
  MutationStatusSchema,
  ResumeTurnResultSchema,
  TurnRecordSchema,
  type ApprovalDecision,
  type ApprovalRecord,
  type MutationStatus,
  type TurnInput,
  type TurnRecord,
  type TurnStart,
  type TurnState,
} from "../contracts.js";
import { digest } from "../digest.js";
import { AdmissionError, ApprovalError, ConfigurationError } from "../errors.js";
import { resolveLogger, type GuardrailLogger } from "../logger.js";
import { LoggerSchema, StoreShape } from "../options.js";
import { withStoreParts, type AnyGuardrailStore } from "../store-capabilities.js";
import { parseStoreValue } from "../stores/validate.js";
import { TelemetrySchema, type GuardrailTelemetry, type TelemetryApprovalWait, type TelemetryTurnEnd } from "../telemetry.js";
import { turnContext, userSegment } from "../turn-gate.js";
import { TurnServiceError } from "./errors.js";
import { observeTurn, type TurnNotes } from "./observe.js";
import {
  approvalInterrupts,
  completedOutcome,
  TurnOutcomeSchema,
  type DecideAnswer,
  type PendingInterrupt,
  type TurnAnswer,
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
  /** The segment whose text is the user's message when `submit` is given no messages. Default `"user"`. */
  readonly userMessageLabel?: string;
  /**
   * How long a worker holds a running turn before another may take it over, in ms (default
   * 300 000). Longer than your longest run: a run past its lease may be taken over while it runs
   * (the mutation claim still allows one write; the later worker's outcome is the one stored).
   */
  readonly leaseMs?: number;
  /** Who may decide an approval request. Default: only the turn's principal (a turn without one: nobody). */
  readonly mayDecide?: MayDecide;
  /** Put each tool call's result text, and a completed mutation's result, in outcomes. Default false. */
  readonly includeToolResults?: boolean;
  /** Clock for admission receipts and decisions. Default: the system clock. */
  readonly now?: () => Date;
  /**
   * A span per `submit` and `decide`, parenting the run's tool-call spans, and how long approvals
   * waited: pass the same `openTelemetry()` the guardrails get (docs/telemetry.md#turns).
   */
  readonly telemetry?: GuardrailTelemetry;
  /** Receives a warning when the telemetry backend throws (nothing else). Default `console.warn`. */
  readonly logger?: GuardrailLogger;
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

/** Runs turns: see the module comment and docs/turns.md. */
export interface TurnService {
  /** Runs the turn once; a retry answers the stored outcome (`replayed: true`) without running anything. */
  submit(input: SubmitTurnInput): Promise<TurnAnswer>;
  /** The turn's state, outcome and mutation claim, read only. */
  get(turnKey: string): Promise<TurnView>;
  /** Records a decision on a pending approval request and, once the pause is fully answered, resumes the turn. */
  decide(input: DecideTurnInput): Promise<DecideAnswer>;
}

const DEFAULT_LEASE_MS = 300_000;

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
  includeToolResults: z.boolean().optional(),
  now: z.custom<() => Date>((value) => typeof value === "function", "now must be a function returning a Date").optional(),
  telemetry: TelemetrySchema.optional(),
  logger: LoggerSchema.optional(),
});

const DecideInputSchema = z.strictObject({
  approvalId: DigestSchema,
  principal: z.string().min(1),
  decision: ApprovalDecisionSchema,
});

const MessagesSchema = z.array(z.custom<BaseMessage>((value) => BaseMessage.isInstance(value), "a LangChain message")).min(1).optional();

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
  const label = parsed.data.userMessageLabel ?? "user";
  const leaseMs = parsed.data.leaseMs ?? DEFAULT_LEASE_MS;
  const mayDecide = parsed.data.mayDecide ?? ownPrincipal;
  const includeToolResults = parsed.data.includeToolResults ?? false;
  const now = parsed.data.now ?? (() => new Date());
  const { telemetry } = parsed.data;
  const logger = resolveLogger(parsed.data.logger);

  const threadOf = (record: TurnRecord): ThreadConfig => ({ configurable: { thread_id: record.threadId } });
  const answerOf = (outcome: TurnOutcome, turnKey: string, replayed: boolean): TurnAnswer => ({ ...outcome, turnKey, replayed });
  const storedOutcome = (record: TurnRecord): TurnOutcome => parseStoreValue(TurnOutcomeSchema, record.outcome, "stored turn outcome");
  const withoutResult = (status: MutationStatus): MutationStatus =>
    includeToolResults ? status : { state: status.state, toolName: status.toolName, toolCallId: status.toolCallId };

  async function getTurn(turnKey: string): Promise<TurnRecord | undefined> {
    const record = await store.getTurn(turnKey);
    return record === undefined ? undefined : parseStoreValue(TurnRecordSchema, record, "getTurn answer");
  }

  async function getMutation(turnKey: string): Promise<MutationStatus | undefined> {
    const status = await store.getMutation(turnKey);
    return status === undefined ? undefined : withoutResult(parseStoreValue(MutationStatusSchema, status, "getMutation answer"));
  }

  /** The turn as it stands, as an answer: running, or its stored outcome. */
  async function current(turnKey: string): Promise<TurnAnswer> {
    const record = await getTurn(turnKey);
    if (record === undefined || record.state === "running") return { status: "running", turnKey };
    return answerOf(storedOutcome(record), turnKey, true);
  }

  /** Stores the outcome under our lease. Lost the lease to a takeover: the turn is the other worker's. */
  async function finish(record: TurnRecord, token: string, outcome: TurnOutcome): Promise<TurnAnswer> {
    // Stored as plain JSON (the outcome's interfaces are not index-signature records to the compiler).
    const json = parseStoreValue(JsonValueSchema, outcome, "turn outcome");
    const applied = await store.finishTurn({ turnKey: record.turnKey, token, state: outcome.status, outcome: json });
    if (parseStoreValue(z.boolean(), applied, "finishTurn answer")) return answerOf(outcome, record.turnKey, false);
    return current(record.turnKey);
  }

  /** A run's failure, as a code and what it left: never the error's text. */
  async function failure(record: TurnRecord, error: unknown): Promise<TurnOutcome> {
    const mutation = await getMutation(record.turnKey).catch(() => undefined);
    const left = mutation === undefined ? {} : { mutation };
    const admission = AdmissionError.find(error);
    if (admission !== undefined) return { status: "failed", code: "admission_failed", detail: admission.code, ...left };
    const approval = ApprovalError.find(error);
    if (approval !== undefined) return { status: "failed", code: "approval_failed", detail: approval.code, ...left };
    const name = error instanceof Error && /^[A-Za-z][\w.]{0,63}$/.test(error.name) ? error.name : "Error";
    return { status: "failed", code: "run_failed", error: name, ...left };
  }

  /** Where a run stopped: paused on approvals, on something the service cannot answer, or done. */
  async function settled(record: TurnRecord, messages: readonly BaseMessage[] | undefined): Promise<TurnOutcome> {
    const snapshot = await agent.graph.getState(threadOf(record));
    const interrupts = snapshot.tasks.flatMap((task) => task.interrupts);
    if (interrupts.length > 0) {
      const pending = approvalInterrupts(interrupts);
      if (pending === undefined) return { status: "failed", code: "unsupported_interrupt" };
      return { status: "awaiting_approval", approvals: pending.map((each) => each.approval) };
    }
    return completedOutcome(messages ?? messagesOf(snapshot.values), includeToolResults);
  }

  /** Runs (or resumes) the turn's graph under our lease and stores where it stopped. */
  async function run(record: TurnRecord, token: string, input: { messages: BaseMessage[] } | Command | null, signal?: AbortSignal) {
    let outcome: TurnOutcome;
    const runSignal = perRunSignal(signal);
    try {
      const result = await agent.invoke(input, {
        ...threadOf(record),
        // Context is per invocation, never checkpointed: every run and resume passes the turn again.
        context: turnContext(record.input),
        ...(runSignal === undefined ? {} : { signal: runSignal.signal }),
      });
      outcome = await settled(record, result.messages);
    } catch (error) {
      // The caller gave up, the turn did not fail: it stays running, and is taken over once the lease expires.
      if (signal?.aborted === true) throw error;
      outcome = await failure(record, error);
    } finally {
      runSignal?.dispose();
    }
    return finish(record, token, outcome);
  }

  /** Admits the turn (a stored receipt is reused: moderation runs once per turn) and runs it from the start. */
  async function first(record: TurnRecord, token: string, messages: BaseMessage[], signal?: AbortSignal): Promise<TurnAnswer> {
    let allowed: boolean;
    try {
      const receipt = await admitTurn({ store, input: record.input, moderate, now, ...(signal === undefined ? {} : { signal }) });
      allowed = receipt.allowed;
    } catch (error) {
      if (signal?.aborted === true) throw error;
      const admission = AdmissionError.find(error);
      if (admission?.code === "moderation_failed") return finish(record, token, { status: "failed", code: "moderation_failed" });
      // A receipt for this turn key binds other input (admitted before the service knew the turn).
      if (admission?.code === "input_mismatch") return finish(record, token, { status: "refused", code: "input_mismatch" });
      throw error;
    }
    if (!allowed) return finish(record, token, { status: "refused", code: "denied" });
    return run(record, token, { messages }, signal);
  }

  /**
   * The resume value for a pause whose every request is decided (or expired), keyed by interrupt
   * id; `undefined` while one is pending. The store's record is the decision: a resume value can
   * only repeat it.
   */
  async function resumeValue(pending: readonly PendingInterrupt[]): Promise<Resume | undefined> {
    const resume: Record<string, unknown> = {};
    const waits: TelemetryApprovalWait[] = [];
    for (const { id, approval } of pending) {
      const answer = await store.getApproval(approval.approvalId);
      const record = answer === undefined ? undefined : parseStoreValue(ApprovalRecordSchema, answer, "getApproval answer");
      if (record === undefined || record.status === "pending") return undefined;
      // An expired request is refused by the guardrails whatever the value says.
      resume[id] = { ...(record.decision ?? { decision: "reject" }), approvalId: approval.approvalId };
      waits.push(approvalWait(record));
    }
    return { command: new Command({ resume }), waits };
  }

  /** Resumes the turn's run with the stored decisions; the taker of the resume tells telemetry how long each waited. */
  function resumeWith(record: TurnRecord, token: string, resume: Resume, notes: TurnNotes, signal?: AbortSignal): Promise<TurnAnswer> {
    for (const wait of resume.waits) notes.approvalWait(wait);
    return run(record, token, resume.command, signal);
  }

  /** The pause's interrupts, if the run waits only on this library's approval requests. */
  async function pausedOn(record: TurnRecord): Promise<PendingInterrupt[] | undefined> {
    const snapshot = await agent.graph.getState(threadOf(record));
    const pending = approvalInterrupts(snapshot.tasks.flatMap((task) => task.interrupts));
    return pending === undefined || pending.length === 0 ? undefined : pending;
  }

  /**
   * Resumes a paused turn whose every request is answered: one caller takes it (`resumeTurn`).
   * `undefined` when something is still pending.
   */
  async function continueAfterDecisions(record: TurnRecord, notes: TurnNotes, signal?: AbortSignal): Promise<TurnAnswer | undefined> {
    const pending = await pausedOn(record);
    const resume = pending === undefined ? undefined : await resumeValue(pending);
    if (resume === undefined) return undefined;
    const taken = parseStoreValue(ResumeTurnResultSchema, await store.resumeTurn({ turnKey: record.turnKey, leaseMs }), "resumeTurn answer");
    if (!taken.resumed) return current(record.turnKey);
    return resumeWith(taken.record, taken.token, resume, notes, signal);
  }

  /** A paused turn's outcome with only the requests still pending. */
  async function stillWaiting(record: TurnRecord): Promise<TurnOutcome> {
    const outcome = storedOutcome(record);
    if (outcome.status !== "awaiting_approval") return outcome;
    const approvals = [];
    for (const approval of outcome.approvals) {
      const answer = await store.getApproval(approval.approvalId);
      if (answer === undefined || parseStoreValue(ApprovalRecordSchema, answer, "getApproval answer").status === "pending") approvals.push(approval);
    }
    return approvals.length === 0 ? outcome : { status: "awaiting_approval", approvals };
  }

  /**
   * A turn whose worker's lease expired: resume from the checkpoint, never from the start. Paused
   * (decided or not), mid-run, finished but not stored, or not yet checkpointed at all.
   */
  async function recover(record: TurnRecord, token: string, messages: BaseMessage[], notes: TurnNotes, signal?: AbortSignal): Promise<TurnAnswer> {
    const snapshot = await agent.graph.getState(threadOf(record));
    const interrupts = snapshot.tasks.flatMap((task) => task.interrupts);
    if (interrupts.length > 0) {
      const pending = approvalInterrupts(interrupts);
      if (pending === undefined) return finish(record, token, { status: "failed", code: "unsupported_interrupt" });
      const resume = await resumeValue(pending);
      if (resume === undefined) return finish(record, token, { status: "awaiting_approval", approvals: pending.map((each) => each.approval) });
      return resumeWith(record, token, resume, notes, signal);
    }
    if (snapshot.next.length > 0) return run(record, token, null, signal);
    const checkpointed = messagesOf(snapshot.values);
    if (checkpointed.length === 0) return first(record, token, messages, signal);
    return finish(record, token, completedOutcome(checkpointed, includeToolResults));
  }

  async function submit(input: SubmitTurnInput, notes: TurnNotes): Promise<Step<TurnAnswer>> {
    const { turn, messages } = parseSubmit(input, label);
    notes.turn(turn.turnKey);
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
        return stepOf(await first(begun.record, begun.token, messages, input.signal));
      case "taken_over":
        return stepOf(await recover(begun.record, begun.token, messages, notes, input.signal));
      case "finished": {
        // Decided, but the decider died before resuming: resume now. Otherwise replay.
        const continued = begun.record.state === "awaiting_approval" ? await continueAfterDecisions(begun.record, notes, input.signal) : undefined;
        return stepOf(continued ?? answerOf(await stillWaiting(begun.record), turn.turnKey, true));
      }
    }
  }

  async function decide(input: DecideTurnInput, notes: TurnNotes): Promise<Step<DecideAnswer>> {
    const parsedInput = DecideInputSchema.safeParse(input);
    if (!parsedInput.success) throw new TurnServiceError("invalid_input", `invalid decision: ${z.prettifyError(parsedInput.error)}`);
    const { approvalId, principal, decision } = parsedInput.data;
    const answer = await store.getApproval(approvalId);
    const approval = answer === undefined ? undefined : parseStoreValue(ApprovalRecordSchema, answer, "getApproval answer");
    const record = approval === undefined ? undefined : await getTurn(approval.turnKey);
    if (approval === undefined || record === undefined) return { answer: { status: "not_found" }, state: undefined };
    notes.turn(record.turnKey);
    // Fail closed: only a literal true lets the principal decide.
    const allowed: unknown = await mayDecide(principal, record.input, approval);
    if (allowed !== true) return { answer: { status: "forbidden" }, state: record.state };
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
    return stepOf((await continueAfterDecisions(latest, notes)) ?? answerOf(await stillWaiting(latest), latest.turnKey, false));
  }

  return {
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
