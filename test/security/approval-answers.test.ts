/**
 * Attack class 9: approval edits are new calls. An approver's `edit` goes through every stage a
 * model's call goes through, in the same order (parse, scope, authorize, guardrails), before it is
 * recorded. A resumed edit that fails one is refused with that stage's code and the request stays
 * answerable (by the person, the CLI, expiry); an edit recorded out of band (the CLI's `decide
 * --edit-file`) that fails one at resume refuses the call with that code and closes the request.
 * An edited read outside the scope is never read and never evidence.
 *
 * Attack class 10: resume answers once. LangGraph hands a re-run task its earlier resume values
 * again by position, as the checkpoint round trip left them. Each value is judged the first time
 * the call meets it, never again: a refused one cannot come back as a decision, ahead of the
 * person's explicit answer or for another request. An approval in an agent without a
 * checkpointer fails with a `ConfigurationError` naming the fix before any request is stored.
 *
 * Every attack runs through the real `createAgent` loop with a `MemorySaver` checkpointer and
 * counts the notes service's real reads and writes.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { HumanMessage } from "@langchain/core/messages";
import { Command, MemorySaver } from "@langchain/langgraph";
import { afterEach, describe, expect, it } from "vitest";
import {
  ConfigurationError,
  createToolGuardrails,
  digest,
  InMemoryGuardrailStore,
  requireApproval,
  type ApprovalRequest,
  type AuditEvent,
  type Authorize,
  type Guardrail,
  type GuardrailStore,
  type ToolPolicy,
} from "arkah-agent-guardrails";
import { SqliteGuardrailStore } from "arkah-agent-guardrails/sqlite";
import { ScriptedModel, type ScriptStep } from "arkah-agent-guardrails/testing";
import { createAgent, tool } from "langchain";
import { z } from "zod";
import { main } from "../../src/cli/main.js";
import { admit, ForwardingStore, outcomeOf } from "../support/fixtures.js";
import { rejection, secureAgent, USER } from "./support.js";

// ---------------------------------------------------------------------------------------------
// Helpers

const noteScope = (args: Readonly<Record<string, unknown>>) => (typeof args.noteId === "string" ? args.noteId : undefined);

/** The notes tools, each bound to the turn's note (note-7). */
const SCOPED: Record<string, ToolPolicy> = {
  read_note: { kind: "document-read", scope: noteScope },
  edit_note: { kind: "mutation", scope: noteScope },
};

const READ = { id: "r1", name: "read_note", args: { noteId: "note-7" } };
const EDIT = { id: "e1", name: "edit_note", args: { noteId: "note-7", body: "Buy oat milk" } };
const SCRIPT = [{ toolCalls: [READ] }, { toolCalls: [EDIT] }, { content: "done" }];

/** A value whose own `__proto__` key makes it malformed; the checkpoint round trip drops the key, leaving a valid approve. */
const SHAPESHIFTER = () => JSON.parse('{"decision":"approve","__proto__":{}}') as unknown;
const NULL_PROTO_SHAPESHIFTER = () => JSON.parse('{"decision":"approve","__proto__":null}') as unknown;

interface ApprovingOptions {
  readonly approve?: readonly string[];
  readonly script?: readonly ScriptStep[];
  readonly store?: GuardrailStore;
  readonly authorize?: Authorize;
  readonly guardrails?: readonly Guardrail[];
  readonly checkpointer?: boolean;
}

/** A scoped notes agent whose listed tools (default edit_note) need a person's approval, on one thread. */
function approving(options: ApprovingOptions = {}) {
  const modelCalls = { count: 0 };
  const script = (options.script ?? SCRIPT).map((step): ScriptStep => (messages) => {
    modelCalls.count += 1;
    return typeof step === "function" ? step(messages) : step;
  });
  const run = secureAgent({
    script,
    policies: SCOPED,
    ...(options.store === undefined ? {} : { store: options.store }),
    guardrails: {
      guardrails: options.guardrails ?? [requireApproval({ tools: options.approve ?? ["edit_note"] })],
      ...(options.authorize === undefined ? {} : { authorize: options.authorize }),
    },
    ...(options.checkpointer === false ? {} : { checkpointer: new MemorySaver() }),
  });
  const config = { configurable: { thread_id: "t-1" } };
  return {
    ...run,
    modelCalls,
    start: async () => {
      await admit(run.store, run.input);
      return run.agent.invoke({ messages: [new HumanMessage(USER)] }, config);
    },
    resume: (value: unknown) => run.agent.invoke(new Command({ resume: value }), config),
  };
}

type Paused = Awaited<ReturnType<ReturnType<typeof approving>["start"]>>;

function requests(result: Paused): (ApprovalRequest & { problem?: string })[] {
  return (result.__interrupt__ ?? []).map((entry) => entry.value as ApprovalRequest & { problem?: string });
}

function only<T>(items: readonly T[]): T {
  expect(items).toHaveLength(1);
  return items[0] as T;
}

/** The approval steps of the store's audit trail, as [action, code]. */
async function approvalTrail(store: GuardrailStore) {
  return (await store.readAudit()).filter((event) => event.decision === "approval").map((event) => [event.action, event.code]);
}

/** The id of execution `execution`'s approval request for the call `asked` is about. */
async function laterApprovalId(store: GuardrailStore, asked: ApprovalRequest, execution: number): Promise<string> {
  const record = await store.getApproval(asked.approvalId);
  return digest({
    kind: "arkah.approval",
    v: 1,
    turnKey: record?.turnKey,
    toolName: record?.toolName,
    toolFingerprint: record?.toolFingerprint,
    toolCallId: record?.toolCallId,
    argsDigest: record?.argsDigest,
    execution,
  });
}

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** A SQLite file the agent and the real CLI (`main`, in-process) share. */
function sharedSqlite() {
  const dir = mkdtempSync(join(tmpdir(), "arkah-approval-answers-"));
  dirs.push(dir);
  const path = join(dir, "guardrails.sqlite");
  const cli = async (...argv: string[]) => {
    let stdout = "";
    let stderr = "";
    const code = await main(["--sqlite", path, ...argv], {
      out: (text) => {
        stdout += text;
      },
      err: (text) => {
        stderr += text;
      },
      env: {},
    });
    return { code, stdout, stderr };
  };
  const editFile = (args: unknown) => {
    const file = join(dir, "edit.json");
    writeFileSync(file, JSON.stringify(args));
    return file;
  };
  return { store: SqliteGuardrailStore.open({ path }), cli, editFile };
}

// ---------------------------------------------------------------------------------------------
// 9: approval edits are new calls

describe("an approver's edit is a new call: checked by every stage before it is recorded", () => {
  it("a turn scoped to note-7, resumed with an edit to note-8: refused out_of_scope, note-8 never written, the request still answerable", async () => {
    const turn = approving();
    const asked = only(requests(await turn.start()));
    const again = await turn.resume({ decision: "edit", args: { noteId: "note-8", body: "owned" } });

    const reported = only(requests(again));
    expect(reported.approvalId).toBe(asked.approvalId);
    expect(reported.problem).toMatch(/^the edited arguments were refused \(out_of_scope\)/);
    expect(turn.service.writes).toEqual([]);
    expect(turn.service.notes.get("note-8")?.body).toBe("Private: salary review");
    expect(await turn.store.getApproval(asked.approvalId)).toMatchObject({ status: "pending" });
    expect(await approvalTrail(turn.store)).toEqual([
      ["requested", undefined],
      ["answer_refused", "out_of_scope"],
    ]);
    // The refused edit is never taken later either: the person's reject decides.
    const done = await turn.resume({ decision: "reject" });
    expect(outcomeOf(done.messages, "e1")).toMatchObject({ status: "error", code: "approval_rejected" });
    expect(turn.service.writes).toEqual([]);
  });

  it("an edit is checked in the model's order: parse, then scope, then authorize, then the guardrails", async () => {
    const seen: string[] = [];
    const denyAll: Guardrail = {
      name: "deny-all-edits",
      placements: ["tool-args"],
      tools: ["edit_note"],
      check: ({ toolCall }) => {
        seen.push(`guardrail ${typeof toolCall.args.body === "string" ? toolCall.args.body : "?"}`);
        return toolCall.args.body === "edited"
          ? { action: "deny", outcome: "complete", code: "no_edits", detections: [] }
          : { action: "allow", outcome: "complete", detections: [] };
      },
    };
    const turn = approving({
      guardrails: [requireApproval({ tools: ["edit_note"] }), denyAll],
      authorize: (call) => {
        seen.push(`authorize ${String((call.args as { body?: unknown }).body)}`);
        return (call.args as { body?: unknown }).body !== "forbidden";
      },
    });
    await turn.start();
    seen.length = 0;
    const problems: string[] = [];
    for (const args of [{ noteId: 7 }, { noteId: "note-8", body: "edited" }, { noteId: "note-7", body: "forbidden" }, { noteId: "note-7", body: "edited" }]) {
      problems.push(only(requests(await turn.resume({ decision: "edit", args }))).problem ?? "");
    }
    expect(problems.map((problem) => /\((\w+)\)/.exec(problem)?.[1])).toEqual(["invalid_arguments", "out_of_scope", "unauthorized", "no_edits"]);
    // Scope refused note-8 before authorize or any guardrail saw it; authorize refused before the
    // guardrails. (The model's own call is authorized again on each re-run of its task.)
    expect(seen.filter((entry) => !entry.endsWith("Buy oat milk"))).toEqual(["authorize forbidden", "authorize edited", "guardrail edited"]);
    expect(turn.service.writes).toEqual([]);
  });

  it("an approval-gated read edited to note-8 is never read and never evidence: the edit after it is read_required", async () => {
    const turn = approving({
      approve: ["read_note"],
      script: [{ toolCalls: [READ] }, { toolCalls: [EDIT] }, { content: "done" }],
    });
    await turn.start();
    const again = await turn.resume({ decision: "edit", args: { noteId: "note-8" } });
    expect(only(requests(again)).problem).toMatch(/\(out_of_scope\)/);
    expect(turn.service.reads).toEqual([]);

    const done = await turn.resume({ decision: "reject" });
    expect(outcomeOf(done.messages, "r1")).toMatchObject({ code: "approval_rejected" });
    expect(outcomeOf(done.messages, "e1")).toMatchObject({ code: "read_required" });
    expect(turn.service.reads).toEqual([]);
    expect(turn.service.writes).toEqual([]);
  });

  it("the same edit through the CLI (decide --edit-file): the call is refused out_of_scope at resume, nothing runs, the request closed", async () => {
    const { store, cli, editFile } = sharedSqlite();
    const turn = approving({ store });
    const asked = only(requests(await turn.start()));
    const decided = await cli("decide", "--approval-id", asked.approvalId, "--edit-file", editFile({ noteId: "note-8", body: "owned" }), "--operator-ref", "OPS-1");
    expect(decided.code).toBe(0);
    expect(decided.stdout).toContain("only the JSON shape was checked here: the full check (the tool's schema, its");

    const done = await turn.resume({ decision: "approve" });
    expect(done.__interrupt__ ?? []).toEqual([]);
    const outcome = outcomeOf(done.messages, "e1");
    expect(outcome).toMatchObject({ status: "error", code: "out_of_scope" });
    expect(JSON.parse(outcome.content)).toMatchObject({ approvalId: asked.approvalId, editedByReviewer: true });
    expect(turn.service.writes).toEqual([]);
    // Closed with a recorded reason: the decision stands, is never applied, and the refusal names it.
    expect(await store.getApproval(asked.approvalId)).toMatchObject({ status: "edited" });
    const refused = (await store.readAudit()).filter((event) => event.decision === "refused" && event.toolCallId === "e1");
    expect(refused).toMatchObject([{ code: "out_of_scope", approvalId: asked.approvalId }]);
    expect(await store.listUnresolved()).toEqual([]);
    store.close();
  });

  it("a read edited to note-8 through the CLI: refused out_of_scope at resume, never read, never evidence", async () => {
    const { store, cli, editFile } = sharedSqlite();
    const turn = approving({ store, approve: ["read_note"] });
    const asked = only(requests(await turn.start()));
    expect((await cli("decide", "--approval-id", asked.approvalId, "--edit-file", editFile({ noteId: "note-8" }), "--operator-ref", "OPS-4")).code).toBe(0);

    const done = await turn.resume({ decision: "approve" });
    expect(outcomeOf(done.messages, "r1")).toMatchObject({ status: "error", code: "out_of_scope" });
    expect(outcomeOf(done.messages, "e1")).toMatchObject({ code: "read_required" });
    expect(turn.service.reads).toEqual([]);
    expect(turn.service.writes).toEqual([]);
    store.close();
  });

  it("the CLI's help says its edit check is the JSON shape and the full check happens when the run resumes", async () => {
    const { cli, store } = sharedSqlite();
    const help = await cli("decide", "--help");
    expect(help.stdout).toMatch(/Only its JSON shape is checked here; the full check \(the tool's schema, its\s+scope, authorize, every guardrail\) happens when the run resumes/);
    store.close();
  });
});

describe("a failing edit does not poison the request", () => {
  const notForbidden: Authorize = (call) => (call.args as { body?: unknown }).body !== "forbidden";

  it("an edit authorize refuses leaves the request pending: the CLI can still decide it, and its reject stands", async () => {
    const { store, cli } = sharedSqlite();
    const turn = approving({ store, authorize: notForbidden });
    const asked = only(requests(await turn.start()));
    const again = await turn.resume({ decision: "edit", args: { noteId: "note-7", body: "forbidden" } });
    expect(only(requests(again)).problem).toMatch(/\(unauthorized\)/);
    expect(await store.getApproval(asked.approvalId)).toMatchObject({ status: "pending" });

    expect((await cli("decide", "--approval-id", asked.approvalId, "--reject", "--operator-ref", "OPS-2")).code).toBe(0);
    const done = await turn.resume({ decision: "approve" });
    expect(outcomeOf(done.messages, "e1")).toMatchObject({ code: "approval_rejected" });
    expect(turn.service.writes).toEqual([]);
    store.close();
  });

  it("an edit authorize refuses leaves the request pending: expiry retires it, and its call is refused approval_expired", async () => {
    const turn = approving({ authorize: notForbidden });
    const asked = only(requests(await turn.start()));
    await turn.resume({ decision: "edit", args: { noteId: "note-7", body: "forbidden" } });
    expect(await turn.store.expireApprovals({ olderThan: "2999-01-01T00:00:00.000Z" })).toEqual({ expired: 1 });
    const done = await turn.resume({ decision: "approve" });
    expect(outcomeOf(done.messages, "e1")).toMatchObject({ code: "approval_expired" });
    expect(await turn.store.getApproval(asked.approvalId)).toMatchObject({ status: "expired" });
    expect(turn.service.writes).toEqual([]);
  });

  it("an edit authorize refuses, recorded through the CLI: at resume the call is refused unauthorized and the run goes on", async () => {
    const { store, cli, editFile } = sharedSqlite();
    const turn = approving({ store, authorize: notForbidden });
    const asked = only(requests(await turn.start()));
    const args = { noteId: "note-7", body: "forbidden" };
    expect((await cli("decide", "--approval-id", asked.approvalId, "--edit-file", editFile(args), "--operator-ref", "OPS-3")).code).toBe(0);

    const done = await turn.resume({ decision: "approve" });
    expect(outcomeOf(done.messages, "e1")).toMatchObject({ status: "error", code: "unauthorized" });
    expect(done.messages.at(-1)?.content).toBe("done");
    expect(turn.service.writes).toEqual([]);
    expect(await store.getApproval(asked.approvalId)).toMatchObject({ status: "edited" });
    store.close();
  });
});

// ---------------------------------------------------------------------------------------------
// 10: resume answers once

describe("a resume value is judged once, whatever LangGraph replays", () => {
  it("a value refused as malformed, which the checkpoint round trip turns into an approve, never outranks the person's reject", async () => {
    const turn = approving();
    await turn.start();
    const again = await turn.resume(SHAPESHIFTER());
    expect(only(requests(again)).problem).toMatch(/not a decision/);

    const done = await turn.resume({ decision: "reject" });
    expect(done.__interrupt__ ?? []).toEqual([]);
    expect(outcomeOf(done.messages, "e1")).toMatchObject({ status: "error", code: "approval_rejected" });
    expect(turn.service.writes).toEqual([]);
    expect(await approvalTrail(turn.store)).toEqual([
      ["requested", undefined],
      ["answer_refused", "not_a_decision"],
      ["reject", undefined],
    ]);
  });

  it("several pauses of one task in a row: each refused value is judged once, and none is taken later", async () => {
    const turn = approving();
    const asked = only(requests(await turn.start()));
    const refusedValues = [SHAPESHIFTER(), NULL_PROTO_SHAPESHIFTER(), "approve", { decision: "approve", approvalId: "f".repeat(64) }];
    for (const value of refusedValues) {
      const again = await turn.resume(value);
      expect(only(requests(again)).approvalId).toBe(asked.approvalId);
      expect(turn.service.writes).toEqual([]);
    }
    const done = await turn.resume({ decision: "reject", message: "No." });
    expect(outcomeOf(done.messages, "e1")).toMatchObject({ code: "approval_rejected" });
    expect(turn.service.writes).toEqual([]);
    expect(await approvalTrail(turn.store)).toEqual([
      ["requested", undefined],
      ["answer_refused", "not_a_decision"],
      ["answer_refused", "not_a_decision"],
      ["answer_refused", "not_a_decision"],
      ["answer_refused", "other_request"],
      ["reject", undefined],
    ]);
    // The re-run task met every earlier value again and logged none of them a second time.
    expect(turn.warnings.filter((warning) => warning.message.startsWith("an approval answer was not accepted"))).toHaveLength(4);
  });

  it("a run invoked again without a new answer (invoke(null)) is handed the refused value again: it is not judged again", async () => {
    const turn = approving();
    await turn.start();
    await turn.resume(SHAPESHIFTER());
    const again = await turn.agent.invoke(null, { configurable: { thread_id: "t-1" } });

    expect(only(requests(again)).problem).toMatch(/^the run was resumed without a new answer/);
    expect(turn.service.writes).toEqual([]);
    const done = await turn.resume({ decision: "reject" });
    expect(outcomeOf(done.messages, "e1")).toMatchObject({ code: "approval_rejected" });
    expect(turn.service.writes).toEqual([]);
    expect(await approvalTrail(turn.store)).toEqual([
      ["requested", undefined],
      ["answer_refused", "not_a_decision"],
      ["answer_refused", "repeated_answer"],
      ["reject", undefined],
    ]);
  });

  it("a run that failed while it recorded a refusal, retried with invoke(null): the value is not judged again", async () => {
    /** The store fails once, as the refusal of an answer is audited. */
    class DownOnce extends ForwardingStore {
      down = true;
      override async appendAudit(event: AuditEvent): Promise<void> {
        if (this.down && event.action === "answer_refused") {
          this.down = false;
          throw new Error("store unavailable");
        }
        return this.inner.appendAudit(event);
      }
    }
    const inner = new InMemoryGuardrailStore();
    const turn = approving({ store: new DownOnce(inner) });
    await turn.start();
    expect(String(await rejection(turn.resume(SHAPESHIFTER())))).toMatch(/store unavailable/);

    const again = await turn.agent.invoke(null, { configurable: { thread_id: "t-1" } });
    expect(only(requests(again)).problem).toMatch(/^the run was resumed without a new answer/);
    expect(turn.service.writes).toEqual([]);
    const done = await turn.resume({ decision: "reject" });
    expect(outcomeOf(done.messages, "e1")).toMatchObject({ code: "approval_rejected" });
    expect(turn.service.writes).toEqual([]);
  });

  it("keyed by interrupt id, Command({ resume: { [id]: value } }): the replayed malformed value is not taken either", async () => {
    const turn = approving();
    const first = await turn.start();
    const firstId = only(first.__interrupt__ ?? []).id ?? "";
    const again = await turn.resume({ [firstId]: SHAPESHIFTER() });
    const secondId = only(again.__interrupt__ ?? []).id ?? "";
    expect(secondId).not.toBe(firstId);

    const done = await turn.resume({ [secondId]: { decision: "reject" } });
    expect(outcomeOf(done.messages, "e1")).toMatchObject({ code: "approval_rejected" });
    expect(turn.service.writes).toEqual([]);
  });

  it("a positional shift: a value refused for one request is not taken for the task's next request once the first is decided", async () => {
    const turn = approving();
    const asked = only(requests(await turn.start()));
    // An answer naming the request the call's next execution would make: refused for this one.
    const next = await laterApprovalId(turn.store, asked, 1);
    const again = await turn.resume({ decision: "approve", approvalId: next });
    expect(only(requests(again)).problem).toMatch(/named another approval request/);
    // Meanwhile another execution decided and used the first request: on re-run the call skips
    // it, asks the next one, and meets the refused value again at that position.
    await turn.store.decideApproval({ approvalId: asked.approvalId, decision: { decision: "approve" }, decidedAt: new Date().toISOString() });
    expect(await turn.store.applyApproval({ approvalId: asked.approvalId, appliedAt: new Date().toISOString() })).toBe(true);

    const renewed = await turn.resume({ decision: "reject", approvalId: asked.approvalId });
    expect(turn.service.writes).toEqual([]);
    const pendingNext = only(requests(renewed));
    expect(pendingNext.approvalId).toBe(next);
    expect(await turn.store.getApproval(next)).toMatchObject({ status: "pending" });

    const done = await turn.resume({ decision: "reject", approvalId: next });
    expect(outcomeOf(done.messages, "e1")).toMatchObject({ code: "approval_rejected" });
    expect(turn.service.writes).toEqual([]);
  });

  it("createToolGuardrails without a store: a replayed malformed value is not taken either", async () => {
    const done: string[] = [];
    const remember = tool(
      ({ fact }) => {
        done.push(fact);
        return "remembered";
      },
      { name: "remember", description: "Remember a fact.", schema: z.object({ fact: z.string() }) },
    );
    const agent = createAgent({
      model: new ScriptedModel([{ toolCalls: [{ id: "m1", name: "remember", args: { fact: "x" } }] }, { content: "done" }]),
      tools: [remember],
      middleware: [
        createToolGuardrails({ tools: ["remember"], authorize: () => true, guardrails: [requireApproval({ tools: ["remember"] })], logger: { warn: () => undefined } }),
      ],
      checkpointer: new MemorySaver(),
    });
    const config = { configurable: { thread_id: "t-1" } };
    await agent.invoke({ messages: [new HumanMessage(USER)] }, config);
    await agent.invoke(new Command({ resume: SHAPESHIFTER() }), config);
    const result = await agent.invoke(new Command({ resume: { decision: "reject" } }), config);
    expect(outcomeOf(result.messages, "m1")).toMatchObject({ code: "approval_rejected" });
    expect(done).toEqual([]);
  });
});

describe("an approval needs a checkpointer", () => {
  it("requireApproval in an agent without one: the first model call fails with ConfigurationError naming the fix; nothing stored or run", async () => {
    const turn = approving({ checkpointer: false });
    const error = await rejection(turn.start());
    const configuration = ConfigurationError.isInstance(error) ? error : (error as { cause?: unknown }).cause;
    expect(ConfigurationError.isInstance(configuration)).toBe(true);
    expect(String(configuration)).toMatch(/requireApproval \(guardrail "approval"\) pauses the run .* needs a checkpointer: .*checkpointer: new MemorySaver\(\)/);
    expect(turn.modelCalls.count).toBe(0);
    expect(await turn.store.listApprovals()).toEqual([]);
    expect(turn.service.reads).toEqual([]);
    expect(turn.service.writes).toEqual([]);
  });

  it("another guardrail answering approve without one: ConfigurationError before its request is stored; nothing runs", async () => {
    const asks: Guardrail = {
      name: "ask-a-person",
      placements: ["tool-args"],
      tools: ["edit_note"],
      check: () => ({ action: "approve", outcome: "complete", detections: [] }),
    };
    const store = new InMemoryGuardrailStore();
    const turn = approving({ checkpointer: false, guardrails: [asks], store });
    const error = await rejection(turn.start());
    const configuration = ConfigurationError.isInstance(error) ? error : (error as { cause?: unknown }).cause;
    expect(ConfigurationError.isInstance(configuration)).toBe(true);
    expect(String(configuration)).toMatch(/guardrail "ask-a-person" pauses the run .* needs a checkpointer/);
    expect(await store.listApprovals()).toEqual([]);
    expect(turn.service.reads).toEqual(["note-7"]);
    expect(turn.service.writes).toEqual([]);
  });
});
