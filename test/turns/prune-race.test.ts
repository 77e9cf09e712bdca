/**
 * `service.prune` racing a retry of the same key, through the real `createAgent` loop: a failed,
 * retryable turn older than the cut-off, and a `submit` of its key that runs it again while the
 * prune is under way. Each listed turn is taken (`takePrunableTurn`, a compare-and-set) before its
 * thread is deleted, so either the retry wins (the run keeps its thread and completes with one
 * write; prune leaves the turn) or prune wins (the retry is answered the stored failure, nothing
 * runs, the thread and record go, and the next retry runs as a new turn). Never a thread deleted
 * under a live run. The race is made deterministic by gates on the real store's listing answer
 * and on the real checkpointer's `deleteThread`; writes are counted in the tool body.
 */
import { MemorySaver } from "@langchain/langgraph";
import { describe, expect, it } from "vitest";
import { ConfigurationError, InMemoryGuardrailStore, turnKey, type TurnAnswer } from "arkah-agent-guardrails";
import type { ListTurnsQuery, TurnRecord } from "arkah-agent-guardrails/store";
import { deferred, ForwardingStore, rejection } from "../support/fixtures.js";
import { NEW_BODY, noteResponder, serviceHarness, TestClock, turnOf } from "./support.js";

const DAY = 86_400_000;
const TURN = turnOf({ turnId: "retried-during-prune" });

/** The real in-memory store; its listing of finished turns, once armed, answers only when the test opens the gate. */
class ListingGate extends ForwardingStore {
  gate: { readonly listed: () => void; readonly open: Promise<void> } | undefined;
  override async listTurns(query: ListTurnsQuery): Promise<TurnRecord[]> {
    const answer = await super.listTurns(query);
    const gate = this.gate;
    if (query.state === "finished" && gate !== undefined) {
      this.gate = undefined;
      gate.listed();
      await gate.open;
    }
    return answer;
  }
}

/** LangGraph's `MemorySaver`, whose `deleteThread`, once armed, deletes only when the test opens the gate. */
class DeleteGate extends MemorySaver {
  readonly deleted: string[] = [];
  gate: { readonly entered: () => void; readonly open: Promise<void> } | undefined;
  override async deleteThread(threadId: string): Promise<void> {
    const gate = this.gate;
    if (gate !== undefined) {
      this.gate = undefined;
      gate.entered();
      await gate.open;
    }
    this.deleted.push(threadId);
    await super.deleteThread(threadId);
  }
  async holds(threadId: string): Promise<boolean> {
    return (await this.getTuple({ configurable: { thread_id: threadId } })) !== undefined;
  }
}

function expectStatus<S extends TurnAnswer["status"]>(answer: TurnAnswer, status: S): Extract<TurnAnswer, { status: S }> {
  if (answer.status !== status) throw new Error(`expected ${status}, got ${JSON.stringify(answer)}`);
  return answer as Extract<TurnAnswer, { status: S }>;
}

/** A worker whose model provider is down for its first call (the turn fails before any effect: retryable); the retry's write waits on `writeGate` when set. */
function worker(store: ForwardingStore, checkpointer: DeleteGate, clock: TestClock) {
  const outage = { calls: 1 };
  const warnings: string[] = [];
  const responder = noteResponder();
  const hooks: { writeGate?: { readonly writing: () => void; readonly open: Promise<void> } } = {};
  const harness = serviceHarness({
    store,
    checkpointer,
    responder: (messages) => {
      if (outage.calls > 0) {
        outage.calls -= 1;
        throw new Error("503 from the provider");
      }
      return responder(messages);
    },
    hooks: {
      beforeWrite: async () => {
        const gate = hooks.writeGate;
        if (gate === undefined) return;
        hooks.writeGate = undefined;
        gate.writing();
        await gate.open;
      },
    },
    // The first run's failure is logged (class and code): kept here, not printed.
    service: { now: clock.now, logger: { warn: (message) => void warnings.push(message) } },
  });
  return { ...harness, hooks, warnings };
}

/** A failed, retryable turn last updated a day before the cut-off the test then prunes with. */
async function failedDayOld(w: ReturnType<typeof worker>, store: ForwardingStore, checkpointer: DeleteGate, clock: TestClock) {
  expect(await w.service.submit({ turn: TURN })).toMatchObject({ status: "failed", code: "run_failed", retryable: true, attempts: 1 });
  expect(w.notes.entries, "no tool ran").toEqual([]);
  expect(w.warnings).toEqual(["turn run failed"]);
  const thread = (await store.getTurn(turnKey(TURN)))?.threadId ?? "";
  expect(await checkpointer.holds(thread), "the failed run's thread is checkpointed").toBe(true);
  clock.advance(DAY);
  return { thread, olderThan: clock.now().toISOString() };
}

describe("service.prune racing a retry of a failed turn", () => {
  it("the retry takes the turn first (between prune's listing and its take): the live run keeps its thread and completes with one write; prune leaves the turn", async () => {
    const clock = new TestClock();
    const store = new ListingGate(new InMemoryGuardrailStore({ now: clock.now }));
    const checkpointer = new DeleteGate();
    const w = worker(store, checkpointer, clock);
    const { thread, olderThan } = await failedDayOld(w, store, checkpointer, clock);

    const listed = deferred();
    const listing = deferred();
    store.gate = { listed: listed.resolve, open: listing.promise };
    const pruning = w.service.prune({ olderThan });
    await listed.promise;
    // Prune listed the failed turn; before it goes on, a retry of the key runs the turn again
    // and is held in its write: a live run on the turn's thread.
    const writing = deferred();
    const write = deferred();
    w.hooks.writeGate = { writing: writing.resolve, open: write.promise };
    const retry = w.service.submit({ turn: TURN });
    await writing.promise;
    expect((await store.getTurn(turnKey(TURN)))?.state, "the retry runs the turn").toBe("running");

    listing.resolve();
    expect(await pruning, "the running turn is not taken: no thread deleted, no record pruned").toEqual({ threads: 0, store: { turns: 0, effects: 0 } });
    expect(checkpointer.deleted, "deleteThread was never called").toEqual([]);
    expect(await checkpointer.holds(thread), "the live run's thread survives").toBe(true);

    write.resolve();
    const answer = expectStatus(await retry, "completed");
    expect(answer.replayed).toBe(false);
    expect(w.notes.writes, "exactly one real write").toEqual([{ noteId: "note-7", body: NEW_BODY }]);
    expect(await checkpointer.holds(thread)).toBe(true);
    expect((await store.getTurn(turnKey(TURN)))?.state).toBe("completed");
    expect(await w.service.submit({ turn: TURN }), "a further retry replays it").toEqual({ ...answer, replayed: true });
    expect(w.notes.writes).toHaveLength(1);
  });

  it("prune takes the turn first (the retry comes while its thread is being deleted): the retry is answered the stored failure and runs nothing; the next retry runs as a new turn", async () => {
    const clock = new TestClock();
    const store = new ListingGate(new InMemoryGuardrailStore({ now: clock.now }));
    const checkpointer = new DeleteGate();
    const w = worker(store, checkpointer, clock);
    const { thread, olderThan } = await failedDayOld(w, store, checkpointer, clock);
    const calls = w.model.calls;

    const entered = deferred();
    const deleting = deferred();
    checkpointer.gate = { entered: entered.resolve, open: deleting.promise };
    const pruning = w.service.prune({ olderThan });
    await entered.promise;
    // A retry now is answered the stored outcome: the turn is not run on a thread being deleted.
    const retried = expectStatus(await w.service.submit({ turn: TURN }), "failed");
    expect(retried).toMatchObject({ code: "run_failed", replayed: true });
    expect(w.notes.entries, "no tool ran").toEqual([]);
    expect(w.model.calls, "the model was not called").toBe(calls);
    expect((await store.getTurn(turnKey(TURN)))?.pruning, "prune took the turn before deleting its thread").toBe(true);

    deleting.resolve();
    expect(await pruning).toEqual({ threads: 1, store: { turns: 0, effects: 0 } });
    expect(checkpointer.deleted).toEqual([thread]);
    expect(await checkpointer.holds(thread)).toBe(false);
    expect(await store.getTurn(turnKey(TURN)), "the record is pruned with its thread").toBeUndefined();

    // The key is pruned: a retry runs it as a new turn on an empty thread, with one write.
    const fresh = expectStatus(await w.service.submit({ turn: TURN }), "completed");
    expect(fresh.replayed).toBe(false);
    expect(w.notes.writes, "exactly one real write").toEqual([{ noteId: "note-7", body: NEW_BODY }]);
    expect(await checkpointer.holds(thread)).toBe(true);
  });

  it("a store without takePrunableTurn (the turnPrune part) is a ConfigurationError when prune is called, and nothing is deleted", async () => {
    const clock = new TestClock();
    const store = new ListingGate(new InMemoryGuardrailStore({ now: clock.now }));
    Object.defineProperty(store, "takePrunableTurn", { value: undefined });
    const checkpointer = new DeleteGate();
    const w = worker(store, checkpointer, clock);
    const { thread, olderThan } = await failedDayOld(w, store, checkpointer, clock);
    const error = await rejection(w.service.prune({ olderThan }));
    expect(ConfigurationError.isInstance(error)).toBe(true);
    expect((error as Error).message).toMatch(/takePrunableTurn/);
    expect(checkpointer.deleted).toEqual([]);
    expect(await checkpointer.holds(thread)).toBe(true);
    expect((await store.getTurn(turnKey(TURN)))?.state).toBe("failed");
  });
});
