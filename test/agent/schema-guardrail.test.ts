/**
 * `createSchemaGuardrail` through the real `createAgent` loop: a call's arguments are checked
 * against its tool's own input schema before anything runs, with @cfworker/json-schema. zod tools
 * are converted with zod's JSON Schema export (and re-checked with zod, for refinements JSON
 * Schema cannot express); tools that already carry a JSON Schema (as MCP tools do) are used as
 * they are; a tool with no schema is allowed. The dialect comes from `$schema`, else 2020-12,
 * overridable with `draft`. A denial lists every failing keyword, by JSON Pointer, in one result.
 *
 * Every tool counts its own runs; every assertion is on those counts or on what the model reads.
 */
import { DynamicStructuredTool, StructuredTool, type ClientTool } from "@langchain/core/tools";
import { createAgent, tool } from "langchain";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import {
  ConfigurationError,
  createDocumentGuardrails,
  createSchemaGuardrail,
  digest,
  InMemoryGuardrailStore,
  turnKey,
  type ArgumentIssue,
  type Guardrail,
  type GuardrailContext,
  type SchemaDraft,
} from "arkah-agent-guardrails";
import { toolFingerprint } from "arkah-agent-guardrails/store";
import { ScriptedModel, type ScriptedToolCall } from "arkah-agent-guardrails/testing";
import { admit, invokeTurn, outcomeOf, turnInput } from "../support/fixtures.js";

// ---------------------------------------------------------------------------------------------
// Local helpers

/** The schema of the issue's example: `amount` is required and `reason` may never be given. */
const ISSUE_CREDIT_SCHEMA = {
  type: "object",
  properties: { amount: { type: "number" }, reason: false },
  required: ["amount"],
} as const;

interface Runs {
  /** Arguments of every run, per tool. */
  readonly calls: Record<string, unknown[]>;
}

function runs(): Runs {
  return { calls: {} };
}

function ran(effects: Runs, name: string): unknown[] {
  return effects.calls[name] ?? [];
}

/** A tool built from a plain JSON Schema object, as @langchain/mcp-adapters builds MCP tools. */
function jsonSchemaTool(name: string, schema: Record<string, unknown>, effects: Runs) {
  return tool(
    (args: unknown) => {
      (effects.calls[name] ??= []).push(args);
      return `${name} ok`;
    },
    { name, description: `The ${name} tool.`, schema: schema as never },
  );
}

/** A guardrail that keeps the context of every check, to see the schema the pipeline derived. */
function inspector() {
  const contexts: GuardrailContext[] = [];
  const guardrail: Guardrail = {
    name: "inspector",
    placements: ["tool-args"],
    check: (context) => {
      contexts.push(context);
      return { action: "allow", outcome: "complete", detections: [] };
    },
  };
  return { guardrail, contexts };
}

/**
 * Runs one admitted turn with the given tools (all auxiliary) and a scripted model that makes the
 * given calls, one step each, then answers "done".
 */
async function runCalls(
  tools: readonly ClientTool[],
  calls: readonly ScriptedToolCall[],
  guardrails?: readonly Guardrail[],
) {
  const store = new InMemoryGuardrailStore();
  const input = turnInput();
  await admit(store, input);
  const names = tools.map((candidate) => candidate.name);
  const model = new ScriptedModel([...calls.map((call) => ({ toolCalls: [call] })), { content: "done" }]);
  const agent = createAgent({
    model,
    tools: [...tools],
    middleware: [
      createDocumentGuardrails({
        input,
        store,
        userMessageLabel: "user",
        authorize: () => true,
        tools: Object.fromEntries(names.map((name) => [name, { kind: "auxiliary" as const }])),
        ...(guardrails === undefined ? {} : { guardrails }),
        logger: { warn: () => undefined },
      }),
    ],
  });
  const messages = await invokeTurn(agent, input);
  return { messages, store, input, model };
}

interface Refusal {
  guardrail: string;
  message: string;
  valid?: boolean;
  tool?: string;
  error?: string;
  issues?: ArgumentIssue[];
}

function refusalBody(content: string): Refusal {
  return JSON.parse(content) as Refusal;
}

// ---------------------------------------------------------------------------------------------

describe("a tool that carries a JSON Schema (as MCP tools do) is checked against it as it is", () => {
  it("the issue's example: every failing keyword, by JSON Pointer, in one refusal; the tool never runs", async () => {
    const effects = runs();
    const { messages, model } = await runCalls(
      [jsonSchemaTool("issue-credit", ISSUE_CREDIT_SCHEMA, effects)],
      [{ id: "c1", name: "issue-credit", args: { reason: "goodwill" } }],
    );
    const refusal = outcomeOf(messages, "c1");
    expect(refusal.status).toBe("error");
    const body = refusalBody(refusal.content);
    expect(body.guardrail).toBe("invalid_arguments");
    expect(body.valid).toBe(false);
    expect(body.tool).toBe("issue-credit");
    expect(body.error).toBe(
      'arguments for tool "issue-credit" do not match its inputSchema - #: Instance does not have required property "amount".; #/reason: False boolean schema.',
    );
    expect(body.message).toMatch(/Fix every listed problem/);
    expect(body.issues).toEqual([
      { path: "", message: 'Instance does not have required property "amount".' },
      { path: "/reason", message: "False boolean schema." },
    ]);
    expect(ran(effects, "issue-credit")).toEqual([]);
    expect(model.calls).toBe(2);
  });

  it("valid arguments run the tool once, with exactly those arguments", async () => {
    const effects = runs();
    const { messages } = await runCalls(
      [jsonSchemaTool("issue-credit", ISSUE_CREDIT_SCHEMA, effects)],
      [{ id: "c1", name: "issue-credit", args: { amount: 12.5 } }],
    );
    expect(outcomeOf(messages, "c1")).toMatchObject({ status: "success", content: "issue-credit ok" });
    expect(ran(effects, "issue-credit")).toEqual([{ amount: 12.5 }]);
  });

  it("a DynamicStructuredTool with a JSON Schema is checked the same way", async () => {
    const effects = runs();
    const refund: ClientTool = new DynamicStructuredTool({
      name: "refund",
      description: "Refund an order.",
      schema: {
        type: "object",
        properties: { orderId: { type: "string", pattern: "^ord_[0-9]+$" }, cents: { type: "integer", minimum: 1 } },
        required: ["orderId", "cents"],
        additionalProperties: false,
      },
      func: async (args: unknown) => {
        (effects.calls.refund ??= []).push(args);
        return "refunded";
      },
    }) as unknown as ClientTool;
    const { messages } = await runCalls(
      [refund],
      [
        { id: "f1", name: "refund", args: { orderId: "42", cents: 0, note: "x" } },
        { id: "f2", name: "refund", args: { orderId: "ord_42", cents: 150 } },
      ],
    );
    const body = refusalBody(outcomeOf(messages, "f1").content);
    expect(body.guardrail).toBe("invalid_arguments");
    expect(body.tool).toBe("refund");
    expect((body.issues ?? []).map((issue) => issue.path).sort()).toEqual(["/cents", "/note", "/orderId"]);
    expect(body.error).toMatch(/^arguments for tool "refund" do not match its inputSchema - /);
    for (const issue of body.issues ?? []) expect(body.error).toContain(`#${issue.path}: ${issue.message}`);
    expect(outcomeOf(messages, "f2")).toMatchObject({ status: "success", content: "refunded" });
    expect(ran(effects, "refund")).toEqual([{ orderId: "ord_42", cents: 150 }]);
  });

  it("lists nested failures each at its own pointer, and drops summaries a leaf error already explains", async () => {
    const effects = runs();
    const order = jsonSchemaTool(
      "place-order",
      {
        type: "object",
        properties: {
          currency: { enum: ["EUR", "USD"] },
          lines: {
            type: "array",
            items: { type: "object", properties: { sku: { type: "string" }, qty: { type: "integer", minimum: 1 } }, required: ["sku"] },
          },
        },
        required: ["currency", "lines"],
      },
      effects,
    );
    const { messages } = await runCalls(
      [order],
      [{ id: "o1", name: "place-order", args: { currency: "GBP", lines: [{ sku: "a", qty: 1 }, { qty: 0 }] } }],
    );
    const issues = refusalBody(outcomeOf(messages, "o1").content).issues ?? [];
    expect(issues.map((issue) => issue.path).sort()).toEqual(["/currency", "/lines/1", "/lines/1/qty"]);
    // No "Property ... does not match schema" or "Items did not match schema" summaries.
    for (const issue of issues) expect(issue.message).not.toMatch(/does not match schema|did not match schema/);
    expect(ran(effects, "place-order")).toEqual([]);
  });

  it("the guardrail is shown the tool's JSON Schema unchanged", async () => {
    const effects = runs();
    const seen = inspector();
    await runCalls(
      [jsonSchemaTool("issue-credit", ISSUE_CREDIT_SCHEMA, effects)],
      [{ id: "c1", name: "issue-credit", args: { amount: 1 } }],
      [createSchemaGuardrail(), seen.guardrail],
    );
    expect(seen.contexts[0]?.tool.schema).toEqual(ISSUE_CREDIT_SCHEMA);
  });
});

describe("a zod tool is converted with zod's JSON Schema export", () => {
  const TransferSchema = z.object({
    account: z.string().regex(/^[A-Z]{2}[0-9]{6}$/),
    amount: z.number().positive(),
  });

  it("the guardrail is shown zod's JSON Schema of the tool's input", async () => {
    const effects = runs();
    const transfer = tool(
      (args) => {
        (effects.calls.transfer ??= []).push(args);
        return "sent";
      },
      { name: "transfer", description: "Transfer money.", schema: TransferSchema },
    );
    const seen = inspector();
    await runCalls([transfer], [{ id: "t1", name: "transfer", args: { account: "DE123456", amount: 5 } }], [
      createSchemaGuardrail(),
      seen.guardrail,
    ]);
    const expected = z.toJSONSchema(TransferSchema) as Record<string, unknown>;
    expect(seen.contexts[0]?.tool.schema).toMatchObject({
      type: "object",
      properties: expected.properties as Record<string, unknown>,
      required: expected.required as string[],
    });
    expect(ran(effects, "transfer")).toEqual([{ account: "DE123456", amount: 5 }]);
  });

  it("every failure of a zod tool is listed in one refusal", async () => {
    const effects = runs();
    const transfer = tool(
      (args) => {
        (effects.calls.transfer ??= []).push(args);
        return "sent";
      },
      { name: "transfer", description: "Transfer money.", schema: TransferSchema },
    );
    const { messages } = await runCalls([transfer], [{ id: "t1", name: "transfer", args: { account: "nope", amount: -3 } }]);
    const body = refusalBody(outcomeOf(messages, "t1").content);
    expect(body.guardrail).toBe("invalid_arguments");
    expect((body.issues ?? []).map((issue) => issue.path).sort()).toEqual(["/account", "/amount"]);
    expect(ran(effects, "transfer")).toEqual([]);
  });

  it("a refinement JSON Schema cannot express is still caught before the tool runs", async () => {
    const effects = runs();
    const pay = tool(
      (args) => {
        (effects.calls.pay ??= []).push(args);
        return "paid";
      },
      {
        name: "pay",
        description: "Pay in multiples of five.",
        schema: z.object({
          cents: z.number().int().refine((value) => value % 5 === 0, { error: "cents must be a multiple of 5" }),
        }),
      },
    );
    const { messages } = await runCalls(
      [pay],
      [
        { id: "p1", name: "pay", args: { cents: 12 } },
        { id: "p2", name: "pay", args: { cents: 15 } },
      ],
    );
    const refusal = outcomeOf(messages, "p1");
    expect(refusal.code).toBe("invalid_arguments");
    expect(refusalBody(refusal.content).issues).toEqual([{ path: "/cents", message: "cents must be a multiple of 5" }]);
    expect(refusal.content).not.toContain("Error invoking tool");
    expect(outcomeOf(messages, "p2").status).toBe("success");
    expect(ran(effects, "pay")).toEqual([{ cents: 15 }]);
  });
});

describe("a tool with no schema is allowed", () => {
  it("runs with whatever arguments the model gave, and the guardrail is shown no schema", async () => {
    const effects = runs();
    /** A tool that declares no input schema at all and takes its arguments as they come. */
    class Freeform extends StructuredTool {
      name = "freeform";
      description = "Takes anything.";
      schema = undefined as never;
      override async call(arg: unknown): Promise<never> {
        return this._call(arg) as Promise<never>;
      }
      protected _call(arg: unknown): Promise<string> {
        (effects.calls.freeform ??= []).push(arg);
        return Promise.resolve("freeform ok");
      }
    }
    const seen = inspector();
    const { messages } = await runCalls(
      [new Freeform()],
      [{ id: "x1", name: "freeform", args: { anything: [1, "two", { three: 3 }] } }],
      [createSchemaGuardrail(), seen.guardrail],
    );
    expect(seen.contexts[0]?.tool.schema).toBeUndefined();
    expect(outcomeOf(messages, "x1").status).toBe("success");
    expect(ran(effects, "freeform")).toHaveLength(1);
  });
});

describe("the dialect comes from $schema, else 2020-12, overridable with draft", () => {
  /** draft 4's boolean exclusiveMinimum: 5 is refused under draft 4 only. */
  const exclusive = (declared?: string): Record<string, unknown> => ({
    ...(declared === undefined ? {} : { $schema: declared }),
    type: "object",
    properties: { n: { type: "number", minimum: 5, exclusiveMinimum: true } },
    required: ["n"],
  });
  const DRAFT_4 = "http://json-schema.org/draft-04/schema#";

  it.each<[string, string | undefined, SchemaDraft | undefined, boolean]>([
    ["declared draft-04", DRAFT_4, undefined, true],
    ["no $schema (2020-12)", undefined, undefined, false],
    ["no $schema, draft: '4'", undefined, "4", true],
    ["no $schema, draft: '7'", undefined, "7", false],
    ["declared draft-04 beats draft: '2020-12'", DRAFT_4, "2020-12", true],
    ["an unknown $schema falls back to draft: '4'", "https://example.com/my-dialect", "4", true],
  ])("%s", async (_name, declared, draft, refused) => {
    const effects = runs();
    const { messages } = await runCalls(
      [jsonSchemaTool("bounded", exclusive(declared), effects)],
      [{ id: "b1", name: "bounded", args: { n: 5 } }],
      draft === undefined ? undefined : [createSchemaGuardrail({ draft })],
    );
    const outcome = outcomeOf(messages, "b1");
    if (refused) {
      expect(outcome.code).toBe("invalid_arguments");
      expect(refusalBody(outcome.content).issues).toEqual([{ path: "/n", message: expect.stringMatching(/less than or equal to/) as string }]);
      expect(ran(effects, "bounded")).toEqual([]);
    } else {
      expect(outcome).toMatchObject({ status: "success", content: "bounded ok" });
      expect(ran(effects, "bounded")).toEqual([{ n: 5 }]);
    }
  });

  /** `$ref` siblings: ignored by draft 7, applied from 2019-09 on. */
  const refSibling = (declared?: string): Record<string, unknown> => ({
    ...(declared === undefined ? {} : { $schema: declared }),
    type: "object",
    properties: { n: { $ref: "#/$defs/count", maximum: 10 } },
    $defs: { count: { type: "number" } },
  });

  it.each<[string, string | undefined, SchemaDraft | undefined]>([
    ["no $schema (2020-12)", undefined, undefined],
    ["declared draft-07", "http://json-schema.org/draft-07/schema#", undefined],
    ["draft: '7'", undefined, "7"],
    ["draft: '2019-09'", undefined, "2019-09"],
  ])("%s: LangChain's own dialect (2019-09) applies $ref siblings, so the call is refused before any guardrail", async (_name, declared, draft) => {
    const effects = runs();
    const guardrails = [createSchemaGuardrail({ name: "dialect", ...(draft === undefined ? {} : { draft }) })];
    const args = { n: 50 };
    const counted = jsonSchemaTool("counted", refSibling(declared), effects);
    const { messages, store, input } = await runCalls([counted], [{ id: "n1", name: "counted", args }], guardrails);
    // The tool would reject it when LangChain invokes it: refused as invalid_arguments first, so a
    // laxer declared dialect can never let it reach a claim it would leave unknown.
    const outcome = outcomeOf(messages, "n1");
    expect(outcome.code).toBe("invalid_arguments");
    expect(refusalBody(outcome.content).issues).toEqual([{ path: "/n", message: "50 is greater than 10." }]);
    const key = {
      turnKey: turnKey(input),
      toolCallId: "n1",
      toolName: "counted",
      toolFingerprint: toolFingerprint(counted),
      guardrail: "dialect",
      argsDigest: digest(args),
    };
    expect(await store.getVerdict(key)).toBeUndefined();
    expect(ran(effects, "counted")).toEqual([]);
  });
});

describe("options", () => {
  it("an unknown draft or option is a ConfigurationError", () => {
    expect(() => createSchemaGuardrail({ draft: "6" as SchemaDraft })).toThrow(ConfigurationError);
    expect(() => createSchemaGuardrail({ strict: true } as never)).toThrow(ConfigurationError);
  });

  it("a custom name is what its denial is reported under; as a pure function of the call, its verdict is not stored", async () => {
    const effects = runs();
    const args = { n: 5 };
    const DRAFT_4 = "http://json-schema.org/draft-04/schema#";
    const schema = { $schema: DRAFT_4, type: "object", properties: { n: { type: "number", minimum: 5, exclusiveMinimum: true } } };
    const bounded = jsonSchemaTool("bounded", schema, effects);
    const { store, input } = await runCalls([bounded], [{ id: "c1", name: "bounded", args }], [createSchemaGuardrail({ name: "mcp-schema" })]);
    // LangChain's dialect accepts it; the declared draft-04 refuses it, under the given name.
    const events = (await store.readAudit()).filter((event) => event.toolCallId === "c1");
    expect(events.map((event) => [event.decision, event.guardrail, event.code])).toEqual([
      ["verdict", "mcp-schema", "invalid_arguments"],
      ["refused", "mcp-schema", "invalid_arguments"],
    ]);
    const key = { turnKey: turnKey(input), toolCallId: "c1", toolName: "bounded", toolFingerprint: toolFingerprint(bounded), argsDigest: digest(args) };
    expect(await store.getVerdict({ ...key, guardrail: "mcp-schema" })).toBeUndefined();
    expect(ran(effects, "bounded")).toEqual([]);
  });
});
