/**
 * What reaches the model when a call goes wrong, through the real `createAgent` loop: a failing
 * read or auxiliary tool becomes `tool_failed` without leaking server error text or stack
 * frames, and arguments that fail the tool's schema are refused before anything runs or is
 * claimed, with every problem listed by JSON Pointer in one result.
 */
import type { BaseMessage } from "@langchain/core/messages";
import { createAgent, tool } from "langchain";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import {
  createDocumentGuardrails,
  InMemoryGuardrailStore,
  type ArgumentIssue,
  type ToolPolicy,
} from "arkah-agent-guardrails";
import { ScriptedModel, type ScriptStep, type ScriptedToolCall } from "arkah-agent-guardrails/testing";
import {
  admit,
  DocumentService,
  documentTools,
  invokeTurn,
  outcomeOf,
  read,
  remember,
  rename,
  search,
  TOOL_POLICIES,
  turnInput,
} from "../support/fixtures.js";

// ---------------------------------------------------------------------------------------------
// Local helpers

const SECRET = "connect ECONNREFUSED db-internal.corp:5432 (user=svc_docs password=hunter2)";

/** A stack frame as V8 prints it: "    at fn (/path/file.ts:12:34)" or "    at /path/file.ts:12:34". */
const STACK_FRAME = /^\s*at .*:\d+:\d+\)?\s*$/m;

function textOf(message: BaseMessage): string {
  return typeof message.content === "string" ? message.content : JSON.stringify(message.content);
}

/**
 * A real agent. Each tool in `failing` throws an Error carrying SECRET (with its stack); the
 * others behave normally and count their runs. The scripted model records every message it was
 * given, so tests can check what reached it.
 */
function argumentsAgent(options: {
  steps: readonly (readonly ScriptedToolCall[] | string)[];
  failing?: readonly ("read_document" | "search_sources" | "remember")[];
  policies?: Record<string, ToolPolicy>;
}) {
  const store = new InMemoryGuardrailStore();
  const input = turnInput();
  const service = new DocumentService();
  const effects = { searched: 0, remembered: 0, configured: 0, configuredWith: [] as unknown[] };
  const failing = new Set(options.failing ?? []);
  const explode = (name: string) => {
    if (failing.has(name as never)) throw new Error(`${SECRET} in ${name}`);
  };
  const warnings: { message: string; fields: Readonly<Record<string, unknown>> }[] = [];

  const { renameDocument } = documentTools(service);
  const readDocument = tool(
    () => {
      explode("read_document");
      service.reads += 1;
      return service.snapshot();
    },
    { name: "read_document", description: "Read the document.", schema: z.object({}) },
  );
  const searchSources = tool(
    () => {
      explode("search_sources");
      effects.searched += 1;
      return "source: style guide says short titles";
    },
    { name: "search_sources", description: "Search other sources.", schema: z.object({ query: z.string() }) },
  );
  const rememberTool = tool(
    () => {
      explode("remember");
      effects.remembered += 1;
      return "Preference saved";
    },
    { name: "remember", description: "Remember a preference.", schema: z.object({ preference: z.string() }) },
  );
  const configure = tool(
    (args) => {
      effects.configured += 1;
      effects.configuredWith.push(args);
      return "configured";
    },
    {
      name: "configure",
      description: "Set options with awkward keys.",
      schema: z.object({ "a/b": z.object({ "~x": z.array(z.string()) }) }),
    },
  );

  const seen: BaseMessage[][] = [];
  const script: ScriptStep[] = options.steps.map(
    (step) => (messages: readonly BaseMessage[]) => {
      seen.push([...messages]);
      return typeof step === "string" ? { content: step } : { toolCalls: step };
    },
  );
  const model = new ScriptedModel(script);
  const agent = createAgent({
    model,
    tools: [readDocument, searchSources, renameDocument, rememberTool, configure],
    middleware: [
      createDocumentGuardrails({
        input,
        store,
        userMessageLabel: "user",
        authorize: () => true,
        tools: options.policies ?? { ...TOOL_POLICIES, configure: { kind: "auxiliary" } },
        logger: {
          warn: (message, fields) => {
            warnings.push({ message, fields });
          },
        },
      }),
    ],
  });
  return { agent, store, input, service, effects, model, seen, warnings };
}

/** Asserts that no message (in the result or shown to the model) carries the error or a stack. */
function expectNoLeak(all: readonly BaseMessage[]) {
  for (const message of all) {
    const text = textOf(message);
    expect(text).not.toContain("hunter2");
    expect(text).not.toContain("ECONNREFUSED");
    expect(text).not.toMatch(STACK_FRAME);
    expect(text).not.toContain("Please fix your mistakes");
  }
}

function parsedRefusal(content: string): { guardrail: string; message: string; tool?: string; issues?: ArgumentIssue[] } {
  return JSON.parse(content) as { guardrail: string; message: string; tool?: string; issues?: ArgumentIssue[] };
}

// ---------------------------------------------------------------------------------------------

describe("a failing read or auxiliary tool becomes tool_failed and the run goes on", () => {
  it("the stack-frame pattern recognises a real stack (control)", () => {
    expect(new Error("x").stack).toMatch(STACK_FRAME);
  });

  it.each<[string, "read_document" | "search_sources" | "remember", ScriptedToolCall]>([
    ["a document read", "read_document", read("c1")],
    ["a source read", "search_sources", search("c1")],
    ["an auxiliary tool", "remember", remember("c1")],
  ])("%s that throws: tool_failed, the model is called again, nothing of the error reaches it", async (_name, failing, call) => {
    const { agent, store, input, service, effects, model, seen, warnings } = argumentsAgent({
      steps: [[call], "I could not do that."],
      failing: [failing],
    });
    await admit(store, input);
    const messages = await invokeTurn(agent, input);

    const outcome = outcomeOf(messages, "c1");
    expect(outcome).toMatchObject({ status: "error", code: "tool_failed" });
    expect(model.calls).toBe(2);
    // The second model call saw the refusal, and only the refusal.
    const shown = seen[1] ?? [];
    expect(shown.map(textOf)).toContain(outcome.content);
    expectNoLeak([...messages, ...seen.flat()]);
    expect(service.reads + effects.searched + effects.remembered).toBe(0);
    // The server learns that it failed and the error's class, never its text (it may quote
    // arguments or results).
    expect(warnings).toEqual([
      { message: "tool failed", fields: { code: "tool_failed", toolName: failing, toolCallId: "c1", error: { name: "Error" } } },
    ]);
  });

  it("a failed read is no evidence: a later rename is refused read_required", async () => {
    const { agent, store, input, service } = argumentsAgent({
      steps: [[read("r1")], [rename("w1")], "done"],
      failing: ["read_document"],
    });
    await admit(store, input);
    const messages = await invokeTurn(agent, input);
    expect(outcomeOf(messages, "r1").code).toBe("tool_failed");
    expect(outcomeOf(messages, "w1").code).toBe("read_required");
    expect(service.writes).toBe(0);
  });

  it("a failing auxiliary call beside a good read does not stop the turn from writing", async () => {
    const { agent, store, input, service } = argumentsAgent({
      steps: [[read("r1"), remember("m1")], [rename("w1")], "done"],
      failing: ["remember"],
    });
    await admit(store, input);
    const messages = await invokeTurn(agent, input);
    expect(outcomeOf(messages, "m1").code).toBe("tool_failed");
    expect(outcomeOf(messages, "r1").status).toBe("success");
    expect(outcomeOf(messages, "w1").status).toBe("success");
    expect(service.writes).toBe(1);
  });
});

describe("arguments that fail the tool's schema", () => {
  it("a mutation with two invalid fields is refused before the claim, listing every problem; the slot stays free", async () => {
    const { agent, store, input, service, seen } = argumentsAgent({
      steps: [
        [read("r1")],
        [{ id: "w1", name: "rename_document", args: { title: "", expectedRevision: -1 } }],
        [rename("w2", "Field notes", 0)],
        "done",
      ],
    });
    await admit(store, input);
    const messages = await invokeTurn(agent, input);

    const refused = outcomeOf(messages, "w1");
    expect(refused).toMatchObject({ status: "error", code: "invalid_arguments" });
    const body = parsedRefusal(refused.content);
    expect(body.tool).toBe("rename_document");
    expect(body.message).toMatch(/Fix every listed problem/);
    const issues = body.issues ?? [];
    expect(issues.map((issue) => issue.path).sort()).toEqual(["/expectedRevision", "/title"]);
    for (const issue of issues) {
      expect(typeof issue.message).toBe("string");
      expect(issue.message.length).toBeGreaterThan(0);
    }
    expect(refused.content).not.toMatch(STACK_FRAME);
    expect(refused.content).not.toContain("Error invoking tool");
    expectNoLeak([...messages, ...seen.flat()]);

    // Nothing was claimed: the corrected call in the next step makes the turn's one write.
    expect(outcomeOf(messages, "w2").status).toBe("success");
    expect(service.writes).toBe(1);
    expect(service.title).toBe("Field notes");
  });

  it("missing and mistyped arguments are all reported together", async () => {
    const { agent, store, input, service } = argumentsAgent({
      steps: [
        [read("r1")],
        [{ id: "w1", name: "rename_document", args: {} }],
        [{ id: "w2", name: "rename_document", args: { title: 7, expectedRevision: "0" } }],
        "done",
      ],
    });
    await admit(store, input);
    const messages = await invokeTurn(agent, input);
    for (const id of ["w1", "w2"]) {
      const outcome = outcomeOf(messages, id);
      expect(outcome.code).toBe("invalid_arguments");
      expect((parsedRefusal(outcome.content).issues ?? []).map((issue) => issue.path).sort()).toEqual([
        "/expectedRevision",
        "/title",
      ]);
    }
    expect(service.writes).toBe(0);
  });

  it("a read or auxiliary call with invalid arguments does not run", async () => {
    const { agent, store, input, effects } = argumentsAgent({
      steps: [
        [
          { id: "s1", name: "search_sources", args: { query: 5 } },
          { id: "m1", name: "remember", args: {} },
        ],
        "done",
      ],
    });
    await admit(store, input);
    const messages = await invokeTurn(agent, input);
    expect(outcomeOf(messages, "s1").code).toBe("invalid_arguments");
    expect(outcomeOf(messages, "m1").code).toBe("invalid_arguments");
    expect(parsedRefusal(outcomeOf(messages, "s1").content).issues).toEqual([
      { path: "/query", message: expect.any(String) as string },
    ]);
    expect(effects.searched).toBe(0);
    expect(effects.remembered).toBe(0);
  });

  it("paths are RFC 6901 JSON Pointers: '/' and '~' in keys are escaped, array indexes included", async () => {
    const { agent, store, input, effects } = argumentsAgent({
      steps: [
        [{ id: "c1", name: "configure", args: { "a/b": { "~x": ["ok", 3] } } }],
        [{ id: "c2", name: "configure", args: { "a/b": { "~x": ["ok"] } } }],
        "done",
      ],
    });
    await admit(store, input);
    const messages = await invokeTurn(agent, input);
    expect((parsedRefusal(outcomeOf(messages, "c1").content).issues ?? []).map((issue) => issue.path)).toEqual([
      "/a~1b/~0x/1",
    ]);
    expect(outcomeOf(messages, "c2").status).toBe("success");
    expect(effects.configured).toBe(1);
    expect(effects.configuredWith).toEqual([{ "a/b": { "~x": ["ok"] } }]);
  });
});
