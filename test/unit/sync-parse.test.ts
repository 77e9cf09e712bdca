import { interopSafeParseAsync } from "@langchain/core/utils/types";
import { tool } from "langchain";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import * as z3 from "zod/v3";
import { parseArguments, type SealableTool } from "../../src/execution/parse.js";
import { parsesSynchronously } from "../../src/execution/sync-parse.js";

interface TreeNode {
  name: string;
  children: TreeNode[];
}
const Tree: z.ZodType<TreeNode> = z.object({
  name: z.string(),
  get children() {
    return z.array(Tree);
  },
});

/** Schemas made of built-in parts only: zod's sync and async parses run the same code. */
const builtIn: Record<string, z.ZodType> = {
  "strings, numbers, booleans": z.object({ title: z.string().min(1).max(200), count: z.number().int().min(0), draft: z.boolean() }),
  "optional, nullable, default, prefault": z.object({
    a: z.string().optional(),
    b: z.string().nullable(),
    c: z.number().default(3),
    d: z.object({ e: z.string().default("x") }).prefault({}),
  }),
  "enum, literal, union, discriminated union": z.object({
    mode: z.enum(["replace", "append"]),
    v: z.literal(1),
    target: z.union([z.string(), z.number()]),
    op: z.discriminatedUnion("kind", [z.object({ kind: z.literal("a"), x: z.string() }), z.object({ kind: z.literal("b") })]),
  }),
  "array, tuple, record, intersection": z.object({
    ids: z.array(z.uuid()).max(5),
    pair: z.tuple([z.string(), z.number()]),
    tags: z.record(z.string(), z.string()),
    both: z.intersection(z.object({ a: z.string() }), z.object({ b: z.string() })),
  }),
  "string formats and trims (overwrite)": z.object({ email: z.email(), url: z.url().optional(), name: z.string().trim().toLowerCase() }),
  "loose and strict objects": z.object({ a: z.looseObject({ x: z.string() }), b: z.strictObject({ y: z.string() }) }),
  "a recursive schema (a getter)": z.object({ root: Tree }),
  readonly: z.object({ list: z.array(z.string()).readonly() }),
};

const lookup = async (value: string) => {
  await Promise.resolve();
  return value !== "missing";
};

/** Schemas with code of the tool author's that can answer a promise, or parts the walk does not know. */
const notBuiltIn: Record<string, unknown> = {
  "a refinement": z.object({ path: z.string() }).refine(async ({ path }) => lookup(path)),
  "a refinement deep inside": z.object({ files: z.array(z.object({ path: z.string().refine(lookup) })).optional() }),
  "a refinement in one option of a union": z.object({ path: z.union([z.literal("x"), z.string().refine(lookup)]) }),
  "a superRefine": z.object({ path: z.string() }).superRefine(async () => {
    await Promise.resolve();
  }),
  "a check": z.object({ path: z.string().check(() => undefined) }),
  "a transform": z.object({ path: z.string().transform(async (path) => path) }),
  "a preprocess": z.object({ path: z.preprocess((value) => value, z.string()) }),
  "a pipe": z.object({ path: z.string().pipe(z.string()) }),
  "a codec": z.object({
    at: z.codec(z.iso.datetime(), z.date(), { decode: (text) => new Date(text), encode: (date) => date.toISOString() }),
  }),
  "a custom schema": z.object({ path: z.custom<string>((value) => typeof value === "string") }),
  "an instanceof": z.object({ at: z.instanceof(Date) }),
  "a lazy schema": z.object({ node: z.lazy(() => z.string()) }),
  "a catch": z.object({ path: z.string().catch(() => "fallback") }),
  "a promise schema": z.object({ path: z.promise(z.string()) }),
  "a property check": z.object({ path: z.string() }).check(z.property("path", z.string().refine(lookup))),
  "a record whose values refine": z.object({ tags: z.record(z.string(), z.string().refine(lookup)) }),
  "a catchall that refines": z.object({ a: z.string() }).catchall(z.string().refine(lookup)),
  "a zod 3 schema": z3.object({ path: z3.string() }),
  "not a schema": { type: "object" },
};

describe("parsesSynchronously: only a zod v4 schema of built-in types and checks", () => {
  for (const [name, schema] of Object.entries(builtIn)) {
    it(`built-in parts: ${name}`, () => {
      expect(parsesSynchronously(schema)).toBe(true);
    });
  }
  for (const [name, schema] of Object.entries(notBuiltIn)) {
    it(`async: ${name}`, () => {
      expect(parsesSynchronously(schema)).toBe(false);
    });
  }

  it("a schema too large to walk is parsed async", () => {
    const shape = Object.fromEntries(Array.from({ length: 2_500 }, (_, index) => [`k${String(index)}`, z.string()]));
    expect(parsesSynchronously(z.object(shape))).toBe(false);
  });

  it("a schema whose shape getter throws is parsed async (and the walk does not throw)", () => {
    const schema = z.object({
      get broken(): z.ZodString {
        throw new Error("no shape");
      },
    });
    expect(parsesSynchronously(schema)).toBe(false);
  });
});

describe("the sync parse of a built-in schema is the tool's own (async) parse", () => {
  const inputs: readonly unknown[] = [
    {},
    { title: "x", count: 2, draft: false },
    { title: "", count: -1, draft: "no" },
    { a: "x", b: null, d: {} },
    { mode: "append", v: 1, target: 3, op: { kind: "b" }, extra: true },
    { mode: "other", v: 2, target: [], op: { kind: "c" } },
    { ids: ["0b5e7f5c-6a3f-4b8e-9a53-3c1c8f4d2a11"], pair: ["a", 1], tags: { k: "v" }, both: { a: "1", b: "2" } },
    { email: "a@example.com", name: "  Ada  " },
    { email: "not an email", url: "nope", name: 3 },
    { a: { x: "1", more: 2 }, b: { y: "2", more: 3 } },
    { root: { name: "r", children: [{ name: "c", children: [] }] } },
    { root: { name: "r", children: [{ name: 1 }] } },
    { list: ["a", "b"] },
    // Keys a model can write that name an object's prototype: stripped or kept alike by both parses.
    JSON.parse('{"__proto__": {"polluted": 1}, "title": "x", "a": "y"}') as unknown,
    JSON.parse('{"constructor": {"prototype": {"p": 1}}, "tags": {"__proto__": "v", "k": "w"}}') as unknown,
    JSON.parse('{"a": {"x": "1", "__proto__": {"z": 1}}, "b": {"y": "2", "__proto__": 1}}') as unknown,
  ];
  for (const [name, schema] of Object.entries(builtIn)) {
    it(name, async () => {
      const subject = tool(() => "ok", { name: "subject", description: "d", schema }) as unknown as SealableTool;
      for (const input of inputs) {
        const parsed = parseArguments(subject, input);
        expect(parsed).not.toBeInstanceOf(Promise);
        const reference = await interopSafeParseAsync(schema, structuredClone(input));
        if (reference.success) {
          expect(parsed).toMatchObject({ ok: true });
          const { args } = parsed as { args: object };
          expect(args).toEqual(reference.data);
          expect(Reflect.ownKeys(args)).toEqual(Reflect.ownKeys(reference.data as object));
        } else {
          const issues = (reference.error as { issues: readonly { message: string }[] }).issues;
          expect(parsed).toMatchObject({ ok: false });
          expect((parsed as { issues: readonly { message: string }[] }).issues.map((issue) => issue.message)).toEqual(
            issues.map((issue) => issue.message),
          );
        }
      }
    });
  }
});
