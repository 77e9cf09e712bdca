/** docs/tools.md's "How a tool gets its mutationKey" runs as written: it is examples/mutation-key.ts, verbatim. */
import { readFileSync } from "node:fs";
import { HumanMessage } from "@langchain/core/messages";
import { createAgent, tool, type ToolRuntime } from "langchain";
import { afterEach, describe, expect, it, vi } from "vitest";
import { z } from "zod";
import { createDocumentGuardrails, InMemoryGuardrailStore, mutationKey, turnKey } from "arkah-agent-guardrails";
import { ScriptedModel } from "arkah-agent-guardrails/testing";
import { admit, turnInput, userText } from "../support/fixtures.js";

const guide = readFileSync(new URL("../../docs/tools.md", import.meta.url), "utf8");

describe("How a tool gets its mutationKey", () => {
  afterEach(() => {
    vi.restoreAllMocks();
  });

  it("docs/tools.md embeds examples/mutation-key.ts verbatim", () => {
    const block = /<!-- mutation-key:start -->\n```ts\n([\s\S]*?)```\n<!-- mutation-key:end -->/.exec(guide)?.[1];
    expect(block).toBe(readFileSync(new URL("../../examples/mutation-key.ts", import.meta.url), "utf8"));
  });

  it("the tool passes the claim's mutationKey to its write service, which writes once", async () => {
    const lines: unknown[][] = [];
    vi.spyOn(console, "log").mockImplementation((...args: unknown[]) => {
      lines.push(args);
    });
    await import("../../examples/mutation-key.js");
    expect(lines).toEqual([[1, true]]);
  });
});

describe("mutationKey in the tool body, beyond the docs' example", () => {
  it("with a middleware built per turn and a schema that transforms and defaults, the key from the body's arguments is the claim's", async () => {
    const input = turnInput({ turnId: "turn-transform" });
    const store = new InMemoryGuardrailStore();
    const writes = new Map<string, unknown>();
    const rename = tool(
      (args, runtime: ToolRuntime) => {
        // Built per turn: the turn is the one the middleware was built with, not in context.
        const key = mutationKey(input, { id: runtime.toolCallId, name: "rename_document", args });
        if (!writes.has(key)) writes.set(key, args);
        return "renamed";
      },
      {
        name: "rename_document",
        description: "Rename the document.",
        schema: z.object({ title: z.string().transform((title) => `${title.trim()}!`), pinned: z.boolean().default(false) }),
      },
    );
    const readDocument = tool(() => "Untitled", { name: "read_document", description: "Read the title.", schema: z.object({}) });
    const agent = createAgent({
      model: new ScriptedModel([
        { toolCalls: [{ id: "r1", name: "read_document", args: {} }] },
        { toolCalls: [{ id: "w1", name: "rename_document", args: { title: "  Field notes " } }] },
        { content: "Done." },
      ]),
      tools: [readDocument, rename],
      middleware: [
        createDocumentGuardrails({
          input,
          store,
          userMessageLabel: "user",
          authorize: () => true,
          tools: { read_document: { kind: "document-read" }, rename_document: { kind: "mutation" } },
        }),
      ],
    });
    await admit(store, input);
    await agent.invoke({ messages: [new HumanMessage(userText(input))] });

    // The body got the parsed arguments once (no second transform), and one write ran.
    expect([...writes.values()]).toEqual([{ title: "Field notes!", pinned: false }]);
    const claimed = (await store.readAudit({ turnKey: turnKey(input) })).filter((event) => event.kind === "mutation");
    expect(claimed.map((event) => event.decision)).toEqual(["executed"]);
    expect([...writes.keys()]).toEqual([claimed[0]?.mutationKey]);
  });
});
