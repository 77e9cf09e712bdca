/**
 * The schema guardrail's pure parts: `leafIssues` (which of a validator's errors the model is
 * told), `declaredSchema` (the frozen JSON Schema guardrails are shown), `zodSchemaOf`, and the
 * verdict `createSchemaGuardrail` answers when asked directly. Validator errors come from the
 * validator the library itself uses (@langchain/core's @cfworker/json-schema), not written by hand,
 * except where the contract is about errors no schema makes that validator report.
 */
import { DynamicStructuredTool, type ClientTool } from "@langchain/core/tools";
import { Validator } from "@langchain/core/utils/json_schema";
import { tool } from "langchain";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { createSchemaGuardrail, type GuardrailContext, type JsonSchema, type SchemaDraft } from "arkah-agent-guardrails";
import { declaredSchema, leafIssues, zodSchemaOf, type ValidationError } from "../../src/guardrails/schema.js";

/** What the validator reports for `instance`, every error (no short circuit). */
function errorsOf(schema: Record<string, unknown>, instance: unknown, draft: SchemaDraft = "2020-12"): ValidationError[] {
  return new Validator(schema, draft, false).validate(instance).errors;
}

/** A JSON Schema tool, as @langchain/mcp-adapters builds them. */
function jsonTool(schema: unknown): ClientTool {
  return new DynamicStructuredTool({ name: "t", description: "A tool.", schema: schema as never, func: () => Promise.resolve("ok") });
}

const TYPE_NUMBER = 'Instance type "string" is invalid. Expected "number".';

describe("leafIssues: each applicator's summary is dropped when the error under it says what is wrong", () => {
  it.each<[string, Record<string, unknown>, unknown, SchemaDraft, { path: string; message: string }[]]>([
    ["patternProperties", { patternProperties: { "^x": { type: "number" } } }, { xa: "s" }, "2020-12", [{ path: "/xa", message: TYPE_NUMBER }]],
    ["prefixItems", { properties: { p: { prefixItems: [{ type: "number" }] } } }, { p: ["s"] }, "2020-12", [{ path: "/p/0", message: TYPE_NUMBER }]],
    ["additionalItems", { properties: { p: { items: [{}], additionalItems: { type: "number" } } } }, { p: [1, "s"] }, "2019-09", [{ path: "/p/1", message: TYPE_NUMBER }]],
    ["unevaluatedProperties", { properties: { a: {} }, unevaluatedProperties: false }, { a: 1, b: 2 }, "2020-12", [{ path: "/b", message: "False boolean schema." }]],
    ["unevaluatedItems", { properties: { p: { prefixItems: [{}], unevaluatedItems: false } } }, { p: [1, 2] }, "2020-12", [{ path: "/p/1", message: "False boolean schema." }]],
    ["allOf (the leaf at the same location)", { allOf: [{ required: ["a"] }] }, {}, "2020-12", [{ path: "", message: 'Instance does not have required property "a".' }]],
    ["$ref (the leaf at the same location)", { properties: { n: { $ref: "#/$defs/count" } }, $defs: { count: { type: "number" } } }, { n: "s" }, "2020-12", [{ path: "/n", message: TYPE_NUMBER }]],
    ["$recursiveRef", { $recursiveAnchor: true, properties: { child: { $recursiveRef: "#" }, v: { type: "number" } } }, { child: { v: "s" } }, "2019-09", [{ path: "/child/v", message: TYPE_NUMBER }]],
    ["dependentSchemas", { dependentSchemas: { a: { required: ["b"] } } }, { a: 1 }, "2020-12", [{ path: "", message: 'Instance does not have required property "b".' }]],
    ["if (then)", { if: { properties: { k: { const: "x" } } }, then: { required: ["v"] }, else: { required: ["w"] } }, { k: "x" }, "2020-12", [{ path: "", message: 'Instance does not have required property "v".' }]],
    ["if (else)", { if: { properties: { k: { const: "x" } } }, then: { required: ["v"] }, else: { required: ["w"] } }, { k: "y" }, "2020-12", [{ path: "", message: 'Instance does not have required property "w".' }]],
  ])("%s", (_keyword, schema, instance, draft, expected) => {
    const errors = errorsOf(schema, instance, draft);
    // The validator did report a summary besides the leaf: dropping it is leafIssues' doing.
    expect(errors.length).toBeGreaterThan(expected.length);
    expect(leafIssues(errors)).toEqual(expected);
  });

  it("contains reports no item errors under it, so its own error is the one the model reads", () => {
    const schema = { properties: { tags: { type: "array", contains: { const: "urgent" } } } };
    expect(leafIssues(errorsOf(schema, { tags: ["low"] }))).toEqual([{ path: "/tags", message: "Array does not contain item matching schema." }]);
  });
});

describe("leafIssues: a summary is dropped only for an error at or below its own location", () => {
  const summary = (instanceLocation: string): ValidationError => ({ instanceLocation, keyword: "properties", error: `Summary at ${instanceLocation}.` });
  const leaf = (instanceLocation: string): ValidationError => ({ instanceLocation, keyword: "type", error: `Leaf at ${instanceLocation}.` });

  it("an error at a sibling location, even one whose name extends it, explains nothing", () => {
    expect(leafIssues([summary("#/a"), leaf("#/ab"), leaf("#/b")])).toEqual([
      { path: "/a", message: "Summary at #/a." },
      { path: "/ab", message: "Leaf at #/ab." },
      { path: "/b", message: "Leaf at #/b." },
    ]);
  });

  it("a summary with only another summary under it is kept, and so is that one", () => {
    expect(leafIssues([summary("#"), { ...summary("#/a"), keyword: "$ref" }])).toEqual([
      { path: "", message: "Summary at #." },
      { path: "/a", message: "Summary at #/a." },
    ]);
  });

  it("a leaf below the summary explains it", () => {
    expect(leafIssues([summary("#/a"), leaf("#/a/b")])).toEqual([{ path: "/a/b", message: "Leaf at #/a/b." }]);
  });
});

describe("declaredSchema: the tool's input schema as guardrails are shown it", () => {
  it("no tool, no schema", () => {
    expect(declaredSchema(undefined)).toBeUndefined();
    expect(zodSchemaOf(undefined)).toBeUndefined();
  });

  it("a JSON Schema is a deep-frozen copy: a guardrail can change neither it nor the tool's own", () => {
    const own = { type: "object", properties: { amount: { type: "number", enum: [1, null] } }, required: ["amount"] };
    const declared = declaredSchema(jsonTool(own)) as { properties: { amount: { type: string } }; required: string[] };
    expect(declared).toEqual(own);
    expect(declared).not.toBe(own);
    expect(Object.isFrozen(declared)).toBe(true);
    expect(Object.isFrozen(declared.properties.amount)).toBe(true);
    expect(Object.isFrozen(declared.required)).toBe(true);
    expect(Object.isFrozen(own)).toBe(false);
  });

  it("is the same object for every call of one tool (the schema guardrail compiles per schema object)", () => {
    const zodTool = tool(() => "ok", { name: "z", description: "A zod tool.", schema: z.object({ n: z.number() }) });
    expect(declaredSchema(zodTool)).toBe(declaredSchema(zodTool));
    const json = jsonTool({ type: "object" });
    expect(declaredSchema(json)).toBe(declaredSchema(json));
  });

  it("boolean schemas are kept as they are; null or a non-schema value is no schema", () => {
    expect(declaredSchema(jsonTool(false))).toBe(false);
    expect(declaredSchema(jsonTool(true))).toBe(true);
    expect(declaredSchema(jsonTool(null))).toBeUndefined();
    expect(declaredSchema(jsonTool("object"))).toBeUndefined();
  });

  it("a zod schema zod cannot export as JSON Schema is no declared schema (the tool's own parse still checks it)", () => {
    const dated = tool(() => "ok", { name: "d", description: "Dated.", schema: z.object({ at: z.date() }) });
    expect(zodSchemaOf(dated)).toBeDefined();
    expect(declaredSchema(dated)).toBeUndefined();
  });
});

describe("createSchemaGuardrail asked directly", () => {
  const context = (schema: JsonSchema, rawArgs: Record<string, number>): GuardrailContext => ({
    placement: "tool-args",
    toolCall: { id: "c1", name: "bounded", args: rawArgs, rawArgs },
    tool: { name: "bounded", kind: undefined, schema },
    turn: { scopeId: "doc-1", turnId: "turn-1", turnKey: "k" },
    signal: new AbortController().signal,
  });
  const SCHEMA = declaredSchema(jsonTool({ type: "object", properties: { n: { type: "number", maximum: 3 } } })) as JsonSchema;

  it("a denial carries one detection per problem: rule schema, detected, its pointer and message", async () => {
    const verdict = await createSchemaGuardrail().check(context(SCHEMA, { n: 5 }));
    expect(verdict).toMatchObject({
      action: "deny",
      outcome: "complete",
      code: "invalid_arguments",
      detections: [{ rule: "schema", detected: true, path: "/n", message: "5 is greater than 3." }],
    });
  });

  it("compiles a schema once: after the first check of a schema it answers synchronously, in every schema guardrail", async () => {
    // A schema no other test compiled: declaredSchema gives each tool schema one object.
    const schema = declaredSchema(jsonTool({ type: "object", properties: { m: { type: "number", maximum: 3 } } })) as JsonSchema;
    const guardrail = createSchemaGuardrail();
    const first = guardrail.check(context(schema, { m: 1 }));
    expect(first).toBeInstanceOf(Promise);
    expect(await first).toMatchObject({ action: "allow" });
    const second = guardrail.check(context(schema, { m: 9 }));
    expect(second).not.toBeInstanceOf(Promise);
    expect(second).toMatchObject({ action: "deny", code: "invalid_arguments" });
    // A middleware built per turn builds its schema guardrail anew: it compiles nothing again.
    const another = createSchemaGuardrail().check(context(schema, { m: 9 }));
    expect(another).not.toBeInstanceOf(Promise);
    expect(another).toMatchObject({ action: "deny", code: "invalid_arguments" });
    // Another draft is another compilation (a schema without $schema is read in the configured one).
    expect(createSchemaGuardrail({ draft: "7" }).check(context(schema, { m: 1 }))).toBeInstanceOf(Promise);
  });
});
