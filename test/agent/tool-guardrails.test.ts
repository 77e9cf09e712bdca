/**
 * `createToolGuardrails`: the guardrail port on its own, for agents that edit no document, through
 * the real `createAgent` loop. Every call's arguments are checked (the schema guardrail first,
 * then the listed ones, in order) before it runs; denials are error ToolMessages; with a store,
 * verdicts are recorded under the call's turn (the trusted turn in `context`, else the thread
 * and its latest user message) and a replay reads them; approvals pause with an interrupt.
 *
 * Tools count their own runs; detectors count their own invocations.
 */
import { AIMessage, HumanMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import type { ClientTool } from "@langchain/core/tools";
import { Command, MemorySaver } from "@langchain/langgraph";
import { createAgent, createMiddleware, tool, type AgentMiddleware } from "langchain";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import {
  allowAllCalls,
  ConfigurationError,
  createToolGuardrails,
  digest,
  InMemoryGuardrailStore,
  requireApproval,
  turnContext,
  turnKey,
  type ApprovalRequest,
  type AuditEvent,
  type GuardrailVerdict,
  type ToolGuardrailsOptions,
} from "arkah-agent-guardrails";
import { toolFingerprint } from "arkah-agent-guardrails/store";
import { ScriptedModel, type ScriptStep, type ScriptedToolCall } from "arkah-agent-guardrails/testing";
import {
  detector, outcomeOf, turnInput } from "../support/fixtures.js";

// ---------------------------------------------------------------------------------------------
// Local helpers

const ALLOW: GuardrailVerdict = { action: "allow", outcome: "complete", detections: [] };

function deny(code: string, reason?: string): GuardrailVerdict {
  return { action: "deny", outcome: "complete", code, detections: [{ rule: code, detected: true }], ...(reason === undefined ? {} : { reason }) };
}

/** Payment tools that count what they did. */
function paymentTools() {
  const effects = { lookups: 0, transfers: [] as unknown[], credits: 0 };
  const lookup = tool(
    () => {
      effects.lookups += 1;
      return "balance: 120.00 EUR";
    },
    { name: "lookup", description: "Look up a balance.", schema: z.object({ account: z.string() }) },
  );
  const transfer = tool(
    (args) => {
      effects.transfers.push(args);
      return "transferred";
    },
    {
      name: "transfer",
      description: "Transfer money.",
      schema: z.object({ account: z.string().regex(/^[A-Z]{2}[0-9]{6}$/), cents: z.number().int().positive() }),
    },
  );
  const issueCredit = tool(
    () => {
      effects.credits += 1;
      return "credited";
    },
    {
      name: "issue-credit",
      description: "Issue a credit.",
      schema: { type: "object", properties: { amount: { type: "number" }, reason: false }, required: ["amount"] } as never,
    },
  );
  const tools: ClientTool[] = [lookup, transfer, issueCredit];
  return { effects, tools };
}

const LOOKUP = (id: string): ScriptedToolCall => ({ id, name: "lookup", args: { account: "DE123456" } });
const TRANSFER = (id: string, cents = 500): ScriptedToolCall => ({ id, name: "transfer", args: { account: "DE123456", cents } });

interface BuildOptions extends Partial<ToolGuardrailsOptions> {
  script: readonly ScriptStep[];
  before?: readonly AgentMiddleware[];
  checkpointer?: boolean;
}

function build(options: BuildOptions, payments = paymentTools()) {
  const { script, before = [], checkpointer = false, ...rest } = options;
  const model = new ScriptedModel(script);
  const middleware: AgentMiddleware[] = [
    ...before,
    createToolGuardrails({
      guardrails: [],
      tools: ["lookup", "transfer", "issue-credit"],
      authorize: allowAllCalls,
      logger: { warn: () => undefined },
      ...rest,
    }),
  ];
  const agent = createAgent({
    model,
    tools: payments.tools,
    middleware,
    ...(checkpointer ? { checkpointer: new MemorySaver() } : {}),
  });
  return { agent, model, effects: payments.effects };
}

const TURN = turnInput({ scopeId: "account-7", turnId: "request-1" });

/** Invokes with the trusted turn in context, as a server does per request. */
async function invokeWithTurn(agent: ReturnType<typeof build>["agent"], threadId?: string) {
  const result = await agent.invoke(
    { messages: [new HumanMessage("Pay my landlord.")] },
    { context: turnContext(TURN), ...(threadId === undefined ? {} : { configurable: { thread_id: threadId } }) },
  );
  return result.messages;
}

function body(content: string): Record<string, unknown> {
  return JSON.parse(content) as Record<string, unknown>;
}

/** `toolFingerprint` of the payment tool named `name`. */
function paymentFingerprint(name: string): string {
  const found = paymentTools().tools.find((candidate) => candidate.name === name);
  if (found === undefined) throw new Error(`no payment tool named ${name}`);
  return toolFingerprint(found);
}

function verdictKey(call: ScriptedToolCall, guardrail: string, key = turnKey(TURN)) {
  return {
    turnKey: key,
    toolCallId: call.id,
    toolName: call.name,
    toolFingerprint: paymentFingerprint(call.name),
    guardrail,
    argsDigest: digest(call.args),
  };
}

function approvalRequests(result: { __interrupt__?: { value?: unknown }[] }): ApprovalRequest[] {
  return (result.__interrupt__ ?? []).map((entry) => entry.value as ApprovalRequest);
}

function unansweredCalls(messages: readonly BaseMessage[]): string[] {
  const answered = new Set(messages.filter(ToolMessage.isInstance).map((message) => message.tool_call_id));
  return messages
    .filter(AIMessage.isInstance)
    .flatMap((message) => (message.tool_calls ?? []).map((call) => call.id ?? ""))
    .filter((id) => !answered.has(id));
}

// ---------------------------------------------------------------------------------------------

describe("the schema guardrail is always the first member", () => {
  it("invalid arguments are refused before the tool runs, every problem listed, and the loop goes on", async () => {
    const { agent, model, effects } = build({
      script: [
        { toolCalls: [{ id: "t1", name: "transfer", args: { account: "landlord", cents: -5 } }] },
        { toolCalls: [{ id: "c1", name: "issue-credit", args: { reason: "sorry" } }] },
        { toolCalls: [TRANSFER("t2")] },
        { content: "done" },
      ],
    });
    const messages = await invokeWithTurn(agent);

    const refused = outcomeOf(messages, "t1");
    expect(refused).toMatchObject({ status: "error", code: "invalid_arguments" });
    expect(((body(refused.content).issues ?? []) as { path: string }[]).map((issue) => issue.path).sort()).toEqual(["/account", "/cents"]);
    expect(body(outcomeOf(messages, "c1").content).error).toBe(
      'arguments for tool "issue-credit" do not match its inputSchema - #: Instance does not have required property "amount".; #/reason: False boolean schema.',
    );
    expect(outcomeOf(messages, "t2")).toMatchObject({ status: "success", content: "transferred" });
    expect(effects.transfers).toEqual([{ account: "DE123456", cents: 500 }]);
    expect(effects.credits).toBe(0);
    expect(model.calls).toBe(4);
  });
});

describe("verdicts, in listed order", () => {
  it("the first non-allow verdict wins; observe lets the call run; a denial is an error ToolMessage", async () => {
    const watcher = detector("watcher", { action: "observe", outcome: "complete", detections: [{ rule: "large", detected: true }] });
    const limit = detector("limit", (context) =>
      ((context.toolCall.args as { cents?: number }).cents ?? 0) > 1000 ? deny("over_limit", "Transfers over 10.00 need a manager.") : ALLOW,
      { tools: ["transfer"] },
    );
    const never = detector("never", deny("never"), { tools: ["transfer"] });
    const store = new InMemoryGuardrailStore();
    const { agent, effects } = build({
      store,
      guardrails: [watcher.guardrail, limit.guardrail, never.guardrail],
      script: [{ toolCalls: [LOOKUP("l1"), TRANSFER("t1", 5000)] }, { content: "done" }],
    });
    const messages = await invokeWithTurn(agent);

    expect(outcomeOf(messages, "l1").status).toBe("success");
    expect(effects.lookups).toBe(1);
    const refusal = outcomeOf(messages, "t1");
    expect(refusal.status).toBe("error");
    expect(body(refusal.content)).toEqual({ guardrail: "over_limit", message: "Transfers over 10.00 need a manager." });
    expect(effects.transfers).toEqual([]);
    expect([watcher.runs("t1"), limit.runs("t1"), never.runs("t1")]).toEqual([1, 1, 0]);
    expect((await store.getVerdict(verdictKey(LOOKUP("l1"), "watcher")))?.verdict.action).toBe("observe");
    expect((await store.getVerdict(verdictKey(TRANSFER("t1", 5000), "limit")))?.verdict.code).toBe("over_limit");
  });

  it("a guardrail that never answers is stopped at its timeoutMs and the call is denied partial", async () => {
    let aborted = false;
    const hanging = detector(
      "hanging",
      (context) =>
        new Promise<GuardrailVerdict>((_, reject) => {
          context.signal.addEventListener("abort", () => {
            aborted = true;
            reject(new Error("stopped"));
          });
        }),
      { tools: ["transfer"], timeoutMs: 20 },
    );
    const store = new InMemoryGuardrailStore();
    const { agent, effects } = build({ store, guardrails: [hanging.guardrail], script: [{ toolCalls: [TRANSFER("t1")] }, { content: "done" }] });
    const messages = await invokeWithTurn(agent);

    expect(aborted).toBe(true);
    expect(outcomeOf(messages, "t1")).toMatchObject({ status: "error", code: "guardrail_denied" });
    expect(effects.transfers).toEqual([]);
    expect((await store.getVerdict(verdictKey(TRANSFER("t1"), "hanging")))?.verdict).toMatchObject({
      action: "deny",
      outcome: "partial",
    });
  });

  it("a guardrail that throws is a partial denial", async () => {
    const broken = detector("broken", () => {
      throw new Error("classifier crashed");
    });
    const { agent, effects } = build({ guardrails: [broken.guardrail], script: [{ toolCalls: [LOOKUP("l1")] }, { content: "done" }] });
    const messages = await invokeWithTurn(agent);
    const refusal = outcomeOf(messages, "l1");
    expect(refusal).toMatchObject({ status: "error", code: "guardrail_denied" });
    expect(refusal.content).not.toContain("classifier crashed");
    expect(effects.lookups).toBe(0);
  });
});

describe("authorize", () => {
  it("refuses before any detector runs, unless it answers literally true", async () => {
    const counter = detector("counter", ALLOW);
    const { agent, effects } = build({
      guardrails: [counter.guardrail],
      authorize: (call) => (call.name === "transfer" ? ("yes" as unknown as boolean) : true),
      script: [{ toolCalls: [LOOKUP("l1"), TRANSFER("t1")] }, { content: "done" }],
    });
    const messages = await invokeWithTurn(agent);
    expect(outcomeOf(messages, "t1")).toMatchObject({ status: "error", code: "unauthorized" });
    expect(outcomeOf(messages, "l1").status).toBe("success");
    expect(counter.contexts.map((context) => context.toolCall.id)).toEqual(["l1"]);
    expect(effects.transfers).toEqual([]);
  });
});

describe("replays read the recorded verdicts", () => {
  it("a transport retry (fresh agent, same store, same turn in context) does not run the detector again", async () => {
    const store = new InMemoryGuardrailStore();
    const counter = detector("counter", ALLOW);
    const script = [{ toolCalls: [TRANSFER("t1")] }, { content: "done" }];
    const first = build({ store, guardrails: [counter.guardrail], script });
    await invokeWithTurn(first.agent);
    const retry = build({ store, guardrails: [counter.guardrail], script });
    await invokeWithTurn(retry.agent);

    expect(counter.runs("t1")).toBe(1);
    // No mutation slot here: the tool itself runs on each attempt.
    expect(first.effects.transfers).toHaveLength(1);
    expect(retry.effects.transfers).toHaveLength(1);
    expect(await store.getVerdict(verdictKey(TRANSFER("t1"), "counter"))).toMatchObject({ verdict: ALLOW });
  });

  it("without a turn in context, verdicts are keyed by the thread and its latest user message", async () => {
    const store = new InMemoryGuardrailStore();
    const counter = detector("counter", ALLOW);
    const { agent } = build({
      store,
      guardrails: [counter.guardrail],
      checkpointer: true,
      script: [{ toolCalls: [TRANSFER("t1")] }, { content: "done" }],
    });
    await agent.invoke(
      { messages: [new HumanMessage({ content: "Pay my landlord.", id: "human-1" })] },
      { configurable: { thread_id: "thread-9" } },
    );
    const key = turnKey({ scopeId: "thread-9", turnId: "human-1" });
    expect(await store.getVerdict(verdictKey(TRANSFER("t1"), "counter", key))).toMatchObject({ verdict: ALLOW });
    expect(counter.contexts[0]?.turn).toEqual({ scopeId: "thread-9", turnId: "human-1", turnKey: key });
  });

  it.each<[string, boolean, number]>([
    ["with a store, an outer retry middleware calling the handler again reads the verdict", true, 1],
    ["without a store, the detector runs on every attempt", false, 2],
  ])("%s", async (_name, withStore, detectorRuns) => {
    const counter = detector("counter", ALLOW);
    const outerRetry = createMiddleware({
      name: "OuterRetry",
      wrapToolCall: async (request, handler) => {
        await handler(request);
        return handler(request);
      },
    });
    const { agent, effects } = build({
      ...(withStore ? { store: new InMemoryGuardrailStore() } : {}),
      guardrails: [counter.guardrail],
      before: [outerRetry],
      script: [{ toolCalls: [LOOKUP("l1")] }, { content: "done" }],
    });
    await invokeWithTurn(agent);
    expect(effects.lookups).toBe(2);
    expect(counter.runs("l1")).toBe(detectorRuns);
  });
});

describe("approvals", () => {
  function approvalRun(options: Partial<ToolGuardrailsOptions> & { script: readonly ScriptStep[] }) {
    const store = new InMemoryGuardrailStore();
    const { agent, effects, model } = build({ store, checkpointer: true, ...options });
    const config = { context: turnContext(TURN), configurable: { thread_id: "payments" } };
    return {
      store,
      effects,
      model,
      start: () => agent.invoke({ messages: [new HumanMessage("Pay my landlord.")] }, config),
      resume: (value: unknown) => agent.invoke(new Command({ resume: value }), config),
    };
  }

  it("pauses before the tool runs, then approve runs it once without asking or checking again", async () => {
    const limit = detector("limit", ALLOW, { tools: ["transfer"] });
    const run = approvalRun({
      guardrails: [limit.guardrail, requireApproval({ tools: ["transfer"], describe: (call) => `Send ${JSON.stringify(call.args.cents)} cents?` })],
      script: [{ toolCalls: [TRANSFER("t1")] }, { content: "done" }],
    });
    const paused = await run.start();
    const approvalId = digest({
      kind: "arkah.approval",
      v: 1,
      turnKey: turnKey(TURN),
      toolName: "transfer",
      toolFingerprint: paymentFingerprint("transfer"),
      toolCallId: "t1",
      argsDigest: digest(TRANSFER("t1").args),
      execution: 0,
    });
    expect(approvalRequests(paused)).toEqual([
      {
        type: "arkah.approval",
        approvalId,
        guardrails: ["approval"],
        toolCallId: "t1",
        tool: "transfer",
        args: TRANSFER("t1").args,
        argsDigest: digest(TRANSFER("t1").args),
        reason: "Send 500 cents?",
      },
    ]);
    expect(run.effects.transfers).toEqual([]);

    const done = await run.resume({ decision: "approve" });
    expect(done.__interrupt__).toBeUndefined();
    expect(outcomeOf(done.messages, "t1").status).toBe("success");
    expect(run.effects.transfers).toHaveLength(1);
    expect(limit.runs("t1")).toBe(1);
    expect(await run.store.getApproval(approvalId)).toMatchObject({
      status: "applied",
      scopeId: TURN.scopeId,
      toolName: "transfer",
      guardrails: ["approval"],
      reason: "Send 500 cents?",
      decision: { decision: "approve" },
    });
  });

  it("reject answers approval_rejected and every other call of the step is still answered", async () => {
    const run = approvalRun({
      guardrails: [requireApproval({ tools: ["transfer"] })],
      script: [{ toolCalls: [TRANSFER("t1"), LOOKUP("l1")] }, { content: "done" }],
    });
    await run.start();
    const done = await run.resume({ decision: "reject", message: "Wrong landlord." });
    expect(body(outcomeOf(done.messages, "t1").content)).toMatchObject({
      guardrail: "approval_rejected",
      reviewerMessage: "Wrong landlord.",
    });
    expect(outcomeOf(done.messages, "l1").status).toBe("success");
    expect(unansweredCalls(done.messages)).toEqual([]);
    expect(run.effects.transfers).toEqual([]);
    expect(run.model.calls).toBe(2);
  });

  it("edit runs the edited arguments after checking them again", async () => {
    const limit = detector("limit", ALLOW, { tools: ["transfer"] });
    const run = approvalRun({
      guardrails: [requireApproval({ tools: ["transfer"] }), limit.guardrail],
      script: [{ toolCalls: [TRANSFER("t1", 5000)] }, { content: "done" }],
    });
    await run.start();
    await run.resume({ decision: "edit", args: { account: "DE123456", cents: 50 } });
    expect(run.effects.transfers).toEqual([{ account: "DE123456", cents: 50 }]);
    // Checked before the person was asked, and again on the edited arguments.
    expect(limit.contexts.map((context) => context.toolCall.args)).toEqual([
      TRANSFER("t1", 5000).args,
      { account: "DE123456", cents: 50 },
    ]);
  });

  it.each<[string, Record<string, unknown>, ToolGuardrailsOptions["authorize"], string]>([
    ["fail the schema", { account: "DE123456", cents: -1 }, undefined, "invalid_arguments"],
    ["are not authorized", { account: "FR000000", cents: 50 }, (call) => !JSON.stringify(call.args).includes("FR"), "unauthorized"],
  ])("edited arguments that %s are refused with that check's code; the request stays answerable", async (_name, args, authorize, code) => {
    const run = approvalRun({
      guardrails: [requireApproval({ tools: ["transfer"] })],
      ...(authorize === undefined ? {} : { authorize }),
      script: [{ toolCalls: [TRANSFER("t1")] }, { content: "done" }],
    });
    await run.start();
    const again = await run.resume({ decision: "edit", args });
    expect(approvalRequests(again)).toMatchObject([{ toolCallId: "t1", problem: expect.stringContaining(`refused (${code})`) as string }]);
    expect(run.effects.transfers).toEqual([]);
    await run.resume({ decision: "reject" });
    expect(run.effects.transfers).toEqual([]);
  });

  it("an invalid resume value (HITL's shape) is reported in a new interrupt; the next valid answer decides", async () => {
    const run = approvalRun({
      guardrails: [requireApproval({ tools: ["transfer"] })],
      script: [{ toolCalls: [TRANSFER("t1")] }, { content: "done" }],
    });
    await run.start();
    const again = await run.resume({ decisions: [{ type: "approve" }] });
    expect(approvalRequests(again)).toMatchObject([{ toolCallId: "t1", problem: expect.stringMatching(/not a decision/) as string }]);
    expect(run.effects.transfers).toEqual([]);
    await run.resume({ decision: "approve" });
    expect(run.effects.transfers).toHaveLength(1);
  });

  it.each<[string, boolean]>([
    ["with a store", true],
    ["without a store", false],
  ])("%s, two approving guardrails ask once for the call, and its reject stands", async (_name, withStore) => {
    const { agent, effects } = build({
      ...(withStore ? { store: new InMemoryGuardrailStore() } : {}),
      checkpointer: true,
      guardrails: [requireApproval({ tools: ["transfer"], name: "first" }), requireApproval({ tools: ["transfer"], name: "second" })],
      script: [{ toolCalls: [TRANSFER("t1")] }, { content: "done" }],
    });
    const config = { context: turnContext(TURN), configurable: { thread_id: "two-approvals" } };
    let result = await agent.invoke({ messages: [new HumanMessage("Pay my landlord.")] }, config);
    const asked: (readonly string[])[] = [];
    for (let round = 0; round < 6 && (result.__interrupt__?.length ?? 0) > 0; round++) {
      const answers: Record<string, unknown> = {};
      for (const entry of result.__interrupt__ ?? []) {
        asked.push((entry.value as ApprovalRequest).guardrails);
        answers[entry.id ?? ""] = { decision: "reject" };
      }
      result = await agent.invoke(new Command({ resume: answers }), config);
    }

    expect(asked).toEqual([["first", "second"]]);
    expect(outcomeOf(result.messages, "t1")).toMatchObject({ status: "error", code: "approval_rejected" });
    expect(effects.transfers).toEqual([]);
  });
});

describe("audit", () => {
  it("verdicts and refusals reach the sink and the store with turn key, scope, call id, tool and digest; no values", async () => {
    const store = new InMemoryGuardrailStore();
    const sunk: AuditEvent[] = [];
    const { agent } = build({
      store,
      guardrails: [detector("limit", deny("over_limit"), { tools: ["transfer"] }).guardrail],
      audit: {
        sink: (event) => {
          sunk.push(event);
        },
      },
      script: [{ toolCalls: [TRANSFER("t1")] }, { content: "done" }],
    });
    await invokeWithTurn(agent);

    const common = { turnKey: turnKey(TURN), scopeId: "account-7", toolCallId: "t1", toolName: "transfer", argsDigest: digest(TRANSFER("t1").args) };
    expect(sunk).toMatchObject([
      { ...common, decision: "verdict", guardrail: "limit", action: "deny", code: "over_limit" },
      { ...common, decision: "refused", guardrail: "limit", code: "over_limit" },
    ]);
    expect(await store.readAudit()).toEqual(sunk);
    expect(JSON.stringify(sunk)).not.toContain("DE123456");
  });

  it("a call that was allowed and ran is audited as executed", async () => {
    const sunk: AuditEvent[] = [];
    const { agent, effects } = build({
      store: new InMemoryGuardrailStore(),
      audit: {
        sink: (event) => {
          sunk.push(event);
        },
      },
      script: [{ toolCalls: [LOOKUP("l1")] }, { content: "done" }],
    });
    await invokeWithTurn(agent);
    expect(effects.lookups).toBe(1);
    expect(sunk).toMatchObject([{ decision: "executed", toolCallId: "l1", toolName: "lookup", argsDigest: digest(LOOKUP("l1").args) }]);
  });
});

describe("configuration", () => {
  it("invalid options are a ConfigurationError", () => {
    expect(() => createToolGuardrails({} as ToolGuardrailsOptions)).toThrow(ConfigurationError);
    expect(() => createToolGuardrails({ guardrails: [], retries: 3 } as unknown as ToolGuardrailsOptions)).toThrow(ConfigurationError);
    const twin = detector("twin", ALLOW).guardrail;
    expect(() => createToolGuardrails({ guardrails: [twin, twin], tools: ["lookup"] })).toThrow(ConfigurationError);
    expect(() => createToolGuardrails({ guardrails: [], tools: [] })).toThrow(/list at least one tool/);
  });
});
