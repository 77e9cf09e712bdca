/**
 * Starting the PostgreSQL worker processes: real OS processes running
 * `node --import tsx test/processes/workers/postgres-worker.ts`, talking to the test over IPC.
 */
import { fork, type ChildProcess } from "node:child_process";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import type { PostgresWorkerCommand, PostgresWorkerReport } from "../processes/workers/postgres-protocol.js";

const here = dirname(fileURLToPath(import.meta.url));
/** The repository root: tsx finds tsconfig.json (and its `paths`) there. */
const root = resolve(here, "../..");
const script = join(root, "test", "processes", "workers", "postgres-worker.ts");

export interface PostgresWorker {
  readonly child: ChildProcess;
  send(command: PostgresWorkerCommand): void;
  /** The next report that satisfies `accept`; rejects if the process exits first. */
  next(accept?: (report: PostgresWorkerReport) => boolean): Promise<PostgresWorkerReport>;
  /** Resolves once the process has exited. */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Asks it to exit; SIGKILLs it if it has not after `graceMs`. */
  stop(graceMs?: number): Promise<void>;
}

export function startPostgresWorker(schema: string, name: string): PostgresWorker {
  const child = fork(script, [schema, name], {
    cwd: root,
    execArgv: ["--import", "tsx"],
    stdio: ["ignore", "inherit", "pipe", "ipc"],
  });
  let stderr = "";
  child.stderr?.setEncoding("utf8");
  child.stderr?.on("data", (chunk: string) => {
    stderr += chunk;
  });
  const queue: PostgresWorkerReport[] = [];
  const waiters: { accept: (report: PostgresWorkerReport) => boolean; resolve: (report: PostgresWorkerReport) => void }[] = [];
  child.on("message", (message) => {
    const report = message as PostgresWorkerReport;
    const index = waiters.findIndex((waiter) => waiter.accept(report));
    if (index === -1) {
      queue.push(report);
      return;
    }
    waiters.splice(index, 1)[0]?.resolve(report);
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolveExit) => {
    child.on("exit", (code, signal) => {
      resolveExit({ code, signal });
    });
  });
  return {
    child,
    exited,
    send(command) {
      child.send(command);
    },
    next(accept = () => true) {
      const index = queue.findIndex(accept);
      if (index !== -1) return Promise.resolve(queue.splice(index, 1)[0] as PostgresWorkerReport);
      return new Promise((resolveReport, reject) => {
        waiters.push({ accept, resolve: resolveReport });
        // A worker that dies before reporting fails the test instead of hanging it.
        void exited.then(({ code, signal }) => {
          reject(new Error(`${name} exited (code ${String(code)}, signal ${String(signal)}) before reporting\n${stderr}`));
        });
      });
    },
    async stop(graceMs = 10_000) {
      if (child.exitCode !== null || child.signalCode !== null) return;
      if (child.connected) child.send({ type: "exit" } satisfies PostgresWorkerCommand);
      const timer = setTimeout(() => child.kill("SIGKILL"), graceMs);
      await exited;
      clearTimeout(timer);
    },
  };
}
