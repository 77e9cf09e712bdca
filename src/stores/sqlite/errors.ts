/** The SQLite store's own errors: a corrupt row, and a file that cannot be opened (named, with why). */
import { accessSync, constants, statSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { StoreContractError } from "../../errors.js";

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
