/**
 * The audit trail through the real `createAgent` loop: one structured event per decision
 * (executed, replayed, refused with its code, deferred, verdicts), each with the turn key, scope,
 * call id, tool, kind, argument digest and time, appended to the store's append-only log together
 * with the approval steps the store writes itself (requested, decided). The `audit` option's sink
 * is delivered that log from the store, in `seq` order, at least once, from a durable cursor per
 * sink name: a sink that fails gets the missed events again on the next delivery, and two
 * middleware instances sharing a store and a sink name do not deliver an event twice in the
 * normal case. Argument values and tool results stay out of events unless
 * `audit: { includeValues: true }`; approval steps never hold them.
 */
import { HumanMessage } from "@langchain/core/messages";
import { Command, MemorySaver } from "@langchain/langgraph";
import { createAgent } from "langchain";
import { describe, expect, it } from "vitest";
import {
  ConfigurationError,
  createDocumentGuardrails,
  deliverAudit,
  StoreContractError,
  turnContext,
  type AuditSinkEvent,
  digest,
  InMemoryGuardrailStore,
  requireApproval,
  RetryableToolError,
  turnKey,
  type AuditEvent,
  type AuditOptions,
  type Authorize,
  type Guardrail,
  type GuardrailVerdict,
  type TurnInput,
} from "arkah-agent-guardrails";
import {
  type StoredAuditEvent,
  StoredAuditEventSchema,
} from "arkah-agent-guardrails/store";
import { ScriptedModel, type ScriptStep } from "arkah-agent-guardrails/testing";
import {
  admit,
  DocumentService,
  documentTools,
  ForwardingStore,
  guardedAgent,
  invokeTurn,
  outcomeOf,
  read,
  remember,
  rename,
  search,
  TOOL_POLICIES,
  turnInput,
  USER_MESSAGE,
} from "../support/fixtures.js";

// ---------------------------------------------------------------------------------------------
// Local helpers

const SNAPSHOT = '{"title":"Untitled","revision":0}';
const RENAMED = '{"title":"Field notes","revision":1}';

const OBSERVE: GuardrailVerdict = {
  action: "observe",
  outcome: "complete",
  code: "long_title",
  detections: [{ rule: "length", detected: true }],
};

function guardrail(name: string, verdict: GuardrailVerdict, tools: string[]): Guardrail {
  return { name, placements: ["tool-args"], tools, check: () => verdict };
}

const MEMORY_POLICY = guardrail(
  "memory-policy",
  { action: "deny", outcome: "complete", code: "no_memory", detections: [{ rule: "memory", detected: true }] },
  ["remember"],
);
const TITLE_WATCH = guardrail("title-watch", OBSERVE, ["rename_document"]);

interface Turn {
  store: InMemoryGuardrailStore;
  service: DocumentService;
  input: TurnInput;
  sunk: AuditEvent[];
}

async function admittedTurn(): Promise<Turn> {
  const turn = { store: new InMemoryGuardrailStore(), service: new DocumentService(), input: turnInput(), sunk: [] };
  await admit(turn.store, turn.input);
  return turn;
}

/** One invocation of the turn, its events collected by a sink. */
async function invoke(
  turn: Turn,
  script: readonly ScriptStep[],
  options: { guardrails?: readonly Guardrail[]; audit?: Omit<AuditOptions, "sink">; authorize?: Authorize } = {},
) {
  const { agent } = guardedAgent({
    store: turn.store,
    service: turn.service,
    input: turn.input,
    script,
    guardrails: {
      guardrails: options.guardrails ?? [],
      ...(options.authorize === undefined ? {} : { authorize: options.authorize }),
      audit: {
        ...options.audit,
        sink: (event) => {
          turn.sunk.push(event);
        },
      },
    },
  });
  return invokeTurn(agent, turn.input);
}

/** The turn's first invocation: every kind of decision but approvals. */
const FULL_SCRIPT: ScriptStep[] = [
  { toolCalls: [read("r1")] },
  // A mutation sharing its step with a source read is deferred.
  { toolCalls: [rename("w1"), search("s1")] },
  { toolCalls: [remember("m1")] },
  { toolCalls: [rename("w2")] },
  { content: "done" },
];
/** A transport retry of the turn: the completed mutation replays. */
const RETRY_SCRIPT: ScriptStep[] = [{ toolCalls: [read("r2")] }, { toolCalls: [rename("w2")] }, { content: "done" }];

function eventsOf(events: readonly AuditEvent[], toolCallId: string) {
  return events.filter((event) => event.toolCallId === toolCallId);
}

// ---------------------------------------------------------------------------------------------

describe("one structured event per decision", () => {
  it("the sink receives exactly what the store's append-only log holds, in order, numbered from 1", async () => {
    const turn = await admittedTurn();
    await invoke(turn, FULL_SCRIPT, { guardrails: [MEMORY_POLICY, TITLE_WATCH] });
    await invoke(turn, RETRY_SCRIPT, { guardrails: [MEMORY_POLICY, TITLE_WATCH] });

    const stored = await turn.store.readAudit();
    expect(stored.length).toBeGreaterThan(0);
    expect(stored.map((event) => event.seq)).toEqual(stored.map((_, index) => index + 1));
    expect(turn.sunk).toEqual(stored);
    // Paging reads the same log.
    expect(await turn.store.readAudit({ afterSeq: 2, limit: 2 })).toEqual(stored.slice(2, 4));
  });

  it("executed, deferred, verdict + refused with code, verdict + executed mutation, then replayed on retry", async () => {
    const turn = await admittedTurn();
    await invoke(turn, FULL_SCRIPT, { guardrails: [MEMORY_POLICY, TITLE_WATCH] });
    const events = turn.sunk;

    expect(eventsOf(events, "r1")).toMatchObject([{ decision: "executed", toolName: "read_document", kind: "document-read" }]);
    expect(eventsOf(events, "s1")).toMatchObject([{ decision: "executed", toolName: "search_sources", kind: "source-read" }]);
    // Guardrails (step 5) run before the step rules (step 7): w1's observe verdict, then its deferral.
    expect(eventsOf(events, "w1")).toMatchObject([
      { decision: "verdict", guardrail: "title-watch", action: "observe" },
      { decision: "deferred", code: "read_batch_deferred", toolName: "rename_document", kind: "mutation" },
    ]);
    expect(eventsOf(events, "m1")).toMatchObject([
      { decision: "verdict", guardrail: "memory-policy", action: "deny", code: "no_memory", kind: "auxiliary" },
      { decision: "refused", guardrail: "memory-policy", code: "no_memory", kind: "auxiliary" },
    ]);
    const w2 = eventsOf(events, "w2");
    expect(w2).toMatchObject([
      { decision: "verdict", guardrail: "title-watch", action: "observe", code: "long_title" },
      { decision: "executed", kind: "mutation" },
    ]);
    expect(w2[1]?.mutationKey).toMatch(/^[0-9a-f]{64}$/);
    expect(turn.service.writes).toBe(1);

    turn.sunk.length = 0;
    await invoke(turn, RETRY_SCRIPT, { guardrails: [MEMORY_POLICY, TITLE_WATCH] });
    const replayed = eventsOf(turn.sunk, "w2").filter((event) => event.decision !== "verdict");
    expect(replayed).toMatchObject([{ decision: "replayed", kind: "mutation", mutationKey: w2[1]?.mutationKey }]);
    expect(turn.service.writes).toBe(1);
  });

  it("every event carries the turn key, scope, call id, tool, kind and an ISO time, and fits the event schema", async () => {
    const turn = await admittedTurn();
    const before = Date.now();
    await invoke(turn, FULL_SCRIPT, { guardrails: [MEMORY_POLICY, TITLE_WATCH] });
    const kinds: Record<string, string> = {
      read_document: "document-read",
      search_sources: "source-read",
      rename_document: "mutation",
      remember: "auxiliary",
    };
    for (const event of turn.sunk) {
      expect(StoredAuditEventSchema.safeParse(event).success).toBe(true);
      expect(event.turnKey).toBe(turnKey(turn.input));
      expect(event.scopeId).toBe("doc-1");
      expect(event.toolCallId).toMatch(/^[rwsm][12]$/);
      expect(event.kind).toBe(kinds[event.toolName ?? ""]);
      expect(Date.parse(event.at)).toBeGreaterThanOrEqual(before - 1000);
      expect(new Date(event.at).toISOString()).toBe(event.at);
    }
  });

  it("events of executed and guarded calls carry the digest of the call's arguments", async () => {
    const turn = await admittedTurn();
    await invoke(turn, FULL_SCRIPT, { guardrails: [MEMORY_POLICY, TITLE_WATCH] });
    const args: Record<string, unknown> = {
      r1: read("r1").args,
      s1: search("s1").args,
      m1: remember("m1").args,
      w2: rename("w2").args,
    };
    for (const [id, callArgs] of Object.entries(args)) {
      const events = eventsOf(turn.sunk, id);
      expect(events.length).toBeGreaterThan(0);
      for (const event of events) expect(event.argsDigest).toBe(digest(callArgs));
    }
  });

  it("refusals by the pipeline carry the argument digest too (deferred, single_mutation, read_required, unauthorized)", async () => {
    const turn = await admittedTurn();
    await invoke(
      turn,
      [
        { toolCalls: [rename("w0")] }, // no read yet: read_required
        { toolCalls: [read("r1")] },
        { toolCalls: [rename("w1"), search("s1")] }, // read_batch_deferred
        { toolCalls: [rename("w2"), rename("w3", "Other")] }, // w3: single_mutation
        { toolCalls: [remember("m1")] }, // unauthorized
        { content: "done" },
      ],
      { authorize: (call) => call.name !== "remember" },
    );
    const expected: Record<string, [string, unknown]> = {
      w0: ["read_required", rename("w0").args],
      w1: ["read_batch_deferred", rename("w1").args],
      w3: ["single_mutation", rename("w3", "Other").args],
      m1: ["unauthorized", remember("m1").args],
    };
    for (const [id, [code, callArgs]] of Object.entries(expected)) {
      const [event] = eventsOf(turn.sunk, id);
      expect(event).toMatchObject({ code, toolCallId: id });
      expect(event?.argsDigest, `${id} (${code})`).toBe(digest(callArgs));
    }
  });
});

describe("values stay out of events unless the host opts in", () => {
  it("by default no event holds argument values or tool results", async () => {
    const turn = await admittedTurn();
    await invoke(turn, FULL_SCRIPT, { guardrails: [MEMORY_POLICY, TITLE_WATCH] });
    await invoke(turn, RETRY_SCRIPT, { guardrails: [MEMORY_POLICY, TITLE_WATCH] });
    const stored = await turn.store.readAudit();
    for (const event of [...turn.sunk, ...stored]) {
      expect(event).not.toHaveProperty("args");
      expect(event).not.toHaveProperty("result");
    }
    const text = JSON.stringify([turn.sunk, stored]);
    for (const value of ["Field notes", "Untitled", "titles", "short", "Preference saved", "style guide"]) {
      expect(text).not.toContain(value);
    }
  });

  it("with includeValues: executed and replayed events hold the arguments and results, verdicts the arguments", async () => {
    const turn = await admittedTurn();
    await invoke(turn, FULL_SCRIPT, { guardrails: [MEMORY_POLICY, TITLE_WATCH], audit: { includeValues: true } });
    await invoke(turn, RETRY_SCRIPT, { guardrails: [MEMORY_POLICY, TITLE_WATCH], audit: { includeValues: true } });
    const events = turn.sunk;

    expect(eventsOf(events, "r1")).toMatchObject([{ decision: "executed", args: {}, result: SNAPSHOT }]);
    expect(eventsOf(events, "m1")[0]).toMatchObject({ decision: "verdict", args: remember("m1").args });
    const w2 = eventsOf(events, "w2");
    expect(w2.find((event) => event.decision === "executed")).toMatchObject({ args: rename("w2").args, result: RENAMED });
    expect(w2.find((event) => event.decision === "replayed")).toMatchObject({ result: RENAMED });
    // The sink saw what the store keeps.
    expect(await turn.store.readAudit()).toEqual(events);
  });
});

describe("a failing sink", () => {
  it("is logged and never fatal: the run and the store's log are unaffected", async () => {
    const turn = await admittedTurn();
    const warnings: string[] = [];
    const { agent } = guardedAgent({
      store: turn.store,
      service: turn.service,
      input: turn.input,
      script: [{ toolCalls: [read("r1")] }, { toolCalls: [rename("w1")] }, { content: "done" }],
      guardrails: {
        audit: {
          sink: () => {
            throw new Error("log shipper down");
          },
        },
        logger: {
          warn: (message) => {
            warnings.push(message);
          },
        },
      },
    });
    const messages = await invokeTurn(agent, turn.input);
    expect(outcomeOf(messages, "w1")).toMatchObject({ status: "success", content: RENAMED });
    expect(turn.service.writes).toBe(1);
    expect(warnings.filter((message) => message === "audit sink failed")).toHaveLength(2);
    expect((await turn.store.readAudit()).map((event) => event.decision)).toEqual(["executed", "executed"]);
  });
});

describe("approval decisions are audited", () => {
  async function approvalRun(turn: Turn, audit: Omit<AuditOptions, "sink"> = {}) {
    const agent = createAgent({
      model: new ScriptedModel([
        { toolCalls: [read("r1")] },
        { toolCalls: [rename("w1", "FIELD NOTES")] },
        { toolCalls: [rename("w2")] },
        { content: "done" },
      ]),
      tools: documentTools(turn.service).all,
      middleware: [
        createDocumentGuardrails({
          input: turn.input,
          store: turn.store,
          userMessageLabel: "user",
          authorize: () => true,
          tools: TOOL_POLICIES,
          guardrails: [requireApproval({ tools: ["rename_document"] })],
          audit: {
            ...audit,
            sink: (event) => {
              turn.sunk.push(event);
            },
          },
          logger: { warn: () => undefined },
        }),
      ],
      checkpointer: new MemorySaver(),
    });
    const config = { configurable: { thread_id: "audit-approvals" } };
    await agent.invoke({ messages: [new HumanMessage(USER_MESSAGE)] }, config);
    await agent.invoke(new Command({ resume: { decision: "reject", message: "no capitals" } }), config);
    return agent.invoke(new Command({ resume: { decision: "edit", args: { title: "Edited", expectedRevision: 0 } } }), config);
  }

  it("the store audits each approval step: requested, then reject (and the refusal), or edit (and the run)", async () => {
    const turn = await admittedTurn();
    await approvalRun(turn);
    expect(turn.service.title).toBe("Edited");

    const trail = await turn.store.readAudit();
    const w1 = eventsOf(trail, "w1").filter((event) => event.decision !== "verdict");
    const w1Args = digest(rename("w1", "FIELD NOTES").args);
    expect(w1).toMatchObject([
      { decision: "approval", action: "requested", toolName: "rename_document", argsDigest: w1Args },
      { decision: "approval", action: "reject", argsDigest: w1Args },
      { decision: "refused", code: "approval_rejected" },
    ]);
    const w2 = eventsOf(trail, "w2").filter((event) => event.decision !== "verdict");
    expect(w2).toMatchObject([
      { decision: "approval", action: "requested", argsDigest: digest(rename("w2").args) },
      { decision: "approval", action: "edit", argsDigest: digest(rename("w2").args) },
      { decision: "approval", action: "applied", argsDigest: digest(rename("w2").args) },
      { decision: "executed", argsDigest: digest({ title: "Edited", expectedRevision: 0 }) },
    ]);
    // Each step names its request, which binds the turn, the tool, the call and the arguments.
    const [requested] = w2;
    expect(requested?.approvalId).toMatch(/^[0-9a-f]{64}$/);
    expect(w2[1]?.approvalId).toBe(requested?.approvalId);
    expect(w1[0]?.approvalId).not.toBe(requested?.approvalId);
    for (const event of trail) expect(event).not.toHaveProperty("args");
    // The store writes the approval steps itself; the sink is delivered the whole trail from the
    // store, those steps included, in order.
    expect(turn.sunk).toEqual(trail);
  });

  it("with includeValues, the edited run holds the person's arguments; approval steps hold none", async () => {
    const turn = await admittedTurn();
    await approvalRun(turn, { includeValues: true });
    const trail = await turn.store.readAudit();
    const executed = eventsOf(trail, "w2").find((event) => event.decision === "executed");
    expect(executed?.args).toEqual({ title: "Edited", expectedRevision: 0 });
    for (const event of trail.filter((each) => each.decision === "approval")) expect(event).not.toHaveProperty("args");
  });

  it("a resumed call does not repeat the verdict events of verdicts it read back from the store", async () => {
    const turn = await admittedTurn();
    await approvalRun(turn);
    // One approval verdict per call was decided; each resume re-ran the call's wrap chain.
    const verdicts = turn.sunk.filter((event) => event.decision === "verdict");
    expect(verdicts.map((event) => event.toolCallId)).toEqual(["w1", "w2"]);
  });
});

describe("one event per run of a tool body", () => {
  it("a read retried by its policy: each attempt is one event (failed: retried), the last one executed", async () => {
    const service = new DocumentService();
    let attempts = 0;
    const { agent, store, input } = guardedAgent({
      service,
      script: [{ toolCalls: [read("r1")] }, { content: "done" }],
      hooks: {
        beforeRead: () => {
          attempts += 1;
          if (attempts < 3) throw new RetryableToolError("busy");
        },
      },
      guardrails: { tools: { ...TOOL_POLICIES, read_document: { kind: "document-read", retry: { maxAttempts: 3, delayMs: 0 } } } },
    });
    await admit(store, input);
    await invokeTurn(agent, input);
    expect(attempts).toBe(3);
    const events = (await store.readAudit()).filter((event) => event.toolCallId === "r1" && event.decision !== "verdict");
    expect(events.map((event) => [event.decision, event.code])).toEqual([
      ["failed", "retried"],
      ["failed", "retried"],
      ["executed", undefined],
    ]);
  });
});

// ---------------------------------------------------------------------------------------------
// Delivery from the store: at least once, in order, from a cursor per sink name

const seqs = (events: readonly { readonly seq?: number }[]) => events.map((event) => event.seq);

describe("the sink is delivered the store's trail from a durable cursor", () => {
  it("a sink that fails gets the missed events again, in order, on the next delivery; each is accepted once", async () => {
    const turn = await admittedTurn();
    const attempts: (number | undefined)[] = [];
    const accepted: AuditSinkEvent[] = [];
    const warnings: Readonly<Record<string, unknown>>[] = [];
    let failures = 1;
    const agentFor = (script: readonly ScriptStep[]) =>
      guardedAgent({
        store: turn.store,
        service: turn.service,
        input: turn.input,
        script,
        guardrails: {
          audit: {
            sink: (event) => {
              attempts.push(event.seq);
              if (failures > 0) {
                failures -= 1;
                throw new Error("log shipper down");
              }
              accepted.push(event);
            },
          },
          logger: {
            warn: (message, fields) => {
              if (message === "audit sink failed") warnings.push(fields);
            },
          },
        },
      }).agent;

    await invokeTurn(agentFor([{ toolCalls: [read("r1")] }, { toolCalls: [rename("w1")] }, { content: "done" }]), turn.input);
    // The first event failed once; the next delivery (after the second event) sent it again first.
    expect(attempts).toEqual([1, 1, 2]);
    expect(seqs(accepted)).toEqual([1, 2]);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({ sinkName: "default", afterSeq: 0 });
    expect(await turn.store.getAuditCursor("default")).toBe(2);

    // Down for a whole invocation: nothing is accepted, the cursor stays, every event waits.
    failures = Number.POSITIVE_INFINITY;
    await invokeTurn(agentFor([{ toolCalls: [read("r2")] }, { toolCalls: [rename("w1")] }, { content: "done" }]), turn.input);
    expect(seqs(accepted)).toEqual([1, 2]);
    expect(attempts.slice(3)).toEqual([3, 3]);
    expect(await turn.store.getAuditCursor("default")).toBe(2);

    // Back up: the next invocation's first delivery sends the missed events, in order, then its own.
    failures = 0;
    await invokeTurn(agentFor([{ toolCalls: [read("r3")] }, { content: "done" }]), turn.input);
    const trail = await turn.store.readAudit();
    expect(trail.map((event) => event.seq)).toEqual([1, 2, 3, 4, 5]);
    expect(accepted).toEqual(trail);
    expect(await turn.store.getAuditCursor("default")).toBe(5);
    expect(turn.service.writes).toBe(1);
  });

  it("two middleware instances on one store with the same sink name deliver each event once, in order", async () => {
    const store = new InMemoryGuardrailStore();
    const service = new DocumentService();
    const sunk: AuditSinkEvent[] = [];
    const sink = (event: AuditSinkEvent) => {
      sunk.push(event);
    };
    const turns = ["turn-a", "turn-b", "turn-c"].map((turnId) => turnInput({ turnId }));
    for (const input of turns) await admit(store, input);
    const script = (suffix: string): ScriptStep[] => [
      { toolCalls: [read(`r-${suffix}`)] },
      { toolCalls: [rename(`w-${suffix}`, `Title ${suffix}`, service.revision)] },
      { content: "done" },
    ];
    // One compiled agent per instance, each with its own middleware, serving turns through context.
    const instance = (steps: readonly ScriptStep[]) =>
      createAgent({
        model: new ScriptedModel(steps),
        tools: documentTools(service).all,
        middleware: [
          createDocumentGuardrails({
            store,
            userMessageLabel: "user",
            authorize: () => true,
            tools: TOOL_POLICIES,
            audit: { sink, sinkName: "siem" },
            logger: { warn: () => undefined },
          }),
        ],
      });
    for (const [index, input] of turns.entries()) {
      const agent = instance(script(String(index)));
      await agent.invoke({ messages: [new HumanMessage(USER_MESSAGE)] }, { context: turnContext(input) });
    }
    const trail = await store.readAudit();
    expect(trail.length).toBeGreaterThanOrEqual(6);
    expect(sunk).toEqual(trail);
    expect(await store.getAuditCursor("siem")).toBe(trail.at(-1)?.seq);
    expect(await store.getAuditCursor("default")).toBe(0);
  });

  it("a sink under another name has a cursor of its own: it is delivered the whole trail, other instances' events included", async () => {
    const turn = await admittedTurn();
    await invoke(turn, [{ toolCalls: [read("r1")] }, { toolCalls: [rename("w1")] }, { content: "done" }]);
    const first = await turn.store.readAudit();
    const late: AuditSinkEvent[] = [];
    const { agent } = guardedAgent({
      store: turn.store,
      service: turn.service,
      input: turn.input,
      script: [{ toolCalls: [read("r2")] }, { content: "done" }],
      guardrails: {
        audit: {
          sinkName: "archive",
          sink: (event) => {
            late.push(event);
          },
        },
      },
    });
    await invokeTurn(agent, turn.input);
    expect(late).toEqual(await turn.store.readAudit());
    expect(seqs(late.slice(0, first.length))).toEqual(seqs(first));
  });

  it("an invalid sink name is a ConfigurationError when the middleware is built", () => {
    expect(() =>
      createDocumentGuardrails({
        store: new InMemoryGuardrailStore(),
        userMessageLabel: "user",
        authorize: () => true,
        tools: TOOL_POLICIES,
        audit: { sink: () => undefined, sinkName: "" },
      }),
    ).toThrow(ConfigurationError);
  });
});

describe("deliverAudit", () => {
  async function storeWith(count: number): Promise<InMemoryGuardrailStore> {
    const store = new InMemoryGuardrailStore();
    for (let index = 0; index < count; index++) {
      await store.appendAudit({ at: new Date(0).toISOString(), decision: "executed", turnKey: turnKey(turnInput()), scopeId: "doc-1", toolCallId: `c${String(index)}` });
    }
    return store;
  }

  it("delivers from the cursor, in order, moving it after each event; a second delivery sends nothing", async () => {
    const store = await storeWith(3);
    const got: StoredAuditEvent[] = [];
    const result = await deliverAudit({ store, sinkName: "siem", sink: (event) => void got.push(event) });
    expect(result).toEqual({ delivered: 3, lastSeq: 3 });
    expect(got).toEqual(await store.readAudit());
    expect(await store.getAuditCursor("siem")).toBe(3);
    expect(await deliverAudit({ store, sinkName: "siem", sink: () => undefined })).toEqual({ delivered: 0, lastSeq: 3 });
  });

  it("a sink that throws stops delivery at that event and the error is returned; the next delivery resends it", async () => {
    const store = await storeWith(4);
    const failure = new Error("down");
    const got: number[] = [];
    const failed = await deliverAudit({
      store,
      sinkName: "siem",
      sink: (event) => {
        if (event.seq === 3) throw failure;
        got.push(event.seq);
      },
    });
    expect(failed).toEqual({ delivered: 2, lastSeq: 2, error: failure });
    expect(await store.getAuditCursor("siem")).toBe(2);
    const resumed = await deliverAudit({ store, sinkName: "siem", sink: (event) => void got.push(event.seq) });
    expect(resumed).toEqual({ delivered: 2, lastSeq: 4 });
    expect(got).toEqual([1, 2, 3, 4]);
  });

  it("limit delivers at most that many; afterSeq replays without moving the cursor back", async () => {
    const store = await storeWith(5);
    const got: number[] = [];
    const sink = (event: StoredAuditEvent) => void got.push(event.seq);
    expect(await deliverAudit({ store, sinkName: "siem", sink, limit: 2 })).toEqual({ delivered: 2, lastSeq: 2 });
    expect(await deliverAudit({ store, sinkName: "siem", sink })).toEqual({ delivered: 3, lastSeq: 5 });
    expect(await deliverAudit({ store, sinkName: "siem", sink, afterSeq: 3 })).toEqual({ delivered: 2, lastSeq: 5 });
    expect(got).toEqual([1, 2, 3, 4, 5, 4, 5]);
    expect(await store.getAuditCursor("siem")).toBe(5);
    // A replay past the cursor moves it forward.
    expect(await deliverAudit({ store, sinkName: "fresh", sink: () => undefined, afterSeq: 4 })).toEqual({ delivered: 1, lastSeq: 5 });
    expect(await store.getAuditCursor("fresh")).toBe(5);
  });

  it("pages through a long trail", async () => {
    const store = await storeWith(2_050);
    let count = 0;
    let previous = 0;
    const result = await deliverAudit({
      store,
      sinkName: "siem",
      sink: (event) => {
        expect(event.seq).toBe(previous + 1);
        previous = event.seq;
        count++;
      },
    });
    expect(result).toEqual({ delivered: 2_050, lastSeq: 2_050 });
    expect(count).toBe(2_050);
  });

  it("a delivery that finds another one for the same sink name ahead of it goes on from there, sending nothing twice", async () => {
    const store = await storeWith(4);
    const got: number[] = [];
    const result = await deliverAudit({
      store,
      sinkName: "siem",
      sink: async (event) => {
        got.push(event.seq);
        // While the first event is with the sink, another delivery for the name sends everything.
        if (event.seq === 1) await deliverAudit({ store, sinkName: "siem", sink: (inner) => void got.push(inner.seq) });
      },
    });
    // The inner delivery started at cursor 0 too, so event 1 reached the sink twice (at least once);
    // the outer one then found the cursor at 4 and sent nothing more.
    expect(got).toEqual([1, 1, 2, 3, 4]);
    expect(result).toEqual({ delivered: 1, lastSeq: 1 });
    expect(await store.getAuditCursor("siem")).toBe(4);
  });

  it("invalid options are a ConfigurationError; a store that answers out of order is a StoreContractError", async () => {
    const store = await storeWith(2);
    const sink = () => undefined;
    for (const options of [
      { store, sink, sinkName: "" },
      { store, sink, sinkName: "s", limit: 0 },
      { store, sink, sinkName: "s", afterSeq: -1 },
      { store, sinkName: "s" },
      { store: {}, sink, sinkName: "s" },
      { store, sink, sinkName: "s", extra: true },
    ]) {
      await expect(deliverAudit(options as never)).rejects.toSatisfy((error) => ConfigurationError.isInstance(error));
    }
    const backwards = new ForwardingStore(store);
    backwards.readAudit = async (query) => (await store.readAudit({ ...query, afterSeq: 0 })).reverse();
    await expect(deliverAudit({ store: backwards, sink, sinkName: "s", afterSeq: 1 })).rejects.toSatisfy((error) =>
      StoreContractError.isInstance(error),
    );
  });
});
