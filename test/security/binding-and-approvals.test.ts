/**
 * Attack class 1: decisions are bound to the tool. Verdicts, approvals, claims and audit events
 * name the tool; call ids are model output and may repeat across steps, so a recorded decision for
 * one tool (or other arguments) never serves another: a reused id is a new decision.
 *
 * Attack class 6: approvals. An approval covers one execution of one call of one tool with those
 * arguments; several pending approvals are answered by approvalId (an unkeyed answer decides
 * none); a malformed answer leaves the request answerable.
 */
import { Command, MemorySaver } from "@langchain/langgraph";
import { tool } from "langchain";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { InMemoryGuardrailStore, requireApproval, type ApprovalRequest, type Guardrail, type ToolPolicy } from "arkah-agent-guardrails";
import { outcomeOf } from "../support/fixtures.js";
import { NOTE_POLICIES, NotesService, noteTools, secureAgent } from "./support.js";

/** Document tools that count what they did. */
function documentActions(service: NotesService) {
  const done: string[] = [];
  const exportDocument = tool(
    ({ noteId }) => {
      done.push(`export ${noteId}`);
      return "exported";
    },
    { name: "export_document", description: "Export a note.", schema: z.object({ noteId: z.string() }) },
  );
  const deleteDocument = tool(
    ({ noteId }) => {
      done.push(`delete ${noteId}`);
      service.notes.delete(noteId);
      return "deleted";
    },
    { name: "delete_document", description: "Delete a note.", schema: z.object({ noteId: z.string() }) },
  );
  const remember = tool(
    ({ fact }) => {
      done.push(`remember ${fact}`);
      return "remembered";
    },
    { name: "remember", description: "Remember a fact.", schema: z.object({ fact: z.string() }) },
  );
  return { done, exportDocument, deleteDocument, remember };
}

const POLICIES: Record<string, ToolPolicy> = {
  ...NOTE_POLICIES,
  export_document: { kind: "auxiliary" },
  delete_document: { kind: "mutation" },
  remember: { kind: "auxiliary" },
};

type Run = ReturnType<typeof secureAgent>;
type Result = Awaited<ReturnType<Run["agent"]["invoke"]>>;

function pendingRequests(result: Result): ApprovalRequest[] {
  return (result.__interrupt__ ?? []).map((entry) => entry.value as ApprovalRequest);
}

/** A checkpointed agent over the notes service whose tools include `documentActions`. */
function approvingAgent(script: Parameters<typeof secureAgent>[0]["script"], approvalTools: readonly string[]) {
  const service = new NotesService();
  const actions = documentActions(service);
  const run = secureAgent({
    service,
    tools: [...noteTools(service).all, actions.exportDocument, actions.deleteDocument, actions.remember],
    policies: POLICIES,
    guardrails: { guardrails: [requireApproval({ tools: approvalTools })] },
    checkpointer: new MemorySaver(),
    script,
  });
  const config = { configurable: { thread_id: "t-1" } };
  return {
    ...run,
    actions,
    begin: () => run.run(config),
    resume: (value: unknown) => run.agent.invoke(new Command({ resume: value }), config),
  };
}

describe("decisions are bound to the tool", () => {
  it("an approval of export_document(c1, X) is not reused for delete_document(c1, X): the person is asked again", async () => {
    const agent = approvingAgent(
      [
        { toolCalls: [{ id: "c1", name: "export_document", args: { noteId: "note-7" } }] },
        // A read first: a mutation without one is refused read_required before anyone is asked.
        { toolCalls: [{ id: "r1", name: "read_note", args: { noteId: "note-7" } }] },
        // The model reuses the call id for another tool with the same arguments.
        { toolCalls: [{ id: "c1", name: "delete_document", args: { noteId: "note-7" } }] },
        { content: "done" },
      ],
      ["export_document", "delete_document"],
    );
    await agent.begin();
    const first = await agent.resume({ decision: "approve" });
    const [asked] = pendingRequests(first);
    expect(asked).toMatchObject({ tool: "delete_document", toolCallId: "c1" });
    expect(agent.actions.done).toEqual(["export note-7"]);
    // Another request exists for call id c1 (the export's), so an unkeyed answer decides nothing.
    const unkeyed = await agent.resume({ decision: "approve" });
    expect(pendingRequests(unkeyed)).toMatchObject([{ tool: "delete_document", problem: expect.stringMatching(/approvalId/) as string }]);
    expect(agent.actions.done).toEqual(["export note-7"]);
    const done = await agent.resume({ decision: "reject", message: "never", approvalId: asked?.approvalId });
    expect(outcomeOf(done.messages.slice(-3), "c1")).toMatchObject({ code: "approval_rejected" });
    expect(agent.actions.done).toEqual(["export note-7"]);
  });

  it("a tool's allow verdict does not carry over to another tool under the same call id and arguments", async () => {
    const seen: string[] = [];
    const onlyExports: Guardrail = {
      name: "only-exports",
      placements: ["tool-args"],
      check: ({ toolCall }) => {
        seen.push(toolCall.name);
        return toolCall.name === "export_document"
          ? { action: "allow", outcome: "complete", detections: [] }
          : { action: "deny", outcome: "complete", detections: [{ rule: "exports", detected: true }], code: "exports_only" };
      },
    };
    const service = new NotesService();
    const actions = documentActions(service);
    const { run } = secureAgent({
      service,
      tools: [...noteTools(service).all, actions.exportDocument, actions.deleteDocument],
      policies: POLICIES,
      guardrails: { guardrails: [onlyExports] },
      script: [
        { toolCalls: [{ id: "c1", name: "export_document", args: { noteId: "note-7" } }] },
        { toolCalls: [{ id: "r1", name: "read_note", args: { noteId: "note-7" } }] },
        { toolCalls: [{ id: "c1", name: "delete_document", args: { noteId: "note-7" } }] },
        { content: "done" },
      ],
    });
    const messages = await run();
    expect(seen).toEqual(["export_document", "read_note", "delete_document"]);
    expect(outcomeOf(messages.slice(-2), "c1").code).toBe("exports_only");
    expect(actions.done).toEqual(["export note-7"]);
  });

  it("a call id reused with a stricter tool is parsed by that tool first: invalid_arguments, never a claim left unknown", async () => {
    const service = new NotesService();
    const strict = tool(() => "archived", {
      name: "archive_note",
      description: "Archive a note.",
      schema: z.object({ noteId: z.string().regex(/^note-\d+$/), reason: z.string().min(3) }),
    });
    const lenient = tool(() => "tagged", { name: "tag_note", description: "Tag.", schema: z.object({ noteId: z.string() }).loose() });
    const { run, store } = secureAgent({
      service,
      tools: [...noteTools(service).all, strict, lenient],
      policies: { ...NOTE_POLICIES, archive_note: { kind: "mutation" }, tag_note: { kind: "auxiliary" } },
      script: [
        { toolCalls: [{ id: "c1", name: "tag_note", args: { noteId: "note-7", reason: "x" } }] },
        { toolCalls: [{ id: "r1", name: "read_note", args: { noteId: "note-7" } }] },
        { toolCalls: [{ id: "c1", name: "archive_note", args: { noteId: "note-7", reason: "x" } }] },
        { content: "done" },
      ],
    });
    const messages = await run();
    expect(outcomeOf(messages.slice(-2), "c1").code).toBe("invalid_arguments");
    expect(await store.listUnresolved()).toEqual([]);
  });
});

describe("approvals cover one execution and are answered per request", () => {
  it("one approval of an auxiliary call covers one execution: the same call in later steps asks again each time", async () => {
    const call = { id: "m1", name: "remember", args: { fact: "likes oat milk" } };
    const agent = approvingAgent([{ toolCalls: [call] }, { toolCalls: [call] }, { toolCalls: [call] }, { content: "done" }], ["remember"]);
    let result = await agent.begin().then(() => agent.resume({ decision: "approve" }));
    expect(agent.actions.done).toEqual(["remember likes oat milk"]);
    expect(pendingRequests(result)).toHaveLength(1);
    result = await agent.resume({ decision: "approve", approvalId: pendingRequests(result)[0]?.approvalId });
    expect(agent.actions.done).toHaveLength(2);
    expect(pendingRequests(result)).toHaveLength(1);
    result = await agent.resume({ decision: "reject", approvalId: pendingRequests(result)[0]?.approvalId });
    expect(agent.actions.done).toHaveLength(2);
    expect(pendingRequests(result)).toEqual([]);
  });

  it("an unkeyed answer while two approvals of one step are pending approves none and says how to answer", async () => {
    const agent = approvingAgent(
      [
        {
          toolCalls: [
            { id: "e1", name: "export_document", args: { noteId: "note-7" } },
            { id: "m1", name: "remember", args: { fact: "x" } },
          ],
        },
        { content: "done" },
      ],
      ["export_document", "remember"],
    );
    await agent.begin();
    const again = await agent.resume({ decision: "approve" });
    const requests = pendingRequests(again);
    expect(requests.map((request) => request.toolCallId).sort()).toEqual(["e1", "m1"]);
    for (const request of requests) expect((request as { problem?: string }).problem).toMatch(/approvalId/);
    expect(agent.actions.done).toEqual([]);

    // Keyed answers decide each one.
    const answers = Object.fromEntries(
      (again.__interrupt__ ?? []).map((entry) => {
        const request = entry.value as ApprovalRequest;
        return [entry.id ?? "", { decision: request.toolCallId === "e1" ? "approve" : "reject", approvalId: request.approvalId }];
      }),
    );
    await agent.resume(answers);
    expect(agent.actions.done).toEqual(["export note-7"]);
  });

  it("a malformed answer ({ decision: 'yes' }) does not poison the thread: the request stays answerable", async () => {
    const agent = approvingAgent(
      [{ toolCalls: [{ id: "e1", name: "export_document", args: { noteId: "note-7" } }] }, { content: "done" }],
      ["export_document"],
    );
    await agent.begin();
    const again = await agent.resume({ decision: "yes" });
    expect(pendingRequests(again)).toMatchObject([{ toolCallId: "e1", problem: expect.stringMatching(/not a decision/) as string }]);
    expect(agent.actions.done).toEqual([]);
    await agent.resume({ decision: "approve" });
    expect(agent.actions.done).toEqual(["export note-7"]);
  });
});

describe("decisions are bound to the tool's identity (its fingerprint)", () => {
  /** Pauses on export_document with tool v1, decides the request out of band, resumes with `description`. */
  async function reconfigured(description: string) {
    const checks: string[] = [];
    const exported: string[] = [];
    const counter: Guardrail = {
      name: "counter",
      placements: ["tool-args"],
      check: ({ tool: checked }) => {
        checks.push(checked.name);
        return { action: "allow", outcome: "complete", detections: [] };
      },
    };
    const exportTool = (text: string) =>
      tool(
        ({ noteId }) => {
          exported.push(noteId);
          return "exported";
        },
        { name: "export_document", description: text, schema: z.object({ noteId: z.string() }) },
      );
    const service = new NotesService();
    const store = new InMemoryGuardrailStore();
    const checkpointer = new MemorySaver();
    const config = { configurable: { thread_id: "t-1" } };
    const build = (text: string, script: Parameters<typeof secureAgent>[0]["script"]) =>
      secureAgent({
        service,
        store,
        tools: [...noteTools(service).all, exportTool(text)],
        policies: POLICIES,
        guardrails: { guardrails: [counter, requireApproval({ tools: ["export_document"] })] },
        checkpointer,
        script,
      });
    const first = build("Export a note.", [{ toolCalls: [{ id: "e1", name: "export_document", args: { noteId: "note-7" } }] }]);
    await first.run(config);
    const [pending] = await store.listApprovals({ status: "pending" });
    await store.decideApproval({ approvalId: pending?.approvalId ?? "", decision: { decision: "approve" }, decidedAt: new Date().toISOString() });
    // A restarted server: the same thread, the tool as now configured; the model has one step left.
    const resumed = await build(description, [{ content: "done" }]).agent.invoke(new Command({ resume: { decision: "approve" } }), config);
    return { checks, exported, asked: pendingRequests(resumed), firstId: pending?.approvalId };
  }

  it("the same tool: the recorded verdict and the decided approval are used; it runs once", async () => {
    const { checks, exported, asked } = await reconfigured("Export a note.");
    expect(checks).toEqual(["export_document"]);
    expect(exported).toEqual(["note-7"]);
    expect(asked).toEqual([]);
  });

  it("a reconfigured tool (another description): its guardrails check again and a person is asked again; nothing runs", async () => {
    const { checks, exported, asked, firstId } = await reconfigured("Export a note to the public web.");
    expect(checks).toEqual(["export_document", "export_document"]);
    expect(exported).toEqual([]);
    expect(asked).toHaveLength(1);
    expect(asked[0]?.approvalId).not.toBe(firstId);
  });
});
