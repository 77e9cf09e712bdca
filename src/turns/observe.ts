/**
 * Where telemetry hooks into the turn service: each `submit` and `decide` runs inside the backend's
 * `observeTurn` (so the tool-call spans of the run it makes nest under the operation's), notes the
 * approval waits it resumes, and ends with its answer's status. As for tool calls
 * (src/pipeline/observe.ts), the operation runs exactly once whatever the backend does, and a
 * backend that throws is logged and ignored.
 */
import { sanitizeError, type GuardrailLogger, type LoggedError } from "../logger.js";
import type { GuardrailTelemetry, TelemetryApprovalWait, TelemetryTurn, TelemetryTurnEnd, TelemetryTurnObserver } from "../telemetry.js";

/** What an operation tells telemetry on its way: its turn once known, the approval waits its resume answers. */
export interface TurnNotes {
  turn(turnKey: string): void;
  approvalWait(wait: TelemetryApprovalWait): void;
  /** A run of the operation failed (its answer is `failed`): the error, as the logger gets it. */
  failure(error: LoggedError): void;
}

/** Notes for an operation nobody observes. */
export const IGNORED: TurnNotes = { turn: () => undefined, approvalWait: () => undefined, failure: () => undefined };

type Settled<T> = { readonly value: T } | { readonly error: unknown };

/**
 * Runs `operation` under `telemetry.observeTurn`, if the backend has one; `ending` says how it
 * ended (never called when nobody observes).
 */
export async function observeTurn<T>(
  telemetry: GuardrailTelemetry | undefined,
  logger: GuardrailLogger,
  turn: TelemetryTurn,
  operation: (notes: TurnNotes) => Promise<T>,
  ending: (value: T) => Omit<TelemetryTurnEnd, "errorType">,
): Promise<T> {
  if (telemetry?.observeTurn === undefined) return operation(IGNORED);
  const warn = (error: unknown) => {
    logger.warn("telemetry failed", { operation: turn.operation, error });
  };
  let settledOnce: Promise<Settled<T>> | undefined;
  const observed = async (observer: TelemetryTurnObserver): Promise<Settled<T>> => {
    let turnKey: string | undefined;
    let exception: LoggedError | undefined;
    const notes: TurnNotes = {
      turn: (key) => {
        turnKey = key;
      },
      failure: (error) => {
        exception = error;
      },
      approvalWait: (wait) => {
        try {
          observer.approvalWait(wait);
        } catch (error) {
          warn(error);
        }
      },
    };
    const settled = await settle(() => operation(notes));
    try {
      observer.end("value" in settled ? ended(ending(settled.value), turnKey, exception) : failed(turnKey, settled.error));
    } catch (error) {
      warn(error);
    }
    return settled;
  };
  const run = async (observer: TelemetryTurnObserver): Promise<T> => unwrap(await (settledOnce ??= observed(observer)));
  try {
    await telemetry.observeTurn(turn, run);
  } catch (error) {
    // The operation's own error, passed through, is no telemetry failure.
    const settled = settledOnce === undefined ? undefined : await settledOnce;
    if (settled === undefined || !("error" in settled) || settled.error !== error) warn(error);
  }
  // A backend that never ran the operation: run it here, unobserved.
  settledOnce ??= settle(() => operation(IGNORED));
  return unwrap(await settledOnce);
}

function ended(end: Omit<TelemetryTurnEnd, "errorType">, turnKey: string | undefined, exception: LoggedError | undefined): TelemetryTurnEnd {
  return { ...end, turnKey: end.turnKey ?? turnKey, errorType: exception?.name, ...(exception === undefined ? {} : { exception }) };
}

function failed(turnKey: string | undefined, error: unknown): TelemetryTurnEnd {
  const exception = sanitizeError(error);
  return { turnKey, status: "error", code: undefined, replayed: false, state: undefined, errorType: exception.name, exception };
}

async function settle<T>(operation: () => Promise<T>): Promise<Settled<T>> {
  try {
    return { value: await operation() };
  } catch (error) {
    return { error };
  }
}

function unwrap<T>(settled: Settled<T>): T {
  if ("error" in settled) throw settled.error;
  return settled.value;
}
