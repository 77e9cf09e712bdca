/**
 * Shared timing helpers for the benchmarks (not timed tests: nothing here asserts).
 *
 * Every figure is a ratio of a subject against a baseline measured in the same process, in
 * interleaved rounds. A round times one sample of each side; the order flips every round
 * (B S, S B, B S, ...) so a drift in CPU frequency, GC pressure or a noisy neighbour hits both
 * sides alike. Each side reports the median of its samples, after warm-up rounds that are thrown
 * away. A full GC runs before every sample so one side's garbage is not collected on the other's
 * clock.
 */
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";

/** Wall-clock and CPU nanoseconds of one timed region (or per unit of work, see `per`). */
export interface Measurement {
  readonly wall: number;
  /**
   * The process's CPU time (user + system, all threads) over the same region. On a shared
   * machine it is far less disturbed by other processes than wall-clock time, so it is reported
   * beside it as a cross-check; the targets apply to wall-clock time.
   */
  readonly cpu: number;
}

/** One timed sample: does its own (untimed) setup and returns its measurement per unit of work. */
export type Sample = () => Promise<Measurement>;

/** How many rounds to run; every benchmark's options extend this. */
export interface RoundOptions {
  /** Measured rounds; each takes one sample of each side. */
  readonly rounds: number;
  /**
   * Optional time budget in ms for the measured rounds: once spent, stop after `minRounds`
   * (so a loaded machine shortens the run instead of blowing the suite's time limit).
   */
  readonly budgetMs?: number;
  /** Default: `rounds`. Only used with `budgetMs`. */
  readonly minRounds?: number;
  /** Rounds run first and discarded (JIT warm-up, caches). Default 2. */
  readonly warmup?: number;
  /**
   * A full GC before every sample, so no side pays another's garbage (default true). It also puts
   * every sample just after a full GC, which no server sees: the read loop takes about twice as
   * long per call with it (bench/run-loop.ts --no-gc shows the loop without it).
   */
  readonly collectGarbage?: boolean;
}

export interface InterleaveOptions extends RoundOptions {
  readonly baseline: Sample;
  readonly subject: Sample;
  /** Called after each measured round, e.g. to print progress. */
  readonly onRound?: (round: number) => void;
}

export interface Interleaved {
  /** Median wall-clock ns per unit. */
  readonly baseline: number;
  readonly subject: number;
  /** median(subject) / median(baseline), wall clock. */
  readonly ratio: number;
  /** The median of the per-round wall-clock ratios: a cross-check pairing neighbouring samples. */
  readonly pairedRatio: number;
  /** The median of the per-round differences subject − baseline, wall-clock ns per unit. */
  readonly pairedDifference: number;
  /** Standard error of `pairedDifference` (see `standardErrorOfMedian`): its noise. */
  readonly pairedDifferenceError: number;
  /** The same medians, ratio and paired difference (with its standard error) in CPU time. */
  readonly cpu: {
    readonly baseline: number;
    readonly subject: number;
    readonly ratio: number;
    readonly pairedDifference: number;
    readonly pairedDifferenceError: number;
  };
  readonly baselineSamples: readonly Measurement[];
  readonly subjectSamples: readonly Measurement[];
}

let gcFunction: (() => void) | undefined;

/** Runs a full GC when the runtime allows exposing it (it does on Node 20); otherwise nothing. */
export function collectGarbage(): void {
  if (gcFunction === undefined) {
    try {
      setFlagsFromString("--expose-gc");
      gcFunction = runInNewContext("gc") as () => void;
    } catch {
      gcFunction = () => undefined;
    }
  }
  gcFunction();
}

/** Yields to the event loop so timers and pending I/O run outside the timed regions. */
export function yieldToEventLoop(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/** Wall-clock and CPU nanoseconds `fn` takes. */
export async function measure(fn: () => Promise<unknown>): Promise<Measurement> {
  const cpuStart = process.cpuUsage();
  const start = process.hrtime.bigint();
  await fn();
  const wall = Number(process.hrtime.bigint() - start);
  const cpu = process.cpuUsage(cpuStart);
  return { wall, cpu: (cpu.user + cpu.system) * 1e3 };
}

/** A measurement per unit of work. */
export function per(measurement: Measurement, units: number): Measurement {
  return { wall: measurement.wall / units, cpu: measurement.cpu / units };
}

export function median(values: readonly number[]): number {
  if (values.length === 0) throw new Error("median of nothing");
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1
    ? (sorted[mid] as number)
    : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}

/** The value at quantile `q` (0..1) of `values`, linearly interpolated. */
export function quantile(values: readonly number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  const position = (sorted.length - 1) * q;
  const low = Math.floor(position);
  const high = Math.ceil(position);
  const lowValue = sorted[low] as number;
  return lowValue + ((sorted[high] as number) - lowValue) * (position - low);
}

/**
 * A robust standard error of the median: 1.2533 σ / √n, with σ estimated from the interquartile
 * range (IQR / 1.349) so that a few preempted samples do not inflate it.
 */
export function standardErrorOfMedian(values: readonly number[]): number {
  if (values.length < 2) return Number.POSITIVE_INFINITY;
  const sigma = (quantile(values, 0.75) - quantile(values, 0.25)) / 1.349;
  return (1.2533 * sigma) / Math.sqrt(values.length);
}

async function sample(fn: Sample, gc = true): Promise<Measurement> {
  await yieldToEventLoop();
  if (gc) collectGarbage();
  return fn();
}

/** Interleaved rounds of `baseline` and `subject`; see the module comment. */
export async function interleave(options: InterleaveOptions): Promise<Interleaved> {
  const [baselineSamples, subjectSamples] = await interleaveSides([options.baseline, options.subject], options);
  return summarize(baselineSamples as Measurement[], subjectSamples as Measurement[]);
}

/**
 * Interleaved rounds of several sides: each round takes one sample of every side, in an order
 * rotated by one every round (A B C, B C A, C A B, ...). Answers each side's samples, in order.
 */
export async function interleaveSides(sides: readonly Sample[], options: RoundOptions & { readonly onRound?: (round: number) => void }): Promise<Measurement[][]> {
  const warmup = options.warmup ?? 2;
  const taken: Measurement[][] = sides.map(() => []);
  const minRounds = Math.min(options.minRounds ?? options.rounds, options.rounds);
  let started = 0;
  for (let round = -warmup; round < options.rounds; round++) {
    if (round === 0) started = performance.now();
    if (options.budgetMs !== undefined && round >= minRounds && performance.now() - started > options.budgetMs) break;
    const results: Measurement[] = [];
    // Two sides flip every round (B S, S B); more rotate.
    for (let step = 0; step < sides.length; step++) {
      const index = (step + round + warmup) % sides.length;
      results[index] = await sample(sides[index] as Sample, options.collectGarbage);
    }
    if (round < 0) continue;
    results.forEach((measurement, index) => taken[index]?.push(measurement));
    options.onRound?.(round);
  }
  return taken;
}

/** Medians, ratios and paired differences of two sides' samples, taken in the same rounds. */
export function summarize(baselineSamples: readonly Measurement[], subjectSamples: readonly Measurement[]): Interleaved {
  const pairRatios = subjectSamples.map((s, index) => s.wall / (baselineSamples[index] as Measurement).wall);
  const pairDifferences = subjectSamples.map((s, index) => s.wall - (baselineSamples[index] as Measurement).wall);
  const cpuPairDifferences = subjectSamples.map((s, index) => s.cpu - (baselineSamples[index] as Measurement).cpu);
  const baseline = median(baselineSamples.map((m) => m.wall));
  const subject = median(subjectSamples.map((m) => m.wall));
  const cpuBaseline = median(baselineSamples.map((m) => m.cpu));
  const cpuSubject = median(subjectSamples.map((m) => m.cpu));
  return {
    baseline,
    subject,
    ratio: subject / baseline,
    pairedRatio: median(pairRatios),
    pairedDifference: median(pairDifferences),
    pairedDifferenceError: standardErrorOfMedian(pairDifferences),
    cpu: {
      baseline: cpuBaseline,
      subject: cpuSubject,
      ratio: cpuSubject / cpuBaseline,
      pairedDifference: median(cpuPairDifferences),
      pairedDifferenceError: standardErrorOfMedian(cpuPairDifferences),
    },
    baselineSamples,
    subjectSamples,
  };
}

/** One line of the report. Values are preformatted with their unit. */
export interface ResultRow {
  readonly benchmark: string;
  readonly baseline: string;
  readonly subject: string;
  /** The figure the target applies to, formatted. */
  readonly ratio: string;
  /** The same ratio in CPU time, a cross-check ("" when not measured). */
  readonly cpuRatio?: string;
  readonly target: string;
  readonly pass: boolean;
  /** Extra detail for the notes under the table. */
  readonly note?: string;
}

export function formatNs(ns: number): string {
  if (ns < 0) return `−${formatNs(-ns)}`;
  if (ns >= 1e9) return `${(ns / 1e9).toFixed(2)} s`;
  if (ns >= 1e6) return `${(ns / 1e6).toFixed(2)} ms`;
  if (ns >= 1e3) return `${(ns / 1e3).toFixed(1)} µs`;
  return `${ns.toFixed(0)} ns`;
}

export function formatRate(perSecond: number): string {
  return `${Math.round(perSecond).toLocaleString("en-US")}/s`;
}

export function log(message: string): void {
  process.stderr.write(`${message}\n`);
}

/** Just the round settings of a benchmark's options. */
export function roundOptions(options: RoundOptions): RoundOptions {
  const { rounds, warmup, budgetMs, minRounds, collectGarbage: gc } = options;
  return { rounds, warmup, budgetMs, minRounds, collectGarbage: gc };
}

const COLUMNS = ["benchmark", "baseline", "subject", "ratio", "target", "result", "CPU-time ratio"] as const;

function cells(row: ResultRow): string[] {
  return [row.benchmark, row.baseline, row.subject, row.ratio, row.target, row.pass ? "pass" : "MISS", row.cpuRatio ?? ""];
}

/** A Markdown table, padded so it also reads well on a terminal. */
export function renderTable(rows: readonly ResultRow[]): string {
  const body = rows.map(cells);
  const widths = COLUMNS.map((column, i) => Math.max(column.length, ...body.map((line) => (line[i] ?? "").length)));
  const line = (values: readonly string[]) =>
    `| ${values.map((value, i) => value.padEnd(widths[i] ?? 0)).join(" | ")} |`;
  return [line(COLUMNS), line(widths.map((width) => "-".repeat(width))), ...body.map(line)].join("\n");
}

export function renderNotes(rows: readonly ResultRow[]): string {
  return rows
    .filter((row) => row.note !== undefined)
    .map((row) => `- ${row.benchmark}: ${row.note ?? ""}`)
    .join("\n");
}
