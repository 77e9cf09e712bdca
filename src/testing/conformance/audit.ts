/**
 * The audit trail: append-only, numbered in append order, read back with `since`, `afterSeq` and
 * `limit`.
 */
import { expect } from "vitest";
import type { AuditEvent, GuardrailStore, StoredAuditEvent } from "../../contracts.js";
import { turnKey } from "../../keys.js";
import { auditEvent, identity, readAudit, SIBLING, TURN } from "./fixtures.js";
import type { StoreTest } from "./harness.js";

/** Appends `events` one after the other and returns them with the numbers the store gave them. */
async function appendAll(store: GuardrailStore, events: readonly AuditEvent[]): Promise<StoredAuditEvent[]> {
  for (const event of events) await expect(store.appendAudit(event)).resolves.toBeUndefined();
  const stored = await readAudit(store);
  expect(stored).toHaveLength(events.length);
  return stored;
}

const numbered = (count: number, overrides: (index: number) => Partial<AuditEvent> = () => ({})) =>
  Array.from({ length: count }, (_, index) => auditEvent({ toolCallId: `call-${String(index)}`, ...overrides(index) }));

const callIds = (events: readonly StoredAuditEvent[]) => events.map((event) => event.toolCallId);

export function auditSuite(test: StoreTest): void {
  test("a fresh store has an empty trail", async ({ store }) => {
    expect(await readAudit(store)).toEqual([]);
    expect(await readAudit(store, {})).toEqual([]);
  });

  test("returns each event exactly as appended, with its number", async ({ store }) => {
    const full: AuditEvent = auditEvent({
      decision: "refused",
      toolFingerprint: identity().toolFingerprint,
      code: "mutation_conflict",
      guardrail: "pii",
      action: "deny",
      operatorRef: "ticket-7",
      args: { title: "Field notes", nested: [1, 2.5, null, { deep: true }], label: "ünïcødé ✓" },
      result: '{"ok":true}',
    });
    const minimal: AuditEvent = {
      at: "2031-02-03T04:05:06.789Z",
      decision: "executed",
      turnKey: turnKey(SIBLING),
      scopeId: SIBLING.scopeId,
    };
    const [first, second] = await appendAll(store, [full, minimal]);
    expect(first).toEqual({ ...full, seq: first?.seq });
    expect(second).toEqual({ ...minimal, seq: second?.seq });
  });

  test("numbers events from 1, increasing in append order", async ({ store }) => {
    const stored = await appendAll(store, numbered(5));
    expect(callIds(stored)).toEqual(["call-0", "call-1", "call-2", "call-3", "call-4"]);
    expect(stored[0]?.seq).toBe(1);
    const seqs = stored.map((event) => event.seq);
    for (let index = 1; index < seqs.length; index++) expect(seqs[index]).toBeGreaterThan(seqs[index - 1] ?? Infinity);
  });

  test("keeps append order, not time order, when events arrive with earlier times", async ({ store }) => {
    const times = ["2031-02-03T04:05:09.000Z", "2031-02-03T04:05:07.000Z", "2031-02-03T04:05:08.000Z"];
    const stored = await appendAll(store, numbered(3, (index) => ({ at: times[index] ?? "" })));
    expect(stored.map((event) => event.at)).toEqual(times);
  });

  test("numbers 32 concurrent appends distinctly; each is stored once", async ({ store }) => {
    const events = numbered(32);
    await Promise.all(events.map((event) => store.appendAudit(event)));
    const stored = await readAudit(store);
    expect(new Set(stored.map((event) => event.seq)).size).toBe(32);
    expect([...callIds(stored)].sort()).toEqual(events.map((event) => event.toolCallId).sort());
    const seqs = stored.map((event) => event.seq);
    expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
  });

  test("afterSeq returns only later events", async ({ store }) => {
    const stored = await appendAll(store, numbered(5));
    const third = stored[2]?.seq ?? 0;
    expect(callIds(await readAudit(store, { afterSeq: 0 }))).toEqual(callIds(stored));
    expect(callIds(await readAudit(store, { afterSeq: third }))).toEqual(["call-3", "call-4"]);
    expect(await readAudit(store, { afterSeq: stored[4]?.seq ?? 0 })).toEqual([]);
    expect(await readAudit(store, { afterSeq: (stored[4]?.seq ?? 0) + 1000 })).toEqual([]);
  });

  test("limit returns the first events in order", async ({ store }) => {
    await appendAll(store, numbered(5));
    expect(callIds(await readAudit(store, { limit: 1 }))).toEqual(["call-0"]);
    expect(callIds(await readAudit(store, { limit: 3 }))).toEqual(["call-0", "call-1", "call-2"]);
    expect(await readAudit(store, { limit: 10_000 })).toHaveLength(5);
  });

  test("pages through the trail with afterSeq and limit, each event exactly once", async ({ store }) => {
    const stored = await appendAll(store, numbered(7));
    const pages: StoredAuditEvent[][] = [];
    let afterSeq = 0;
    for (let guard = 0; guard < 10; guard++) {
      const page = await readAudit(store, { afterSeq, limit: 3 });
      if (page.length === 0) break;
      pages.push(page);
      afterSeq = page[page.length - 1]?.seq ?? afterSeq;
    }
    expect(pages.map((page) => page.length)).toEqual([3, 3, 1]);
    expect(pages.flat()).toEqual(stored);
  });

  test("since returns events at or after an instant, comparing instants rather than text", async ({ store }) => {
    const events = numbered(5, (index) => ({
      at: [
        "2031-02-03T03:59:59.999Z", // before
        "2031-02-03T04:00:00.000Z", // exactly at: included
        "2031-02-03T05:30:00.000+02:00", // 03:30Z, before, though it sorts after as text
        "2031-02-03T06:00:00.000+02:00", // 04:00Z, exactly at, written with an offset
        "2031-02-03T04:00:00.001Z", // after
      ][index] ?? "",
    }));
    await appendAll(store, events);
    expect(callIds(await readAudit(store, { since: "2031-02-03T04:00:00.000Z" }))).toEqual(["call-1", "call-3", "call-4"]);
    expect(callIds(await readAudit(store, { since: "2031-02-03T01:00:00.000-03:00" }))).toEqual(["call-1", "call-3", "call-4"]);
    expect(await readAudit(store, { since: "2031-02-03T04:00:00.002Z" })).toEqual([]);
  });

  test("since, afterSeq and limit combine: limit counts matching events only", async ({ store }) => {
    const old = "2031-02-03T00:00:00.000Z";
    const recent = "2031-02-03T12:00:00.000Z";
    const stored = await appendAll(store, numbered(8, (index) => ({ at: index % 2 === 0 ? old : recent })));
    expect(callIds(await readAudit(store, { since: recent, limit: 2 }))).toEqual(["call-1", "call-3"]);
    expect(callIds(await readAudit(store, { since: recent, afterSeq: stored[3]?.seq ?? 0, limit: 1 }))).toEqual(["call-5"]);
    expect(callIds(await readAudit(store, { since: recent, afterSeq: stored[3]?.seq ?? 0 }))).toEqual(["call-5", "call-7"]);
  });

  test("reading does not consume or change the trail", async ({ store }) => {
    const stored = await appendAll(store, numbered(3));
    await readAudit(store, { limit: 1 });
    await readAudit(store, { afterSeq: 1 });
    expect(await readAudit(store)).toEqual(stored);
  });

  test("detaches what it stores: changing an appended event afterwards changes nothing", async ({ store }) => {
    const input = auditEvent({ args: { title: "Field notes", tags: ["a"] }, result: "ok" });
    await store.appendAudit(input);
    input.decision = "failed";
    input.result = "changed";
    (input.args as { tags: string[] }).tags.push("changed");
    expect(await readAudit(store)).toEqual([{ ...auditEvent({ args: { title: "Field notes", tags: ["a"] }, result: "ok" }), seq: 1 }]);
  });

  test("detaches what it returns: changing read events changes nothing stored", async ({ store }) => {
    const stored = await appendAll(store, [auditEvent({ args: { tags: ["a"] } }), auditEvent({ turnKey: turnKey(TURN) })]);
    const copy = structuredClone(stored);
    const [first] = await readAudit(store);
    if (first !== undefined) {
      first.decision = "failed";
      first.seq = 99;
      (first.args as { tags: string[] }).tags.push("changed");
    }
    (await readAudit(store)).pop();
    expect(await readAudit(store)).toEqual(copy);
  });
}
