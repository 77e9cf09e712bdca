/**
 * A process is SIGKILLed inside the write tool, after its claim and before its settlement. The
 * claim must stay closed across the crash: a new process (same file) running the same turn gets
 * `mutation_pending` and runs nothing; `listUnresolved` shows the claim; an operator reconciles it,
 * and the next retry replays the reconciled result (`completed`) or runs the write once
 * (`no-effect`, the slot reopened).
 */
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { digest, mutationKey, turnKey } from "arkah-agent-guardrails";
import { type UnresolvedMutation } from "arkah-agent-guardrails/store";
import { SqliteGuardrailStore } from "arkah-agent-guardrails/sqlite";
import { readEffects, startWorker, tempDir, type Worker } from "./support.js";
import { processTurn, SCOPE_ID, WRITE_ARGS, WRITE_CALL_ID, WRITE_RESULT, type MutationOutcome } from "./workers/guarded-turn.js";
import type { TurnMode, TurnReport } from "./workers/turn-worker.js";

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup();
});

function files() {
  const dir = tempDir("arkah-crash-");
  cleanups.push(dir.remove);
  return { dbPath: join(dir.path, "guardrails.sqlite"), effectsFile: join(dir.path, "effects.log") };
}

function startTurn(paths: { dbPath: string; effectsFile: string }, turnId: string, mode: TurnMode): Worker<TurnReport> {
  const worker = startWorker<TurnReport>("turn-worker.ts", [paths.dbPath, paths.effectsFile, turnId, mode]);
  cleanups.push(() => {
    if (worker.child.exitCode === null && worker.child.signalCode === null) worker.child.kill("SIGKILL");
  });
  return worker;
}

/** Runs the turn in a new process to completion and returns what it saw. */
async function runTurn(paths: { dbPath: string; effectsFile: string }, turnId: string): Promise<MutationOutcome> {
  const worker = startTurn(paths, turnId, "run");
  const report = await worker.next();
  if (report.type !== "result") throw new Error(`expected a result, got ${JSON.stringify(report)}\n${worker.stderr()}`);
  expect(await worker.exited).toEqual({ code: 0, signal: null });
  return report.outcome;
}

/** Starts the turn in a new process and SIGKILLs it once it is inside the write tool. */
async function crashInWrite(
  paths: { dbPath: string; effectsFile: string },
  turnId: string,
  mode: "hang-before-effect" | "hang-after-effect",
): Promise<void> {
  const worker = startTurn(paths, turnId, mode);
  const report = await worker.next();
  if (report.type !== "in-write") throw new Error(`expected in-write, got ${JSON.stringify(report)}\n${worker.stderr()}`);
  expect(report.pid).toBe(worker.child.pid);
  expect(worker.child.kill("SIGKILL")).toBe(true);
  expect(await worker.exited).toEqual({ code: null, signal: "SIGKILL" });
}

function expectedClaim(turnId: string): Omit<UnresolvedMutation, "claimedAt"> {
  const input = processTurn(turnId);
  const call = { id: WRITE_CALL_ID, name: "rename_document", args: WRITE_ARGS };
  return {
    turnKey: turnKey(input),
    scopeId: SCOPE_ID,
    toolCallId: WRITE_CALL_ID,
    toolName: "rename_document",
    argsDigest: digest(WRITE_ARGS),
    mutationKey: mutationKey(input, call),
    state: "pending",
  };
}

async function withStore<T>(dbPath: string, body: (store: SqliteGuardrailStore) => Promise<T>): Promise<T> {
  const store = SqliteGuardrailStore.open({ path: dbPath });
  try {
    return await body(store);
  } finally {
    store.close();
  }
}

describe("SqliteGuardrailStore: SIGKILL between claim and settlement", () => {
  it("keeps the claim closed across the crash; reconciled as completed, the retry replays", async () => {
    const paths = files();
    const turnId = "crash-completed";

    // The write happened, then the process died before recording its outcome.
    await crashInWrite(paths, turnId, "hang-after-effect");
    expect(readEffects(paths.effectsFile).map((effect) => effect.turnId)).toEqual([turnId]);

    // Restart: same file, same turn, same call. Nothing runs twice.
    const afterRestart = await runTurn(paths, turnId);
    expect(afterRestart).toMatchObject({ kind: "refused", code: "mutation_pending", status: "error" });
    expect(readEffects(paths.effectsFile)).toHaveLength(1);

    await withStore(paths.dbPath, async (store) => {
      const unresolved = await store.listUnresolved();
      expect(unresolved).toHaveLength(1);
      expect(unresolved[0]).toMatchObject(expectedClaim(turnId));
      // The operator checked the document service: the write is there.
      expect(
        await store.reconcileMutation({
          turnKey: expectedClaim(turnId).turnKey,
          resolution: "completed",
          result: { content: WRITE_RESULT, status: "success" },
          operatorRef: "INC-1",
        }),
      ).toEqual({ reconciled: true, state: "pending" });
      expect(await store.listUnresolved()).toEqual([]);
      const audit = await store.readAudit();
      expect(audit.filter((event) => event.decision === "reconciled")).toEqual([
        expect.objectContaining({ turnKey: expectedClaim(turnId).turnKey, action: "completed", operatorRef: "INC-1" }),
      ]);
    });

    const retry = await runTurn(paths, turnId);
    expect(retry).toEqual({ turnId, kind: "replayed", code: undefined, status: "success", content: WRITE_RESULT });
    expect(readEffects(paths.effectsFile)).toHaveLength(1);
  }, 300_000);

  it("keeps the claim closed across the crash; reconciled as no-effect, the retry runs the write once", async () => {
    const paths = files();
    const turnId = "crash-no-effect";

    // Killed after the claim, before the write reached the service.
    await crashInWrite(paths, turnId, "hang-before-effect");
    expect(readEffects(paths.effectsFile)).toEqual([]);

    const afterRestart = await runTurn(paths, turnId);
    expect(afterRestart).toMatchObject({ kind: "refused", code: "mutation_pending" });
    expect(readEffects(paths.effectsFile)).toEqual([]);

    await withStore(paths.dbPath, async (store) => {
      expect(await store.listUnresolved()).toEqual([expect.objectContaining(expectedClaim(turnId))]);
      expect(
        await store.reconcileMutation({ turnKey: expectedClaim(turnId).turnKey, resolution: "no-effect", operatorRef: "INC-2" }),
      ).toEqual({ reconciled: true, state: "pending" });
      expect(await store.listUnresolved()).toEqual([]);
    });

    // The slot reopened: the retry runs the write, once, and records its result.
    const retry = await runTurn(paths, turnId);
    expect(retry).toEqual({ turnId, kind: "executed", code: undefined, status: "success", content: WRITE_RESULT });
    expect(readEffects(paths.effectsFile).map((effect) => effect.turnId)).toEqual([turnId]);

    // And a further retry replays it.
    const again = await runTurn(paths, turnId);
    expect(again).toMatchObject({ kind: "replayed", content: WRITE_RESULT });
    expect(readEffects(paths.effectsFile)).toHaveLength(1);
    await withStore(paths.dbPath, async (store) => {
      expect(await store.listUnresolved()).toEqual([]);
      expect((await store.readAudit()).filter((event) => event.decision === "reconciled")).toEqual([
        expect.objectContaining({ action: "no-effect", operatorRef: "INC-2" }),
      ]);
    });
  }, 300_000);
});
