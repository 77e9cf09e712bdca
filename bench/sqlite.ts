/**
 * The SQLite store's cost, two figures:
 *
 * - `benchSqliteClaimSettle`: claim+settle pairs per second through `SqliteGuardrailStore`
 *   (`claimMutation` + `settleMutation`) against the same two statements issued directly through
 *   better-sqlite3 (`INSERT` the pending claim; `UPDATE ... WHERE turn_key = ? AND token = ? AND
 *   state = 'pending'`), on the same schema, with the same pragmas (WAL, the same `synchronous`),
 *   each in a fresh temp file. The difference is what the adapter adds: validation, the
 *   `BEGIN IMMEDIATE` transactions and their reads (existing claim, the scope rule, the token
 *   check), row encoding. Figure: subject pairs/s ÷ raw pairs/s (target ≥ 0.7).
 *   Both sides commit twice per pair. By default both run with `synchronous = NORMAL`: with `FULL`
 *   (the store's default) each commit waits for an fsync, which then dominates both sides, pushes
 *   the ratio towards 1 whatever the adapter costs, and makes the figure as noisy as the disk.
 * - `benchSqliteTurn`: whole guarded `createAgent` turns (admitTurn with a fresh turn id, read,
 *   write, answer) with the SQLite store against the same turns with `InMemoryGuardrailStore`.
 *   Figure: time per turn, SQLite ÷ in-memory.
 *
 * `benchSqlite` runs both. Files and agents are made outside the timed regions; each sample starts
 * from an empty database.
 */
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { HumanMessage, type BaseMessage } from "@langchain/core/messages";
import Database from "better-sqlite3";
import { InMemoryGuardrailStore, turnContext, type GuardrailStore } from "arkah-agent-guardrails";
import type { ScriptStep } from "arkah-agent-guardrails/testing";
import { SqliteGuardrailStore } from "arkah-agent-guardrails/sqlite";
import { admit, assertAllSucceeded, buildAgent, INVOKE_CONFIG, readCall, turnInput, USER_MESSAGE } from "./agent.js";
import { interleave, log, measure, median, per, roundOptions, type Interleaved, type RoundOptions } from "./harness.js";
import { identities } from "./store.js";

type Synchronous = "full" | "normal";

/** A fresh directory for one sample's database, removed by `remove`. */
function scratch(): { path: string; remove: () => void } {
  const dir = mkdtempSync(join(tmpdir(), "arkah-bench-sqlite-"));
  return {
    path: join(dir, "guardrails.sqlite"),
    remove: () => {
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

// ---------------------------------------------------------------------------------------------
// 1. Claim + settle pairs

export interface SqliteClaimSettleOptions extends RoundOptions {
  /** Claim+settle pairs per timed sample (distinct turn keys). */
  readonly pairs: number;
  /** Both sides use it. Default `"normal"` (see the module comment). */
  readonly synchronous?: Synchronous;
}

export interface SqliteClaimSettleResult extends Interleaved {
  readonly baselinePairsPerSecond: number;
  readonly subjectPairsPerSecond: number;
  /** subject pairs/s ÷ raw pairs/s (= baseline time ÷ subject time): the figure the target applies to. */
  readonly rateRatio: number;
}

const RESULT_CONTENT = JSON.stringify({ id: "doc-1", title: "Field notes", revision: 1 });

export async function benchSqliteClaimSettle(options: SqliteClaimSettleOptions): Promise<SqliteClaimSettleResult> {
  const synchronous = options.synchronous ?? "normal";
  const ids = identities(options.pairs);

  const subject = async () => {
    const file = scratch();
    const store = SqliteGuardrailStore.open({ path: file.path, synchronous });
    try {
      const measured = await measure(async () => {
        for (const identity of ids) {
          const claim = await store.claimMutation(identity);
          if (claim.status !== "acquired") throw new Error(`bench: claim ${claim.status}`);
          const settled = await store.settleMutation({
            turnKey: identity.turnKey,
            token: claim.token,
            outcome: "complete",
            result: { content: RESULT_CONTENT, status: "success" },
          });
          if (!settled) throw new Error("bench: settle rejected");
        }
      });
      return per(measured, ids.length);
    } finally {
      store.close();
      file.remove();
    }
  };

  const baseline = async () => {
    const file = scratch();
    // The store makes the schema (untimed); then a plain connection with the store's pragmas.
    SqliteGuardrailStore.open({ path: file.path, synchronous }).close();
    const db = new Database(file.path, { timeout: 5_000 });
    try {
      db.pragma("journal_mode = WAL");
      db.pragma(`synchronous = ${synchronous === "full" ? "FULL" : "NORMAL"}`);
      const insert = db.prepare(
        "INSERT INTO claims (turn_key, scope_id, tool_call_id, tool_name, args_digest, mutation_key, token, state, claimed_at, claimed_at_ms) " +
          "VALUES (?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?)",
      );
      const settle = db.prepare(
        "UPDATE claims SET state = 'complete', result_content = ?, result_status = ?, settled_at = ?, settled_at_ms = ? " +
          "WHERE turn_key = ? AND token = ? AND state = 'pending'",
      );
      const measured = await measure(async () => {
        for (const identity of ids) {
          const token = randomUUID();
          const claimedAt = new Date();
          insert.run(
            identity.turnKey,
            identity.scopeId,
            identity.toolCallId,
            identity.toolName,
            identity.argsDigest,
            identity.mutationKey,
            token,
            claimedAt.toISOString(),
            claimedAt.getTime(),
          );
          const settledAt = new Date();
          const settled = settle.run(
            RESULT_CONTENT,
            "success",
            settledAt.toISOString(),
            settledAt.getTime(),
            identity.turnKey,
            token,
          );
          if (settled.changes !== 1) throw new Error("bench: raw settle rejected");
        }
      });
      return per(measured, ids.length);
    } finally {
      db.close();
      file.remove();
    }
  };

  const result = await interleave({
    ...roundOptions(options),
    baseline,
    subject,
    onRound: (round) => {
      if ((round + 1) % 10 === 0) log(`  sqlite claim+settle: round ${String(round + 1)}/${String(options.rounds)}`);
    },
  });
  return {
    ...result,
    baselinePairsPerSecond: 1e9 / result.baseline,
    subjectPairsPerSecond: 1e9 / result.subject,
    rateRatio: result.baseline / result.subject,
  };
}

// ---------------------------------------------------------------------------------------------
// 2. Guarded turn, SQLite vs in-memory

export interface SqliteTurnOptions extends RoundOptions {
  /** Turns per timed sample. */
  readonly turnsPerSample: number;
  /** The SQLite side's `synchronous`. Default `"full"`, the store's default: what a user pays. */
  readonly synchronous?: Synchronous;
}

export interface SqliteTurnResult extends Interleaved {
  /** Median wall-clock ns per turn spent in `admitTurn`, in-memory and SQLite. */
  readonly admitNs: { readonly memory: number; readonly sqlite: number };
}

/** read, write, answer: one turn's script (the write's arguments as in bench/agent.ts). */
function readWriteScript(turn: number): ScriptStep[] {
  const rename = { id: `rename-${String(turn)}`, name: "rename_document", args: { documentId: "doc-1", title: "Field notes" } };
  return [{ toolCalls: [readCall(`read-${String(turn)}`)] }, { toolCalls: [rename] }, { content: "Renamed the document." }];
}

export async function benchSqliteTurn(options: SqliteTurnOptions): Promise<SqliteTurnResult> {
  const turns = options.turnsPerSample;
  const script = Array.from({ length: turns }, (_, turn) => readWriteScript(turn)).flat();
  const admitSamples = { memory: [] as number[], sqlite: [] as number[] };

  const run = (kind: "memory" | "sqlite") => async () => {
    const file = kind === "sqlite" ? scratch() : undefined;
    const sqlite =
      file === undefined ? undefined : SqliteGuardrailStore.open({ path: file.path, synchronous: options.synchronous ?? "full" });
    const store: GuardrailStore = sqlite ?? new InMemoryGuardrailStore();
    try {
      const agent = buildAgent(script, { server: { store } });
      const inputs = Array.from({ length: turns }, () => turnInput(randomUUID()));
      const results: BaseMessage[][] = [];
      let admitNs = 0n;
      const measured = await measure(async () => {
        for (const input of inputs) {
          const admitStart = process.hrtime.bigint();
          await admit(store, input);
          admitNs += process.hrtime.bigint() - admitStart;
          const result = await agent.invoke(
            { messages: [new HumanMessage(USER_MESSAGE)] },
            { ...INVOKE_CONFIG, context: turnContext(input) },
          );
          results.push(result.messages);
        }
      });
      for (const messages of results) assertAllSucceeded(messages, 2);
      admitSamples[kind].push(Number(admitNs) / turns);
      return per(measured, turns);
    } finally {
      sqlite?.close();
      file?.remove();
    }
  };

  const result = await interleave({
    ...roundOptions(options),
    baseline: run("memory"),
    subject: run("sqlite"),
    onRound: (round) => {
      if ((round + 1) % 10 === 0) log(`  sqlite turn: round ${String(round + 1)}/${String(options.rounds)}`);
    },
  });
  const warmup = options.warmup ?? 2;
  return {
    ...result,
    admitNs: { memory: median(admitSamples.memory.slice(warmup)), sqlite: median(admitSamples.sqlite.slice(warmup)) },
  };
}

// ---------------------------------------------------------------------------------------------

export interface SqliteBenchOptions {
  readonly claimSettle: SqliteClaimSettleOptions;
  readonly turn: SqliteTurnOptions;
}

export interface SqliteBenchResult {
  readonly claimSettle: SqliteClaimSettleResult;
  readonly turn: SqliteTurnResult;
}

/** Both SQLite benchmarks, claim+settle first. */
export async function benchSqlite(options: SqliteBenchOptions): Promise<SqliteBenchResult> {
  const claimSettle = await benchSqliteClaimSettle(options.claimSettle);
  const turn = await benchSqliteTurn(options.turn);
  return { claimSettle, turn };
}
