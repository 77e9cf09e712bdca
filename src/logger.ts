/**
 * The host's logger, and the one wrapper every warning goes through: it never passes on an
 * argument value or a tool result, so an error becomes `{ name, code?, message?, cause? }` before
 * the host's logger sees it.
 */
import { errorBrand } from "./errors.js";

/** Receives warnings about failed tools, checks and settlements. Never given argument values or tool results. */
export interface GuardrailLogger {
  /** One warning: a fixed message, and fields holding names, ids, codes and a {@link LoggedError}. */
  warn(message: string, fields: Readonly<Record<string, unknown>>): void;
}

/**
 * An error as the logger receives it. `message` is kept only for this library's own errors, whose
 * text it writes itself (ids, codes, keys); any other error's text (a tool's, LangChain's
 * `ToolInvocationError` with its `kwargs`, a store driver's) may quote arguments or results, so
 * only its class name and code are passed on.
 */
export interface LoggedError {
  /** The error's class name. */
  readonly name: string;
  /** The error's `code`, when it has a string one. */
  readonly code?: string;
  /** Only for this library's own errors, whose text quotes no values. */
  readonly message?: string;
  /** The error's `cause`, reduced the same way. */
  readonly cause?: LoggedError;
}

export const consoleLogger: GuardrailLogger = {
  warn: (message, fields) => {
    console.warn(`[arkah-agent-guardrails] ${message}`, fields);
  },
};

export function isLogger(value: unknown): value is GuardrailLogger {
  return typeof value === "object" && value !== null && typeof (value as { warn?: unknown }).warn === "function";
}

/**
 * Branded errors (src/errors.ts) whose message this library composes from ids, codes and keys.
 * `RetryableToolError` is branded too, but a tool writes its message; `DigestError` names argument
 * keys and values.
 */
const OWN_MESSAGES: ReadonlySet<string> = new Set([
  "AdmissionError",
  "ApprovalError",
  "ConfigurationError",
  "SettlementError",
  "StoreContractError",
]);

/** An identifier-like name or code: class names, SQLSTATEs, `ECONNRESET`, `SQLITE_BUSY`. */
const TOKEN = /^[A-Za-z0-9_$][\w$.-]{0,63}$/;

const MAX_CAUSES = 4;

/** One property of a thrown value, read once; a read that throws reads as absent. */
const read = (target: object, key: PropertyKey): unknown => errorBrand.readSafely(target, key);

/**
 * What a logger may see of a thrown value: its class name, its code when that is a short token,
 * the message only for this library's own errors, and the same for its `cause` chain (a few
 * levels, so a cause that is itself ends). Never the message of anything else, nor any other
 * property. Never throws: each field is read once and a read that throws reads as absent.
 */
export function sanitizeError(error: unknown, depth = 0): LoggedError {
  if (error === null) return { name: "thrown null" };
  if (typeof error !== "object") return { name: `thrown ${typeof error}` };
  const name = errorName(error);
  const brand = errorBrand.brandOf(error);
  const own = brand !== undefined && OWN_MESSAGES.has(brand);
  const rawCode = read(error, "code");
  const code = typeof rawCode === "string" || typeof rawCode === "number" ? String(rawCode) : undefined;
  const message = own ? read(error, "message") : undefined;
  const cause = depth < MAX_CAUSES ? read(error, "cause") : undefined;
  return {
    name,
    ...(code !== undefined && TOKEN.test(code) ? { code } : {}),
    ...(typeof message === "string" ? { message } : {}),
    ...(cause !== undefined ? { cause: sanitizeError(cause, depth + 1) } : {}),
  };
}

const token = (value: unknown): string | undefined =>
  typeof value === "string" && TOKEN.test(value) ? value : undefined;

/**
 * The error's class name: its `name`, or its constructor's when `name` is the generic `Error`
 * (LangChain's `ToolInvocationError` does not set `name`).
 */
function errorName(error: object): string {
  const named = token(read(error, "name"));
  if (named !== undefined && named !== "Error") return named;
  const constructor = read(error, "constructor");
  const byClass = typeof constructor === "function" ? token(read(constructor, "name")) : undefined;
  if (byClass !== undefined && byClass !== "Object") return byClass;
  return named ?? "Error";
}

/** Whether `value` is an `Error`; a Proxy whose prototype cannot be read is not one. */
function isError(value: unknown): boolean {
  try {
    return value instanceof Error;
  } catch {
    return false;
  }
}

/** A field value a logger may see: primitives as they are, errors sanitized, anything else omitted. */
function sanitizeField(key: string, value: unknown): unknown {
  if (key === "error" || isError(value)) return sanitizeError(value);
  if (value === null || value === undefined) return value;
  const type = typeof value;
  if (type === "string" || type === "number" || type === "boolean") return value;
  return "[omitted]";
}

/**
 * The logger the middleware uses: the host's (default `console.warn`) behind the sanitizing
 * wrapper, so no call site can hand it a raw error. Its `warn` never throws: warnings are written
 * from catch blocks that are deciding a refusal, and a logger that throws (the host's own) must
 * not turn that refusal into a failed run, so its error is dropped.
 */
export function resolveLogger(logger: GuardrailLogger | undefined): GuardrailLogger {
  const target = logger ?? consoleLogger;
  return {
    warn: (message, fields) => {
      const safe: Record<string, unknown> = {};
      for (const [key, value] of Object.entries(fields)) safe[key] = sanitizeField(key, value);
      try {
        target.warn(message, safe);
      } catch {
        // Dropped: the host's logger failed, and there is no other channel it asked for.
      }
    },
  };
}
