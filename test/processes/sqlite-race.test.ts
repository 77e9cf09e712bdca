/**
 * Eight OS processes race for the same guarded mutation through the real `createAgent`, for 200
 * turns, on one SQLite file. Each process runs the same turn with the same tool call ids, so all
 * eight claim the same mutation; the parent starts each turn in every process at once (a barrier
 * per turn), so they really race. The write's side effect is an append to a log file, outside the
 * store. Exactly one write per turn may appear there; every other attempt must be refused
 * (`mutation_pending`) or replayed with the writer's result.
 *
 * The negative control runs the same workers with a private in-memory store each (no shared
 * ledger): the same check must then see a write per process, so it is able to fail.
 */
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { digest, mutationKey, turnKey } from "arkah-agent-guardrails";
import { toolFingerprint } from "arkah-agent-guardrails/store";
import { SqliteGuardrailStore } from "arkah-agent-guardrails/sqlite";
import { readEffects, startWorker, tempDir, type Worker } from "./support.js";
import {
  processTurn,
  SCOPE_ID,
  WRITE_ARGS,
  WRITE_CALL_ID,
  WRITE_RESULT,
  type EffectLine,
  type MutationOutcome,
} from "./workers/guarded-turn.js";
import type { RaceCommand, RaceReport } from "./workers/race-worker.js";

const PROCESSES = 8;
const TURNS = 200;

interface RaceRun {
  /** Per turn, one outcome per worker. */
  readonly outcomes: Map<string, { worker: string; outcome: MutationOutcome }[]>;
  readonly effects: EffectLine[];
}

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup();
});

async function race(
  storeKind: "sqlite" | "memory",
  processes: number,
  turns: number,
): Promise<{ run: RaceRun; dbPath: string }> {
  const dir = tempDir("arkah-race-");
  cleanups.push(dir.remove);
  const dbPath = join(dir.path, "guardrails.sqlite");
  const effectsFile = join(dir.path, "effects.log");
  const workers: { name: string; worker: Worker<RaceReport> }[] = Array.from({ length: processes }, (_, index) => {
    const name = `w${String(index)}`;
    const args = [dbPath, effectsFile, name, storeKind, String(turns)];
    return { name, worker: startWorker<RaceReport>("race-worker.ts", args) };
  });
  cleanups.push(() => {
    for (const { worker } of workers) if (worker.child.exitCode === null) worker.child.kill("SIGKILL");
  });
  const send = (worker: Worker<RaceReport>, command: RaceCommand) => {
    worker.child.send(command);
  };

  // Every process has opened the (shared) store before the first turn.
  await Promise.all(workers.map(({ worker }) => worker.next((report) => report.type === "ready")));

  const outcomes = new Map<string, { worker: string; outcome: MutationOutcome }[]>();
  for (let turn = 0; turn < turns; turn++) {
    const turnId = `race-${String(turn)}`;
    for (const { worker } of workers) send(worker, { type: "turn", turnId });
    const reports = await Promise.all(
      workers.map(async ({ name, worker }) => {
        const report = await worker.next((candidate) => candidate.type !== "ready");
        if (report.type === "error") throw new Error(`${name} failed on ${turnId}: ${report.message}`);
        if (report.type !== "done" || report.outcome.turnId !== turnId) {
          throw new Error(`${name}: unexpected report ${JSON.stringify(report)}`);
        }
        return { worker: name, outcome: report.outcome };
      }),
    );
    outcomes.set(turnId, reports);
  }

  for (const { worker } of workers) send(worker, { type: "exit" });
  const exits = await Promise.all(workers.map(({ worker }) => worker.exited));
  expect(exits).toEqual(Array.from({ length: processes }, () => ({ code: 0, signal: null })));
  return { run: { outcomes, effects: readEffects(effectsFile) }, dbPath };
}

/** Every way a run breaks "one write per turn; everyone else refused or replayed", in words. */
function violations(run: RaceRun): string[] {
  const problems: string[] = [];
  for (const [turnId, reports] of run.outcomes) {
    const writes = run.effects.filter((effect) => effect.turnId === turnId);
    if (writes.length !== 1) problems.push(`${turnId}: ${String(writes.length)} writes`);
    const executed = reports.filter((report) => report.outcome.kind === "executed");
    if (executed.length !== 1) problems.push(`${turnId}: ${String(executed.length)} processes executed`);
    const writer = executed[0];
    if (writer !== undefined && writes.length === 1 && writes[0]?.worker !== writer.worker) {
      problems.push(`${turnId}: ${writer.worker} executed but ${String(writes[0]?.worker)} logged the write`);
    }
    for (const { worker, outcome } of reports) {
      if (outcome.kind === "executed" && outcome.status !== "success") {
        problems.push(`${turnId}: ${worker}'s write failed: ${outcome.content}`);
      } else if (outcome.kind === "refused" && outcome.code !== "mutation_pending") {
        problems.push(`${turnId}: ${worker} refused with ${String(outcome.code)}`);
      } else if (outcome.kind === "replayed" && outcome.content !== writer?.outcome.content) {
        problems.push(`${turnId}: ${worker} replayed ${outcome.content}, not the writer's result`);
      }
    }
  }
  const turns = new Set(run.outcomes.keys());
  for (const effect of run.effects) {
    if (!turns.has(effect.turnId)) problems.push(`a write for unknown turn ${effect.turnId}`);
  }
  return problems;
}

describe("SqliteGuardrailStore: processes racing for one mutation", () => {
  it(`${String(PROCESSES)} processes x ${String(TURNS)} turns through createAgent: exactly one write per turn`, async () => {
    const { run, dbPath } = await race("sqlite", PROCESSES, TURNS);

    expect(violations(run)).toEqual([]);
    expect(run.effects).toHaveLength(TURNS);
    const kinds = [...run.outcomes.values()].flat().map((report) => report.outcome.kind);
    expect(kinds.filter((kind) => kind === "executed")).toHaveLength(TURNS);
    expect(kinds).toHaveLength(PROCESSES * TURNS);
    const pending = [...run.outcomes.values()].flat().filter((report) => report.outcome.kind === "refused").length;
    console.info(
      `race: ${String(TURNS)} writes; of the ${String((PROCESSES - 1) * TURNS)} losing attempts, ` +
        `${String(pending)} were refused as mutation_pending and ${String((PROCESSES - 1) * TURNS - pending)} replayed`,
    );

    // The ledger agrees: every turn's claim is settled with the writer's result, nothing unresolved.
    const store = SqliteGuardrailStore.open({ path: dbPath });
    try {
      expect(await store.listUnresolved()).toEqual([]);
      const call = { id: WRITE_CALL_ID, name: "rename_document", args: WRITE_ARGS };
      for (const turnId of run.outcomes.keys()) {
        const input = processTurn(turnId);
        const identity = {
          turnKey: turnKey(input),
          scopeId: SCOPE_ID,
          toolCallId: call.id,
          toolName: call.name,
          argsDigest: digest(call.args),
          mutationKey: mutationKey(input, call),
          // Recorded with a claim, never matched: any fingerprint finds the workers' claim.
          toolFingerprint: toolFingerprint({ name: call.name }),
        };
        expect(await store.claimMutation(identity)).toEqual({
          status: "replay",
          result: { content: WRITE_RESULT, status: "success" },
        });
      }
    } finally {
      store.close();
    }
  }, 600_000);

  it("negative control: with a private in-memory store per process, the same check sees a write per process", async () => {
    const processes = 2;
    const turns = 3;
    const { run } = await race("memory", processes, turns);
    expect(run.effects).toHaveLength(processes * turns);
    const problems = violations(run);
    for (let turn = 0; turn < turns; turn++) {
      expect(problems).toContain(`race-${String(turn)}: ${String(processes)} writes`);
      expect(problems).toContain(`race-${String(turn)}: ${String(processes)} processes executed`);
    }
  }, 300_000);
});
