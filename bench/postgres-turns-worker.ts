/**
 * One OS process of bench/postgres-turns.ts's process variant (started with `fork`, driven over
 * IPC): on `start` opens its own store and pool, warms up and says `ready`; on each `go` runs its
 * loops of distinct turns and reports their figures, CPU time and event-loop use; on `stop` closes
 * and exits.
 */
import { openBench, runDistinct, type Bench, type FromWorker, type ToWorker } from "./postgres-turns.js";

let bench: Bench | undefined;
let loops = 1;
let scopePrefix = "doc-w";

function send(message: FromWorker): void {
  process.send?.(message);
}

async function handle(message: ToWorker): Promise<void> {
  switch (message.type) {
    case "start":
      bench = await openBench(message.url, message.schema);
      loops = message.loops;
      scopePrefix = message.scopePrefix;
      for (let turns = 0, until = performance.now() + message.warmupMaxMs; turns < message.warmupTurns && performance.now() < until; ) {
        turns += (await runDistinct(bench, loops, 250, scopePrefix)).turns;
      }
      send({ type: "ready" });
      return;
    case "go": {
      if (bench === undefined) throw new Error("go before start");
      const cpu = process.cpuUsage();
      const loop = performance.eventLoopUtilization();
      const stats = await runDistinct(bench, loops, message.durationMs, scopePrefix);
      const used = process.cpuUsage(cpu);
      const eventLoop = performance.eventLoopUtilization(loop).utilization;
      send({ type: "done", stats, cpuNs: (used.user + used.system) * 1e3, eventLoop });
      return;
    }
    case "stop":
      await bench?.close();
      process.disconnect();
      return;
  }
}

process.on("message", (message: ToWorker) => {
  handle(message).catch((error: unknown) => {
    send({ type: "failed", message: error instanceof Error ? (error.stack ?? error.message) : String(error) });
    process.exitCode = 1;
    process.disconnect();
  });
});

// If the benchmark process goes away (or is done), so does this one: no orphan keeps its pool open.
process.on("disconnect", () => process.exit());
