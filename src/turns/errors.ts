/** The turn service's error: input it cannot take. Nothing was stored or run. */
import { errorBrand } from "../errors.js";

/** Why the turn service refused a call. */
export type TurnServiceErrorCode =
  /** The turn, the messages or the decision failed validation (HTTP 422). */
  "invalid_input";

/** A call to the turn service was invalid: nothing was stored, run or decided. */
export class TurnServiceError extends Error {
  /** What was wrong: branch on this, not on the message. */
  readonly code: TurnServiceErrorCode;

  constructor(code: TurnServiceErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
    errorBrand.brand(this, "TurnServiceError");
  }

  /** Whether `error` is a TurnServiceError, also one from the package's other build (ESM or CommonJS), where `instanceof` fails. */
  static isInstance(error: unknown): error is TurnServiceError {
    return errorBrand.hasBrand(error, "TurnServiceError");
  }
}
