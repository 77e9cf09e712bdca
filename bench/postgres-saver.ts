/**
 * Guarded against unguarded read-then-write turns on PostgreSQL the way a user runs them (issue 39;
 * not a timed test: nothing here asserts a time). Both sides are `createAgent` with LangGraph's
 * `PostgresSaver` (one thread per turn) and a write tool that inserts a row; the guarded side adds
 * `admitTurn` and `createDocumentGuardrails` on a `PostgresGuardrailStore` over the same pool. At
 * 1, 8 and 32 concurrent turns (async loops in this process), the two sides run in interleaved
 * slices (the order alternating every round), on a server with production durability: an embedded
 * one with fsync, synchronous_commit and full_page_writes on, or ARKAH_PG_URL with
 * `synchronous_commit=on` per session. Reported per side: turns per second, and per turn the
 * server's commits (`pg_stat_database.xact_commit`, read-only transactions included) and WAL
 * flushes (`pg_stat_wal.wal_sync`; a flush can serve several commits at once).
 */
import { randomUUID } from "node:crypto";
import { AIMessage, HumanMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import { PostgresSaver } from "@langchain/langgraph-checkpoint-postgres";
import { createAgent, tool } from "langchain";
import pg from "pg";
import { z } from "zod";
import { admitTurn, createDocumentGuardrails, turnContext, type TurnInput } from "arkah-agent-guardrails";
import { PostgresGuardrailStore } from "arkah-agent-guardrails/postgres";
import { ScriptedModel, type ScriptReply } from "arkah-agent-guardrails/testing";
import { startEmbeddedPostgres } from "../scripts/postgres/embedded.js";
import { log, type ResultRow } from "./harness.js";
import { POOL_SETTINGS } from "./postgres-turns.js";

/** Concurrent turns of the comparison. */
export const SAVER_CONCURRENCY = [1, 8, 32] as const;
/** Guarded turns/s at least this share of the unguarded ones, at every concurrency (issue 39). */
export const SAVER_TARGET = 0.9;

export interface SaverOptions {
  readonly concurrency: readonly number[];
  /** Measured time of each side at each concurrency, in this many interleaved slices. */
  readonly sliceMs: number;
  readonly rounds: number;
  /** Unmeasured turns of each side before the first slice at each concurrency. */
  readonly warmupMs: number;
}

export const SAVER_FULL: SaverOptions = { concurrency: SAVER_CONCURRENCY, sliceMs: 2_500, rounds: 4, warmupMs: 1_500 };
export const SAVER_QUICK: SaverOptions = { concurrency: SAVER_CONCURRENCY, sliceMs: 300, rounds: 1, warmupMs: 200 };

/** One side at one concurrency, its slices summed. */
export interface SaverSide {
  readonly turns: number;
  readonly wallNs: number;
  /** Server commits and WAL flushes over the measured slices; undefined when not readable. */
  readonly commits: number | undefined;
  readonly flushes: number | undefined;
}

export interface SaverPoint {
  readonly concurrency: number;
  readonly unguarded: SaverSide;
  readonly guarded: SaverSide;
}

export interface SaverResult {
  readonly server: string;
  readonly points: readonly SaverPoint[];
}

export const turnsPerSecond = (side: SaverSide) => side.turns / (side.wallNs / 1e9);
export const perTurn = (value: number | undefined, side: SaverSide) => (value === undefined ? undefined : value / side.turns);

const DURABLE = { fsync: "on", synchronous_commit: "on", full_page_writes: "on" } as const;

const DOCUMENT = JSON.stringify({ id: "doc-1", title: "Untitled", revision: 0, body: "Meeting notes. ".repeat(16) });
const READ_ID = "read-1";
const WRITE_ID = "write-1";

/** read, then write, then answer, from the transcript: one model serves every turn. */
function respond(messages: readonly BaseMessage[]): ScriptReply {
  const results = messages.filter(ToolMessage.isInstance).length;
  if (results === 0) return { toolCalls: [{ id: READ_ID, name: "read_document", args: { documentId: "doc-1" } }] };
  if (results === 1) return { toolCalls: [{ id: WRITE_ID, name: "rename_document", args: { documentId: "doc-1", title: "Field notes" } }] };
  return { content: "Renamed." };
}

/** The write's ToolMessage succeeded and the turn answered; throws otherwise (a refusal is not a speed-up). */
function checkTurn(messages: readonly BaseMessage[]): void {
  const last = messages.at(-1);
  const write = messages.filter(ToolMessage.isInstance).find((message) => message.tool_call_id === WRITE_ID);
  if (!AIMessage.isInstance(last) || write === undefined || write.status === "error") {
    throw new Error(`bench: a turn did not write: ${JSON.stringify(write?.content)}`);
  }
}

interface Side {
  turn(): Promise<void>;
}

async function openSides(pool: pg.Pool, schema: string) {
  const checkpointer = new PostgresSaver(pool, undefined, { schema: `${schema}_checkpoints` });
  await checkpointer.setup();
  const store = await PostgresGuardrailStore.open({ pool }, { schema });
  await pool.query(`CREATE TABLE IF NOT EXISTS "${schema}".writes (id uuid PRIMARY KEY, at timestamptz NOT NULL DEFAULT now())`);
  let written = 0;
  const tools = [
    tool(() => DOCUMENT, { name: "read_document", description: "Read the document.", schema: z.object({ documentId: z.string() }) }),
    tool(
      async ({ documentId, title }) => {
        await pool.query(`INSERT INTO "${schema}".writes (id) VALUES ($1)`, [randomUUID()]);
        written++;
        return JSON.stringify({ id: documentId, title, revision: 1 });
      },
      { name: "rename_document", description: "Rename the document.", schema: z.object({ documentId: z.string(), title: z.string() }) },
    ),
  ];
  const plain = createAgent({ model: new ScriptedModel(respond), tools, checkpointer });
  const guardedAgent = createAgent({
    model: new ScriptedModel(respond),
    tools,
    checkpointer,
    middleware: [
      createDocumentGuardrails({
        store,
        userMessageLabel: "user",
        authorize: () => true,
        tools: { read_document: { kind: "document-read" }, rename_document: { kind: "mutation" } },
      }),
    ],
  });
  const message = "Please rename the document to Field notes.";
  const unguarded: Side = {
    async turn() {
      const result = await plain.invoke({ messages: [new HumanMessage(message)] }, { configurable: { thread_id: randomUUID() } });
      checkTurn(result.messages);
    },
  };
  let worker = 0;
  const guarded: Side = {
    async turn() {
      const input: TurnInput = {
        scopeId: `doc-${String(worker++ % 64)}`,
        turnId: randomUUID(),
        policyVersion: "bench-1",
        segments: [{ label: "user", content: message }],
      };
      const receipt = await admitTurn({ store, input, moderate: () => true });
      if (!receipt.allowed) throw new Error("bench: the turn was not admitted");
      const result = await guardedAgent.invoke(
        { messages: [new HumanMessage(message)] },
        { configurable: { thread_id: randomUUID() }, context: turnContext(input) },
      );
      checkTurn(result.messages);
    },
  };
  return { unguarded, guarded, written: () => written, close: () => store.close() };
}

/** `concurrency` loops of turns until `ms` passed; the turns run and the wall time. */
async function run(side: Side, concurrency: number, ms: number): Promise<{ turns: number; wallNs: number }> {
  let turns = 0;
  const start = process.hrtime.bigint();
  const deadline = performance.now() + ms;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < deadline) {
        await side.turn();
        turns++;
      }
    }),
  );
  return { turns, wallNs: Number(process.hrtime.bigint() - start) };
}

/**
 * Server commits and WAL flushes so far. Each backend reports its statistics at most once a
 * second; `pg_stat_force_next_flush()` (PostgreSQL 15 and later) makes every connection of the pool
 * report when it next goes idle, right after it. Undefined figures when the server cannot say.
 */
async function counters(pool: pg.Pool): Promise<{ commits: number | undefined; flushes: number | undefined }> {
  try {
    const clients = await Promise.all(Array.from({ length: pool.totalCount }, () => pool.connect()));
    try {
      await Promise.all(clients.map((client) => client.query("SELECT pg_stat_force_next_flush()")));
    } finally {
      for (const client of clients) client.release();
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
    const { rows } = await pool.query<{ commits: string; flushes: string }>(
      `SELECT (SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()) AS commits,
              (SELECT wal_sync FROM pg_stat_wal) AS flushes`,
    );
    const row = rows[0];
    return { commits: row === undefined ? undefined : Number(row.commits), flushes: row === undefined ? undefined : Number(row.flushes) };
  } catch {
    return { commits: undefined, flushes: undefined }; // before PostgreSQL 15, or after 17 (WAL I/O in pg_stat_io)
  }
}

const minus = (after: number | undefined, before: number | undefined) =>
  after === undefined || before === undefined ? undefined : after - before;
const plus = (a: number | undefined, b: number | undefined) => (a === undefined || b === undefined ? undefined : a + b);

async function slice(pool: pg.Pool, side: Side, concurrency: number, ms: number): Promise<SaverSide> {
  const before = await counters(pool);
  const { turns, wallNs } = await run(side, concurrency, ms);
  const after = await counters(pool);
  return { turns, wallNs, commits: minus(after.commits, before.commits), flushes: minus(after.flushes, before.flushes) };
}

const add = (a: SaverSide, b: SaverSide): SaverSide => ({
  turns: a.turns + b.turns,
  wallNs: a.wallNs + b.wallNs,
  commits: plus(a.commits, b.commits),
  flushes: plus(a.flushes, b.flushes),
});

async function compare(url: string, sessionOptions: string | undefined, options: SaverOptions): Promise<SaverPoint[]> {
  const pool = new pg.Pool({ connectionString: url, ...POOL_SETTINGS, ...(sessionOptions === undefined ? {} : { options: sessionOptions }) });
  pool.on("error", () => undefined);
  const schema = `arkah_bench_saver_${randomUUID().replaceAll("-", "").slice(0, 10)}`;
  try {
    const sides = await openSides(pool, schema);
    try {
      const points: SaverPoint[] = [];
      for (const concurrency of options.concurrency) {
        log(`  postgres-saver: ${String(concurrency)} concurrent turn(s), guarded and unguarded in ${String(options.rounds)} interleaved rounds`);
        await run(sides.unguarded, concurrency, options.warmupMs);
        await run(sides.guarded, concurrency, options.warmupMs);
        const zero: SaverSide = { turns: 0, wallNs: 0, commits: 0, flushes: 0 };
        let unguarded = zero;
        let guarded = zero;
        for (let round = 0; round < options.rounds; round++) {
          const order = round % 2 === 0 ? (["unguarded", "guarded"] as const) : (["guarded", "unguarded"] as const);
          for (const name of order) {
            const measured = await slice(pool, sides[name], concurrency, options.sliceMs);
            if (name === "guarded") guarded = add(guarded, measured);
            else unguarded = add(unguarded, measured);
          }
        }
        points.push({ concurrency, unguarded, guarded });
      }
      return points;
    } finally {
      await sides.close();
    }
  } finally {
    await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE; DROP SCHEMA IF EXISTS "${schema}_checkpoints" CASCADE`).catch(() => undefined);
    await pool.end();
  }
}

/**
 * The comparison on ARKAH_PG_URL (with `synchronous_commit=on` per session) when it is set,
 * otherwise on an embedded server with fsync, synchronous_commit and full_page_writes on.
 */
export async function benchPostgresSaver(options: SaverOptions): Promise<SaverResult> {
  const url = process.env.ARKAH_PG_URL;
  if (url !== undefined && url !== "") {
    return { server: "ARKAH_PG_URL, synchronous_commit=on per session", points: await compare(url, "-c synchronous_commit=on", options) };
  }
  log("  postgres-saver: starting an embedded server with fsync=on, synchronous_commit=on, full_page_writes=on");
  const server = await startEmbeddedPostgres({ database: "arkah_bench_saver", settings: DURABLE });
  try {
    return { server: "embedded, fsync=on, synchronous_commit=on, full_page_writes=on", points: await compare(server.url, undefined, options) };
  } finally {
    await server.stop();
  }
}

const oneDecimal = (value: number | undefined) => (value === undefined ? "n/a" : value.toFixed(1));

/** One row per concurrency: guarded/unguarded turns per second against SAVER_TARGET. */
export function saverRows(result: SaverResult): ResultRow[] {
  return result.points.map(({ concurrency, unguarded, guarded }) => {
    const ratio = turnsPerSecond(guarded) / turnsPerSecond(unguarded);
    return {
      benchmark: `postgres turns with PostgresSaver, ${String(concurrency)} concurrent: guarded vs the checkpointer alone`,
      baseline: `${turnsPerSecond(unguarded).toFixed(1)} turns/s`,
      subject: `${turnsPerSecond(guarded).toFixed(1)} turns/s`,
      ratio: `${ratio.toFixed(3)}x turns/s`,
      target: `≥ ${SAVER_TARGET.toFixed(2)}x turns/s`,
      pass: ratio >= SAVER_TARGET,
      note:
        `per turn, unguarded → guarded: commits ${oneDecimal(perTurn(unguarded.commits, unguarded))} → ${oneDecimal(perTurn(guarded.commits, guarded))}, ` +
        `WAL flushes ${oneDecimal(perTurn(unguarded.flushes, unguarded))} → ${oneDecimal(perTurn(guarded.flushes, guarded))}; ` +
        `${String(unguarded.turns)} and ${String(guarded.turns)} turns; ${result.server}`,
    };
  });
}
