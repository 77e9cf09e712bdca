/**
 * Edges of the two ready-made guardrails through the real `createAgent` loop: `createSchemaGuardrail`
 * (boolean schemas, the declared dialect's detection, every failure in one refusal, the optional
 * validator peer, a schema guardrail from another copy of the library) and `requireApproval` (its
 * default reason, the verdict it records, its option errors).
 *
 * Tools count their own runs; assertions are on those runs, on what the model reads, on the
 * interrupt a person is shown and on what the store recorded.
 */
import { HumanMessage } from "@langchain/core/messages";
import { DynamicStructuredTool, type ClientTool } from "@langchain/core/tools";
import { MemorySaver } from "@langchain/langgraph";
import { createAgent } from "langchain";
import { describe, expect, it, vi } from "vitest";
import {
  ConfigurationError,
  createDocumentGuardrails,
  createSchemaGuardrail,
  digest,
  InMemoryGuardrailStore,
  requireApproval,
  turnKey,
  type ApprovalRequest,
  type ArgumentIssue,
  type Guardrail,
  type SchemaDraft,
} from "arkah-agent-guardrails";
import { ScriptedModel, type ScriptedToolCall } from "arkah-agent-guardrails/testing";
import { admit, documentToolFingerprint, guardedAgent, invokeTurn, outcomeOf, read, rename, turnInput, userText } from "../support/fixtures.js";

/** A JSON Schema tool (as MCP tools are) that records the arguments of each of its runs. */
function recordingTool(name: string, schema: unknown) {
  const runs: unknown[] = [];
  const made = new DynamicStructuredTool({
    name,
    description: `The ${name} tool.`,
    schema: schema as never,
    func: (args: unknown) => {
      runs.push(args);
      return Promise.resolve(`${name} ok`);
    },
  }) as unknown as ClientTool;
  return { tool: made, runs };
}

/**
 * One admitted turn in which a scripted model calls `made` once per entry of `calls`, each in its
 * own step, then answers. `middleware` is `createDocumentGuardrails` of the library copy under test.
 */
async function callEach(
  made: ClientTool,
  calls: readonly ScriptedToolCall["args"][],
  options: { guardrails?: readonly Guardrail[]; middleware?: typeof createDocumentGuardrails } = {},
) {
  const store = new InMemoryGuardrailStore();
  const input = turnInput();
  await admit(store, input);
  const warnings: { message: string; fields: unknown }[] = [];
  const ids = calls.map((_args, index) => `c${String(index + 1)}`);
  const model = new ScriptedModel([...calls.map((args, index) => ({ toolCalls: [{ id: ids[index] ?? "", name: made.name, args }] })), { content: "done" }]);
  const agent = createAgent({
    model,
    tools: [made],
    middleware: [
      (options.middleware ?? createDocumentGuardrails)({
        input,
        store,
        userMessageLabel: "user",
        authorize: () => true,
        tools: { [made.name]: { kind: "auxiliary" } },
        ...(options.guardrails === undefined ? {} : { guardrails: options.guardrails }),
        logger: { warn: (message, fields) => warnings.push({ message, fields }) },
      }),
    ],
  });
  const messages = await invokeTurn(agent, input);
  return { outcomes: ids.map((id) => outcomeOf(messages, id)), warnings };
}

function issuesOf(content: string): ArgumentIssue[] | undefined {
  return (JSON.parse(content) as { issues?: ArgumentIssue[] }).issues;
}

/** draft 4's boolean `exclusiveMinimum`: `5` fails it under draft 4 only. */
const above5 = { type: "number", minimum: 5, exclusiveMinimum: true } as const;
const DRAFT_4 = "http://json-schema.org/draft-04/schema#";

describe("boolean schemas", () => {
  it("a tool whose schema is false is refused whatever its arguments, and never runs", async () => {
    const never = recordingTool("never", false);
    const { outcomes } = await callEach(never.tool, [{}, { any: 1 }]);
    for (const outcome of outcomes) {
      expect(outcome.code).toBe("invalid_arguments");
      expect(issuesOf(outcome.content)).toEqual([{ path: "", message: "False boolean schema." }]);
    }
    expect(never.runs).toEqual([]);
  });

  it("a tool whose schema is true runs with any arguments", async () => {
    const always = recordingTool("always", true);
    const { outcomes } = await callEach(always.tool, [{ any: [1, "two"] }]);
    expect(outcomes[0]).toMatchObject({ status: "success", content: "always ok" });
    expect(always.runs).toEqual([{ any: [1, "two"] }]);
  });
});

describe("the declared dialect", () => {
  it("every failure of the declared dialect is listed in one refusal, not only the first", async () => {
    const pair = recordingTool("pair", { $schema: DRAFT_4, type: "object", properties: { a: above5, b: above5 } });
    const { outcomes } = await callEach(pair.tool, [{ a: 5, b: 5 }]);
    expect(outcomes[0]?.code).toBe("invalid_arguments");
    expect(issuesOf(outcomes[0]?.content ?? "")?.map((issue) => issue.path)).toEqual(["/a", "/b"]);
    expect(pair.runs).toEqual([]);
  });

  it.each<[string, string, boolean]>([
    ["the draft-04 URI with its trailing #", DRAFT_4, true],
    ["the draft-04 URI without it", "http://json-schema.org/draft-04/schema", true],
    ["a URI with a # elsewhere is not draft-04: the default dialect applies", "http://json-schema.org/draft-04/#schema", false],
  ])("%s", async (_name, declared, refused) => {
    const bounded = recordingTool("bounded", { $schema: declared, type: "object", properties: { n: above5 } });
    const { outcomes } = await callEach(bounded.tool, [{ n: 5 }]);
    expect(outcomes[0]?.code).toBe(refused ? "invalid_arguments" : undefined);
    expect(bounded.runs).toEqual(refused ? [] : [{ n: 5 }]);
  });

  it("a failed contains is one issue, at the array, without the summary of the property holding it", async () => {
    const tagged = recordingTool("tagged", {
      type: "object",
      properties: { tags: { type: "array", contains: { const: "urgent" } } },
      required: ["tags"],
    });
    const { outcomes } = await callEach(tagged.tool, [{ tags: ["low"] }, { tags: ["low", "urgent"] }]);
    expect(issuesOf(outcomes[0]?.content ?? "")).toEqual([{ path: "/tags", message: "Array does not contain item matching schema." }]);
    expect(outcomes[1]).toMatchObject({ status: "success", content: "tagged ok" });
    expect(tagged.runs).toEqual([{ tags: ["low", "urgent"] }]);
  });

  it("without the optional @cfworker/json-schema peer, the dialect is checked with @langchain/core's copy", async () => {
    vi.resetModules();
    vi.doMock("@cfworker/json-schema", () => {
      throw new Error("Cannot find package '@cfworker/json-schema'");
    });
    try {
      const fresh = await import("arkah-agent-guardrails");
      const bounded = recordingTool("bounded", { $schema: DRAFT_4, type: "object", properties: { n: above5 } });
      const { outcomes, warnings } = await callEach(bounded.tool, [{ n: 5 }, { n: 6 }], { middleware: fresh.createDocumentGuardrails });
      expect(outcomes[0]?.code).toBe("invalid_arguments");
      expect(issuesOf(outcomes[0]?.content ?? "")).toEqual([{ path: "/n", message: expect.stringMatching(/less than or equal to/) as string }]);
      expect(outcomes[1]).toMatchObject({ status: "success", content: "bounded ok" });
      expect(bounded.runs).toEqual([{ n: 6 }]);
      expect(warnings).toEqual([]);
    } finally {
      vi.doUnmock("@cfworker/json-schema");
      vi.resetModules();
    }
  });
});

describe("a schema guardrail from another copy of the library", () => {
  /** What another copy's `createSchemaGuardrail` is: marked with the same registered symbol. */
  const foreign: Guardrail = Object.assign(
    {
      name: "schema",
      placements: ["tool-args"] as const,
      check: () => ({ action: "deny" as const, outcome: "complete" as const, code: "foreign_schema", detections: [] }),
    },
    { [Symbol.for("arkah-agent-guardrails.schema-guardrail")]: true },
  );

  it("takes the default member's place (no second 'schema'), and is skipped for zod tools like ours", async () => {
    const { agent, store, input, service } = guardedAgent({
      script: [{ toolCalls: [read("r1")] }, { toolCalls: [rename("w1")] }, { content: "done" }],
      guardrails: { guardrails: [foreign] },
    });
    await admit(store, input);
    const messages = await invokeTurn(agent, input);
    expect(outcomeOf(messages, "w1")).toMatchObject({ status: "success", content: '{"title":"Field notes","revision":1}' });
    expect(service.writes).toBe(1);
  });

  it("is used for JSON Schema tools in the default's place", async () => {
    const loose = recordingTool("loose", { type: "object" });
    const { outcomes } = await callEach(loose.tool, [{ n: 1 }], { guardrails: [foreign] });
    expect(outcomes[0]?.code).toBe("foreign_schema");
    expect(loose.runs).toEqual([]);
  });
});

describe("requireApproval", () => {
  it("without describe, the person is asked 'Approve <tool>?', and the recorded verdict names its rule", async () => {
    const { agent, store, input, service } = guardedAgent({
      script: [{ toolCalls: [read("r1")] }, { toolCalls: [rename("w1")] }, { content: "done" }],
      guardrails: { guardrails: [requireApproval({ tools: ["rename_document"] })] },
      checkpointer: new MemorySaver(),
    });
    await admit(store, input);
    const paused = await agent.invoke({ messages: [new HumanMessage(userText(input))] }, { configurable: { thread_id: "approval" } });
    const asked = (paused.__interrupt__ ?? []).map((entry) => entry.value as ApprovalRequest);
    expect(asked.map((request) => [request.tool, request.reason])).toEqual([["rename_document", "Approve rename_document?"]]);
    const args = rename("w1").args;
    const recorded = await store.getVerdict({
      turnKey: turnKey(input),
      toolCallId: "w1",
      toolName: "rename_document",
      toolFingerprint: documentToolFingerprint("rename_document"),
      guardrail: "approval",
      argsDigest: digest(args),
    });
    expect(recorded?.verdict).toEqual({
      action: "approve",
      outcome: "complete",
      detections: [{ rule: "requires-approval", detected: true }],
      reason: "Approve rename_document?",
    });
    expect(service.writes).toBe(0);
  });
});

describe("option errors say what is wrong", () => {
  it("createSchemaGuardrail", () => {
    expect(() => createSchemaGuardrail({ draft: "6" as SchemaDraft })).toThrow(/^invalid createSchemaGuardrail options: .*draft/s);
  });

  it("requireApproval: no tools, or a describe that is not a function", () => {
    expect(() => requireApproval({ tools: [] })).toThrow(/^invalid requireApproval options: .*name at least one tool/s);
    expect(() => requireApproval({ tools: ["rename_document"], describe: "Approve?" as never })).toThrow(ConfigurationError);
    expect(() => requireApproval({ tools: ["rename_document"], describe: "Approve?" as never })).toThrow(/^invalid requireApproval options: .*describe/s);
  });
});
