/**
 * A completed turn's refusals come from its whole audit trail, matched exactly, and are never
 * silently dropped. Through the turn service and the real `createAgent` loop, on the in-memory
 * and SQLite stores:
 * - each result is bound to the event that ended its own execution (the execution id the pipeline
 *   stamps on both): a call id the model reused whose later execution has no ending event, or a
 *   trail longer than one `readAudit` page, still reports each refusal on its own call;
 * - a trail the store cannot read fails the finish (the caller gets the store's error, the turn
 *   stays running, its write settled) and `recover` later stores the outcome with its refusals;
 * - a trail the store answers corrupt surfaces as `StoreContractError`, nothing stored.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ToolMessage } from "@langchain/core/messages";
import type { ClientTool, ServerTool } from "@langchain/core/tools";
import { MemorySaver } from "@langchain/langgraph";
import { createAgent, tool } from "langchain";
import { afterAll, describe, expect, it } from "vitest";
import { z } from "zod";
import {
  createDocumentGuardrails,
  createTurnService,
  InMemoryGuardrailStore,
  StoreContractError,
  turnHttpErrorReply,
  turnKey,
  type AuditEvent,
  type GuardrailStore,
  type TurnAnswer,
  type TurnOutcome,
} from "arkah-agent-guardrails";
import type { AuditQuery, StoredAuditEvent } from "arkah-agent-guardrails/store";
import { SqliteGuardrailStore } from "arkah-agent-guardrails/sqlite";
import { ScriptedModel, type ScriptStep } from "arkah-agent-guardrails/testing";
import { ForwardingStore, rejection } from "../support/fixtures.js";
import { NOTE_POLICIES, NotesService } from "../security/support.js";
import { TestClock, turnOf, turnTools } from "./support.js";

const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

const STORES: readonly (readonly [string, (now: () => Date) => GuardrailStore])[] = [
  ["memory", (now) => new InMemoryGuardrailStore({ now })],
  [
    "SQLite",
    (now) => {
      const dir = mkdtempSync(join(tmpdir(), "arkah-outcome-trail-"));
      dirs.push(dir);
      return SqliteGuardrailStore.open({ path: join(dir, "guardrails.db"), now });
    },
  ],
];

const LEASE_MS = 200;

/** The note is read, then two writes in one step: the first runs, the second is refused `single_mutation`. */
const TWO_WRITES: readonly ScriptStep[] = [
  { toolCalls: [{ id: "r1", name: "read_note", args: { noteId: "note-7" } }] },
  {
    toolCalls: [
      { id: "w1", name: "edit_note", args: { noteId: "note-7", body: "Buy oat milk" } },
      { id: "w2", name: "edit_note", args: { noteId: "note-7", body: "Buy soy milk" } },
    ],
  },
  { content: "Done." },
];

/** The calls of `TWO_WRITES`, as a completed outcome reports them. */
const TWO_WRITES_CALLS = [
  { tool: "read_note", callId: "r1", status: "success" },
  { tool: "edit_note", callId: "w1", status: "success" },
  { tool: "edit_note", callId: "w2", status: "error", refusal: "single_mutation" },
];

/**
 * A turn service over the notes tools and `fetch_page` (a source read whose body answers an error
 * `ToolMessage` with the page's text). The guardrails use `store`; the service `serviceStore`
 * (default `store`): a view of it that fails the service's own reads.
 */
function trailService(store: GuardrailStore, script: readonly ScriptStep[], serviceStore: GuardrailStore = store) {
  const notes = new NotesService();
  const model = new ScriptedModel(script);
  const fetchPage = tool(
    ({ url }, config) => {
      notes.entries.push("fetch_page");
      const id = (config.toolCall as { readonly id?: string } | undefined)?.id ?? "";
      return new ToolMessage({ content: `the server said no to ${url}`, status: "error", tool_call_id: id, name: "fetch_page" });
    },
    { name: "fetch_page", description: "Fetch a web page.", schema: z.object({ url: z.string() }) },
  );
  const agent = createAgent({
    model,
    tools: [...turnTools(notes), fetchPage] as (ClientTool | ServerTool)[],
    middleware: [
      createDocumentGuardrails({ store, userMessageLabel: "user", authorize: () => true, tools: { ...NOTE_POLICIES, fetch_page: { kind: "source-read" } } }),
    ],
    checkpointer: new MemorySaver(),
  });
  const service = createTurnService({
    agent,
    store: serviceStore,
    moderate: () => true,
    leaseMs: LEASE_MS,
    allowInMemoryCheckpointer: true,
    logger: { warn: () => undefined },
  });
  return { service, notes, model };
}

function completed(answer: TurnAnswer): Extract<TurnOutcome, { status: "completed" }> {
  if (answer.status !== "completed") throw new Error(`expected a completed turn, got ${answer.status}`);
  return answer;
}

/** The guardrails' view of the store that drops the ending event of the `nth` execution of call `callId` (counted from 1). */
class DropsEnding extends ForwardingStore {
  #seen = 0;
  constructor(
    inner: GuardrailStore,
    readonly callId: string,
    readonly nth: number,
  ) {
    super(inner);
  }
  override appendAudit(event: AuditEvent): Promise<void> {
    if (event.toolCallId === this.callId && (event.decision === "executed" || event.decision === "refused")) {
      this.#seen += 1;
      if (this.#seen === this.nth) return Promise.resolve();
    }
    return this.inner.appendAudit(event);
  }
}

/** The service's view of the store whose turn-trail reads fail `failures` times, then answer. */
class TrailReadFails extends ForwardingStore {
  failures: number;
  constructor(inner: GuardrailStore, failures: number) {
    super(inner);
    this.failures = failures;
  }
  override readAudit(query?: AuditQuery): Promise<StoredAuditEvent[]> {
    if (query?.turnKey !== undefined && this.failures > 0) {
      this.failures -= 1;
      return Promise.reject(new Error("the audit table is locked"));
    }
    return this.inner.readAudit(query);
  }
}

/** The service's view of the store whose turn-trail reads answer `corrupt` in place of the trail. */
class TrailReadCorrupt extends ForwardingStore {
  constructor(
    inner: GuardrailStore,
    readonly corrupt: (trail: StoredAuditEvent[]) => unknown,
  ) {
    super(inner);
  }
  override async readAudit(query?: AuditQuery): Promise<StoredAuditEvent[]> {
    const trail = await this.inner.readAudit(query);
    return query?.turnKey === undefined ? trail : (this.corrupt(trail) as StoredAuditEvent[]);
  }
}

for (const [label, open] of STORES) {
  describe(`a completed turn's refusals, matched exactly and never dropped (${label} store)`, () => {
    it("a call id reused in a later step whose second execution has no ending event: the refusal stays on the first, the second takes none", async () => {
      const store = open(new TestClock().now);
      // c1 is refused (no url) in the first step, then, reused, fetched in the second: the server's
      // error. That fetch's ending event is lost. By position, the newest c1 result met the oldest
      // recorded execution: the fetch reported invalid_arguments, the refused call nothing.
      const { service, notes } = trailService(new DropsEnding(store, "c1", 2), [
        { toolCalls: [{ id: "c1", name: "fetch_page", args: {} }] },
        { toolCalls: [{ id: "c1", name: "fetch_page", args: { url: "https://example.com/" } }] },
        { content: "Done." },
      ], store);
      const answer = completed(await service.submit({ turn: turnOf() }));
      expect(notes.entries, "the second c1 ran, once").toEqual(["fetch_page"]);
      expect(answer.calls).toEqual([
        { tool: "fetch_page", callId: "c1", status: "error", refusal: "invalid_arguments" },
        { tool: "fetch_page", callId: "c1", status: "error" },
      ]);
    });

    it("a trail read that fails fails the finish: the turn stays running, its write settled, and recover stores the outcome with its refusal", async () => {
      const clock = new TestClock();
      const store = open(clock.now);
      const failing = new TrailReadFails(store, 1);
      const { service, notes, model } = trailService(store, TWO_WRITES, failing);
      const error = await rejection(service.submit({ turn: turnOf() }));
      expect(error, "the store's own error").toMatchObject({ message: "the audit table is locked" });
      expect(turnHttpErrorReply(error, { warn: () => undefined }), "an HTTP route answers 500").toEqual({ status: 500, body: { error: "internal" } });
      const key = turnKey(turnOf());
      expect((await store.getTurn(key))?.state, "not stored as completed").toBe("running");
      expect(await store.getMutation(key), "the write stays settled").toMatchObject({ state: "complete", toolCallId: "w1" });
      expect(await service.recover(), "the lease has not expired").toEqual({ turns: [], counts: {} });

      clock.advance(LEASE_MS);
      expect(await service.recover()).toEqual({ turns: [{ turnKey: key, status: "completed" }], counts: { completed: 1 } });
      const view = await service.get(key);
      expect(view).toMatchObject({ status: "found", state: "completed", outcome: { status: "completed", calls: TWO_WRITES_CALLS } });
      expect(await service.submit({ turn: turnOf() })).toMatchObject({ status: "completed", replayed: true, calls: TWO_WRITES_CALLS });
      expect(notes.writes, "nothing ran again").toEqual([{ noteId: "note-7", body: "Buy oat milk" }]);
      expect(model.calls, "recovered from the checkpoint: the model was not asked again").toBe(3);
    });

    for (const [corruption, corrupt] of [
      ["an event that is no audit event", (trail: StoredAuditEvent[]) => [...trail, { seq: "x", decision: "refused" }]],
      ["another turn's event", (trail: StoredAuditEvent[]) => trail.map((event, index) => (index === 0 ? { ...event, turnKey: "e".repeat(64) } : event))],
      ["events out of order", (trail: StoredAuditEvent[]) => [...trail].reverse()],
    ] as const) {
      it(`a trail read answering ${corruption} surfaces as StoreContractError; nothing is stored`, async () => {
        const store = open(new TestClock().now);
        const { service } = trailService(store, TWO_WRITES, new TrailReadCorrupt(store, corrupt));
        const error = await rejection(service.submit({ turn: turnOf() }));
        expect(StoreContractError.isInstance(error), String(error)).toBe(true);
        expect((await store.getTurn(turnKey(turnOf())))?.state).toBe("running");
      });
    }
  });
}

// Every store's readAudit({ turnKey, afterSeq, limit }) paging is the conformance kit's; the
// service's reading of every page is shown on one (10 000 appends take SQLite tens of seconds).
describe("a completed turn's refusals past the first readAudit page (memory store)", () => {
  it("a turn whose trail is longer than one readAudit page still reports its refusal", async () => {
    const store = new InMemoryGuardrailStore({ now: new TestClock().now });
    // 10 000 events of the turn before its run (a store's default page): the refusal is the 10 001st or later.
    const key = turnKey(turnOf());
    for (let index = 0; index < 10_000; index++) {
      await store.appendAudit({ at: "2031-02-03T04:05:06.789Z", decision: "verdict", turnKey: key, scopeId: "note-7", guardrail: "filler", action: "observe" });
    }
    const { service, notes } = trailService(store, TWO_WRITES);
    const answer = completed(await service.submit({ turn: turnOf() }));
    expect(answer.calls).toEqual(TWO_WRITES_CALLS);
    expect(notes.writes, "the step's first write ran, once").toEqual([{ noteId: "note-7", body: "Buy oat milk" }]);
  });
});
