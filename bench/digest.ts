/**
 * `digest(x)` against the cheapest non-canonical alternative,
 * `createHash("sha256").update(JSON.stringify(x)).digest("hex")`, on three inputs.
 *
 * Both run in one process in interleaved rounds (the order alternating each round), so drift in CPU
 * frequency, GC and noisy neighbours hits both sides alike; the result is the median ns/op over the
 * rounds. Run directly with `npx tsx bench/digest.ts` (`--cpu` to time with process CPU time, which
 * a busy machine disturbs less than the wall clock).
 */
import { createHash } from "node:crypto";
import { pathToFileURL } from "node:url";
import { digest } from "../src/digest.js";

export interface DigestBenchRow {
  case: string;
  baselineNs: number;
  subjectNs: number;
  ratio: number;
}

export interface DigestBenchOptions {
  /** Rounds per case; each round times one batch of each side. Default 15. */
  rounds?: number;
  /** Target duration of one batch in milliseconds. Default 20. */
  batchMs?: number;
  /** Warm-up per case before timing, in milliseconds. Default 500. */
  warmupMs?: number;
  /**
   * "wall" (default) times with the monotonic clock; "cpu" with this process's CPU time (user +
   * system, GC threads included), which time-sharing with other processes distorts less.
   */
  clock?: "wall" | "cpu";
}

interface BenchCase {
  name: string;
  value: unknown;
}

function benchCases(): BenchCase[] {
  const flat: Record<string, string | number> = {};
  for (let i = 0; i < 10_000; i++) flat[`k${i}`] = i % 2 === 0 ? i : `value-${i}`;

  const sentence = "The quick brown fox jumps over the lazy dog; 0123456789. ";
  const oneMiB = sentence.repeat(Math.ceil(2 ** 20 / sentence.length)).slice(0, 2 ** 20);

  return [
    { name: "small tool arguments", value: { documentId: "doc-1", title: "Field notes", expectedRevision: 0 } },
    { name: "flat object, 10,000 keys", value: flat },
    { name: "1 MiB string", value: oneMiB },
  ];
}

/** Keeps results observable so the optimizer cannot drop the work being timed. */
let sink = 0;

function baseline(value: unknown): string {
  return createHash("sha256").update(JSON.stringify(value)).digest("hex");
}

type Clock = "wall" | "cpu";

/** A reading of `clock` in nanoseconds. */
function now(clock: Clock): number {
  if (clock === "wall") return Number(process.hrtime.bigint());
  const { user, system } = process.cpuUsage();
  return (user + system) * 1000;
}

/** Nanoseconds per call over `iterations` back-to-back calls. */
function timeBatch(fn: (value: unknown) => string, value: unknown, iterations: number, clock: Clock): number {
  const start = now(clock);
  for (let i = 0; i < iterations; i++) sink ^= fn(value).charCodeAt(0);
  return (now(clock) - start) / iterations;
}

/**
 * Runs both sides for about `warmupMs` first, so the rounds time optimized code (JIT tiers, inline
 * caches) rather than the warm-up, then sizes a batch so the slower side takes about `batchMs`.
 */
function calibrate(value: unknown, batchMs: number, warmupMs: number, clock: Clock): number {
  let iterations = 1;
  let slowestNs: number;
  const end = performance.now() + warmupMs;
  do {
    slowestNs = Math.max(timeBatch(baseline, value, iterations, clock), timeBatch(digest, value, iterations, clock));
    if (slowestNs * iterations < 2e6) iterations *= 2;
  } while (performance.now() < end);
  return Math.max(1, Math.round((batchMs * 1e6) / slowestNs));
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

export async function benchDigest(options: DigestBenchOptions = {}): Promise<DigestBenchRow[]> {
  const rounds = options.rounds ?? 15;
  const batchMs = options.batchMs ?? 20;
  const warmupMs = options.warmupMs ?? 500;
  const clock = options.clock ?? "wall";
  const rows: DigestBenchRow[] = [];
  for (const { name, value } of benchCases()) {
    const iterations = calibrate(value, batchMs, warmupMs, clock);
    const baselineNs: number[] = [];
    const subjectNs: number[] = [];
    for (let round = 0; round < rounds; round++) {
      if (round % 2 === 0) {
        baselineNs.push(timeBatch(baseline, value, iterations, clock));
        subjectNs.push(timeBatch(digest, value, iterations, clock));
      } else {
        subjectNs.push(timeBatch(digest, value, iterations, clock));
        baselineNs.push(timeBatch(baseline, value, iterations, clock));
      }
      // Let timers and I/O run between rounds instead of starving the process.
      await new Promise((resolve) => setImmediate(resolve));
    }
    const b = median(baselineNs);
    const s = median(subjectNs);
    rows.push({ case: name, baselineNs: b, subjectNs: s, ratio: s / b });
  }
  if (sink === -1) console.log(sink);
  return rows;
}

const entry = process.argv[1];
if (entry !== undefined && import.meta.url === pathToFileURL(entry).href) {
  const rows = await benchDigest({ clock: process.argv.includes("--cpu") ? "cpu" : "wall" });
  console.table(
    rows.map((row) => ({
      case: row.case,
      "baseline ns/op": Math.round(row.baselineNs),
      "digest ns/op": Math.round(row.subjectNs),
      ratio: row.ratio.toFixed(2),
    })),
  );
}
