/**
 * Edges of step 5 (src/guardrails/evaluate.ts) through the real `createAgent` loop: what an
 * approval request says when some approving guardrails give no reason, what the audit records
 * for refusals made by approvals, the execution a renewed approval asks about, every check an
 * approver's edit goes through again (and the problems that say why one was refused), the
 * texts and log lines of a check that failed, timed out or answered nonsense, how the run's
 * cancellation reaches a check (and no longer reaches a finished one), a store that records a
 * verdict but answers nothing, and the verdict event an audit sink gets without a store.
 *
 * Side effects are counted by the tools (`service.writes`, `service.reads`); guardrails keep
 * the contexts they were given.
 */
import { HumanMessage } from "@langchain/core/messages";
import { Command, MemorySaver } from "@langchain/langgraph";
import { createAgent } from "langchain";
import { describe, expect, it } from "vitest";
import {
  allowAllCalls,
  createToolGuardrails,
  digest,
  InMemoryGuardrailStore,
  requireApproval,
  StoreContractError,
  turnContext,
  turnKey,
  type ApprovalRequest,
  type Authorize,
  type AuditSinkEvent,
  type GuardrailLogger,
  type Guardrail,
  type GuardrailStore,
  type GuardrailVerdict,
} from "arkah-agent-guardrails";
import {
  type VerdictKey,
  type VerdictRecord,
} from "arkah-agent-guardrails/store";
import { ScriptedModel } from "arkah-agent-guardrails/testing";
import { approvalId } from "../../src/guardrails/approvals.js";
import {
  detector,
  deferred,
  admit,
  DocumentService,
  documentToolFingerprint,
  documentTools,
  ForwardingStore,
  guardedAgent,
  invokeTurn,
  outcomeOf,
  read,
  rejection,
  remember,
  rename,
  turnInput,
  USER_MESSAGE,
} from "../support/fixtures.js";

// ---------------------------------------------------------------------------------------------
// Local helpers

const ALLOW: GuardrailVerdict = { action: "allow", outcome: "complete", detections: [] };
const NOTICED: GuardrailVerdict = { action: "observe", outcome: "complete", detections: [{ rule: "watch", detected: true }] };
const READ_THEN_RENAME = [{ toolCalls: [read("r1")] }, { toolCalls: [rename("w1")] }, { content: "done" }];
const REMEMBER_ONCE = [{ toolCalls: [remember("m1")] }, { content: "done" }];

/** A logger that keeps every warning it is given, as the sanitizing wrapper passes it on. */
function keptWarnings() {
  const warnings: { message: string; fields: Readonly<Record<string, unknown>> }[] = [];
  const logger: GuardrailLogger = {
    warn: (message, fields) => {
      warnings.push({ message, fields });
    },
  };
  return { warnings, logger };
}

/** The `message` the model reads in a refusal. */
function refusalText(content: string): unknown {
  return (JSON.parse(content) as { message?: unknown }).message;
}

interface PausableOptions {
  guardrails: readonly Guardrail[];
  store?: GuardrailStore;
  service?: DocumentService;
  authorize?: Authorize;
  thread?: string;
  script?: typeof READ_THEN_RENAME;
}

/** An admitted turn on a checkpointed agent: `start` runs it, `resume` answers its interrupt. */
async function pausable(options: PausableOptions) {
  const store = options.store ?? new InMemoryGuardrailStore();
  const input = turnInput();
  await admit(store, input);
  const { agent, service } = guardedAgent({
    store,
    input,
    service: options.service,
    script: options.script ?? READ_THEN_RENAME,
    checkpointer: new MemorySaver(),
    guardrails: { guardrails: options.guardrails, ...(options.authorize === undefined ? {} : { authorize: options.authorize }) },
  });
  const config = { configurable: { thread_id: options.thread ?? "evaluation-edges" } };
  return {
    store,
    input,
    service,
    start: () => agent.invoke({ messages: [new HumanMessage(USER_MESSAGE)] }, config),
    resume: (value: unknown) => agent.invoke(new Command({ resume: value }), config),
  };
}

/** The approval requests a paused run waits on. */
function requestsOf(result: { __interrupt__?: { value?: unknown }[] }): ApprovalRequest[] {
  return (result.__interrupt__ ?? []).map((entry) => entry.value as ApprovalRequest);
}

async function auditOf(store: GuardrailStore, decision: string) {
  return (await store.readAudit()).filter((event) => event.decision === decision);
}

const silentApprover = () =>
  detector("sign-off", () => ({ action: "approve", outcome: "complete", detections: [] }), { tools: ["rename_document"] });

// ---------------------------------------------------------------------------------------------

describe("an approval request carries the reasons that were given, and only those", () => {
  it("an approve verdict without a reason asks with no reason, and stores none", async () => {
    const run = await pausable({ guardrails: [silentApprover().guardrail] });
    const [request] = requestsOf(await run.start());

    expect(request).toMatchObject({ toolCallId: "w1", guardrails: ["sign-off"] });
    expect(request?.reason).toBeUndefined();
    const stored = await run.store.getApproval(request?.approvalId ?? "");
    expect(stored?.status).toBe("pending");
    expect(stored).not.toHaveProperty("reason");
    expect(run.service.writes).toBe(0);
  });

  it("two approvers, one silent: the person reads the other's reason alone; a reject is audited under both names", async () => {
    const legal = requireApproval({ tools: ["rename_document"], name: "legal", describe: () => "Legal sign-off." });
    const run = await pausable({ guardrails: [silentApprover().guardrail, legal] });
    const [request] = requestsOf(await run.start());
    expect(request).toMatchObject({ guardrails: ["sign-off", "legal"], reason: "Legal sign-off." });

    const done = await run.resume({ decision: "reject" });
    const refused = outcomeOf(done.messages, "w1");
    expect(refused).toMatchObject({ status: "error", code: "approval_rejected" });
    expect(JSON.parse(refused.content)).not.toHaveProperty("reviewerMessage");
    expect(await auditOf(run.store, "refused")).toMatchObject([
      { toolCallId: "w1", code: "approval_rejected", guardrail: "sign-off,legal" },
    ]);
    expect(run.service.writes).toBe(0);
  });
});

describe("refusals are audited with their code and the guardrail that decided", () => {
  it("an expired request: the refused event says approval_expired, under the approving guardrail", async () => {
    const run = await pausable({ guardrails: [requireApproval({ tools: ["rename_document"] })] });
    await run.start();
    await run.store.expireApprovals({ olderThan: "2999-01-01T00:00:00.000Z" });
    const done = await run.resume({ decision: "approve" });

    expect(outcomeOf(done.messages, "w1").code).toBe("approval_expired");
    expect(await auditOf(run.store, "refused")).toMatchObject([{ toolCallId: "w1", code: "approval_expired", guardrail: "approval" }]);
    expect(run.service.writes).toBe(0);
  });

  it("a denial without a code: the model reads guardrail_denied and the refused event records that code", async () => {
    const store = new InMemoryGuardrailStore();
    const input = turnInput();
    await admit(store, input);
    const bare = detector("bare", () => ({ action: "deny", outcome: "complete", detections: [] }), { tools: ["remember"] });
    const { agent } = guardedAgent({ store, input, script: REMEMBER_ONCE, guardrails: { guardrails: [bare.guardrail] } });
    const messages = await invokeTurn(agent, input);

    expect(outcomeOf(messages, "m1").code).toBe("guardrail_denied");
    expect(await auditOf(store, "refused")).toMatchObject([{ toolCallId: "m1", code: "guardrail_denied", guardrail: "bare" }]);
  });
});

describe("a renewed approval asks about the next execution", () => {
  it("an approval another execution used: the person is asked about execution 1 of the call, and that answer runs it", async () => {
    const run = await pausable({ guardrails: [requireApproval({ tools: ["rename_document"] })] });
    const [first] = requestsOf(await run.start());
    const firstId = first?.approvalId ?? "";
    const now = new Date().toISOString();
    await run.store.decideApproval({ approvalId: firstId, decision: { decision: "approve" }, decidedAt: now });
    expect(await run.store.applyApproval({ approvalId: firstId, appliedAt: now })).toBe(true);

    const [renewed] = requestsOf(await run.resume({ decision: "approve" }));
    const call = {
      id: "w1",
      name: "rename_document",
      argsDigest: digest(rename("w1").args),
      toolFingerprint: documentToolFingerprint("rename_document"),
    };
    const nextId = approvalId(turnKey(run.input), call, 1);
    expect(firstId).toBe(approvalId(turnKey(run.input), call, 0));
    expect(renewed?.approvalId).toBe(nextId);
    expect((await run.store.getApproval(nextId))?.status).toBe("pending");
    expect(run.service.writes).toBe(0);

    const done = await run.resume({ decision: "approve", approvalId: nextId });
    expect(outcomeOf(done.messages, "w1").status).toBe("success");
    expect(run.service.writes).toBe(1);
    expect((await run.store.getApproval(nextId))?.status).toBe("applied");
  });
});

describe("an approver's edit goes through the guardrails again", () => {
  const EDITED = { title: "Field notes (edited)", expectedRevision: 0 };

  it("only the guardrails of the tool check it, the tool's parse stands in for the schema, and only non-allow verdicts are audited", async () => {
    const elsewhere = detector("elsewhere", () => ({ action: "deny", outcome: "complete", code: "not_here", detections: [] }), {
      tools: ["remember"],
    });
    const titles = detector("titles", () => ALLOW, { tools: ["rename_document"] });
    const watch = detector("watch", () => NOTICED, { tools: ["rename_document"] });
    const guardrails = [elsewhere.guardrail, titles.guardrail, watch.guardrail, requireApproval({ tools: ["rename_document"] })];
    const run = await pausable({ guardrails });
    await run.start();
    // A key the tool's schema strips (its JSON Schema says additionalProperties: false): the
    // tool's own parse accepts the edit, as it would the model's call.
    const done = await run.resume({ decision: "edit", args: { ...EDITED, note: "approved by Kim" } });

    expect(outcomeOf(done.messages, "w1")).toMatchObject({ status: "success", content: '{"title":"Field notes (edited)","revision":1}' });
    expect(run.service.writes).toBe(1);
    expect(elsewhere.contexts).toEqual([]);
    expect(titles.contexts.map((context) => context.toolCall.args)).toEqual([rename("w1").args, EDITED]);
    expect(watch.contexts.map((context) => context.toolCall.rawArgs)).toEqual([rename("w1").args, { ...EDITED, note: "approved by Kim" }]);
    const verdicts = (await auditOf(run.store, "verdict")).map((event) => [event.guardrail, event.action, event.argsDigest]);
    expect(verdicts).toEqual([
      ["watch", "observe", digest(rename("w1").args)],
      ["approval", "approve", digest(rename("w1").args)],
      ["watch", "observe", digest(EDITED)],
    ]);
  });

  it("a transport retry of the edited call reads the edit's verdicts back: audited once, and the write replays", async () => {
    const store = new InMemoryGuardrailStore();
    const service = new DocumentService();
    const watch = detector("watch", () => NOTICED, { tools: ["rename_document"] });
    const guardrails = [watch.guardrail, requireApproval({ tools: ["rename_document"] })];
    const first = await pausable({ guardrails, store, service, thread: "first" });
    await first.start();
    await first.resume({ decision: "edit", args: EDITED });
    expect(service.writes).toBe(1);

    const retry = await pausable({
      guardrails,
      store,
      service,
      thread: "retry",
      script: [{ toolCalls: [read("r2")] }, { toolCalls: [rename("w1")] }, { content: "done" }],
    });
    const replayed = await retry.start();
    expect(requestsOf(replayed)).toEqual([]);
    expect(outcomeOf(replayed.messages, "w1")).toMatchObject({ status: "success", content: '{"title":"Field notes (edited)","revision":1}' });
    expect(service.writes).toBe(1);
    // The edit was checked again (the detector's recorded verdict answered), not audited again.
    expect(watch.contexts.filter((context) => context.toolCall.id === "w1")).toHaveLength(2);
    const editVerdicts = (await auditOf(store, "verdict")).filter((event) => event.argsDigest === digest(EDITED));
    expect(editVerdicts.map((event) => [event.guardrail, event.action])).toEqual([["watch", "observe"]]);
  });

  /** The problem the person is shown for a refused edit; the request stays pending and nothing ran. */
  async function refusedEdit(run: Awaited<ReturnType<typeof pausable>>, args: Record<string, unknown>): Promise<string> {
    const again = await run.resume({ decision: "edit", args });
    const [request] = requestsOf(again) as (ApprovalRequest & { problem?: string })[];
    expect(request?.toolCallId).toBe("w1");
    expect(run.service.writes).toBe(0);
    expect((await run.store.listApprovals()).map((record) => record.status)).toEqual(["pending"]);
    return request?.problem ?? "";
  }

  it.each([
    ["with its reason", "Titles must not name secrets.", ': Titles must not name secrets.'],
    ["without a reason", undefined, ""],
  ])("a denied edit (%s) is refused with the guardrail's code, naming it; the denial is audited", async (_name, reason, suffix) => {
    const secrets = detector(
      "no-secrets",
      (context) =>
        String((context.toolCall.args as { title?: unknown }).title).includes("secret")
          ? { action: "deny", outcome: "complete", code: "secret_title", detections: [], ...(reason === undefined ? {} : { reason }) }
          : ALLOW,
      { tools: ["rename_document"] },
    );
    const run = await pausable({ guardrails: [requireApproval({ tools: ["rename_document"] }), secrets.guardrail] });
    await run.start();
    const edited = { title: "the secret plan", expectedRevision: 0 };
    const problem = await refusedEdit(run, edited);

    expect(problem).toBe(
      `the edited arguments were refused (secret_title): guardrail "no-secrets" denied them${suffix}; nothing ran. ` +
        "Answer again: approve the call as asked, reject it, or edit it with other arguments",
    );
    const denials = (await auditOf(run.store, "verdict")).filter((event) => event.action === "deny");
    expect(denials).toMatchObject([{ toolCallId: "w1", guardrail: "no-secrets", code: "secret_title", argsDigest: digest(edited) }]);
    expect((await auditOf(run.store, "approval")).map((event) => [event.action, event.code])).toEqual([
      ["requested", undefined],
      ["answer_refused", "secret_title"],
    ]);
  });

  it("an edit authorize refuses is refused unauthorized, saying so", async () => {
    const run = await pausable({
      guardrails: [requireApproval({ tools: ["rename_document"] })],
      authorize: (call) => (call.args as { title?: unknown }).title !== "Forbidden",
    });
    await run.start();
    const problem = await refusedEdit(run, { title: "Forbidden", expectedRevision: 0 });
    expect(problem).toMatch(/^the edited arguments were refused \(unauthorized\): authorize does not allow them; nothing ran/);
  });

  it("an edit the tool's schema rejects is refused invalid_arguments, listing every issue by JSON Pointer", async () => {
    const run = await pausable({ guardrails: [requireApproval({ tools: ["rename_document"] })] });
    await run.start();
    const problem = await refusedEdit(run, { title: "" });
    expect(problem).toMatch(
      /^the edited arguments were refused \(invalid_arguments\): they do not match the tool's schema: #\/title: [^;#]*>=1 characters; #\/expectedRevision: [^;#]*expected number/,
    );
  });
});

describe("a check that cannot finish: what the model reads and what is logged", () => {
  async function deniedBy(guardrail: Guardrail) {
    const store = new InMemoryGuardrailStore();
    const input = turnInput();
    await admit(store, input);
    const { warnings, logger } = keptWarnings();
    const { agent } = guardedAgent({ store, input, script: REMEMBER_ONCE, guardrails: { guardrails: [guardrail], logger } });
    const outcome = outcomeOf(await invokeTurn(agent, input), "m1");
    expect(outcome).toMatchObject({ status: "error", code: "guardrail_denied" });
    return { message: refusalText(outcome.content), warnings };
  }

  it("a check that throws: 'failed', logged with timedOut false and the error's class only", async () => {
    const broken = detector(
      "broken",
      () => {
        throw new Error("backend 10.0.0.7 said no");
      },
      { tools: ["remember"] },
    );
    const { message, warnings } = await deniedBy(broken.guardrail);

    expect(message).toBe("A guardrail failed while checking this call, so it did not run. Try again later or tell the user.");
    expect(warnings).toEqual([
      {
        message: "guardrail check failed; the call is denied",
        fields: { guardrail: "broken", toolName: "remember", toolCallId: "m1", timedOut: false, error: { name: "Error" } },
      },
    ]);
  });

  it("a check that ignores its signal and never answers is stopped at timeoutMs: 'timed out', and its signal says why", async () => {
    const stuck = detector("stuck", () => new Promise<never>(() => undefined), { tools: ["remember"], timeoutMs: 20 });
    const { message, warnings } = await deniedBy(stuck.guardrail);

    expect(message).toBe("A guardrail timed out while checking this call, so it did not run. Try again later or tell the user.");
    expect(warnings).toEqual([
      {
        message: "guardrail check failed; the call is denied",
        fields: { guardrail: "stuck", toolName: "remember", toolCallId: "m1", timedOut: true, error: { name: "Error" } },
      },
    ]);
    const reason = stuck.contexts[0]?.signal.reason as unknown;
    expect(reason).toBeInstanceOf(Error);
    expect((reason as Error).message).toBe('guardrail "stuck" timed out');
  });

  it("a check that answers something that is not a verdict: 'answered an invalid verdict', logged with the call's names", async () => {
    const nonsense = detector("nonsense", () => ({ action: "maybe" }), { tools: ["remember"] });
    const { message, warnings } = await deniedBy(nonsense.guardrail);

    expect(message).toBe(
      "A guardrail answered an invalid verdict while checking this call, so it did not run. Try again later or tell the user.",
    );
    expect(warnings).toEqual([
      {
        message: "guardrail answered an invalid verdict; the call is denied",
        fields: { guardrail: "nonsense", toolName: "remember", toolCallId: "m1" },
      },
    ]);
  });
});

describe("the run's cancellation reaches a running check, and only a running one", () => {
  async function cancellableTurn(store: GuardrailStore, guardrail: Guardrail, hooks: Parameters<typeof guardedAgent>[0]["hooks"] = {}) {
    const input = turnInput();
    await admit(store, input);
    const { warnings, logger } = keptWarnings();
    const { agent, service } = guardedAgent({ store, input, script: READ_THEN_RENAME, hooks, guardrails: { guardrails: [guardrail], logger } });
    const controller = new AbortController();
    const outcome = invokeTurn(agent, input, { signal: controller.signal }).then(
      () => "resolved",
      () => "rejected",
    );
    return { controller, outcome, service, warnings };
  }

  it("a cancel during a check aborts the check's signal with the run's reason; it is not logged as a failed check", async () => {
    const started = deferred();
    const stopped = deferred<unknown>();
    const waiting = detector(
      "waiting",
      (context) =>
        new Promise((_, reject) => {
          context.signal.addEventListener("abort", () => {
            stopped.resolve(context.signal.reason);
            reject(new Error("stopped"));
          });
          started.resolve();
        }),
      { tools: ["read_document"] },
    );
    const run = await cancellableTurn(new InMemoryGuardrailStore(), waiting.guardrail);
    await started.promise;
    const reason = new Error("client went away");
    run.controller.abort(reason);

    expect(await stopped.promise).toBe(reason);
    expect(await run.outcome).toBe("rejected");
    expect(run.service.reads).toBe(0);
    expect(run.warnings.map((warning) => warning.message)).not.toContain("guardrail check failed; the call is denied");
  });

  it("a cancel before a check starts: the check is given an already-aborted signal", async () => {
    const checked = deferred<{ aborted: boolean; reason: unknown }>();
    const late = detector(
      "late",
      (context) => {
        checked.resolve({ aborted: context.signal.aborted, reason: context.signal.reason });
        return ALLOW;
      },
      { tools: ["read_document"] },
    );
    const reason = new Error("client went away");
    let cancel: () => void = () => undefined;
    /** The run is cancelled while the store looks up the check's recorded verdict. */
    class CancelOnLookup extends ForwardingStore {
      override getVerdict(key: VerdictKey): Promise<VerdictRecord | undefined> {
        if (key.guardrail === "late") cancel();
        return super.getVerdict(key);
      }
    }
    const run = await cancellableTurn(new CancelOnLookup(new InMemoryGuardrailStore()), late.guardrail);
    cancel = () => {
      run.controller.abort(reason);
    };

    expect(await checked.promise).toEqual({ aborted: true, reason });
    expect(await run.outcome).toBe("rejected");
    expect(run.service.reads).toBe(0);
  });

  it("a cancel after a check answered does not reach that check's signal", async () => {
    const reason = new Error("client went away");
    const quick = detector("quick", () => Promise.resolve(ALLOW), { tools: ["read_document"] });
    let cancel: () => void = () => undefined;
    const run = await cancellableTurn(new InMemoryGuardrailStore(), quick.guardrail, { beforeRead: () => cancel() });
    cancel = () => {
      run.controller.abort(reason);
    };

    expect(await run.outcome).toBe("rejected");
    expect(quick.contexts).toHaveLength(1);
    expect(quick.contexts[0]?.signal.aborted).toBe(false);
    expect(run.service.writes).toBe(0);
  });
});

describe("recorded verdicts", () => {
  it("a store that records a verdict but answers nothing is a StoreContractError that says so; nothing ran", async () => {
    /** Records the verdict, then answers nothing: a broken adapter. */
    class SilentRecorder extends ForwardingStore {
      override async recordVerdict(record: VerdictRecord): Promise<VerdictRecord> {
        await this.inner.recordVerdict(record);
        return undefined as unknown as VerdictRecord;
      }
    }
    const store = new InMemoryGuardrailStore();
    const input = turnInput();
    await admit(store, input);
    const checked = detector("checked", () => ALLOW, { tools: ["read_document"] });
    const { agent, service } = guardedAgent({ store: new SilentRecorder(store), input, script: READ_THEN_RENAME, guardrails: { guardrails: [checked.guardrail] } });
    const error = StoreContractError.find(await rejection(invokeTurn(agent, input)));

    expect(error?.message).toBe("invalid recordVerdict answer: expected the recorded verdict, got nothing");
    expect(checked.contexts).toHaveLength(1);
    expect(service.reads).toBe(0);
  });

  it("without a store, every verdict that is not allow reaches the audit sink once, with no absent field as an undefined key", async () => {
    const input = turnInput();
    const sunk: AuditSinkEvent[] = [];
    const watch = detector("watch", () => NOTICED);
    const quiet = detector("quiet", () => ALLOW);
    const agent = createAgent({
      model: new ScriptedModel(REMEMBER_ONCE),
      tools: [documentTools(new DocumentService()).remember],
      middleware: [
        createToolGuardrails({
          guardrails: [quiet.guardrail, watch.guardrail],
          tools: ["remember"],
          authorize: allowAllCalls,
          logger: { warn: () => undefined },
          audit: {
            sink: (event) => {
              sunk.push(event);
            },
          },
        }),
      ],
    });
    const result = await agent.invoke({ messages: [new HumanMessage(USER_MESSAGE)] }, { context: turnContext(input) });

    expect(outcomeOf(result.messages, "m1")).toMatchObject({ status: "success", content: "Preference saved" });
    expect(sunk.filter((event) => event.decision === "verdict")).toStrictEqual([
      {
        at: expect.any(String) as unknown,
        decision: "verdict",
        turnKey: turnKey(input),
        scopeId: input.scopeId,
        toolCallId: "m1",
        toolName: "remember",
        argsDigest: digest(remember("m1").args),
        guardrail: "watch",
        action: "observe",
      },
    ]);
  });
});
