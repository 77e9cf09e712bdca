import { tool } from "langchain";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { parseArguments, type SealableTool } from "../../src/execution/parse.js";

const sealable = (value: unknown) => value as SealableTool;

describe("parseArguments: a JSON Schema tool and a zod schema that cannot wait synchronously, any other zod tool async (as the tool parses)", () => {
  it("a zod tool with built-in parts only: the tool's own parse, not a promise", () => {
    const rename = tool(() => "ok", { name: "rename", description: "d", schema: z.object({ title: z.string().default("Untitled") }) });
    const parsed = parseArguments(sealable(rename), { extra: 1 });
    expect(parsed).not.toBeInstanceOf(Promise);
    expect(parsed).toMatchObject({ ok: true, raw: { extra: 1 }, args: { title: "Untitled" } });
  });

  it("a zod tool with a transform: a promise of the tool's own parse", async () => {
    const schema = z.object({ title: z.string().transform((title) => title.toUpperCase()) });
    const rename = tool(() => "ok", { name: "rename", description: "d", schema });
    const parsed = parseArguments(sealable(rename), { title: "notes" });
    expect(parsed).toBeInstanceOf(Promise);
    await expect(parsed).resolves.toMatchObject({ ok: true, args: { title: "NOTES" } });
  });

  it("a JSON Schema tool: the validation, not a promise; a refusal too", () => {
    const search = tool(() => "ok", {
      name: "search",
      description: "d",
      schema: { type: "object", properties: { q: { type: "string" } }, required: ["q"] },
    });
    expect(parseArguments(sealable(search), { q: "x" })).toMatchObject({ ok: true, args: { q: "x" } });
    const refused = parseArguments(sealable(search), {});
    expect(refused).not.toBeInstanceOf(Promise);
    expect(refused).toMatchObject({ ok: false });
  });

  it("a zod schema with an async refinement: a promise of the same answer the tool's own parse gives", async () => {
    const schema = z.object({ title: z.string() }).refine(async (value) => value.title !== "forbidden", "forbidden title");
    const rename = tool(() => "ok", { name: "rename", description: "d", schema });
    const allowed = parseArguments(sealable(rename), { title: "Field notes" });
    expect(allowed).toBeInstanceOf(Promise);
    await expect(allowed).resolves.toMatchObject({ ok: true, args: { title: "Field notes" } });
    await expect(parseArguments(sealable(rename), { title: "forbidden" })).resolves.toMatchObject({
      ok: false,
      issues: [{ message: "forbidden title" }],
    });
  });

  it("an async refinement that throws: a rejected promise, for the pipeline to refuse the call", async () => {
    const boom = new Error("refinement bug");
    const asyncTool = tool(() => "ok", {
      name: "async",
      description: "d",
      schema: z.object({ a: z.string() }).refine(async () => {
        await Promise.resolve();
        throw boom;
      }),
    });
    await expect(parseArguments(sealable(asyncTool), { a: "x" })).rejects.toBe(boom);
  });
});
