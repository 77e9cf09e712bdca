/**
 * Attack class 21: a tool's schema brings the server down. A zod schema with an async refinement
 * (a lookup that can fail) is parsed by the guardrails before the tool parses it again. Parsed
 * synchronously first, zod runs the refinement and drops its promise, so a refinement that rejects
 * became an unhandled rejection, which ends a Node process: anyone who could get the model to call
 * that tool with arguments that make the lookup fail could stop the server. The guardrails parse a
 * zod tool async, as `StructuredTool.call` does, unless nothing in its schema can answer a promise
 * (src/execution/sync-parse.ts): the call is refused `invalid_arguments`, the body never runs, and
 * nothing is left unhandled, wherever in the schema the refinement sits.
 */
import { tool } from "langchain";
import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { outcomeOf } from "../support/fixtures.js";
import { secureAgent } from "./support.js";

const unhandled: unknown[] = [];
const record = (reason: unknown) => unhandled.push(reason);

afterEach(() => {
  process.off("unhandledRejection", record);
  unhandled.length = 0;
});

/** A lookup that fails for the paths the model chose under /missing, as a file system or an API would. */
const lookup = async (path: string) => {
  await Promise.resolve();
  if (path.startsWith("/missing")) throw new Error("lookup failed");
  return true;
};

/** A read tool with `schema` that notes every path its body opens. */
function readFileTool(schema: z.ZodType<{ readonly path?: unknown }>, opened: unknown[]) {
  return tool(
    ({ path }) => {
      opened.push(path);
      return "contents";
    },
    { name: "read_file", description: "Read a file.", schema },
  );
}

describe("a tool whose async refinement rejects cannot end the process", () => {
  it("the call is refused invalid_arguments, the body never runs, and no rejection is left unhandled", async () => {
    process.on("unhandledRejection", record);
    const opened: unknown[] = [];
    const readFile = readFileTool(
      z.object({ path: z.string() }).refine(async ({ path }) => lookup(path), "no such file"),
      opened,
    );
    const { run } = secureAgent({
      tools: [readFile],
      policies: { read_file: { kind: "source-read" } },
      script: [
        { toolCalls: [{ id: "f1", name: "read_file", args: { path: "/missing/a" } }] },
        { toolCalls: [{ id: "f2", name: "read_file", args: { path: "/srv/notes.txt" } }] },
        { content: "done" },
      ],
    });
    const messages = await run();
    // Rejections are reported after the microtask queue drains: give them the turns they need.
    for (let turn = 0; turn < 5; turn++) await new Promise((resolve) => setImmediate(resolve));
    expect(outcomeOf(messages, "f1").code).toBe("invalid_arguments");
    expect(outcomeOf(messages, "f2").status).toBe("success");
    expect(opened).toEqual(["/srv/notes.txt"]);
    expect(unhandled).toEqual([]);
  });

  // The guardrails parse synchronously a schema made of built-in parts only (src/execution/sync-parse.ts):
  // an async refinement or transform anywhere in it, however deep, must still send it down the async parse.
  // Each schema, and a `path` the model chose that makes its lookup fail.
  const deep: Record<string, readonly [z.ZodType<{ readonly path?: unknown }>, unknown]> = {
    "inside an array of objects": [
      z.object({ path: z.array(z.object({ name: z.string().refine(async (name) => lookup(name)) })) }),
      [{ name: "/missing/a" }],
    ],
    "in one option of a union": [z.object({ path: z.union([z.literal("/none"), z.string().refine(async (path) => lookup(path))]) }), "/missing/a"],
    "in a transform behind an optional": [
      z.object({
        path: z
          .string()
          .transform(async (path) => ((await lookup(path)) ? path : "/unreachable"))
          .optional(),
      }),
      "/missing/a",
    ],
    "in a property check": [
      z.object({ path: z.string() }).check(z.property("path", z.string().refine(async (path) => lookup(path)))),
      "/missing/a",
    ],
  };
  for (const [where, [schema, missing]] of Object.entries(deep)) {
    it(`an async refinement ${where}: refused invalid_arguments, the body never runs, nothing unhandled`, async () => {
      process.on("unhandledRejection", record);
      const opened: unknown[] = [];
      const readFile = readFileTool(schema, opened);
      const { run } = secureAgent({
        tools: [readFile],
        policies: { read_file: { kind: "source-read" } },
        script: [{ toolCalls: [{ id: "f1", name: "read_file", args: { path: missing } }] }, { content: "done" }],
      });
      const messages = await run();
      for (let turn = 0; turn < 5; turn++) await new Promise((resolve) => setImmediate(resolve));
      expect(outcomeOf(messages, "f1").code).toBe("invalid_arguments");
      expect(opened).toEqual([]);
      expect(unhandled).toEqual([]);
    });
  }
});
