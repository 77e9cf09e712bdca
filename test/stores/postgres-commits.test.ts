/**
 * The SQL a guarded turn costs on PostgreSQL, counted at the pool (counts, never times): each
 * statement the store's connections send is a round trip, and each commit (explicit, or a
 * statement's own implicit transaction, read-only ones included) is counted as
 * `pg_stat_database.xact_commit` counts it. docs/architecture.md ("What a guarded turn sends to
 * PostgreSQL") is the table these numbers pin; a change that adds a round trip or a commit to a
 * turn fails here.
 */
import { afterAll, beforeAll, expect, it } from "vitest";
import type pg from "pg";
import { admitTurn, digest, turnKey, type TurnAnswer } from "arkah-agent-guardrails";
import type { BeginTurnResult } from "arkah-agent-guardrails/store";
import { PostgresGuardrailStore } from "arkah-agent-guardrails/postgres";
import { guardedAgent, invokeTurn, outcomeOf, read, rename, turnInput, turnStartOf } from "../support/fixtures.js";
import { countingPool } from "../support/counting-pool.js";
import { adminPool, describePostgres, dropSchema, freshSchema } from "../support/postgres.js";
import { serviceHarness, turnOf } from "../turns/support.js";

describePostgres("the SQL of a guarded turn on PostgreSQL", (url) => {
  let admin: pg.Pool;
  const schemas: string[] = [];
  beforeAll(() => {
    admin = adminPool();
  });
  afterAll(async () => {
    for (const schema of schemas) await dropSchema(admin, schema);
    await admin.end();
  });

  async function openCounted(prefix: string) {
    const counted = countingPool(url);
    const schema = freshSchema(prefix);
    schemas.push(schema);
    const store = await PostgresGuardrailStore.open({ pool: counted.pool }, { schema });
    counted.reset(); // the migration is not the turn's
    return { ...counted, store, close: async () => (await store.close(), await counted.pool.end()) };
  }

  it("a read-then-write turn (admitTurn, then the agent) makes 5 round trips and 5 commits, each one statement", async () => {
    const { store, tally, close } = await openCounted("arkah_sql_turn");
    try {
      const { agent, input, service } = guardedAgent({
        store,
        input: turnInput({ turnId: "sql-turn-1" }),
        script: [{ toolCalls: [read("r1")] }, { toolCalls: [rename("w1")] }, { content: "done" }],
      });
      await admitTurn({ store, input, moderate: () => true });
      const messages = await invokeTurn(agent, input);
      expect(outcomeOf(messages, "w1").status).toBe("success");
      expect(service.writes).toBe(1);
      expect(tally.statements).toEqual([
        "get_receipt", // admitTurn: a stored receipt is reused, moderation runs once per turn
        "put_receipt_unflushed",
        "record_read_audited", // the read's evidence and its audit event
        "claim_scoped_read", // the evidence check, the scope rule and the claim
        "settle_complete_audited", // the settlement and its audit event
      ]);
      expect(tally.roundTrips).toBeLessThanOrEqual(5);
      expect(tally.commits).toBeLessThanOrEqual(5);
      expect(tally.transactions).toBe(0);
    } finally {
      await close();
    }
  });

  it("a read-then-write turn through the turn service adds only its turn record: begun and finished", async () => {
    const { store, tally, close } = await openCounted("arkah_sql_service");
    try {
      // A lease far longer than the turn: no renewal falls inside the count.
      const { service, notes } = serviceHarness({ store, service: { leaseMs: 600_000 } });
      const answer: TurnAnswer = await service.submit({ turn: turnOf({ turnId: "sql-service-1" }) });
      expect(answer.status).toBe("completed");
      expect(notes.writes).toHaveLength(1);
      expect(tally.statements).toEqual([
        "insert_turn", // beginTurn: the record and its lease, one insert-if-absent
        "get_receipt",
        "put_receipt_unflushed",
        "record_read_audited",
        "claim_scoped_read",
        "settle_complete_audited",
        "get_mutation", // the claim's state, for the stored outcome (read-only)
        "get_turn", // finishTurn: the record read (read-only) ...
        "swap_turn", // ... and the outcome written by a compare-and-set on it: no BEGIN, no row lock, no COMMIT
      ]);
      expect(tally.roundTrips).toBeLessThanOrEqual(9);
      expect(tally.commits).toBeLessThanOrEqual(9);
      expect(tally.transactions).toBe(0);
    } finally {
      await close();
    }
  });

  it("readAudit is one statement that also says whether the WAL is flushed past what it read: no separate check, a flushing commit only when it is not", async () => {
    const { store, tally, reset, close } = await openCounted("arkah_sql_audit");
    try {
      const key = turnKey({ scopeId: "doc-audit", turnId: "audit-1" });
      const approvalId = digest({ kind: "test.approval", key });
      await store.appendAudit({ at: new Date().toISOString(), decision: "executed", turnKey: key, scopeId: "doc-audit", toolCallId: "c1", approvalId });
      for (const [query, statement] of [
        [{}, "read_audit"],
        [{ turnKey: key }, "read_audit_by_turn"],
        [{ scopeId: "doc-audit" }, "read_audit_by_scope"],
        [{ approvalId }, "read_audit_by_approval"],
      ] as const) {
        reset();
        expect(await store.readAudit(query), statement).toHaveLength(1);
        // Whether this test server's WAL writer has flushed yet is its own timing: either answer is one of these.
        expect([[statement], [statement, "flush_wal"]], statement).toContainEqual(tally.statements);
      }
      reset();
      expect(await store.readAudit({ afterSeq: 1 })).toEqual([]);
      expect(tally.statements, "nothing answered, nothing to flush").toEqual(["read_audit"]);
    } finally {
      await close();
    }
  });

  /** The counted store, and a second worker's store on the same schema whose clock runs `aheadMs` later. */
  async function twoWorkers(prefix: string, aheadMs: number) {
    const first = await openCounted(prefix);
    const other = await PostgresGuardrailStore.open({ connectionString: url }, { schema: first.store.schema, now: () => new Date(Date.now() + aheadMs) });
    return { ...first, other, close: async () => (await other.close(), await first.close()) };
  }

  it("finishTurn whose record changed after it was read (a renewal) decides again under the row lock, and finishes", async () => {
    const { store, other, before, tally, close } = await twoWorkers("arkah_sql_renewed", 0);
    try {
      const start = turnStartOf("doc-9", "renewed-1");
      const begun = await store.beginTurn({ turn: start, leaseMs: 60_000 });
      if (begun.status !== "started") throw new Error(`not started: ${begun.status}`);
      // Between the read and the compare-and-set, the holder's own renewal (another connection) lands.
      before("swap_turn", () => other.renewTurn({ turnKey: start.turnKey, token: begun.token, leaseMs: 120_000 }));
      tally.statements.length = 0;
      expect(await store.finishTurn({ turnKey: start.turnKey, token: begun.token, state: "completed", outcome: { done: true } })).toBe(true);
      // The compare missed; the locked path wrote the outcome.
      expect(tally.statements).toEqual(["get_turn", "swap_turn", "BEGIN", "lock_turn", "update_turn", "COMMIT"]);
      const stored = await other.getTurn(start.turnKey);
      expect(stored?.state).toBe("completed");
      expect(stored?.outcome).toEqual({ done: true });
      expect(stored?.lease).toBeUndefined();
    } finally {
      await close();
    }
  });

  it("finishTurn whose turn was taken over after it was read answers false and leaves the new holder's record", async () => {
    // The other worker's clock is past the lease: its beginTurn takes the turn over.
    const { store, other, before, close } = await twoWorkers("arkah_sql_taken", 10 * 60_000);
    try {
      const start = turnStartOf("doc-9", "taken-1");
      const begun = await store.beginTurn({ turn: start, leaseMs: 60_000 });
      if (begun.status !== "started") throw new Error(`not started: ${begun.status}`);
      let takeover: BeginTurnResult | undefined;
      before("swap_turn", async () => {
        takeover = await other.beginTurn({ turn: start, leaseMs: 60_000 });
      });
      expect(await store.finishTurn({ turnKey: start.turnKey, token: begun.token, state: "completed", outcome: { done: true } })).toBe(false);
      expect(await store.renewTurn({ turnKey: start.turnKey, token: begun.token, leaseMs: 60_000 })).toBe(false);
      if (takeover?.status !== "taken_over") throw new Error(`not taken over: ${String(takeover?.status)}`);
      const stored = await other.getTurn(start.turnKey);
      expect(stored?.state).toBe("running");
      expect(stored?.lease?.token).toBe(takeover.token);
      expect(stored?.outcome).toBeUndefined();
    } finally {
      await close();
    }
  });
});
