/**
 * `PostgresGuardrailStore` against the conformance kit: every test gets a store on a fresh schema
 * (migrated by `open`), with the kit's clock, and the schema is dropped afterwards.
 *
 * The stores share one pool, so a test does not pay for a new server connection; `maxUses` retires
 * each connection after a while, so the prepared statements of hundreds of dropped schemas do not
 * pile up in one backend. `corruptRecord` writes raw rows in the store's schema through the admin
 * pool, for the fail-closed suite.
 */
import type pg from "pg";
import { PostgresGuardrailStore } from "arkah-agent-guardrails/postgres";
import { validateGuardrailStore, type CorruptionTarget } from "arkah-agent-guardrails/testing";
import { adminPool, dropSchema, freshSchema, describePostgres, requirePostgres } from "../support/postgres.js";

requirePostgres();

/** The table and WHERE clause (parameters from `$first` on) that find the record `key` names, by kind. */
function where(record: CorruptionTarget["record"], key: string, first: number): { table: string; clause: string; params: unknown[] } {
  const p = (n: number): string => `$${String(first + n)}`;
  switch (record) {
    case "receipt":
      return { table: "receipts", clause: `turn_key = ${p(0)}`, params: [key] };
    case "claim":
      return { table: "claims", clause: `turn_key = ${p(0)}`, params: [key] };
    case "approval":
      return { table: "approvals", clause: `approval_id = ${p(0)}`, params: [key] };
    case "turn":
      return { table: "turns", clause: `turn_key = ${p(0)}`, params: [key] };
    case "auditCursor":
      return { table: "audit_cursors", clause: `sink = ${p(0)}`, params: [key] };
    case "verdict":
      // The kit's names are plain text here, so the columns hold them as they are (no escaping).
      return {
        table: "verdicts",
        clause: `turn_key = ${p(0)} AND tool_call_id = ${p(1)} AND tool_name = ${p(2)} AND tool_fingerprint = ${p(3)} AND guardrail = ${p(4)} AND args_digest = ${p(5)}`,
        params: JSON.parse(key) as unknown[],
      };
    case "read":
      return { table: "read_evidence", clause: `turn_key || ':' || evidence_digest = ${p(0)}`, params: [key] };
    case "effect":
      return { table: "effects", clause: `effect_key = ${p(0)}`, params: [key] };
  }
}

/**
 * What makes each record unparseable in PostgreSQL's own way: a value the store's decoder rejects.
 * U+0001 starts an escaped string (encoding.ts), so `\x01` followed by what is not JSON does not
 * decode; a bigint beyond 2^53 is no cursor position; a JSON column gets text that is not its record.
 */
const INVALID: Record<CorruptionTarget["record"], string> = {
  receipt: "decided_at = 'not a time'",
  claim: "tool_call_id = E'\\x01not json'",
  approval: `record = '{"approvalId":'`,
  turn: `record = '{"turnKey":'`,
  auditCursor: "seq = 9223372036854775807",
  verdict: "record = '[]'",
  read: "evidence_digest = evidence_digest",
  effect: "tool_call_id = E'\\x01not json'",
};

/** The records that are a JSON column: another key's record can be copied over them. */
const JSON_RECORDS = new Set<CorruptionTarget["record"]>(["approval", "turn", "verdict"]);

// Without a server the suite is one failing test that says why.
describePostgres("PostgreSQL conformance", async () => {
  let admin: pg.Pool | undefined;
  let pool: pg.Pool | undefined;

  async function corruptRecord(store: PostgresGuardrailStore, target: CorruptionTarget): Promise<"unsupported" | undefined> {
    if (admin === undefined) throw new Error("no admin pool: beforeAll did not run");
    const s = `"${store.schema}"`;
    const { table, clause, params } = where(target.record, target.key, 1);
    let changed: number | null;
    if (target.mode === "invalid") {
      if (target.record === "read") return "unsupported"; // a key-only row: nothing to make unparseable
      changed = (await admin.query(`UPDATE ${s}.${table} SET ${INVALID[target.record]} WHERE ${clause}`, params)).rowCount;
    } else {
      // A row keyed by its own columns cannot describe another key; a JSON record can.
      if (!JSON_RECORDS.has(target.record)) return "unsupported";
      const other = where(target.record, target.otherKey, params.length + 1);
      changed = (
        await admin.query(
          `UPDATE ${s}.${table} SET record = (SELECT record FROM ${s}.${table} WHERE ${other.clause}) WHERE ${clause}`,
          [...params, ...other.params],
        )
      ).rowCount;
    }
    if (changed !== 1) throw new Error(`corruptRecord: ${String(changed)} rows for ${target.record} ${target.key}`);
    return undefined;
  }

  await validateGuardrailStore({
    storeName: "postgres",
    parts: ["approvals", "approvalOrphans", "auditDelivery", "operator", "turns", "turnPrune", "effects", "hasSuccessfulRead"],
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
    corruptRecord,
  });
});
