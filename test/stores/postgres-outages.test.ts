/**
 * Database outages under a run of many workers (issue 12, item 3): PostgreSQL restarted in the
 * middle of the run, the workers' connections terminated again and again (`pg_terminate_backend`),
 * and statements cut off by `statement_timeout` against a lock another connection holds.
 *
 * Six workers, each with its own store and pool, run guarded read-then-write turns through the real
 * `createAgent` loop; a failed turn is retried with the same turn id until it ends. Asserted every
 * time: no turn wrote twice (writes are counted where they run); every turn ended, replayed its
 * recorded result, or was refused because its claim is closed (pending or unknown), matching the
 * claim in the database; every failure is a `PostgresStoreError` that names the operation, the
 * server and what happened, never the password; and each store works again afterwards (the pool
 * replaced its dead connections).
 */
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SettlementError, turnKey, type GuardrailStore } from "arkah-agent-guardrails";
import { type MutationSettlement, type ClaimOptions, type ClaimResult, type MutationIdentity } from "arkah-agent-guardrails/store";
import { PostgresGuardrailStore, PostgresStoreError } from "arkah-agent-guardrails/postgres";
import { startEmbeddedPostgres, type EmbeddedServer } from "../../scripts/postgres/embedded.js";
import { admit, DocumentService, ForwardingStore, guardedAgent, invokeTurn, outcomeOf, read, rename, turnInput } from "../support/fixtures.js";
import {
  failures,
  finalAttempt,
  OutageWorker,
  runWorkers,
  WriteLedger,
  WRITE_RESULT,
  type Attempt,
  type TurnRecord,
} from "../support/outage-workers.js";
import { adminPool, describePostgres, dropSchema, freshSchema, requirePostgres } from "../support/postgres.js";

requirePostgres();

const WORKERS = 6;
const MIN_TURNS = 8;

/** The claim states in a store's schema, by turn key. */
async function claimStates(client: pg.Pool, schema: string): Promise<Map<string, string>> {
  const { rows } = await client.query<{ turn_key: string; state: string }>(`SELECT turn_key, state FROM "${schema}".claims`);
  return new Map(rows.map((row) => [row.turn_key, row.state]));
}

/** Each failure, as "operation code", for the summary and to check they are all typed. */
function describeFailure(error: unknown): { typed: boolean; label: string; message: string } {
  const failure = PostgresStoreError.find(error);
  const message = error instanceof Error ? error.message : String(error);
  if (failure === undefined) return { typed: false, label: `untyped: ${message}`, message };
  const settlement = SettlementError.find(error) === undefined ? "" : " (SettlementError)";
  return { typed: true, label: `${failure.operation} ${failure.code ?? "no code"}${settlement}`, message: failure.message };
}

/**
 * The invariants of a run: at most one write per turn; every turn ended in an outcome its claim
 * explains; every failure typed and clear. Prints a summary line for the test output.
 */
function expectSafe(
  name: string,
  turns: readonly TurnRecord[],
  ledger: WriteLedger,
  states: ReadonlyMap<string, string>,
  password: string,
): void {
  const finals = new Map<string, number>();
  for (const turn of turns) {
    const writes = ledger.of(turn.turnId);
    const state = states.get(turnKey(turn));
    const last = finalAttempt(turn);
    const label = last.type === "refused" ? `refused ${last.code}` : last.type;
    finals.set(label, (finals.get(label) ?? 0) + 1);
    const context = `${turn.turnId}: ${label}, ${String(writes)} writes, claim ${String(state)}`;
    expect(writes, context).toBeLessThanOrEqual(1);
    switch (last.type) {
      case "executed":
      case "replayed":
        expect(writes, context).toBe(1);
        expect(state, context).toBe("complete");
        break;
      case "refused":
        // Closed: the claim committed but its outcome was not recorded; it never runs again.
        expect(["mutation_pending", "mutation_unknown"], context).toContain(last.code);
        expect(["pending", "unknown"], context).toContain(state);
        break;
      case "failed":
        throw new Error(`${context}: still failing after the outage: ${describeFailure(last.error).message}`);
    }
  }
  const errors = failures(turns).map(describeFailure);
  const untyped = errors.filter((error) => !error.typed).map((error) => error.label);
  expect(untyped).toEqual([]);
  for (const error of errors) {
    expect(error.message).toMatch(/^PostgresGuardrailStore\.\w+ failed against 127\.0\.0\.1:\d+\/\w+ \(user "postgres"\): /);
    expect(error.message).not.toContain(password);
  }
  const byKind = new Map<string, number>();
  for (const error of errors) byKind.set(error.label, (byKind.get(error.label) ?? 0) + 1);
  const list = (map: Map<string, number>) => [...map].map(([key, count]) => `${key} ×${String(count)}`).join(", ");
  const struck = turns.filter((turn) => turn.attempts.some((attempt) => attempt.type === "failed")).length;
  console.log(
    `[outages] ${name}: ${String(turns.length)} turns by ${String(WORKERS)} workers, ${String(struck)} struck by the outage; ` +
      `${String(errors.length)} failed attempts (${list(byKind)}); final: ${list(finals)}; ` +
      `writes ${String(ledger.total)}, at most one per turn`,
  );
}

/** The password in a connection URL, to check no message carries it. */
const passwordOf = (url: string) => decodeURIComponent(new URL(url).password);

// ---------------------------------------------------------------------------------------------
describe("PostgreSQL restarted in the middle of a run of many workers (a server of its own)", () => {
  let server: EmbeddedServer;
  let admin: pg.Pool;
  const schema = freshSchema("arkah_restart");
  const stores: PostgresGuardrailStore[] = [];

  beforeAll(async () => {
    // Its own server: restarting the shared one would break every other suite running now.
    server = await startEmbeddedPostgres({ database: "arkah_restart" });
    admin = new pg.Pool({ connectionString: server.url, max: 2 });
    admin.on("error", () => undefined);
    for (let index = 0; index < WORKERS; index++) {
      stores.push(await PostgresGuardrailStore.open({ connectionString: server.url }, { schema }));
    }
  }, 120_000);

  afterAll(async () => {
    for (const store of stores) await store.close();
    await admin.end().catch(() => undefined);
    await server.stop();
  }, 60_000);

  it("no turn writes twice, every claim ends closed or settled, every failure is a clear PostgresStoreError, and the stores reconnect", async () => {
    const ledger = new WriteLedger();
    const workers = stores.map((store) => new OutageWorker(store, ledger));
    let executed = 0;
    let restart: Promise<void> | undefined;
    let startRestart: () => void = () => undefined;
    const started = new Promise<void>((resolve) => {
      startRestart = resolve;
    });
    const onAttempt = (attempt: Attempt) => {
      // Restart once the run is in full swing: every worker is mid-turn somewhere.
      if (attempt.type === "executed" && ++executed === WORKERS * 2) startRestart();
    };
    const restarted = started.then(async () => {
      restart = server.restart();
      await restart;
    });
    const turns = await runWorkers(workers, "restart", { minTurns: MIN_TURNS, until: restarted, onAttempt, retryPauseMs: 50 });
    await restarted;

    expect(failures(turns).length).toBeGreaterThan(0);
    expectSafe("restart", turns, ledger, await claimStates(admin, schema), passwordOf(server.url));
    // The restart refused connections for a while; some failures say so.
    const codes = new Set(failures(turns).map((error) => PostgresStoreError.find(error)?.code));
    expect([...codes].some((code) => code === "ECONNREFUSED" || code === "57P01" || code === undefined)).toBe(true);

    // Every store works again: a fresh turn on each runs its write once.
    for (const [index, worker] of workers.entries()) {
      const input = turnInput({ scopeId: `doc-after-restart-${String(index)}`, turnId: `after-restart-${String(index)}` });
      expect(await worker.attempt(input)).toEqual({ type: "executed" });
      expect(await worker.attempt(input)).toEqual({ type: "replayed" });
      expect(ledger.of(input.turnId)).toBe(1);
    }
  }, 180_000);
});

// ---------------------------------------------------------------------------------------------
describePostgres("PostgreSQL: the workers' connections terminated again and again mid-run", (url) => {
  const schema = freshSchema("arkah_outage_term");
  const application = `${schema}_workers`;
  let admin: pg.Pool;
  const pools: pg.Pool[] = [];
  const stores: PostgresGuardrailStore[] = [];

  beforeAll(async () => {
    admin = adminPool();
    for (let index = 0; index < WORKERS; index++) {
      const pool = new pg.Pool({ connectionString: url, application_name: application, max: 3 });
      // An idle client whose connection is terminated emits 'error' on the pool, which drops it.
      pool.on("error", () => undefined);
      pools.push(pool);
      stores.push(await PostgresGuardrailStore.open({ pool }, { schema }));
    }
  }, 60_000);

  afterAll(async () => {
    for (const store of stores) await store.close();
    for (const pool of pools) await pool.end();
    await dropSchema(admin, schema);
    await admin.end();
  });

  it("no turn writes twice, every claim ends closed or settled, every failure is a clear PostgresStoreError, and the pools replace dead clients", async () => {
    const ledger = new WriteLedger();
    const workers = stores.map((store) => new OutageWorker(store, ledger));
    let failed = 0;
    let terminated = 0;
    const onAttempt = (attempt: Attempt) => {
      if (attempt.type === "failed") failed += 1;
    };
    // Terminate every backend of the workers' pools, busy or idle, until enough attempts were cut off.
    const terminator = (async () => {
      while (failed < 10 || terminated < 30) {
        const { rows } = await admin.query<{ done: string }>(
          "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) AS done FROM pg_stat_activity WHERE application_name = $1",
          [application],
        );
        terminated += Number(rows[0]?.done ?? 0);
        await new Promise((resolve) => setTimeout(resolve, 15));
      }
    })();
    const turns = await runWorkers(workers, "term", { minTurns: MIN_TURNS, until: terminator, onAttempt });
    await terminator;

    expect(failed).toBeGreaterThanOrEqual(10);
    expectSafe(`terminated ${String(terminated)} backends`, turns, ledger, await claimStates(admin, schema), passwordOf(url));
    expect(failures(turns).some((error) => PostgresStoreError.find(error)?.message.includes("terminat") === true)).toBe(true);

    for (const [index, worker] of workers.entries()) {
      const input = turnInput({ scopeId: `doc-after-term-${String(index)}`, turnId: `after-term-${String(index)}` });
      expect(await worker.attempt(input)).toEqual({ type: "executed" });
      expect(ledger.of(input.turnId)).toBe(1);
    }
  }, 180_000);
});

// ---------------------------------------------------------------------------------------------
describePostgres("PostgreSQL: statement_timeout cuts off a claim and a settlement blocked by another connection's lock", (url) => {
  const schema = freshSchema("arkah_outage_timeout");
  const TIMEOUT_MS = 1_500;
  let admin: pg.Pool;
  let pool: pg.Pool;
  let store: PostgresGuardrailStore;

  beforeAll(async () => {
    admin = adminPool();
    // Migrate first without the timeout, so only the statements under test can hit it.
    await (await PostgresGuardrailStore.open({ pool: admin }, { schema })).close();
    pool = new pg.Pool({ connectionString: url, application_name: `${schema}_store`, statement_timeout: TIMEOUT_MS, max: 4 });
    pool.on("error", () => undefined);
    store = await PostgresGuardrailStore.open({ pool }, { schema });
  });

  afterAll(async () => {
    await store.close();
    await pool.end();
    await dropSchema(admin, schema);
    await admin.end();
  });

  /** A second connection holding, in an open transaction, the row locks `sql` takes. */
  async function hold(sql: string, values: unknown[]) {
    const client = await admin.connect();
    await client.query("BEGIN");
    await client.query(sql, values);
    return async () => {
      await client.query("ROLLBACK");
      client.release();
    };
  }
  const holdScope = (scopeId: string) =>
    hold(`INSERT INTO "${schema}".scopes AS sc (scope_id) VALUES ($1) ON CONFLICT (scope_id) DO UPDATE SET unknown_count = sc.unknown_count`, [scopeId]);
  const holdClaim = (key: string) => hold(`SELECT 1 FROM "${schema}".claims WHERE turn_key = $1 FOR UPDATE`, [key]);

  /** The store, with another connection taking a lock just before one operation of the turn. */
  class LockedBefore extends ForwardingStore {
    releases: (() => Promise<void>)[] = [];
    constructor(inner: GuardrailStore, private readonly which: "claimMutation" | "settleMutation") {
      super(inner);
    }
    override async claimMutation(identity: MutationIdentity, options?: ClaimOptions): Promise<ClaimResult> {
      if (this.which === "claimMutation") this.releases.push(await holdScope(identity.scopeId));
      return super.claimMutation(identity, options);
    }
    override async settleMutation(settlement: MutationSettlement): Promise<boolean> {
      if (this.which === "settleMutation") this.releases.push(await holdClaim(settlement.turnKey));
      return super.settleMutation(settlement);
    }
    async release(): Promise<void> {
      for (const release of this.releases.splice(0)) await release();
    }
  }

  const stateOf = async (key: string) =>
    (await admin.query<{ state: string }>(`SELECT state FROM "${schema}".claims WHERE turn_key = $1`, [key])).rows[0]?.state;
  const script = () => [{ toolCalls: [read("r1")] }, { toolCalls: [rename("w1")] }, { content: "done" }];
  const attempt = (target: GuardrailStore, input: ReturnType<typeof turnInput>, service: DocumentService) =>
    invokeTurn(guardedAgent({ store: target, input, service, script: script() }).agent, input);

  function expectTimedOut(error: unknown, operation: string, state: string): void {
    const failure = PostgresStoreError.find(error);
    expect(failure, String(error)).toBeDefined();
    expect(failure?.operation).toBe(operation);
    expect(failure?.code).toBe("57014");
    expect(failure?.message).toMatch(new RegExp(`^PostgresGuardrailStore\\.${operation} failed against .*: canceling statement due to statement timeout \\(57014\\); `));
    expect(failure?.message).toContain(state);
  }

  it("a claim cut off: the run fails with 57014, nothing ran, the slot is free; the retry runs the write once", async () => {
    const input = turnInput({ scopeId: "doc-timeout-claim", turnId: "t1" });
    const service = new DocumentService();
    await admit(store, input);
    const locked = new LockedBefore(store, "claimMutation");
    const error = await attempt(locked, input, service).then(
      () => undefined,
      (reason: unknown) => reason,
    );
    await locked.release();
    expectTimedOut(error, "claimMutation", "the claim was not acquired");
    expect(service.writes).toBe(0);
    expect(await stateOf(turnKey(input))).toBeUndefined();

    expect(outcomeOf(await attempt(store, input, service), "w1")).toMatchObject({ status: "success", content: WRITE_RESULT });
    expect(outcomeOf(await attempt(store, input, service), "w1")).toMatchObject({ status: "success", content: WRITE_RESULT });
    expect(service.writes).toBe(1);
  });

  it("a settlement cut off after the write: SettlementError over 57014, the claim stays pending, a retry is refused", async () => {
    const input = turnInput({ scopeId: "doc-timeout-settle", turnId: "t1" });
    const service = new DocumentService();
    await admit(store, input);
    const locked = new LockedBefore(store, "settleMutation");
    const error = await attempt(locked, input, service).then(
      () => undefined,
      (reason: unknown) => reason,
    );
    await locked.release();
    expect(SettlementError.find(error)?.outcome).toBe("complete");
    expectTimedOut(error, "settleMutation", "stays pending (closed)");
    expect(service.writes).toBe(1);
    expect(await stateOf(turnKey(input))).toBe("pending");

    expect(outcomeOf(await attempt(store, input, service), "w1")).toMatchObject({ status: "error", code: "mutation_pending" });
    expect(service.writes).toBe(1);
  });

  it("the connection survives a statement timeout: the same pool serves the next turn", async () => {
    const holding = await blockedBackendCount();
    expect(holding).toBe(0);
    const input = turnInput({ scopeId: "doc-timeout-after", turnId: "t1" });
    const service = new DocumentService();
    await admit(store, input);
    expect(outcomeOf(await attempt(store, input, service), "w1")).toMatchObject({ status: "success" });
    expect(service.writes).toBe(1);
  });

  /** Backends of the store's pool still waiting on a lock (none: the timeouts cancelled them). */
  async function blockedBackendCount(): Promise<number> {
    const { rows } = await admin.query<{ n: string }>(
      "SELECT count(*) AS n FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'",
      [`${schema}_store`],
    );
    return Number(rows[0]?.n ?? 0);
  }
});
