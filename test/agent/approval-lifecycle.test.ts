/**
 * The approval lifecycle's terminal states through the real `createAgent` loop, on the in-memory
 * and the SQLite store: a decided request orphaned before its call ran (the resuming worker died)
 * refuses the call `approval_orphaned` whether the orphaning is seen before the claim (no claim is
 * taken) or only when applying it (the claim is released: the body never started), the tool body
 * never runs, and the turn's one write stays available to a later call. A request's history is
 * read back by its approval id.
 *
 * Side effects are counted by the tool (`service.writes`), never by handler calls.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { HumanMessage } from "@langchain/core/messages";
import { Command, MemorySaver } from "@langchain/langgraph";
import { createAgent } from "langchain";
import { afterAll, describe, expect, it } from "vitest";
import {
  createDocumentGuardrails,
  digest,
  InMemoryGuardrailStore,
  requireApproval,
  turnKey,
  type GuardrailStore,
  type TurnInput,
} from "arkah-agent-guardrails";
import { SqliteGuardrailStore } from "arkah-agent-guardrails/sqlite";
import type { ApplyApprovalInput } from "arkah-agent-guardrails/store";
import { ScriptedModel, type ScriptStep } from "arkah-agent-guardrails/testing";
import {
  admit,
  DocumentService,
  documentToolFingerprint,
  documentTools,
  ForwardingStore,
  outcomeOf,
  read,
  rename,
  TOOL_POLICIES,
  turnInput,
  USER_MESSAGE,
} from "../support/fixtures.js";

const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

const STORES: readonly (readonly [string, () => GuardrailStore & { close?: () => void }])[] = [
  ["the in-memory store", () => new InMemoryGuardrailStore()],
  [
    "the SQLite store",
    () => {
      const dir = mkdtempSync(join(tmpdir(), "arkah-lifecycle-"));
      dirs.push(dir);
      return SqliteGuardrailStore.open({ path: join(dir, "guardrails.db") });
    },
  ],
];

/** An approval decided long ago: far before any sweep's cut-off. */
const LONG_AGO = "2020-01-01T00:00:00.000Z";
const SWEEP = { decidedBefore: "2999-01-01T00:00:00.000Z" };

function approvalIdOf(input: TurnInput, call: { id: string; name: string; args: unknown }, execution = 0): string {
  return digest({
    kind: "arkah.approval",
    v: 1,
    turnKey: turnKey(input),
    toolName: call.name,
    toolFingerprint: documentToolFingerprint(call.name),
    toolCallId: call.id,
    argsDigest: digest(call.args),
    execution,
  });
}

/** Orphans every decided request just before the middleware applies the first one: the sweep wins that race. */
class SweptBeforeApply extends ForwardingStore {
  swept = false;
  override async applyApproval(input: ApplyApprovalInput): Promise<boolean> {
    if (!this.swept) {
      this.swept = true;
      await this.inner.orphanApprovals(SWEEP);
    }
    return this.inner.applyApproval(input);
  }
}

function agentOf(middlewareStore: GuardrailStore, input: TurnInput, service: DocumentService, script: readonly ScriptStep[]) {
  const agent = createAgent({
    model: new ScriptedModel(script),
    tools: documentTools(service).all,
    middleware: [
      createDocumentGuardrails({
        input,
        store: middlewareStore,
        userMessageLabel: "user",
        authorize: () => true,
        tools: TOOL_POLICIES,
        guardrails: [requireApproval({ tools: ["rename_document"] })],
        logger: { warn: () => undefined },
      }),
    ],
    checkpointer: new MemorySaver(),
  });
  const config = { configurable: { thread_id: "lifecycle" } };
  return {
    start: () => agent.invoke({ messages: [new HumanMessage(USER_MESSAGE)] }, config),
    resume: (value: unknown) => agent.invoke(new Command({ resume: value }), config),
  };
}

/** read r1, rename w1 (paused for approval), then, after w1's answer, rename w2, then done. */
const SCRIPT: readonly ScriptStep[] = [{ toolCalls: [read("r1")] }, { toolCalls: [rename("w1")] }, { toolCalls: [rename("w2")] }, { content: "done" }];

for (const [label, open] of STORES) {
  describe(`an orphaned approval never runs its call: ${label}`, () => {
    it("orphaned before the stale worker resumes: refused approval_orphaned before any claim; nothing runs; the turn's write stays open", async () => {
      const store = open();
      const input = turnInput();
      const service = new DocumentService();
      await admit(store, input);
      const run = agentOf(store, input, service, SCRIPT);
      const paused = await run.start();
      expect(paused.__interrupt__?.length, "the rename pauses for approval").toBe(1);
      const w1 = approvalIdOf(input, rename("w1"));
      // The person approved; the worker that was to resume died; the operator's sweep ran.
      expect(await store.decideApproval({ approvalId: w1, decision: { decision: "approve" }, operatorRef: "alice", decidedAt: LONG_AGO })).toMatchObject({ decided: true });
      expect(await store.orphanApprovals(SWEEP)).toEqual({ orphaned: 1 });

      // A stale worker resumes the run with the old answer.
      const resumed = await run.resume({ decision: "approve", approvalId: w1 });
      expect(outcomeOf(resumed.messages, "w1"), "the orphaned call is refused").toMatchObject({ status: "error", code: "approval_orphaned" });
      expect(service.writes, "the tool body never ran").toBe(0);
      expect(await store.getMutation(turnKey(input)), "no claim was taken").toBeUndefined();
      expect((await store.getApproval(w1))?.status, "the request stays orphaned").toBe("orphaned");

      // The model's next call is a new request: approved and applied, it is the turn's one write.
      const w2 = approvalIdOf(input, rename("w2"));
      expect(resumed.__interrupt__?.map((entry) => (entry.value as { approvalId?: string }).approvalId), "w2 is asked for").toEqual([w2]);
      const done = await run.resume({ decision: "approve", approvalId: w2 });
      expect(outcomeOf(done.messages, "w2")).toMatchObject({ status: "success" });
      expect(service.writes, "the later call wrote once").toBe(1);
      expect((await store.getMutation(turnKey(input)))?.state).toBe("complete");

      // The orphaned request's history, in order, ending with the refusal of its call.
      const history = await store.readAudit({ approvalId: w1 });
      expect(history.map((event) => [event.decision, event.action ?? event.code])).toEqual([
        ["approval", "requested"],
        ["approval", "approve"],
        ["approval", "orphaned"],
        ["refused", "approval_orphaned"],
      ]);
      expect(history.every((event) => event.approvalId === w1)).toBe(true);
      expect(history.map((event) => event.seq)).toEqual([...history.map((event) => event.seq)].sort((a, b) => a - b));
      store.close?.();
    });

    it("orphaned between the check and the apply: the claim taken is released, the body never runs, the write stays open", async () => {
      const store = open();
      const input = turnInput();
      const service = new DocumentService();
      await admit(store, input);
      const run = agentOf(new SweptBeforeApply(store), input, service, SCRIPT);
      await run.start();
      const w1 = approvalIdOf(input, rename("w1"));
      // Approved by the resume value itself: the record reads approved when the call is checked.
      const resumed = await run.resume({ decision: "approve", approvalId: w1 });
      expect(outcomeOf(resumed.messages, "w1")).toMatchObject({ status: "error", code: "approval_orphaned" });
      expect(service.writes, "the tool body never ran").toBe(0);
      expect(await store.getMutation(turnKey(input)), "the claim was given back").toBeUndefined();
      expect(await store.listUnresolved(), "nothing is left unresolved").toEqual([]);
      const trail = await store.readAudit({ turnKey: turnKey(input) });
      expect(trail.filter((event) => event.decision === "released"), "one release, audited").toHaveLength(1);
      expect(trail.find((event) => event.decision === "refused" && event.toolCallId === "w1")).toMatchObject({ code: "approval_orphaned", approvalId: w1 });
      expect(trail.filter((event) => event.decision === "executed" && event.toolCallId === "w1"), "w1 never executed").toEqual([]);
      // The slot is open: the next call, approved, is the turn's one write.
      const w2 = approvalIdOf(input, rename("w2"));
      const done = await run.resume({ decision: "approve", approvalId: w2 });
      expect(outcomeOf(done.messages, "w2")).toMatchObject({ status: "success" });
      expect(service.writes, "the later call wrote once").toBe(1);
      store.close?.();
    });
  });
}
