/**
 * `PostgresGuardrailStore` against the conformance kit: every test gets a store on a fresh schema
 * (migrated by `open`), with the kit's clock, and the schema is dropped afterwards.
 *
 * The stores share one pool, so a test does not pay for a new server connection; `maxUses` retires
 * each connection after a while, so the prepared statements of hundreds of dropped schemas do not
 * pile up in one backend.
 */
import type pg from "pg";
import { PostgresGuardrailStore } from "arkah-agent-guardrails/postgres";
import { validateGuardrailStore } from "arkah-agent-guardrails/testing";
import { adminPool, dropSchema, freshSchema, describePostgres, requirePostgres } from "../support/postgres.js";

requirePostgres();

// Without a server the suite is one failing test that says why.
describePostgres("PostgreSQL conformance", async () => {
  let admin: pg.Pool | undefined;
  let pool: pg.Pool | undefined;

  await validateGuardrailStore({
    storeName: "postgres",
    beforeAll: () => {
      admin = adminPool({ max: 2 });
      pool = adminPool({ max: 8, maxUses: 500 });
    },
    afterAll: async () => {
      await pool?.end();
      await admin?.end();
    },
    createStore: ({ now }) => {
      if (pool === undefined) throw new Error("no pool: beforeAll did not run");
      return PostgresGuardrailStore.open({ pool }, { schema: freshSchema("arkah_conf"), now });
    },
    destroyStore: async (store) => {
      await store.close();
      if (admin !== undefined) await dropSchema(admin, store.schema);
    },
  });
});
