/**
 * The store conformance kit against `SqliteGuardrailStore`: a fresh database file per test, in a
 * temporary directory removed afterwards. `corruptRecord` writes raw rows through a second
 * connection to the same file, for the fail-closed suite.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { SqliteGuardrailStore } from "arkah-agent-guardrails/sqlite";
import { validateGuardrailStore, type CorruptionTarget } from "arkah-agent-guardrails/testing";

let dir: string | undefined;
let files = 0;
const paths = new WeakMap<SqliteGuardrailStore, string>();

/** The WHERE clause and parameters that find the record `key` names, by kind. */
function where(record: CorruptionTarget["record"], key: string): { table: string; clause: string; params: unknown[] } {
  switch (record) {
    case "receipt":
      return { table: "receipts", clause: "turn_key = ?", params: [key] };
    case "claim":
      return { table: "claims", clause: "turn_key = ?", params: [key] };
    case "approval":
      return { table: "approvals", clause: "approval_id = ?", params: [key] };
    case "turn":
      return { table: "turns", clause: "turn_key = ?", params: [key] };
    case "auditCursor":
      return { table: "audit_cursors", clause: "sink = ?", params: [key] };
    case "verdict":
      return {
        table: "verdicts",
        clause: "turn_key = ? AND tool_call_id = ? AND tool_name = ? AND tool_fingerprint = ? AND guardrail = ? AND args_digest = ?",
        params: JSON.parse(key) as unknown[],
      };
    case "read":
      return { table: "read_evidence", clause: "turn_key || ':' || evidence_digest = ?", params: [key] };
    case "effect":
      return { table: "effects", clause: "effect_key = ?", params: [key] };
  }
}

/** What makes each record unparseable in SQLite's own way: a value of the wrong shape in one of its columns. */
const INVALID: Record<CorruptionTarget["record"], string> = {
  receipt: "decided_at = 'not a time'",
  claim: "args_digest = 'not a digest'",
  approval: "record = '{\"approvalId\":'",
  turn: "record = '{\"turnKey\":'",
  auditCursor: "seq = 'many'",
  verdict: "record = '[]'",
  read: "evidence_digest = evidence_digest",
  effect: "args_digest = 'not a digest'",
};

/** The records that are a JSON column: another key's record can be copied over them. */
const JSON_RECORDS = new Set<CorruptionTarget["record"]>(["approval", "turn", "verdict"]);

function corruptRecord(store: SqliteGuardrailStore, target: CorruptionTarget): "unsupported" | undefined {
  const path = paths.get(store);
  if (path === undefined) throw new Error("a store this file did not open");
  const db = new Database(path);
  try {
    const { table, clause, params } = where(target.record, target.key);
    if (target.mode === "invalid") {
      if (target.record === "read") return "unsupported"; // a key-only row: nothing to make unparseable
      const changed = db.prepare(`UPDATE ${table} SET ${INVALID[target.record]} WHERE ${clause}`).run(...params).changes;
      if (changed !== 1) throw new Error(`corruptRecord: ${String(changed)} rows for ${target.record} ${target.key}`);
      return undefined;
    }
    // A row keyed by its own columns cannot describe another key; a JSON record can.
    if (!JSON_RECORDS.has(target.record)) return "unsupported";
    const other = where(target.record, target.otherKey);
    const changed = db
      .prepare(`UPDATE ${table} SET record = (SELECT record FROM ${table} WHERE ${other.clause}) WHERE ${clause}`)
      .run(...other.params, ...params).changes;
    if (changed !== 1) throw new Error(`corruptRecord: ${String(changed)} rows for ${target.record} ${target.key}`);
    return undefined;
  } finally {
    db.close();
  }
}

await validateGuardrailStore({
  storeName: "SqliteGuardrailStore (temp file per test)",
  parts: ["approvals", "approvalOrphans", "auditDelivery", "operator", "turns", "turnPrune", "effects", "hasSuccessfulRead"],
  beforeAll: () => {
    dir = mkdtempSync(join(tmpdir(), "arkah-sqlite-conformance-"));
  },
  afterAll: () => {
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  },
  createStore: ({ now }) => {
    if (dir === undefined) throw new Error("beforeAll did not run");
    files += 1;
    const path = join(dir, `store-${String(files)}.sqlite`);
    const store = SqliteGuardrailStore.open({ path, now });
    paths.set(store, path);
    return store;
  },
  destroyStore: (store) => {
    store.close();
  },
  corruptRecord,
});
