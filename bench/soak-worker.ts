/**
 * One worker process of the SQLite and PostgreSQL soaks (bench/soak.ts), started with `fork` and
 * driven over IPC: `run` opens its own store, runs its turns back to back and reports each turn's
 * latency, the outcomes, the errors and the turns whose write ran here; `replay` re-runs turns
 * another worker wrote (each must replay, never write); `exit` closes and leaves.
 */
import { PostgresGuardrailStore } from "arkah-agent-guardrails/postgres";
import { SqliteGuardrailStore } from "arkah-agent-guardrails/sqlite";
import type { GuardrailStore } from "arkah-agent-guardrails";
import { SoakAgent, soakInput, soakTurnId, type SoakCommand, type SoakReport } from "./soak-turns.js";

const scopeOf = (turnId: string) => `doc-${turnId.replace(/-t(\d+)$/, (_, n: string) => `-s${String(Number(n) % 16)}`)}`;

let store: (GuardrailStore & { close(): unknown }) | undefined;
let agent: SoakAgent | undefined;

const send = (report: SoakReport) => process.send?.(report);
const errorText = (error: unknown) => (error instanceof Error ? error.message : String(error)).slice(0, 300);

async function handle(command: SoakCommand): Promise<void> {
  switch (command.type) {
    case "run": {
      store =
        command.kind === "sqlite"
          ? SqliteGuardrailStore.open({ path: command.target, busyTimeoutMs: 30_000 })
          : await PostgresGuardrailStore.open({ connectionString: command.target }, { schema: command.schema });
      agent = new SoakAgent(store);
      const latenciesMs: number[] = [];
      const outcomes: Record<string, number> = {};
      const errorSamples: string[] = [];
      let errors = 0;
      const started = performance.now();
      for (let n = 0; n < command.turns; n++) {
        const turnId = soakTurnId(command.worker, n);
        const begin = performance.now();
        try {
          const outcome = await agent.turn(soakInput(turnId, scopeOf(turnId)));
          outcomes[outcome] = (outcomes[outcome] ?? 0) + 1;
        } catch (error) {
          errors++;
          if (errorSamples.length < 5) errorSamples.push(errorText(error));
        }
        latenciesMs.push(performance.now() - begin);
      }
      send({
        type: "ran",
        latenciesMs,
        outcomes,
        errors,
        errorSamples,
        writes: [...agent.writes],
        elapsedMs: performance.now() - started,
      });
      return;
    }
    case "replay": {
      if (agent === undefined) throw new Error("replay before run");
      const before = [...agent.writes.values()].reduce((sum, n) => sum + n, 0);
      const outcomes: Record<string, number> = {};
      let errors = 0;
      for (const turnId of command.turnIds) {
        try {
          const outcome = await agent.turn(soakInput(turnId, scopeOf(turnId)));
          outcomes[outcome] = (outcomes[outcome] ?? 0) + 1;
        } catch {
          errors++;
        }
      }
      const after = [...agent.writes.values()].reduce((sum, n) => sum + n, 0);
      send({ type: "replayed", outcomes, writes: after - before, errors });
      return;
    }
    case "exit":
      await store?.close();
      process.disconnect();
      return;
  }
}

process.on("message", (command: SoakCommand) => {
  handle(command).catch((error: unknown) => {
    send({ type: "failed", message: error instanceof Error ? (error.stack ?? error.message) : String(error) });
    process.exitCode = 1;
    process.disconnect();
  });
});

// If the soak process goes away, so does this one: no orphan keeps a pool or a file open.
process.on("disconnect", () => process.exit());
