/**
 * The turn's single mutation slot: atomic claims with their six outcomes, settlement as a
 * compare-and-set from `pending` by the claim token, and releasing a claim whose tool body never
 * started.
 */
import { expect } from "vitest";
import { MutationStatusSchema, type GuardrailStore, type MutationIdentity, type MutationResult } from "../../contracts/index.js";
import type { Call } from "./fixtures.js";
import { turnKey } from "../../keys.js";
import {
  acquire,
  CALL,
  claim,
  complete,
  conform,
  ERROR_RESULT,
  expectBoolean,
  expectContractError,
  expectInstant,
  fingerprintOfCall,
  identity,
  leaveUnknown,
  OPERATOR_RESULT,
  readAudit,
  REDESCRIBED,
  RESULT,
  RIVAL_CALLS,
  SIBLING,
  STRANGER,
  TURN,
  TURN_KEY,
  turn,
  unresolved,
} from "./fixtures.js";
import type { StoreTest } from "./harness.js";

const count = (statuses: readonly string[], status: string) => statuses.filter((value) => value === status).length;

/** What a conflict reports about `CALL` completed with `RESULT`. */
const COMPLETED = { toolName: CALL.name, toolCallId: CALL.id, result: RESULT };

// ---------------------------------------------------------------------------------------------
// Claims

export function claimsSuite(test: StoreTest): void {
  mutationStatusTests(test);
  test("acquired: a free slot is claimed with a non-empty token", async ({ store }) => {
    const result = await claim(store);
    expect(result.status, "result.status toBe").toBe("acquired");
    expect(result.status === "acquired" ? result.token : "", "result.status === \"acquired\" ? result.token : \"\" not.toBe").not.toBe("");
  });

  test("pending: the same call while its claim is open", async ({ store }) => {
    await acquire(store);
    expect(await claim(store), "await claim(store) toEqual").toEqual({ status: "pending" });
    expect(await claim(store, { ...identity() }), "await claim(store, { ...identity() }) toEqual").toEqual({ status: "pending" });
  });

  test("replay: the same call after it completed gets the stored result, every time", async ({ store }) => {
    await complete(store, identity(), RESULT);
    expect(await claim(store), "await claim(store) toEqual").toEqual({ status: "replay", result: RESULT });
    expect(await claim(store), "await claim(store) toEqual").toEqual({ status: "replay", result: RESULT });
  });

  test("replay: an error result is replayed as an error", async ({ store }) => {
    await complete(store, identity(), ERROR_RESULT);
    expect(await claim(store), "await claim(store) toEqual").toEqual({ status: "replay", result: ERROR_RESULT });
  });

  test("replay: content is returned exactly (empty, whitespace, unicode, quotes, large)", async ({ store }) => {
    const contents = ["", "  padded\n\ttext \r\n ", "ünïcødé ✓ 🚀 \u2028", `'"\\%_;--`, "x".repeat(256 * 1024)];
    for (const [index, content] of contents.entries()) {
      const id = identity(turn(`content-${String(index)}`));
      const result: MutationResult = { content, status: "success" };
      await complete(store, id, result);
      expect(await claim(store, id), `content #${String(index)}`).toEqual({ status: "replay", result });
    }
  });

  test("replay: content with a NUL character is returned exactly", async ({ store }) => {
    // Valid Unicode and valid JSON; PostgreSQL text and jsonb columns reject it, so store it as bytes or escape it.
    const result: MutationResult = { content: "before\u0000after", status: "success" };
    await complete(store, identity(), result);
    expect(await claim(store), "await claim(store) toEqual").toEqual({ status: "replay", result });
  });

  test("unknown: the same call after an ambiguous outcome", async ({ store }) => {
    await leaveUnknown(store);
    expect(await claim(store), "await claim(store) toEqual").toEqual({ status: "unknown" });
    expect(await claim(store), "await claim(store) toEqual").toEqual({ status: "unknown" });
  });

  for (const [label, call] of RIVAL_CALLS) {
    test(`conflict: ${label} in the same turn, whatever state the slot is in`, async ({ store }) => {
      const rival = identity(TURN, call);
      const token = await acquire(store);
      expect(await claim(store, rival), "while pending").toEqual({ status: "conflict" });
      expect(await store.settleMutation({ turnKey: TURN_KEY, token, outcome: "complete", result: RESULT }), "await store.settleMutation({ turnKey: TURN_KEY, token, outcome: \"complete\", result: RESULT }) toBe").toBe(true);
      expect(await claim(store, rival), "after completion").toEqual({ status: "conflict", completed: COMPLETED });
    });
  }

  test("conflict with a completed slot says what was done: the call's tool, id and result, every time", async ({ store }) => {
    await complete(store, identity(), ERROR_RESULT);
    const completed = { toolName: CALL.name, toolCallId: CALL.id, result: ERROR_RESULT };
    for (const [label, call] of RIVAL_CALLS) {
      expect(await claim(store, identity(TURN, call)), label).toEqual({ status: "conflict", completed });
    }
    // A redescribed tool is the same call: a replay, not a conflict.
    expect(await claim(store, identity(TURN, REDESCRIBED)), "await claim(store, identity(TURN, REDESCRIBED)) toEqual").toEqual({ status: "replay", result: ERROR_RESULT });
    // Another turn's completed call is no conflict of this one.
    expect((await claim(store, identity(SIBLING, { ...CALL, id: "call-2" }))).status, "(await claim(store, identity(SIBLING, { ...CALL, id: \"call-2\" }))).status toBe").toBe("acquired");
  });

  test("conflict with a completed slot returns its ids and result exactly (unicode, NUL, empty content)", async ({ store }) => {
    const odd: Call = { id: "call \u00e9\u0000 1", name: "rename_document \u2028", args: { title: "x" } };
    const result: MutationResult = { content: "", status: "success" };
    await complete(store, identity(TURN, odd), result);
    expect(await claim(store), "await claim(store) toEqual").toEqual({ status: "conflict", completed: { toolName: odd.name, toolCallId: odd.id, result } });
    const other = identity(SIBLING, { ...CALL, id: "call-2" });
    const nul: MutationResult = { content: "before\u0000after \u{1F680}", status: "error" };
    await complete(store, other, nul);
    expect(await claim(store, identity(SIBLING)), "await claim(store, identity(SIBLING)) toEqual").toEqual({
      status: "conflict",
      completed: { toolName: CALL.name, toolCallId: "call-2", result: nul },
    });
  });

  test("detaches what it returns: changing a conflict's completed result changes nothing stored", async ({ store }) => {
    await complete(store);
    const rival = identity(TURN, { ...CALL, id: "call-2" });
    const answer = await claim(store, rival);
    if (answer.status !== "conflict" || answer.completed === undefined) throw new Error("expected a completed conflict");
    answer.completed.result.content = "changed";
    answer.completed.toolCallId = "changed";
    expect(await claim(store, rival), "await claim(store, rival) toEqual").toEqual({ status: "conflict", completed: COMPLETED });
    expect(await claim(store), "await claim(store) toEqual").toEqual({ status: "replay", result: RESULT });
  });

  test("conflict: another call of a turn whose mutation is unknown, without a completed mutation", async ({ store }) => {
    await leaveUnknown(store);
    for (const [label, call] of RIVAL_CALLS) {
      expect(await claim(store, identity(TURN, call)), label).toEqual({ status: "conflict" });
    }
  });

  test("the tool fingerprint is recorded, not matched: the same call to a redescribed tool is the same claim", async ({ store }) => {
    const redescribed = identity(TURN, REDESCRIBED);
    expect(redescribed.mutationKey, "redescribed.mutationKey toBe").toBe(identity().mutationKey);
    expect(redescribed.toolFingerprint, "redescribed.toolFingerprint not.toBe").not.toBe(identity().toolFingerprint);
    const token = await acquire(store);
    expect(await claim(store, redescribed), "await claim(store, redescribed) toEqual").toEqual({ status: "pending" });
    // The claim keeps the fingerprint of the call that acquired it.
    expect(await unresolved(store), "await unresolved(store) toMatchObject").toMatchObject([{ ...identity(), state: "pending" }]);
    expect(await store.settleMutation({ turnKey: TURN_KEY, token, outcome: "complete", result: RESULT }), "await store.settleMutation({ turnKey: TURN_KEY, token, outcome: \"complete\", result: RESULT }) toBe").toBe(true);
    expect(await claim(store, redescribed), "await claim(store, redescribed) toEqual").toEqual({ status: "replay", result: RESULT });
  }, ["operator"]);

  test("listUnresolved returns each claim's tool fingerprint exactly", async ({ store }) => {
    await acquire(store, identity(TURN, REDESCRIBED));
    await leaveUnknown(store, identity(STRANGER));
    const list = await unresolved(store);
    expect(list.map((entry) => entry.toolFingerprint), "list.map((entry) => entry.toolFingerprint) toEqual").toEqual([fingerprintOfCall(REDESCRIBED), identity(STRANGER).toolFingerprint]);
  }, ["operator"]);

  test("scope_unresolved: another turn of a scope with an unknown mutation, and nothing is claimed", async ({ store }) => {
    await leaveUnknown(store);
    expect(await claim(store, identity(SIBLING)), "await claim(store, identity(SIBLING)) toEqual").toEqual({ status: "scope_unresolved" });
    expect(await unresolved(store), "await unresolved(store) toHaveLength").toHaveLength(1);
  }, ["operator"]);

  test("a claim that is not acquired leaves the slot as it was", async ({ store }) => {
    const token = await acquire(store);
    for (const [, call] of RIVAL_CALLS) await claim(store, identity(TURN, call));
    await claim(store);
    expect((await unresolved(store)).map((entry) => entry.mutationKey), "(await unresolved(store)).map((entry) => entry.mutationKey) toEqual").toEqual([identity().mutationKey]);
    expect(await store.settleMutation({ turnKey: TURN_KEY, token, outcome: "complete", result: RESULT }), "await store.settleMutation({ turnKey: TURN_KEY, token, outcome: \"complete\", result: RESULT }) toBe").toBe(true);
    expect(await claim(store), "await claim(store) toEqual").toEqual({ status: "replay", result: RESULT });
  }, ["operator"]);

  test("turns are independent: each turn has its own slot and its own token", async ({ store }) => {
    const tokens = [
      await acquire(store, identity(TURN)),
      await acquire(store, identity(SIBLING)),
      await acquire(store, identity(STRANGER)),
    ];
    expect(new Set(tokens).size, "new Set(tokens).size toBe").toBe(3);
    expect(await claim(store, identity(TURN)), "await claim(store, identity(TURN)) toEqual").toEqual({ status: "pending" });
  });

  test("32 racing claims of the same call: exactly one acquired, 31 pending", async ({ store }) => {
    const results = await Promise.all(Array.from({ length: 32 }, () => claim(store, { ...identity() })));
    const statuses = results.map((result) => result.status);
    expect(count(statuses, "acquired"), statuses.join()).toBe(1);
    expect(count(statuses, "pending"), statuses.join()).toBe(31);
  });

  test("32 racing claims of 32 different calls in one turn: exactly one acquired, 31 conflict", async ({ store }) => {
    const ids = Array.from({ length: 32 }, (_, index) => identity(TURN, { ...CALL, id: `race-${String(index)}` }));
    const results = await Promise.all(ids.map((id) => claim(store, id)));
    const statuses = results.map((result) => result.status);
    expect(count(statuses, "acquired"), statuses.join()).toBe(1);
    expect(count(statuses, "conflict"), statuses.join()).toBe(31);
    // The winner holds the slot: its token settles it, and its call replays.
    const winner = statuses.indexOf("acquired");
    const won = results[winner];
    const id = ids[winner];
    if (won?.status !== "acquired" || id === undefined) throw new Error("no winner");
    expect(await store.settleMutation({ turnKey: TURN_KEY, token: won.token, outcome: "complete", result: RESULT }), "await store.settleMutation({ turnKey: TURN_KEY, token: won.token, outcome: \"complete\", result: RE...").toBe(true);
    expect(await claim(store, id), "await claim(store, id) toEqual").toEqual({ status: "replay", result: RESULT });
  });

  test("32 racing claims, two of each of 16 calls in one turn: one acquired, its twin pending, 30 conflict", async ({ store }) => {
    const ids = Array.from({ length: 32 }, (_, index) => identity(TURN, { ...CALL, id: `twin-${String(index % 16)}` }));
    const results = await Promise.all(ids.map((id) => claim(store, id)));
    const statuses = results.map((result) => result.status);
    expect(count(statuses, "acquired"), statuses.join()).toBe(1);
    expect(count(statuses, "pending"), statuses.join()).toBe(1);
    expect(count(statuses, "conflict"), statuses.join()).toBe(30);
    const winner = statuses.indexOf("acquired");
    expect(ids[statuses.indexOf("pending")], "ids[statuses.indexOf(\"pending\")] toEqual").toEqual(ids[winner]);
  });

  test("32 racing claims in 32 turns: every one acquired, with 32 distinct tokens", async ({ store }) => {
    const results = await Promise.all(
      Array.from({ length: 32 }, (_, index) => claim(store, identity(turn(`parallel-${String(index)}`)))),
    );
    const tokens = results.map((result) => (result.status === "acquired" ? result.token : result.status));
    expect(results.every((result) => result.status === "acquired"), tokens.join()).toBe(true);
    expect(new Set(tokens).size, "new Set(tokens).size toBe").toBe(32);
  });

  test("32 racing claims of a turn in a scope with an unknown mutation: all scope_unresolved", async ({ store }) => {
    await leaveUnknown(store);
    const results = await Promise.all(
      Array.from({ length: 32 }, (_, index) => claim(store, identity(SIBLING, { ...CALL, id: `blocked-${String(index)}` }))),
    );
    expect(results.every((result) => result.status === "scope_unresolved"), "results.every((result) => result.status === \"scope_unresolved\") toBe").toBe(true);
    expect(await unresolved(store), "await unresolved(store) toHaveLength").toHaveLength(1);
  }, ["operator"]);

  test("detaches what it stores: changing the caller's identity after the claim changes nothing", async ({ store }) => {
    const input = identity();
    await acquire(store, input);
    input.mutationKey = identity(TURN, { ...CALL, id: "changed" }).mutationKey;
    input.toolCallId = "changed";
    expect(await claim(store, identity()), "await claim(store, identity()) toEqual").toEqual({ status: "pending" });
    expect(await unresolved(store), "await unresolved(store) toMatchObject").toMatchObject([identity()]);
  }, ["operator"]);

  test("detaches what it returns: changing a replayed result changes nothing stored", async ({ store }) => {
    await complete(store, identity(), RESULT);
    const replay = await claim(store);
    if (replay.status !== "replay") throw new Error(`expected replay, got ${replay.status}`);
    replay.result.content = "changed";
    replay.result.status = "error";
    expect(await claim(store), "await claim(store) toEqual").toEqual({ status: "replay", result: RESULT });
  });
}

// ---------------------------------------------------------------------------------------------
// Settlement

export function settlementSuite(test: StoreTest): void {
  const settleComplete = (store: GuardrailStore, token: string, result: MutationResult = RESULT, key = TURN_KEY) =>
    store.settleMutation({ turnKey: key, token, outcome: "complete", result });

  test("settles a pending claim complete with its token: true, and the call replays", async ({ store }) => {
    const token = await acquire(store);
    expectBoolean(await settleComplete(store, token), true, "settling with the claim's token");
    expect(await claim(store), "await claim(store) toEqual").toEqual({ status: "replay", result: RESULT });
    expect(await unresolved(store), "await unresolved(store) toEqual").toEqual([]);
  }, ["operator"]);

  test("settles a pending claim unknown with its token: true, and the call is unknown", async ({ store }) => {
    const token = await acquire(store);
    expectBoolean(await store.settleMutation({ turnKey: TURN_KEY, token, outcome: "unknown" }), true, "settling unknown");
    expect(await claim(store), "await claim(store) toEqual").toEqual({ status: "unknown" });
    expect(await unresolved(store), "await unresolved(store) toMatchObject").toMatchObject([{ ...identity(), state: "unknown" }]);
  }, ["operator"]);

  test("refuses a wrong token (false) and changes nothing", async ({ store }) => {
    const token = await acquire(store);
    const before = await unresolved(store);
    const wrongTokens = [`${token}x`, token.slice(0, -1), `${token.startsWith("x") ? "y" : "x"}${token.slice(1)}`, "token"];
    for (const wrong of wrongTokens.filter((value) => value !== token && value !== "")) {
      expectBoolean(await settleComplete(store, wrong), false, `complete with token ${wrong}`);
      const unknown = await store.settleMutation({ turnKey: TURN_KEY, token: wrong, outcome: "unknown" });
      expectBoolean(unknown, false, `unknown with token ${wrong}`);
    }
    expect(await claim(store), "await claim(store) toEqual").toEqual({ status: "pending" });
    expect(await unresolved(store), "await unresolved(store) toEqual").toEqual(before);
    expectBoolean(await settleComplete(store, token), true, "the right token afterwards");
  }, ["operator"]);

  test("refuses a token against another turn's claim, even in another scope", async ({ store }) => {
    const mine = await acquire(store, identity(TURN));
    const theirs = await acquire(store, identity(SIBLING));
    const stranger = await acquire(store, identity(STRANGER));
    expectBoolean(await settleComplete(store, mine, RESULT, turnKey(SIBLING)), false, "turn 1's token on turn 2");
    expectBoolean(await settleComplete(store, stranger, RESULT, TURN_KEY), false, "another scope's token on turn 1");
    expect(await claim(store, identity(SIBLING)), "await claim(store, identity(SIBLING)) toEqual").toEqual({ status: "pending" });
    expect(await claim(store, identity(TURN)), "await claim(store, identity(TURN)) toEqual").toEqual({ status: "pending" });
    expectBoolean(await settleComplete(store, theirs, RESULT, turnKey(SIBLING)), true, "turn 2's own token");
  });

  test("refuses to settle a turn without a claim (false), and creates none", async ({ store }) => {
    expectBoolean(await settleComplete(store, "no-such-token"), false, "settling an unclaimed turn");
    expectBoolean(await store.settleMutation({ turnKey: TURN_KEY, token: "no-such-token", outcome: "unknown" }), false, "unknown");
    expect(await unresolved(store), "await unresolved(store) toEqual").toEqual([]);
    await acquire(store);
  }, ["operator"]);

  test("settles only from pending: a second settlement with the token is false and changes nothing", async ({ store }) => {
    const token = await acquire(store);
    expectBoolean(await settleComplete(store, token, RESULT), true, "first settlement");
    expectBoolean(await settleComplete(store, token, ERROR_RESULT), false, "second complete");
    expectBoolean(await store.settleMutation({ turnKey: TURN_KEY, token, outcome: "unknown" }), false, "then unknown");
    expect(await claim(store), "await claim(store) toEqual").toEqual({ status: "replay", result: RESULT });
  });

  test("an unknown claim cannot be settled again, not even complete with its token", async ({ store }) => {
    const token = await leaveUnknown(store);
    expectBoolean(await settleComplete(store, token), false, "complete after unknown");
    expectBoolean(await store.settleMutation({ turnKey: TURN_KEY, token, outcome: "unknown" }), false, "unknown again");
    expect(await claim(store), "await claim(store) toEqual").toEqual({ status: "unknown" });
  });

  test("16 racing settlements with the token: exactly one applies, and its result is the one replayed", async ({ store }) => {
    const token = await acquire(store);
    const results: MutationResult[] = Array.from({ length: 16 }, (_, index) => ({
      content: `result ${String(index)}`,
      status: "success",
    }));
    const applied = await Promise.all(results.map((result) => settleComplete(store, token, result)));
    expect(applied.filter((value) => value), "applied.filter((value) => value) toHaveLength").toHaveLength(1);
    expect(await claim(store), "await claim(store) toEqual").toEqual({ status: "replay", result: results[applied.indexOf(true)] });
  });

  test("racing complete and unknown settlements: exactly one applies", async ({ store }) => {
    const token = await acquire(store);
    const [completed, unknown] = await Promise.all([
      settleComplete(store, token),
      store.settleMutation({ turnKey: TURN_KEY, token, outcome: "unknown" }),
    ]);
    expect([completed, unknown].filter((value) => value), "[completed, unknown].filter((value) => value) toHaveLength").toHaveLength(1);
    expect(await claim(store), "await claim(store) toEqual").toEqual(completed ? { status: "replay", result: RESULT } : { status: "unknown" });
  });

  test("a settlement never applied leaves the claim closed: pending to its call, conflict to others, listed", async ({ store, clock }) => {
    // The observable half of "a failed settlement leaves the claim pending": whatever went wrong,
    // a claim nobody settled stays closed and visible to an operator, however old it gets.
    const claimedAt = clock.ms;
    await acquire(store);
    clock.advance(30 * 24 * 60 * 60 * 1000);
    expect(await claim(store), "await claim(store) toEqual").toEqual({ status: "pending" });
    for (const [label, call] of RIVAL_CALLS) {
      expect(await claim(store, identity(TURN, call)), label).toEqual({ status: "conflict" });
    }
    const list = await unresolved(store);
    expect(list, "list toMatchObject").toMatchObject([{ ...identity(), state: "pending" }]);
    expect(Date.parse(list[0]?.claimedAt ?? ""), "Date.parse(list[0]?.claimedAt ?? \"\") toBe").toBe(claimedAt);
  }, ["operator"]);

  test("detaches what it stores: changing the settled result object afterwards changes nothing", async ({ store }) => {
    const token = await acquire(store);
    const result: MutationResult = { ...RESULT };
    await settleComplete(store, token, result);
    result.content = "changed";
    result.status = "error";
    expect(await claim(store), "await claim(store) toEqual").toEqual({ status: "replay", result: RESULT });
  });
}

// ---------------------------------------------------------------------------------------------
// Release

export function releaseSuite(test: StoreTest): void {
  const release = async (store: GuardrailStore, token: string, key = TURN_KEY) => {
    const released = await store.releaseMutation({ turnKey: key, token });
    expect(typeof released, "releaseMutation must answer a boolean").toBe("boolean");
    return released;
  };
  const releasedEvents = async (store: GuardrailStore) =>
    (await readAudit(store)).filter((event) => event.decision === "released");

  /** The audit event a release must leave: the claim's identity, at the store's time. */
  function expectReleasedEvent(event: unknown, id: MutationIdentity, atMs: number): void {
    // The same fields as the reconciled event (kind "mutation" included), without action and operatorRef.
    expect(event, "the released event: decision, the claim's identity and kind \"mutation\"").toMatchObject({
      decision: "released",
      turnKey: id.turnKey,
      scopeId: id.scopeId,
      toolCallId: id.toolCallId,
      toolName: id.toolName,
      toolFingerprint: id.toolFingerprint,
      kind: "mutation",
      argsDigest: id.argsDigest,
      mutationKey: id.mutationKey,
    });
    expect(event, "a release is no operator's decision: no operatorRef").not.toHaveProperty("operatorRef");
    expect(event, "a release has no resolution: no action").not.toHaveProperty("action");
    expect(event, "event not.toHaveProperty").not.toHaveProperty("args");
    expectInstant((event as { at?: string } | undefined)?.at, atMs, "the released event's time");
  }

  test("releases a pending claim with its token: true, and the same call acquires again with a new token", async ({ store }) => {
    const oldToken = await acquire(store);
    expectBoolean(await release(store, oldToken), true, "releasing with the claim's token");
    expect(await unresolved(store), "await unresolved(store) toEqual").toEqual([]);
    const newToken = await acquire(store);
    expect(newToken, "newToken not.toBe").not.toBe(oldToken);
    expectBoolean(await store.settleMutation({ turnKey: TURN_KEY, token: newToken, outcome: "complete", result: RESULT }), true, "the new token");
    expect(await claim(store), "await claim(store) toEqual").toEqual({ status: "replay", result: RESULT });
  }, ["operator"]);

  for (const [label, call] of RIVAL_CALLS) {
    test(`the released slot is open to any call of the turn: ${label}`, async ({ store }) => {
      await release(store, await acquire(store));
      const rival = identity(TURN, call);
      await acquire(store, rival);
      expect(await claim(store), "await claim(store) toEqual").toEqual({ status: "conflict" });
    });
  }

  test("appends one released event with the claim's identity, at the store's time", async ({ store, clock }) => {
    const token = await acquire(store);
    clock.advance(60_000);
    await release(store, token);
    const events = await releasedEvents(store);
    expect(events, "events toHaveLength").toHaveLength(1);
    expectReleasedEvent(events[0], identity(), clock.ms);
  });

  test("the old token is dead: it cannot settle or release the slot once claimed again", async ({ store }) => {
    const oldToken = await acquire(store);
    await release(store, oldToken);
    expectBoolean(await release(store, oldToken), false, "releasing twice");
    await acquire(store);
    expectBoolean(await release(store, oldToken), false, "the old token against the new claim");
    expectBoolean(await store.settleMutation({ turnKey: TURN_KEY, token: oldToken, outcome: "unknown" }), false, "settling with it");
    expect(await claim(store), "await claim(store) toEqual").toEqual({ status: "pending" });
    expect(await releasedEvents(store), "await releasedEvents(store) toHaveLength").toHaveLength(1);
  });

  test("refuses a wrong token (false), changing nothing and appending nothing", async ({ store }) => {
    const token = await acquire(store);
    const before = await unresolved(store);
    for (const wrong of [`${token}x`, token.slice(0, -1), "token"].filter((value) => value !== token && value !== "")) {
      expectBoolean(await release(store, wrong), false, `release with token ${wrong}`);
    }
    expect(await claim(store), "await claim(store) toEqual").toEqual({ status: "pending" });
    expect(await unresolved(store), "await unresolved(store) toEqual").toEqual(before);
    expect(await readAudit(store), "await readAudit(store) toEqual").toEqual([]);
    expectBoolean(await release(store, token), true, "the right token afterwards");
  }, ["operator"]);

  test("refuses a token against another turn's claim, even in another scope", async ({ store }) => {
    const mine = await acquire(store, identity(TURN));
    await acquire(store, identity(STRANGER));
    expectBoolean(await release(store, mine, turnKey(STRANGER)), false, "turn 1's token on another scope's turn");
    expect(await claim(store, identity(STRANGER)), "await claim(store, identity(STRANGER)) toEqual").toEqual({ status: "pending" });
    expect(await readAudit(store), "await readAudit(store) toEqual").toEqual([]);
  });

  test("refuses a turn without a claim (false), and creates nothing", async ({ store }) => {
    expectBoolean(await release(store, "no-such-token"), false, "releasing an unclaimed turn");
    expect(await unresolved(store), "await unresolved(store) toEqual").toEqual([]);
    expect(await readAudit(store), "await readAudit(store) toEqual").toEqual([]);
    await acquire(store);
  }, ["operator"]);

  test("not after settlement complete: false, and the call still replays", async ({ store }) => {
    const token = await acquire(store);
    await store.settleMutation({ turnKey: TURN_KEY, token, outcome: "complete", result: RESULT });
    expectBoolean(await release(store, token), false, "releasing a completed claim");
    expect(await claim(store), "await claim(store) toEqual").toEqual({ status: "replay", result: RESULT });
    expect(await releasedEvents(store), "await releasedEvents(store) toEqual").toEqual([]);
  });

  test("not after settlement unknown: false, the call stays unknown and the scope stays blocked", async ({ store }) => {
    const token = await leaveUnknown(store);
    expectBoolean(await release(store, token), false, "releasing an unknown claim");
    expect(await claim(store), "await claim(store) toEqual").toEqual({ status: "unknown" });
    expect(await claim(store, identity(SIBLING)), "await claim(store, identity(SIBLING)) toEqual").toEqual({ status: "scope_unresolved" });
    expect(await unresolved(store), "await unresolved(store) toMatchObject").toMatchObject([{ ...identity(), state: "unknown" }]);
    expect(await releasedEvents(store), "await releasedEvents(store) toEqual").toEqual([]);
  }, ["operator"]);

  test("not after reconciliation: false, and the operator's result stands", async ({ store }) => {
    const token = await acquire(store);
    await store.reconcileMutation({ turnKey: TURN_KEY, resolution: "completed", result: OPERATOR_RESULT, operatorRef: "INC-1" });
    expectBoolean(await release(store, token), false, "releasing a reconciled claim");
    expect(await claim(store), "await claim(store) toEqual").toEqual({ status: "replay", result: OPERATOR_RESULT });
  }, ["operator"]);

  test("the scope rule is unaffected: the reopened slot is claimed under it like any free slot", async ({ store }) => {
    const token = await acquire(store, identity(TURN));
    // Another turn of the scope is left unknown while this one is pending (pending does not block).
    await leaveUnknown(store, identity(SIBLING));
    expectBoolean(await release(store, token), true, "releasing the pending claim");
    expect(await claim(store, identity(TURN)), "await claim(store, identity(TURN)) toEqual").toEqual({ status: "scope_unresolved" });
    expect(await claim(store, identity(TURN), { requireResolvedScope: false }), "await claim(store, identity(TURN), { requireResolvedScope: false }) toMatchObject").toMatchObject({ status: "acquired" });
    expect((await unresolved(store)).map((entry) => [entry.turnKey, entry.state]), "(await unresolved(store)).map((entry) => [entry.turnKey, entry.state]) toEqual").toEqual([
      [turnKey(SIBLING), "unknown"],
      [TURN_KEY, "pending"],
    ]);
  }, ["operator"]);

  test("a release racing a claim of another call: the claim is refused before it, acquires after it", async ({ store }) => {
    const token = await acquire(store);
    const rival = identity(TURN, { ...CALL, id: "call-2" });
    const [released, claimed] = await Promise.all([release(store, token), claim(store, rival)]);
    expect(released, "released toBe").toBe(true);
    expect(["conflict", "acquired"], "[\"conflict\", \"acquired\"] toContain").toContain(claimed.status);
    if (claimed.status === "conflict") await acquire(store, rival);
    expect(await claim(store), "await claim(store) toEqual").toEqual({ status: "conflict" });
    expect((await unresolved(store)).map((entry) => entry.toolCallId), "(await unresolved(store)).map((entry) => entry.toolCallId) toEqual").toEqual(["call-2"]);
  }, ["operator"]);

  test("8 racing releases with the token: exactly one applies and is audited", async ({ store }) => {
    const token = await acquire(store);
    const released = await Promise.all(Array.from({ length: 8 }, () => release(store, token)));
    expect(released.filter((value) => value), "released.filter((value) => value) toHaveLength").toHaveLength(1);
    expect(await releasedEvents(store), "await releasedEvents(store) toHaveLength").toHaveLength(1);
    await acquire(store);
  });

  test("a racing release and settlement: exactly one of them applies", async ({ store }) => {
    const token = await acquire(store);
    const [released, settled] = await Promise.all([
      release(store, token),
      store.settleMutation({ turnKey: TURN_KEY, token, outcome: "complete", result: ERROR_RESULT }),
    ]);
    expect(released !== settled, `released: ${String(released)}, settled: ${String(settled)}`).toBe(true);
    if (settled) {
      expect(await claim(store), "await claim(store) toEqual").toEqual({ status: "replay", result: ERROR_RESULT });
    } else {
      await acquire(store);
    }
    expect(await releasedEvents(store), "await releasedEvents(store) toHaveLength").toHaveLength(released ? 1 : 0);
  });
}

/** `getMutation`: the read-only view of a turn's claim, which the middleware asks before a person is. Part of the claims suite. */
function mutationStatusTests(test: StoreTest): void {
  test("getMutation reads a turn's claim: none, pending, complete with its result, unknown, pruned", async ({ store, clock }) => {
    const read = async (key: string) => {
      const status = await store.getMutation(key);
      if (status !== undefined) conform(MutationStatusSchema, status, "getMutation's answer");
      return status;
    };
    const pending = identity(turn("m-pending"));
    const done = identity(turn("m-complete"));
    const unknown = identity(turn("m-unknown", "doc-unknown"));
    expect(await read(pending.turnKey), "await read(pending.turnKey) toBeUndefined").toBeUndefined();
    await acquire(store, pending);
    expect(await read(pending.turnKey), "await read(pending.turnKey) toEqual").toEqual({ state: "pending", toolName: pending.toolName, toolCallId: pending.toolCallId });
    await complete(store, done);
    expect(await read(done.turnKey), "await read(done.turnKey) toEqual").toEqual({ state: "complete", toolName: done.toolName, toolCallId: done.toolCallId, result: RESULT });
    await leaveUnknown(store, unknown);
    expect(await read(unknown.turnKey), "await read(unknown.turnKey) toMatchObject").toMatchObject({ state: "unknown" });
    clock.advance(86_400_000);
    await store.prune({ olderThan: new Date(clock.ms).toISOString() });
    expect(await read(done.turnKey), "await read(done.turnKey) toEqual").toEqual({ state: "pruned", toolName: done.toolName, toolCallId: done.toolCallId });
    await expectContractError(() => store.getMutation("not-a-digest"), "getMutation of a bad key");
  }, ["operator"]);
}
