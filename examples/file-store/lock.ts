/**
 * An exclusive lock for one directory, shared by every process on one host: a lock file that
 * exists exactly while someone holds the lock, naming its holder (process id and the host's boot
 * id) and a random nonce that tells one holding of the lock from another.
 *
 * - Taking it: the holder's line is written to a temporary file, which is then hard-linked to the
 *   lock's name. `link` fails if the name exists, atomically, and the file appears with its content
 *   (an `O_EXCL` create followed by a write would show other processes an empty file in between).
 * - A lock whose holder is dead (no such process, or a process of an earlier boot) is taken over:
 *   the taker first takes a "break" lock named after that holding (`lock.break.<nonce>`), the same
 *   way, then checks the lock file still holds that holding, and only then removes it. Only one
 *   taker can hold a given break lock, and nobody else removes a holding but its holder (dead), so
 *   a lock taken in the meantime by a live process is never removed. A break lock whose holder died
 *   is taken over in the same way, one level up.
 * - Waiting is bounded: `timeoutMs`, then a `FileStoreLockError` naming the holder.
 *
 * Process ids are only meaningful on one host: never share the directory across hosts (NFS, SMB).
 */
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { link, readFile, unlink, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";

/** Waiting for the lock took longer than allowed: another process holds it, and is alive. */
export class FileStoreLockError extends Error {
  override readonly name = "FileStoreLockError";
}

/** The lock file's content: `pid boot nonce`. */
interface Holding {
  readonly pid: number;
  readonly boot: string;
  readonly nonce: string;
  readonly line: string;
}

/** The kernel's id for this boot (Linux), so a lock left before a reboot is known to be stale even if its pid is reused. */
export const BOOT_ID = (() => {
  try {
    return readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim() || "-";
  } catch {
    return "-";
  }
})();

function parseHolding(line: string): Holding | undefined {
  const [pid, boot, nonce, ...rest] = line.trim().split(" ");
  if (rest.length > 0 || pid === undefined || boot === undefined || nonce === undefined || !/^[1-9][0-9]*$/.test(pid)) return undefined;
  return { pid: Number(pid), boot, nonce, line };
}

function isAlive(holding: Holding): boolean {
  if (holding.boot !== BOOT_ID) return false;
  try {
    process.kill(holding.pid, 0);
    return true;
  } catch (error) {
    // EPERM: the process exists, under another user.
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

const code = (error: unknown): string | undefined => (error as NodeJS.ErrnoException | undefined)?.code;

/** Creates `path` holding `line`, atomically; false if it exists. */
async function createWith(path: string, line: string, nonce: string): Promise<boolean> {
  const temporary = join(dirname(path), `.lock-${nonce}`);
  await writeFile(temporary, line, { flag: "wx" });
  try {
    await link(temporary, path);
    return true;
  } catch (error) {
    if (code(error) === "EEXIST") return false;
    throw error;
  } finally {
    await unlink(temporary);
  }
}

/** The holding in `path`; `gone` if there is no such file; `unreadable` if it is not a line this module writes. */
async function readHolding(path: string): Promise<Holding | "gone" | "unreadable"> {
  try {
    return parseHolding(await readFile(path, "utf8")) ?? "unreadable";
  } catch (error) {
    if (code(error) === "ENOENT") return "gone";
    throw error;
  }
}

/**
 * Removes `path` if it still holds `stale` (whose holder is dead), under the break lock of that
 * holding. Answers whether the caller should look again at once (true) or wait for a live breaker.
 */
async function breakStale(path: string, stale: Holding, me: string): Promise<boolean> {
  const breakPath = `${path}.break.${stale.nonce}`;
  const nonce = randomBytes(12).toString("hex");
  if (!(await createWith(breakPath, `${me} ${nonce}`, nonce))) {
    const breaker = await readHolding(breakPath);
    if (breaker === "gone") return true;
    if (breaker === "unreadable") throw foreign(breakPath);
    if (isAlive(breaker)) return false;
    await breakStale(breakPath, breaker, me);
    return true;
  }
  try {
    const current = await readHolding(path);
    if (current !== "gone" && current !== "unreadable" && current.line === stale.line) await unlinkIfPresent(path);
  } finally {
    await unlinkIfPresent(breakPath);
  }
  return true;
}

const foreign = (path: string) =>
  new FileStoreLockError(`the lock file ${path} is not one this store wrote; remove it only if no process uses the store`);

async function unlinkIfPresent(path: string): Promise<void> {
  try {
    await unlink(path);
  } catch (error) {
    if (code(error) !== "ENOENT") throw error;
  }
}

/** A held lock: release it exactly once. */
export interface HeldLock {
  release(): Promise<void>;
}

/**
 * Takes the lock at `path`, waiting at most `timeoutMs` for a live holder. Its directory must
 * exist. The same process may wait for itself (two store objects on one directory): it is alive.
 */
export async function acquireLock(path: string, timeoutMs: number): Promise<HeldLock> {
  const me = `${String(process.pid)} ${BOOT_ID}`;
  const deadline = Date.now() + timeoutMs;
  let pause = 1;
  for (;;) {
    const nonce = randomBytes(12).toString("hex");
    if (await createWith(path, `${me} ${nonce}`, nonce)) {
      return {
        release: () => unlinkIfPresent(path),
      };
    }
    const holder = await readHolding(path);
    if (holder === "gone") continue;
    // A lock file always appears with its whole line (link): one that does not parse was not written here.
    if (holder === "unreadable") throw foreign(path);
    if (!isAlive(holder)) {
      if (await breakStale(path, holder, me)) continue;
    }
    if (Date.now() >= deadline) {
      throw new FileStoreLockError(
        `could not lock ${path} within ${String(timeoutMs)} ms: process ${String(holder.pid)} holds it and is still running`,
      );
    }
    await sleep(pause + Math.random() * pause);
    pause = Math.min(pause * 2, 20);
  }
}
