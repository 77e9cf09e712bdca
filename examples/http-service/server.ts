/**
 * Starts the note service: `pnpm example:http` (or `tsx examples/http-service/server.ts`).
 *
 *   DATA_DIR  where the three SQLite files live (default: ./.http-service-data); a process
 *             started on the same directory carries on where the last one stopped
 *   PORT      default 3000; 0 takes a free port
 *   HOST      default 127.0.0.1
 *   FRAMEWORK hono (default) or express: the same routes, the same service
 *   APPROVERS comma-separated users who may decide any turn's approvals (default: none; a turn's
 *             own user always may)
 *   OPENAI_API_KEY / ANTHROPIC_API_KEY  use that provider instead of the offline model
 *
 * Prints `listening on http://HOST:PORT` once it accepts requests.
 */
import { mkdirSync } from "node:fs";
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { resolve } from "node:path";
import { serve } from "@hono/node-server";
import { buildService } from "./agent.js";
import { createExpressApp } from "./express.js";
import { createHonoApp } from "./hono.js";

const dataDir = resolve(process.env.DATA_DIR ?? ".http-service-data");
const port = Number(process.env.PORT ?? "3000");
const hostname = process.env.HOST ?? "127.0.0.1";
const framework = process.env.FRAMEWORK ?? "hono";
const approvers = (process.env.APPROVERS ?? "").split(",").filter((user) => user !== "");
if (framework !== "hono" && framework !== "express") throw new Error(`FRAMEWORK must be hono or express, not ${framework}`);
mkdirSync(dataDir, { recursive: true });

const service = await buildService(dataDir, process.env, { approvers });
// Both listen on a Node HTTP server: Express's own `listen`, Hono's through @hono/node-server.
const server: Server =
  framework === "express" ? createExpressApp(service).listen(port, hostname) : (serve({ fetch: createHonoApp(service).fetch, port, hostname }) as Server);
server.on("listening", () => {
  console.log(`listening on http://${hostname}:${String((server.address() as AddressInfo).port)} (${framework})`);
});

// Finishes the turns no client comes back for (a worker that died mid-run, a decider that died
// before resuming): at startup, then about once a lease (docs/operations.md#turn-recovery).
const recoverTurns = () =>
  service.turns.recover().then(
    ({ counts }) => {
      if (Object.keys(counts).length > 0) console.log("recovered turns", counts);
    },
    (error: unknown) => {
      console.warn("turn recovery could not list turns", error instanceof Error ? error.name : "error");
    },
  );
void recoverTurns();
const recovery = setInterval(() => void recoverTurns(), 30_000);
recovery.unref();

const stop = () => {
  clearInterval(recovery);
  server.close(() => {
    service.close();
    process.exit(0);
  });
};
process.on("SIGINT", stop);
process.on("SIGTERM", stop);
