/**
 * Audit cursors: how far each named sink has been delivered. Forward only, atomic under
 * concurrency, one per sink name, and independent of the trail itself.
 */
import { expect } from "vitest";
import { AuditCursorSchema, type GuardrailStore } from "../../contracts/index.js";
import { auditEvent, complete, conform, expectBoolean, identity, readAudit, TURN, TURN_KEY } from "./fixtures.js";
import type { StoreTest } from "./harness.js";

async function cursor(store: GuardrailStore, sink: string): Promise<number> {
  return conform(AuditCursorSchema, await store.getAuditCursor(sink), `getAuditCursor(${JSON.stringify(sink)})'s answer`);
}

async function advance(store: GuardrailStore, sink: string, seq: number): Promise<boolean> {
  const moved = await store.advanceAuditCursor({ sink, seq });
  expect(typeof moved, "advanceAuditCursor must answer a boolean").toBe("boolean");
  return moved;
}

export function cursorsSuite(test: StoreTest): void {
  test("a sink without a cursor is at 0", async ({ store }) => {
    expect(await cursor(store, "default"), "await cursor(store, \"default\") toBe").toBe(0);
    await store.appendAudit(auditEvent());
    expect(await cursor(store, "default"), "await cursor(store, \"default\") toBe").toBe(0);
  });

  test("advances forward: true, and the cursor is the new seq", async ({ store }) => {
    expectBoolean(await advance(store, "default", 3), true, "advancing from 0 to 3");
    expect(await cursor(store, "default"), "await cursor(store, \"default\") toBe").toBe(3);
    expectBoolean(await advance(store, "default", 4), true, "advancing from 3 to 4");
    expectBoolean(await advance(store, "default", 9_000_000_000), true, "advancing to a large seq");
    expect(await cursor(store, "default"), "await cursor(store, \"default\") toBe").toBe(9_000_000_000);
  });

  test("an equal or lower seq changes nothing and answers false", async ({ store }) => {
    expectBoolean(await advance(store, "default", 0), false, "advancing a fresh cursor to 0");
    expect(await cursor(store, "default"), "await cursor(store, \"default\") toBe").toBe(0);
    await advance(store, "default", 5);
    expectBoolean(await advance(store, "default", 5), false, "advancing to the same seq");
    expectBoolean(await advance(store, "default", 4), false, "moving back");
    expectBoolean(await advance(store, "default", 0), false, "moving back to 0");
    expect(await cursor(store, "default"), "await cursor(store, \"default\") toBe").toBe(5);
  });

  test("keeps one cursor per sink name, matched exactly", async ({ store }) => {
    const names = ["default", "Default", "default ", "siem", "ünïcødé ✓", "nul\u0000name", "\u0001marked"];
    for (const [index, name] of names.entries()) await advance(store, name, index + 1);
    for (const [index, name] of names.entries()) expect(await cursor(store, name), name).toBe(index + 1);
    expect(await cursor(store, "defaul"), "await cursor(store, \"defaul\") toBe").toBe(0);
    expect(await cursor(store, "nul"), "await cursor(store, \"nul\") toBe").toBe(0);
  });

  test("sink names are stored exactly: two names differing only in a lone surrogate have their own cursors", async ({ store }) => {
    // A backend that stores text as UTF-8 replaces a lone surrogate (U+FFFD): both names would be one.
    const names = ["s\uD800", "s\uDC00", "s\uFFFD", "\uD83D", "\uDE00", "\uD83D\uDE00"];
    for (const [index, name] of names.entries()) await advance(store, name, index + 1);
    for (const [index, name] of names.entries()) {
      expect(await cursor(store, name), `the cursor of ${JSON.stringify(name)}: its own, not another name's that encodes the same`).toBe(index + 1);
    }
  });

  test("16 concurrent advances of one sink to different seqs: it ends at the highest, which answered true", async ({ store }) => {
    const seqs = Array.from({ length: 16 }, (_, index) => ((index * 7) % 16) + 1);
    const answers = await Promise.all(seqs.map((seq) => advance(store, "default", seq)));
    expect(await cursor(store, "default"), "await cursor(store, \"default\") toBe").toBe(16);
    expect(answers[seqs.indexOf(16)], "answers[seqs.indexOf(16)] toBe").toBe(true);
    expect(answers.filter((moved) => moved).length, "answers.filter((moved) => moved).length toBeGreaterThanOrEqual").toBeGreaterThanOrEqual(1);
  });

  test("16 concurrent advances of one sink to the same seq: exactly one answers true", async ({ store }) => {
    await advance(store, "default", 2);
    const answers = await Promise.all(Array.from({ length: 16 }, () => advance(store, "default", 7)));
    expect(answers.filter((moved) => moved), "answers.filter((moved) => moved) toHaveLength").toHaveLength(1);
    expect(await cursor(store, "default"), "await cursor(store, \"default\") toBe").toBe(7);
  });

  test("cursors and the trail are independent: advancing appends nothing, prune keeps cursors", async ({ store, clock }) => {
    await complete(store, identity(TURN));
    await store.appendAudit(auditEvent());
    const trail = await readAudit(store);
    await advance(store, "default", 1);
    expect(await readAudit(store), "await readAudit(store) toEqual").toEqual(trail);
    clock.advance(24 * 60 * 60 * 1000);
    await store.prune({ olderThan: clock.iso() });
    expect(await cursor(store, "default"), "await cursor(store, \"default\") toBe").toBe(1);
    expect(await readAudit(store, { turnKey: TURN_KEY }), "await readAudit(store, { turnKey: TURN_KEY }) toEqual").toEqual(trail);
  }, ["operator"]);
}
