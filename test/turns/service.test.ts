/**
 * `createTurnService` through the real `createAgent` loop, on the in-memory, SQLite and PostgreSQL
 * stores: a turn runs once, a retry answers the stored outcome and calls nothing (model calls,
 * tool-body entries, moderations and writes are counted), a concurrent submit answers `running`,
 * a reused key with other input is refused, approvals pause and only the principal (or whom
 * `mayDecide` allows) resumes, and a turn whose worker gave up is taken over from its checkpoint.
 */
import { getEventListeners } from "node:events";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { MemorySaver } from "@langchain/langgraph";
import type pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { z as z3 } from "zod/v3";
import {
  InMemoryGuardrailStore,
  turnKey,
  TurnServiceError,
  turnThreadId,
  type GuardrailStore,
  type TurnAnswer,
} from "arkah-agent-guardrails";
import { PostgresGuardrailStore } from "arkah-agent-guardrails/postgres";
import { SqliteGuardrailStore } from "arkah-agent-guardrails/sqlite";
import { adminPool, dropSchema, freshSchema, PG_URL } from "../support/postgres.js";
import { deferred, rejection } from "../support/fixtures.js";
import { NotesService } from "../security/support.js";
import { NEW_BODY, serviceHarness, TestClock, turnOf } from "./support.js";

interface StoreKind {
  readonly name: string;
  open(now: () => Date): Promise<{ store: GuardrailStore; close: () => Promise<void> }>;
}

let dir: string | undefined;
let files = 0;
let pool: pg.Pool | undefined;

const KINDS: StoreKind[] = [
  { name: "memory", open: (now) => Promise.resolve({ store: new InMemoryGuardrailStore({ now }), close: () => Promise.resolve() }) },
  {
    name: "SQLite",
    open: (now) => {
      dir ??= mkdtempSync(join(tmpdir(), "arkah-turns-"));
      files += 1;
      const store = SqliteGuardrailStore.open({ path: join(dir, `turns-${String(files)}.sqlite`), now });
      return Promise.resolve({ store, close: () => Promise.resolve(store.close()) });
    },
  },
  {
    name: "PostgreSQL",
    open: async (now) => {
      if (PG_URL === undefined) throw new Error("no PostgreSQL: set ARKAH_PG_URL (the test setup starts an embedded server)");
      pool ??= adminPool({ max: 6 });
      const store = await PostgresGuardrailStore.open({ pool }, { schema: freshSchema("arkah_turns"), now });
      const shared = pool;
      return {
        store,
        close: async () => {
          await store.close();
          await dropSchema(shared, store.schema);
        },
      };
    },
  },
];

afterAll(async () => {
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  await pool?.end();
});

function completed(answer: TurnAnswer | { status: string }) {
  if (answer.status !== "completed") throw new Error(`expected completed, got ${JSON.stringify(answer)}`);
  return answer as Extract<TurnAnswer, { status: "completed" }>;
}

function awaiting(answer: TurnAnswer | { status: string }) {
  if (answer.status !== "awaiting_approval") throw new Error(`expected awaiting_approval, got ${JSON.stringify(answer)}`);
  return answer as Extract<TurnAnswer, { status: "awaiting_approval" }>;
}

for (const kind of KINDS) {
  describe(`turn service on the ${kind.name} store`, () => {
    const clock = new TestClock();
    const opened: (() => Promise<void>)[] = [];
    const open = async () => {
      const { store, close } = await kind.open(clock.now);
      opened.push(close);
      return store;
    };
    beforeAll(() => undefined);
    afterAll(async () => {
      for (const close of opened) await close();
    });

    it("the first submit admits and runs the turn: completed, each call's outcome, no tool result text", async () => {
      const { service, model, notes, moderations } = serviceHarness({ store: await open() });
      const answer = completed(await service.submit({ turn: turnOf() }));
      expect(answer).toEqual({
        status: "completed",
        turnKey: turnKey(turnOf()),
        replayed: false,
        answer: "Done: the note says oat milk now.",
        calls: [
          { tool: "read_note", callId: "r1", status: "success" },
          { tool: "edit_note", callId: "w1", status: "success" },
        ],
      });
      expect(JSON.stringify(answer)).not.toContain("Buy milk");
      expect(notes.writes).toEqual([{ noteId: "note-7", body: NEW_BODY }]);
      expect(model.calls).toBe(3);
      expect(moderations()).toBe(1);
    });

    it("a retry of a finished turn calls nothing and answers the same outcome, replayed", async () => {
      const store = await open();
      const notes = new NotesService();
      const checkpointer = new MemorySaver();
      const first = serviceHarness({ store, notes, checkpointer });
      const original = completed(await first.service.submit({ turn: turnOf() }));
      // A second worker: fresh model and moderation counters, the same store, notes and checkpoints.
      const retry = serviceHarness({ store, notes, checkpointer });
      const entries = notes.entries.length;
      const again = await retry.service.submit({ turn: turnOf() });
      expect(again).toEqual({ ...original, replayed: true });
      expect(retry.model.calls).toBe(0);
      expect(retry.moderations()).toBe(0);
      expect(notes.entries.length).toBe(entries);
      expect(notes.writes).toHaveLength(1);
    });

    it("a submit while the turn runs answers running and starts no second run", async () => {
      const store = await open();
      const reading = deferred();
      const release = deferred();
      const notes = new NotesService();
      const worker = serviceHarness({
        store,
        notes,
        hooks: {
          beforeRead: async () => {
            reading.resolve();
            await release.promise;
          },
        },
      });
      const other = serviceHarness({ store, notes });
      const running = worker.service.submit({ turn: turnOf() });
      await reading.promise;
      expect(await other.service.submit({ turn: turnOf() })).toEqual({ status: "running", turnKey: turnKey(turnOf()) });
      expect(other.model.calls).toBe(0);
      expect(other.moderations()).toBe(0);
      release.resolve();
      completed(await running);
      expect(notes.writes).toHaveLength(1);
      expect(notes.entries.filter((entry) => entry === "read_note")).toHaveLength(1);
    });

    it("the same key with other input is refused input_mismatch, and nothing runs", async () => {
      const store = await open();
      const { service, model, notes } = serviceHarness({ store });
      completed(await service.submit({ turn: turnOf() }));
      const calls = model.calls;
      for (const changed of [
        turnOf({ segments: [{ label: "user", content: "Delete my note." }] }),
        turnOf({ principal: "mallory" }),
        turnOf({ policyVersion: "v2" }),
        // Another scope is another turn key, but the same request (principal and turn id).
        turnOf({ scopeId: "note-8" }),
        turnOf({ scopeId: "note-8", segments: [{ label: "user", content: "Delete my note." }] }),
      ]) {
        expect(await service.submit({ turn: changed })).toEqual({
          status: "refused",
          code: "input_mismatch",
          turnKey: turnKey(changed),
          replayed: false,
        });
      }
      expect(model.calls).toBe(calls);
      expect(notes.writes).toHaveLength(1);
      expect(await store.getTurn(turnKey(turnOf({ scopeId: "note-8" }))), "nothing stored for another scope").toBeUndefined();
    });

    it("a turn moderation denies is refused denied and stored: a retry replays it without asking again", async () => {
      const { service, model, moderations } = serviceHarness({ store: await open() });
      const turn = turnOf({ segments: [{ label: "user", content: "Put my password in the note." }] });
      expect(await service.submit({ turn })).toMatchObject({ status: "refused", code: "denied", replayed: false });
      expect(await service.submit({ turn })).toMatchObject({ status: "refused", code: "denied", replayed: true });
      expect(model.calls).toBe(0);
      expect(moderations()).toBe(1);
    });

    it("invalid input is a TurnServiceError and stores nothing", async () => {
      const store = await open();
      const { service } = serviceHarness({ store });
      const bad = { ...turnOf(), segments: [] };
      const error = await rejection(service.submit({ turn: bad }));
      expect(TurnServiceError.isInstance(error) && error.code).toBe("invalid_input");
      const missing = await rejection(service.submit({ turn: turnOf({ segments: [{ label: "other", content: "x" }] }) }));
      expect(TurnServiceError.isInstance(missing) && missing.code).toBe("invalid_input");
      expect(await store.getTurn(turnKey(turnOf()))).toBeUndefined();
      expect(TurnServiceError.isInstance(await rejection(service.decide({ approvalId: "x", principal: "alice", decision: { decision: "approve" } })))).toBe(true);
    });

    it("approvals: the turn pauses awaiting approval; the principal's decision resumes it to one write", async () => {
      const store = await open();
      const { service, model, notes } = serviceHarness({ store, approvals: true });
      const paused = awaiting(await service.submit({ turn: turnOf() }));
      expect(paused.approvals).toHaveLength(1);
      expect(paused.approvals[0]).toMatchObject({ tool: "edit_note", toolCallId: "w1", args: { noteId: "note-7", body: NEW_BODY } });
      expect(notes.writes).toHaveLength(0);
      const approvalId = paused.approvals[0]?.approvalId ?? "";

      // A retry of the paused turn answers the same pause and asks nobody again.
      const calls = model.calls;
      expect(await service.submit({ turn: turnOf() })).toEqual({ ...paused, replayed: true });
      expect(model.calls).toBe(calls);
      expect(await store.listApprovals({ turnKey: turnKey(turnOf()) })).toHaveLength(1);

      const resumed = completed(await service.decide({ approvalId, principal: "alice", decision: { decision: "approve" } }));
      expect(resumed.calls.map((call) => [call.tool, call.status])).toEqual([
        ["read_note", "success"],
        ["edit_note", "success"],
      ]);
      expect(notes.writes).toEqual([{ noteId: "note-7", body: NEW_BODY }]);
      expect((await store.getApproval(approvalId))?.status).toBe("applied");
      expect((await store.getApproval(approvalId))?.operatorRef).toBe("alice");
      // Deciding again changes nothing and runs nothing.
      expect(await service.decide({ approvalId, principal: "alice", decision: { decision: "reject" } })).toEqual({
        status: "not_pending",
        approvalStatus: "applied",
      });
      expect(await service.submit({ turn: turnOf() })).toEqual({ ...resumed, replayed: true });
      expect(notes.writes).toHaveLength(1);
    });

    it("a decision by another principal is forbidden: nothing is recorded and nothing runs", async () => {
      const store = await open();
      const { service, model, notes } = serviceHarness({ store, approvals: true });
      const paused = awaiting(await service.submit({ turn: turnOf() }));
      const approvalId = paused.approvals[0]?.approvalId ?? "";
      const calls = model.calls;
      expect(await service.decide({ approvalId, principal: "mallory", decision: { decision: "approve" } })).toEqual({ status: "forbidden" });
      expect((await store.getApproval(approvalId))?.status).toBe("pending");
      expect(model.calls).toBe(calls);
      expect(notes.writes).toHaveLength(0);
      expect(await service.decide({ approvalId: "f".repeat(64), principal: "alice", decision: { decision: "approve" } })).toEqual({
        status: "not_found",
      });
      // A rejection by the principal resumes the run: the model is told, nothing is written.
      const rejected = completed(await service.decide({ approvalId, principal: "alice", decision: { decision: "reject", message: "no" } }));
      expect(rejected.calls.find((call) => call.callId === "w1")).toMatchObject({ status: "error", refusal: "approval_rejected" });
      expect(notes.writes).toHaveLength(0);
    });

    it("a decision recorded by a decider that died before resuming: the next submit resumes the turn to its one write", async () => {
      const store = await open();
      const { service, notes } = serviceHarness({ store, approvals: true });
      const paused = awaiting(await service.submit({ turn: turnOf() }));
      const approvalId = paused.approvals[0]?.approvalId ?? "";
      // What decide records before it resumes; the decider goes away here.
      await store.decideApproval({ approvalId, decision: { decision: "approve" }, operatorRef: "alice", decidedAt: clock.now().toISOString() });
      expect((await store.getTurn(turnKey(turnOf())))?.state).toBe("awaiting_approval");
      const answer = completed(await service.submit({ turn: turnOf() }));
      expect(answer.replayed).toBe(false);
      expect(notes.writes).toEqual([{ noteId: "note-7", body: NEW_BODY }]);
      // The same decision delivered again (a retried request) is answered as the turn stands: nothing runs again, nothing is refused.
      const trail = (await store.readAudit({ approvalId })).length;
      expect(await service.decide({ approvalId, principal: "alice", decision: { decision: "approve" } })).toEqual({ ...answer, replayed: true });
      expect(notes.writes).toHaveLength(1);
      expect(await store.readAudit({ approvalId })).toHaveLength(trail);
      // Another decision is refused, and audited.
      expect(await service.decide({ approvalId, principal: "alice", decision: { decision: "reject" } })).toEqual({
        status: "not_pending",
        approvalStatus: "applied",
      });
      expect((await store.readAudit({ approvalId })).at(-1)).toMatchObject({ action: "decision_refused", code: "already_decided", operatorRef: "alice" });
    });

    it("mayDecide lets an approver role decide someone else's turn", async () => {
      const store = await open();
      const { service, notes } = serviceHarness({
        store,
        approvals: true,
        service: { mayDecide: (principal, turn) => principal === "approver" || principal === turn.principal },
      });
      const paused = awaiting(await service.submit({ turn: turnOf() }));
      const approvalId = paused.approvals[0]?.approvalId ?? "";
      completed(await service.decide({ approvalId, principal: "approver", decision: { decision: "approve" } }));
      expect(notes.writes).toHaveLength(1);
    });

    it("two decisions on the same pending request at once: one resumes the run to its one write, the other is not_pending", async () => {
      const store = await open();
      const { service, model, notes } = serviceHarness({
        store,
        approvals: true,
        service: { mayDecide: (principal, turn) => principal === "approver" || principal === turn.principal },
      });
      const paused = awaiting(await service.submit({ turn: turnOf() }));
      const approvalId = paused.approvals[0]?.approvalId ?? "";
      const calls = model.calls;
      // The principal approves while an approver rejects: both read the request pending, one decision lands.
      const answers = await Promise.all([
        service.decide({ approvalId, principal: "alice", decision: { decision: "approve" } }),
        service.decide({ approvalId, principal: "approver", decision: { decision: "reject", message: "no" } }),
      ]);
      const resumed = answers.filter((answer) => answer.status === "completed");
      const refused = answers.filter((answer) => answer.status !== "completed");
      expect(resumed).toHaveLength(1);
      expect(completed(resumed[0] ?? { status: "none" }).replayed).toBe(false);
      expect(refused).toHaveLength(1);
      expect(refused[0]).toMatchObject({ status: "not_pending" });
      // The run resumed once: the model's last step was asked once.
      expect(model.calls).toBe(calls + 1);
      // The stored decision is the winner's; the run did what it says: approved, one write; rejected, none.
      const winner = (await store.getApproval(approvalId))?.operatorRef;
      expect(["alice", "approver"]).toContain(winner);
      expect(notes.writes).toHaveLength(winner === "alice" ? 1 : 0);
      expect(notes.entries.filter((entry) => entry === "edit_note")).toHaveLength(winner === "alice" ? 1 : 0);
      expect(await service.submit({ turn: turnOf() })).toEqual({ ...resumed[0], replayed: true });
    });

    it("a turn whose worker gave up mid-run is taken over after its lease: resumed from the checkpoint, one admission, one write", async () => {
      const store = await open();
      const notes = new NotesService();
      const checkpointer = new MemorySaver();
      const reading = deferred();
      const never = deferred();
      const dying = serviceHarness({
        store,
        notes,
        checkpointer,
        hooks: {
          beforeRead: async () => {
            reading.resolve();
            await never.promise;
          },
        },
        service: { leaseMs: 60_000 },
      });
      const controller = new AbortController();
      const abandoned = rejection(dying.service.submit({ turn: turnOf(), signal: controller.signal }));
      await reading.promise;
      controller.abort(new Error("the worker went away"));
      await abandoned;
      expect((await store.getTurn(turnKey(turnOf())))?.state).toBe("running");

      const taker = serviceHarness({ store, notes, checkpointer, service: { leaseMs: 60_000 } });
      expect(await taker.service.submit({ turn: turnOf() })).toMatchObject({ status: "running" });
      clock.advance(60_000);
      const answer = completed(await taker.service.submit({ turn: turnOf() }));
      expect(answer.replayed).toBe(false);
      expect(notes.writes).toEqual([{ noteId: "note-7", body: NEW_BODY }]);
      // The read step re-ran from the checkpoint: the model's first step was not asked again.
      expect(dying.model.calls + taker.model.calls).toBe(3);
      expect(dying.moderations() + taker.moderations()).toBe(1);
      never.resolve();
    });

    it("get reads the turn's state, outcome and mutation claim without running anything", async () => {
      const store = await open();
      const { service, model } = serviceHarness({ store });
      expect(await service.get(turnKey(turnOf()))).toEqual({ status: "not_found" });
      const answer = completed(await service.submit({ turn: turnOf() }));
      const calls = model.calls;
      const view = await service.get(turnKey(turnOf()));
      expect(view).toMatchObject({
        status: "found",
        state: "completed",
        principal: "alice",
        scopeId: "note-7",
        mutation: { state: "complete", toolName: "edit_note", toolCallId: "w1" },
      });
      expect(view.status === "found" ? view.outcome : undefined).toEqual({ status: answer.status, answer: answer.answer, calls: answer.calls });
      expect(view.status === "found" ? view.mutation?.result : "absent").toBeUndefined();
      expect(model.calls).toBe(calls);
    });
  });
}

describe("turn service and the caller's signal", () => {
  it("a long-lived signal given to many submits holds no listener once they finish (LangGraph's would stay, one per run)", async () => {
    const clock = new TestClock();
    const { service, notes } = serviceHarness({ store: new InMemoryGuardrailStore({ now: clock.now }) });
    const serverWide = new AbortController();
    for (const turnId of ["req-0001", "req-0002", "req-0003"]) {
      completed(await service.submit({ turn: turnOf({ turnId }), signal: serverWide.signal }));
    }
    expect(notes.writes).toHaveLength(3);
    expect(getEventListeners(serverWide.signal, "abort")).toHaveLength(0);
  });
});

describe("turnThreadId: the thread a turn runs on", () => {
  const key = turnKey({ scopeId: "note-7", turnId: "turn-1" });

  it("is an RFC 9562 version 8 UUID derived from the turn key, the same for every worker and release", () => {
    const id = turnThreadId(key);
    expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    // Pinned: workers of different releases must find the same thread for a turn.
    expect(id).toBe("e1f7cd0b-3c78-8c1b-a268-ff2a680501f8");
    expect(turnThreadId(key)).toBe(id);
    expect(turnThreadId(turnKey({ scopeId: "note-7", turnId: "turn-2" }))).not.toBe(id);
    // What @langchain/langgraph-api validates thread ids with (zod's v3 API), and zod 4's strict check.
    expect(z3.string().uuid().safeParse(id).success).toBe(true);
    expect(z.uuid().safeParse(id).success).toBe(true);
  });

  it("a value that is not a turn key is invalid_input", () => {
    for (const bad of ["", "arkah-turn:x", key.toUpperCase(), key.slice(1)]) {
      expect(() => turnThreadId(bad), JSON.stringify(bad)).toThrow(TurnServiceError);
    }
  });

  it("the service stores and runs a new turn on it", async () => {
    const store = new InMemoryGuardrailStore();
    const checkpointer = new MemorySaver();
    const { service } = serviceHarness({ store, checkpointer });
    completed(await service.submit({ turn: turnOf() }));
    const threadId = turnThreadId(turnKey(turnOf()));
    expect((await store.getTurn(turnKey(turnOf())))?.threadId).toBe(threadId);
    expect(await checkpointer.getTuple({ configurable: { thread_id: threadId } })).toBeDefined();
  });
});
