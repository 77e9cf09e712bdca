/**
 * The HTTP mapping of the turn service's answers, framework-neutral: a status code and a JSON body
 * that any framework sends as it is. Every service on `createTurnService` needs the same table
 * (docs/turns.md#http-mapping); shipping it keeps each service from copying, and drifting from, it.
 * Bodies are the answers themselves: statuses, codes and call outcomes, never an error's text.
 */
import { consoleLogger, sanitizeError, type GuardrailLogger } from "../logger.js";
import { TurnServiceError } from "./errors.js";
import type { DecideAnswer } from "./outcome.js";

/** A status code and a JSON body, for whichever framework sends it. */
export interface TurnHttpReply {
  /** The HTTP status. */
  readonly status: 200 | 202 | 403 | 404 | 409 | 422 | 500 | 503;
  /** The JSON body: the answer as it is, or `{ error: code }` for a thrown error. */
  readonly body: object;
}

/**
 * The status code of a `submit` or `decide` answer, with the answer as the body:
 * `completed` 200, `awaiting_approval` 202, `running` and `not_pending` 409 (a request in flight, as
 * the IETF Idempotency-Key draft answers it), `refused` `denied` and `forbidden` 403, `refused`
 * `input_mismatch` 422 (the key was used with another request: the draft's answer), `not_found`
 * 404, `failed` 422 when the turn's input could not be admitted (`admission_failed`), 503 when a
 * retry of the same key runs the turn again (`retryable`), else 500. A decided edit that fails its
 * checks is no failure: the turn goes on with its call refused (`completed`, 200; the call names the
 * request by `approvalId`, docs/turns.md).
 */
export function turnHttpReply(answer: DecideAnswer): TurnHttpReply {
  switch (answer.status) {
    case "completed":
      return { status: 200, body: answer };
    case "awaiting_approval":
      return { status: 202, body: answer };
    case "running":
    case "not_pending":
      return { status: 409, body: answer };
    case "refused":
      return { status: answer.code === "denied" ? 403 : 422, body: answer };
    case "forbidden":
      return { status: 403, body: answer };
    case "not_found":
      return { status: 404, body: answer };
    case "failed":
      if (answer.code === "admission_failed") return { status: 422, body: answer };
      return { status: "retryable" in answer && answer.retryable === true ? 503 : 500, body: answer };
  }
}

/**
 * The reply to an error `submit`, `decide` or `get` threw: `TurnServiceError` (input the service
 * refused, nothing stored) is 422 with its code; anything else is 500 `{ error: "internal" }`,
 * told to `logger` (default `console.warn`) as the package logs every error: its class and code, and
 * a message only when this package wrote it (another's could carry a tool's result or a store's detail).
 */
export function turnHttpErrorReply(error: unknown, logger: GuardrailLogger = consoleLogger): TurnHttpReply {
  if (TurnServiceError.isInstance(error)) return { status: 422, body: { error: error.code } };
  logger.warn("turn service call failed", { error: sanitizeError(error) });
  return { status: 500, body: { error: "internal" } };
}
