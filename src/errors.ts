/**
 * Errors thrown by the library. Each carries a brand under a registered symbol so an ESM and a
 * CommonJS copy of the package loaded in one process still recognise each other's errors, where
 * `instanceof` would not.
 */

const BRAND = Symbol.for("arkah-agent-guardrails.error");

/**
 * A thrown value's property, read without throwing: a getter or a Proxy trap that throws (a
 * revoked Proxy throws on every read) reads as absent, so recognising an error never fails.
 */
function readSafely(value: unknown, key: PropertyKey): unknown {
  if ((typeof value !== "object" && typeof value !== "function") || value === null) return undefined;
  try {
    return Reflect.get(value, key) as unknown;
  } catch {
    return undefined;
  }
}

function hasBrand(error: unknown, name: string): boolean {
  return readSafely(error, BRAND) === name;
}

/** Walks an error's `cause` chain (LangChain wraps middleware errors in `MiddlewareError`). */
function findBranded(error: unknown, name: string | undefined): unknown {
  let current: unknown = error;
  for (let depth = 0; depth < 16 && current !== undefined && current !== null; depth++) {
    if (name === undefined ? brandOf(current) !== undefined : hasBrand(current, name)) return current;
    current = readSafely(current, "cause");
  }
  return undefined;
}

function brand(error: Error, name: string): void {
  Object.defineProperty(error, BRAND, { value: name, enumerable: false });
  error.name = name;
}

/** The brand an error carries (its class name), or undefined for anything not branded. */
function brandOf(error: unknown): string | undefined {
  const value = readSafely(error, BRAND);
  return typeof value === "string" ? value : undefined;
}

/** A class derived from `GuardrailsError`, as its inherited static methods see it. */
export type ErrorClass<T> = abstract new (...args: never[]) => T;

/**
 * The base of every error this package throws. Each class carries its name as a brand under a
 * registered symbol, so `isInstance` and `find` (inherited, answering for the class they are called
 * on) also recognise errors from the package's other build, where `instanceof` fails.
 * `GuardrailsError.isInstance(error)` is true for any of them.
 */
export abstract class GuardrailsError extends Error {
  /** The brand this class stamps on its instances; a subclass names itself (minifiers rename classes). */
  protected static readonly brandName: string | undefined = undefined;

  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    const name = new.target.brandName;
    if (name !== undefined) brand(this, name);
  }

  /** Whether `error` is an instance of this class, also one from the package's other build (ESM or CommonJS), where `instanceof` fails. */
  static isInstance<T>(this: ErrorClass<T>, error: unknown): error is T {
    const name = (this as unknown as typeof GuardrailsError).brandName;
    return name === undefined ? brandOf(error) !== undefined : hasBrand(error, name);
  }

  /**
   * The instance of this class behind a caught error, if any: walks the `cause` chain, since
   * `agent.invoke` rejects with LangChain's `MiddlewareError`, which keeps the original as its `cause`.
   */
  static find<T>(this: ErrorClass<T>, error: unknown): T | undefined {
    // Undefined on the base: any error of the package.
    return findBranded(error, (this as unknown as typeof GuardrailsError).brandName) as T | undefined;
  }
}

/** @internal The shape of an error whose kind is a `code` to branch on, with a message for people. */
export abstract class CodedError<Code extends string> extends GuardrailsError {
  /** What went wrong: branch on this, not on the message. */
  readonly code: Code;

  constructor(code: Code, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
  }
}

/**
 * @internal The shape of a store's database failure during one of its operations. The message names the operation, where
 * the database is, what happened and what state the operation left; the driver's error is the `cause`.
 */
export abstract class StoreOperationError extends GuardrailsError {
  /** The store method, e.g. `claimMutation`. */
  readonly operation: string;
  /** The database's own error code (SQLite's result code, PostgreSQL's SQLSTATE, `ECONNREFUSED`), when there is one. */
  readonly code: string | undefined;

  constructor(operation: string, message: string, options: { cause: unknown; code?: string | undefined }) {
    super(message, { cause: options.cause });
    this.operation = operation;
    this.code = options.code;
  }
}

/** Why a turn was not admitted. */
export type AdmissionErrorCode =
  /** The turn input failed validation (empty ids, duplicate labels, no user segment...). */
  | "invalid_input"
  /** No receipt exists for this turn: `admitTurn` was not called (or not awaited). */
  | "not_admitted"
  /** The moderation decision for this turn was a denial. */
  | "denied"
  /** A receipt exists for this turn but for other segments or another policy version. */
  | "input_mismatch"
  /** The latest user text (a `HumanMessage` or `ChatMessage`) is not the admitted user segment. */
  | "transcript_mismatch"
  /** The moderation provider threw, timed out or answered something other than a boolean. */
  | "moderation_failed";

/**
 * A run was refused before any model or tool call because its user turn is not admitted.
 * Thrown, never returned to the model: nothing of the turn runs.
 */
export class AdmissionError extends CodedError<AdmissionErrorCode> {
  protected static override readonly brandName: string = "AdmissionError";
}

/** Invalid options passed to a factory or constructor. The message names the fix. */
export class ConfigurationError extends GuardrailsError {
  protected static override readonly brandName: string = "ConfigurationError";
}

/**
 * A value crossing the `GuardrailStore` boundary is invalid: a malformed argument, or a stored
 * record that no longer parses. Nothing was written.
 */
export class StoreContractError extends GuardrailsError {
  protected static override readonly brandName: string = "StoreContractError";
}

/**
 * The outcome of a mutation that ran could not be recorded: the store failed during settlement.
 * The claim stays `pending` (closed), so the call never runs again; an operator must reconcile it
 * by its `mutationKey`. The store's own error is the `cause`.
 */
export class SettlementError extends GuardrailsError {
  protected static override readonly brandName: string = "SettlementError";

  /** The mutation or side-effect tool whose outcome could not be recorded. */
  readonly toolName: string;
  /** The call whose outcome could not be recorded. */
  readonly toolCallId: string;
  /**
   * A mutation's: the key to reconcile the claim by (`arkah-guardrails reconcile`), and the write
   * service's idempotency key. Undefined for a side effect.
   */
  readonly mutationKey: string | undefined;
  /** A side effect's: the key to reconcile it by (`arkah-guardrails reconcile --effect`). Undefined for a mutation. */
  readonly effectKey: string | undefined;
  /** What was being recorded: the result (`complete`) or an ambiguous outcome (`unknown`). */
  readonly outcome: "complete" | "unknown";

  constructor(
    fields: { toolName: string; toolCallId: string; outcome: "complete" | "unknown" } & (
      | { mutationKey: string; effectKey?: undefined }
      | { effectKey: string; mutationKey?: undefined }
    ),
    options: { cause: unknown },
  ) {
    const key = fields.mutationKey === undefined ? `effectKey ${fields.effectKey}` : `mutationKey ${fields.mutationKey}`;
    super(
      `could not record the ${fields.outcome} outcome of ${fields.toolName} call ${fields.toolCallId} ` +
        `(${key}); its claim stays pending and will not run again until an operator reconciles it`,
      options,
    );
    this.toolName = fields.toolName;
    this.toolCallId = fields.toolCallId;
    this.mutationKey = fields.mutationKey;
    this.effectKey = fields.effectKey;
    this.outcome = fields.outcome;
  }
}

/** Why an approval could not be applied. */
export type ApprovalErrorCode =
  /**
   * Edited arguments failed their checks. No longer thrown: a resumed edit that fails a check is
   * refused and the request asked again; one recorded out of band refuses its call.
   */
  "edit_rejected";

/**
 * A person's approval decision could not be applied. Thrown (the run fails) rather than told to
 * the model: the model did not write these arguments, so blaming it would be false.
 */
export class ApprovalError extends CodedError<ApprovalErrorCode> {
  protected static override readonly brandName: string = "ApprovalError";
}

/** How code inside the guardrails (a middleware after them, a tool body) broke the seal on a governed call. */
export type SealViolation =
  /** The tool was invoked with other arguments (or another call id) than the ones checked. */
  | "arguments_rewritten"
  /** The handler ran the tool a second time for one checked execution. */
  | "handler_repeated"
  /** The governed tool was invoked around the seal (another tool object in the request, or none). */
  | "tool_swapped"
  /** A success was returned for the call although its tool never ran. */
  | "answered_without_tool"
  /** The tool was invoked after the guardrails had already answered the call. */
  | "late_invocation"
  /**
   * A governed tool's body was called around the sealed invocation (its `call`, `_call` or `func`),
   * or with the seal already broken: refused, unrun.
   */
  | "body_called";

/**
 * A middleware placed inside (after) the guardrails changed what a checked call executes: its
 * arguments, its tool, or how often it runs. The run fails: it is a configuration problem of the
 * host, not the model's. Before this is thrown the call's claim is settled with what really
 * happened: released when the tool body provably never started, else `complete` with the body's
 * own result, or `unknown`.
 */
export class SealError extends GuardrailsError {
  protected static override readonly brandName: string = "SealError";

  /** How the seal was broken. */
  readonly violation: SealViolation;
  /** The tool of the call whose seal was broken. */
  readonly toolName: string;
  /** The call whose seal was broken. */
  readonly toolCallId: string;

  constructor(violation: SealViolation, fields: { toolName: string; toolCallId: string }) {
    super(
      `the seal on ${fields.toolName} call ${fields.toolCallId} was broken (${violation}) by code inside the guardrails ` +
        "(a middleware placed after them, or a tool body reaching for another governed tool): the guardrails run a call " +
        "once, with the tool and the arguments they checked. Place middleware that rewrites calls, swaps tools or retries " +
        "before the guardrails in `middleware`, or use the tool policy's `retry`",
    );
    this.violation = violation;
    this.toolName = fields.toolName;
    this.toolCallId = fields.toolCallId;
  }
}

/**
 * Throw this from a tool to ask the middleware for another attempt. Nothing else is retried,
 * and only tools whose retry policy allows more than one attempt are retried.
 */
export class RetryableToolError extends GuardrailsError {
  protected static override readonly brandName: string = "RetryableToolError";

  /** The earliest the next attempt may start, e.g. from a `Retry-After` header. */
  readonly retryAfterMs: number | undefined;

  constructor(message: string, options?: { cause?: unknown; retryAfterMs?: number }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.retryAfterMs = options?.retryAfterMs;
  }
}

/**
 * Throw this from a mutation tool only when its change is known not to have happened: the write
 * service refused it before applying anything (a stale revision, a validation error) or rolled it
 * back in full. The turn's claim is then released instead of left `unknown`: the document is not
 * blocked, and the model is told `no_effect` (it may read again and retry). Honoured only when the
 * tool body itself throws it, on its first attempt; anything else that fails stays `unknown`.
 * From any other tool it is an ordinary failure (`tool_failed`).
 */
export class NoEffectError extends GuardrailsError {
  protected static override readonly brandName: string = "NoEffectError";

  /**
   * Why nothing happened, for the model: it gets this as the refusal's `reason` ("that title is
   * already used"), so it can correct itself. Only when given explicitly: the error's message
   * never reaches the model (it may quote what the model must not see). At most
   * 500 characters of text, without control characters; anything
   * else is dropped (the model gets the refusal without a reason).
   */
  readonly reason: string | undefined;

  constructor(message: string, options?: { cause?: unknown; reason?: string }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    const reason = options?.reason;
    // eslint-disable-next-line no-control-regex -- control characters are exactly what is refused
    const valid = typeof reason === "string" && reason.length > 0 && reason.length <= MAX_NO_EFFECT_REASON_LENGTH && !/[\u0000-\u001f\u007f-\u009f]/.test(reason);
    this.reason = valid ? reason : undefined;
  }
}

/** The longest `NoEffectError` reason the model is given, in UTF-16 code units. */
const MAX_NO_EFFECT_REASON_LENGTH = 500;

/** @internal Used by modules that define their own branded errors, and by the logger. */
export const errorBrand = { brand, hasBrand, findBranded, brandOf, readSafely } as const;
