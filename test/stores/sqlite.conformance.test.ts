/**
 * The store conformance kit against `SqliteGuardrailStore`: a fresh database file per test, in a
 * temporary directory removed afterwards.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SqliteGuardrailStore } from "arkah-agent-guardrails/sqlite";
import { validateGuardrailStore } from "arkah-agent-guardrails/testing";

let dir: string | undefined;
let files = 0;

await validateGuardrailStore({
  storeName: "SqliteGuardrailStore (temp file per test)",
  beforeAll: () => {
    dir = mkdtempSync(join(tmpdir(), "arkah-sqlite-conformance-"));
  },
  afterAll: () => {
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  },
  createStore: ({ now }) => {
    if (dir === undefined) throw new Error("beforeAll did not run");
    files += 1;
    return SqliteGuardrailStore.open({ path: join(dir, `store-${String(files)}.sqlite`), now });
  },
  destroyStore: (store) => {
    store.close();
  },
});
