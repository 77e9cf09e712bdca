/**
 * Step conflicts of the key-value base between turns of different scopes, on the JSON adapter
 * (test/support) and the file store (examples/file-store): each guarded-mutation operation run by
 * `WORKERS` turns at once, and how many of those steps write a key another one reads or writes
 * (the steps that abort and re-run on storage with optimistic concurrency). docs/benchmarks.md.
 *
 *   pnpm tsx bench/key-value-conflicts.ts [workers, default 8]
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { FileGuardrailStore } from "../examples/file-store/store.js";
import { JsonKeyValueStore } from "../test/support/json-key-value-store.js";
import { measureStepConflicts, type StepConflicts } from "../test/support/step-conflicts.js";

const WORKERS = Number(process.argv[2] ?? 8);
if (!Number.isInteger(WORKERS) || WORKERS < 2) throw new RangeError("workers must be an integer of at least 2");

function print(adapter: string, rows: readonly StepConflicts[]): void {
  for (const row of rows) {
    const keys = row.hotKeys.length === 0 ? "" : `  on ${row.hotKeys.join(", ")}`;
    console.log(`${adapter.padEnd(10)} ${row.step.padEnd(20)} ${String(row.conflicting).padStart(2)}/${String(row.steps)} steps conflict${keys}`);
  }
}

print("JSON", await measureStepConflicts((onStep) => new JsonKeyValueStore({ onStep }), WORKERS));
const directory = mkdtempSync(join(tmpdir(), "arkah-conflicts-"));
try {
  const opened: FileGuardrailStore[] = [];
  print(
    "file store",
    await measureStepConflicts(async (onStep) => {
      const store = await FileGuardrailStore.open({ directory, onStep });
      opened.push(store);
      return store;
    }, WORKERS),
  );
  for (const store of opened) await store.close();
} finally {
  rmSync(directory, { recursive: true, force: true });
}
