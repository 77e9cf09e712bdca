/**
 * OpenTelemetry through the real `createAgent` loop, recorded by the SDK's in-memory span
 * exporter and an in-memory metric reader: one span per governed tool call (tool, kind, decision,
 * code, turn key), events for the claim, the settlement and the replay, and the counters (tool
 * calls, refusals by code, claims, replays, unknown outcomes, approval waits). Argument values
 * and results appear on no span unless `includeValues`. A telemetry backend that throws changes
 * no decision and runs nothing twice. Side effects are counted by the tools (`service.writes`).
 */
import { HumanMessage } from "@langchain/core/messages";
import { Command, MemorySaver } from "@langchain/langgraph";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { context, metrics, SpanStatusCode, trace, type Attributes } from "@opentelemetry/api";
import { MeterProvider, MetricReader, type DataPoint } from "@opentelemetry/sdk-metrics";
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from "@opentelemetry/sdk-trace-base";
import { createAgent, tool } from "langchain";
import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import {
  allowAllCalls,
  ConfigurationError,
  createDocumentGuardrails,
  createToolGuardrails,
  effectKey,
  InMemoryGuardrailStore,
  requireApproval,
  RetryableToolError,
  turnKey,
  type GuardrailTelemetry,
  type TelemetryCallEnd,
} from "arkah-agent-guardrails";
import { ATTRIBUTES, EVENTS, METRICS, openTelemetry, SPAN_NAME, type OpenTelemetryOptions } from "arkah-agent-guardrails/otel";
import { ScriptedModel, type ScriptStep } from "arkah-agent-guardrails/testing";
import {
  admit,
  DocumentService,
  guardedAgent,
  invokeTurn,
  outcomeOf,
  read,
  rename,
  silentLogger,
  TOOL_POLICIES,
  turnInput,
  type GuardedAgentOptions,
} from "../support/fixtures.js";

// ---------------------------------------------------------------------------------------------
// Local helpers: an SDK that keeps everything in memory

/** A metric reader collected on demand. */
class InMemoryMetricReader extends MetricReader {
  protected override onForceFlush(): Promise<void> {
    return Promise.resolve();
  }
  protected override onShutdown(): Promise<void> {
    return Promise.resolve();
  }
}

/** A title no span may hold unless `includeValues`: it is an argument and, once written, in every result. */
const SECRET_TITLE = "Quarterly plan 7731";

function sdk() {
  const exporter = new InMemorySpanExporter();
  const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  const reader = new InMemoryMetricReader();
  const meterProvider = new MeterProvider({ readers: [reader] });
  return {
    tracerProvider,
    meterProvider,
    telemetry: (options: OpenTelemetryOptions = {}) => openTelemetry({ tracerProvider, meterProvider, ...options }),
    /** The guardrails' spans. */
    spans: (): ReadableSpan[] => exporter.getFinishedSpans().filter((span) => span.name === SPAN_NAME),
    /** Every span the SDK finished, the guardrails' and the tools' own. */
    all: (): ReadableSpan[] => exporter.getFinishedSpans(),
    /** The sum of a counter's data points whose attributes include `where`. */
    async count(name: string, where: Attributes = {}): Promise<number> {
      const { resourceMetrics } = await reader.collect();
      const points = resourceMetrics.scopeMetrics
        .flatMap((scope) => scope.metrics)
        .filter((metric) => metric.descriptor.name === name)
        .flatMap((metric) => metric.dataPoints as DataPoint<number>[]);
      return points
        .filter((point) => Object.entries(where).every(([key, value]) => point.attributes[key] === value))
        .reduce((sum, point) => sum + point.value, 0);
    },
  };
}

type Sdk = ReturnType<typeof sdk>;

/** The span of the call with this id (exactly one, unless `index` picks one of several). */
function spanOf(sdk: Sdk, callId: string, index = 0): ReadableSpan {
  const found = sdk.spans().filter((span) => span.attributes[ATTRIBUTES.toolCallId] === callId);
  const span = found[index];
  if (span === undefined) throw new Error(`no span ${String(index)} for call ${callId} (found ${String(found.length)})`);
  return span;
}

const eventsOf = (span: ReadableSpan) => span.events.map((event) => ({ name: event.name, attributes: event.attributes ?? {} }));

/** Every string a span carries: its name, attribute values, event names and event attribute values. */
function spanText(span: ReadableSpan): string {
  return JSON.stringify([span.name, span.attributes, span.events.map((event) => [event.name, event.attributes])]);
}

function agentWith(telemetry: GuardrailTelemetry, options: Omit<GuardedAgentOptions, "guardrails"> & { guardrails?: GuardedAgentOptions["guardrails"] }) {
  return guardedAgent({ ...options, guardrails: { telemetry, ...options.guardrails } });
}

const readWrite: ScriptStep[] = [
  { toolCalls: [read("r1")] },
  { toolCalls: [rename("w1", SECRET_TITLE)] },
  { content: "Renamed." },
];

afterEach(() => {
  trace.disable();
  metrics.disable();
  context.disable();
});

// ---------------------------------------------------------------------------------------------

describe("a span per governed tool call", () => {
  it("a read and a write: kind, decision, turn key, the claim and its settlement", async () => {
    const telemetry = sdk();
    const { agent, store, input, service } = agentWith(telemetry.telemetry(), { script: readWrite });
    await admit(store, input);
    await invokeTurn(agent, input);
    expect(service.writes).toBe(1);

    const readSpan = spanOf(telemetry, "r1");
    expect(readSpan.attributes).toMatchObject({
      [ATTRIBUTES.operation]: "execute_tool",
      [ATTRIBUTES.toolName]: "read_document",
      [ATTRIBUTES.kind]: "document-read",
      [ATTRIBUTES.decision]: "executed",
      [ATTRIBUTES.turnKey]: turnKey(input),
    });
    expect(readSpan.events).toEqual([]);
    expect(readSpan.status.code).toBe(SpanStatusCode.UNSET);

    const writeSpan = spanOf(telemetry, "w1");
    expect(writeSpan.attributes).toMatchObject({
      [ATTRIBUTES.toolName]: "rename_document",
      [ATTRIBUTES.kind]: "mutation",
      [ATTRIBUTES.decision]: "executed",
      [ATTRIBUTES.turnKey]: turnKey(input),
    });
    expect(writeSpan.attributes[ATTRIBUTES.mutationKey]).toMatch(/^[0-9a-f]{64}$/);
    expect(writeSpan.attributes[ATTRIBUTES.code]).toBeUndefined();
    expect(eventsOf(writeSpan)).toEqual([
      { name: EVENTS.claim, attributes: { [ATTRIBUTES.claimStatus]: "acquired" } },
      { name: EVENTS.settle, attributes: { [ATTRIBUTES.settleOutcome]: "complete", [ATTRIBUTES.settleApplied]: true } },
    ]);

    expect(await telemetry.count(METRICS.toolCalls, { [ATTRIBUTES.decision]: "executed" })).toBe(2);
    expect(await telemetry.count(METRICS.claims, { [ATTRIBUTES.claimStatus]: "acquired", [ATTRIBUTES.toolName]: "rename_document" })).toBe(1);
    expect(await telemetry.count(METRICS.refusals)).toBe(0);
    expect(await telemetry.count(METRICS.replays)).toBe(0);
    expect(await telemetry.count(METRICS.unknownOutcomes)).toBe(0);
  });

  it("a transport retry replays the write: a replay event and counter, nothing written again", async () => {
    const telemetry = sdk();
    const store = new InMemoryGuardrailStore();
    const service = new DocumentService();
    const first = agentWith(telemetry.telemetry(), { script: readWrite, store, service });
    await admit(store, first.input);
    await invokeTurn(first.agent, first.input);
    const retry = agentWith(telemetry.telemetry(), { script: readWrite, store, service });
    const messages = await invokeTurn(retry.agent, retry.input);
    expect(outcomeOf(messages, "w1").status).toBe("success");
    expect(service.writes).toBe(1);

    const replayed = spanOf(telemetry, "w1", 1);
    expect(replayed.attributes).toMatchObject({ [ATTRIBUTES.decision]: "replayed", [ATTRIBUTES.kind]: "mutation" });
    expect(replayed.attributes[ATTRIBUTES.mutationKey]).toBe(spanOf(telemetry, "w1", 0).attributes[ATTRIBUTES.mutationKey]);
    expect(eventsOf(replayed)).toEqual([
      { name: EVENTS.claim, attributes: { [ATTRIBUTES.claimStatus]: "replay" } },
      { name: EVENTS.replay, attributes: {} },
    ]);
    expect(await telemetry.count(METRICS.replays, { [ATTRIBUTES.toolName]: "rename_document" })).toBe(1);
    expect(await telemetry.count(METRICS.claims, { [ATTRIBUTES.claimStatus]: "replay" })).toBe(1);
    expect(await telemetry.count(METRICS.toolCalls, { [ATTRIBUTES.decision]: "replayed" })).toBe(1);
  });

  it("a side effect: kind side-effect, its effect key, the claim, settlement and replay as a mutation's", async () => {
    const telemetry = sdk();
    const sent: string[] = [];
    const notify = tool(
      ({ to }) => {
        sent.push(to);
        return "notified";
      },
      { name: "notify", description: "Notify someone.", schema: z.object({ to: z.string() }) },
    );
    const call = (id: string) => ({ id, name: "notify", args: { to: "ana" } });
    const { agent, store, input } = agentWith(telemetry.telemetry(), {
      script: [{ toolCalls: [call("n1")] }, { toolCalls: [call("n2")] }, { content: "Sent." }],
      extraTools: [notify],
      guardrails: { tools: { ...TOOL_POLICIES, notify: { kind: "side-effect" } } },
    });
    await admit(store, input);
    await invokeTurn(agent, input);
    expect(sent).toEqual(["ana"]);

    const first = spanOf(telemetry, "n1");
    expect(first.attributes).toMatchObject({ [ATTRIBUTES.kind]: "side-effect", [ATTRIBUTES.decision]: "executed" });
    expect(first.attributes[ATTRIBUTES.effectKey]).toBe(effectKey(input, { name: "notify", args: { to: "ana" } }));
    expect(first.attributes[ATTRIBUTES.mutationKey]).toBeUndefined();
    expect(eventsOf(first)).toEqual([
      { name: EVENTS.claim, attributes: { [ATTRIBUTES.claimStatus]: "acquired" } },
      { name: EVENTS.settle, attributes: { [ATTRIBUTES.settleOutcome]: "complete", [ATTRIBUTES.settleApplied]: true } },
    ]);
    const second = spanOf(telemetry, "n2");
    expect(second.attributes).toMatchObject({ [ATTRIBUTES.kind]: "side-effect", [ATTRIBUTES.decision]: "replayed" });
    expect(second.attributes[ATTRIBUTES.effectKey]).toBe(first.attributes[ATTRIBUTES.effectKey]);
    expect(eventsOf(second)).toEqual([
      { name: EVENTS.claim, attributes: { [ATTRIBUTES.claimStatus]: "replay" } },
      { name: EVENTS.replay, attributes: {} },
    ]);
    expect(await telemetry.count(METRICS.claims, { [ATTRIBUTES.toolName]: "notify" })).toBe(2);
    expect(await telemetry.count(METRICS.replays, { [ATTRIBUTES.toolName]: "notify" })).toBe(1);
  });

  it("a refusal: its code on the span and in the refusals counter; an unregistered tool's name stays out of metrics", async () => {
    const telemetry = sdk();
    const { agent, store, input, service } = agentWith(telemetry.telemetry(), {
      script: [
        { toolCalls: [rename("w1", SECRET_TITLE)] },
        { toolCalls: [{ id: "x1", name: "drop_database", args: { table: "users" } }] },
        { content: "I could not." },
      ],
    });
    await admit(store, input);
    const messages = await invokeTurn(agent, input);
    expect(outcomeOf(messages, "w1").code).toBe("read_required");
    expect(service.writes).toBe(0);

    const refused = spanOf(telemetry, "w1");
    expect(refused.attributes).toMatchObject({ [ATTRIBUTES.decision]: "refused", [ATTRIBUTES.code]: "read_required" });
    expect(refused.status.code).toBe(SpanStatusCode.UNSET);
    expect(refused.events).toEqual([]); // refused before any claim
    const unregistered = spanOf(telemetry, "x1");
    expect(unregistered.attributes).toMatchObject({
      [ATTRIBUTES.toolName]: "drop_database",
      [ATTRIBUTES.decision]: "refused",
      [ATTRIBUTES.code]: "unregistered_tool",
    });
    expect(unregistered.attributes[ATTRIBUTES.kind]).toBeUndefined();

    expect(await telemetry.count(METRICS.refusals, { [ATTRIBUTES.code]: "read_required", [ATTRIBUTES.toolName]: "rename_document" })).toBe(1);
    expect(await telemetry.count(METRICS.refusals, { [ATTRIBUTES.code]: "unregistered_tool" })).toBe(1);
    expect(await telemetry.count(METRICS.refusals, { [ATTRIBUTES.toolName]: "drop_database" })).toBe(0);
    expect(await telemetry.count(METRICS.claims)).toBe(0);
  });

  it("an unknown outcome: settled unknown, an error span, the unknown-outcomes counter", async () => {
    const telemetry = sdk();
    const { agent, store, input, service } = agentWith(telemetry.telemetry(), {
      script: readWrite,
      hooks: {
        afterWrite: () => {
          throw new Error(`write service timed out after writing ${SECRET_TITLE}`);
        },
      },
    });
    await admit(store, input);
    const messages = await invokeTurn(agent, input);
    expect(outcomeOf(messages, "w1").code).toBe("mutation_unknown");
    expect(service.writes).toBe(1);

    const failed = spanOf(telemetry, "w1");
    expect(failed.attributes).toMatchObject({ [ATTRIBUTES.decision]: "failed", [ATTRIBUTES.code]: "mutation_unknown" });
    expect(failed.attributes[ATTRIBUTES.errorType]).toBeUndefined(); // answered, the run goes on
    expect(failed.status.code).toBe(SpanStatusCode.ERROR);
    expect(failed.status.message).toBeUndefined();
    expect(eventsOf(failed)).toEqual([
      { name: EVENTS.claim, attributes: { [ATTRIBUTES.claimStatus]: "acquired" } },
      { name: EVENTS.settle, attributes: { [ATTRIBUTES.settleOutcome]: "unknown", [ATTRIBUTES.settleApplied]: true } },
    ]);
    expect(spanText(failed)).not.toContain(SECRET_TITLE);
    expect(await telemetry.count(METRICS.unknownOutcomes, { [ATTRIBUTES.toolName]: "rename_document" })).toBe(1);
    expect(await telemetry.count(METRICS.refusals, { [ATTRIBUTES.code]: "mutation_unknown" })).toBe(1);
  });

  it("an approval wait: the paused call's span and counter, then the resumed call runs once", async () => {
    const telemetry = sdk();
    const config = { configurable: { thread_id: "telemetry-approval" } };
    const { agent, store, input, service } = agentWith(telemetry.telemetry(), {
      script: readWrite,
      checkpointer: new MemorySaver(),
      guardrails: { guardrails: [requireApproval({ tools: ["rename_document"] })] },
    });
    await admit(store, input);
    const paused = await agent.invoke({ messages: [new HumanMessage(input.segments[0]?.content ?? "")] }, config);
    expect(paused.__interrupt__?.length).toBe(1);
    expect(service.writes).toBe(0);

    const waiting = spanOf(telemetry, "w1");
    expect(waiting.attributes).toMatchObject({ [ATTRIBUTES.decision]: "approval_wait", [ATTRIBUTES.kind]: "mutation" });
    expect(waiting.status.code).toBe(SpanStatusCode.UNSET);
    expect(waiting.attributes[ATTRIBUTES.errorType]).toBeUndefined();
    expect(waiting.events).toEqual([]);
    expect(await telemetry.count(METRICS.approvalWaits, { [ATTRIBUTES.toolName]: "rename_document" })).toBe(1);

    await agent.invoke(new Command({ resume: { decision: "approve" } }), config);
    expect(service.writes).toBe(1);
    const resumed = spanOf(telemetry, "w1", 1);
    expect(resumed.attributes[ATTRIBUTES.decision]).toBe("executed");
    expect(eventsOf(resumed).map((event) => event.name)).toEqual([EVENTS.claim, EVENTS.settle]);
    expect(await telemetry.count(METRICS.approvalWaits)).toBe(1);
    expect(await telemetry.count(METRICS.toolCalls, { [ATTRIBUTES.decision]: "approval_wait" })).toBe(1);
  });

  it("a retried read: one span, a retry event before the attempt that succeeds", async () => {
    const telemetry = sdk();
    let failures = 1;
    const { agent, store, input, service } = agentWith(telemetry.telemetry(), {
      script: [{ toolCalls: [read("r1")] }, { content: "Read." }],
      hooks: {
        beforeRead: () => {
          if (failures-- > 0) throw new RetryableToolError("document service busy");
        },
      },
      guardrails: { tools: { ...TOOL_POLICIES, read_document: { kind: "document-read", retry: { maxAttempts: 2, delayMs: 0 } } } },
    });
    await admit(store, input);
    await invokeTurn(agent, input);
    expect(service.reads).toBe(1);
    const retried = spanOf(telemetry, "r1");
    expect(retried.attributes[ATTRIBUTES.decision]).toBe("executed");
    expect(eventsOf(retried)).toEqual([{ name: EVENTS.retry, attributes: { [ATTRIBUTES.attempt]: 2 } }]);
  });
});

describe("values stay out unless includeValues", () => {
  it("without includeValues no span holds an argument value or a result", async () => {
    const telemetry = sdk();
    const store = new InMemoryGuardrailStore();
    const service = new DocumentService();
    const first = agentWith(telemetry.telemetry(), { script: readWrite, store, service });
    await admit(store, first.input);
    await invokeTurn(first.agent, first.input);
    // A replay and a read of the renamed document carry the title in their results too.
    const again = agentWith(telemetry.telemetry(), {
      script: [{ toolCalls: [read("r2")] }, { toolCalls: [rename("w1", SECRET_TITLE)] }, { content: "Renamed." }],
      store,
      service,
    });
    await invokeTurn(again.agent, again.input);
    expect(service.title).toBe(SECRET_TITLE);

    expect(telemetry.spans()).toHaveLength(4);
    for (const span of telemetry.spans()) {
      expect(spanText(span)).not.toContain(SECRET_TITLE);
      expect(spanText(span)).not.toContain("revision");
      expect(span.attributes[ATTRIBUTES.arguments]).toBeUndefined();
      expect(span.attributes[ATTRIBUTES.result]).toBeUndefined();
    }
  });

  it("with includeValues the span holds the parsed arguments and the result text", async () => {
    const telemetry = sdk();
    const { agent, store, input } = agentWith(telemetry.telemetry({ includeValues: true }), { script: readWrite });
    await admit(store, input);
    await invokeTurn(agent, input);
    const write = spanOf(telemetry, "w1");
    expect(JSON.parse(String(write.attributes[ATTRIBUTES.arguments]))).toEqual({ title: SECRET_TITLE, expectedRevision: 0 });
    expect(write.attributes[ATTRIBUTES.result]).toBe(JSON.stringify({ title: SECRET_TITLE, revision: 1 }));
    expect(spanOf(telemetry, "r1").attributes[ATTRIBUTES.result]).toBe('{"title":"Untitled","revision":0}');
  });
});

describe("context, globals and createToolGuardrails", () => {
  it("the tool runs inside its call's span: a span the tool opens is the call span's child", async () => {
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    const telemetry = sdk();
    const tracer = telemetry.tracerProvider.getTracer("write-service");
    const { agent, store, input } = agentWith(telemetry.telemetry(), {
      script: readWrite,
      hooks: {
        beforeWrite: () => {
          tracer.startSpan("write-service.rename").end();
        },
      },
    });
    await admit(store, input);
    await invokeTurn(agent, input);
    const write = spanOf(telemetry, "w1");
    const child = telemetry.all().find((span) => span.name === "write-service.rename");
    expect(child?.parentSpanContext?.spanId).toBe(write.spanContext().spanId);
    expect(child?.spanContext().traceId).toBe(write.spanContext().traceId);
    // The read ran in a span of its own, not inside the write's.
    expect(spanOf(telemetry, "r1").spanContext().spanId).not.toBe(write.spanContext().spanId);
  });

  it("openTelemetry() without providers uses the global ones, registered after it was built", async () => {
    const telemetry = openTelemetry();
    const { agent, store, input, service } = agentWith(telemetry, { script: readWrite });
    const registered = sdk();
    trace.setGlobalTracerProvider(registered.tracerProvider);
    metrics.setGlobalMeterProvider(registered.meterProvider);
    await admit(store, input);
    await invokeTurn(agent, input);
    expect(service.writes).toBe(1);
    expect(registered.spans().map((span) => span.attributes[ATTRIBUTES.decision])).toEqual(["executed", "executed"]);
    expect(await registered.count(METRICS.claims, { [ATTRIBUTES.claimStatus]: "acquired" })).toBe(1);
  });

  it("with no provider registered anywhere, everything runs and nothing is recorded", async () => {
    const { agent, store, input, service } = agentWith(openTelemetry(), { script: readWrite });
    await admit(store, input);
    const messages = await invokeTurn(agent, input);
    expect(outcomeOf(messages, "w1").status).toBe("success");
    expect(service.writes).toBe(1);
  });

  it("createToolGuardrails: a span per call, without a kind", async () => {
    const telemetry = sdk();
    let sent = 0;
    const send = tool(
      () => {
        sent += 1;
        return "sent";
      },
      { name: "send_email", description: "Send an email.", schema: z.object({ to: z.string() }) },
    );
    const agent = createAgent({
      model: new ScriptedModel([
        { toolCalls: [{ id: "e1", name: "send_email", args: { to: "ops@example.com" } }] },
        { toolCalls: [{ id: "e2", name: "send_email", args: { to: 42 } }] },
        { content: "Sent." },
      ]),
      tools: [send],
      middleware: [createToolGuardrails({ guardrails: [], tools: ["send_email"], authorize: allowAllCalls, telemetry: telemetry.telemetry() })],
    });
    await agent.invoke({ messages: [new HumanMessage("email ops")] });
    expect(sent).toBe(1);
    expect(spanOf(telemetry, "e1").attributes).toMatchObject({ [ATTRIBUTES.decision]: "executed", [ATTRIBUTES.toolName]: "send_email" });
    expect(spanOf(telemetry, "e1").attributes[ATTRIBUTES.kind]).toBeUndefined();
    expect(spanOf(telemetry, "e2").attributes).toMatchObject({ [ATTRIBUTES.decision]: "refused", [ATTRIBUTES.code]: "invalid_arguments" });
    expect(spanText(spanOf(telemetry, "e1"))).not.toContain("ops@example.com");
    expect(await telemetry.count(METRICS.refusals, { [ATTRIBUTES.code]: "invalid_arguments", [ATTRIBUTES.toolName]: "send_email" })).toBe(1);
  });
});

describe("telemetry never changes a decision", () => {
  const throwing = (where: "before" | "after" | "step" | "end"): GuardrailTelemetry => ({
    observeCall: async (_call, run) => {
      if (where === "before") throw new Error("exporter down");
      const result = await run({
        step: () => {
          if (where === "step") throw new Error("exporter down");
        },
        end: () => {
          if (where === "end") throw new Error("exporter down");
        },
      });
      if (where === "after") throw new Error("exporter down");
      return result;
    },
  });

  for (const where of ["before", "after", "step", "end"] as const) {
    it(`a backend that throws ${where} running the call: logged, the write runs once and is answered`, async () => {
      const logger = { warnings: [] as string[], warn(message: string) { this.warnings.push(message); } };
      const { agent, store, input, service } = agentWith(throwing(where), { script: readWrite, guardrails: { logger } });
      await admit(store, input);
      const messages = await invokeTurn(agent, input);
      expect(outcomeOf(messages, "w1").status).toBe("success");
      expect(service.writes).toBe(1);
      expect(logger.warnings).toContain("telemetry failed");
    });
  }

  it("a backend that never runs the call, or runs it twice: the pipeline runs once", async () => {
    const ends: TelemetryCallEnd[] = [];
    const observer = { step: () => undefined, end: (end: TelemetryCallEnd) => ends.push(end) };
    const twice: GuardrailTelemetry = {
      observeCall: async (_call, run) => {
        await run(observer);
        return run(observer);
      },
    };
    const skipping = { observeCall: () => Promise.resolve(undefined) } as unknown as GuardrailTelemetry;
    for (const telemetry of [twice, skipping]) {
      const { agent, store, input, service } = agentWith(telemetry, { script: readWrite });
      await admit(store, input);
      await invokeTurn(agent, input);
      expect(service.writes).toBe(1);
    }
    expect(ends.map((end) => end.decision)).toEqual(["executed", "executed"]);
  });

  it("a backend that runs the call only after it returned: the late run reuses the pipeline, never starts it again", async () => {
    const ends: TelemetryCallEnd[] = [];
    const observer = { step: () => undefined, end: (end: TelemetryCallEnd) => ends.push(end) };
    const late: Promise<unknown>[] = [];
    const telemetry: GuardrailTelemetry = {
      observeCall: (_call, run) => {
        late.push(new Promise((resolve) => setTimeout(resolve, 0)).then(() => run(observer)));
        return Promise.resolve(undefined as never);
      },
    };
    const { agent, store, input, service } = agentWith(telemetry, { script: readWrite });
    await admit(store, input);
    const messages = await invokeTurn(agent, input);
    await Promise.all(late);
    expect(outcomeOf(messages, "w1").status).toBe("success");
    expect(service.writes).toBe(1);
    expect(late).toHaveLength(2);
    expect(ends).toEqual([]); // no second pipeline, so no observer ever saw a decision
    const events = await store.readAudit({});
    expect(events.filter((event) => event.toolCallId === "w1").map((event) => event.decision)).toEqual(["executed"]);
  });

  it("a tool error that fails the run keeps its class as error.type, never its message", async () => {
    const telemetry = sdk();
    const { agent, store, input } = agentWith(telemetry.telemetry(), {
      script: readWrite,
      store: new (class extends InMemoryGuardrailStore {
        override settleMutation(): Promise<boolean> {
          return Promise.reject(new Error(`disk full while storing ${SECRET_TITLE}`));
        }
      })(),
    });
    await admit(store, input);
    await expect(invokeTurn(agent, input)).rejects.toThrow();
    const failed = spanOf(telemetry, "w1");
    expect(failed.attributes).toMatchObject({ [ATTRIBUTES.decision]: "error", [ATTRIBUTES.errorType]: "SettlementError" });
    expect(failed.status.code).toBe(SpanStatusCode.ERROR);
    expect(spanText(failed)).not.toContain(SECRET_TITLE);
  });
});

describe("options", () => {
  it("rejects a telemetry that is not a backend, and invalid openTelemetry options", () => {
    const base = {
      input: turnInput(),
      store: new InMemoryGuardrailStore(),
      userMessageLabel: "user",
      authorize: () => true,
      tools: { read_document: { kind: "document-read" as const } },
      logger: silentLogger,
    };
    expect(() => createDocumentGuardrails({ ...base, telemetry: {} as GuardrailTelemetry })).toThrow(ConfigurationError);
    expect(() =>
      createToolGuardrails({ guardrails: [], tools: ["x"], telemetry: { observeCall: 1 } as unknown as GuardrailTelemetry }),
    ).toThrow(ConfigurationError);
    expect(() => openTelemetry({ tracerProvider: {} as never })).toThrow(ConfigurationError);
    expect(() => openTelemetry({ includeValues: "yes" as unknown as boolean })).toThrow(ConfigurationError);
  });
});
