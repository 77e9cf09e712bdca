import {
  AIMessage,
  ChatMessage,
  ChatMessageChunk,
  FunctionMessage,
  HumanMessage,
  HumanMessageChunk,
  RemoveMessage,
  SystemMessage,
  ToolMessage,
  type BaseMessage,
} from "@langchain/core/messages";
import { describe, expect, it } from "vitest";
import type { ToolKind } from "arkah-agent-guardrails";
import {
  findStep,
  isSummaryMarked,
  isUserText,
  latestUserTextIndex,
  readCandidates,
  textContent,
} from "../../src/decision/transcript.js";

const KINDS: Record<string, ToolKind> = {
  read_document: "document-read",
  read_outline: "document-read",
  search_sources: "source-read",
  rename_document: "mutation",
  remember: "auxiliary",
};
const kindOf = (name: string): ToolKind | undefined => KINDS[name];

function ai(...calls: { id: string; name: string }[]): AIMessage {
  return new AIMessage({
    content: "",
    tool_calls: calls.map(({ id, name }) => ({ id, name, args: {}, type: "tool_call" as const })),
  });
}

function result(id: string, content: ToolMessage["content"], status?: "success" | "error"): ToolMessage {
  return new ToolMessage({ content, tool_call_id: id, ...(status === undefined ? {} : { status }) });
}

describe("textContent", () => {
  it("returns string content verbatim, whitespace included", () => {
    expect(textContent(new HumanMessage("  hello\n"))).toBe("  hello\n");
    expect(textContent(new HumanMessage(""))).toBe("");
  });

  it("joins text blocks without a separator", () => {
    const message = new HumanMessage({
      content: [
        { type: "text", text: "Rename " },
        { type: "text", text: "it" },
        { type: "text", text: "." },
      ],
    });
    expect(textContent(message)).toBe("Rename it.");
  });

  it("returns undefined when any block is not text", () => {
    const message = new HumanMessage({
      content: [
        { type: "text", text: "look at " },
        { type: "image_url", image_url: { url: "https://example.com/a.png" } },
      ],
    });
    expect(textContent(message)).toBeUndefined();
  });

  it("returns undefined for a block that claims type text but has no string text", () => {
    const message = new ToolMessage({
      content: [{ type: "text", text: 42 }],
      tool_call_id: "x",
    });
    expect(textContent(message)).toBeUndefined();
  });

  it("returns undefined for a block of another type, even one carrying a string text", () => {
    const message = new ToolMessage({
      content: [
        { type: "text", text: "a" },
        { type: "image_url", text: "sneaked in", image_url: { url: "data:," } },
      ],
      tool_call_id: "x",
    });
    expect(textContent(message)).toBeUndefined();
  });

  it("reads tool and AI messages the same way", () => {
    expect(textContent(result("r1", "doc"))).toBe("doc");
    expect(textContent(new AIMessage({ content: [{ type: "text", text: "ok" }] }))).toBe("ok");
  });
});

describe("latestUserTextIndex", () => {
  it("returns -1 without a HumanMessage", () => {
    expect(latestUserTextIndex([])).toBe(-1);
    expect(latestUserTextIndex([new SystemMessage("sys"), ai({ id: "a", name: "remember" })])).toBe(-1);
  });

  it("returns the index of the latest HumanMessage", () => {
    const messages: BaseMessage[] = [
      new SystemMessage("sys"),
      new HumanMessage("first"),
      ai({ id: "r1", name: "read_document" }),
      result("r1", "doc"),
      new HumanMessage("second"),
      ai({ id: "w1", name: "rename_document" }),
      result("w1", "done"),
    ];
    expect(latestUserTextIndex(messages)).toBe(4);
    expect(latestUserTextIndex(messages.slice(0, 4))).toBe(1);
  });

  it("finds a HumanMessage that is the last message", () => {
    expect(latestUserTextIndex([new HumanMessage("a"), new HumanMessage("b")])).toBe(1);
  });

  it("counts a ChatMessage after the latest HumanMessage", () => {
    const messages: BaseMessage[] = [new HumanMessage("a"), ai({ id: "r1", name: "read_document" }), new ChatMessage("b", "user")];
    expect(latestUserTextIndex(messages)).toBe(2);
  });

  it("finds user text appended to a thread, or put in place of one of its messages", () => {
    const human = new HumanMessage("admitted");
    const step = ai({ id: "r1", name: "read_document" });
    const read = result("r1", "doc");
    const thread: BaseMessage[] = [human, step, read];
    expect(latestUserTextIndex(thread)).toBe(0);
    // The next step's array keeps the same objects (now known not to be user text) and adds some.
    expect(latestUserTextIndex([...thread, ai({ id: "r2", name: "read_document" })])).toBe(0);
    expect(latestUserTextIndex([...thread, new HumanMessage("appended")])).toBe(3);
    // A message replaced in the middle (LangGraph's reducer replaces by id) is a new object.
    expect(latestUserTextIndex([human, new ChatMessage("forged", "user"), read])).toBe(1);
    // A user message is never remembered as anything else.
    expect(latestUserTextIndex([read, human])).toBe(1);
    expect(latestUserTextIndex([human])).toBe(0);
  });
});

describe("isUserText", () => {
  const serialized = (className: string) => ({
    lc: 1,
    type: "constructor",
    id: ["langchain_core", "messages", className],
    kwargs: { content: "x" },
  });

  const users: [string, unknown][] = [
    ["a HumanMessage", new HumanMessage("x")],
    ["a HumanMessageChunk", new HumanMessageChunk("x")],
    ["an image-only HumanMessage", new HumanMessage({ content: [{ type: "image_url", image_url: { url: "data:," } }] })],
    ["a HumanMessage subclass", new (class Shouted extends HumanMessage {})("X")],
    ["a ChatMessage with role user", new ChatMessage("x", "user")],
    ["a ChatMessage with role human", new ChatMessage("x", "human")],
    ["a ChatMessage with role User", new ChatMessage("x", "User")],
    ["a ChatMessage with role ' user '", new ChatMessage("x", " user ")],
    ["a ChatMessage with role HUMAN", new ChatMessage("x", "HUMAN")],
    // Ollama sends every ChatMessage as the user's; OpenAI's v1 converter every unknown role.
    ["a ChatMessage with role assistant", new ChatMessage("x", "assistant")],
    ["a ChatMessage with role system", new ChatMessage("x", "system")],
    ["a ChatMessage with an unknown role", new ChatMessage("x", "customer")],
    ["a ChatMessageChunk", new ChatMessageChunk({ content: "x", role: "user" })],
    ["a string", "x"],
    ['["human", text]', ["human", "x"]],
    ['["user", text]', ["user", "x"]],
    ['[" Human ", text]', [" Human ", "x"]],
    ["{ role: 'user' }", { role: "user", content: "x" }],
    ["{ role: 'human' }", { role: "human", content: "x" }],
    ["{ role: 'USER' }", { role: "USER", content: "x" }],
    ["{ type: 'human' }", { type: "human", content: "x" }],
    ["{ type: 'user' }", { type: "user", content: "x" }],
    ["{ type: 'generic', role: 'assistant' }", { type: "generic", role: "assistant", content: "x" }],
    ["{ role: 'assistant', type: 'human' }", { role: "assistant", type: "human", content: "x" }],
    ["a serialized HumanMessage", serialized("HumanMessage")],
    ["a serialized HumanMessageChunk", serialized("HumanMessageChunk")],
    ["a serialized ChatMessage", serialized("ChatMessage")],
    ["a serialized ChatMessageChunk", serialized("ChatMessageChunk")],
    // Not serialized (no `lc: 1`): an `id` list naming another class does not override `type`.
    ["{ type: 'human' } with an id list naming AIMessage", { type: "human", id: ["langchain_core", "messages", "AIMessage"], content: "x" }],
    ["a message whose _getType says human", { type: "ai", _getType: () => "human", content: "x" }],
    ["a message whose _getType throws", { type: "ai", _getType: () => { throw new Error("no"); } }],
  ];

  it.each(users)("%s is user text", (_name, message) => {
    expect(isUserText(message)).toBe(true);
  });

  const others: [string, unknown][] = [
    ["an AIMessage", new AIMessage("x")],
    ["a SystemMessage", new SystemMessage("x")],
    ["a ToolMessage", result("r1", "x")],
    ["a FunctionMessage", new FunctionMessage({ content: "x", name: "f" })],
    ["a RemoveMessage", new RemoveMessage({ id: "m1" })],
    ['["ai", text]', ["ai", "x"]],
    ['["system", text]', ["system", "x"]],
    ["{ role: 'assistant' }", { role: "assistant", content: "x" }],
    ["{ role: 'developer' }", { role: "developer", content: "x" }],
    ["{ type: 'tool' }", { type: "tool", content: "x", tool_call_id: "r1" }],
    ["a serialized AIMessage", serialized("AIMessage")],
    ["null", null],
    ["a number", 7],
    ["an empty object", {}],
    ["an empty array", []],
  ];

  it.each(others)("%s is not user text", (_name, message) => {
    expect(isUserText(message)).toBe(false);
  });
});

describe("isSummaryMarked", () => {
  const marked = (source: string) => ({ additional_kwargs: { lc_source: source } });

  it("recognises the summarization middleware's marker and nothing else", () => {
    expect(isSummaryMarked(new HumanMessage({ content: "s", ...marked("summarization") }))).toBe(true);
    expect(isSummaryMarked(new HumanMessage({ content: "s", ...marked("other") }))).toBe(false);
    expect(isSummaryMarked(new HumanMessage("s"))).toBe(false);
    expect(isSummaryMarked(undefined)).toBe(false);
    expect(isSummaryMarked({ additional_kwargs: null })).toBe(false);
  });
});

describe("findStep", () => {
  it("finds a proposing AIMessage that is the first message", () => {
    expect(findStep([ai({ id: "w1", name: "rename_document" })], "w1")?.map((c) => c.id)).toEqual(["w1"]);
  });

  it("returns the tool calls of the AIMessage that proposed the id", () => {
    const messages: BaseMessage[] = [
      new HumanMessage("go"),
      ai({ id: "r1", name: "read_document" }, { id: "s1", name: "search_sources" }),
      result("r1", "doc"),
      result("s1", "src"),
      ai({ id: "w1", name: "rename_document" }),
    ];
    expect(findStep(messages, "s1")?.map((c) => c.id)).toEqual(["r1", "s1"]);
    expect(findStep(messages, "w1")?.map((c) => [c.id, c.name])).toEqual([["w1", "rename_document"]]);
  });

  it("returns undefined for an id no AIMessage holds", () => {
    const messages: BaseMessage[] = [new HumanMessage("go"), ai({ id: "r1", name: "read_document" }), result("x", "doc")];
    expect(findStep(messages, "x")).toBeUndefined();
    expect(findStep([], "x")).toBeUndefined();
  });

  it("returns the latest AIMessage when an id was reused", () => {
    const messages: BaseMessage[] = [
      new HumanMessage("go"),
      ai({ id: "dup", name: "read_document" }),
      result("dup", "doc"),
      ai({ id: "dup", name: "rename_document" }, { id: "other", name: "remember" }),
    ];
    expect(findStep(messages, "dup")?.map((c) => c.name)).toEqual(["rename_document", "remember"]);
  });

  it("ignores ToolMessages and HumanMessages that mention the id", () => {
    const messages: BaseMessage[] = [ai({ id: "a", name: "remember" }), result("z", "x"), new HumanMessage("z")];
    expect(findStep(messages, "z")).toBeUndefined();
  });
});

describe("readCandidates", () => {
  it("returns successful document reads proposed after fromIndex, newest first", () => {
    const messages: BaseMessage[] = [
      new HumanMessage("go"),
      ai({ id: "r1", name: "read_document" }),
      result("r1", "v1"),
      ai({ id: "r2", name: "read_outline" }),
      result("r2", "outline", "success"),
    ];
    expect(readCandidates(messages, 0, kindOf)).toEqual([
      { toolCallId: "r2", toolName: "read_outline", content: "outline" },
      { toolCallId: "r1", toolName: "read_document", content: "v1" },
    ]);
  });

  it("only counts messages after fromIndex", () => {
    const messages: BaseMessage[] = [
      new HumanMessage("first"),
      ai({ id: "r0", name: "read_document" }),
      result("r0", "old"),
      new HumanMessage("second"),
      ai({ id: "r1", name: "read_document" }),
      result("r1", "new"),
    ];
    expect(readCandidates(messages, 3, kindOf).map((c) => c.toolCallId)).toEqual(["r1"]);
    expect(readCandidates(messages, 0, kindOf).map((c) => c.toolCallId)).toEqual(["r1", "r0"]);
    expect(readCandidates(messages, 5, kindOf)).toEqual([]);
  });

  it("excludes a result whose proposing AIMessage is at or before fromIndex", () => {
    const messages: BaseMessage[] = [
      ai({ id: "r1", name: "read_document" }),
      new HumanMessage("now"),
      result("r1", "doc"),
    ];
    expect(readCandidates(messages, 1, kindOf)).toEqual([]);
  });

  it("excludes calls to tools that are not document-read", () => {
    const messages: BaseMessage[] = [
      new HumanMessage("go"),
      ai(
        { id: "s1", name: "search_sources" },
        { id: "w1", name: "rename_document" },
        { id: "x1", name: "remember" },
        { id: "u1", name: "mystery" },
      ),
      result("s1", "src"),
      result("w1", "renamed"),
      result("x1", "saved"),
      result("u1", "??"),
    ];
    expect(readCandidates(messages, 0, kindOf)).toEqual([]);
  });

  it("excludes error-status ToolMessages", () => {
    const messages: BaseMessage[] = [
      new HumanMessage("go"),
      ai({ id: "r1", name: "read_document" }, { id: "r2", name: "read_document" }),
      result("r1", "failed", "error"),
      result("r2", "ok"),
    ];
    expect(readCandidates(messages, 0, kindOf).map((c) => c.toolCallId)).toEqual(["r2"]);
  });

  it("excludes ToolMessages with non-text content", () => {
    const messages: BaseMessage[] = [
      new HumanMessage("go"),
      ai({ id: "r1", name: "read_document" }, { id: "r2", name: "read_document" }),
      result("r1", [{ type: "image_url", image_url: { url: "https://example.com/x.png" } }]),
      result("r2", [
        { type: "text", text: "a" },
        { type: "text", text: "b" },
      ]),
    ];
    expect(readCandidates(messages, 0, kindOf)).toEqual([{ toolCallId: "r2", toolName: "read_document", content: "ab" }]);
  });

  it("excludes ToolMessages answering ids no AIMessage proposed", () => {
    const messages: BaseMessage[] = [
      new HumanMessage("go"),
      ai({ id: "r1", name: "read_document" }),
      result("forged", "doc"),
      result("r1", "real"),
    ];
    expect(readCandidates(messages, 0, kindOf).map((c) => c.toolCallId)).toEqual(["r1"]);
  });

  it("excludes a ToolMessage that precedes the AIMessage proposing its id", () => {
    const messages: BaseMessage[] = [new HumanMessage("go"), result("r1", "early"), ai({ id: "r1", name: "read_document" })];
    expect(readCandidates(messages, 0, kindOf)).toEqual([]);
  });

  it("takes the tool name from the proposing call, not from the ToolMessage", () => {
    const messages: BaseMessage[] = [
      new HumanMessage("go"),
      ai({ id: "r1", name: "read_document" }),
      new ToolMessage({ content: "doc", tool_call_id: "r1", name: "rename_document" }),
    ];
    expect(readCandidates(messages, 0, kindOf)).toEqual([{ toolCallId: "r1", toolName: "read_document", content: "doc" }]);
  });

  it("returns nothing for an empty transcript or one without reads", () => {
    expect(readCandidates([], -1, kindOf)).toEqual([]);
    expect(readCandidates([new HumanMessage("go")], 0, kindOf)).toEqual([]);
  });
});
