/**
 * Starting the PostgreSQL worker processes: real OS processes running
 * `node --import tsx test/processes/workers/postgres-worker.ts`, talking to the test over IPC.
 */
import type { ChildProcess } from "node:child_process";
import { startWorker } from "../processes/support.js";
import type { PostgresWorkerCommand, PostgresWorkerReport } from "../processes/workers/postgres-protocol.js";

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
  const worker = startWorker<PostgresWorkerReport>("postgres-worker.ts", [schema, name]);
  const { child, exited } = worker;
  return {
    child,
    exited,
    next: (accept) => worker.next(accept),
    send(command) {
      child.send(command);
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
