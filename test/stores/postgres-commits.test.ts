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
import { admitTurn } from "arkah-agent-guardrails";
import { PostgresGuardrailStore } from "arkah-agent-guardrails/postgres";
import { guardedAgent, invokeTurn, outcomeOf, read, rename, turnInput } from "../support/fixtures.js";
import { countingPool } from "../support/counting-pool.js";
import { adminPool, describePostgres, dropSchema, freshSchema } from "../support/postgres.js";

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
});
