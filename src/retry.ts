/**
 * The retry boundary: the one layer that retries a tool. Only a thrown `RetryableToolError` is
 * retried, at most five attempts in all, with sleeps that end early when the run is aborted.
 */
import { z } from "zod";
import { ConfigurationError, RetryableToolError } from "./errors.js";

/** `runWithRetryBoundary`'s options: the retry half of a tool policy. */
export interface RetryBoundaryOptions {
  /** Attempts in total, 1 to 5. Default 1: no retry. */
  readonly maxAttempts?: number;
  /** Wait before the second attempt, doubled for each later one. Default 200. */
  readonly delayMs?: number;
  /** Aborting stops the boundary: no further attempt starts and a pending sleep ends. */
  readonly signal?: AbortSignal | undefined;
}

const OptionsSchema = z.strictObject({
  maxAttempts: z.int().min(1).max(5).optional(),
  delayMs: z.int().min(0).max(60_000).optional(),
  signal: z.custom<AbortSignal>((value) => value instanceof AbortSignal).optional(),
});

/** No single wait is longer than this, however many doublings or however large a retryAfterMs. */
const MAX_DELAY_MS = 60_000;

/**
 * Runs `operation` (given the 1-based attempt number) and retries it while it throws
 * `RetryableToolError` and attempts remain. Any other error, and the last retryable one, is
 * rethrown as it is.
 */
export async function runWithRetryBoundary<T>(
  operation: (attempt: number) => Promise<T>,
  options: RetryBoundaryOptions = {},
): Promise<T> {
  const parsed = OptionsSchema.safeParse(options);
  if (!parsed.success) {
    throw new ConfigurationError(`invalid retry options: ${z.prettifyError(parsed.error)}`);
  }
  const { maxAttempts = 1, delayMs = 200, signal } = parsed.data;
  return retryBoundary(operation, maxAttempts, delayMs, signal);
}

/** @internal `runWithRetryBoundary` for options validated once, up front (the middleware's). */
export async function retryBoundary<T>(
  operation: (attempt: number) => Promise<T>,
  maxAttempts: number,
  delayMs: number,
  signal: AbortSignal | undefined,
): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    signal?.throwIfAborted();
    try {
      return await operation(attempt);
    } catch (error) {
      if (attempt >= maxAttempts || !RetryableToolError.isInstance(error)) throw error;
      await sleep(retryDelayMs(attempt, delayMs, error), signal);
    }
  }
}

/** @internal The wait after failed attempt `attempt`: doubling from `delayMs`, at least `retryAfterMs`, capped. */
export function retryDelayMs(attempt: number, delayMs: number, error: RetryableToolError): number {
  const backoff = Math.min(delayMs * 2 ** (attempt - 1), MAX_DELAY_MS);
  return Math.max(backoff, Math.min(error.retryAfterMs ?? 0, MAX_DELAY_MS));
}

/** @internal Resolves after `ms`, or rejects with the signal's reason as soon as it is aborted. */
export function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason as Error);
      return;
    }
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason as Error);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
