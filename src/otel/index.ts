/**
 * `arkah-agent-guardrails/otel`: the telemetry port implemented with `@opentelemetry/api` (an
 * optional peer dependency, loaded only by this entry point). One span per governed tool call,
 * span events for its claim, settlement and replay, and counters; a span per turn-service
 * operation (`submit`, `decide`) parenting them, and the approval-wait histogram. Names, ids,
 * codes and digests only, argument values and results only with `includeValues`.
 */
import {
  context,
  metrics,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Counter,
  type Histogram,
  type MeterProvider,
  type Span,
  type Tracer,
  type TracerProvider,
} from "@opentelemetry/api";
import { z } from "zod";
import { ConfigurationError } from "../errors.js";
import type { LoggedError } from "../logger.js";
import type {
  GuardrailTelemetry,
  TelemetryCall,
  TelemetryCallEnd,
  TelemetryCallObserver,
  TelemetryStep,
  TelemetryApprovalWait,
  TelemetryTurn,
  TelemetryTurnEnd,
  TelemetryTurnObserver,
} from "../telemetry.js";

/** The instrumentation scope of the tracer and the meter. */
export const INSTRUMENTATION_SCOPE = "arkah-agent-guardrails";

/** The name of the span of each governed tool call. */
export const SPAN_NAME = "arkah.tool_call";

/** The names of the turn service's spans, one per operation: the run's tool-call spans are their children. */
export const TURN_SPAN_NAMES = {
  /** `submit`: runs, resumes, or replays a turn. */
  submit: "arkah.turn.submit",
  /** `decide`: decides an approval request and resumes the turn once its pause is answered. */
  decide: "arkah.turn.decide",
} as const;

/**
 * Span and metric attribute keys. The tool's name and call id use the OpenTelemetry GenAI
 * semantic conventions, as do the opt-in argument and result values.
 */
export const ATTRIBUTES = {
  /** Always `execute_tool`. */
  operation: "gen_ai.operation.name",
  /** The tool's name as the model wrote it (on metrics only for registered tools). */
  toolName: "gen_ai.tool.name",
  /** The call id. */
  toolCallId: "gen_ai.tool.call.id",
  /** The call's arguments as JSON: only with `includeValues`. */
  arguments: "gen_ai.tool.call.arguments",
  /** The text the call was answered with: only with `includeValues`. */
  result: "gen_ai.tool.call.result",
  /** The tool's kind (`document-read`, `source-read`, `mutation`, `side-effect`, `auxiliary`). */
  kind: "arkah.tool.kind",
  /** `turnKey` of the call's turn. */
  turnKey: "arkah.turn_key",
  /** How the call ended (`TelemetryCallEnd.decision`). */
  decision: "arkah.decision",
  /** The code recorded with the decision: a refusal code, a guardrail's code, `seal_broken`. */
  code: "arkah.code",
  /** The guardrail that denied the call. */
  guardrail: "arkah.guardrail",
  /** `mutationKey` of a claimed mutation. */
  mutationKey: "arkah.mutation_key",
  /** `effectKey` of a claimed side effect (a `side-effect` tool's call). */
  effectKey: "arkah.effect_key",
  /** On `arkah.claim` events and the claims counter: the store's answer to the claim. */
  claimStatus: "arkah.claim.status",
  /** On `arkah.settle` events: `complete`, `unknown` or `released`. */
  settleOutcome: "arkah.settle.outcome",
  /** On `arkah.settle` events: whether the store still held the claim under this call's token. */
  settleApplied: "arkah.settle.applied",
  /** On `arkah.retry` events: the attempt about to run (2 for the first retry). */
  attempt: "arkah.retry.attempt",
  /** The class name of an error that fails the run. */
  errorType: "error.type",
  /** On turn spans and the turn counter: `submit` or `decide`. */
  turnOperation: "arkah.turn.operation",
  /** On turn spans and the turn counter: the answer's status (`completed`, `awaiting_approval`, `running`, `forbidden`, ..., or `error`). */
  turnStatus: "arkah.turn.status",
  /** On turn spans and the turn counter: the stored outcome was answered and nothing ran. */
  turnReplayed: "arkah.turn.replayed",
  /** On turn spans: the turn's state as the operation left it. */
  turnState: "arkah.turn.state",
  /** On `arkah.approval_wait` events and the approval-wait histogram: `approve`, `reject`, `edit` or `expired`. */
  approvalDecision: "arkah.approval.decision",
  /** On `arkah.approval_wait` events: the wait, in seconds. */
  approvalWait: "arkah.approval.wait",
} as const;

/** Span event names: the steps of a mutation's claim, and retries. */
export const EVENTS = {
  /** The store answered the mutation's claim. */
  claim: "arkah.claim",
  /** The claim was settled or released. */
  settle: "arkah.settle",
  /** A completed mutation's stored result was returned without running it. */
  replay: "arkah.replay",
  /** The tool is run again under its retry policy. */
  retry: "arkah.retry",
  /** On a turn span: the run resumes with a person's decision, after this wait. */
  approvalWait: "arkah.approval_wait",
} as const;

/** Counter names. Each carries `gen_ai.tool.name` for tools the middleware registers. */
export const METRICS = {
  /** Governed calls, by `arkah.decision`. */
  toolCalls: "arkah.guardrails.tool_calls",
  /** Calls answered with a refusal, by its code (`arkah.code`). */
  refusals: "arkah.guardrails.refusals",
  /** Mutation and side-effect claims, by `arkah.claim.status` (and `gen_ai.tool.name`, whose kind tells them apart). */
  claims: "arkah.guardrails.claims",
  /** Completed mutations and side effects replayed from the store instead of run again. */
  replays: "arkah.guardrails.replays",
  /** Mutations and side effects settled `unknown`: closed until an operator reconciles them. */
  unknownOutcomes: "arkah.guardrails.unknown_outcomes",
  /** Calls paused for a person's approval. */
  approvalWaits: "arkah.guardrails.approval_waits",
  /** Turn-service operations, by `arkah.turn.operation`, `arkah.turn.status` and `arkah.turn.replayed`. */
  turns: "arkah.turns",
  /**
   * Histogram: how long approval requests waited for their decision, in seconds, recorded when
   * the turn service resumes the run with it; by `arkah.approval.decision` and `gen_ai.tool.name`.
   */
  approvalWaitTime: "arkah.turns.approval_wait",
} as const;

/** Options of `openTelemetry`. */
export interface OpenTelemetryOptions {
  /** Default: the global tracer provider, as registered now or later (`trace.setGlobalTracerProvider`). */
  readonly tracerProvider?: TracerProvider;
  /** Default: the global meter provider, looked up on each call so a later registration counts. */
  readonly meterProvider?: MeterProvider;
  /**
   * Put the call's arguments (`gen_ai.tool.call.arguments`) and result text
   * (`gen_ai.tool.call.result`) on its span. Default false: spans and metrics hold names, ids,
   * codes and digests only.
   */
  readonly includeValues?: boolean;
}

const OptionsSchema = z.strictObject({
  tracerProvider: z
    .custom<TracerProvider>((value) => typeof (value as Partial<TracerProvider> | null)?.getTracer === "function", "tracerProvider must have getTracer")
    .optional(),
  meterProvider: z
    .custom<MeterProvider>((value) => typeof (value as Partial<MeterProvider> | null)?.getMeter === "function", "meterProvider must have getMeter")
    .optional(),
  includeValues: z.boolean().optional(),
});

/** The counters of one meter provider. */
interface Instruments {
  readonly provider: MeterProvider;
  readonly toolCalls: Counter;
  readonly refusals: Counter;
  readonly claims: Counter;
  readonly replays: Counter;
  readonly unknownOutcomes: Counter;
  readonly approvalWaits: Counter;
  readonly turns: Counter;
  readonly approvalWaitTime: Histogram;
}

function instruments(provider: MeterProvider): Instruments {
  const meter = provider.getMeter(INSTRUMENTATION_SCOPE);
  const counter = (name: string, description: string, unit: string) => meter.createCounter(name, { description, unit });
  return {
    provider,
    toolCalls: counter(METRICS.toolCalls, "Governed tool calls, by decision.", "{call}"),
    refusals: counter(METRICS.refusals, "Tool calls answered with a refusal, by code.", "{refusal}"),
    claims: counter(METRICS.claims, "Mutation and side-effect claims, by the store's answer.", "{claim}"),
    replays: counter(METRICS.replays, "Completed mutations and side effects replayed from the store.", "{replay}"),
    unknownOutcomes: counter(METRICS.unknownOutcomes, "Mutations and side effects settled unknown, to reconcile.", "{mutation}"),
    approvalWaits: counter(METRICS.approvalWaits, "Tool calls paused for a person's approval.", "{wait}"),
    turns: counter(METRICS.turns, "Turn-service operations, by status and whether the outcome was replayed.", "{operation}"),
    approvalWaitTime: meter.createHistogram(METRICS.approvalWaitTime, {
      description: "How long approval requests waited for their decision.",
      unit: "s",
    }),
  };
}

/**
 * The OpenTelemetry backend for the `telemetry` option of `createDocumentGuardrails` and
 * `createToolGuardrails`:
 *
 * ```ts
 * import { openTelemetry } from "arkah-agent-guardrails/otel";
 * createDocumentGuardrails({ ...options, telemetry: openTelemetry() });
 * ```
 *
 * Each governed call gets a span `arkah.tool_call` (a child of the active span; the tool runs
 * inside it, so its own spans are the call's children), with the tool, its kind, the decision,
 * the refusal code and the turn key; events for the claim, settlement and replay; and the
 * `arkah.guardrails.*` counters. With no SDK registered, the API's no-op tracer and meter make
 * this nearly free (see docs/benchmarks.md).
 *
 * Throws `ConfigurationError` for invalid options.
 */
export function openTelemetry(options: OpenTelemetryOptions = {}): GuardrailTelemetry {
  const parsed = OptionsSchema.safeParse(options);
  if (!parsed.success) throw new ConfigurationError(`invalid openTelemetry options: ${z.prettifyError(parsed.error)}`);
  const { tracerProvider, meterProvider, includeValues = false } = parsed.data;
  // The global tracer is a proxy: a provider registered later is used from then on.
  const tracer: Tracer = (tracerProvider ?? trace).getTracer(INSTRUMENTATION_SCOPE);
  let current: Instruments | undefined;
  const counters = (): Instruments => {
    const provider = meterProvider ?? metrics.getMeterProvider();
    if (current?.provider !== provider) current = instruments(provider);
    return current;
  };
  return {
    includeValues,
    observeCall<T>(call: TelemetryCall, run: (observer: TelemetryCallObserver) => Promise<T>): Promise<T> {
      const span = tracer.startSpan(SPAN_NAME, { kind: SpanKind.INTERNAL, attributes: startAttributes(call) });
      const observer = new SpanObserver(span, counters(), call.governed ? { [ATTRIBUTES.toolName]: call.toolName } : {});
      return context.with(trace.setSpan(context.active(), span), run, undefined, observer);
    },
    observeTurn<T>(turn: TelemetryTurn, run: (observer: TelemetryTurnObserver) => Promise<T>): Promise<T> {
      const span = tracer.startSpan(TURN_SPAN_NAMES[turn.operation], {
        kind: SpanKind.INTERNAL,
        attributes: { [ATTRIBUTES.turnOperation]: turn.operation },
      });
      const observer = new TurnSpanObserver(span, counters(), turn);
      // Active while the agent runs: the tool-call spans of the run are this span's children.
      return context.with(trace.setSpan(context.active(), span), run, undefined, observer);
    },
  };
}

function startAttributes(call: TelemetryCall): Attributes {
  const attributes: Attributes = {
    [ATTRIBUTES.operation]: "execute_tool",
    [ATTRIBUTES.toolName]: call.toolName,
    [ATTRIBUTES.turnKey]: call.turnKey,
  };
  if (call.toolCallId !== undefined) attributes[ATTRIBUTES.toolCallId] = call.toolCallId;
  if (call.kind !== undefined) attributes[ATTRIBUTES.kind] = call.kind;
  return attributes;
}

/** One call's span and counters. `tool` is the metric attributes: a bounded tool name, or none. */
class SpanObserver implements TelemetryCallObserver {
  readonly #span: Span;
  readonly #counters: Instruments;
  readonly #tool: Attributes;

  constructor(span: Span, counters: Instruments, tool: Attributes) {
    this.#span = span;
    this.#counters = counters;
    this.#tool = tool;
  }

  step(step: TelemetryStep): void {
    const span = this.#span;
    switch (step.type) {
      case "claim":
        if (step.mutationKey !== undefined) span.setAttribute(ATTRIBUTES.mutationKey, step.mutationKey);
        else span.setAttribute(ATTRIBUTES.effectKey, step.effectKey);
        span.addEvent(EVENTS.claim, { [ATTRIBUTES.claimStatus]: step.status });
        this.#counters.claims.add(1, { ...this.#tool, [ATTRIBUTES.claimStatus]: step.status });
        return;
      case "settle":
        span.addEvent(EVENTS.settle, { [ATTRIBUTES.settleOutcome]: step.outcome, [ATTRIBUTES.settleApplied]: step.applied });
        if (step.outcome === "unknown") this.#counters.unknownOutcomes.add(1, this.#tool);
        return;
      case "replay":
        span.addEvent(EVENTS.replay);
        this.#counters.replays.add(1, this.#tool);
        return;
      case "retry":
        span.addEvent(EVENTS.retry, { [ATTRIBUTES.attempt]: step.attempt });
        return;
    }
  }

  end(end: TelemetryCallEnd): void {
    const span = this.#span;
    const attributes: Attributes = { [ATTRIBUTES.decision]: end.decision };
    if (end.code !== undefined) attributes[ATTRIBUTES.code] = end.code;
    if (end.guardrail !== undefined) attributes[ATTRIBUTES.guardrail] = end.guardrail;
    if (end.mutationKey !== undefined) attributes[ATTRIBUTES.mutationKey] = end.mutationKey;
    if (end.effectKey !== undefined) attributes[ATTRIBUTES.effectKey] = end.effectKey;
    if (end.errorType !== undefined) attributes[ATTRIBUTES.errorType] = end.errorType;
    if (end.args !== undefined) {
      const json = jsonText(end.args);
      if (json !== undefined) attributes[ATTRIBUTES.arguments] = json;
    }
    if (end.result !== undefined) attributes[ATTRIBUTES.result] = end.result;
    span.setAttributes(attributes);
    // A refusal or a pause is the guardrails working; a failed tool or run is an error.
    if (end.decision === "failed" || end.decision === "error") span.setStatus({ code: SpanStatusCode.ERROR });
    span.end();

    const counters = this.#counters;
    counters.toolCalls.add(1, { ...this.#tool, [ATTRIBUTES.decision]: end.decision });
    if (end.refusal !== undefined) counters.refusals.add(1, { ...this.#tool, [ATTRIBUTES.code]: end.refusal });
    if (end.decision === "approval_wait") counters.approvalWaits.add(1, this.#tool);
  }
}

/** JSON text of the arguments, or undefined when they have none (a cycle, a BigInt). */
function jsonText(value: unknown): string | undefined {
  try {
    return JSON.stringify(value);
  } catch {
    return undefined;
  }
}

/** One turn operation's span, its approval waits and the turn counter. */
/** A logged error's text for an exception event: its message, else its code, else its class; with its causes' classes. */
function exceptionText(error: LoggedError): string {
  const own = error.message ?? error.code ?? error.name;
  return error.cause === undefined ? own : `${own} (cause: ${exceptionText(error.cause)})`;
}

class TurnSpanObserver implements TelemetryTurnObserver {
  readonly #span: Span;
  readonly #counters: Instruments;
  readonly #turn: TelemetryTurn;

  constructor(span: Span, counters: Instruments, turn: TelemetryTurn) {
    this.#span = span;
    this.#counters = counters;
    this.#turn = turn;
  }

  approvalWait(wait: TelemetryApprovalWait): void {
    const seconds = wait.waitMs / 1000;
    this.#span.addEvent(EVENTS.approvalWait, {
      [ATTRIBUTES.toolName]: wait.toolName,
      [ATTRIBUTES.approvalDecision]: wait.decision,
      [ATTRIBUTES.approvalWait]: seconds,
    });
    this.#counters.approvalWaitTime.record(seconds, { [ATTRIBUTES.toolName]: wait.toolName, [ATTRIBUTES.approvalDecision]: wait.decision });
  }

  end(end: TelemetryTurnEnd): void {
    const span = this.#span;
    const attributes: Attributes = { [ATTRIBUTES.turnStatus]: end.status, [ATTRIBUTES.turnReplayed]: end.replayed };
    if (end.turnKey !== undefined) attributes[ATTRIBUTES.turnKey] = end.turnKey;
    if (end.code !== undefined) attributes[ATTRIBUTES.code] = end.code;
    if (end.state !== undefined) attributes[ATTRIBUTES.turnState] = end.state;
    if (end.errorType !== undefined) attributes[ATTRIBUTES.errorType] = end.errorType;
    span.setAttributes(attributes);
    // The cause of a failed run or a throw, as the logger has it: class, code, this package's own text.
    if (end.exception !== undefined) span.recordException({ name: end.exception.name, message: exceptionText(end.exception) });
    // A refusal, a pause or a forbidden decision is the service working; a failed run or a throw is an error.
    if (end.status === "failed" || end.status === "error") span.setStatus({ code: SpanStatusCode.ERROR });
    span.end();
    this.#counters.turns.add(1, {
      [ATTRIBUTES.turnOperation]: this.#turn.operation,
      [ATTRIBUTES.turnStatus]: end.status,
      [ATTRIBUTES.turnReplayed]: end.replayed,
    });
  }
}
