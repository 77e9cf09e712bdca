/**
 * Step 5 of the decision (design §3) through the real `createAgent` loop: the guardrail port on
 * `createDocumentGuardrails`. Guardrails run in listed order after `authorize` and before anything
 * runs or is claimed; the first verdict that is not `allow` wins; `observe` records and lets the
 * call run; a check that throws, times out or answers nonsense is a `partial` denial; a denial is
 * an error ToolMessage that consumes no slot; every verdict is recorded under (turn, call id,
 * tool name and fingerprint, guardrail, argument digest) and a replay of the same call reads it instead of running the
 * detector again.
 *
 * Every guardrail here counts its own detector invocations (a counter inside `check`); every
 * side effect is counted by the tools themselves (`service.writes`, `service.reads`, effects).
 */
import { HumanMessage } from "@langchain/core/messages";
import type { ClientTool } from "@langchain/core/tools";
import { Command, interrupt, MemorySaver } from "@langchain/langgraph";
import { createAgent, createMiddleware, tool } from "langchain";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import {
  ConfigurationError,
  createDocumentGuardrails,
  createSchemaGuardrail,
  digest,
  InMemoryGuardrailStore,
  requireApproval,
  turnKey,
  type Authorize,
  type Guardrail,
  type GuardrailVerdict,
  type TurnInput,
} from "arkah-agent-guardrails";
import { toolFingerprint } from "arkah-agent-guardrails/store";
import { ScriptedModel, type ScriptStep } from "arkah-agent-guardrails/testing";
import {
  detector,
  admit,
  DocumentService,
  documentToolFingerprint,
  documentTools,
  guardedAgent,
  invokeTurn,
  outcomeOf,
  read,
  remember,
  rename,
  TOOL_POLICIES,
  turnInput,
  USER_MESSAGE,
} from "../support/fixtures.js";

// ---------------------------------------------------------------------------------------------
// Local helpers

const RENAMED = '{"title":"Field notes","revision":1}';
const QUIET = { warn: () => undefined };

const ALLOW: GuardrailVerdict = { action: "allow", outcome: "complete", detections: [] };
const OBSERVE: GuardrailVerdict = {
  action: "observe",
  outcome: "complete",
  detections: [{ rule: "profanity", detected: true, score: 0.4 }],
  reason: "would have refused: mild language",
};

function deny(code: string, reason?: string, details?: GuardrailVerdict["details"]): GuardrailVerdict {
  return {
    action: "deny",
    outcome: "complete",
    code,
    detections: [{ rule: code, detected: true }],
    ...(reason === undefined ? {} : { reason }),
    ...(details === undefined ? {} : { details }),
  };
}

interface Turn {
  store: InMemoryGuardrailStore;
  service: DocumentService;
  input: TurnInput;
}

async function admittedTurn(): Promise<Turn> {
  const turn = { store: new InMemoryGuardrailStore(), service: new DocumentService(), input: turnInput() };
  await admit(turn.store, turn.input);
  return turn;
}

/** One invocation of a turn: a fresh agent and middleware over the turn's store and service. */
async function invoke(turn: Turn, script: readonly ScriptStep[], guardrails: readonly Guardrail[], authorize?: Authorize) {
  const { agent, model } = guardedAgent({
    ...turn,
    script,
    guardrails: { guardrails, ...(authorize === undefined ? {} : { authorize }) },
  });
  const messages = await invokeTurn(agent, turn.input);
  return { messages, model };
}

function body(content: string): Record<string, unknown> {
  return JSON.parse(content) as Record<string, unknown>;
}

function verdictKey(input: TurnInput, call: { id: string; name: string; args: unknown }, guardrail: string) {
  return {
    turnKey: turnKey(input),
    toolCallId: call.id,
    toolName: call.name,
    toolFingerprint: documentToolFingerprint(call.name),
    guardrail,
    argsDigest: digest(call.args),
  };
}

/** A JSON Schema tool, as an MCP adapter builds one: no zod schema to fall back on. */
function creditTool(effects: { credits: number }) {
  return tool(
    () => {
      effects.credits += 1;
      return "credited";
    },
    {
      name: "issue-credit",
      description: "Issue a credit.",
      schema: {
        type: "object",
        properties: { amount: { type: "number" }, reason: { type: "string" } },
        required: ["amount"],
      },
    },
  );
}

// ---------------------------------------------------------------------------------------------

describe("what a guardrail is given", () => {
  it("the call, the tool's name, kind and declared JSON Schema, the turn and a live abort signal", async () => {
    const turn = await admittedTurn();
    const seen = detector("inspector", ALLOW);
    let signalAbortedDuringCheck: boolean | undefined;
    const inspector: Guardrail = {
      ...seen.guardrail,
      check: (context) => {
        signalAbortedDuringCheck = context.signal.aborted;
        return seen.guardrail.check(context);
      },
    };
    await invoke(turn, [{ toolCalls: [read("r1")] }, { toolCalls: [rename("w1")] }, { content: "done" }], [inspector]);

    expect(seen.runs()).toBe(2);
    const [readContext, renameContext] = seen.contexts;
    expect(readContext?.placement).toBe("tool-args");
    expect(readContext?.toolCall).toEqual({ id: "r1", name: "read_document", args: {}, rawArgs: {} });
    expect(readContext?.tool.kind).toBe("document-read");
    const renameArgs = { title: "Field notes", expectedRevision: 0 };
    expect(renameContext?.toolCall).toEqual({ id: "w1", name: "rename_document", args: renameArgs, rawArgs: renameArgs });
    expect(renameContext?.tool.name).toBe("rename_document");
    expect(renameContext?.tool.kind).toBe("mutation");
    // The zod schema of the tool, as JSON Schema.
    expect(renameContext?.tool.schema).toMatchObject({
      type: "object",
      properties: { title: { type: "string", minLength: 1 }, expectedRevision: { type: "integer", minimum: 0 } },
      required: ["title", "expectedRevision"],
    });
    expect(renameContext?.turn).toEqual({ scopeId: "doc-1", turnId: "turn-1", turnKey: turnKey(turn.input) });
    expect(renameContext?.signal).toBeInstanceOf(AbortSignal);
    expect(signalAbortedDuringCheck).toBe(false);
    expect(turn.service.writes).toBe(1);
  });

  it("changing the arguments it was given changes nothing: the tool runs with the model's arguments", async () => {
    const turn = await admittedTurn();
    const meddler = detector("meddler", (context) => {
      const args = context.toolCall.args as Record<string, unknown>;
      args.title = "Hijacked";
      return ALLOW;
    });
    const { messages } = await invoke(
      turn,
      [{ toolCalls: [read("r1")] }, { toolCalls: [rename("w1")] }, { content: "done" }],
      [meddler.guardrail],
    );
    expect(meddler.runs("w1")).toBe(1);
    expect(outcomeOf(messages, "w1")).toMatchObject({ status: "success", content: RENAMED });
    expect(turn.service.title).toBe("Field notes");
  });

  it("changing the schema it was given changes nothing: a later invalid call is still refused (the context is a copy)", async () => {
    const turn = await admittedTurn();
    const effects = { credits: 0 };
    // A misbehaving guardrail that loosens the schema it was shown.
    const meddler = detector("meddler", (context) => {
      try {
        const schema = context.tool.schema as { required?: unknown; properties?: Record<string, unknown> };
        delete schema.required;
        if (schema.properties !== undefined) schema.properties.amount = true;
      } catch {
        // A frozen copy refuses the change: that is fine.
      }
      return ALLOW;
    });
    const { readDocument } = documentTools(turn.service);
    const agent = createAgent({
      model: new ScriptedModel([
        { toolCalls: [{ id: "c1", name: "issue-credit", args: { amount: 5 } }] },
        { toolCalls: [{ id: "c2", name: "issue-credit", args: { amount: "lots" } }] },
        { content: "done" },
      ]),
      tools: [readDocument, creditTool(effects)],
      middleware: [
        createDocumentGuardrails({
          input: turn.input,
          store: turn.store,
          userMessageLabel: "user",
          authorize: () => true,
          tools: { read_document: { kind: "document-read" }, "issue-credit": { kind: "auxiliary" } },
          guardrails: [meddler.guardrail],
          logger: QUIET,
        }),
      ],
    });
    const messages = await invokeTurn(agent, turn.input);

    expect(outcomeOf(messages, "c1").status).toBe("success");
    expect(outcomeOf(messages, "c2")).toMatchObject({ status: "error", code: "invalid_arguments" });
    expect(effects.credits).toBe(1);
  });

  it("changing the turn it was given changes nothing: later verdicts are recorded under the real turn key", async () => {
    const turn = await admittedTurn();
    const meddler = detector("meddler", (context) => {
      try {
        (context.turn as { turnKey: string }).turnKey = "0".repeat(64);
      } catch {
        // A frozen copy refuses the change: that is fine.
      }
      return ALLOW;
    });
    const after = detector("after", OBSERVE);
    await invoke(turn, [{ toolCalls: [remember("m1")] }, { content: "done" }], [meddler.guardrail, after.guardrail]);

    expect(after.runs("m1")).toBe(1);
    const recorded = await turn.store.getVerdict(verdictKey(turn.input, remember("m1"), "after"));
    expect(recorded?.verdict.action).toBe("observe");
    const events = await turn.store.readAudit();
    expect(events.filter((event) => event.toolCallId === "m1").map((event) => event.turnKey)).not.toContain("0".repeat(64));
  });
});

describe("in listed order, the first verdict that is not allow wins", () => {
  it("a later guardrail never runs after an earlier refusal, and cannot overturn it", async () => {
    const turn = await admittedTurn();
    const first = detector("first", deny("pii_detected", "The title contains a phone number."));
    const second = detector("second", deny("other_policy", "Other reason."));
    const { messages } = await invoke(
      turn,
      [{ toolCalls: [read("r1")] }, { toolCalls: [rename("w1")] }, { content: "done" }],
      [first.guardrail, second.guardrail],
    );
    // r1 is denied by `first` too (no tools filter), so the rename has no read evidence either way;
    // what matters is which code the model receives and which detectors ran.
    expect(outcomeOf(messages, "r1")).toMatchObject({ status: "error", code: "pii_detected" });
    expect(outcomeOf(messages, "w1")).toMatchObject({ status: "error", code: "pii_detected" });
    expect(first.runs()).toBe(2);
    expect(second.runs()).toBe(0);
    expect(turn.service.reads).toBe(0);
    expect(turn.service.writes).toBe(0);
  });

  it("allow passes to the next guardrail; the first refusal among them is the one reported", async () => {
    const turn = await admittedTurn();
    const a = detector("a", ALLOW, { tools: ["rename_document"] });
    const b = detector("b", deny("tone_policy", "Titles must not shout."), { tools: ["rename_document"] });
    const c = detector("c", deny("never_reached"), { tools: ["rename_document"] });
    const { messages } = await invoke(
      turn,
      [{ toolCalls: [read("r1")] }, { toolCalls: [rename("w1")] }, { content: "done" }],
      [a.guardrail, b.guardrail, c.guardrail],
    );
    const refusal = outcomeOf(messages, "w1");
    expect(refusal).toMatchObject({ status: "error", code: "tone_policy" });
    expect(body(refusal.content).message).toBe("Titles must not shout.");
    expect([a.runs(), b.runs(), c.runs()]).toEqual([1, 1, 0]);
    expect(turn.service.reads).toBe(1);
    expect(turn.service.writes).toBe(0);
  });

  it("the schema guardrail is the default first member: invalid arguments never reach a custom detector", async () => {
    const turn = await admittedTurn();
    const policy = detector("policy", deny("policy_says_no"), { tools: ["rename_document"] });
    const { messages } = await invoke(
      turn,
      [{ toolCalls: [read("r1")] }, { toolCalls: [{ id: "w1", name: "rename_document", args: { title: "" } }] }, { content: "done" }],
      [policy.guardrail],
    );
    expect(outcomeOf(messages, "w1").code).toBe("invalid_arguments");
    expect(policy.runs()).toBe(0);
  });

  it("the tool's own parse comes before every guardrail, whatever the list's order", async () => {
    const turn = await admittedTurn();
    const policy = detector("policy", deny("policy_says_no"), { tools: ["rename_document"] });
    const { messages } = await invoke(
      turn,
      [{ toolCalls: [read("r1")] }, { toolCalls: [{ id: "w1", name: "rename_document", args: { title: "" } }] }, { content: "done" }],
      [policy.guardrail, createSchemaGuardrail({ name: "strict-schema" })],
    );
    // Arguments the tool would reject never reach a guardrail, so no verdict is recorded either.
    expect(outcomeOf(messages, "w1").code).toBe("invalid_arguments");
    expect(policy.runs()).toBe(0);
    expect(await turn.store.getVerdict(verdictKey(turn.input, { ...rename("w1"), args: { title: "" } }, "policy"))).toBeUndefined();
    expect(await turn.store.getVerdict(verdictKey(turn.input, { ...rename("w1"), args: { title: "" } }, "strict-schema"))).toBeUndefined();
  });

  it("a schema guardrail in the list replaces the default and keeps its listed place", async () => {
    const turn = await admittedTurn();
    const policy = detector("policy", deny("policy_says_no"), { tools: ["rename_document"] });
    const { messages } = await invoke(
      turn,
      [{ toolCalls: [read("r1")] }, { toolCalls: [rename("w1")] }, { content: "done" }],
      [policy.guardrail, createSchemaGuardrail({ name: "strict-schema" })],
    );
    // The policy now comes first and its refusal wins; the listed schema guardrail never ran.
    expect(outcomeOf(messages, "w1").code).toBe("policy_says_no");
    expect(policy.runs()).toBe(1);
    expect(await turn.store.getVerdict(verdictKey(turn.input, rename("w1"), "schema"))).toBeUndefined();
    expect(await turn.store.getVerdict(verdictKey(turn.input, rename("w1"), "strict-schema"))).toBeUndefined();
  });

  it("only guardrails for the tool-args placement and for the call's tool run", async () => {
    const turn = await admittedTurn();
    const onlyRemember = detector("only-remember", ALLOW, { tools: ["remember"] });
    const modelOutput = detector("model-output", deny("never"), { placements: ["model-output"] });
    await invoke(
      turn,
      [{ toolCalls: [read("r1")] }, { toolCalls: [rename("w1")] }, { toolCalls: [remember("m1")] }, { content: "done" }],
      [onlyRemember.guardrail, modelOutput.guardrail],
    );
    expect(onlyRemember.contexts.map((context) => context.toolCall.id)).toEqual(["m1"]);
    expect(modelOutput.runs()).toBe(0);
    expect(turn.service.writes).toBe(1);
  });
});

describe("observe records what it would have refused and lets the call run", () => {
  it("the mutation runs, the observe verdict is recorded and audited, and later guardrails still run", async () => {
    const turn = await admittedTurn();
    const watcher = detector("watcher", OBSERVE, { tools: ["rename_document"] });
    const later = detector("later", ALLOW, { tools: ["rename_document"] });
    const { messages } = await invoke(
      turn,
      [{ toolCalls: [read("r1")] }, { toolCalls: [rename("w1")] }, { content: "done" }],
      [watcher.guardrail, later.guardrail],
    );
    expect(outcomeOf(messages, "w1")).toMatchObject({ status: "success", content: RENAMED });
    expect(turn.service.writes).toBe(1);
    expect([watcher.runs(), later.runs()]).toEqual([1, 1]);

    const recorded = await turn.store.getVerdict(verdictKey(turn.input, rename("w1"), "watcher"));
    expect(recorded?.verdict).toEqual(OBSERVE);
    const verdictEvents = (await turn.store.readAudit()).filter((event) => event.decision === "verdict");
    expect(verdictEvents).toMatchObject([{ toolCallId: "w1", guardrail: "watcher", action: "observe" }]);
  });

  it("an observe does not stop a later refusal", async () => {
    const turn = await admittedTurn();
    const watcher = detector("watcher", OBSERVE, { tools: ["rename_document"] });
    const blocker = detector("blocker", deny("blocked_title"), { tools: ["rename_document"] });
    const { messages } = await invoke(
      turn,
      [{ toolCalls: [read("r1")] }, { toolCalls: [rename("w1")] }, { content: "done" }],
      [watcher.guardrail, blocker.guardrail],
    );
    expect(outcomeOf(messages, "w1").code).toBe("blocked_title");
    expect(turn.service.writes).toBe(0);
  });
});

describe("a denial is an error ToolMessage, never an exception", () => {
  it("the model reads the code, reason and details, the tool runs zero times, and the run goes on", async () => {
    const turn = await admittedTurn();
    const pii = detector("pii", deny("pii_detected", "The title contains a phone number.", { field: "/title" }), {
      tools: ["rename_document"],
    });
    const { messages, model } = await invoke(
      turn,
      [{ toolCalls: [read("r1")] }, { toolCalls: [rename("w1", "Call 555-0100")] }, { content: "done" }],
      [pii.guardrail],
    );
    const refusal = outcomeOf(messages, "w1");
    expect(refusal.status).toBe("error");
    expect(body(refusal.content)).toEqual({
      guardrail: "pii_detected",
      message: "The title contains a phone number.",
      field: "/title",
    });
    expect(model.calls).toBe(3);
    expect(turn.service.writes).toBe(0);
    expect(turn.service.title).toBe("Untitled");
  });

  it("a denial's details cannot overwrite the refusal code the model reads", async () => {
    const turn = await admittedTurn();
    const sneaky = detector("sneaky", deny("pii_detected", "Remove the phone number.", { guardrail: "approval_rejected", field: "/title" }), {
      tools: ["remember"],
    });
    const { messages } = await invoke(turn, [{ toolCalls: [remember("m1")] }, { content: "done" }], [sneaky.guardrail]);
    const refusal = body(outcomeOf(messages, "m1").content);
    expect(refusal.guardrail).toBe("pii_detected");
    expect(refusal.message).toBe("Remove the phone number.");
    expect(refusal.field).toBe("/title");
  });

  it("a denial without a code or reason is guardrail_denied with the fixed message", async () => {
    const turn = await admittedTurn();
    const bare = detector("bare", { action: "deny", outcome: "complete", detections: [] }, { tools: ["remember"] });
    const { messages } = await invoke(turn, [{ toolCalls: [remember("m1")] }, { content: "done" }], [bare.guardrail]);
    const refusal = outcomeOf(messages, "m1");
    expect(refusal.code).toBe("guardrail_denied");
    expect(body(refusal.content).message).toMatch(/A guardrail refused this call/);
  });

  it("a denied mutation does not consume the turn's slot: the corrected call in the next step writes once", async () => {
    const turn = await admittedTurn();
    const shouting = detector(
      "no-shouting",
      (context) =>
        String((context.toolCall.args as { title?: unknown }).title).toUpperCase() ===
        String((context.toolCall.args as { title?: unknown }).title)
          ? deny("shouting", "Do not use an all-caps title.")
          : ALLOW,
      { tools: ["rename_document"] },
    );
    const { messages } = await invoke(
      turn,
      [
        { toolCalls: [read("r1")] },
        { toolCalls: [rename("w1", "FIELD NOTES")] },
        { toolCalls: [rename("w2", "Field notes")] },
        { content: "done" },
      ],
      [shouting.guardrail],
    );
    expect(outcomeOf(messages, "w1").code).toBe("shouting");
    expect(outcomeOf(messages, "w2")).toMatchObject({ status: "success", content: RENAMED });
    expect(turn.service.writes).toBe(1);
    expect(await turn.store.listUnresolved()).toEqual([]);
  });
});

describe("guardrails run after authorization and before any claim", () => {
  it("an unauthorized call is refused before any detector runs", async () => {
    const turn = await admittedTurn();
    const counter = detector("counter", ALLOW);
    const { messages } = await invoke(
      turn,
      [{ toolCalls: [read("r1")] }, { toolCalls: [rename("w1")] }, { content: "done" }],
      [counter.guardrail],
      (call) => call.kind !== "mutation",
    );
    expect(outcomeOf(messages, "w1").code).toBe("unauthorized");
    expect(counter.contexts.map((context) => context.toolCall.id)).toEqual(["r1"]);
    expect(turn.service.writes).toBe(0);
  });

  it("a denied mutation leaves no claim behind, not even a pending one", async () => {
    const turn = await admittedTurn();
    const blocker = detector("blocker", deny("blocked"), { tools: ["rename_document"] });
    await invoke(turn, [{ toolCalls: [read("r1")] }, { toolCalls: [rename("w1")] }, { content: "done" }], [blocker.guardrail]);
    expect(await turn.store.listUnresolved()).toEqual([]);
    // The slot is free: a later invocation of the turn without the blocker writes.
    const { messages } = await invoke(turn, [{ toolCalls: [read("r2")] }, { toolCalls: [rename("w2")] }, { content: "done" }], []);
    expect(outcomeOf(messages, "w2").status).toBe("success");
    expect(turn.service.writes).toBe(1);
  });
});

describe("a check that cannot finish is a partial denial", () => {
  it("a guardrail that throws: deny with outcome partial, nothing of the error reaches the model, later guardrails do not run", async () => {
    const turn = await admittedTurn();
    const broken = detector(
      "broken",
      () => {
        throw new Error("moderation backend at 10.0.0.7 refused: token=sk-live-123");
      },
      { tools: ["rename_document"] },
    );
    const later = detector("later", ALLOW, { tools: ["rename_document"] });
    const { messages } = await invoke(
      turn,
      [{ toolCalls: [read("r1")] }, { toolCalls: [rename("w1")] }, { content: "done" }],
      [broken.guardrail, later.guardrail],
    );
    const refusal = outcomeOf(messages, "w1");
    expect(refusal).toMatchObject({ status: "error", code: "guardrail_denied" });
    expect(refusal.content).not.toContain("10.0.0.7");
    expect(refusal.content).not.toContain("sk-live-123");
    expect(later.runs()).toBe(0);
    expect(turn.service.writes).toBe(0);
    const recorded = await turn.store.getVerdict(verdictKey(turn.input, rename("w1"), "broken"));
    expect(recorded?.verdict).toMatchObject({ action: "deny", outcome: "partial" });
  });

  it("a guardrail that rejects asynchronously is a partial denial too", async () => {
    const turn = await admittedTurn();
    const broken = detector("broken", () => Promise.reject(new Error("upstream 503")), { tools: ["remember"] });
    const { messages } = await invoke(turn, [{ toolCalls: [remember("m1")] }, { content: "done" }], [broken.guardrail]);
    expect(outcomeOf(messages, "m1")).toMatchObject({ status: "error", code: "guardrail_denied" });
    const recorded = await turn.store.getVerdict(verdictKey(turn.input, remember("m1"), "broken"));
    expect(recorded?.verdict).toMatchObject({ action: "deny", outcome: "partial" });
  });

  it("a guardrail that never answers is stopped at its timeoutMs: its signal is aborted and the call is denied partial", async () => {
    const turn = await admittedTurn();
    let abortedSignal = false;
    const hanging = detector(
      "hanging",
      (context) =>
        new Promise<GuardrailVerdict>((_, reject) => {
          context.signal.addEventListener(
            "abort",
            () => {
              abortedSignal = true;
              reject(new Error("aborted"));
            },
            { once: true },
          );
        }),
      { tools: ["rename_document"], timeoutMs: 20 },
    );
    const { messages } = await invoke(
      turn,
      [{ toolCalls: [read("r1")] }, { toolCalls: [rename("w1")] }, { content: "done" }],
      [hanging.guardrail],
    );
    expect(abortedSignal).toBe(true);
    expect(outcomeOf(messages, "w1")).toMatchObject({ status: "error", code: "guardrail_denied" });
    expect(turn.service.writes).toBe(0);
    const recorded = await turn.store.getVerdict(verdictKey(turn.input, rename("w1"), "hanging"));
    expect(recorded?.verdict).toMatchObject({ action: "deny", outcome: "partial" });
  });

  it("a guardrail that answers something that is not a verdict is a partial denial", async () => {
    const turn = await admittedTurn();
    const nonsense = detector("nonsense", () => ({ action: "maybe" }), { tools: ["remember"] });
    const { messages } = await invoke(turn, [{ toolCalls: [remember("m1")] }, { content: "done" }], [nonsense.guardrail]);
    expect(outcomeOf(messages, "m1").code).toBe("guardrail_denied");
    const recorded = await turn.store.getVerdict(verdictKey(turn.input, remember("m1"), "nonsense"));
    expect(recorded?.verdict).toMatchObject({ action: "deny", outcome: "partial" });
  });
});

describe("verdicts are recorded and a replay of the same call reads them", () => {
  it("records each verdict under turn, call id, tool, guardrail name and argument digest", async () => {
    const turn = await admittedTurn();
    const watcher = detector("watcher", OBSERVE, { tools: ["rename_document"] });
    await invoke(turn, [{ toolCalls: [read("r1")] }, { toolCalls: [rename("w1")] }, { content: "done" }], [watcher.guardrail]);

    const key = verdictKey(turn.input, rename("w1"), "watcher");
    expect(await turn.store.getVerdict(key)).toMatchObject({ ...key, verdict: OBSERVE });
    // A zod tool's own parse is all the schema guardrail would check: it does not run, so nothing
    // is recorded under its name.
    expect(await turn.store.getVerdict({ ...key, guardrail: "schema" })).toBeUndefined();
    // Nothing under another call id, another tool, other arguments or another turn.
    expect(await turn.store.getVerdict({ ...key, toolCallId: "w2" })).toBeUndefined();
    expect(await turn.store.getVerdict({ ...key, toolName: "remember" })).toBeUndefined();
    expect(await turn.store.getVerdict({ ...key, toolFingerprint: documentToolFingerprint("remember") })).toBeUndefined();
    expect(await turn.store.getVerdict({ ...key, argsDigest: digest({ title: "Other", expectedRevision: 0 }) })).toBeUndefined();
    expect(
      await turn.store.getVerdict({ ...key, turnKey: turnKey({ scopeId: "doc-1", turnId: "turn-2" }) }),
    ).toBeUndefined();
  });

  it("a transport retry of the turn does not run the detectors again, and the recorded refusal stands", async () => {
    const turn = await admittedTurn();
    let refuse = true;
    const flaky = detector("flaky", () => (refuse ? deny("blocked_now") : ALLOW), { tools: ["rename_document"] });
    const script = (readId: string) => [{ toolCalls: [read(readId)] }, { toolCalls: [rename("w1")] }, { content: "done" }];

    const first = await invoke(turn, script("r1"), [flaky.guardrail]);
    expect(outcomeOf(first.messages, "w1").code).toBe("blocked_now");
    expect(flaky.runs("w1")).toBe(1);

    // The detector would now allow; the same call (same id, same arguments) replays the verdict.
    refuse = false;
    const retry = await invoke(turn, script("r2"), [flaky.guardrail]);
    expect(outcomeOf(retry.messages, "w1").code).toBe("blocked_now");
    expect(flaky.runs("w1")).toBe(1);
    expect(turn.service.writes).toBe(0);
  });

  it("a retry through a tool whose description changed is checked again: the recorded refusal does not answer it", async () => {
    const turn = await admittedTurn();
    let refuse = true;
    const flaky = detector("flaky", () => (refuse ? deny("blocked_now") : ALLOW), { tools: ["rename_document"] });
    const script = (readId: string) => [{ toolCalls: [read(readId)] }, { toolCalls: [rename("w1")] }, { content: "done" }];
    const first = await invoke(turn, script("r1"), [flaky.guardrail]);
    expect(outcomeOf(first.messages, "w1").code).toBe("blocked_now");

    // The same call to a rename tool the model is now shown another description of.
    refuse = false;
    const tools = documentTools(turn.service);
    const redescribed = tool(({ title, expectedRevision }) => turn.service.rename(title, expectedRevision), {
      name: "rename_document",
      description: "Rename the document. The title must be short.",
      schema: z.object({ title: z.string().min(1), expectedRevision: z.number().int().min(0) }),
    });
    const agent = createAgent({
      model: new ScriptedModel(script("r2")),
      tools: [tools.readDocument, tools.searchSources, redescribed, tools.remember],
      middleware: [
        createDocumentGuardrails({
          input: turn.input,
          store: turn.store,
          userMessageLabel: "user",
          authorize: () => true,
          tools: TOOL_POLICIES,
          guardrails: [flaky.guardrail],
          logger: { warn: () => undefined },
        }),
      ],
    });
    const retry = await invokeTurn(agent, turn.input);
    expect(flaky.runs("w1")).toBe(2);
    expect(outcomeOf(retry, "w1").status).toBe("success");
    expect(turn.service.writes).toBe(1);
    const key = verdictKey(turn.input, rename("w1"), "flaky");
    expect((await turn.store.getVerdict(key))?.verdict.action).toBe("deny");
    expect((await turn.store.getVerdict({ ...key, toolFingerprint: toolFingerprint(redescribed) }))?.verdict.action).toBe("allow");
  });

  it("a transport retry of an allowed call reads the verdicts; the mutation replays without running the detector", async () => {
    const turn = await admittedTurn();
    const counter = detector("counter", ALLOW);
    const script = (readId: string) => [{ toolCalls: [read(readId)] }, { toolCalls: [rename("w1")] }, { content: "done" }];
    await invoke(turn, script("r1"), [counter.guardrail]);
    await invoke(turn, script("r2"), [counter.guardrail]);
    expect(counter.runs("w1")).toBe(1);
    // Reads under new ids are new calls: each is checked once.
    expect(counter.runs("r1")).toBe(1);
    expect(counter.runs("r2")).toBe(1);
    expect(turn.service.writes).toBe(1);
  });

  it("the same call id with other arguments is another call: the detector runs again", async () => {
    const turn = await admittedTurn();
    const counter = detector("counter", ALLOW, { tools: ["rename_document"] });
    await invoke(turn, [{ toolCalls: [read("r1")] }, { toolCalls: [rename("w1", "Field notes")] }, { content: "done" }], [counter.guardrail]);
    const second = await invoke(
      turn,
      [{ toolCalls: [read("r2")] }, { toolCalls: [rename("w1", "Other title", 1)] }, { content: "done" }],
      [counter.guardrail],
    );
    expect(counter.runs("w1")).toBe(2);
    expect(counter.contexts.map((context) => (context.toolCall.args as { title: string }).title)).toEqual([
      "Field notes",
      "Other title",
    ]);
    // The claim, not the guardrail, refuses the changed call.
    expect(outcomeOf(second.messages, "w1").code).toBe("mutation_conflict");
    expect(turn.service.writes).toBe(1);
  });

  it("an outer retry middleware that calls the handler again does not run the detector again", async () => {
    const turn = await admittedTurn();
    const counter = detector("counter", ALLOW, { tools: ["read_document", "remember"] });
    const blocker = detector("blocker", deny("no_memory"), { tools: ["remember"] });
    let attempts = 0;
    const outerRetry = createMiddleware({
      name: "OuterRetry",
      wrapToolCall: async (request, handler) => {
        attempts += 1;
        await handler(request);
        return handler(request);
      },
    });
    const agent = createAgent({
      model: new ScriptedModel([{ toolCalls: [read("r1"), remember("m1")] }, { content: "done" }]),
      tools: documentTools(turn.service).all,
      middleware: [
        outerRetry,
        createDocumentGuardrails({
          input: turn.input,
          store: turn.store,
          userMessageLabel: "user",
          authorize: () => true,
          tools: TOOL_POLICIES,
          guardrails: [counter.guardrail, blocker.guardrail],
          logger: QUIET,
        }),
      ],
    });
    const messages = await invokeTurn(agent, turn.input);

    expect(attempts).toBe(2);
    // The read ran twice (the outer layer asked twice); its detector ran once.
    expect(turn.service.reads).toBe(2);
    expect(counter.runs("r1")).toBe(1);
    // The denial was answered twice from the recorded verdicts.
    expect(outcomeOf(messages, "m1").code).toBe("no_memory");
    expect(counter.runs("m1")).toBe(1);
    expect(blocker.runs("m1")).toBe(1);
  });

  it("a resume that re-runs an interrupted call's whole wrap chain does not run the detector again", async () => {
    const turn = await admittedTurn();
    const counter = detector("counter", ALLOW, { tools: ["ask_user"] });
    let asked = 0;
    const askUser = tool(
      () => {
        asked += 1;
        const answer: unknown = interrupt({ question: "Short titles from now on?" });
        return `noted: ${String(answer)}`;
      },
      { name: "ask_user", description: "Ask the user.", schema: z.object({ question: z.string() }) },
    );
    const agent = createAgent({
      model: new ScriptedModel([{ toolCalls: [{ id: "q1", name: "ask_user", args: { question: "short?" } }] }, { content: "done" }]),
      tools: [...documentTools(turn.service).all, askUser] as ClientTool[],
      middleware: [
        createDocumentGuardrails({
          input: turn.input,
          store: turn.store,
          userMessageLabel: "user",
          authorize: () => true,
          tools: { ...TOOL_POLICIES, ask_user: { kind: "auxiliary" } },
          guardrails: [counter.guardrail],
          logger: QUIET,
        }),
      ],
      checkpointer: new MemorySaver(),
    });
    const config = { configurable: { thread_id: "guardrails-resume" } };
    const paused = await agent.invoke({ messages: [new HumanMessage(USER_MESSAGE)] }, config);
    expect(paused.__interrupt__).toHaveLength(1);
    const resumed = await agent.invoke(new Command({ resume: "yes" }), config);

    expect(outcomeOf(resumed.messages, "q1")).toMatchObject({ status: "success", content: "noted: yes" });
    expect(asked).toBe(2); // the tool itself re-ran from its start, as LangGraph does
    expect(counter.runs("q1")).toBe(1);
  });
});

describe("configuration", () => {
  it("two guardrails with one name are a ConfigurationError at construction", () => {
    const build = () =>
      createDocumentGuardrails({
        input: turnInput(),
        store: new InMemoryGuardrailStore(),
        userMessageLabel: "user",
        authorize: () => true,
        tools: TOOL_POLICIES,
        guardrails: [detector("twin", ALLOW).guardrail, detector("twin", ALLOW).guardrail],
      });
    expect(build).toThrow(ConfigurationError);
    expect(build).toThrow(/twin/);
  });

  it("a default schema guardrail and a custom one named schema collide", () => {
    expect(() =>
      createDocumentGuardrails({
        input: turnInput(),
        store: new InMemoryGuardrailStore(),
        userMessageLabel: "user",
        authorize: () => true,
        tools: TOOL_POLICIES,
        guardrails: [detector("schema", ALLOW).guardrail],
      }),
    ).toThrow(ConfigurationError);
  });

  it("a guardrail without a check function is a ConfigurationError", () => {
    expect(() =>
      createDocumentGuardrails({
        input: turnInput(),
        store: new InMemoryGuardrailStore(),
        userMessageLabel: "user",
        authorize: () => true,
        tools: TOOL_POLICIES,
        guardrails: [{ name: "empty", placements: ["tool-args"] } as unknown as Guardrail],
      }),
    ).toThrow(ConfigurationError);
  });
});

describe("report()", () => {
  it("lists every registered tool with its kind, retry owner and the guardrails that apply to it, in order", () => {
    const middleware = createDocumentGuardrails({
      input: turnInput(),
      store: new InMemoryGuardrailStore(),
      userMessageLabel: "user",
      authorize: () => true,
      tools: {
        ...TOOL_POLICIES,
        search_sources: { kind: "source-read", retry: { owner: "middleware", maxAttempts: 3 } },
        remember: { kind: "auxiliary", retry: { owner: "tool" } },
      },
      guardrails: [
        detector("pii", ALLOW).guardrail,
        requireApproval({ tools: ["rename_document"] }),
        detector("memory-policy", ALLOW, { tools: ["remember"] }).guardrail,
        detector("output-only", ALLOW, { placements: ["model-output"] }).guardrail,
      ],
    });
    expect(middleware.report()).toEqual({
      tools: [
        {
          name: "read_document",
          kind: "document-read",
          retry: { owner: "middleware", maxAttempts: 1, idempotent: false },
          guardrails: ["schema", "pii"],
        },
        {
          name: "search_sources",
          kind: "source-read",
          retry: { owner: "middleware", maxAttempts: 3, idempotent: false },
          guardrails: ["schema", "pii"],
        },
        {
          name: "rename_document",
          kind: "mutation",
          retry: { owner: "middleware", maxAttempts: 1, idempotent: false },
          guardrails: ["schema", "pii", "approval"],
        },
        {
          name: "remember",
          kind: "auxiliary",
          retry: { owner: "tool", maxAttempts: 1, idempotent: false },
          guardrails: ["schema", "pii", "memory-policy"],
        },
      ],
    });
  });

  it("shows a listed schema guardrail where it was listed, and no default", () => {
    const middleware = createDocumentGuardrails({
      input: turnInput(),
      store: new InMemoryGuardrailStore(),
      userMessageLabel: "user",
      authorize: () => true,
      tools: { rename_document: { kind: "mutation" } },
      guardrails: [detector("pii", ALLOW).guardrail, createSchemaGuardrail({ name: "strict-schema" })],
    });
    expect(middleware.report().tools.map((entry) => entry.guardrails)).toEqual([["pii", "strict-schema"]]);
  });
});
