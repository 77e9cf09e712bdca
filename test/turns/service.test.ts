/**
 * `createTurnService` through the real `createAgent` loop, on the in-memory, SQLite and PostgreSQL
 * stores: a turn runs once, a retry answers the stored outcome and calls nothing (model calls,
 * tool-body entries, moderations and writes are counted), a concurrent submit answers `running`,
 * a reused key with other input is refused, approvals pause and only the principal (or whom
 * `mayDecide` allows) resumes, a turn whose worker gave up is taken over from its checkpoint,
 * `prune` leaves a paused turn whole (its request still decidable, its effect run once), and a
 * write that timed out is `unknown` until the tool's `confirm` settles it.
 */
import { getEventListeners } from "node:events";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ToolMessage } from "@langchain/core/messages";
import type { ClientTool, ServerTool } from "@langchain/core/tools";
import { MemorySaver } from "@langchain/langgraph";
import { SqliteSaver } from "@langchain/langgraph-checkpoint-sqlite";
import { createAgent, tool } from "langchain";
import type pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { z as z3 } from "zod/v3";
import {
  ConfigurationError,
  createDocumentGuardrails,
  createTurnService,
  InMemoryGuardrailStore,
  requireApproval,
  turnKey,
  TurnServiceError,
  turnHttpReply,
  turnThreadId,
  type ConfirmClaim,
  type GuardrailStore,
  type ToolPolicy,
  type TurnAnswer,
} from "arkah-agent-guardrails";
import type { RenewTurnInput } from "arkah-agent-guardrails/store";
import { PostgresGuardrailStore } from "arkah-agent-guardrails/postgres";
import { SqliteGuardrailStore } from "arkah-agent-guardrails/sqlite";
import { EXIT, reconcileAuto } from "../../src/cli/commands.js";
import { adminPool, dropSchema, freshSchema, PG_URL } from "../support/postgres.js";
import { deferred, ForwardingStore, rejection } from "../support/fixtures.js";
import { ScriptedModel, type ScriptResponder } from "arkah-agent-guardrails/testing";
import { NOTE_POLICIES, NotesService } from "../security/support.js";
import { failsAfterWrite, NEW_BODY, noteResponder, serviceHarness, TestClock, turnOf, turnTools } from "./support.js";

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

/**
 * The store, watched: `renewed()` resolves once a renewal that started after it was asked has
 * answered; while `renewalsDown`, a renewal fails before it reaches the store (an outage) and
 * `renewalFailed()` resolves.
 */
class RenewalWatch extends ForwardingStore {
  renewalsDown = false;
  #renewed: (() => void)[] = [];
  #failed: (() => void)[] = [];
  override async renewTurn(input: RenewTurnInput): Promise<boolean> {
    const waiting = this.#renewed.splice(0);
    if (this.renewalsDown) {
      for (const done of this.#failed.splice(0)) done();
      throw new Error("connection refused");
    }
    const answer = await super.renewTurn(input);
    for (const done of waiting) done();
    return answer;
  }
  renewed(): Promise<void> {
    return new Promise((resolve) => this.#renewed.push(resolve));
  }
  renewalFailed(): Promise<void> {
    return new Promise((resolve) => this.#failed.push(resolve));
  }
}

function completed(answer: TurnAnswer | { status: string }) {
  if (answer.status !== "completed") throw new Error(`expected completed, got ${JSON.stringify(answer)}`);
  return answer as Extract<TurnAnswer, { status: "completed" }>;
}

const DAY = 86_400_000;
const MAIL_POLICIES: Record<string, ToolPolicy> = { ...NOTE_POLICIES, send_email: { kind: "side-effect" } };

/**
 * One worker whose turn reads the note, edits it, then emails its owner: `send_email` is a side
 * effect that needs approval. `outbox` holds every message the tool body sent.
 */
function mailHarness(store: GuardrailStore) {
  const notes = new NotesService();
  const outbox: { to: string; body: string }[] = [];
  const sendEmail = tool(
    ({ to, body }) => {
      outbox.push({ to, body });
      return `sent to ${to}`;
    },
    { name: "send_email", description: "Send an email.", schema: z.object({ to: z.string(), body: z.string() }) },
  );
  const plan = noteResponder();
  const model = new ScriptedModel((messages) => {
    const done = new Set(messages.filter((message) => ToolMessage.isInstance(message)).map((message) => message.name));
    if (done.has("edit_note") && !done.has("send_email")) {
      return { toolCalls: [{ id: "m1", name: "send_email", args: { to: "alice@example.com", body: "Your note says oat milk now." } }] };
    }
    return plan(messages);
  });
  const guardrails = createDocumentGuardrails({
    store,
    userMessageLabel: "user",
    authorize: () => true,
    tools: MAIL_POLICIES,
    guardrails: [requireApproval({ tools: ["send_email"] })],
  });
  const tools: (ClientTool | ServerTool)[] = [...turnTools(notes), sendEmail];
  const agent = createAgent({ model, tools, middleware: [guardrails], checkpointer: new MemorySaver() });
  return { service: createTurnService({ agent, store, moderate: () => true, allowInMemoryCheckpointer: true }), notes, outbox };
}

function awaiting(answer: TurnAnswer | { status: string }) {
  if (answer.status !== "awaiting_approval") throw new Error(`expected awaiting_approval, got ${JSON.stringify(answer)}`);
  return answer as Extract<TurnAnswer, { status: "awaiting_approval" }>;
}

function failed(answer: TurnAnswer | { status: string }) {
  if (answer.status !== "failed") throw new Error(`expected failed, got ${JSON.stringify(answer)}`);
  return answer as Extract<TurnAnswer, { status: "failed" }>;
}

const APPROVAL_FORMATS = ["arkah", "langchain"] as const;

/** Reads note-7 and note-8 in one step (two requests when reads need approval), then edits note-7, then answers. */
function twoReadsResponder(): ScriptResponder {
  return (messages) => {
    const done = new Set(messages.filter((message) => ToolMessage.isInstance(message)).map((message) => message.tool_call_id));
    if (!done.has("r1")) {
      return {
        toolCalls: [
          { id: "r1", name: "read_note", args: { noteId: "note-7" } },
          { id: "r2", name: "read_note", args: { noteId: "note-8" } },
        ],
      };
    }
    if (!done.has("w1")) return { toolCalls: [{ id: "w1", name: "edit_note", args: { noteId: "note-7", body: NEW_BODY } }] };
    return { content: "Done." };
  };
}

/** A checkpointer whose reads fail while `failing` is set: the agent's checkpoint cannot be read. */
class FlakyCheckpointer extends MemorySaver {
  failing = false;
  override async getTuple(config: Parameters<MemorySaver["getTuple"]>[0]) {
    if (this.failing) {
      this.failing = false;
      throw new Error("the checkpointer is unavailable");
    }
    return super.getTuple(config);
  }
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
        // The write, as the claim holds it: its result only with includeToolResults.
        mutation: { state: "complete", toolName: "edit_note", toolCallId: "w1" },
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
      const invalidDecision = await rejection(service.decide({ approvalId: "a".repeat(64), principal: "", decision: { decision: "approve" } }));
      expect(TurnServiceError.isInstance(invalidDecision) && invalidDecision.code).toBe("invalid_input");
    });

    it("an approval id that is no approval id answers not_found, as an unknown one does: nothing is read or decided", async () => {
      const store = await open();
      const { service } = serviceHarness({ store });
      for (const approvalId of ["x", "A".repeat(64), "../../turns", "a".repeat(65), ""]) {
        expect(await service.decide({ approvalId, principal: "alice", decision: { decision: "approve" } })).toEqual({ status: "not_found" });
      }
      expect(await service.decide({ approvalId: "a".repeat(64), principal: "alice", decision: { decision: "approve" } })).toEqual({ status: "not_found" });
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

    it("prune while a turn whose write completed is paused on a side-effect approval: the request survives, decide resumes the turn to completion, one email", async () => {
      const store = await open();
      const { service, notes, outbox } = mailHarness(store);
      const paused = awaiting(await service.submit({ turn: turnOf() }));
      expect(paused.approvals.map((approval) => approval.tool)).toEqual(["send_email"]);
      expect(notes.writes).toHaveLength(1);
      expect(outbox).toHaveLength(0);
      const approvalId = paused.approvals[0]?.approvalId ?? "";

      // An operator's retention job, with a cutoff after everything the turn did.
      const cutoff = () => new Date(clock.ms + 365 * DAY).toISOString();
      expect(await store.prune({ olderThan: cutoff() })).toMatchObject({ turns: 0 });
      expect((await store.getApproval(approvalId))?.status).toBe("pending");
      expect(await service.get(turnKey(turnOf()))).toMatchObject({ state: "awaiting_approval", mutation: { state: "complete" } });

      const resumed = completed(await service.decide({ approvalId, principal: "alice", decision: { decision: "approve" } }));
      expect(resumed.calls.map((call) => [call.tool, call.status])).toEqual([
        ["read_note", "success"],
        ["edit_note", "success"],
        ["send_email", "success"],
      ]);
      expect(outbox).toEqual([{ to: "alice@example.com", body: "Your note says oat milk now." }]);
      expect(notes.writes).toEqual([{ noteId: "note-7", body: NEW_BODY }]);
      expect((await store.getApproval(approvalId))?.status).toBe("applied");
      expect(await service.submit({ turn: turnOf() })).toEqual({ ...resumed, replayed: true });

      // Finished, the turn is pruned by the usual rule: its claim and its effect become tombstones.
      expect(await store.prune({ olderThan: cutoff() })).toEqual({ turns: 1, effects: 1 });
      expect(await store.getApproval(approvalId)).toBeUndefined();
      expect(outbox).toHaveLength(1);
      expect(notes.writes).toHaveLength(1);
    });

    it("a running turn's lease is renewed while its run lives: submits across four leases answer running, and the run completes with one write", async () => {
      const store = new RenewalWatch(await open());
      const notes = new NotesService();
      const reading = deferred();
      const release = deferred();
      const holder = serviceHarness({
        store,
        notes,
        hooks: {
          beforeRead: async () => {
            reading.resolve();
            await release.promise;
          },
        },
        service: { leaseMs: 200 },
      });
      const other = serviceHarness({ store, notes, service: { leaseMs: 200 } });
      const running = holder.service.submit({ turn: turnOf() });
      await reading.promise;
      // Half a lease of the store's clock at a time, each followed by a renewal at the new time:
      // eight steps are four leases, and the holder is never taken over.
      for (let step = 0; step < 8; step++) {
        clock.advance(100);
        await store.renewed();
        expect(await other.service.submit({ turn: turnOf() }), `step ${String(step)}`).toEqual({ status: "running", turnKey: turnKey(turnOf()) });
      }
      release.resolve();
      expect(completed(await running).replayed).toBe(false);
      expect(notes.writes).toEqual([{ noteId: "note-7", body: NEW_BODY }]);
      expect(other.model.calls + other.moderations()).toBe(0);
      // The run ended: its lease is gone with it, and nothing renews a finished turn.
      expect((await store.getTurn(turnKey(turnOf())))?.lease).toBeUndefined();
    });

    it("a renewal that fails is logged and tried again; one that finds the turn taken over aborts the run, which answers the taker's outcome: one write", async () => {
      const inner = await open();
      const store = new RenewalWatch(inner);
      const notes = new NotesService();
      const checkpointer = new MemorySaver();
      const reading = deferred();
      const release = deferred();
      const warnings: [string, unknown][] = [];
      const holder = serviceHarness({
        store,
        notes,
        checkpointer,
        hooks: {
          beforeRead: async () => {
            reading.resolve();
            await release.promise;
          },
        },
        service: { leaseMs: 200, logger: { warn: (message, fields) => warnings.push([message, fields]) } },
      });
      store.renewalsDown = true;
      const running = holder.service.submit({ turn: turnOf() });
      await reading.promise;
      await store.renewalFailed();
      await store.renewalFailed();
      // The second failure is the first one tried again, at the next tick.
      expect(warnings.filter(([message]) => message === "turn lease renewal failed").length).toBeGreaterThanOrEqual(1);
      expect(warnings[0]?.[1]).toMatchObject({ turnKey: turnKey(turnOf()), error: { name: "Error" } });
      expect(JSON.stringify(warnings)).not.toContain("oat milk");
      // No renewal went through: a lease later the turn is another worker's.
      clock.advance(200);
      const taker = serviceHarness({ store: inner, notes, checkpointer, service: { leaseMs: 200 } });
      const answer = completed(await taker.service.submit({ turn: turnOf() }));
      store.renewalsDown = false;
      // The holder's next renewal answers false: its run is aborted, and it answers the turn as the taker left it.
      expect(await running).toEqual({ ...answer, replayed: true });
      release.resolve();
      expect(notes.writes).toEqual([{ noteId: "note-7", body: NEW_BODY }]);
    });

    it("recover takes over a turn whose worker died once its lease expired, and completes it with one write; a live or finished turn is left alone", async () => {
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
        service: { leaseMs: 200 },
      });
      const controller = new AbortController();
      const abandoned = rejection(dying.service.submit({ turn: turnOf(), signal: controller.signal }));
      await reading.promise;
      controller.abort(new Error("the worker went away"));
      await abandoned;
      expect((await store.getTurn(turnKey(turnOf())))?.state).toBe("running");

      const recoverer = serviceHarness({ store, notes, checkpointer, service: { leaseMs: 200 } });
      expect(await recoverer.service.recover(), "the lease has not expired").toEqual({ turns: [], counts: {} });
      clock.advance(200);
      expect(await recoverer.service.recover()).toEqual({ turns: [{ turnKey: turnKey(turnOf()), status: "completed" }], counts: { completed: 1 } });
      expect(notes.writes).toEqual([{ noteId: "note-7", body: NEW_BODY }]);
      // Recovered from the checkpoint: the model's first step was not asked again, nor moderation.
      expect(dying.model.calls + recoverer.model.calls).toBe(3);
      expect(dying.moderations() + recoverer.moderations()).toBe(1);
      expect(await recoverer.service.recover(), "nothing is left to recover").toEqual({ turns: [], counts: {} });
      expect(await recoverer.service.submit({ turn: turnOf() })).toMatchObject({ status: "completed", replayed: true });
      never.resolve();
    });

    it("recover resumes a decided pause whose decider died before resuming, to its one write; a pause still waiting on a person is left alone", async () => {
      const store = await open();
      const { service, notes, model } = serviceHarness({ store, approvals: true });
      const paused = awaiting(await service.submit({ turn: turnOf() }));
      const approvalId = paused.approvals[0]?.approvalId ?? "";
      expect(await service.recover(), "nobody decided yet").toEqual({ turns: [], counts: {} });
      // What decide records before it resumes; the decider goes away here.
      await store.decideApproval({ approvalId, decision: { decision: "approve" }, operatorRef: "alice", decidedAt: clock.now().toISOString() });
      const calls = model.calls;
      expect(await service.recover()).toEqual({ turns: [{ turnKey: turnKey(turnOf()), status: "completed" }], counts: { completed: 1 } });
      expect(notes.writes).toEqual([{ noteId: "note-7", body: NEW_BODY }]);
      expect(model.calls).toBe(calls + 1);
      expect(await service.recover()).toEqual({ turns: [], counts: {} });
    });

    it("recover rejects invalid options as invalid_input and recovers nothing", async () => {
      const { service } = serviceHarness({ store: await open() });
      for (const options of [{ limit: 0 }, { limit: 1001 }, { limit: 1.5 }, { signal: "stop" }, { other: 1 }]) {
        const error = await rejection(service.recover(options as never));
        expect(error, JSON.stringify(options)).toBeInstanceOf(TurnServiceError);
        expect((error as TurnServiceError).code).toBe("invalid_input");
      }
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
      expect(view.status === "found" ? view.outcome : undefined).toEqual({ status: answer.status, answer: answer.answer, calls: answer.calls, mutation: answer.mutation });
      expect(view.status === "found" ? view.mutation?.result : "absent").toBeUndefined();
      expect(model.calls).toBe(calls);
    });

    it("a provider outage before any effect does not use up the key: failed retryable, then the same key's retry completes with one write", async () => {
      const store = await open();
      const outage = { calls: 2 };
      const warnings: [string, Readonly<Record<string, unknown>>][] = [];
      const responder = noteResponder();
      const { service, notes, model } = serviceHarness({
        store,
        // The provider is down for its first two calls: each throws before any tool runs.
        responder: (messages) => {
          if (outage.calls > 0) {
            outage.calls -= 1;
            throw new Error("503 from the provider: upstream unavailable (the note says Buy milk)");
          }
          return responder(messages);
        },
        service: { logger: { warn: (message, fields) => void warnings.push([message, fields]) } },
      });
      const first = await service.submit({ turn: turnOf() });
      expect(first).toEqual({ status: "failed", code: "run_failed", error: "Error", retryable: true, attempts: 1, turnKey: turnKey(turnOf()), replayed: false });
      expect(notes.entries, "no tool ran").toEqual([]);
      // The cause reached the host's logger: class and code, never the provider's text.
      // LangChain wraps what the model hook threw in its MiddlewareError: the chain is logged whole.
      expect(warnings).toEqual([
        ["turn run failed", { turnKey: turnKey(turnOf()), code: "run_failed", retryable: true, attempts: 1, error: { name: "MiddlewareError", cause: { name: "Error" } } }],
      ]);
      expect(JSON.stringify(warnings)).not.toContain("Buy milk");
      const view = await service.get(turnKey(turnOf()));
      expect(view.status === "found" ? [view.state, view.outcome] : view).toEqual(["failed", { status: "failed", code: "run_failed", error: "Error", retryable: true, attempts: 1 }]);

      const second = await service.submit({ turn: turnOf() });
      expect(second, "the second attempt fails too, still retryable").toMatchObject({ status: "failed", retryable: true, attempts: 2, replayed: false });
      const third = completed(await service.submit({ turn: turnOf() }));
      expect(third.replayed).toBe(false);
      expect(notes.writes).toEqual([{ noteId: "note-7", body: NEW_BODY }]);
      expect(model.calls, "two failed calls, then read, write and answer").toBe(5);
      // Finished for good: a further retry replays the completed turn.
      expect(await service.submit({ turn: turnOf() })).toEqual({ ...third, replayed: true });
      expect(notes.writes).toHaveLength(1);
    });

    it("a turn that keeps failing before any effect stops after maxAttempts: retryable false, and the key replays the failure", async () => {
      const store = await open();
      const { service, notes, model } = serviceHarness({
        store,
        responder: () => {
          throw new TypeError("provider down");
        },
        service: { maxAttempts: 2, logger: { warn: () => undefined } },
      });
      expect(await service.submit({ turn: turnOf() })).toMatchObject({ status: "failed", retryable: true, attempts: 1 });
      const last = await service.submit({ turn: turnOf() });
      expect(last).toEqual({ status: "failed", code: "run_failed", error: "TypeError", retryable: false, attempts: 2, turnKey: turnKey(turnOf()), replayed: false });
      expect(await service.submit({ turn: turnOf() })).toEqual({ ...last, replayed: true });
      expect(model.calls).toBe(2);
      expect(notes.entries).toEqual([]);
    });

    it("a failure after the mutation was claimed is final: no retryable, the retry replays it and writes nothing more", async () => {
      const store = await open();
      let failAfterWrite = true;
      const responder = noteResponder();
      const { service, notes } = serviceHarness({
        store,
        responder: (messages) => {
          const done = messages.some((message) => ToolMessage.isInstance(message) && message.name === "edit_note");
          if (done && failAfterWrite) {
            failAfterWrite = false;
            throw new Error("the provider failed after the write");
          }
          return responder(messages);
        },
        service: { logger: { warn: () => undefined } },
      });
      const failed = await service.submit({ turn: turnOf() });
      expect(failed).toMatchObject({ status: "failed", code: "run_failed", mutation: { state: "complete" } });
      expect(failed).not.toHaveProperty("retryable");
      expect(await service.submit({ turn: turnOf() })).toEqual({ ...failed, replayed: true });
      expect(notes.writes).toHaveLength(1);
    });

    it("a moderation provider outage is failed retryable: the retry moderates again and runs the turn", async () => {
      const store = await open();
      let down = true;
      const { service, notes } = serviceHarness({
        store,
        service: {
          logger: { warn: () => undefined },
          moderate: () => {
            if (down) throw new Error("moderation unavailable");
            return true;
          },
        },
      });
      expect(await service.submit({ turn: turnOf() })).toMatchObject({ status: "failed", code: "moderation_failed", retryable: true, attempts: 1 });
      down = false;
      completed(await service.submit({ turn: turnOf() }));
      expect(notes.writes).toHaveLength(1);
    });

    it("a completed answer shows an ambiguous write, and follows the claim once an operator reconciled it: never 'in progress' for good", async () => {
      const store = await open();
      let crash = true;
      const { service, notes } = serviceHarness({
        store,
        hooks: {
          beforeWrite: () => {
            // The write service fails without saying whether it wrote: the claim is left unknown.
            if (crash) {
              crash = false;
              throw new Error("connection reset by the write service");
            }
          },
        },
      });
      const answer = completed(await service.submit({ turn: turnOf() }));
      expect(answer.calls.find((call) => call.tool === "edit_note")?.refusal).toBe("mutation_unknown");
      expect(answer.mutation).toEqual({ state: "unknown", toolName: "edit_note", toolCallId: "w1" });
      // The operator settles it as the write service reports it (here: completed, with its result).
      expect(await store.reconcileMutation({ turnKey: turnKey(turnOf()), resolution: "completed", result: { content: "saved", status: "success" }, operatorRef: "OPS-7" })).toMatchObject({ reconciled: true });
      const retried = completed(await service.submit({ turn: turnOf() }));
      expect(retried.replayed).toBe(true);
      expect(retried.mutation).toEqual({ state: "complete", toolName: "edit_note", toolCallId: "w1" });
      const view = await service.get(turnKey(turnOf()));
      expect(view.status === "found" ? view.outcome : undefined).toMatchObject({ status: "completed", mutation: { state: "complete" } });
      expect(notes.writes).toEqual([]);
    });

    it("a mutation that times out is unknown in the completed answer; confirm settles it (reconcile --auto), and the turn then answers the write complete: one write", async () => {
      const store = await open();
      const notes = new NotesService();
      const hung = deferred();
      const confirm: ConfirmClaim = () => (notes.writes.length > 0 ? { outcome: "completed", result: "Saved" } : { outcome: "no-effect" });
      const { service } = serviceHarness({
        store,
        notes,
        // The write commits, then the write service never answers: the body outlasts timeoutMs.
        hooks: { afterWrite: () => hung.promise },
        policies: { ...NOTE_POLICIES, edit_note: { kind: "mutation", timeoutMs: 20, confirm } },
        guardrailLogger: { warn: () => undefined },
      });
      const answer = completed(await service.submit({ turn: turnOf() }));
      expect(answer.calls.find((call) => call.tool === "edit_note")?.refusal).toBe("tool_timeout");
      expect(answer.mutation).toEqual({ state: "unknown", toolName: "edit_note", toolCallId: "w1" });
      expect(notes.writes).toHaveLength(1);

      // Nothing runs the call again on its own: the tool's confirm settles the claim from the write service's record.
      const output: string[] = [];
      const sink = { out: (text: string) => void output.push(text), err: (text: string) => void output.push(text) };
      expect(await reconcileAuto(store, (name) => (name === "edit_note" ? confirm : undefined), sink)).toBe(EXIT.ok);
      expect(await store.listUnresolved()).toEqual([]);
      expect((await store.readAudit({ turnKey: turnKey(turnOf()) })).filter((event) => event.decision === "reconciled")).toMatchObject([
        { action: "completed", operatorRef: "confirm:edit_note" },
      ]);
      const retried = completed(await service.submit({ turn: turnOf() }));
      expect(retried.replayed).toBe(true);
      expect(retried.mutation).toEqual({ state: "complete", toolName: "edit_note", toolCallId: "w1" });
      const view = await service.get(turnKey(turnOf()));
      expect(view.status === "found" ? view.mutation?.state : undefined).toBe("complete");
      expect(notes.writes).toHaveLength(1);
      hung.resolve();
    });

    it("an approval request is not decidable before its pause is durable: decide answers running and records nothing", async () => {
      const store = await open();
      const early: unknown[] = [];
      let decideEarly: ((approvalId: string) => Promise<unknown>) | undefined;
      // The guardrails' store: right after the request is stored, before the run interrupts and
      // LangGraph writes the checkpoint, the turn's own principal tries to decide it.
      const agentStore = new Proxy(store, {
        get(target, property, receiver) {
          const value: unknown = Reflect.get(target, property, receiver);
          if (typeof value !== "function") return value;
          const method = value as (...args: unknown[]) => unknown;
          if (property !== "requestApproval") return method.bind(target);
          return async (...args: unknown[]) => {
            const record = (await method.apply(target, args)) as { approvalId: string };
            early.push(await decideEarly?.(record.approvalId));
            return record;
          };
        },
      });
      const { service, notes } = serviceHarness({ store, agentStore, approvals: true });
      decideEarly = (approvalId) => service.decide({ approvalId, principal: "alice", decision: { decision: "approve" } });
      const paused = awaiting(await service.submit({ turn: turnOf() }));
      expect(early).toEqual([{ status: "running", turnKey: turnKey(turnOf()) }]);
      const approvalId = paused.approvals[0]?.approvalId ?? "";
      expect((await store.getApproval(approvalId))?.status, "the early decision recorded nothing").toBe("pending");
      expect((await store.readAudit({ approvalId })).map((event) => event.action)).toEqual(["requested"]);
      expect(notes.writes).toEqual([]);
      // Once the pause is stored, the same decision is taken and the turn resumes: one write.
      decideEarly = undefined;
      completed(await service.decide({ approvalId, principal: "alice", decision: { decision: "approve" } }));
      expect(notes.writes).toEqual([{ noteId: "note-7", body: NEW_BODY }]);
    });
    for (const approvalFormat of APPROVAL_FORMATS) {
      it(`${approvalFormat} approval format: approve resumes the turn to exactly one write`, async () => {
        const store = await open();
        const { service, notes } = serviceHarness({ store, approvals: true, approvalFormat });
        const paused = awaiting(await service.submit({ turn: turnOf() }));
        expect(paused.approvals).toEqual([
          {
            approvalId: expect.stringMatching(/^[0-9a-f]{64}$/) as unknown,
            tool: "edit_note",
            toolCallId: "w1",
            args: { noteId: "note-7", body: NEW_BODY },
            guardrails: ["approval"],
            reason: expect.any(String) as unknown,
          },
        ]);
        expect(await store.listApprovals({ turnKey: turnKey(turnOf()), status: "pending" })).toHaveLength(1);
        const approvalId = paused.approvals[0]?.approvalId ?? "";
        const resumed = completed(await service.decide({ approvalId, principal: "alice", decision: { decision: "approve" } }));
        expect(resumed.calls.map((call) => [call.callId, call.status])).toEqual([
          ["r1", "success"],
          ["w1", "success"],
        ]);
        expect(notes.writes).toEqual([{ noteId: "note-7", body: NEW_BODY }]);
        expect((await store.getApproval(approvalId))?.status).toBe("applied");
        expect(await service.submit({ turn: turnOf() })).toEqual({ ...resumed, replayed: true });
        expect(notes.writes).toHaveLength(1);
      });

      it(`${approvalFormat} approval format: reject resumes the turn and writes nothing`, async () => {
        const store = await open();
        const { service, notes } = serviceHarness({ store, approvals: true, approvalFormat });
        const paused = awaiting(await service.submit({ turn: turnOf() }));
        const approvalId = paused.approvals[0]?.approvalId ?? "";
        const resumed = completed(await service.decide({ approvalId, principal: "alice", decision: { decision: "reject", message: "Not today." } }));
        expect(resumed.calls.find((call) => call.callId === "w1")).toMatchObject({ status: "error", refusal: "approval_rejected" });
        expect(notes.writes).toEqual([]);
        expect(notes.entries).not.toContain("edit_note");
      });

      it(`${approvalFormat} approval format: edit resumes the turn and writes the edited arguments`, async () => {
        const store = await open();
        const { service, notes } = serviceHarness({ store, approvals: true, approvalFormat });
        const paused = awaiting(await service.submit({ turn: turnOf() }));
        const approvalId = paused.approvals[0]?.approvalId ?? "";
        const edit = { decision: "edit", args: { noteId: "note-7", body: "Buy soy milk" } } as const;
        completed(await service.decide({ approvalId, principal: "alice", decision: edit }));
        expect(notes.writes).toEqual([{ noteId: "note-7", body: "Buy soy milk" }]);
        expect((await store.getApproval(approvalId))?.status).toBe("applied");
      });

      it(`${approvalFormat} approval format: a decided edit that fails the tool's schema runs nothing, closes its request and is named in the completed answer`, async () => {
        const store = await open();
        const { service, notes } = serviceHarness({ store, approvals: true, approvalFormat });
        const paused = awaiting(await service.submit({ turn: turnOf() }));
        const approvalId = paused.approvals[0]?.approvalId ?? "";
        // `body` is missing: the edit fails the tool's parse, the first check a model's call meets.
        const edit = { decision: "edit", args: { noteId: "note-7" } } as const;
        const answer = completed(await service.decide({ approvalId, principal: "alice", decision: edit }));
        expect(turnHttpReply(answer).status).toBe(200);
        expect(answer.calls.find((call) => call.callId === "w1")).toEqual({
          tool: "edit_note",
          callId: "w1",
          status: "error",
          refusal: "invalid_arguments",
          approvalId,
        });
        expect(answer.mutation, "the write slot stays free").toBeUndefined();
        expect(notes.entries).not.toContain("edit_note");
        expect(notes.writes).toEqual([]);
        // The decision stands (the person's, recorded first), is never applied, and cannot be taken back.
        expect((await store.getApproval(approvalId))?.status).toBe("edited");
        const trail = await store.readAudit({ approvalId });
        expect(trail.filter((event) => event.decision === "refused").map((event) => [event.toolCallId, event.code])).toEqual([["w1", "invalid_arguments"]]);
        expect(trail.map((event) => event.action)).not.toContain("applied");
        expect(await service.decide({ approvalId, principal: "alice", decision: { decision: "approve" } })).toEqual({
          status: "not_pending",
          approvalStatus: "edited",
        });
        expect(await service.submit({ turn: turnOf() })).toEqual({ ...answer, replayed: true });
        expect(notes.writes).toEqual([]);
      });

      it(`${approvalFormat} approval format: a pause on two requests waits for both, then runs only the approved one`, async () => {
        const store = await open();
        const { service, notes } = serviceHarness({
          store,
          approvals: true,
          approvalTools: ["read_note", "edit_note"],
          approvalFormat,
          responder: twoReadsResponder(),
        });
        const paused = awaiting(await service.submit({ turn: turnOf() }));
        expect(paused.approvals.map((approval) => [approval.toolCallId, approval.args])).toEqual([
          ["r1", { noteId: "note-7" }],
          ["r2", { noteId: "note-8" }],
        ]);
        const [first, second] = paused.approvals.map((approval) => approval.approvalId);
        // One decision of two: nothing resumes, and the pause lists only the other request.
        const half = awaiting(await service.decide({ approvalId: second ?? "", principal: "alice", decision: { decision: "reject" } }));
        expect(half.approvals.map((approval) => approval.toolCallId)).toEqual(["r1"]);
        expect(notes.entries).toEqual([]);
        // Both decided: the run resumes, reads note-7 only, and pauses on the write.
        const write = awaiting(await service.decide({ approvalId: first ?? "", principal: "alice", decision: { decision: "approve" } }));
        expect(notes.reads).toEqual(["note-7"]);
        expect(write.approvals.map((approval) => approval.toolCallId)).toEqual(["w1"]);
        const done = completed(await service.decide({ approvalId: write.approvals[0]?.approvalId ?? "", principal: "alice", decision: { decision: "approve" } }));
        expect(done.calls.map((call) => [call.callId, call.status, call.refusal])).toEqual([
          ["r1", "success", undefined],
          ["r2", "error", "approval_rejected"],
          ["w1", "success", undefined],
        ]);
        expect(notes.writes).toEqual([{ noteId: "note-7", body: NEW_BODY }]);
      });
    }

    it("a pause in LangChain's approval format lists the same approvals as one in the package's format", async () => {
      const ours = serviceHarness({ store: await open(), approvals: true });
      const langchain = serviceHarness({ store: await open(), approvals: true, approvalFormat: "langchain" });
      const expected = awaiting(await ours.service.submit({ turn: turnOf() }));
      const answer = awaiting(await langchain.service.submit({ turn: turnOf() }));
      // The same turn, tool and call on two stores: the same request ids too.
      expect(answer).toEqual(expected);
      expect(await langchain.service.get(turnKey(turnOf()))).toMatchObject({ status: "found", state: "awaiting_approval", outcome: { approvals: expected.approvals } });
    });

    it("a decision whose resume failed: get lists no request as pending, and the next submit resumes to one write", async () => {
      const store = await open();
      const checkpointer = new FlakyCheckpointer();
      const { service, notes } = serviceHarness({ store, approvals: true, checkpointer });
      const paused = awaiting(await service.submit({ turn: turnOf() }));
      const approvalId = paused.approvals[0]?.approvalId ?? "";
      // The decision is recorded; reading the pause to resume it fails.
      checkpointer.failing = true;
      expect(await rejection(service.decide({ approvalId, principal: "alice", decision: { decision: "approve" } }))).toMatchObject({
        message: "the checkpointer is unavailable",
      });
      expect((await store.getApproval(approvalId))?.status).toBe("approved");
      const view = await service.get(turnKey(turnOf()));
      expect(view).toMatchObject({ status: "found", state: "awaiting_approval" });
      expect(view.status === "found" ? view.outcome : undefined).toEqual({ status: "awaiting_approval", approvals: [] });
      expect(notes.writes).toEqual([]);
      completed(await service.submit({ turn: turnOf() }));
      expect(notes.writes).toEqual([{ noteId: "note-7", body: NEW_BODY }]);
    });

    for (const includeToolResults of [false, true]) {
      it(`a run that fails after its write completed is stored failed with the claim complete, and replays (includeToolResults: ${String(includeToolResults)})`, async () => {
        const store = await open();
        const { service, notes, model } = serviceHarness({ store, responder: failsAfterWrite(), service: { includeToolResults } });
        const mutation = {
          state: "complete",
          toolName: "edit_note",
          toolCallId: "w1",
          ...(includeToolResults ? { result: { content: "Saved", status: "success" } } : {}),
        };
        const answer = failed(await service.submit({ turn: turnOf() }));
        expect(answer).toEqual({ status: "failed", code: "run_failed", error: "RangeError", mutation, turnKey: turnKey(turnOf()), replayed: false });
        expect(notes.writes).toHaveLength(1);
        const calls = model.calls;
        expect(await service.submit({ turn: turnOf() })).toEqual({ ...answer, replayed: true });
        expect(model.calls).toBe(calls);
        const view = await service.get(turnKey(turnOf()));
        expect(view).toMatchObject({ status: "found", state: "failed", mutation });
        expect(view.status === "found" ? view.outcome : undefined).toEqual({ status: "failed", code: "run_failed", error: "RangeError", mutation });
        expect(notes.writes).toHaveLength(1);
      });
    }
  });
}

describe("turn service and its checkpointer", () => {
  const agentWith = (checkpointer: MemorySaver | undefined) =>
    createAgent({ model: new ScriptedModel([{ content: "hi" }]), tools: [], ...(checkpointer === undefined ? {} : { checkpointer }) });

  it("an agent without a checkpointer is a ConfigurationError naming it", () => {
    const build = () => createTurnService({ agent: agentWith(undefined), store: new InMemoryGuardrailStore(), moderate: () => true });
    expect(build).toThrow(ConfigurationError);
    expect(build).toThrow(/needs an agent compiled with a checkpointer/);
  });

  it("an in-memory checkpointer is a ConfigurationError unless allowed for tests", () => {
    const build = (allowInMemoryCheckpointer?: boolean) =>
      createTurnService({
        agent: agentWith(new MemorySaver()),
        store: new InMemoryGuardrailStore(),
        moderate: () => true,
        ...(allowInMemoryCheckpointer === undefined ? {} : { allowInMemoryCheckpointer }),
      });
    expect(() => build()).toThrow(ConfigurationError);
    expect(() => build()).toThrow(/MemorySaver.*allowInMemoryCheckpointer: true/);
    expect(() => build(false)).toThrow(ConfigurationError);
    expect(build(true)).toHaveProperty("submit");
  });

  it("a durable checkpointer needs no flag", () => {
    const folder = mkdtempSync(join(tmpdir(), "arkah-turns-saver-"));
    const saver = SqliteSaver.fromConnString(join(folder, "checkpoints.sqlite"));
    try {
      const agent = createAgent({ model: new ScriptedModel([{ content: "hi" }]), tools: [], checkpointer: saver });
      expect(createTurnService({ agent, store: new InMemoryGuardrailStore(), moderate: () => true })).toHaveProperty("decide");
    } finally {
      saver.db.close();
      rmSync(folder, { recursive: true, force: true });
    }
  });
});

describe("turn service and the user's segment label", () => {
  const buildAgent = (userMessageLabel: string) =>
    createAgent({
      model: new ScriptedModel([{ content: "Noted." }]),
      tools: turnTools(new NotesService()),
      middleware: [createDocumentGuardrails({ store: new InMemoryGuardrailStore(), userMessageLabel, authorize: () => true, tools: NOTE_POLICIES })],
      checkpointer: new MemorySaver(),
    });

  it("userMessageLabel is set once, on the guardrails: the service reads it from the agent, and runs the turn from that segment", async () => {
    const store = new InMemoryGuardrailStore();
    const agent = createAgent({
      model: new ScriptedModel([{ content: "Noted." }]),
      tools: turnTools(new NotesService()),
      middleware: [createDocumentGuardrails({ store, userMessageLabel: "message", authorize: () => true, tools: NOTE_POLICIES })],
      checkpointer: new MemorySaver(),
    });
    const turns = createTurnService({ agent, store, moderate: () => true, allowInMemoryCheckpointer: true });
    const turn = turnOf({ segments: [{ label: "message", content: "Hello." }] });
    expect(completed(await turns.submit({ turn }))).toMatchObject({ answer: "Noted.", calls: [] });
  });

  it("a service userMessageLabel that is not the guardrails' is a ConfigurationError; the same one is accepted", () => {
    const build = (userMessageLabel: string) =>
      createTurnService({ agent: buildAgent("message"), store: new InMemoryGuardrailStore(), moderate: () => true, allowInMemoryCheckpointer: true, userMessageLabel });
    expect(() => build("user")).toThrow(ConfigurationError);
    expect(() => build("user")).toThrow(/userMessageLabel "user" is not the agent's createDocumentGuardrails userMessageLabel "message"/);
    expect(build("message")).toHaveProperty("submit");
  });
});

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
