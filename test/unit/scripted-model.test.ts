import { AIMessage, HumanMessage, SystemMessage, type BaseMessage } from "@langchain/core/messages";
import { tool } from "langchain";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { ScriptedModel, type ScriptStep } from "arkah-agent-guardrails/testing";

const hello = [new HumanMessage("hello")];

const text = (message: BaseMessage | undefined) =>
  typeof message?.content === "string" ? message.content : JSON.stringify(message?.content);

async function rejection(promise: Promise<unknown>): Promise<Error> {
  const outcome = await promise.then(
    () => undefined,
    (error: unknown) => error,
  );
  if (!(outcome instanceof Error)) throw new Error("expected the promise to reject with an Error");
  return outcome;
}

describe("ScriptedModel", () => {
  it("answers each call with the next step, in order", async () => {
    const model = new ScriptedModel([
      { content: "first" },
      { toolCalls: [{ id: "r1", name: "read_document", args: { page: 1 } }] },
      new AIMessage("third"),
    ]);

    const first = await model.invoke(hello);
    expect(first.content).toBe("first");
    expect(first.tool_calls).toEqual([]);

    const second = await model.invoke(hello);
    expect(second.content).toBe("");
    expect(second.tool_calls).toEqual([{ id: "r1", name: "read_document", args: { page: 1 }, type: "tool_call" }]);

    const third = await model.invoke(hello);
    expect(third.content).toBe("third");
  });

  it("returns several tool calls of one step in order", async () => {
    const model = new ScriptedModel([
      {
        content: "reading and renaming",
        toolCalls: [
          { id: "a", name: "read_document", args: {} },
          { id: "b", name: "rename_document", args: { title: "T" } },
        ],
      },
    ]);
    const message = await model.invoke(hello);
    expect(message.content).toBe("reading and renaming");
    expect(message.tool_calls?.map((call) => [call.id, call.name])).toEqual([
      ["a", "read_document"],
      ["b", "rename_document"],
    ]);
  });

  it("copies scripted arguments, so changing a returned call does not change the script", async () => {
    const args = { title: "T" };
    const step: ScriptStep = { toolCalls: [{ id: "w1", name: "rename_document", args }] };
    const model = new ScriptedModel([step, step]);
    const first = await model.invoke(hello);
    (first.tool_calls![0]!.args as { title: string }).title = "changed";
    expect(args.title).toBe("T");
    const second = await model.invoke(hello);
    expect(second.tool_calls![0]!.args).toEqual({ title: "T" });
  });

  it("passes the transcript to function steps", async () => {
    const seen: string[][] = [];
    const model = new ScriptedModel([
      (messages: readonly BaseMessage[]) => {
        seen.push(messages.map(text));
        return { content: `saw ${messages.length}` };
      },
      (messages: readonly BaseMessage[]) => {
        seen.push(messages.map(text));
        return new AIMessage(`last was ${text(messages.at(-1))}`);
      },
    ]);
    expect((await model.invoke([new SystemMessage("sys"), new HumanMessage("hi")])).content).toBe("saw 2");
    expect((await model.invoke([new HumanMessage("a"), new HumanMessage("b"), new HumanMessage("c")])).content).toBe("last was c");
    expect(seen).toEqual([["sys", "hi"], ["a", "b", "c"]]);
  });

  it("bindTools returns the model itself, so the script's position is shared", async () => {
    const echo = tool(() => "x", { name: "echo", description: "Echo.", schema: z.object({}) });
    const model = new ScriptedModel([{ content: "one" }, { content: "two" }, { content: "three" }]);
    const bound = model.bindTools([echo]);
    expect(bound).toBe(model);

    expect((await model.invoke(hello)).content).toBe("one");
    expect((await bound.invoke(hello)).content).toBe("two");
    expect(bound.calls).toBe(2);
    expect(model.calls).toBe(2);
    const again = bound.bindTools([]);
    expect((await again.invoke(hello)).content).toBe("three");
    expect(model.finished).toBe(true);
    expect(bound.finished).toBe(true);
  });

  it("rejects clearly once the script is exhausted", async () => {
    const model = new ScriptedModel([{ content: "only" }, { content: "two" }]);
    await model.invoke(hello);
    await model.invoke(hello);
    const error = await rejection(model.invoke(hello));
    expect(error.message).toContain("ScriptedModel");
    expect(error.message).toContain("no step 3 in a script of 2");
    const next = await rejection(model.invoke(hello));
    expect(next.message).toContain("no step 4 in a script of 2");
  });

  it("rejects the first call of an empty script", async () => {
    const model = new ScriptedModel([]);
    expect(model.finished).toBe(true);
    const error = await rejection(model.invoke(hello));
    expect(error.message).toContain("no step 1 in a script of 0");
  });

  it("counts calls and reports when it is finished", async () => {
    const model = new ScriptedModel([{ content: "a" }, { content: "b" }]);
    expect(model.calls).toBe(0);
    expect(model.finished).toBe(false);
    await model.invoke(hello);
    expect(model.calls).toBe(1);
    expect(model.finished).toBe(false);
    await model.invoke(hello);
    expect(model.calls).toBe(2);
    expect(model.finished).toBe(true);
  });

  it("reports its type", () => {
    expect(new ScriptedModel([])._llmType()).toBe("scripted");
  });

  it("a responder answers every call from its transcript, as many as come", async () => {
    const model = new ScriptedModel((messages) => ({ content: `you said ${messages.at(-1)?.text ?? ""} (${String(messages.length)})` }));
    expect((await model.invoke([new HumanMessage("a")])).content).toBe("you said a (1)");
    expect((await model.invoke([new HumanMessage("b"), new HumanMessage("c")])).content).toBe("you said c (2)");
    expect(model.calls).toBe(2);
    expect(model.finished).toBe(false);
  });

  it("a responder that throws rejects that call only", async () => {
    let fail = true;
    const model = new ScriptedModel(() => {
      if (fail) {
        fail = false;
        throw new Error("provider down");
      }
      return { content: "ok" };
    });
    await expect(model.invoke(hello)).rejects.toThrow("provider down");
    expect((await model.invoke(hello)).content).toBe("ok");
  });
});
