/**
 * A running turn's lease, kept while its run lives: renewed every third of the lease, so a live
 * worker is never taken over however long its run, and a dead one (no renewals) loses the turn
 * within about one lease. A renewal that answers false means another worker took the turn over:
 * the run is aborted through its signal (its outcome would not be stored anyway; a tool body in
 * flight is fenced by its claim, settled or left closed, never re-run on a guess). A renewal that
 * throws (the store is down) is reported and tried again at the next tick: the lease may still
 * hold, and if it runs out another worker takes over, as after a crash.
 */

/** What `keepLease` needs: how to renew, how often, the caller's signal, where failures go. */
export interface KeepLeaseOptions {
  /** One renewal: true while the lease is ours, false once another worker holds the turn. */
  readonly renew: () => Promise<boolean>;
  /** Milliseconds between renewals. */
  readonly everyMs: number;
  /** The caller's signal: the run's signal aborts with it too. */
  readonly signal?: AbortSignal | undefined;
  /** Told of a renewal that threw (or answered nothing valid); it is tried again at the next tick. */
  readonly failed: (error: unknown) => void;
}

/** A lease being kept: the run's signal, whether the lease was lost, and how to stop. */
export interface LeaseKeeper {
  /** Aborts when the caller's signal does, or when a renewal answered false (the lease was lost). */
  readonly signal: AbortSignal;
  /** Whether a renewal answered false: another worker holds the turn now. */
  readonly lost: () => boolean;
  /** Stops renewing (the run ended and its outcome was stored, or not); safe to call twice. */
  readonly stop: () => void;
}

/** Renews every `everyMs` from now until stopped; the timer never keeps the process alive. */
export function keepLease(options: KeepLeaseOptions): LeaseKeeper {
  const controller = new AbortController();
  const caller = options.signal;
  const forward = () => {
    controller.abort(caller?.reason);
  };
  if (caller?.aborted === true) forward();
  else caller?.addEventListener("abort", forward, { once: true });
  let stopped = false;
  let lost = false;
  let renewing = false;
  const tick = () => {
    // One renewal at a time: a slow store is not asked again before it answers.
    if (stopped || renewing) return;
    renewing = true;
    options.renew().then(
      (held) => {
        renewing = false;
        if (stopped || held) return;
        lost = true;
        controller.abort(new DOMException("another worker took the turn over: its lease was lost", "AbortError"));
      },
      (error: unknown) => {
        renewing = false;
        if (stopped) return;
        try {
          options.failed(error);
        } catch {
          // A logger that throws must not become an unhandled rejection.
        }
      },
    );
  };
  const timer = setInterval(tick, Math.max(1, options.everyMs));
  timer.unref();
  return {
    signal: controller.signal,
    lost: () => lost,
    stop: () => {
      if (stopped) return;
      stopped = true;
      clearInterval(timer);
      caller?.removeEventListener("abort", forward);
    },
  };
}
