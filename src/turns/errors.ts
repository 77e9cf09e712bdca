/** The turn service's error: input it cannot take. Nothing was stored or run. */
import { CodedError } from "../errors.js";

/** Why the turn service refused a call. */
export type TurnServiceErrorCode =
  /** The turn, the messages or the decision failed validation (HTTP 422). */
  "invalid_input";

/** A call to the turn service was invalid: nothing was stored, run or decided. */
export class TurnServiceError extends CodedError<TurnServiceErrorCode> {
  protected static override readonly brandName: string = "TurnServiceError";
}
