/**
 * The SQLite store's own errors: a corrupt row, a file that cannot be opened (named, with why), and
 * a database failure during an operation (`SqliteStoreError`: which operation, what happened, what
 * it left behind).
 */
import { accessSync, constants, statSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { StoreContractError, StoreOperationError } from "../../errors.js";

/**
 * The database failed during a store operation: its write lock was held by another connection for
 * longer than `busyTimeoutMs` (`SQLITE_BUSY`), the disk is full, the store is closed... The message
 * names the operation, the file, what happened and what state the operation left; better-sqlite3's
 * error is the `cause`. Every operation is one transaction, so a failure writes nothing.
 */
export class SqliteStoreError extends StoreOperationError {
  protected static override readonly brandName: string = "SqliteStoreError";
}

/** What each operation left behind when it failed: the transaction rolled back, so its state before. */
const FAILURE_STATE: Readonly<Record<string, string>> = {
  claimMutation: "the claim was not acquired and nothing was written; the turn may claim again",
  settleMutation:
    "the settlement was not recorded: the claim stays pending (closed) and never runs again until an operator reconciles it",
  releaseMutation: "the release was not recorded: the claim stays pending (closed)",
  recordSuccessfulRead: "the read evidence was not recorded",
  putReceiptIfAbsent: "the admission receipt was not stored",
  reconcileMutation: "the reconciliation was not applied; check listUnresolved",
};

/** A better-sqlite3 failure during `operation` as a `SqliteStoreError` that says what happened. */
export function storeFailure(operation: string, path: string, busyTimeoutMs: number, error: unknown): SqliteStoreError {
  const raw = (error as { code?: unknown } | null)?.code;
  const code = typeof raw === "string" ? raw : undefined;
  const text = error instanceof Error ? error.message : String(error);
  const what =
    code?.startsWith("SQLITE_BUSY") === true
      ? `another connection held the database's write lock for longer than busyTimeoutMs (${String(busyTimeoutMs)} ms): ${text}`
      : text;
  const state = FAILURE_STATE[operation] ?? "nothing was written (the operation is one transaction)";
  return new SqliteStoreError(
    operation,
    `SqliteGuardrailStore.${operation} failed on ${JSON.stringify(path)}: ${what}${code === undefined ? "" : ` (${code})`}; ${state}`,
    { cause: error, code },
  );
}

export function corrupt(what: string, detail: string, cause?: unknown): StoreContractError {
  return new StoreContractError(
    `corrupt ${what} in the SQLite guardrail store: ${detail}`,
    cause === undefined ? undefined : { cause },
  );
}

export const OWN_ERROR = Symbol("arkah.sqlite.own");

/** Why `path` cannot be opened, in words, when the file system can tell. */
function diagnosePath(path: string): string | undefined {
  const absolute = resolve(path);
  const dir = dirname(absolute);
  const stat = (target: string) => {
    try {
      return statSync(target);
    } catch (error) {
      return error as NodeJS.ErrnoException;
    }
  };
  const dirStat = stat(dir);
  if (dirStat instanceof Error) {
    return dirStat.code === "ENOENT"
      ? `its directory ${JSON.stringify(dir)} does not exist; create it first`
      : `its directory ${JSON.stringify(dir)} cannot be read (${dirStat.code ?? dirStat.message})`;
  }
  if (!dirStat.isDirectory()) return `${JSON.stringify(dir)} is not a directory`;
  const fileStat = stat(absolute);
  if (!(fileStat instanceof Error) && fileStat.isDirectory()) return "it is a directory, not a database file";
  try {
    accessSync(dir, constants.W_OK);
  } catch {
    return `its directory ${JSON.stringify(dir)} is not writable (SQLite needs to create the file and its -wal and -shm files there)`;
  }
  if (!(fileStat instanceof Error)) {
    try {
      accessSync(absolute, constants.R_OK | constants.W_OK);
    } catch {
      return "the file is not readable and writable by this process";
    }
  }
  return undefined;
}

export function openError(path: string, cause: unknown): Error {
  const reason =
    (path === ":memory:" ? undefined : diagnosePath(path)) ?? (cause instanceof Error ? cause.message : String(cause));
  return new Error(`cannot open the SQLite guardrail store at ${JSON.stringify(path)}: ${reason}`, { cause });
}

export function ownError(message: string): Error {
  const error = new Error(message);
  Object.defineProperty(error, OWN_ERROR, { value: true });
  return error;
}


/** Whether `error` is one of this adapter's own open errors (its message already says everything). */
export function isOwnError(error: unknown): boolean {
  return typeof error === "object" && error !== null && OWN_ERROR in error;
}
