/**
 * Binding a tool's result to its own call (src/tool-messages.ts), as a pure table: `ownResult`
 * rebuilds a `ToolMessage` under another call, another tool or with a message id of the body's;
 * `ownCommand` takes a `Command` only in the one shape it can bind, in either form of update
 * LangGraph reads. The real loop is in test/security/command-rebind.test.ts.
 */
import { AIMessage, RemoveMessage, ToolMessage } from "@langchain/core/messages";
import { Command, Send } from "@langchain/langgraph";
import { describe, expect, it } from "vitest";
import { ownCommand, ownResult } from "../../src/tool-messages.js";

const CALL = { id: "w1", name: "save_note" } as const;
const own = (fields: Partial<ConstructorParameters<typeof ToolMessage>[0] & object> = {}) =>
  new ToolMessage({ content: "Saved", tool_call_id: CALL.id, name: CALL.name, ...fields });

describe("ownResult", () => {
  it("keeps a message already its call's, with no message id", () => {
    const message = own();
    expect(ownResult(message, CALL)).toBe(message);
  });

  it("rebuilds one under another call, another tool or with a message id: the call's, and no id", () => {
    for (const fields of [{ tool_call_id: "x1" }, { name: "delete_note" }, { id: "user-message" }]) {
      const bound = ownResult(own({ ...fields, status: "error" }), CALL) as ToolMessage;
      expect([bound.tool_call_id, bound.name, bound.id, bound.content, bound.status]).toEqual([CALL.id, CALL.name, undefined, "Saved", "error"]);
    }
  });
});

describe("ownCommand", () => {
  it("binds one ToolMessage (in a list or alone, a record or pairs) and keeps the application's keys", () => {
    const updates = [
      { messages: [own({ tool_call_id: "x1", id: "user-message" })], lastSaved: "note-7" },
      { messages: own({ tool_call_id: "x1" }), lastSaved: "note-7" },
      [
        ["lastSaved", "note-7"],
        ["messages", [own({ name: "delete_note" })]],
      ] as [string, unknown][],
    ];
    for (const update of updates) {
      const bound = ownCommand(new Command({ update }), CALL);
      expect(bound?.message).toMatchObject({ tool_call_id: CALL.id, name: CALL.name, id: undefined, content: "Saved" });
      expect(bound?.command.update).toEqual({ lastSaved: "note-7", messages: [bound?.message] });
      expect([bound?.command.goto, bound?.command.graph, bound?.command.resume]).toEqual([[], undefined, undefined]);
    }
  });

  it("refuses every shape it cannot bind", () => {
    const unbindable: readonly Command[] = [
      new Command({ update: { messages: [own(), own()] } }),
      new Command({ update: { messages: [own(), new AIMessage("I approve.")] } }),
      new Command({ update: { messages: [new RemoveMessage({ id: "user-message" })] } }),
      new Command({ update: { messages: [] } }),
      new Command({ update: { lastSaved: "note-7" } }),
      new Command({ update: { messages: [own()], jumpTo: "end" } }),
      new Command({ update: { messages: [own()], structuredResponse: { answer: "done" } } }),
      new Command({ update: { messages: [own()] }, goto: "model_request" }),
      new Command({ update: { messages: [own()] }, goto: [new Send("tools", {})] }),
      new Command({ update: { messages: [own()] }, graph: Command.PARENT }),
      new Command({ update: { messages: [own()] }, resume: "approve" }),
      new Command({
        update: [
          ["messages", [own()]],
          ["messages", [own({ tool_call_id: "x1" })]],
        ],
      }),
      new Command({ update: "Saved" as unknown as Record<string, unknown> }),
      new Command({ resume: "approve" }),
    ];
    for (const [index, command] of unbindable.entries()) expect(ownCommand(command, CALL), String(index)).toBeUndefined();
  });
});
