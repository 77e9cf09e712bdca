/**
 * `parseDefinition`, the part of `toolFingerprint` v3 that covers what a zod v4 schema's parse
 * does: the same for the same code, different for every change to what parses (also those its
 * JSON Schema export cannot show), bounded, and never calling the schema's own functions.
 */
import { toJsonSchema } from "@langchain/core/utils/json_schema";
import { tool } from "langchain";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import * as z3 from "zod/v3";
import { DigestError, digest } from "arkah-agent-guardrails";
import { toolFingerprint } from "arkah-agent-guardrails/store";
import { parseDefinition } from "../../src/execution/parse-definition.js";

interface TreeNode {
  name: string;
  children: TreeNode[];
}

/** A schema with most of what zod v4 can hold; each call builds it anew. */
function everything() {
  const Tree: z.ZodType<TreeNode> = z.object({
    name: z.string(),
    get children() {
      return z.array(Tree);
    },
  });
  return z
    .object({
      id: z.string().regex(/^doc-[0-9]+$/i),
      title: z.string().trim().min(1).max(200),
      count: z.coerce.number().int().positive(),
      at: z.iso.datetime().optional(),
      mode: z.enum(["replace", "append"]).default("replace"),
      flag: z.stringbool(),
      tree: Tree,
      value: z.json(),
      tags: z.array(z.string().toLowerCase()).max(5).catch([]),
      op: z.discriminatedUnion("kind", [z.object({ kind: z.literal("a"), x: z.string() }), z.object({ kind: z.literal("b") })]),
      size: z.bigint().min(5n).optional(),
      body: z
        .string()
        .refine((body) => !body.includes("http"), "no links")
        .superRefine((body, context) => {
          if (body.length > 100) context.addIssue({ code: "custom", message: "too long" });
        })
        .transform((body) => body.normalize()),
      pre: z.preprocess((value) => (typeof value === "string" ? value.trim() : value), z.string()),
      when: z.codec(z.iso.datetime(), z.date(), { decode: (text) => new Date(text), encode: (date) => date.toISOString() }),
    })
    .strict()
    .check((payload) => {
      if (payload.value.id === "") payload.issues.push({ code: "custom", message: "empty", input: payload.value });
    });
}

const fingerprint = (schema: unknown) => digest(parseDefinition(schema));

describe("parseDefinition: the same code, the same definition", () => {
  it("two separately built identical schemas (refinements, transforms, lazy and getter recursion, defaults, coercion) have one definition", () => {
    const first = everything();
    const second = everything();
    expect(second).not.toBe(first);
    expect(parseDefinition(second)).toEqual(parseDefinition(first));
    expect(fingerprint(second)).toBe(fingerprint(first));
  });

  it("is plain JSON: its digest is defined, and reading it twice answers the same", () => {
    const schema = everything();
    expect(JSON.parse(JSON.stringify(parseDefinition(schema)))).toEqual(parseDefinition(schema));
  });

  it("is null for what is not a zod v4 schema: a JSON Schema, a zod 3 schema, nothing", () => {
    expect(parseDefinition({ type: "object", properties: {} })).toBeNull();
    expect(parseDefinition(z3.object({ a: z3.string() }))).toBeNull();
    expect(parseDefinition(undefined)).toBeNull();
  });
});

describe("parseDefinition: every change to what parses changes it", () => {
  const base = () => z.object({ noteId: z.string(), body: z.string().refine((body) => !body.includes("http"), "no links") });
  const body = (inner: z.ZodType) => z.object({ noteId: z.string(), body: inner });
  const changes: Record<string, () => z.ZodType> = {
    ".loose()": () => base().loose(),
    ".strict()": () => base().strict(),
    "a catchall": () => base().catchall(z.string()),
    "a transform": () => body(z.string().refine((text) => !text.includes("http"), "no links").transform((text) => text.toUpperCase())),
    "the refinement dropped": () => body(z.string()),
    "the refinement's code changed": () => body(z.string().refine((text) => !text.includes("https"), "no links")),
    "a superRefine added": () => body(z.string().refine((text) => !text.includes("http"), "no links").superRefine(() => undefined)),
    "a check added": () => base().check(() => undefined),
    "coercion": () => z.object({ noteId: z.coerce.string(), body: z.string().refine((text) => !text.includes("http"), "no links") }),
    "a preprocess": () => z.object({ noteId: z.preprocess((value) => value, z.string()), body: z.string().refine((text) => !text.includes("http"), "no links") }),
    "a built-in check's parameter": () => body(z.string().max(10).refine((text) => !text.includes("http"), "no links")),
    "an overwrite (trim)": () => body(z.string().trim().refine((text) => !text.includes("http"), "no links")),
    "a default": () => body(z.string().refine((text) => !text.includes("http"), "no links").default("x")),
    "a constant catch": () => body(z.string().refine((text) => !text.includes("http"), "no links").catch("x")),
    "an optional key": () => body(z.string().refine((text) => !text.includes("http"), "no links").optional()),
    "another key": () => z.object({ noteId: z.string(), text: z.string().refine((body) => !body.includes("http"), "no links") }),
  };
  const reviewed = fingerprint(base());

  for (const [change, schema] of Object.entries(changes)) {
    it(`differs: ${change}`, () => {
      expect(fingerprint(schema())).not.toBe(reviewed);
    });
  }

  it("covers what the JSON Schema export cannot show: .loose(), a transform, the refinement, a catchall, coercion", () => {
    for (const change of [".loose()", "a transform", "the refinement dropped", "a catchall", "coercion"]) {
      const schema = changes[change]?.();
      expect(toJsonSchema(schema as z.ZodType)).toEqual(toJsonSchema(base()));
      expect(toolFingerprint({ name: "edit_note", schema })).not.toBe(toolFingerprint({ name: "edit_note", schema: base() }));
    }
  });

  it("tells constants apart: regex flags, catch values, a key named __proto__", () => {
    expect(fingerprint(z.string().regex(/a/i))).not.toBe(fingerprint(z.string().regex(/a/)));
    expect(fingerprint(z.string().catch("a"))).not.toBe(fingerprint(z.string().catch("b")));
    const proto = z.object({ ["__proto__"]: z.string() });
    expect(JSON.stringify(parseDefinition(proto))).toContain('"shape":{"$object":{"__proto__":{"$node":1}}}');
    expect(fingerprint(proto)).not.toBe(fingerprint(z.object({})));
  });
});

describe("parseDefinition: what it leaves out, by design", () => {
  it("equal parses are equal: .passthrough() is .loose(), .strip() is the default", () => {
    const base = () => z.object({ a: z.string() });
    // eslint-disable-next-line @typescript-eslint/no-deprecated -- the point: the deprecated alias parses as .loose()
    expect(fingerprint(base().passthrough())).toBe(fingerprint(base().loose()));
    expect(fingerprint(base().strip())).toBe(fingerprint(base()));
  });

  it("an issue's message is not part of it (it words the refusal, it does not change what parses)", () => {
    expect(fingerprint(z.string().min(3, "too short"))).toBe(fingerprint(z.string().min(3, "needs three")));
  });

  it("a default function is never called; a superRefine's function is hidden in zod's closure (documented)", () => {
    let calls = 0;
    const schema = z.object({
      id: z.string().default(() => {
        calls += 1;
        return `id-${String(calls)}`;
      }),
    });
    parseDefinition(schema);
    expect(calls).toBe(0);
    // zod keeps the function a superRefine was given inside its own wrapper: only adding or
    // dropping one is seen (docs/architecture.md, "What a tool's fingerprint proves").
    const empty = z.string().superRefine((text, context) => {
      if (text === "") context.addIssue({ code: "custom", message: "empty" });
    });
    expect(fingerprint(z.string().superRefine(() => undefined))).toBe(fingerprint(empty));
  });
});

describe("parseDefinition: bounded", () => {
  it("a cycle (z.json(), a recursive getter) is described once", () => {
    const definition = parseDefinition(z.object({ value: z.json() }));
    expect(definition?.nodes.length).toBeLessThan(20);
  });

  it("a z.lazy that builds a new schema each time it is read has no definition: DigestError, no hang", () => {
    const endless = (): z.ZodType => z.object({ next: z.lazy(endless) });
    // Through parseDefinition alone: LangChain's JSON Schema export of such a schema ends in a stack
    // overflow, which the fingerprint's JSON Schema part catches, or not, depending on the stack.
    expect(() => parseDefinition(endless())).toThrow(DigestError);
    expect(() => parseDefinition(endless())).toThrow(/more than 10000 schemas and checks/);
  });

  it("a schema whose shape getter throws has no fingerprint (the error is the getter's)", () => {
    const broken = tool(() => "ok", {
      name: "edit_note",
      schema: z.object({
        get body(): z.ZodString {
          throw new Error("no shape");
        },
      }),
    });
    expect(() => toolFingerprint(broken)).toThrow("no shape");
  });
});
