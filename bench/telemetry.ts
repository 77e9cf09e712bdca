/**
 * What the `telemetry` option costs in the guarded loop (bench/agent.ts: one admitted turn, N
 * steps of one `document-read` call each), against the same guarded loop without it, in the same
 * run, interleaved:
 *
 * - `openTelemetry()` with no SDK registered (the API's no-op tracer and meter): the cost a host
 *   pays for turning telemetry on before it installs an SDK, or in a process that never does.
 *   Target: at most 1.03x, i.e. lost in the loop's noise.
 * - `openTelemetry()` on a registered SDK (a `BasicTracerProvider` with a simple span processor
 *   into an exporter that drops the spans, and a `MeterProvider` with a reader): what recording a
 *   span and the counters per call costs. Reported.
 *
 * Run on its own: `pnpm tsx bench/run-telemetry.ts [--quick]`; `pnpm bench` includes it.
 */
import { ExportResultCode, type ExportResult } from "@opentelemetry/core";
import { MeterProvider, MetricReader } from "@opentelemetry/sdk-metrics";
import { BasicTracerProvider, SimpleSpanProcessor, type ReadableSpan, type SpanExporter } from "@opentelemetry/sdk-trace-base";
import { openTelemetry } from "arkah-agent-guardrails/otel";
import { benchGuardedLoop, type LoopOptions } from "./agent.js";
import { formatNs, type Interleaved, type ResultRow } from "./harness.js";

const LOOP_STEPS = 200;
/** At most this much slower with telemetry on and no SDK: within the guarded loop's noise. */
export const NO_SDK_TARGET = 1.03;

/** Receives every span and keeps none: the SDK's own cost, without an exporter's. */
class DroppingExporter implements SpanExporter {
  exported = 0;
  export(spans: ReadableSpan[], done: (result: ExportResult) => void): void {
    this.exported += spans.length;
    done({ code: ExportResultCode.SUCCESS });
  }
  shutdown(): Promise<void> {
    return Promise.resolve();
  }
}

class CollectingReader extends MetricReader {
  protected override onForceFlush(): Promise<void> {
    return Promise.resolve();
  }
  protected override onShutdown(): Promise<void> {
    return Promise.resolve();
  }
}

/** Telemetry on, no SDK registered, vs the same guarded loop without the option. */
export function benchTelemetryWithoutSdk(options: LoopOptions): Promise<Interleaved> {
  return benchGuardedLoop(options, { baseline: {}, subject: { telemetry: openTelemetry() } });
}

/** Telemetry on a registered (dropping) SDK vs the same guarded loop without the option. */
export async function benchTelemetryRecording(options: LoopOptions): Promise<Interleaved & { readonly spansPerCall: number }> {
  const exporter = new DroppingExporter();
  const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  const meterProvider = new MeterProvider({ readers: [new CollectingReader()] });
  const telemetry = openTelemetry({ tracerProvider, meterProvider });
  const result = await benchGuardedLoop(options, { baseline: {}, subject: { telemetry } });
  // A span per governed call, or the subject measured something else.
  const calls = options.steps * (result.subjectSamples.length + (options.warmup ?? 2));
  if (exporter.exported !== calls) throw new Error(`bench: ${String(exporter.exported)} spans for ${String(calls)} calls`);
  return { ...result, spansPerCall: exporter.exported / calls };
}

const ratioText = (value: number) => `${value.toFixed(3)}x`;
const paired = (result: Interleaved) =>
  `median of per-round ratios ${ratioText(result.pairedRatio)}; CPU time ${formatNs(result.cpu.baseline)} → ` +
  `${formatNs(result.cpu.subject)}; ${String(result.baselineSamples.length)} rounds`;

/** Both rows, as `pnpm bench` prints them. */
export async function benchTelemetry(options: { readonly quick: boolean; readonly log: (line: string) => void }): Promise<ResultRow[]> {
  const rounds: LoopOptions = options.quick
    ? { steps: LOOP_STEPS, rounds: 2, warmup: 1 }
    : { steps: LOOP_STEPS, rounds: 60, minRounds: 10, budgetMs: 30_000, warmup: 3 };
  options.log(`  telemetry: openTelemetry() with no SDK registered vs no telemetry option (${String(LOOP_STEPS)} steps)`);
  const off = await benchTelemetryWithoutSdk(rounds);
  options.log("  telemetry: openTelemetry() on a registered SDK vs no telemetry option");
  const on = await benchTelemetryRecording(rounds);
  return [
    {
      benchmark: `telemetry on, no SDK registered, per tool call (${String(LOOP_STEPS)} steps)`,
      baseline: `${formatNs(off.baseline)}/call`,
      subject: `${formatNs(off.subject)}/call`,
      ratio: ratioText(off.ratio),
      cpuRatio: ratioText(off.cpu.ratio),
      target: `≤ ${NO_SDK_TARGET.toFixed(2)}x`,
      pass: off.ratio <= NO_SDK_TARGET,
      note: `adds ${formatNs(off.pairedDifference)} ± ${formatNs(off.pairedDifferenceError)} per call; ${paired(off)}`,
    },
    {
      benchmark: `telemetry on a registered SDK (span + counters per call), per tool call (${String(LOOP_STEPS)} steps)`,
      baseline: `${formatNs(on.baseline)}/call`,
      subject: `${formatNs(on.subject)}/call`,
      ratio: ratioText(on.ratio),
      cpuRatio: ratioText(on.cpu.ratio),
      target: "(reported)",
      pass: true,
      note: `adds ${formatNs(on.pairedDifference)} ± ${formatNs(on.pairedDifferenceError)} per call; ${paired(on)}`,
    },
  ];
}
