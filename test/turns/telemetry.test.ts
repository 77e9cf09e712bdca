/**
 * Telemetry of the turn service through the real `createAgent` loop, recorded by the SDK's
 * in-memory span exporter and an in-memory metric reader, with the async-hooks context manager a
 * Node SDK registers: one span per `submit` and `decide` (turn key, status, replayed, state), the
 * tool-call spans of the run it makes as its children, the approval wait as a histogram (from the
 * request's `requestedAt` to its decision, recorded when the run resumes with it), a replayed
 * outcome marked as such, and no user text or argument value on any span. A backend that throws
 * or misbehaves changes nothing: the turn runs once (model calls and writes counted).
 */
import { context, metrics, SpanStatusCode, trace, type Attributes } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { MeterProvider, MetricReader, type DataPoint, type Histogram } from "@opentelemetry/sdk-metrics";
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from "@opentelemetry/sdk-trace-base";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  InMemoryGuardrailStore,
  turnKey,
  TurnServiceError,
  type GuardrailLogger,
  type GuardrailTelemetry,
  type TelemetryTurnObserver,
  type TurnAnswer,
} from "arkah-agent-guardrails";
import { ATTRIBUTES, EVENTS, METRICS, openTelemetry, SPAN_NAME, TURN_SPAN_NAMES } from "arkah-agent-guardrails/otel";
import { rejection } from "../support/fixtures.js";
import { USER } from "../security/support.js";
import { NEW_BODY, serviceHarness, TestClock, turnOf } from "./support.js";

class InMemoryMetricReader extends MetricReader {
  protected override onForceFlush(): Promise<void> {
    return Promise.resolve();
  }
  protected override onShutdown(): Promise<void> {
    return Promise.resolve();
  }
}

function sdk() {
  const exporter = new InMemorySpanExporter();
  const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  const reader = new InMemoryMetricReader();
  const meterProvider = new MeterProvider({ readers: [reader] });
  const points = async (name: string): Promise<unknown[]> => {
    const { resourceMetrics } = await reader.collect();
    const found = resourceMetrics.scopeMetrics.flatMap((scope) => scope.metrics).filter((metric) => metric.descriptor.name === name);
    return found.flatMap((metric): unknown[] => metric.dataPoints);
  };
  const matches = (attributes: Attributes, where: Attributes) => Object.entries(where).every(([key, value]) => attributes[key] === value);
  return {
    telemetry: openTelemetry({ tracerProvider, meterProvider }),
    all: (): ReadableSpan[] => exporter.getFinishedSpans(),
    turnSpans: (): ReadableSpan[] => exporter.getFinishedSpans().filter((span) => span.name.startsWith("arkah.turn.")),
    callSpans: (): ReadableSpan[] => exporter.getFinishedSpans().filter((span) => span.name === SPAN_NAME),
    async count(name: string, where: Attributes = {}): Promise<number> {
      return ((await points(name)) as DataPoint<number>[]).filter((point) => matches(point.attributes, where)).reduce((sum, point) => sum + point.value, 0);
    },
    async histogram(name: string, where: Attributes = {}): Promise<{ count: number; sum: number }> {
      const found = ((await points(name)) as DataPoint<Histogram>[]).filter((point) => matches(point.attributes, where));
      return { count: found.reduce((sum, point) => sum + point.value.count, 0), sum: found.reduce((sum, point) => sum + (point.value.sum ?? 0), 0) };
    },
  };
}

const KEY = turnKey(turnOf());

/** Every string a span carries: name, attribute values, event names and attributes. */
const spanText = (span: ReadableSpan) => JSON.stringify([span.name, span.attributes, span.events.map((event) => [event.name, event.attributes])]);
const parentOf = (span: ReadableSpan) => span.parentSpanContext?.spanId;
const childrenOf = (spans: readonly ReadableSpan[], parent: ReadableSpan) => spans.filter((span) => parentOf(span) === parent.spanContext().spanId);

function only<T>(items: readonly T[]): T {
  expect(items).toHaveLength(1);
  const [item] = items;
  if (item === undefined) throw new Error("none");
  return item;
}

function awaiting(answer: TurnAnswer | { status: string }) {
  if (answer.status !== "awaiting_approval") throw new Error(`expected awaiting_approval, got ${JSON.stringify(answer)}`);
  return answer as Extract<TurnAnswer, { status: "awaiting_approval" }>;
}

beforeEach(() => {
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
});
afterEach(() => {
  trace.disable();
  metrics.disable();
  context.disable();
});

describe("a span per turn operation, parenting the run's tool-call spans", () => {
  it("submit: one arkah.turn.submit span (turn key, completed, not replayed); both tool calls are its children", async () => {
    const otel = sdk();
    const { service, notes, model } = serviceHarness({ store: new InMemoryGuardrailStore(), telemetry: otel.telemetry });
    expect(await service.submit({ turn: turnOf() })).toMatchObject({ status: "completed", replayed: false });
    expect(notes.writes).toHaveLength(1);
    expect(model.calls).toBe(3);

    const submit = only(otel.turnSpans());
    expect(submit.name).toBe(TURN_SPAN_NAMES.submit);
    expect(submit.attributes).toEqual({
      [ATTRIBUTES.turnOperation]: "submit",
      [ATTRIBUTES.turnKey]: KEY,
      [ATTRIBUTES.turnStatus]: "completed",
      [ATTRIBUTES.turnReplayed]: false,
      [ATTRIBUTES.turnState]: "completed",
    });
    expect(submit.status.code).toBe(SpanStatusCode.UNSET);
    expect(parentOf(submit)).toBeUndefined();
    const calls = otel.callSpans();
    expect(calls.map((span) => span.attributes[ATTRIBUTES.toolCallId])).toEqual(["r1", "w1"]);
    expect(childrenOf(calls, submit)).toEqual(calls);
    for (const call of calls) expect(call.spanContext().traceId).toBe(submit.spanContext().traceId);
    expect(await otel.count(METRICS.turns, { [ATTRIBUTES.turnOperation]: "submit", [ATTRIBUTES.turnStatus]: "completed", [ATTRIBUTES.turnReplayed]: false })).toBe(1);
  });

  it("a retry of a finished turn: a span marked replayed, with no tool-call children; nothing called", async () => {
    const otel = sdk();
    const { service, notes, model, moderations } = serviceHarness({ store: new InMemoryGuardrailStore(), telemetry: otel.telemetry });
    await service.submit({ turn: turnOf() });
    const [calls, entries] = [model.calls, notes.entries.length];
    expect(await service.submit({ turn: turnOf() })).toMatchObject({ status: "completed", replayed: true });
    expect([model.calls, notes.entries.length, moderations(), notes.writes.length]).toEqual([calls, entries, 1, 1]);

    const [first, retry] = otel.turnSpans();
    expect(first?.attributes[ATTRIBUTES.turnReplayed]).toBe(false);
    expect(retry?.attributes).toMatchObject({ [ATTRIBUTES.turnStatus]: "completed", [ATTRIBUTES.turnReplayed]: true, [ATTRIBUTES.turnKey]: KEY });
    if (retry === undefined) throw new Error("no retry span");
    expect(childrenOf(otel.all(), retry)).toEqual([]);
    expect(otel.callSpans()).toHaveLength(2);
    expect(await otel.count(METRICS.turns, { [ATTRIBUTES.turnReplayed]: true })).toBe(1);
    expect(await otel.count(METRICS.turns, { [ATTRIBUTES.turnReplayed]: false })).toBe(1);
  });

  it("a pause, a forbidden decision and the principal's: each decide has its span; the resumed write is the decide span's child; the wait is in the histogram", async () => {
    const otel = sdk();
    const clock = new TestClock();
    const store = new InMemoryGuardrailStore();
    const { service, notes } = serviceHarness({ store, approvals: true, telemetry: otel.telemetry, service: { now: clock.now } });
    const paused = awaiting(await service.submit({ turn: turnOf() }));
    const submit = only(otel.turnSpans());
    expect(submit.attributes).toMatchObject({ [ATTRIBUTES.turnStatus]: "awaiting_approval", [ATTRIBUTES.turnState]: "awaiting_approval" });
    const waiting = otel.callSpans().find((span) => span.attributes[ATTRIBUTES.decision] === "approval_wait");
    expect(waiting && parentOf(waiting)).toBe(submit.spanContext().spanId);
    const approvalId = paused.approvals[0]?.approvalId ?? "";

    const forbidden = await service.decide({ approvalId, principal: "mallory", decision: { decision: "approve" } });
    expect(forbidden).toEqual({ status: "forbidden" });
    const refusedSpan = otel.turnSpans()[1];
    expect(refusedSpan?.attributes).toMatchObject({
      [ATTRIBUTES.turnOperation]: "decide",
      [ATTRIBUTES.turnStatus]: "forbidden",
      [ATTRIBUTES.turnKey]: KEY,
      [ATTRIBUTES.turnState]: "awaiting_approval",
    });
    expect(refusedSpan?.status.code).toBe(SpanStatusCode.UNSET);
    expect(refusedSpan?.events).toEqual([]);

    // The person answers 90 seconds (of the service's clock) after the request was made.
    const requestedAt = Date.parse((await store.getApproval(approvalId))?.requestedAt ?? "");
    clock.ms = requestedAt + 90_000;
    expect(await service.decide({ approvalId, principal: "alice", decision: { decision: "approve" } })).toMatchObject({ status: "completed", replayed: false });
    expect(notes.writes).toHaveLength(1);
    const decide = otel.turnSpans()[2];
    if (decide === undefined) throw new Error("no decide span");
    expect(decide.name).toBe(TURN_SPAN_NAMES.decide);
    expect(decide.attributes).toMatchObject({ [ATTRIBUTES.turnStatus]: "completed", [ATTRIBUTES.turnReplayed]: false, [ATTRIBUTES.turnState]: "completed" });
    expect(decide.events.map((event) => [event.name, event.attributes])).toEqual([
      [EVENTS.approvalWait, { [ATTRIBUTES.toolName]: "edit_note", [ATTRIBUTES.approvalDecision]: "approve", [ATTRIBUTES.approvalWait]: 90 }],
    ]);
    const resumed = childrenOf(otel.callSpans(), decide);
    expect(resumed.map((span) => [span.attributes[ATTRIBUTES.toolCallId], span.attributes[ATTRIBUTES.decision]])).toEqual([["w1", "executed"]]);
    expect(await otel.histogram(METRICS.approvalWaitTime, { [ATTRIBUTES.toolName]: "edit_note", [ATTRIBUTES.approvalDecision]: "approve" })).toEqual({
      count: 1,
      sum: 90,
    });

    // Answering again (the same decision, re-delivered) resumes nothing, runs nothing and records no second wait.
    const spans = otel.callSpans().length;
    expect(await service.decide({ approvalId, principal: "alice", decision: { decision: "approve" } })).toMatchObject({ status: "completed", replayed: true });
    expect(otel.callSpans()).toHaveLength(spans);
    expect(notes.writes).toHaveLength(1);
    expect((await otel.histogram(METRICS.approvalWaitTime)).count).toBe(1);
    // Another decision is refused: nothing resumes either.
    expect(await service.decide({ approvalId, principal: "alice", decision: { decision: "reject" } })).toMatchObject({ status: "not_pending" });
    expect((await otel.histogram(METRICS.approvalWaitTime)).count).toBe(1);
  });

  it("invalid input: the span's status is ERROR with the error's class only; a tool's error text is on no span", async () => {
    const otel = sdk();
    const { service } = serviceHarness({
      store: new InMemoryGuardrailStore(),
      telemetry: otel.telemetry,
      hooks: {
        beforeRead: () => {
          throw new Error(`disk full while reading ${USER}`);
        },
      },
    });
    // The read's error becomes a tool error the model sees; the run goes on. Invalid input throws.
    await service.submit({ turn: turnOf() });
    const error = await rejection(service.submit({ turn: { ...turnOf(), segments: [] } }));
    expect(TurnServiceError.isInstance(error)).toBe(true);
    const invalid = otel.turnSpans().at(-1);
    expect(invalid?.attributes).toEqual({
      [ATTRIBUTES.turnOperation]: "submit",
      [ATTRIBUTES.turnStatus]: "error",
      [ATTRIBUTES.turnReplayed]: false,
      [ATTRIBUTES.errorType]: "TurnServiceError",
    });
    expect(invalid?.status.code).toBe(SpanStatusCode.ERROR);
    for (const span of otel.all()) expect(spanText(span)).not.toContain("disk full");
  });
});

describe("a failed run's cause", () => {
  it("a provider outage: the submit span is ERROR, names the error's class and records the exception, never the provider's text", async () => {
    const otel = sdk();
    const { service } = serviceHarness({
      store: new InMemoryGuardrailStore(),
      telemetry: otel.telemetry,
      responder: () => {
        throw new RangeError(`provider down while reading ${USER}`);
      },
      service: { logger: { warn: () => undefined } },
    });
    expect(await service.submit({ turn: turnOf() })).toMatchObject({ status: "failed", code: "run_failed", error: "RangeError", retryable: true });
    const span = only(otel.turnSpans());
    expect(span.status.code).toBe(SpanStatusCode.ERROR);
    // LangChain's MiddlewareError takes the name of what it wraps, and keeps it as its cause.
    expect(span.attributes[ATTRIBUTES.errorType]).toBe("RangeError");
    expect(span.events.map((event) => [event.name, event.attributes])).toEqual([
      ["exception", { "exception.type": "RangeError", "exception.message": "RangeError (cause: RangeError)" }],
    ]);
    for (const each of otel.all()) expect(spanText(each)).not.toContain("provider down");
  });
});

describe("what never reaches a turn span", () => {
  it("no user text, argument value, answer text, turn id or principal on any span", async () => {
    const otel = sdk();
    const { service } = serviceHarness({ store: new InMemoryGuardrailStore(), approvals: true, telemetry: otel.telemetry });
    const paused = awaiting(await service.submit({ turn: turnOf() }));
    await service.decide({ approvalId: paused.approvals[0]?.approvalId ?? "", principal: "alice", decision: { decision: "approve" } });
    await service.submit({ turn: turnOf() });
    expect(otel.turnSpans()).toHaveLength(3);
    for (const span of otel.all()) {
      const text = spanText(span);
      for (const secret of [USER, NEW_BODY, "oat milk", "req-0001", "alice", "note-7"]) expect(text).not.toContain(secret);
    }
  });
});

describe("telemetry never changes a turn", () => {
  const warnings: string[] = [];
  const logger: GuardrailLogger = {
    warn: (message) => {
      warnings.push(message);
    },
  };
  const noCalls: GuardrailTelemetry["observeCall"] = (_call, run) =>
    run({
      step: () => undefined,
      end: () => undefined,
    });
  const observer: TelemetryTurnObserver = { approvalWait: () => undefined, end: () => undefined };

  it.each<[string, GuardrailTelemetry]>([
    ["throws before running", { observeCall: noCalls, observeTurn: () => Promise.reject(new Error("exporter down")) }],
    ["never runs the operation", { observeCall: noCalls, observeTurn: () => Promise.resolve(undefined as never) }],
    [
      "runs it twice",
      {
        observeCall: noCalls,
        observeTurn: async (_turn, run) => {
          await run(observer);
          return run(observer);
        },
      },
    ],
    [
      "throws from end",
      {
        observeCall: noCalls,
        observeTurn: (_turn, run) =>
          run({
            approvalWait: () => undefined,
            end: () => {
              throw new Error("exporter down");
            },
          }),
      },
    ],
    ["has no observeTurn (tool calls only)", { observeCall: noCalls }],
  ])("a backend that %s: the turn runs once, one write, and answers as without telemetry", async (_name, telemetry) => {
    warnings.length = 0;
    const { service, notes, model } = serviceHarness({ store: new InMemoryGuardrailStore(), telemetry, service: { logger } });
    expect(await service.submit({ turn: turnOf() })).toMatchObject({ status: "completed", replayed: false });
    expect(model.calls).toBe(3);
    expect(notes.writes).toHaveLength(1);
    expect(await service.submit({ turn: turnOf() })).toMatchObject({ status: "completed", replayed: true });
    expect(model.calls).toBe(3);
    if (_name.startsWith("throws")) expect(warnings).toContain("telemetry failed");
  });
});
