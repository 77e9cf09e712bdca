/**
 * One of the racing processes of test/processes/sqlite-race.test.ts. Started once; runs turns on
 * the parent's command, so every process starts turn N together and they really race for it.
 *
 *   node --import tsx race-worker.ts <db path> <effects file> <worker name> <sqlite|memory> <turns>
 *
 * `memory` gives each process its own in-memory store: the negative control, which must write
 * once per process and turn.
 *
 * Messages: parent -> worker `{ type: "turn", turnId }` or `{ type: "exit" }`;
 * worker -> parent `{ type: "ready" }`, `{ type: "done", outcome }` or `{ type: "error", message }`.
 */
import { InMemoryGuardrailStore, type GuardrailStore } from "arkah-agent-guardrails";
import { SqliteGuardrailStore } from "arkah-agent-guardrails/sqlite";
import { recordEffect, TurnRunner, type MutationOutcome } from "./guarded-turn.js";

export type RaceCommand = { readonly type: "turn"; readonly turnId: string } | { readonly type: "exit" };
export type RaceReport =
  | { readonly type: "ready" }
  | { readonly type: "done"; readonly outcome: MutationOutcome }
  | { readonly type: "error"; readonly message: string };

const [dbPath, effectsFile, worker, storeKind, turns] = process.argv.slice(2);
if (dbPath === undefined || effectsFile === undefined || worker === undefined || storeKind === undefined || turns === undefined) {
  throw new Error("usage: race-worker.ts <db path> <effects file> <worker name> <sqlite|memory> <turns>");
}

const send = (report: RaceReport) => {
  process.send?.(report);
};

const sqlite = storeKind === "sqlite" ? SqliteGuardrailStore.open({ path: dbPath, busyTimeoutMs: 30_000 }) : undefined;
const store: GuardrailStore = sqlite ?? new InMemoryGuardrailStore();
const runner = new TurnRunner(store, Number(turns));

process.on("message", (command: RaceCommand) => {
  if (command.type === "exit") {
    sqlite?.close();
    process.disconnect();
    return;
  }
  runner.run(command.turnId, (turnId) => {
    recordEffect(effectsFile, { turnId, worker, pid: process.pid });
  }).then(
    (outcome) => {
      send({ type: "done", outcome });
    },
    (error: unknown) => {
      send({ type: "error", message: error instanceof Error ? (error.stack ?? error.message) : String(error) });
    },
  );
});

send({ type: "ready" });
