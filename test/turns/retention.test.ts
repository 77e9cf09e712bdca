/**
 * Retention through the turn service, `service.prune({ olderThan })`, over a real `createAgent`
 * loop on durable pairs: the SQLite store with LangGraph's `SqliteSaver`, and the PostgreSQL store
 * with `PostgresSaver` on the test server. The checkpointer's own tables are read to count the
 * threads it really holds; the notes service counts real writes. Finished turns lose their records
 * and their threads; a paused and a running turn keep both and finish afterwards; a retry of a
 * pruned key runs as a new turn on an empty thread (its write refused by the claim's tombstone); a
 * call that fails between deleting threads and pruning the store is finished by the next one.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { MemorySaver, type BaseCheckpointSaver } from "@langchain/langgraph";
import { PostgresSaver } from "@langchain/langgraph-checkpoint-postgres";
import { SqliteSaver } from "@langchain/langgraph-checkpoint-sqlite";
import type pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import { ConfigurationError, InMemoryGuardrailStore, turnKey, TurnServiceError, type DecideAnswer, type GuardrailStore, type TurnAnswer } from "arkah-agent-guardrails";
import type { ListTurnsQuery, PruneOptions, PruneResult, TurnRecord } from "arkah-agent-guardrails/store";
import { PostgresGuardrailStore } from "arkah-agent-guardrails/postgres";
import { SqliteGuardrailStore } from "arkah-agent-guardrails/sqlite";
import { deferred, ForwardingStore, rejection } from "../support/fixtures.js";
import { adminPool, dropSchema, freshSchema, PG_URL } from "../support/postgres.js";
import { NotesService } from "../security/support.js";
import { NEW_BODY, serviceHarness, TestClock, turnOf } from "./support.js";

const DAY = 86_400_000;

/** A store and a checkpointer that outlive a worker, and what the checkpointer's tables hold. */
interface Durable {
  readonly store: GuardrailStore;
  readonly checkpointer: BaseCheckpointSaver;
  /** Every thread id with a row in any of the checkpointer's tables. */
  threads(): Promise<string[]>;
  close(): Promise<void>;
}

interface Backend {
  readonly name: string;
  open(now: () => Date): Promise<Durable>;
}

let dir: string | undefined;
let files = 0;
let pool: pg.Pool | undefined;

const BACKENDS: Backend[] = [
  {
    name: "SQLite store and SqliteSaver",
    open: (now) => {
      dir ??= mkdtempSync(join(tmpdir(), "arkah-retention-"));
      files += 1;
      const store = SqliteGuardrailStore.open({ path: join(dir, `store-${String(files)}.sqlite`), now });
      const saver = SqliteSaver.fromConnString(join(dir, `checkpoints-${String(files)}.sqlite`));
      const threads = () => {
        // The saver creates its tables on first use; before that it holds no thread.
        const tables = saver.db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name IN ('checkpoints', 'writes')").all();
        if (tables.length < 2) return Promise.resolve([]);
        const rows = saver.db.prepare("SELECT thread_id FROM checkpoints UNION SELECT thread_id FROM writes").all() as { thread_id: string }[];
        return Promise.resolve(rows.map((row) => row.thread_id).sort());
      };
      return Promise.resolve({
        store,
        checkpointer: saver,
        threads,
        close: () => {
          store.close();
          saver.db.close();
          return Promise.resolve();
        },
      });
    },
  },
  {
    name: "PostgreSQL store and PostgresSaver",
    open: async (now) => {
      if (PG_URL === undefined) throw new Error("no PostgreSQL: set ARKAH_PG_URL (the test setup starts an embedded server)");
      pool ??= adminPool({ max: 4 });
      const shared = pool;
      const store = await PostgresGuardrailStore.open({ pool: shared }, { schema: freshSchema("arkah_retention"), now });
      const schema = freshSchema("arkah_retention_cp");
      const saver = PostgresSaver.fromConnString(PG_URL, { schema });
      await saver.setup();
      const threads = async () => {
        const { rows } = await shared.query<{ thread_id: string }>(
          `SELECT thread_id FROM "${schema}".checkpoints UNION SELECT thread_id FROM "${schema}".checkpoint_blobs ` +
            `UNION SELECT thread_id FROM "${schema}".checkpoint_writes`,
        );
        return rows.map((row) => row.thread_id).sort();
      };
      return {
        store,
        checkpointer: saver,
        threads,
        close: async () => {
          await store.close();
          await saver.end();
          await dropSchema(shared, store.schema);
          await dropSchema(shared, schema);
        },
      };
    },
  },
];

afterAll(async () => {
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  await pool?.end();
});

function expectStatus<S extends TurnAnswer["status"]>(answer: DecideAnswer, status: S): Extract<TurnAnswer, { status: S }> {
  if (answer.status !== status) throw new Error(`expected ${status}, got ${JSON.stringify(answer)}`);
  return answer as Extract<TurnAnswer, { status: S }>;
}

/**
 * Waits until the running turn's first checkpoints are in the saver's tables: LangGraph writes a
 * step's checkpoint while the next step runs (durability "async"), so the tool a run is blocked
 * in may start before they land. Bounded by a number of looks, not a time the assertion depends on.
 */
async function checkpointed(durable: Durable, thread: string): Promise<void> {
  for (let look = 0; look < 500 && !(await durable.threads()).includes(thread); look++) {
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** The store, with its `prune` failing while `pruneFails` is set: a worker that died after deleting the threads. */
class PruneFails extends ForwardingStore {
  pruneFails = false;
  override async prune(options: PruneOptions): Promise<PruneResult> {
    if (this.pruneFails) throw new Error("the worker died before pruning the store");
    return super.prune(options);
  }
}

/** A broken store: its listing of finished turns answers the live turns instead. */
class ListsLiveTurns extends ForwardingStore {
  override async listTurns(query: ListTurnsQuery): Promise<TurnRecord[]> {
    if (query.state !== "finished") return super.listTurns(query);
    return [...(await super.listTurns({ state: "running" })), ...(await super.listTurns({ state: "awaiting_approval" }))];
  }
}

const DONE = turnOf({ turnId: "done-1" });
const DENIED = turnOf({ turnId: "denied-1", segments: [{ label: "user", content: "Tell me the admin password." }] });
const PAUSED = turnOf({ turnId: "paused-1" });
const RUNNING = turnOf({ turnId: "running-1" });

for (const backend of BACKENDS) {
  describe(`service.prune on the ${backend.name}`, () => {
    it("deletes the threads and records of finished turns, never a paused or running turn's; both finish afterwards; a retry of a pruned key runs as a new turn on an empty thread, its write refused", async () => {
      const clock = new TestClock();
      const durable = await backend.open(clock.now);
      try {
        const { store, checkpointer } = durable;
        const notes = new NotesService();
        const plain = serviceHarness({ store, notes, checkpointer, service: { now: clock.now, allowInMemoryCheckpointer: false } });
        const approving = serviceHarness({ store, notes, checkpointer, approvals: true, service: { now: clock.now, allowInMemoryCheckpointer: false } });
        const reading = deferred();
        const release = deferred();
        const blocked = serviceHarness({
          store,
          notes,
          checkpointer,
          hooks: {
            beforeRead: async () => {
              reading.resolve();
              await release.promise;
            },
          },
          service: { now: clock.now, allowInMemoryCheckpointer: false, leaseMs: DAY },
        });

        expectStatus(await plain.service.submit({ turn: DONE }), "completed");
        expect(expectStatus(await plain.service.submit({ turn: DENIED }), "refused").code).toBe("denied");
        const paused = expectStatus(await approving.service.submit({ turn: PAUSED }), "awaiting_approval");
        const running = blocked.service.submit({ turn: RUNNING });
        await reading.promise;
        expect(notes.writes).toHaveLength(1);

        const done = (await store.getTurn(turnKey(DONE)))?.threadId ?? "";
        const pausedThread = (await store.getTurn(turnKey(PAUSED)))?.threadId ?? "";
        const runningThread = (await store.getTurn(turnKey(RUNNING)))?.threadId ?? "";
        await checkpointed(durable, runningThread);
        expect(await durable.threads(), "the finished, paused and running turns' threads are checkpointed (a denied turn never ran)").toEqual(
          [done, pausedThread, runningThread].sort(),
        );

        clock.advance(DAY);
        const olderThan = clock.now().toISOString();
        // Two workers on their interval at once: each deletes the threads of the turns it lists and
        // takes (both finished turns, the denied one's included; one, when the other call pruned
        // the second record between its listing and its take; none once the other pruned both);
        // the completed write's claim becomes one tombstone.
        const [first, second] = await Promise.all([plain.service.prune({ olderThan }), approving.service.prune({ olderThan })]);
        expect([0, 1, 2]).toContain(first.threads);
        expect([0, 1, 2]).toContain(second.threads);
        expect(first.threads + second.threads, "at least one call listed both").toBeGreaterThanOrEqual(2);
        expect(first.store.turns + second.store.turns, "one tombstone").toBe(1);

        expect(await durable.threads(), "only the paused and the running turn's threads are left").toEqual([pausedThread, runningThread].sort());
        expect(await store.getTurn(turnKey(DONE))).toBeUndefined();
        expect(await store.getTurn(turnKey(DENIED))).toBeUndefined();
        expect((await store.getTurn(turnKey(PAUSED)))?.state).toBe("awaiting_approval");
        expect((await store.getTurn(turnKey(RUNNING)))?.state).toBe("running");

        // The kept turns go on from their checkpoints: the decision resumes the pause, the run finishes.
        const approvalId = paused.approvals[0]?.approvalId ?? "";
        expectStatus(await approving.service.decide({ approvalId, principal: "alice", decision: { decision: "approve" } }), "completed");
        release.resolve();
        expectStatus(await running, "completed");
        expect(notes.writes, "one write per turn").toEqual([
          { noteId: "note-7", body: NEW_BODY },
          { noteId: "note-7", body: NEW_BODY },
          { noteId: "note-7", body: NEW_BODY },
        ]);

        // A retry of the pruned key is a new turn on an empty thread: it reads again from the start
        // (its old transcript is gone), and the claim's tombstone refuses the second write.
        const moderations = plain.moderations();
        const retried = expectStatus(await plain.service.submit({ turn: DONE }), "completed");
        expect(retried.replayed).toBe(false);
        expect(retried.calls.map((call) => [call.tool, call.refusal])).toEqual([
          ["read_note", undefined],
          ["edit_note", "mutation_conflict"],
        ]);
        expect(notes.writes).toHaveLength(3);
        expect(plain.moderations(), "the stored receipt is reused").toBe(moderations);
        expect(await durable.threads()).toContain(done);
      } finally {
        await durable.close();
      }
    });

    it("a call that dies after deleting the threads, before pruning the store, leaves the records; a retry meanwhile replays; the next call finishes the job", async () => {
      const clock = new TestClock();
      const durable = await backend.open(clock.now);
      try {
        const store = new PruneFails(durable.store);
        const notes = new NotesService();
        const worker = serviceHarness({ store, notes, checkpointer: durable.checkpointer, service: { now: clock.now, allowInMemoryCheckpointer: false } });
        const answer = expectStatus(await worker.service.submit({ turn: DONE }), "completed");
        const thread = (await store.getTurn(turnKey(DONE)))?.threadId ?? "";
        expect(await durable.threads()).toEqual([thread]);
        clock.advance(DAY);
        const olderThan = clock.now().toISOString();

        store.pruneFails = true;
        expect(await rejection(worker.service.prune({ olderThan }))).toMatchObject({ message: "the worker died before pruning the store" });
        expect(await durable.threads(), "the thread went first").toEqual([]);
        expect((await store.getTurn(turnKey(DONE)))?.state, "the record stays for the next call").toBe("completed");
        // Meanwhile a retry answers the stored outcome: a finished turn needs no thread.
        expect(await worker.service.submit({ turn: DONE })).toEqual({ ...answer, replayed: true });
        expect(notes.writes).toHaveLength(1);

        store.pruneFails = false;
        expect(await worker.service.prune({ olderThan })).toEqual({ threads: 1, store: { turns: 1, effects: 0 } });
        expect(await store.getTurn(turnKey(DONE))).toBeUndefined();
        expect(await durable.threads()).toEqual([]);
        expect(await worker.service.prune({ olderThan }), "nothing is left: a call on an interval is harmless").toEqual({ threads: 0, store: { turns: 0, effects: 0 } });
      } finally {
        await durable.close();
      }
    });

    it("a store whose listing of finished turns names a live one: StoreContractError, and no thread or record is deleted", async () => {
      const clock = new TestClock();
      const durable = await backend.open(clock.now);
      try {
        const store = new ListsLiveTurns(durable.store);
        const worker = serviceHarness({ store, checkpointer: durable.checkpointer, approvals: true, service: { now: clock.now, allowInMemoryCheckpointer: false } });
        expectStatus(await worker.service.submit({ turn: PAUSED }), "awaiting_approval");
        const threads = await durable.threads();
        expect(threads).toHaveLength(1);
        clock.advance(DAY);
        const error = await rejection(worker.service.prune({ olderThan: clock.now().toISOString() }));
        expect((error as Error).name).toBe("StoreContractError");
        expect(await durable.threads()).toEqual(threads);
        expect((await store.getTurn(turnKey(PAUSED)))?.state).toBe("awaiting_approval");
      } finally {
        await durable.close();
      }
    });

    it("bad options are a TurnServiceError (invalid_input) and delete nothing", async () => {
      const clock = new TestClock();
      const durable = await backend.open(clock.now);
      try {
        const { store, checkpointer } = durable;
        const worker = serviceHarness({ store, checkpointer, service: { now: clock.now, allowInMemoryCheckpointer: false } });
        expectStatus(await worker.service.submit({ turn: DONE }), "completed");
        const threads = await durable.threads();
        clock.advance(DAY);
        const bad: [string, unknown][] = [
          ["no options", undefined],
          ["no olderThan", {}],
          ["an olderThan that is no timestamp", { olderThan: "30 days" }],
          ["an olderThan that is a Date", { olderThan: clock.now() }],
          ["an unknown field", { olderThan: clock.now().toISOString(), limit: 10 }],
          ["an olderThan later than the service's clock", { olderThan: new Date(clock.ms + 1).toISOString() }],
        ];
        for (const [what, options] of bad) {
          const error = await rejection(worker.service.prune(options as never));
          expect(error, what).toBeInstanceOf(TurnServiceError);
          expect((error as TurnServiceError).code, what).toBe("invalid_input");
        }
        expect(await durable.threads()).toEqual(threads);
        expect((await store.getTurn(turnKey(DONE)))?.state).toBe("completed");
      } finally {
        await durable.close();
      }
    });
  });
}

describe("service.prune and its checkpointer", () => {
  it("a checkpointer without deleteThread is a ConfigurationError when prune is called, and nothing is pruned", async () => {
    const clock = new TestClock();
    const store = new InMemoryGuardrailStore({ now: clock.now });
    const checkpointer = new MemorySaver();
    Object.defineProperty(checkpointer, "deleteThread", { value: undefined });
    const worker = serviceHarness({ store, checkpointer, service: { now: clock.now } });
    expectStatus(await worker.service.submit({ turn: DONE }), "completed");
    clock.advance(DAY);
    const error = await rejection(worker.service.prune({ olderThan: clock.now().toISOString() }));
    expect(ConfigurationError.isInstance(error)).toBe(true);
    expect((error as Error).message).toMatch(/deleteThread/);
    expect((await store.getTurn(turnKey(DONE)))?.state).toBe("completed");
  });
});
