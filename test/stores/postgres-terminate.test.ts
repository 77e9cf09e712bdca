/**
 * The store's connection is terminated server-side (`pg_terminate_backend`) in the middle of a
 * claim and of a settlement. To catch the statement in flight, a second connection holds a lock the
 * statement needs (the scope row, or the claim row); the test finds the blocked backend in
 * pg_stat_activity by the store pool's application_name and terminates it.
 *
 * Each time: the promise rejects with a clear error, nothing ran twice, and the claim is absent
 * (a claim that never committed) or pending (closed) afterwards; a retry through the real
 * `createAgent` middleware runs the write at most once in total.
 */
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SettlementError, turnKey, type TurnInput } from "arkah-agent-guardrails";
import { PostgresGuardrailStore, PostgresStoreError } from "arkah-agent-guardrails/postgres";
import {
  admit,
  DocumentService,
  guardedAgent,
  invokeTurn,
  outcomeOf,
  read,
  rename,
  turnInput,
  type ToolHooks,
} from "../support/fixtures.js";
import {
  adminPool,
  blockedBackend,
  claimIdentity,
  dropSchema,
  freshSchema,
  describePostgres,
  requirePostgres,
} from "../support/postgres.js";

requirePostgres();

const RESULT = { content: '{"title":"Field notes","revision":1}', status: "success" as const };

/**
 * The rejection of `promise`, failing the test if it resolves. Call it as soon as the promise
 * exists: it attaches the handler at once, so a rejection that comes early is never unhandled.
 */
async function rejection(promise: Promise<unknown>): Promise<Error> {
  const outcome = await promise.then(
    () => ({ resolved: true as const }),
    (error: unknown) => ({ resolved: false as const, error }),
  );
  if (outcome.resolved) throw new Error("expected a rejection");
  return outcome.error as Error;
}

describePostgres("PostgreSQL: the store's connection terminated mid-operation", (url) => {
  const schema = freshSchema("arkah_term");
  const application = `${schema}_store`;
  let admin: pg.Pool;
  let pool: pg.Pool;
  let store: PostgresGuardrailStore;

  beforeAll(async () => {
    admin = adminPool();
    pool = new pg.Pool({ connectionString: url, application_name: application, max: 4 });
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
    return {
      release: async () => {
        await client.query("ROLLBACK");
        client.release();
      },
    };
  }

  const holdScope = (scopeId: string) =>
    hold(
      `INSERT INTO "${schema}".scopes AS sc (scope_id) VALUES ($1)
       ON CONFLICT (scope_id) DO UPDATE SET unknown_count = sc.unknown_count`,
      [scopeId],
    );
  const holdClaim = (key: string) => hold(`SELECT 1 FROM "${schema}".claims WHERE turn_key = $1 FOR UPDATE`, [key]);

  /** Terminates the store's backend once it is blocked on a lock. */
  async function terminateBlocked(): Promise<void> {
    const pid = await blockedBackend(admin, application);
    const { rows } = await admin.query<{ done: boolean }>("SELECT pg_terminate_backend($1) AS done", [pid]);
    expect(rows).toEqual([{ done: true }]);
  }

  const stateOf = async (key: string) =>
    (await admin.query<{ state: string }>(`SELECT state FROM "${schema}".claims WHERE turn_key = $1`, [key])).rows[0]?.state;

  function expectClearError(error: Error, operation: string, state: string): void {
    const failure = PostgresStoreError.find(error);
    expect(failure, error.message).toBeDefined();
    expect(failure?.operation).toBe(operation);
    expect(failure?.code).toBe("57P01");
    expect(failure?.message).toContain(`PostgresGuardrailStore.${operation} failed`);
    expect(failure?.message).toContain("terminating connection due to administrator command");
    expect(failure?.message).toContain(state);
  }

  // -------------------------------------------------------------------------------------------
  describe("through the store", () => {
    it("during a claim: rejects, the claim is absent, and the next claim acquires it", async () => {
      const identity = claimIdentity({ scopeId: "doc-term-claim", turnId: "t1" });
      const held = await holdScope(identity.scopeId);
      const claiming = rejection(store.claimMutation(identity));
      try {
        await terminateBlocked();
        expectClearError(await claiming, "claimMutation", "absent, or pending (closed)");
      } finally {
        await held.release();
      }
      expect(await stateOf(identity.turnKey)).toBeUndefined();
      const again = await store.claimMutation(identity);
      expect(again.status).toBe("acquired");
    });

    it("during a complete settlement: rejects, the claim stays pending and is refused", async () => {
      const identity = claimIdentity({ scopeId: "doc-term-settle", turnId: "t1" });
      const claim = await store.claimMutation(identity);
      if (claim.status !== "acquired") throw new Error(claim.status);
      const held = await holdClaim(identity.turnKey);
      const settling = rejection(
        store.settleMutation({ turnKey: identity.turnKey, token: claim.token, outcome: "complete", result: RESULT }),
      );
      try {
        await terminateBlocked();
        expectClearError(await settling, "settleMutation", "stays pending (closed)");
      } finally {
        await held.release();
      }
      expect(await stateOf(identity.turnKey)).toBe("pending");
      expect(await store.claimMutation(identity)).toEqual({ status: "pending" });
    });

    it("during an unknown settlement: rejects, the claim stays pending, the scope is not blocked", async () => {
      const identity = claimIdentity({ scopeId: "doc-term-unknown", turnId: "t1" });
      const claim = await store.claimMutation(identity);
      if (claim.status !== "acquired") throw new Error(claim.status);
      const held = await holdScope(identity.scopeId);
      const settling = rejection(store.settleMutation({ turnKey: identity.turnKey, token: claim.token, outcome: "unknown" }));
      try {
        await terminateBlocked();
        expectClearError(await settling, "settleMutation", "stays pending (closed)");
      } finally {
        await held.release();
      }
      expect(await stateOf(identity.turnKey)).toBe("pending");
      expect(await store.claimMutation(identity)).toEqual({ status: "pending" });
      expect((await store.claimMutation(claimIdentity({ scopeId: "doc-term-unknown", turnId: "t2" }))).status).toBe("acquired");
    });
  });

  // -------------------------------------------------------------------------------------------
  describe("through the createAgent middleware", () => {
    const script = () => [{ toolCalls: [read("r1")] }, { toolCalls: [rename("w1")] }, { content: "done" }];

    async function attempt(input: TurnInput, service: DocumentService, hooks: ToolHooks = {}) {
      const { agent } = guardedAgent({ store, input, service, hooks, script: script() });
      return invokeTurn(agent, input);
    }

    it("a claim cut off: the run fails, nothing ran; the retry runs the write once, the next replays it", async () => {
      const input = turnInput({ scopeId: "doc-agent-claim", turnId: "t1" });
      const service = new DocumentService();
      await admit(store, input);
      const held = await holdScope(input.scopeId);
      const running = rejection(attempt(input, service));
      try {
        await terminateBlocked();
        expectClearError(await running, "claimMutation", "absent, or pending (closed)");
      } finally {
        await held.release();
      }
      expect(service.writes).toBe(0);
      expect(await stateOf(turnKey(input))).toBeUndefined();

      expect(outcomeOf(await attempt(input, service), "w1")).toMatchObject({ status: "success", content: RESULT.content });
      expect(service.writes).toBe(1);
      expect(outcomeOf(await attempt(input, service), "w1")).toMatchObject({ status: "success", content: RESULT.content });
      expect(service.writes).toBe(1);
    });

    it("a settlement cut off after the write: SettlementError, the claim stays pending, a retry is refused", async () => {
      const input = turnInput({ scopeId: "doc-agent-settle", turnId: "t1" });
      const service = new DocumentService();
      await admit(store, input);
      let held: Awaited<ReturnType<typeof hold>> | undefined;
      // rejection() attaches its handler now: the run may fail before the test awaits it.
      const running = rejection(attempt(input, service, {
        afterWrite: async () => {
          held = await holdClaim(turnKey(input));
        },
      }));
      try {
        await terminateBlocked();
        const error = await running;
        expect(SettlementError.find(error)?.outcome).toBe("complete");
        expectClearError(error, "settleMutation", "stays pending (closed)");
      } finally {
        await held?.release();
      }
      expect(service.writes).toBe(1);
      expect(await stateOf(turnKey(input))).toBe("pending");

      expect(outcomeOf(await attempt(input, service), "w1")).toMatchObject({ status: "error", code: "mutation_pending" });
      expect(service.writes).toBe(1);
    });

    it("an unknown settlement cut off after the tool threw: SettlementError, pending, a retry is refused", async () => {
      const input = turnInput({ scopeId: "doc-agent-unknown", turnId: "t1" });
      const service = new DocumentService();
      await admit(store, input);
      let held: Awaited<ReturnType<typeof hold>> | undefined;
      // rejection() attaches its handler now: the run may fail before the test awaits it.
      const running = rejection(attempt(input, service, {
        afterWrite: async () => {
          held = await holdScope(input.scopeId);
          throw new Error("the write service timed out after writing");
        },
      }));
      try {
        await terminateBlocked();
        const error = await running;
        expect(SettlementError.find(error)?.outcome).toBe("unknown");
        expectClearError(error, "settleMutation", "stays pending (closed)");
      } finally {
        await held?.release();
      }
      expect(service.writes).toBe(1);
      expect(await stateOf(turnKey(input))).toBe("pending");

      expect(outcomeOf(await attempt(input, service), "w1")).toMatchObject({ status: "error", code: "mutation_pending" });
      expect(service.writes).toBe(1);
    });
  });
});
