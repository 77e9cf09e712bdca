/**
 * The logger never receives argument values or tool results. Every warning of the real
 * `createAgent` loop goes through one sanitizing wrapper: an error reaches the host's logger as
 * `{ name, code?, message?, cause? }`, with the message only for this library's own errors. A
 * tool's own error text, LangChain's `ToolInvocationError` (whose message quotes the call's
 * `kwargs`), a guardrail's or `authorize`'s error, an audit sink's and a store driver's are
 * reduced to their class name and code.
 *
 * Each tool, check or store here puts an argument value and a result string into its error; the
 * tests assert that neither reaches the recording logger, in any field, while the tool's own
 * side effects are counted.
 */
import { inspect } from "node:util";
import { HumanMessage } from "@langchain/core/messages";
import { createAgent, createMiddleware, tool } from "langchain";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import {
  allowAllCalls,
  admitTurn,
  createDocumentGuardrails,
  createToolGuardrails,
  InMemoryGuardrailStore,
  RetryableToolError,
  SettlementError,
  type Authorize,
  type Guardrail,
  type GuardrailLogger,
  type GuardrailStore,
  type ToolPolicy,
} from "arkah-agent-guardrails";
import {
  type MutationSettlement,
} from "arkah-agent-guardrails/store";
import { ScriptedModel, type ScriptStep } from "arkah-agent-guardrails/testing";
import { ForwardingStore, outcomeOf, turnInput, USER_MESSAGE } from "../support/fixtures.js";
import { NotesService, secureAgent } from "./support.js";

// ---------------------------------------------------------------------------------------------
// Local helpers

/** An argument value the model sends, and a result string a tool or store has seen. */
const ARG_VALUE = "Quarterly numbers (confidential)";
const RESULT_TEXT = "balance 48211.07 EUR";

/**
 * Records every warning; `text()` is everything it received as a logger would print it (errors
 * with their message, stack, cause and own properties), for substring assertions.
 */
function recordingLogger() {
  const entries: { message: string; fields: Readonly<Record<string, unknown>> }[] = [];
  const logger: GuardrailLogger = {
    warn(message, fields) {
      entries.push({ message, fields });
    },
  };
  const text = () => inspect(entries, { depth: Infinity, showHidden: true, breakLength: Infinity });
  return { logger, entries, text };
}

function expectNoValues(text: string): void {
  expect(text).not.toContain(ARG_VALUE);
  expect(text).not.toContain(RESULT_TEXT);
  expect(text).not.toContain("kwargs");
}

/** Tools whose errors quote their argument and a result; `runs` counts executions. */
function leakyTools() {
  const runs = { read: 0, note: 0, rename: 0, writes: 0 };
  const readDocument = tool(
    () => {
      runs.read += 1;
      return RESULT_TEXT;
    },
    { name: "read_document", description: "Read.", schema: z.object({}) },
  );
  const note = tool(
    ({ text }) => {
      runs.note += 1;
      throw new Error(`could not save note "${text}" next to ${RESULT_TEXT}`);
    },
    { name: "note", description: "Save a note.", schema: z.object({ text: z.string() }) },
  );
  const rename = tool(
    ({ title }) => {
      runs.rename += 1;
      throw new Error(`rename to "${title}" failed after reading ${RESULT_TEXT}`);
    },
    { name: "rename_document", description: "Rename.", schema: z.object({ title: z.string() }) },
  );
  // A schema whose refinement throws an error quoting the argument while the guardrails parse the
  // call (the guardrails parse once, exactly as the tool would; the tool never parses again).
  const retitle = tool(
    ({ title }) => {
      runs.writes += 1;
      return `retitled to ${title}`;
    },
    {
      name: "retitle",
      description: "Retitle.",
      schema: z.object({
        title: z.string().refine((title) => {
          throw new Error(`the title "${title}" is taken`);
        }),
      }),
    },
  );
  const setTitle = tool(
    ({ title }) => {
      runs.writes += 1;
      return `title set to ${title}; ${RESULT_TEXT}`;
    },
    { name: "set_title", description: "Set the title.", schema: z.object({ title: z.string() }) },
  );
  return { runs, all: [readDocument, note, rename, retitle, setTitle] };
}

const POLICIES: Record<string, ToolPolicy> = {
  read_document: { kind: "document-read" },
  note: { kind: "auxiliary" },
  rename_document: { kind: "mutation" },
  retitle: { kind: "auxiliary" },
  set_title: { kind: "mutation" },
};

const call = (id: string, name: string, args: Record<string, unknown>) => ({ id, name, args });

interface DocumentRunOptions {
  readonly script: readonly ScriptStep[];
  readonly authorize?: Authorize;
  readonly guardrails?: readonly Guardrail[];
  readonly store?: (inner: GuardrailStore) => GuardrailStore;
  readonly sink?: () => void;
}

async function documentRun(options: DocumentRunOptions) {
  const inner = new InMemoryGuardrailStore();
  const store = options.store?.(inner) ?? inner;
  const input = turnInput();
  await admitTurn({ store, input, moderate: () => true });
  const tools = leakyTools();
  const recorder = recordingLogger();
  const agent = createAgent({
    model: new ScriptedModel(options.script),
    tools: tools.all,
    middleware: [
      createDocumentGuardrails({
        input,
        store,
        userMessageLabel: "user",
        authorize: options.authorize ?? (() => true),
        tools: POLICIES,
        logger: recorder.logger,
        ...(options.guardrails === undefined ? {} : { guardrails: options.guardrails }),
        ...(options.sink === undefined ? {} : { audit: { sink: options.sink, includeValues: true } }),
      }),
    ],
  });
  const invoke = async () => (await agent.invoke({ messages: [new HumanMessage(USER_MESSAGE)] })).messages;
  return { invoke, runs: tools.runs, ...recorder };
}

// ---------------------------------------------------------------------------------------------

describe("createDocumentGuardrails: no argument value or result reaches the logger", () => {
  it("a tool whose error quotes its argument and a result: tool_failed, the logger gets the class name", async () => {
    const run = await documentRun({
      script: [{ toolCalls: [call("n1", "note", { text: ARG_VALUE })] }, { content: "done" }],
    });
    const messages = await run.invoke();
    expect(outcomeOf(messages, "n1").code).toBe("tool_failed");
    expect(run.runs.note).toBe(1);
    expect(run.entries).toEqual([
      { message: "tool failed", fields: { code: "tool_failed", toolName: "note", toolCallId: "n1", error: { name: "Error" } } },
    ]);
    expectNoValues(run.text());
  });

  it("a mutation whose error quotes its argument and a result: mutation_unknown, no values logged", async () => {
    const run = await documentRun({
      script: [
        { toolCalls: [call("r1", "read_document", {})] },
        { toolCalls: [call("w1", "rename_document", { title: ARG_VALUE })] },
        { content: "done" },
      ],
    });
    const messages = await run.invoke();
    expect(outcomeOf(messages, "w1").code).toBe("mutation_unknown");
    expect(run.runs.rename).toBe(1);
    expect(run.entries.map((entry) => entry.message)).toEqual(["mutation failed; its outcome is unknown"]);
    expect(run.entries[0]?.fields.error).toEqual({ name: "Error" });
    expectNoValues(run.text());
  });

  it("a zod tool whose schema throws an error quoting the argument while it is parsed: invalid_arguments, no values logged", async () => {
    const run = await documentRun({
      script: [{ toolCalls: [call("t1", "retitle", { title: ARG_VALUE })] }, { content: "done" }],
    });
    const messages = await run.invoke();
    expect(outcomeOf(messages, "t1").code).toBe("invalid_arguments");
    expect(run.runs.writes).toBe(0);
    expect(run.entries).toHaveLength(1);
    expect(run.entries[0]?.fields.error).toEqual({ name: "Error" });
    expectNoValues(run.text());
  });

  it("a RetryableToolError's message is the tool's: not logged", async () => {
    const inner = new InMemoryGuardrailStore();
    const input = turnInput();
    await admitTurn({ store: inner, input, moderate: () => true });
    const recorder = recordingLogger();
    let attempts = 0;
    const flaky = tool(
      ({ text }) => {
        attempts += 1;
        throw new RetryableToolError(`busy while saving "${text}" (${RESULT_TEXT})`);
      },
      { name: "note", description: "Save a note.", schema: z.object({ text: z.string() }) },
    );
    const agent = createAgent({
      model: new ScriptedModel([{ toolCalls: [call("n1", "note", { text: ARG_VALUE })] }, { content: "done" }]),
      tools: [flaky],
      middleware: [
        createDocumentGuardrails({
          input,
          store: inner,
          userMessageLabel: "user",
          authorize: () => true,
          tools: { note: { kind: "auxiliary", retry: { maxAttempts: 2, delayMs: 0 } } },
          logger: recorder.logger,
        }),
      ],
    });
    const result = await agent.invoke({ messages: [new HumanMessage(USER_MESSAGE)] });
    expect(outcomeOf(result.messages, "n1").code).toBe("tool_failed");
    expect(attempts).toBe(2);
    expect(recorder.entries[0]?.fields.error).toEqual({ name: "RetryableToolError" });
    expectNoValues(recorder.text());
  });

  it("authorize throwing with the arguments in its message: unauthorized, no values logged", async () => {
    const run = await documentRun({
      script: [{ toolCalls: [call("n1", "note", { text: ARG_VALUE })] }, { content: "done" }],
      authorize: (request) => {
        throw new Error(`policy service rejected ${JSON.stringify(request.args)} (${RESULT_TEXT})`);
      },
    });
    const messages = await run.invoke();
    expect(outcomeOf(messages, "n1").code).toBe("unauthorized");
    expect(run.runs.note).toBe(0);
    expect(run.entries.map((entry) => entry.message)).toEqual(["authorize threw; the call is refused"]);
    expect(run.entries[0]?.fields.error).toEqual({ name: "Error" });
    expectNoValues(run.text());
  });

  it("a guardrail check throwing with the arguments in its message: denied, no values logged", async () => {
    const leaky: Guardrail = {
      name: "leaky",
      placements: ["tool-args"],
      check: (context) => {
        throw new Error(`classifier choked on ${JSON.stringify(context.toolCall.args)} near ${RESULT_TEXT}`);
      },
    };
    const run = await documentRun({
      script: [{ toolCalls: [call("n1", "note", { text: ARG_VALUE })] }, { content: "done" }],
      guardrails: [leaky],
    });
    const messages = await run.invoke();
    expect(outcomeOf(messages, "n1").status).toBe("error");
    expect(run.runs.note).toBe(0);
    expect(run.entries.map((entry) => entry.message)).toEqual(["guardrail check failed; the call is denied"]);
    expect(run.entries[0]?.fields.error).toEqual({ name: "Error" });
    expectNoValues(run.text());
  });

  it("an audit sink failing with an event's values in its message: logged without them", async () => {
    const run = await documentRun({
      script: [{ toolCalls: [call("r1", "read_document", {})] }, { content: "done" }],
      sink: () => {
        throw new Error(`sink rejected an event with result ${RESULT_TEXT}`);
      },
    });
    await run.invoke();
    expect(run.runs.read).toBe(1);
    expect(run.entries.map((entry) => entry.message)).toEqual(["audit sink failed"]);
    expect(run.entries[0]?.fields.error).toEqual({ name: "Error" });
    expectNoValues(run.text());
  });

  it("a store driver error quoting the result at settlement: this library's message is kept, the driver's is not", async () => {
    class LeakyDriver extends ForwardingStore {
      override settleMutation(settlement: MutationSettlement): Promise<boolean> {
        const error = Object.assign(new Error(`value too long for row ${JSON.stringify(settlement)}`), { code: "22001" });
        return Promise.reject(error);
      }
    }
    const run = await documentRun({
      script: [
        { toolCalls: [call("r1", "read_document", {})] },
        { toolCalls: [call("w1", "set_title", { title: ARG_VALUE })] },
        { content: "done" },
      ],
      store: (inner) => new LeakyDriver(inner),
    });
    let caught: unknown;
    try {
      await run.invoke();
    } catch (error) {
      caught = error;
    }
    const failure = SettlementError.find(caught);
    expect(failure).toBeDefined();
    expect(run.runs.writes).toBe(1);
    expect(run.entries).toHaveLength(1);
    expect(run.entries[0]?.message).toBe(failure?.message);
    expect(run.entries[0]?.fields.error).toEqual({ name: "Error", code: "22001" });
    expectNoValues(run.text());
  });
});

describe("createToolGuardrails: no argument value or result reaches the logger", () => {
  it("a tool whose error quotes its argument and a result: tool_failed, the logger gets the class name", async () => {
    const tools = leakyTools();
    const recorder = recordingLogger();
    const agent = createAgent({
      model: new ScriptedModel([
        { toolCalls: [call("n1", "note", { text: ARG_VALUE }), call("t1", "retitle", { title: ARG_VALUE })] },
        { content: "done" },
      ]),
      tools: tools.all,
      middleware: [createToolGuardrails({ guardrails: [], tools: ["note", "retitle"], authorize: allowAllCalls, logger: recorder.logger })],
    });
    const result = await agent.invoke({ messages: [new HumanMessage(USER_MESSAGE)] });
    expect(outcomeOf(result.messages, "n1").code).toBe("tool_failed");
    expect(outcomeOf(result.messages, "t1").code).toBe("invalid_arguments");
    expect(tools.runs.note).toBe(1);
    expect(tools.runs.writes).toBe(0);
    expect(recorder.entries.map((entry) => entry.fields.error)).toEqual([{ name: "Error" }, { name: "Error" }]);
    expectNoValues(recorder.text());
  });
});

describe("the log sanitizer never throws, whatever a thrown value does", () => {
  /** Thrown values whose every read of a logged field throws. */
  function hostileValues(): Record<string, unknown> {
    const boom = () => {
      throw new Error(`getter read ${RESULT_TEXT}`);
    };
    const getters = (keys: readonly string[]) => Object.defineProperties({}, Object.fromEntries(keys.map((key) => [key, { get: boom }])));
    const { proxy: revoked, revoke } = Proxy.revocable(new Error(ARG_VALUE), {});
    revoke();
    const cyclic = new Error(ARG_VALUE);
    (cyclic as { cause?: unknown }).cause = cyclic;
    return {
      "a name getter that throws": getters(["name"]),
      "name, message, code, cause and stack getters that throw": getters(["stack", "name", "message", "code", "cause"]),
      "a Proxy whose every trap throws": new Proxy(new Error(ARG_VALUE), { get: boom, getPrototypeOf: boom, has: boom, ownKeys: boom, getOwnPropertyDescriptor: boom }),
      "a revoked Proxy": revoked,
      "a cause that is itself": cyclic,
      "a code whose Symbol.toPrimitive throws": Object.assign(new Error(ARG_VALUE), { code: { [Symbol.toPrimitive]: boom } }),
    };
  }

  for (const [label, thrown] of Object.entries(hostileValues())) {
    it(`a scope function throwing ${label}: refused out_of_scope, the run continues, no values logged`, async () => {
      const service = new NotesService();
      const { run, warnings } = secureAgent({
        service,
        policies: {
          read_note: { kind: "document-read", scope: () => "note-7" },
          edit_note: {
            kind: "mutation",
            scope: () => {
              throw thrown;
            },
          },
        },
        script: [
          { toolCalls: [{ id: "r1", name: "read_note", args: { noteId: "note-7" } }] },
          { toolCalls: [{ id: "w1", name: "edit_note", args: { noteId: "note-7", body: ARG_VALUE } }] },
          { content: "done" },
        ],
      });
      const messages = await run();
      expect(outcomeOf(messages, "w1").code).toBe("out_of_scope");
      expect(messages.at(-1)?.text).toBe("done");
      expect(service.writes).toEqual([]);
      expect(service.entries).toEqual(["read_note"]);
      expect(warnings.map((warning) => warning.message)).toEqual(["a tool's scope function threw; the call is refused out_of_scope"]);
      expectNoValues(inspect(warnings, { depth: Infinity, showHidden: true }));
    });

    it(`authorize throwing ${label}: refused unauthorized, the run continues, nothing written`, async () => {
      const service = new NotesService();
      const { run, warnings } = secureAgent({
        service,
        guardrails: {
          authorize: (call) => {
            if (call.name === "edit_note") throw thrown;
            return true;
          },
        },
        script: [
          { toolCalls: [{ id: "r1", name: "read_note", args: { noteId: "note-7" } }] },
          { toolCalls: [{ id: "w1", name: "edit_note", args: { noteId: "note-7", body: ARG_VALUE } }] },
          { content: "done" },
        ],
      });
      const messages = await run();
      expect(outcomeOf(messages, "w1").code).toBe("unauthorized");
      expect(messages.at(-1)?.text).toBe("done");
      expect(service.writes).toEqual([]);
      expect(warnings.map((warning) => warning.message)).toEqual(["authorize threw; the call is refused"]);
    });
  }

  it("an inner middleware throwing a revoked Proxy: the read is tool_failed, nothing ran, the run continues", async () => {
    const service = new NotesService();
    const hostile = createMiddleware({
      name: "Hostile",
      wrapToolCall: () => {
        const { proxy, revoke } = Proxy.revocable(new Error(ARG_VALUE), {});
        revoke();
        throw proxy;
      },
    });
    const { run, store } = secureAgent({
      service,
      inner: [hostile],
      script: [
        { toolCalls: [{ id: "r1", name: "read_note", args: { noteId: "note-7" } }] },
        { content: "done" },
      ],
    });
    const messages = await run();
    expect(outcomeOf(messages, "r1").code).toBe("tool_failed");
    expect(messages.at(-1)?.text).toBe("done");
    expect(service.entries).toEqual([]);
    expect(await store.listUnresolved()).toEqual([]);
  });
});
