/**
 * Store round trips of a guarded read-then-write turn, counted on each shipped store: after
 * admission, one call per read (the evidence with its audit event), one claim (which checks the
 * read evidence itself) and one settlement (with its audit event). Every call is one transaction
 * on SQLite and PostgreSQL, so this is also the number of commits a turn costs. A side effect
 * adds two: its claim and its settlement (with its audit event).
 */
import { tool } from "langchain";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import type pg from "pg";
import { InMemoryGuardrailStore, turnKey as turnKeyOf, type GuardrailStore } from "arkah-agent-guardrails";
import { PostgresGuardrailStore } from "arkah-agent-guardrails/postgres";
import { SqliteGuardrailStore } from "arkah-agent-guardrails/sqlite";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { admit, guardedAgent, invokeTurn, outcomeOf, read, rename, TOOL_POLICIES, turnInput } from "../support/fixtures.js";
import { adminPool, describePostgres, dropSchema, freshSchema } from "../support/postgres.js";

/** The same store, every method call counted by name. */
function counted(store: GuardrailStore): { store: GuardrailStore; calls: Map<string, number> } {
  const calls = new Map<string, number>();
  const proxy = new Proxy(store, {
    get(target, property, receiver) {
      const value: unknown = Reflect.get(target, property, receiver);
      if (typeof value !== "function" || typeof property !== "string") return value;
      return (...args: unknown[]) => {
        calls.set(property, (calls.get(property) ?? 0) + 1);
        return (value as (...inner: unknown[]) => unknown).apply(target, args);
      };
    },
  });
  return { store: proxy, calls };
}

async function countTurn(base: GuardrailStore, options: { readonly sideEffect?: boolean } = {}) {
  const { store, calls } = counted(base);
  const sent: string[] = [];
  const notify = tool(
    ({ text }) => {
      sent.push(text);
      return "sent";
    },
    { name: "notify", description: "Notify the team.", schema: z.object({ text: z.string() }) },
  );
  const { agent, input, service } = guardedAgent({
    store,
    // Its own turn, so both counts can run on one store.
    input: turnInput({ turnId: options.sideEffect === true ? "turn-with-effect" : "turn-1" }),
    script: [
      { toolCalls: [read("r1")] },
      { toolCalls: [rename("w1")] },
      ...(options.sideEffect === true ? [{ toolCalls: [{ id: "n1", name: "notify", args: { text: "renamed" } }] }] : []),
      { content: "done" },
    ],
    extraTools: [notify],
    guardrails: { tools: { ...TOOL_POLICIES, notify: { kind: "side-effect" } } },
  });
  await admit(base, input);
  // The receipt is verified once per turn and cached; count from the run on.
  const messages = await invokeTurn(agent, input);
  expect(outcomeOf(messages, "w1").status).toBe("success");
  expect(service.writes).toBe(1);
  expect(sent).toHaveLength(options.sideEffect === true ? 1 : 0);
  const trail = await base.readAudit({ turnKey: turnKeyOf(input) });
  return { calls: Object.fromEntries([...calls].filter(([name]) => name !== "getReceipt")), trail };
}

const EXPECTED = { recordSuccessfulRead: 1, claimMutation: 1, settleMutation: 1 };

function expectThreeRoundTrips(result: Awaited<ReturnType<typeof countTurn>>) {
  expect(result.calls).toEqual(EXPECTED);
  // Each decision's audit event came with it.
  expect(result.trail.map((event) => `${event.decision}:${event.toolCallId ?? ""}`)).toEqual(["executed:r1", "executed:w1"]);
}

/** The same turn with one side effect after the write: its claim and its settlement, nothing else. */
async function expectSideEffectRoundTrips(base: GuardrailStore) {
  const result = await countTurn(base, { sideEffect: true });
  expect(result.calls).toEqual({ ...EXPECTED, claimEffect: 1, settleEffect: 1 });
  expect(result.trail.map((event) => `${event.decision}:${event.toolCallId ?? ""}`)).toEqual(["executed:r1", "executed:w1", "executed:n1"]);
}

describe("a read-then-write turn makes three store calls after admission", () => {
  it("on the in-memory store", async () => {
    expectThreeRoundTrips(await countTurn(new InMemoryGuardrailStore()));
  });

  it("on the in-memory store, a side effect adds its claim and its settlement", async () => {
    await expectSideEffectRoundTrips(new InMemoryGuardrailStore());
  });

  it("on the SQLite store", async () => {
    const dir = mkdtempSync(join(tmpdir(), "arkah-round-trips-"));
    const store = SqliteGuardrailStore.open({ path: join(dir, "guardrails.sqlite") });
    try {
      expectThreeRoundTrips(await countTurn(store));
      await expectSideEffectRoundTrips(store);
    } finally {
      store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describePostgres("a read-then-write turn makes three store calls after admission, on PostgreSQL", (url) => {
  let admin: pg.Pool;
  const schema = freshSchema("arkah_trips");
  beforeAll(() => {
    admin = adminPool();
  });
  afterAll(async () => {
    await dropSchema(admin, schema);
    await admin.end();
  });

  it("on the PostgreSQL store", async () => {
    const store = await PostgresGuardrailStore.open({ connectionString: url }, { schema });
    try {
      expectThreeRoundTrips(await countTurn(store));
      await expectSideEffectRoundTrips(store);
    } finally {
      await store.close();
    }
  });
});
