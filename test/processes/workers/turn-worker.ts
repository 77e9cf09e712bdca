/**
 * One guarded turn in a process of its own, for test/processes/sqlite-crash.test.ts.
 *
 *   node --import tsx turn-worker.ts <db path> <effects file> <turn id> <mode>
 *
 * Modes:
 * - `run`: run the turn and report `{ type: "result", outcome }`, then exit.
 * - `hang-before-effect`: inside the write tool (after the claim), report `{ type: "in-write" }`
 *   and block before the write happens: the parent kills the process there.
 * - `hang-after-effect`: inside the write tool, record the write's side effect, report
 *   `{ type: "in-write" }` and block before settlement: the parent kills the process there.
 */
import { SqliteGuardrailStore } from "arkah-agent-guardrails/sqlite";
import { recordEffect, TurnRunner, type MutationOutcome } from "./guarded-turn.js";

export type TurnMode = "run" | "hang-before-effect" | "hang-after-effect";
export type TurnReport =
  | { readonly type: "in-write"; readonly pid: number }
  | { readonly type: "result"; readonly outcome: MutationOutcome }
  | { readonly type: "error"; readonly message: string };

const [dbPath, effectsFile, turnId, mode] = process.argv.slice(2);
if (dbPath === undefined || effectsFile === undefined || turnId === undefined || mode === undefined) {
  throw new Error("usage: turn-worker.ts <db path> <effects file> <turn id> <mode>");
}

const send = (report: TurnReport) =>
  new Promise<void>((resolve, reject) => {
    process.send?.(report, (error: Error | null) => {
      if (error === null) resolve();
      else reject(error);
    });
  });

/** Never resolves; the interval keeps the process alive until the parent's SIGKILL. */
function blockForever(): Promise<never> {
  setInterval(() => undefined, 60_000);
  return new Promise<never>(() => undefined);
}

const store = SqliteGuardrailStore.open({ path: dbPath, busyTimeoutMs: 30_000 });
try {
  const outcome = await new TurnRunner(store, 1).run(turnId, async () => {
    if (mode === "run") {
      recordEffect(effectsFile, { turnId, worker: "run", pid: process.pid });
      return;
    }
    if (mode === "hang-after-effect") recordEffect(effectsFile, { turnId, worker: mode, pid: process.pid });
    await send({ type: "in-write", pid: process.pid });
    await blockForever();
  });
  await send({ type: "result", outcome });
} catch (error) {
  await send({ type: "error", message: error instanceof Error ? (error.stack ?? error.message) : String(error) });
} finally {
  store.close();
  process.disconnect();
}
