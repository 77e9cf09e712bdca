/**
 * Attack class 4: JSON Schema dialects disagree. @langchain/core validates every JSON Schema tool
 * as draft 2019-09 when it invokes it, whatever `$schema` says; the guardrails parse in that same
 * dialect first, so a call the tool will reject is `invalid_arguments` before any claim, never a
 * `mutation_unknown` that blocks the document.
 *
 * Attack class 7: scope is nominal. A tool policy may declare the document a call touches; a call
 * outside the turn's scope is `out_of_scope` before anything runs or is claimed, and such a read is
 * never evidence.
 */
import { DynamicStructuredTool } from "@langchain/core/tools";
import { describe, expect, it } from "vitest";
import type { ToolPolicy } from "arkah-agent-guardrails";
import { outcomeOf } from "../support/fixtures.js";
import { NOTE_POLICIES, NotesService, noteTools, secureAgent } from "./support.js";

/** A JSON Schema mutation tool (as MCP adapters build them) whose runs are counted. */
function jsonSchemaEdit(schema: Record<string, unknown>, runs: unknown[]) {
  return new DynamicStructuredTool({
    name: "set_count",
    description: "Set the count.",
    schema,
    func: (args: Record<string, unknown>) => {
      runs.push(args);
      return Promise.resolve("set");
    },
  });
}

const POLICIES: Record<string, ToolPolicy> = { ...NOTE_POLICIES, set_count: { kind: "mutation" } };
const READ = { id: "r1", name: "read_note", args: { noteId: "note-7" } };

describe("JSON Schema dialects: the tool's invoke-time dialect decides first", () => {
  it("a draft-07 $ref with a sibling maxLength: refused invalid_arguments before the claim; the document is not blocked", async () => {
    const runs: unknown[] = [];
    const service = new NotesService();
    const schema = {
      $schema: "http://json-schema.org/draft-07/schema#",
      type: "object",
      properties: { label: { $ref: "#/definitions/label", maxLength: 3 } },
      definitions: { label: { type: "string" } },
    };
    const { run, store } = secureAgent({
      service,
      tools: [...noteTools(service).all, jsonSchemaEdit(schema, runs)],
      policies: POLICIES,
      script: [{ toolCalls: [READ] }, { toolCalls: [{ id: "w1", name: "set_count", args: { label: "much too long" } }] }, { content: "done" }],
    });
    const messages = await run();
    expect(outcomeOf(messages, "w1").code).toBe("invalid_arguments");
    expect(runs).toEqual([]);
    expect(await store.listUnresolved()).toEqual([]);
  });

  it("a draft-04 exclusiveMaximum: true schema the tool can never accept: every call is refused before any claim", async () => {
    const runs: unknown[] = [];
    const service = new NotesService();
    const schema = {
      $schema: "http://json-schema.org/draft-04/schema#",
      type: "object",
      properties: { count: { type: "number", maximum: 10, exclusiveMaximum: true } },
      required: ["count"],
    };
    const { run, store } = secureAgent({
      service,
      tools: [...noteTools(service).all, jsonSchemaEdit(schema, runs)],
      policies: POLICIES,
      script: [{ toolCalls: [READ] }, { toolCalls: [{ id: "w1", name: "set_count", args: { count: 3 } }] }, { content: "done" }],
    });
    const messages = await run();
    const outcome = outcomeOf(messages, "w1");
    expect(outcome.code).toBe("invalid_arguments");
    expect(runs).toEqual([]);
    expect(await store.listUnresolved()).toEqual([]);
  });
});

describe("scope binding", () => {
  const scoped: Record<string, ToolPolicy> = {
    read_note: { kind: "document-read", scope: (args) => (typeof args.noteId === "string" ? args.noteId : undefined) },
    edit_note: { kind: "mutation", scope: (args) => (typeof args.noteId === "string" ? args.noteId : undefined) },
  };

  it("a turn scoped to note-7 cannot read or overwrite note-8 (the quickstart's attack, docs/getting-started.md)", async () => {
    const service = new NotesService();
    const { run, store } = secureAgent({
      service,
      policies: scoped,
      script: [
        { toolCalls: [{ id: "r1", name: "read_note", args: { noteId: "note-8" } }] },
        { toolCalls: [{ id: "w1", name: "edit_note", args: { noteId: "note-8", body: "owned" } }] },
        { content: "done" },
      ],
    });
    const messages = await run();
    expect(outcomeOf(messages, "r1").code).toBe("out_of_scope");
    expect(outcomeOf(messages, "w1").code).toBe("out_of_scope");
    expect(service.reads).toEqual([]);
    expect(service.writes).toEqual([]);
    expect(await store.listUnresolved()).toEqual([]);
  });

  it("a read of note-8 is never evidence for an edit of note-7", async () => {
    const service = new NotesService();
    const { run } = secureAgent({
      service,
      policies: scoped,
      script: [
        { toolCalls: [{ id: "r1", name: "read_note", args: { noteId: "note-8" } }] },
        { toolCalls: [{ id: "w1", name: "edit_note", args: { noteId: "note-7", body: "Buy oat milk" } }] },
        { content: "done" },
      ],
    });
    const messages = await run();
    expect(outcomeOf(messages, "r1").code).toBe("out_of_scope");
    expect(outcomeOf(messages, "w1").code).toBe("read_required");
    expect(service.writes).toEqual([]);
  });

  it("in scope, the turn reads and edits its own note once", async () => {
    const service = new NotesService();
    const { run } = secureAgent({
      service,
      policies: scoped,
      script: [
        { toolCalls: [{ id: "r1", name: "read_note", args: { noteId: "note-7" } }] },
        { toolCalls: [{ id: "w1", name: "edit_note", args: { noteId: "note-7", body: "Buy oat milk" } }] },
        { content: "done" },
      ],
    });
    const messages = await run();
    expect(outcomeOf(messages, "w1").content).toBe("Saved");
    expect(service.writes).toEqual([{ noteId: "note-7", body: "Buy oat milk" }]);
  });

  it("a scope function that throws or answers nothing refuses the call (fail closed)", async () => {
    const service = new NotesService();
    const broken: Record<string, ToolPolicy> = {
      read_note: {
        kind: "document-read",
        scope: () => {
          throw new Error("bug");
        },
      },
      edit_note: { kind: "mutation", scope: () => undefined },
    };
    const { run, warnings } = secureAgent({
      service,
      policies: broken,
      script: [
        { toolCalls: [{ id: "r1", name: "read_note", args: { noteId: "note-7" } }] },
        { toolCalls: [{ id: "w1", name: "edit_note", args: { noteId: "note-7", body: "x" } }] },
        { content: "done" },
      ],
    });
    const messages = await run();
    expect(outcomeOf(messages, "r1").code).toBe("out_of_scope");
    expect(outcomeOf(messages, "w1").code).toBe("out_of_scope");
    expect(service.reads).toEqual([]);
    expect(warnings.map((warning) => warning.message)).toContain("a tool's scope function threw; the call is refused out_of_scope");
  });

  it("scope on an auxiliary or source-read tool is a ConfigurationError", () => {
    expect(() =>
      secureAgent({ policies: { ...NOTE_POLICIES, lookup: { kind: "auxiliary", scope: () => "note-7" } }, script: [] }),
    ).toThrow(/scope binds document-read and mutation tools only/);
  });
});
