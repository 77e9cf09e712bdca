/**
 * Attack class 8: model output never throws. Any model-chosen id, name or argument gets a refusal
 * code, never an exception, and no call of a step runs before the whole step has been checked.
 */
import { AIMessage } from "@langchain/core/messages";
import { tool } from "langchain";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { outcomeOf, toolOutcomes } from "../support/fixtures.js";
import { NOTE_POLICIES, NotesService, noteTools, secureAgent } from "./support.js";

const LONE = "\uD800";

/** A model step with raw tool calls, exactly as a provider could return them. */
const step = (...calls: { id?: string; name: string; args: unknown }[]) =>
  new AIMessage({ content: "", tool_calls: calls.map((call) => ({ ...call, type: "tool_call" as const })) as never });

describe("model-chosen ids, names and arguments", () => {
  it("a lone-surrogate call id beside a read: no call of the step runs, each is refused, the run goes on", async () => {
    const service = new NotesService();
    const { run } = secureAgent({
      service,
      script: [
        step({ id: `r${LONE}`, name: "read_note", args: { noteId: "note-7" } }, { id: "r2", name: "read_note", args: { noteId: "note-7" } }),
        { content: "done" },
      ],
    });
    const messages = await run();
    expect(toolOutcomes(messages).map((outcome) => outcome.code)).toEqual(["duplicate_call_id", "duplicate_call_id"]);
    expect(service.reads).toEqual([]);
  });

  // Both halves of the well-formedness check: a low surrogate with no high one before it spoils the
  // step too, while a well-formed pair (an emoji) is text like any other and its call runs.
  it("a call id with a lone low surrogate spoils its step; one with a surrogate pair runs", async () => {
    const service = new NotesService();
    const { run } = secureAgent({
      service,
      script: [
        step({ id: `\uDC00r`, name: "read_note", args: { noteId: "note-7" } }, { id: "r2", name: "read_note", args: { noteId: "note-7" } }),
        step({ id: "r\u{1F600}", name: "read_note", args: { noteId: "note-7" } }),
        { content: "done" },
      ],
    });
    const messages = await run();
    expect(toolOutcomes(messages).map((outcome) => outcome.code ?? outcome.status)).toEqual([
      "duplicate_call_id",
      "duplicate_call_id",
      "success",
    ]);
    expect(service.reads).toEqual(["note-7"]);
  });

  it("arguments that are not a JSON object, or hold a lone surrogate: invalid_arguments, nothing runs", async () => {
    const service = new NotesService();
    const { run } = secureAgent({
      service,
      script: [
        step({ id: "a1", name: "read_note", args: ["note-7"] }),
        step({ id: "a2", name: "read_note", args: { noteId: `note-7${LONE}` } }),
        step({ id: "a3", name: "read_note", args: { noteId: "note-7", nested: { n: Number.NaN } } }),
        { content: "done" },
      ],
    });
    const messages = await run();
    expect(["a1", "a2", "a3"].map((id) => outcomeOf(messages, id).code)).toEqual([
      "invalid_arguments",
      "invalid_arguments",
      "invalid_arguments",
    ]);
    expect(service.reads).toEqual([]);
  });

  it("a tool whose schema throws while parsing: invalid_arguments and a warning, not a failed run", async () => {
    const service = new NotesService();
    const fragile = tool(() => "ran", {
      name: "fragile",
      description: "A tool with a buggy refinement.",
      schema: z.object({ q: z.string() }).refine(() => {
        throw new Error("refinement bug");
      }),
    });
    const { run, warnings } = secureAgent({
      service,
      tools: [...noteTools(service).all, fragile],
      policies: { ...NOTE_POLICIES, fragile: { kind: "auxiliary" } },
      script: [step({ id: "f1", name: "fragile", args: { q: "x" } }), { content: "done" }],
    });
    const messages = await run();
    expect(outcomeOf(messages, "f1").code).toBe("invalid_arguments");
    expect(warnings.map((warning) => warning.message)).toContain(
      "the tool's schema threw while parsing a call's arguments; the call is refused",
    );
  });

  it("odd tool names (unregistered, prototype keys, control characters) are unregistered_tool", async () => {
    const service = new NotesService();
    const { run } = secureAgent({
      service,
      script: [
        step(
          { id: "n1", name: "__proto__", args: {} },
          { id: "n2", name: "constructor", args: {} },
          { id: "n3", name: `read_note\u202E`, args: { noteId: "note-7" } },
          { id: "n4", name: `read${LONE}`, args: {} },
        ),
        { content: "done" },
      ],
    });
    const messages = await run();
    expect(toolOutcomes(messages).map((outcome) => outcome.code)).toEqual([
      "unregistered_tool",
      "unregistered_tool",
      "unregistered_tool",
      "unregistered_tool",
    ]);
    expect(service.reads).toEqual([]);
  });

  // A provider's arguments come through JSON.parse, which makes "__proto__" an own key; on its way
  // to the tool node LangChain copies them so that the key becomes the object's prototype, and the
  // document it names would be inherited by a parse that reads fields (zod's compiled object parse,
  // which the sync parse of src/execution/sync-parse.ts uses, as the scope check and the body would).
  it('a "__proto__" key in the arguments naming another document: invalid_arguments, alone or beside the real field; nothing is read', async () => {
    const service = new NotesService();
    const { run } = secureAgent({
      service,
      policies: { read_note: { kind: "document-read", scope: (args) => (typeof args.noteId === "string" ? args.noteId : "") }, edit_note: { kind: "mutation" } },
      script: [
        step({ id: "p1", name: "read_note", args: JSON.parse('{"__proto__": {"noteId": "note-8"}}') as unknown }),
        step({ id: "p2", name: "read_note", args: JSON.parse('{"__proto__": {"noteId": "note-8"}, "noteId": "note-7"}') as unknown }),
        { content: "done" },
      ],
    });
    const messages = await run();
    expect(outcomeOf(messages, "p1").code).toBe("invalid_arguments");
    expect(outcomeOf(messages, "p2").code).toBe("invalid_arguments");
    expect(service.reads).toEqual([]);
  });
});
