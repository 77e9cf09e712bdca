/**
 * Error mapping for the PostgreSQL store: what a database failure becomes (`PostgresStoreError`,
 * naming the operation, where the database is and what state the operation may have left), with
 * the password redacted from everything a logger could print.
 */
import { StoreOperationError } from "../../errors.js";

/**
 * The database failed during a store operation (unreachable, connection terminated, a server
 * error). The message names the operation, where the database is (never the password), and what
 * state the operation may have left. The `cause` is a copy of the driver's error with the password
 * redacted (its message, stack and the fields that say where it failed; see `sanitizedCause`).
 */
export class PostgresStoreError extends StoreOperationError {
  protected static override readonly brandName: string = "PostgresStoreError";
}

/** What each operation may have left behind when the database fails under it. */
export const FAILURE_STATE: Readonly<Record<string, string>> = {
  putReceiptIfAbsent:
    "the admission receipt was stored or not (one statement at a time); if it was, the retried turn finds it",
  recordSuccessfulRead:
    "the read evidence, with its audit event if any, was recorded or not (one statement); without it the turn must read again before it may claim",
  recordVerdict: "the verdict was recorded or not (one statement at a time); if it was not, the next call is checked again",
  claimMutation:
    "the claim was not acquired: it is absent, or pending (closed) if the database committed it before the failure; " +
    "a pending claim never runs until an operator reconciles it",
  settleMutation:
    "the settlement may not have been recorded: the claim stays pending (closed) unless the database committed it, " +
    "and it never runs again until an operator reconciles it",
  releaseMutation:
    "the release and its audit event were applied together or not at all: the claim stays pending (closed) " +
    "unless the release committed",
  reconcileMutation: "the reconciliation and its audit event were applied together or not at all; check listUnresolved",
  requestApproval: "the request and its audit event were stored together or not at all; check getApproval",
  decideApproval: "the decision and its audit event were applied together or not at all; check getApproval",
  applyApproval: "the change to applied and its audit event were made together or not at all; check getApproval",
  expireApprovals: "the expiry was applied whole, with its audit events, or not at all",
  appendAudit: "the audit event was appended or not (one statement); check readAudit",
  beginTurn: "the turn was begun (or taken over) or not, in one transaction; check getTurn",
  finishTurn: "the turn's outcome was stored or not, in one transaction; check getTurn",
  resumeTurn: "the turn was resumed or not, in one transaction; check getTurn",
  renewTurn: "the lease was renewed or not, in one transaction; check getTurn",
  advanceAuditCursor: "the cursor moved or did not (one statement); check getAuditCursor",
  prune: "the prune was applied whole or not at all",
};

export function errorCode(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === "string" ? code : undefined;
}

export function errorText(error: unknown): string {
  if (error instanceof Error) return error.message;
  return String(error);
}

/**
 * A failure to authenticate in words that name the fix, or undefined for any other failure: pg's own
 * texts (SQLSTATE 28P01, or "SASL: SCRAM-SERVER-FIRST-MESSAGE: client password must be a string"
 * when no password was found) say neither what is wrong nor what to do.
 */
export function authenticationProblem(error: unknown): string | undefined {
  if (errorCode(error) === "28P01") {
    return "password authentication failed: the server refused the password; correct it in the connection string, PGPASSWORD or ~/.pgpass (28P01)";
  }
  if (/client password must be a string/i.test(errorText(error))) {
    return (
      "no password was given and the server asks for one: put it in the connection string " +
      "(postgres://user:password@host:port/database), PGPASSWORD or ~/.pgpass"
    );
  }
  return undefined;
}

/** `user:password@` → `user:***@` in anything that might echo a connection string. */
export function redact(text: string, password: string | undefined): string {
  let out = text
    .replace(/(\b[a-z][a-z0-9+.-]*:\/\/[^:/?#@\s]*:)[^/?#\s]*@/gi, "$1***@")
    .replace(/(\bpassword\s*=\s*)('[^']*'|[^\s&]*)/gi, "$1***");
  if (password !== undefined && password.length > 0) out = out.split(password).join("***");
  return out;
}

/**
 * A copy of a driver error with the password redacted, so a logger that prints causes prints none:
 * a server error's text can echo anything a statement or a user's trigger put in it.
 */
export function sanitizedCause(error: unknown, password: string | undefined): Error {
  const copy = new Error(redact(errorText(error), password));
  if (error instanceof Error && typeof error.stack === "string") copy.stack = redact(error.stack, password);
  const keys = ["code", "errno", "syscall", "address", "port", "hostname", "severity", "detail", "hint", "where", "schema", "table", "column", "constraint"] as const;
  for (const key of keys) {
    const value = (error as Record<string, unknown> | null)?.[key];
    if (typeof value === "string" || typeof value === "number") {
      Object.defineProperty(copy, key, { value: typeof value === "string" ? redact(value, password) : value, enumerable: true });
    }
  }
  return copy;
}
