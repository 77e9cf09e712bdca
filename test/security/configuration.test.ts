/**
 * Attack class 12: configuration mistakes fail early. A setup that would silently weaken the
 * guarantees fails at the first model call with a `ConfigurationError` naming the fix, before the
 * model proposes anything and before anything is read, claimed or written:
 *
 * - two guardrails middlewares in one agent (`createDocumentGuardrails` with `createToolGuardrails`,
 *   either way round, or a renamed second copy): the outer one seals each call, so the inner one
 *   failed every read `tool_failed`, silently;
 * - a mutation whose tool returns artifacts (`responseFormat: "content_and_artifact"`): a completed
 *   mutation is replayed from the store as text, so a replay would silently drop the artifact. It is
 *   not a configuration error (every MCP tool declares it, most with an empty artifact): the first
 *   model call warns, and a result whose artifact is not empty is refused `unsupported_result` with
 *   its claim settled `unknown`, never `complete`: the body ran, so the claim stays closed.
 *
 * Writes are counted by the notes service.
 */
import { ToolMessage } from "@langchain/core/messages";
import { tool, type ToolRuntime } from "langchain";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { allowAllCalls, ConfigurationError, createToolGuardrails } from "arkah-agent-guardrails";
import { outcomeOf } from "../support/fixtures.js";
import { NOTE_POLICIES, NotesService, noteTools, rejection, secureAgent } from "./support.js";

const READ = { id: "r1", name: "read_note", args: { noteId: "note-7" } };
const EDIT = { id: "w1", name: "edit_note", args: { noteId: "note-7", body: "Buy oat milk" } };
const turnScript = () => [{ toolCalls: [READ] }, { toolCalls: [EDIT] }, { content: "done" }];

/** The ConfigurationError behind a failed run (LangChain wraps it in a MiddlewareError). */
function configurationError(error: unknown): ConfigurationError | undefined {
  for (let current = error; current !== undefined && current !== null; current = (current as { cause?: unknown }).cause) {
    if (ConfigurationError.isInstance(current)) return current;
  }
  return undefined;
}

const toolGuardrails = () =>
  createToolGuardrails({ guardrails: [], tools: ["read_note", "edit_note"], authorize: allowAllCalls, logger: { warn: () => undefined } });

/** An edit tool that returns `[content, artifact]`, counting its writes in `service`. */
function artifactEdit(service: NotesService) {
  return tool(
    ({ noteId, body }) => {
      service.entries.push("edit_note");
      return [service.write(noteId, body), { revision: service.notes.get(noteId)?.revision }];
    },
    {
      name: "edit_note",
      description: "Replace a note's body.",
      schema: z.object({ noteId: z.string(), body: z.string() }),
      responseFormat: "content_and_artifact",
    },
  );
}

describe("two guardrails middlewares in one agent", () => {
  it.each([
    ["createToolGuardrails outside the document guardrails", { outer: [toolGuardrails()] }],
    ["createToolGuardrails inside the document guardrails", { inner: [toolGuardrails()] }],
  ])("%s: a ConfigurationError at the first model call; nothing is read or written", async (_name, place) => {
    const service = new NotesService();
    const { run } = secureAgent({ service, script: turnScript(), ...place });
    const error = configurationError(await rejection(run()));
    expect(error?.message).toContain("use createDocumentGuardrails alone and pass the tool guardrails' checks to its guardrails option");
    expect(service.entries).toEqual([]);
    expect(service.writes).toEqual([]);
  });
});

describe("a mutation whose tool returns artifacts", () => {
  it('responseFormat "content_and_artifact" on a mutation with a real artifact: a warning at the first model call; written once, unsupported_result, the claim settled unknown (closed), never complete', async () => {
    const service = new NotesService();
    const { readNote } = noteTools(service);
    const { run, store, warnings } = secureAgent({ service, tools: [readNote, artifactEdit(service)], script: turnScript() });
    const messages = await run();
    expect(warnings.filter(({ message }) => message.includes('declares responseFormat "content_and_artifact"'))).toHaveLength(1);
    expect(outcomeOf(messages, "w1").code).toBe("unsupported_result");
    expect(service.writes).toEqual([{ noteId: "note-7", body: "Buy oat milk" }]);
    expect((await store.listUnresolved()).map((claim) => [claim.toolCallId, claim.state])).toEqual([["w1", "unknown"]]);
  });

  it('responseFormat "content_and_artifact" on a mutation whose artifact is empty (an MCP tool\'s text result): complete, and a retry replays the same text', async () => {
    const service = new NotesService();
    const { readNote } = noteTools(service);
    const emptyArtifact = tool(
      ({ noteId, body }) => {
        service.entries.push("edit_note");
        return [service.write(noteId, body), []];
      },
      {
        name: "edit_note",
        description: "Replace a note's body.",
        schema: z.object({ noteId: z.string(), body: z.string() }),
        responseFormat: "content_and_artifact",
      },
    );
    const first = secureAgent({ service, tools: [readNote, emptyArtifact], script: turnScript() });
    const messages = await first.run();
    expect(outcomeOf(messages, "w1").status).toBe("success");
    expect(await first.store.listUnresolved()).toEqual([]);
    const retry = secureAgent({ service, store: first.store, tools: [readNote, emptyArtifact], script: turnScript() });
    const again = await retry.run();
    const replayed = again.find((message) => ToolMessage.isInstance(message) && message.tool_call_id === "w1");
    expect(replayed?.text).toBe("Saved");
    expect(service.writes).toHaveLength(1);
  });

  it("a tool that is not a mutation keeps its artifact: only a replayed result would lose it", async () => {
    const service = new NotesService();
    const snapshot = tool(() => ["a snapshot", { kept: true }], {
      name: "snapshot",
      description: "Take a snapshot.",
      schema: z.object({}),
      responseFormat: "content_and_artifact",
    });
    const { run } = secureAgent({
      service,
      tools: [...noteTools(service).all, snapshot],
      policies: { ...NOTE_POLICIES, snapshot: { kind: "auxiliary" } },
      script: [{ toolCalls: [{ id: "s1", name: "snapshot", args: {} }] }, { content: "done" }],
    });
    const messages = await run();
    const result = messages.find((message) => ToolMessage.isInstance(message) && message.tool_call_id === "s1");
    expect(result !== undefined && ToolMessage.isInstance(result) ? result.artifact : undefined).toEqual({ kept: true });
  });

  it("a mutation result that carries an artifact anyway: unsupported_result, written once, the claim settled unknown (closed), a replay writes nothing", async () => {
    const service = new NotesService();
    const { readNote } = noteTools(service);
    // No responseFormat, so the configuration check cannot see it: the body returns its own ToolMessage.
    const sneaky = tool(
      ({ noteId, body }, runtime: ToolRuntime) => {
        service.entries.push("edit_note");
        const content = service.write(noteId, body);
        return new ToolMessage({ content, artifact: { secretRevision: 4 }, tool_call_id: runtime.toolCallId });
      },
      { name: "edit_note", description: "Replace a note's body.", schema: z.object({ noteId: z.string(), body: z.string() }) },
    );
    const first = secureAgent({ service, tools: [readNote, sneaky], script: turnScript() });
    const messages = await first.run();
    expect(outcomeOf(messages, "w1").code).toBe("unsupported_result");
    expect(service.writes).toEqual([{ noteId: "note-7", body: "Buy oat milk" }]);
    expect((await first.store.listUnresolved()).map((claim) => [claim.toolCallId, claim.state])).toEqual([["w1", "unknown"]]);

    // The same turn again (a transport retry): the claim is closed, nothing is written again.
    const retry = secureAgent({ service, store: first.store, tools: [readNote, sneaky], script: turnScript() });
    const again = await retry.run();
    expect(outcomeOf(again, "w1").code).toBe("mutation_unknown");
    expect(service.writes).toHaveLength(1);
  });
});
