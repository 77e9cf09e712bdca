/**
 * Starting worker processes for the multi-process tests: real OS processes running
 * `node --import tsx <worker>.ts`, talking to the test over the IPC channel.
 */
import { fork, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import type { EffectLine } from "./workers/guarded-turn.js";

const here = dirname(fileURLToPath(import.meta.url));
/** The repository root: tsx finds tsconfig.json (and its `paths`) there. */
const root = resolve(here, "../..");

export const workerPath = (name: string) => join(here, "workers", name);

export interface Worker<Report> {
  readonly child: ChildProcess;
  /** The next report that satisfies `accept` (reports already received count). */
  next(accept?: (report: Report) => boolean): Promise<Report>;
  /** Resolves with the exit code and signal once the process has exited. */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Everything the process wrote to stderr so far (for failure messages). */
  stderr(): string;
}

export function startWorker<Report>(script: string, args: readonly string[]): Worker<Report> {
  const child = fork(workerPath(script), [...args], {
    cwd: root,
    execArgv: ["--import", "tsx"],
    stdio: ["ignore", "inherit", "pipe", "ipc"],
  });
  let stderr = "";
  child.stderr?.setEncoding("utf8");
  child.stderr?.on("data", (chunk: string) => {
    stderr += chunk;
  });
  const queue: Report[] = [];
  const waiters: { accept: (report: Report) => boolean; resolve: (report: Report) => void }[] = [];
  child.on("message", (message) => {
    const report = message as Report;
    const index = waiters.findIndex((waiter) => waiter.accept(report));
    if (index === -1) {
      queue.push(report);
      return;
    }
    const [waiter] = waiters.splice(index, 1);
    waiter?.resolve(report);
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolvePromise) => {
    child.on("exit", (code, signal) => {
      resolvePromise({ code, signal });
    });
  });
  return {
    child,
    exited,
    stderr: () => stderr,
    next(accept = () => true) {
      const index = queue.findIndex(accept);
      if (index !== -1) return Promise.resolve(queue.splice(index, 1)[0] as Report);
      return new Promise<Report>((resolvePromise, reject) => {
        waiters.push({ accept, resolve: resolvePromise });
        // A worker that dies before reporting must fail the test, not hang it.
        void exited.then(({ code, signal }) => {
          reject(
            new Error(
              `worker ${script} exited (code ${String(code)}, signal ${String(signal)}) before reporting\n${stderr}`,
            ),
          );
        });
      });
    },
  };
}

/** A fresh temporary directory, removed by the returned function. */
export function tempDir(prefix: string): { path: string; remove: () => void } {
  const path = mkdtempSync(join(tmpdir(), prefix));
  return {
    path,
    remove: () => {
      rmSync(path, { recursive: true, force: true });
    },
  };
}

/** The side-effect log: one line per write that ran. */
export function readEffects(file: string): EffectLine[] {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return [];
    throw error;
  }
  return text
    .split("\n")
    .filter((line) => line !== "")
    .map((line) => JSON.parse(line) as EffectLine);
}
