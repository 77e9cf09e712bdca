/**
 * The `pg_stat_activity` sampler of bench/postgres-load.ts, in a process of its own (forked, driven
 * over IPC). Sampling from the benchmark's own process would be biased: its timers fire only when
 * its busy event loop is free, which is when its workers have just sent a query and wait on the
 * server, so the samples would over-count the server's work and waits.
 *
 * `begin` (url, period) starts sampling the client backends of that URL's database and answers
 * with the pid of the sampler's own backend; `end` stops and answers with the sample count and,
 * per state, how many backends were seen in it in total; `stop` closes and exits.
 */
import pg from "pg";

export type ToSampler =
  | { readonly type: "begin"; readonly url: string; readonly intervalMs: number }
  | { readonly type: "end" }
  | { readonly type: "stop" };
export type FromSampler =
  | { readonly type: "begun"; readonly pid: number }
  | { readonly type: "sampled"; readonly samples: number; readonly totals: Record<string, number> }
  | { readonly type: "failed"; readonly message: string };

const ACTIVITY = `SELECT state, wait_event_type, wait_event FROM pg_stat_activity
  WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'`;

interface Row {
  state: string | null;
  wait_event_type: string | null;
  wait_event: string | null;
}

/** What a backend is doing: `running`, `<wait type>:<event>`, `idle in transaction`, or nothing (idle). */
function classify(row: Row): string | undefined {
  if (row.state === "active") return row.wait_event_type === null ? "running" : `${row.wait_event_type}:${row.wait_event ?? "?"}`;
  return row.state === "idle in transaction" ? "idle in transaction" : undefined;
}

const clients = new Map<string, pg.Client>();
let loop: Promise<void> | undefined;
let stopped = true;
let samples = 0;
let totals: Record<string, number> = {};

async function client(url: string): Promise<pg.Client> {
  const existing = clients.get(url);
  if (existing !== undefined) return existing;
  const created = new pg.Client({ connectionString: url });
  created.on("error", () => undefined);
  await created.connect();
  clients.set(url, created);
  return created;
}

function send(message: FromSampler): void {
  process.send?.(message);
}

async function handle(message: ToSampler): Promise<void> {
  switch (message.type) {
    case "begin": {
      const db = await client(message.url);
      const { rows } = await db.query<{ pid: number }>("SELECT pg_backend_pid() AS pid");
      samples = 0;
      totals = {};
      stopped = false;
      loop = (async () => {
        while (!stopped) {
          const { rows: activity } = await db.query<Row>(ACTIVITY);
          samples++;
          for (const row of activity) {
            const key = classify(row);
            if (key !== undefined) totals[key] = (totals[key] ?? 0) + 1;
          }
          await new Promise((resolve) => setTimeout(resolve, message.intervalMs));
        }
      })();
      send({ type: "begun", pid: Number(rows[0]?.pid) });
      return;
    }
    case "end":
      stopped = true;
      await loop;
      send({ type: "sampled", samples, totals });
      return;
    case "stop":
      stopped = true;
      await loop?.catch(() => undefined);
      for (const db of clients.values()) await db.end().catch(() => undefined);
      process.disconnect();
      return;
  }
}

process.on("message", (message: ToSampler) => {
  handle(message).catch((error: unknown) => {
    send({ type: "failed", message: error instanceof Error ? error.message : String(error) });
  });
});

// If the benchmark process goes away (or is done), so does this one.
process.on("disconnect", () => process.exit());
