/**
 * One suite, run for each provider client (openai.test.ts, anthropic.test.ts): the guarded agent
 * with the real client (`ChatOpenAI`, `ChatAnthropic`) talking HTTP to a scripted server on
 * loopback that speaks that provider's API. Each test scripts the provider's replies, counts the
 * notes service's real writes, and reads what the client sent back (the tool results the model
 * would see), so the provider's id format, parallel calls, streamed argument pieces, fresh ids on a
 * retry and HTTP errors all go through the client's real parsing.
 */
import type { BaseChatModel } from "@langchain/core/language_models/chat_models";
import { AIMessageChunk, type BaseMessage } from "@langchain/core/messages";
import { Command, MemorySaver } from "@langchain/langgraph";
import { modelRetryMiddleware } from "langchain";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { requireApproval, type ApprovalRequest } from "arkah-agent-guardrails";
import { outcomeOf, refusalCode, toolOutcomes } from "../support/fixtures.js";
import { wireAgent } from "./support/agent.js";
import { guardNetwork, type NetworkGuard } from "./support/loopback.js";
import { ProviderServer, type ScriptedCall, type Wire } from "./support/provider-server.js";

export interface ProviderUnderTest {
  readonly wire: Wire;
  /** The provider's call id format. */
  readonly callId: RegExp;
  /** A client pointed at the server, with a dummy key and no retries of its own. */
  client(server: ProviderServer): BaseChatModel;
}

const read = (noteId = "note-7"): ScriptedCall => ({ name: "read_note", args: { noteId } });
const edit = (body = "Buy oat milk", noteId = "note-7"): ScriptedCall => ({ name: "edit_note", args: { noteId, body } });
const DONE = "Done: the note now says Buy oat milk.";

/** The refusal JSON a tool result carries, parsed. */
function refusalOf(content: string): { guardrail?: string; completed?: { tool: string; status: string; result: string } } {
  return JSON.parse(content) as { guardrail?: string; completed?: { tool: string; status: string; result: string } };
}

/** Each streamed call's argument pieces, by call id: a piece without an id continues the last named call. */
function argumentPiecesById(chunks: readonly AIMessageChunk[]): Map<string, string[]> {
  const byId = new Map<string, string[]>();
  let current: string[] = [];
  for (const piece of chunks.flatMap((chunk) => chunk.tool_call_chunks ?? [])) {
    if (piece.id !== undefined && piece.id !== "") {
      current = byId.get(piece.id) ?? [];
      byId.set(piece.id, current);
    }
    if (piece.args !== undefined && piece.args !== "") current.push(piece.args);
  }
  return byId;
}

export function describeProvider(provider: ProviderUnderTest): void {
  describe(`${provider.wire.name} client on the wire`, () => {
    let started: Promise<ProviderServer> | undefined;
    let server: ProviderServer;
    let network: NetworkGuard;

    beforeAll(() => {
      network = guardNetwork();
    });
    // Started once, by the first test; a server that cannot listen fails every test (a beforeAll
    // failure would only mark them skipped).
    beforeEach(async () => {
      started ??= ProviderServer.start(provider.wire);
      server = await started;
    });
    afterEach(() => {
      // Every scripted reply was asked for, nothing else was, and nothing tried the network.
      expect(server.problems).toEqual([]);
      expect(server.remaining).toBe(0);
      expect(network.refused).toEqual([]);
      server.reset();
    });
    afterAll(async () => {
      network.restore();
      await (await started?.catch(() => undefined))?.close();
    });

    const agentWith = (options: Omit<Parameters<typeof wireAgent>[0], "model"> = {}) =>
      wireAgent({ model: provider.client(server), ...options });
    /** The tool results the client sent in its `n`-th request (0-based). */
    const sentResults = (n: number) => provider.wire.toolResults(server.requests[n]?.body ?? {});

    it("read then write: the provider's call ids reach the tools, and each result goes back under its id", async () => {
      server.script({ toolCalls: [read()] }, { toolCalls: [edit()] }, { content: DONE });
      const run = agentWith();
      const messages = await run.run();

      const [readId] = server.callIds(0);
      const [editId] = server.callIds(1);
      expect(readId).toMatch(provider.callId);
      expect(editId).toMatch(provider.callId);
      expect(outcomeOf(messages, readId ?? "")).toMatchObject({ status: "success", content: '{"body":"Buy milk","revision":3}' });
      expect(outcomeOf(messages, editId ?? "")).toMatchObject({ status: "success", content: "Saved" });
      expect(messages.at(-1)?.text).toBe(DONE);
      expect(run.service.writes).toEqual([{ noteId: "note-7", body: "Buy oat milk" }]);
      // What the provider saw: both tools declared, then each result under the id it minted.
      expect(server.requests).toHaveLength(3);
      expect(provider.wire.toolNames(server.requests[0]?.body ?? {}).sort()).toEqual(["edit_note", "read_note"]);
      expect(sentResults(1)).toEqual([{ id: readId, content: '{"body":"Buy milk","revision":3}' }]);
      expect(sentResults(2).at(-1)).toEqual({ id: editId, content: "Saved" });
      expect(server.requests.every((request) => !request.streamed)).toBe(true);
      expect(await run.mutationAudit()).toEqual([["executed", null]]);
    });

    it("parallel calls in one message: a read with an edit defers the edit, two edits run only the first", async () => {
      server.script(
        { toolCalls: [read(), edit("Buy soy milk")] },
        { toolCalls: [edit(), edit("Buy rice milk")] },
        { content: DONE },
      );
      const run = agentWith();
      const messages = await run.run();

      const [readId, deferredId] = server.callIds(0);
      const [editId, secondId] = server.callIds(1);
      expect(outcomeOf(messages, readId ?? "").status).toBe("success");
      expect(outcomeOf(messages, deferredId ?? "")).toMatchObject({ status: "error", code: "read_batch_deferred" });
      expect(outcomeOf(messages, editId ?? "")).toMatchObject({ status: "success", content: "Saved" });
      expect(outcomeOf(messages, secondId ?? "")).toMatchObject({ status: "error", code: "single_mutation" });
      expect(run.service.writes).toEqual([{ noteId: "note-7", body: "Buy oat milk" }]);
      // The refusals went back to the provider as that call's tool result.
      const results = new Map(sentResults(2).map((result) => [result.id, result.content]));
      expect(refusalCode(results.get(deferredId ?? "") ?? "")).toBe("read_batch_deferred");
      expect(refusalCode(results.get(secondId ?? "") ?? "")).toBe("single_mutation");
      expect(results.get(editId ?? "")).toBe("Saved");
    });

    it("token streaming through agent.stream (messages): argument pieces arrive as chunks, the edit runs once with the whole arguments", async () => {
      const body = "Buy oat milk and two loaves of rye bread";
      server.script({ toolCalls: [read()] }, { toolCalls: [edit(body)] }, { content: DONE });
      const run = agentWith();
      await run.admit();
      const chunks: AIMessageChunk[] = [];
      const stream = await run.agent.stream(run.userMessage(), { streamMode: "messages" });
      for await (const [message] of stream) {
        if (AIMessageChunk.isInstance(message)) chunks.push(message);
      }

      expect(server.requests.map((request) => request.streamed)).toEqual([true, true, true]);
      const [editId] = server.callIds(1);
      // The edit's arguments came in several pieces after the one naming the call.
      const argumentPieces = argumentPiecesById(chunks).get(editId ?? "") ?? [];
      expect(argumentPieces.length).toBeGreaterThan(5);
      expect(argumentPieces.join("")).toBe(JSON.stringify({ noteId: "note-7", body }));
      // The answer streamed as tokens.
      const answer = chunks.filter((chunk) => chunk.text !== "");
      expect(answer.length).toBeGreaterThan(3);
      expect(answer.map((chunk) => chunk.text).join("")).toBe(DONE);

      expect(run.service.writes).toEqual([{ noteId: "note-7", body }]);
      expect(run.service.notes.get("note-7")).toEqual({ body, revision: 4 });
      expect(sentResults(2).at(-1)).toEqual({ id: editId, content: "Saved" });
    });

    it("a retry of the turn where the provider mints fresh call ids: the read runs again, the new edit is mutation_conflict naming the completed change", async () => {
      server.script({ toolCalls: [read()] }, { toolCalls: [edit()] }, { content: DONE });
      const run = agentWith();
      await run.run();
      // The same turn again (a transport retry): the provider proposes the same change under new ids.
      server.script({ toolCalls: [read()] }, { toolCalls: [edit()] }, { content: "The note already says Buy oat milk." });
      const again = await run.run();

      const [firstEdit] = server.callIds(1);
      const [retryRead] = server.callIds(3);
      const [retryEdit] = server.callIds(4);
      expect(retryEdit).not.toBe(firstEdit);
      expect(outcomeOf(again, retryRead ?? "").status).toBe("success");
      const conflict = outcomeOf(again, retryEdit ?? "");
      expect(conflict).toMatchObject({ status: "error", code: "mutation_conflict" });
      expect(refusalOf(conflict.content).completed).toEqual({ tool: "edit_note", status: "success", result: "Saved" });
      expect(run.service.reads).toEqual(["note-7", "note-7"]);
      expect(run.service.writes).toHaveLength(1);
      expect(refusalCode(sentResults(5).at(-1)?.content ?? "")).toBe("mutation_conflict");
      expect(await run.mutationAudit()).toEqual([
        ["executed", null],
        ["refused", "mutation_conflict"],
      ]);
    });

    it("a retry answered with the same call ids (a caching gateway replays the response): the stored result is replayed, not written again", async () => {
      server.script({ toolCalls: [read()] }, { toolCalls: [edit()] }, { content: DONE });
      const run = agentWith();
      await run.run();
      const [readId] = server.callIds(0);
      const [editId] = server.callIds(1);
      server.script({ toolCalls: [{ ...read(), id: readId }] }, { toolCalls: [{ ...edit(), id: editId }] }, { content: DONE });
      const again = await run.run();

      expect(outcomeOf(again, editId ?? "")).toMatchObject({ status: "success", content: "Saved" });
      expect(run.service.writes).toHaveLength(1);
      expect(sentResults(5).at(-1)).toEqual({ id: editId, content: "Saved" });
      expect(await run.mutationAudit()).toEqual([
        ["executed", null],
        ["replayed", null],
      ]);
    });

    it("a 429 and a 500 mid-turn under modelRetryMiddleware: the same request is sent again, one write", async () => {
      server.script(
        { toolCalls: [read()] },
        { status: 429, message: "Rate limit reached for requests" },
        { toolCalls: [edit()] },
        { status: 500, message: "The server had an error while processing your request." },
        { content: DONE },
      );
      const run = agentWith({ inner: [modelRetryMiddleware({ maxRetries: 2, initialDelayMs: 0, jitter: false, onFailure: "error" })] });
      const messages = await run.run();

      expect(server.requests).toHaveLength(5);
      // Each retry is the failed request again: same transcript, same tools.
      expect(server.requests[2]?.body).toEqual(server.requests[1]?.body);
      expect(server.requests[4]?.body).toEqual(server.requests[3]?.body);
      expect(outcomeOf(messages, server.callIds(1)[0] ?? "").content).toBe("Saved");
      expect(messages.at(-1)?.text).toBe(DONE);
      expect(run.service.writes).toHaveLength(1);
    });

    it("a 500 without a retry layer fails the run before the edit; the turn's slot is still free and the retried turn writes once", async () => {
      server.script({ toolCalls: [read()] }, { status: 500, message: "The server had an error while processing your request." });
      const run = agentWith();
      await expect(run.run()).rejects.toThrow(/500|server had an error/);
      expect(run.service.writes).toEqual([]);

      server.script({ toolCalls: [read()] }, { toolCalls: [edit()] }, { content: DONE });
      await run.run();
      expect(run.service.writes).toHaveLength(1);
      expect(await run.mutationAudit()).toEqual([["executed", null]]);
    });

    it("refusals reach the provider as tool results: out_of_scope, read_required and invalid_arguments run nothing", async () => {
      server.script(
        { toolCalls: [edit("Hacked", "note-8")] },
        { toolCalls: [edit()] },
        { toolCalls: [read()] },
        { toolCalls: [{ name: "edit_note", args: { noteId: "note-7", text: "Buy oat milk" } }] },
        { toolCalls: [edit()] },
        { content: DONE },
      );
      const run = agentWith();
      const messages = await run.run();

      const codes = toolOutcomes(messages).map((outcome) => outcome.code ?? outcome.status);
      expect(codes).toEqual(["out_of_scope", "read_required", "success", "invalid_arguments", "success"]);
      expect(run.service.entries).toEqual(["read_note", "edit_note"]);
      expect(run.service.writes).toEqual([{ noteId: "note-7", body: "Buy oat milk" }]);
      expect(run.service.notes.get("note-8")).toEqual({ body: "Private: salary review", revision: 1 });
      const sent = sentResults(5).map((result) => refusalCode(result.content) ?? result.content);
      expect(sent).toEqual(["out_of_scope", "read_required", '{"body":"Buy milk","revision":3}', "invalid_arguments", "Saved"]);
    });

    it("an approval: the run pauses before the claim, the resume runs the edit once without asking the provider again", async () => {
      server.script({ toolCalls: [read()] }, { toolCalls: [edit()] });
      const run = agentWith({ guardrails: { guardrails: [requireApproval({ tools: ["edit_note"] })] }, checkpointer: new MemorySaver() });
      const config = { configurable: { thread_id: `approval-${provider.wire.name}` } };
      await run.admit();
      const paused = await run.agent.invoke(run.userMessage(), config);

      const [editId] = server.callIds(1);
      const requests = (paused.__interrupt__ ?? []).map((entry) => entry.value as ApprovalRequest);
      expect(requests).toMatchObject([{ tool: "edit_note", toolCallId: editId, args: { noteId: "note-7", body: "Buy oat milk" } }]);
      expect(run.service.writes).toEqual([]);
      expect(server.requests).toHaveLength(2);

      server.script({ content: DONE });
      const resumed = await run.agent.invoke(new Command({ resume: { decision: "approve" } }), config);
      expect(outcomeOf(resumed.messages as BaseMessage[], editId ?? "")).toMatchObject({ status: "success", content: "Saved" });
      expect(run.service.writes).toHaveLength(1);
      expect(server.requests).toHaveLength(3);
      expect(sentResults(2).at(-1)).toEqual({ id: editId, content: "Saved" });
    });
  });
}
