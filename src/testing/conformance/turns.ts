/**
 * Turn records: the turn service's lifecycle. `beginTurn` inserts a turn once and leases it to one
 * worker, and one request key to one turn key; a lease that expired (at the store's clock) is taken
 * over; `finishTurn` and `resumeTurn` are compare-and-sets; `takePrunableTurn` takes a finished
 * turn as listed out of the lifecycle (a retry's `resumeTurn` from `failed` and it: one wins); prune
 * removes finished turns only, and frees their request keys. (`getMutation`, the read-only view of a
 * turn's claim, is in the claims suite.)
 */
import { expect } from "vitest";
import {
  BeginTurnResultSchema,
  ResumeTurnResultSchema,
  TurnRecordSchema,
  type BeginTurnResult,
  type GuardrailStore,
  type JsonValue,
  type TurnInput,
  type TurnRecord,
  type TurnStart,
} from "../../contracts/index.js";
import { digest } from "../../digest.js";
import { turnKey } from "../../keys.js";
import { approvalRequest, conform, expectBoolean, expectContractError, expectInstant, requestApproval, SCOPE } from "./fixtures.js";
import type { StoreTest } from "./harness.js";

const LEASE_MS = 30_000;
const DAY = 86_400_000;

/** A turn's input: `turnId` in the suites' scope, with a principal and a segment of awkward text. */
export function turnInput(turnId: string, overrides: Partial<TurnInput> = {}): TurnInput {
  return {
    scopeId: SCOPE,
    turnId,
    policyVersion: "policy-1",
    principal: "alice",
    segments: [{ label: "user", content: "Rename the document to “Field notes” \u0000 ✓" }],
    ...overrides,
  };
}

/** What the turn service hands `beginTurn` for `input`. */
export function start(input: TurnInput): TurnStart {
  const key = turnKey(input);
  return {
    turnKey: key,
    scopeId: input.scopeId,
    ...(input.principal === undefined ? {} : { principal: input.principal }),
    input,
    inputDigest: digest({ kind: "conformance.turn-input", input }),
    requestKey: requestKeyOf(input),
    threadId: `turn:${key}`,
  };
}

/** The kit's request key: any digest of what names the request will do (the store never recomputes it). */
function requestKeyOf(input: TurnInput): string {
  return digest({ kind: "conformance.turn-request", principal: input.principal ?? null, turnId: input.turnId });
}

const TURN_START = start(turnInput("turn-1"));
const COMPLETED: JsonValue = { status: "completed", answer: "Renamed.", calls: [{ tool: "rename_document", callId: "call-1" }] };
const AWAITING: JsonValue = { status: "awaiting_approval", approvals: [{ approvalId: "a".repeat(64) }] };

async function begin(store: GuardrailStore, of: TurnStart = TURN_START, leaseMs = LEASE_MS): Promise<BeginTurnResult> {
  return conform(BeginTurnResultSchema, await store.beginTurn({ turn: of, leaseMs }), "beginTurn's answer");
}

async function started(store: GuardrailStore, of: TurnStart = TURN_START, leaseMs = LEASE_MS): Promise<string> {
  const answer = await begin(store, of, leaseMs);
  if (answer.status !== "started") throw new Error(`expected the turn to start, got ${answer.status}`);
  return answer.token;
}

async function getTurn(store: GuardrailStore, key: string = TURN_START.turnKey): Promise<TurnRecord | undefined> {
  const record = await store.getTurn(key);
  if (record !== undefined) conform(TurnRecordSchema, record, "getTurn's answer");
  return record;
}

async function resume(store: GuardrailStore, key: string = TURN_START.turnKey) {
  return conform(ResumeTurnResultSchema, await store.resumeTurn({ turnKey: key, leaseMs: LEASE_MS }), "resumeTurn's answer");
}

async function awaiting(store: GuardrailStore, of: TurnStart = TURN_START): Promise<void> {
  const token = await started(store, of);
  expectBoolean(await store.finishTurn({ turnKey: of.turnKey, token, state: "awaiting_approval", outcome: AWAITING }), true, "finishing awaiting_approval");
}

async function renew(store: GuardrailStore, token: string, key: string = TURN_START.turnKey, leaseMs = LEASE_MS): Promise<boolean> {
  const answer: unknown = await store.renewTurn({ turnKey: key, token, leaseMs });
  if (typeof answer !== "boolean") throw new Error(`renewTurn must answer a boolean, got ${JSON.stringify(answer)}`);
  return answer;
}

/** `listTurns(query)`, each record checked, answered as turn keys (in the store's order). */
async function listed(store: GuardrailStore, query: Parameters<GuardrailStore["listTurns"]>[0]): Promise<string[]> {
  const answer: unknown = await store.listTurns(query);
  if (!Array.isArray(answer)) throw new Error("listTurns must answer an array");
  return answer.map((record, i) => conform(TurnRecordSchema, record, `listTurns' record ${String(i)}`).turnKey);
}

/** `listTurns`' answer, each record checked. */
function conformList(answer: unknown): TurnRecord[] {
  if (!Array.isArray(answer)) throw new Error("listTurns must answer an array");
  return answer.map((record, i) => conform(TurnRecordSchema, record, `listTurns' record ${String(i)}`));
}

/** Turn starts for `ids`, in ascending turn key order (the order `listTurns` answers in). */
function byKey(ids: readonly string[]): TurnStart[] {
  return ids.map((id) => start(turnInput(id))).sort((a, b) => (a.turnKey < b.turnKey ? -1 : 1));
}

export function turnsSuite(test: StoreTest): void {
  test("a new turn starts running under a lease from the store's clock; getTurn reads it back exactly", async ({ store, clock }) => {
    expect(await getTurn(store), "await getTurn(store) toBeUndefined").toBeUndefined();
    const answer = await begin(store);
    if (answer.status !== "started") throw new Error(`expected started, got ${answer.status}`);
    expect(answer.record, "answer.record toMatchObject").toMatchObject({ ...TURN_START, state: "running", lease: { token: answer.token } });
    expect(answer.record.outcome, "answer.record.outcome toBeUndefined").toBeUndefined();
    expectInstant(answer.record.lease?.expiresAt, clock.ms + LEASE_MS, "lease.expiresAt");
    expectInstant(answer.record.createdAt, clock.ms, "createdAt");
    expectInstant(answer.record.updatedAt, clock.ms, "updatedAt");
    expect(await getTurn(store), "await getTurn(store) toEqual").toEqual(answer.record);
  });

  test("a turn without a principal round-trips without one", async ({ store }) => {
    const { principal: _none, ...input } = turnInput("no-principal");
    const of = start(input);
    await started(store, of);
    const record = await getTurn(store, of.turnKey);
    expect(record?.input, "record?.input toEqual").toEqual(input);
    expect(record !== undefined && "principal" in record, "record !== undefined && \"principal\" in record toBe").toBe(false);
  });

  test("while a lease is unexpired, begin answers running and changes nothing", async ({ store, clock }) => {
    const token = await started(store);
    const before = await getTurn(store);
    clock.advance(LEASE_MS - 1);
    const answer = await begin(store);
    expect(answer, "answer toEqual").toEqual({ status: "running", record: before });
    expect(before?.lease?.token, "before?.lease?.token toBe").toBe(token);
    expect(await getTurn(store), "await getTurn(store) toEqual").toEqual(before);
  });

  test("the same key with another input digest is input_mismatch, whatever the turn's state", async ({ store }) => {
    const other = { ...TURN_START, inputDigest: digest({ kind: "conformance.turn-input", other: true }) };
    const token = await started(store);
    const before = await getTurn(store);
    expect(await begin(store, other), "await begin(store, other) toEqual").toEqual({ status: "input_mismatch" });
    expect(await getTurn(store), "await getTurn(store) toEqual").toEqual(before);
    await store.finishTurn({ turnKey: TURN_START.turnKey, token, state: "completed", outcome: COMPLETED });
    expect(await begin(store, other), "await begin(store, other) toEqual").toEqual({ status: "input_mismatch" });
  });

  test("a new turn whose request key another turn holds (the same request for another scope) is input_mismatch and stores nothing", async ({ store }) => {
    const token = await started(store);
    const held = await getTurn(store);
    const elsewhere = start(turnInput("turn-1", { scopeId: `${SCOPE}-other` }));
    expect(elsewhere.requestKey, "the kit's turns share the request").toBe(TURN_START.requestKey);
    expect(await begin(store, elsewhere), "a running holder").toEqual({ status: "input_mismatch" });
    await store.finishTurn({ turnKey: TURN_START.turnKey, token, state: "completed", outcome: COMPLETED });
    expect(await begin(store, elsewhere), "a finished holder").toEqual({ status: "input_mismatch" });
    expect(await getTurn(store, elsewhere.turnKey), "nothing stored for the refused turn").toBeUndefined();
    expect((await getTurn(store))?.input, "the holder unchanged").toEqual(held?.input);
    // Another request (another turn id, or the same one from another principal) in that scope is a turn of its own.
    expect((await begin(store, start(turnInput("turn-2", { scopeId: `${SCOPE}-other` })))).status, "another turn id").toBe("started");
    expect((await begin(store, start(turnInput("turn-1", { scopeId: `${SCOPE}-other`, principal: "bob" })))).status, "another principal").toBe("started");
  });

  test("16 concurrent begins of one request in 16 scopes: one starts, the others answer input_mismatch and store nothing", async ({ store }) => {
    const starts = Array.from({ length: 16 }, (_, index) => start(turnInput("turn-raced", { scopeId: `${SCOPE}-${String(index)}` })));
    const answers = await Promise.all(starts.map((of) => begin(store, of)));
    expect(answers.filter((answer) => answer.status === "started"), "one started").toHaveLength(1);
    expect(answers.filter((answer) => answer.status === "input_mismatch"), "the others refused").toHaveLength(15);
    const stored = (await Promise.all(starts.map((of) => getTurn(store, of.turnKey)))).filter((record) => record !== undefined);
    expect(stored, "one turn stored").toHaveLength(1);
  });

  test("finish is a compare-and-set by the lease token: it stores state and outcome and drops the lease", async ({ store, clock }) => {
    const token = await started(store);
    expectBoolean(await store.finishTurn({ turnKey: TURN_START.turnKey, token: "not-the-token", state: "completed", outcome: COMPLETED }), false, "finishing with another token");
    clock.advance(1000);
    expectBoolean(await store.finishTurn({ turnKey: TURN_START.turnKey, token, state: "completed", outcome: COMPLETED }), true, "finishing with the token");
    const record = await getTurn(store);
    expect(record, "record toMatchObject").toMatchObject({ state: "completed", outcome: COMPLETED });
    expect(record?.lease, "record?.lease toBeUndefined").toBeUndefined();
    expectInstant(record?.updatedAt, clock.ms, "updatedAt after finish");
    expectBoolean(await store.finishTurn({ turnKey: TURN_START.turnKey, token, state: "failed", outcome: {} }), false, "finishing twice");
    expect(await getTurn(store), "await getTurn(store) toEqual").toEqual(record);
    expect(await begin(store), "await begin(store) toEqual").toEqual({ status: "finished", record });
  });

  test("finish of an unknown turn answers false and creates nothing", async ({ store }) => {
    expectBoolean(await store.finishTurn({ turnKey: TURN_START.turnKey, token: "t", state: "completed", outcome: COMPLETED }), false, "finishing nothing");
    expect(await getTurn(store), "await getTurn(store) toBeUndefined").toBeUndefined();
  });

  test("every finished state answers finished, with its outcome, and nothing runs", async ({ store }) => {
    for (const state of ["awaiting_approval", "completed", "refused", "failed"] as const) {
      const of = start(turnInput(`finished-${state}`));
      const token = await started(store, of);
      const outcome = { status: state, nested: [1, "two", null, { three: true }] };
      await store.finishTurn({ turnKey: of.turnKey, token, state, outcome });
      const answer = await begin(store, of);
      expect(answer.status, state).toBe("finished");
      expect(answer.status === "finished" ? answer.record : undefined, state).toMatchObject({ state, outcome });
    }
  });

  test("a lease that expired at the store's clock is taken over under a new token; the old token finishes nothing", async ({ store, clock }) => {
    const old = await started(store);
    clock.advance(LEASE_MS);
    const answer = await begin(store);
    if (answer.status !== "taken_over") throw new Error(`expected taken_over, got ${answer.status}`);
    expect(answer.token, "answer.token not.toBe").not.toBe(old);
    expect(answer.record, "answer.record toMatchObject").toMatchObject({ state: "running", lease: { token: answer.token } });
    expectInstant(answer.record.lease?.expiresAt, clock.ms + LEASE_MS, "the new lease's expiry");
    expect(await getTurn(store), "await getTurn(store) toEqual").toEqual(answer.record);
    expect(await begin(store), "await begin(store) toMatchObject").toMatchObject({ status: "running" });
    expectBoolean(await store.finishTurn({ turnKey: TURN_START.turnKey, token: old, state: "completed", outcome: COMPLETED }), false, "the old token");
    expectBoolean(await store.finishTurn({ turnKey: TURN_START.turnKey, token: answer.token, state: "completed", outcome: COMPLETED }), true, "the new token");
  });

  test("a holder whose lease expired, and nobody took over, still finishes", async ({ store, clock }) => {
    const token = await started(store);
    clock.advance(LEASE_MS * 2);
    expectBoolean(await store.finishTurn({ turnKey: TURN_START.turnKey, token, state: "completed", outcome: COMPLETED }), true, "a late finish");
  });

  test("resume takes an awaiting_approval turn back to running under a new lease, once", async ({ store, clock }) => {
    await awaiting(store);
    clock.advance(5000);
    const answer = await resume(store);
    if (!answer.resumed) throw new Error("expected the turn to resume");
    expect(answer.record, "answer.record toMatchObject").toMatchObject({ state: "running", lease: { token: answer.token } });
    expect(answer.record.outcome, "answer.record.outcome toBeUndefined").toBeUndefined();
    expectInstant(answer.record.lease?.expiresAt, clock.ms + LEASE_MS, "the resumed lease's expiry");
    expect(await resume(store), "await resume(store) toEqual").toEqual({ resumed: false, record: answer.record });
    expect(await begin(store), "await begin(store) toEqual").toEqual({ status: "running", record: answer.record });
    expectBoolean(await store.finishTurn({ turnKey: TURN_START.turnKey, token: answer.token, state: "completed", outcome: COMPLETED }), true, "finishing the resumed run");
  });

  test("resume answers resumed: false for no turn, a running one and a finished one", async ({ store }) => {
    expect(await resume(store), "await resume(store) toEqual").toEqual({ resumed: false });
    const token = await started(store);
    expect(await resume(store), "await resume(store) toEqual").toEqual({ resumed: false, record: await getTurn(store) });
    await store.finishTurn({ turnKey: TURN_START.turnKey, token, state: "completed", outcome: COMPLETED });
    expect(await resume(store), "await resume(store) toEqual").toEqual({ resumed: false, record: await getTurn(store) });
  });

  test("resume from failed takes a failed turn back to running under a new lease, once; nothing else is taken from failed", async ({ store, clock }) => {
    const FAILED: JsonValue = { status: "failed", code: "run_failed", retryable: true };
    const token = await started(store);
    expectBoolean(await store.finishTurn({ turnKey: TURN_START.turnKey, token, state: "failed", outcome: FAILED }), true, "finishing failed");
    // The default is from awaiting_approval: a failed turn is not resumed by it.
    expect(await resume(store), "a plain resume of a failed turn").toEqual({ resumed: false, record: await getTurn(store) });
    clock.advance(5000);
    const fromFailed = () => store.resumeTurn({ turnKey: TURN_START.turnKey, leaseMs: LEASE_MS, from: "failed" });
    const answers = await Promise.all(Array.from({ length: 8 }, fromFailed));
    const won = answers.filter((answer) => answer.resumed);
    expect(won, "of 8 concurrent resumes from failed, one resumes").toHaveLength(1);
    const answer = conform(ResumeTurnResultSchema, won[0], "resumeTurn's answer");
    if (!answer.resumed) throw new Error("expected the turn to resume");
    expect(answer.record, "running again, without the failed outcome").toMatchObject({ state: "running", lease: { token: answer.token } });
    expect(answer.record.outcome, "the outcome is dropped").toBeUndefined();
    expectInstant(answer.record.lease?.expiresAt, clock.ms + LEASE_MS, "the new lease's expiry");
    expect(await getTurn(store), "getTurn reads the running record").toEqual(answer.record);
    expectBoolean(await store.finishTurn({ turnKey: TURN_START.turnKey, token: answer.token, state: "completed", outcome: COMPLETED }), true, "finishing the new run");
    expect(await fromFailed(), "a completed turn is not taken from failed").toEqual({ resumed: false, record: await getTurn(store) });
    const paused = start(turnInput("turn-paused-not-failed"));
    const pausedToken = await started(store, paused);
    await store.finishTurn({ turnKey: paused.turnKey, token: pausedToken, state: "awaiting_approval", outcome: AWAITING });
    expect(await store.resumeTurn({ turnKey: paused.turnKey, leaseMs: LEASE_MS, from: "failed" }), "a paused turn is not taken from failed").toEqual({
      resumed: false,
      record: await getTurn(store, paused.turnKey),
    });
  });

  test("renew extends a running lease from the store's clock, by its token only, and changes nothing else", async ({ store, clock }) => {
    const token = await started(store);
    const before = await getTurn(store);
    clock.advance(LEASE_MS - 1);
    expectBoolean(await renew(store, "not-the-token"), false, "renewing with another token");
    expect(await getTurn(store), "another token changes nothing").toEqual(before);
    expectBoolean(await renew(store, token, TURN_START.turnKey, 2 * LEASE_MS), true, "renewing with the token");
    const after = await getTurn(store);
    expectInstant(after?.lease?.expiresAt, clock.ms + 2 * LEASE_MS, "the renewed lease's expiry");
    expect(after, "only the lease's expiry moved").toEqual({ ...before, lease: { token, expiresAt: after?.lease?.expiresAt } });
    // Past the first expiry, the renewed lease still holds the turn.
    clock.advance(LEASE_MS + 1);
    expect(await begin(store), "a begin after the old expiry").toEqual({ status: "running", record: after });
    expectBoolean(await store.finishTurn({ turnKey: TURN_START.turnKey, token, state: "completed", outcome: COMPLETED }), true, "the holder finishes");
  });

  test("renew of a lease that expired and nobody took over succeeds; after a takeover the stale token renews nothing", async ({ store, clock }) => {
    const old = await started(store);
    clock.advance(LEASE_MS * 2);
    expectBoolean(await renew(store, old), true, "renewing an expired lease nobody took");
    expect(await begin(store), "the renewed holder keeps the turn").toMatchObject({ status: "running" });
    clock.advance(LEASE_MS);
    const taken = await begin(store);
    if (taken.status !== "taken_over") throw new Error(`expected taken_over, got ${taken.status}`);
    const record = await getTurn(store);
    expectBoolean(await renew(store, old), false, "renewing with the stale token after a takeover");
    expect(await getTurn(store), "the taker's lease is untouched").toEqual(record);
    expectBoolean(await renew(store, taken.token), true, "the taker renews");
  });

  test("renew answers false for no turn, a paused one and a finished one, and changes nothing", async ({ store }) => {
    expectBoolean(await renew(store, "t"), false, "renewing nothing");
    expect(await getTurn(store), "nothing is created").toBeUndefined();
    const token = await started(store);
    expectBoolean(await store.finishTurn({ turnKey: TURN_START.turnKey, token, state: "awaiting_approval", outcome: AWAITING }), true, "pausing");
    const paused = await getTurn(store);
    expectBoolean(await renew(store, token), false, "renewing a paused turn");
    expect(await getTurn(store), "the paused turn is unchanged").toEqual(paused);
    const done = start(turnInput("renew-finished"));
    const doneToken = await started(store, done);
    await store.finishTurn({ turnKey: done.turnKey, token: doneToken, state: "completed", outcome: COMPLETED });
    expectBoolean(await renew(store, doneToken, done.turnKey), false, "renewing a finished turn");
    expect((await getTurn(store, done.turnKey))?.lease, "a finished turn gets no lease").toBeUndefined();
  });

  test("listTurns lists running turns in key order; with expired, only those whose lease expired at the store's clock", async ({ store, clock }) => {
    const [a, b, c, d] = byKey(["list-a", "list-b", "list-c", "list-d"]);
    if (a === undefined || b === undefined || c === undefined || d === undefined) throw new Error("four turns");
    await started(store, c, LEASE_MS);
    await started(store, a, LEASE_MS);
    const bToken = await started(store, b, 3 * LEASE_MS);
    const dToken = await started(store, d, LEASE_MS);
    await store.finishTurn({ turnKey: d.turnKey, token: dToken, state: "completed", outcome: COMPLETED });
    expect(await listed(store, { state: "running" }), "every running turn, in key order").toEqual([a.turnKey, b.turnKey, c.turnKey]);
    expect(await listed(store, { state: "running", expired: true }), "no lease expired yet").toEqual([]);
    clock.advance(LEASE_MS);
    expect(await listed(store, { state: "running", expired: true }), "the expired ones, in key order").toEqual([a.turnKey, c.turnKey]);
    expect(await listed(store, { state: "running", expired: false }), "expired: false lists them all").toEqual([a.turnKey, b.turnKey, c.turnKey]);
    expect(await listed(store, { state: "running", expired: true, limit: 1 }), "limit").toEqual([a.turnKey]);
    expect(await listed(store, { state: "running", expired: true, after: a.turnKey }), "after a key").toEqual([c.turnKey]);
    // A renewed lease is not expired; a taken-over one is not either (the taker holds a fresh lease).
    expectBoolean(await renew(store, bToken, b.turnKey), true, "renewing b");
    const taken = await begin(store, a);
    expect(taken.status, "a is taken over").toBe("taken_over");
    expect(await listed(store, { state: "running", expired: true }), "after a takeover").toEqual([c.turnKey]);
    const record = await getTurn(store, c.turnKey);
    expect(await store.listTurns({ state: "running", expired: true }), "listed records are the stored records").toEqual([record]);
  });

  test("listTurns lists paused turns; with decided, only those none of whose approval requests is pending", async ({ store }) => {
    const [a, b, c] = byKey(["paused-a", "paused-b", "paused-c"]);
    if (a === undefined || b === undefined || c === undefined) throw new Error("three turns");
    for (const of of [a, b, c]) await awaiting(store, of);
    await started(store, start(turnInput("paused-running")));
    const call = (id: string) => ({ id, name: "rename_document", args: { title: id } });
    const ref = (of: TurnStart) => ({ scopeId: of.scopeId, turnId: of.input.turnId });
    // a: one request, pending. b: two, one decided, one pending. c: one, decided.
    await requestApproval(store, approvalRequest(ref(a), call("a-1")));
    const b1 = await requestApproval(store, approvalRequest(ref(b), call("b-1")));
    await requestApproval(store, approvalRequest(ref(b), call("b-2")));
    const c1 = await requestApproval(store, approvalRequest(ref(c), call("c-1")));
    const decide = (approvalId: string) => store.decideApproval({ approvalId, decision: { decision: "approve" }, operatorRef: "alice", decidedAt: new Date(0).toISOString() });
    await decide(b1.approvalId);
    await decide(c1.approvalId);
    expect(await listed(store, { state: "awaiting_approval" }), "every paused turn, in key order").toEqual([a.turnKey, b.turnKey, c.turnKey]);
    expect(await listed(store, { state: "awaiting_approval", decided: true }), "only c is decided").toEqual([c.turnKey]);
    const b2 = approvalRequest(ref(b), call("b-2")).approvalId;
    await decide(b2);
    expect(await listed(store, { state: "awaiting_approval", decided: true }), "b, once its last request is decided").toEqual([b.turnKey, c.turnKey]);
    expect(await listed(store, { state: "awaiting_approval", decided: true, after: b.turnKey }), "after b").toEqual([c.turnKey]);
    const resumed = await resume(store, c.turnKey);
    expect(resumed.resumed, "c resumes").toBe(true);
    expect(await listed(store, { state: "awaiting_approval", decided: true }), "a resumed turn is no longer paused").toEqual([b.turnKey]);
  }, ["approvals"]);

  test("listTurns lists no finished turn as running or paused, and rejects a malformed query, changing nothing", async ({ store, clock }) => {
    for (const state of ["completed", "refused", "failed"] as const) {
      const of = start(turnInput(`listed-${state}`));
      const token = await started(store, of);
      await store.finishTurn({ turnKey: of.turnKey, token, state, outcome: { state } });
    }
    clock.advance(LEASE_MS * 2);
    expect(await listed(store, { state: "running" }), "no running turn").toEqual([]);
    expect(await listed(store, { state: "awaiting_approval" }), "no paused turn").toEqual([]);
    const bad: [string, unknown][] = [
      ["a finished state", { state: "completed" }],
      ["no state", {}],
      ["expired with awaiting_approval", { state: "awaiting_approval", expired: true }],
      ["decided with running", { state: "running", decided: true }],
      ["a zero limit", { state: "running", limit: 0 }],
      ["a limit over the maximum", { state: "running", limit: 1001 }],
      ["an after that is no turn key", { state: "running", after: "zzz" }],
      ["an unknown field", { state: "running", extra: 1 }],
      ["finished without olderThan", { state: "finished" }],
      ["olderThan with running", { state: "running", olderThan: new Date(clock.ms).toISOString() }],
      ["olderThan that is no timestamp", { state: "finished", olderThan: "yesterday" }],
      ["expired with finished", { state: "finished", olderThan: new Date(clock.ms).toISOString(), expired: true }],
    ];
    for (const [what, query] of bad) await expectContractError(() => store.listTurns(query as never), `listTurns with ${what}`);
    await expectContractError(() => store.renewTurn({ turnKey: "not-a-digest", token: "t", leaseMs: LEASE_MS }), "renewTurn of a bad key");
    await expectContractError(() => store.renewTurn({ turnKey: TURN_START.turnKey, token: "", leaseMs: LEASE_MS }), "renewTurn with an empty token");
    await expectContractError(() => store.renewTurn({ turnKey: TURN_START.turnKey, token: "t", leaseMs: 0 }), "renewTurn with a zero lease");
  });

  test("listTurns with finished lists, in key order, the finished turns last updated before olderThan: exactly the turn records prune removes", async ({ store, clock }) => {
    const finished = byKey(["finished-completed", "finished-refused", "finished-failed"]);
    const states = ["completed", "refused", "failed"] as const;
    for (const [i, of] of finished.entries()) {
      const token = await started(store, of);
      const state = states[i] ?? "completed";
      expectBoolean(await store.finishTurn({ turnKey: of.turnKey, token, state, outcome: { state } }), true, `finishing ${state}`);
    }
    const running = start(turnInput("finished-running"));
    await started(store, running, DAY);
    await awaiting(store);
    clock.advance(DAY);
    const fresh = start(turnInput("finished-fresh"));
    const freshToken = await started(store, fresh);
    await store.finishTurn({ turnKey: fresh.turnKey, token: freshToken, state: "completed", outcome: COMPLETED });
    const olderThan = new Date(clock.ms).toISOString();
    const keys = finished.map((of) => of.turnKey);
    expect(await listed(store, { state: "finished", olderThan }), "the three finished a day ago, in key order; not the one finished at the cut-off").toEqual(keys);
    expect(await listed(store, { state: "finished", olderThan: new Date(clock.ms + 1).toISOString() }), "a cut-off after the fresh one lists it too").toEqual(
      [...keys, fresh.turnKey].sort(),
    );
    expect(await listed(store, { state: "finished", olderThan: new Date(clock.ms - DAY).toISOString() }), "a cut-off at their update lists none (strict)").toEqual([]);
    expect(await listed(store, { state: "finished", olderThan, limit: 2 }), "limit").toEqual(keys.slice(0, 2));
    expect(await listed(store, { state: "finished", olderThan, after: keys[0] }), "after a key").toEqual(keys.slice(1));
    const records = await Promise.all(keys.map((key) => getTurn(store, key)));
    expect(await store.listTurns({ state: "finished", olderThan }), "listed records are the stored records").toEqual(records);
    expect(await listed(store, { state: "running" }), "the running turn is listed as running only").toEqual([running.turnKey]);
  });

  test("what listTurns lists as finished before a cut-off, prune with that cut-off removes, and nothing else of the turns", async ({ store, clock }) => {
    const [a, b] = byKey(["pruned-listing-a", "pruned-listing-b"]);
    if (a === undefined || b === undefined) throw new Error("two turns");
    for (const of of [a, b]) {
      const token = await started(store, of);
      await store.finishTurn({ turnKey: of.turnKey, token, state: "completed", outcome: COMPLETED });
    }
    const running = start(turnInput("pruned-listing-running"));
    await started(store, running, DAY);
    await awaiting(store);
    clock.advance(DAY / 2);
    const olderThan = new Date(clock.ms).toISOString();
    const before = await listed(store, { state: "finished", olderThan });
    expect(before, "both finished turns are listed").toEqual([a.turnKey, b.turnKey]);
    await store.prune({ olderThan });
    for (const key of before) expect(await getTurn(store, key), "a listed turn is pruned").toBeUndefined();
    expect(await listed(store, { state: "finished", olderThan }), "nothing is left to list").toEqual([]);
    expect((await getTurn(store, running.turnKey))?.state, "the running turn stays").toBe("running");
    expect((await getTurn(store))?.state, "the paused turn stays").toBe("awaiting_approval");
  }, ["operator"]);

  test("16 concurrent begins of one new turn: one starts, the others answer running", async ({ store }) => {
    const answers = await Promise.all(Array.from({ length: 16 }, () => begin(store)));
    expect(answers.filter((answer) => answer.status === "started"), "answers.filter((answer) => answer.status === \"started\") toHaveLength").toHaveLength(1);
    expect(answers.filter((answer) => answer.status === "running"), "answers.filter((answer) => answer.status === \"running\") toHaveLength").toHaveLength(15);
  });

  test("16 concurrent takeovers of one expired lease: one takes over", async ({ store, clock }) => {
    await started(store);
    clock.advance(LEASE_MS + 1);
    const answers = await Promise.all(Array.from({ length: 16 }, () => begin(store)));
    expect(answers.filter((answer) => answer.status === "taken_over"), "answers.filter((answer) => answer.status === \"taken_over\") toHaveLength").toHaveLength(1);
    expect(answers.filter((answer) => answer.status === "running"), "answers.filter((answer) => answer.status === \"running\") toHaveLength").toHaveLength(15);
  });

  test("16 concurrent resumes of one paused turn: one resumes", async ({ store }) => {
    await awaiting(store);
    const answers = await Promise.all(Array.from({ length: 16 }, () => resume(store)));
    expect(answers.filter((answer) => answer.resumed), "answers.filter((answer) => answer.resumed) toHaveLength").toHaveLength(1);
  });

  test("prune removes finished turns last updated before the cutoff, and keeps running and paused ones", async ({ store, clock }) => {
    const finished = await Promise.all(
      (["completed", "refused", "failed"] as const).map(async (state) => {
        const of = start(turnInput(`prune-${state}`));
        const token = await started(store, of);
        await store.finishTurn({ turnKey: of.turnKey, token, state, outcome: { state } });
        return of;
      }),
    );
    const running = start(turnInput("prune-running"));
    await started(store, running, DAY);
    await awaiting(store);
    clock.advance(DAY);
    const fresh = start(turnInput("prune-fresh"));
    const freshToken = await started(store, fresh);
    await store.finishTurn({ turnKey: fresh.turnKey, token: freshToken, state: "completed", outcome: COMPLETED });
    await store.prune({ olderThan: new Date(clock.ms).toISOString() });
    for (const of of finished) expect(await getTurn(store, of.turnKey), of.input.turnId).toBeUndefined();
    expect((await getTurn(store, running.turnKey))?.state, "(await getTurn(store, running.turnKey))?.state toBe").toBe("running");
    expect((await getTurn(store))?.state, "(await getTurn(store))?.state toBe").toBe("awaiting_approval");
    expect((await getTurn(store, fresh.turnKey))?.state, "(await getTurn(store, fresh.turnKey))?.state toBe").toBe("completed");
  }, ["operator"]);

  test("prune frees a removed turn's request key with it; a kept turn keeps its own", async ({ store, clock }) => {
    const pruned = start(turnInput("prune-request"));
    const token = await started(store, pruned);
    await store.finishTurn({ turnKey: pruned.turnKey, token, state: "completed", outcome: COMPLETED });
    await awaiting(store);
    clock.advance(DAY);
    await store.prune({ olderThan: new Date(clock.ms).toISOString() });
    expect(await getTurn(store, pruned.turnKey), "the finished turn is pruned").toBeUndefined();
    const again = start(turnInput("prune-request", { scopeId: `${SCOPE}-other` }));
    expect((await begin(store, again)).status, "its request runs as a new turn").toBe("started");
    const kept = start(turnInput(TURN_START.input.turnId, { scopeId: `${SCOPE}-other` }));
    expect(await begin(store, kept), "the paused turn still holds its request").toEqual({ status: "input_mismatch" });
  }, ["operator"]);

  test("takePrunableTurn takes a finished turn as listed, again if taken; never a running, paused, changed or missing one; a taken turn is never resumed, begin replays it, prune removes it", async ({ store, clock }) => {
    const FAILED: JsonValue = { status: "failed", code: "run_failed", retryable: true };
    const [failed, completed, changed] = byKey(["take-failed", "take-completed", "take-changed"]);
    if (failed === undefined || completed === undefined || changed === undefined) throw new Error("three turns");
    for (const [of, state, outcome] of [
      [failed, "failed", FAILED],
      [completed, "completed", COMPLETED],
      [changed, "failed", FAILED],
    ] as const) {
      const token = await started(store, of);
      expectBoolean(await store.finishTurn({ turnKey: of.turnKey, token, state, outcome }), true, `finishing ${state}`);
    }
    const running = start(turnInput("take-running"));
    await started(store, running, DAY);
    await awaiting(store);
    clock.advance(DAY);
    const olderThan = new Date(clock.ms).toISOString();
    const records = conformList(await store.listTurns({ state: "finished", olderThan }));
    const take = (record: Pick<TurnRecord, "turnKey" | "updatedAt">) => store.takePrunableTurn({ turnKey: record.turnKey, updatedAt: record.updatedAt });
    // One listed turn runs again before it is taken: the record as listed is gone.
    const retried = conform(ResumeTurnResultSchema, await store.resumeTurn({ turnKey: changed.turnKey, leaseMs: LEASE_MS, from: "failed" }), "resumeTurn's answer");
    if (!retried.resumed) throw new Error("expected the listed failed turn to resume");
    const listedChanged = records.find((record) => record.turnKey === changed.turnKey);
    if (listedChanged === undefined) throw new Error("the changed turn was listed");
    expectBoolean(await take(listedChanged), false, "taking a turn that ran again since it was listed");
    expect(await getTurn(store, changed.turnKey), "the running turn is unchanged").toEqual(retried.record);
    for (const key of [running.turnKey, TURN_START.turnKey]) {
      const live = await getTurn(store, key);
      if (live === undefined) throw new Error("a live turn");
      expectBoolean(await take(live), false, `taking a ${live.state} turn`);
      expect(await getTurn(store, key), "a live turn is unchanged").toEqual(live);
    }
    expectBoolean(await take({ turnKey: start(turnInput("take-missing")).turnKey, updatedAt: olderThan }), false, "taking no turn");
    expect(await getTurn(store, start(turnInput("take-missing")).turnKey), "nothing is created").toBeUndefined();
    const listedCompleted = records.find((record) => record.turnKey === completed.turnKey);
    if (listedCompleted === undefined) throw new Error("the completed turn was listed");
    expectBoolean(await take({ turnKey: completed.turnKey, updatedAt: olderThan }), false, "taking a finished turn by another updatedAt");
    expect(await getTurn(store, completed.turnKey), "a turn not taken is unchanged").toEqual(listedCompleted);

    for (const of of [failed, completed]) {
      const listedRecord = records.find((record) => record.turnKey === of.turnKey);
      if (listedRecord === undefined) throw new Error("a finished turn was listed");
      expectBoolean(await take(listedRecord), true, "taking a finished turn as listed");
      const taken = await getTurn(store, of.turnKey);
      expect(taken, "only pruning is added: the state and updatedAt stay").toEqual({ ...listedRecord, pruning: true });
      expectBoolean(await take(listedRecord), true, "taking it again (a crashed or concurrent prune's take)");
      expect(await getTurn(store, of.turnKey), "taking again changes nothing").toEqual(taken);
      expect(await begin(store, of), "begin of a taken turn answers it finished, changing nothing").toEqual({ status: "finished", record: taken });
    }
    const taken = await getTurn(store, failed.turnKey);
    expect(await store.resumeTurn({ turnKey: failed.turnKey, leaseMs: LEASE_MS, from: "failed" }), "a taken failed turn is not run again").toEqual({ resumed: false, record: taken });
    expect(await getTurn(store, failed.turnKey), "the taken turn is unchanged").toEqual(taken);
    expect(await listed(store, { state: "finished", olderThan }), "taken turns are still listed (the next prune finishes a crashed one)").toEqual([failed.turnKey, completed.turnKey]);
    await store.prune({ olderThan });
    for (const of of [failed, completed]) expect(await getTurn(store, of.turnKey), "prune removes a taken turn").toBeUndefined();
    expect((await begin(store, failed)).status, "a retry after prune begins the key as a new turn").toBe("started");

    const bad: [string, unknown][] = [
      ["a bad turn key", { turnKey: "not-a-digest", updatedAt: olderThan }],
      ["no updatedAt", { turnKey: running.turnKey }],
      ["an updatedAt that is no timestamp", { turnKey: running.turnKey, updatedAt: "yesterday" }],
      ["an unknown field", { turnKey: running.turnKey, updatedAt: olderThan, state: "failed" }],
    ];
    const before = await getTurn(store, running.turnKey);
    for (const [what, input] of bad) await expectContractError(() => store.takePrunableTurn(input as never), `takePrunableTurn with ${what}`);
    expect(await getTurn(store, running.turnKey), "malformed input changes nothing").toEqual(before);
  }, ["turnPrune", "operator"]);

  test("a take for prune and a retry's resume from failed of one failed turn race: exactly one wins; the loser changes nothing", async ({ store, clock }) => {
    const FAILED: JsonValue = { status: "failed", code: "run_failed", retryable: true };
    const turns = byKey(Array.from({ length: 8 }, (_, i) => `take-race-${String(i)}`));
    for (const of of turns) {
      const token = await started(store, of);
      expectBoolean(await store.finishTurn({ turnKey: of.turnKey, token, state: "failed", outcome: FAILED }), true, "finishing failed");
    }
    clock.advance(DAY);
    const records = conformList(await store.listTurns({ state: "finished", olderThan: new Date(clock.ms).toISOString() }));
    expect(records.map((record) => record.turnKey), "every failed turn is listed").toEqual(turns.map((of) => of.turnKey));
    let takes = 0;
    let resumes = 0;
    for (const [i, record] of records.entries()) {
      const takeFirst = i % 2 === 0;
      const takeIt = () => store.takePrunableTurn({ turnKey: record.turnKey, updatedAt: record.updatedAt });
      const resumeIt = () => store.resumeTurn({ turnKey: record.turnKey, leaseMs: LEASE_MS, from: "failed" });
      // Started in both orders, concurrently: whichever the store serializes first wins.
      const [takenAnswer, resumedAnswer] = takeFirst
        ? await Promise.all([takeIt(), resumeIt()])
        : await Promise.all([resumeIt(), takeIt()]).then(([resumed, taken]) => [taken, resumed] as const);
      const resumed = conform(ResumeTurnResultSchema, resumedAnswer, "resumeTurn's answer");
      expect(typeof takenAnswer, "takePrunableTurn answers a boolean").toBe("boolean");
      expect(takenAnswer !== resumed.resumed, "exactly one of the take and the resume wins").toBe(true);
      const stored = await getTurn(store, record.turnKey);
      if (takenAnswer) {
        takes++;
        expect(resumed, "the losing resume answers resumed: false with the taken record").toEqual({ resumed: false, record: stored });
        expect(stored, "the turn is taken, otherwise as listed").toEqual({ ...record, pruning: true });
      } else {
        resumes++;
        if (!resumed.resumed) throw new Error("expected the resume to win");
        expect(stored, "the turn runs again, not taken").toEqual(resumed.record);
        expect(stored?.pruning, "a resumed turn is not taken").toBeUndefined();
      }
    }
    expect(takes + resumes, "every race has one winner").toBe(records.length);
  }, ["turnPrune"]);

  test("malformed turn input is rejected and changes nothing", async ({ store }) => {
    const bad: [string, () => Promise<unknown>][] = [
      ["a scopeId other than the input's", () => store.beginTurn({ turn: { ...TURN_START, scopeId: "doc-other" }, leaseMs: LEASE_MS })],
      ["a principal other than the input's", () => store.beginTurn({ turn: { ...TURN_START, principal: "mallory" }, leaseMs: LEASE_MS })],
      ["a zero lease", () => store.beginTurn({ turn: TURN_START, leaseMs: 0 })],
      ["a fractional lease", () => store.beginTurn({ turn: TURN_START, leaseMs: 1.5 })],
      ["a bad input digest", () => store.beginTurn({ turn: { ...TURN_START, inputDigest: "ABC" }, leaseMs: LEASE_MS })],
      ["an empty thread id", () => store.beginTurn({ turn: { ...TURN_START, threadId: "" }, leaseMs: LEASE_MS })],
      ["a bad request key", () => store.beginTurn({ turn: { ...TURN_START, requestKey: "ABC" }, leaseMs: LEASE_MS })],
      ["no request key", () => store.beginTurn({ turn: { ...TURN_START, requestKey: undefined as never }, leaseMs: LEASE_MS })],
      ["an unknown field", () => store.beginTurn({ turn: TURN_START, leaseMs: LEASE_MS, extra: 1 } as never)],
    ];
    for (const [what, run] of bad) await expectContractError(run, `beginTurn with ${what}`);
    expect(await getTurn(store), "await getTurn(store) toBeUndefined").toBeUndefined();
    const token = await started(store);
    const before = await getTurn(store);
    await expectContractError(
      () => store.finishTurn({ turnKey: TURN_START.turnKey, token, state: "running" as never, outcome: COMPLETED }),
      "finishTurn to running",
    );
    await expectContractError(
      () => store.finishTurn({ turnKey: TURN_START.turnKey, token, state: "completed", outcome: undefined as never }),
      "finishTurn without an outcome",
    );
    await expectContractError(() => store.resumeTurn({ turnKey: "not-a-digest", leaseMs: LEASE_MS }), "resumeTurn of a bad key");
    await expectContractError(() => store.getTurn("not-a-digest"), "getTurn of a bad key");
    await expectContractError(() => store.getMutation("not-a-digest"), "getMutation of a bad key");
    expect(await getTurn(store), "await getTurn(store) toEqual").toEqual(before);
  });
}
