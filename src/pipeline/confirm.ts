/**
 * Asking a tool's `confirm` about an unresolved claim: the shell around the host's function. It
 * gets the claim and a signal that aborts when the run is cancelled or after
 * `CONFIRM_TIMEOUT_MS`; whatever it answers is validated, and a throw, a timeout or an answer that
 * is not valid counts as `unknown` (the claim stays as it was), logged with the error's class only.
 * What an answer does to the claim is `confirmResolution` (src/decision/plan.ts).
 */
import { CONFIRM_TIMEOUT_MS, ConfirmAnswerSchema, type ConfirmAnswer, type ConfirmClaim, type ConfirmRequest } from "../contracts/index.js";
import type { GuardrailLogger } from "../logger.js";

const UNKNOWN: ConfirmAnswer = { outcome: "unknown" };

/** What goes into a warning about the claim: keys and names, never values. */
export type ConfirmLogFields = Readonly<Record<string, string | undefined>>;

/**
 * Asks `confirm` about `claim`; answers its validated answer, or `unknown` when it threw, timed
 * out, was cancelled or answered something that is not a valid answer.
 */
export async function askConfirm(
  confirm: ConfirmClaim,
  claim: Omit<ConfirmRequest, "signal">,
  options: { readonly signal: AbortSignal | undefined; readonly logger: GuardrailLogger; readonly log: ConfirmLogFields },
): Promise<ConfirmAnswer> {
  const timeout = AbortSignal.timeout(CONFIRM_TIMEOUT_MS);
  const signal = options.signal === undefined ? timeout : AbortSignal.any([options.signal, timeout]);
  let answer: unknown;
  try {
    answer = await untilAborted(() => confirm({ ...claim, signal } as ConfirmRequest), signal);
  } catch (error) {
    options.logger.warn("confirm failed; the claim stays as it was", { code: "confirm_failed", ...options.log, error });
    return UNKNOWN;
  }
  const parsed = ConfirmAnswerSchema.safeParse(answer);
  if (!parsed.success) {
    // The issues quote the answer's values (a result), so only the fact is logged.
    options.logger.warn("confirm answered something that is not a valid answer; the claim stays as it was", {
      code: "confirm_invalid",
      ...options.log,
    });
    return UNKNOWN;
  }
  return parsed.data;
}

/** `run()`, or the signal's reason as soon as it aborts (a `confirm` that ignores its signal is not waited for). */
function untilAborted<T>(run: () => T | PromiseLike<T>, signal: AbortSignal): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => {
      reject(signal.reason as Error);
    };
    if (signal.aborted) {
      onAbort();
      return;
    }
    signal.addEventListener("abort", onAbort, { once: true });
    const done = () => {
      signal.removeEventListener("abort", onAbort);
    };
    let pending: T | PromiseLike<T>;
    try {
      pending = run();
    } catch (error) {
      done();
      // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors -- rejects with what confirm threw, as an async function would
      reject(error);
      return;
    }
    Promise.resolve(pending).then(
      (value) => {
        done();
        resolve(value);
      },
      (error: unknown) => {
        done();
        // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors -- rejects with what confirm rejected with
        reject(error);
      },
    );
  });
}
