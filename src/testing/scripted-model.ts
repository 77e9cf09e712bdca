/**
 * An offline chat model that answers from a script (one step per model call) or from a function
 * of the transcript. For agent tests, demos and servers that must run without a provider.
 */
import { BaseChatModel, type BindToolsInput } from "@langchain/core/language_models/chat_models";
import { AIMessage, type BaseMessage } from "@langchain/core/messages";
import type { ChatResult } from "@langchain/core/outputs";

/** One tool call the scripted model proposes. Give ids explicitly: retries replay by id. */
export interface ScriptedToolCall {
  /** The call id. A retry of the same turn must repeat it to be replayed. */
  readonly id: string;
  /** The tool to call. */
  readonly name: string;
  /** The arguments, as a model would write them (the tool's schema parses them). */
  readonly args: Record<string, unknown>;
}

/** One model response: text and tool calls. */
export type ScriptReply = AIMessage | { readonly content?: string; readonly toolCalls?: readonly ScriptedToolCall[] };

/** One model response: a reply, or a function of the transcript so far that makes one. */
export type ScriptStep = ScriptReply | ((messages: readonly BaseMessage[]) => ScriptReply);

/**
 * Answers every model call from the transcript it is given: one model can serve many requests
 * (a server's threads, concurrent turns), unlike a script, which is one queue for all of them.
 */
export type ScriptResponder = (messages: readonly BaseMessage[]) => ScriptReply;

/**
 * An offline chat model for agent tests, demos and examples: only the model's replies are
 * scripted; the agent loop, middleware, tools and store are real.
 *
 * - `new ScriptedModel(steps)`: answers the n-th model call with the n-th step, and rejects once
 *   the script runs out, so a test that calls the model more often than it expects fails loudly.
 *   Give tool calls explicit ids: retries replay by id.
 * - `new ScriptedModel(respond)`: answers every call with `respond(transcript)`, for as many calls
 *   as come.
 *
 * `bindTools` returns the same model (the tools are the agent's business), so its position in a
 * script is shared by every agent it is bound into.
 */
export class ScriptedModel extends BaseChatModel {
  readonly #respond: ScriptResponder | undefined;
  readonly #steps: readonly ScriptStep[];
  #calls = 0;

  /**
   * @param script The model's replies, in one of two forms:
   * - an array of steps: the n-th model call gets the n-th step; a step is a reply (an
   *   `AIMessage`, or `{ content?, toolCalls? }` with tool calls as `{ id, name, args }`, the
   *   arguments copied per call) or a function of the transcript that returns one. The call after
   *   the last step rejects (`no step N in a script of M`).
   * - a responder, `(messages) => reply`: every call gets a reply made from the messages the model
   *   is called with (the system prompt first, if any), for as many calls as come.
   *
   * A step or responder that throws rejects that model call only. There is no other parameter.
   */
  constructor(script: readonly ScriptStep[] | ScriptResponder) {
    super({});
    if (typeof script === "function") {
      this.#respond = script;
      this.#steps = [];
    } else {
      this.#respond = undefined;
      this.#steps = script;
    }
  }

  /** How many times the model has been called. */
  get calls(): number {
    return this.#calls;
  }

  /** True once every step of a script has been used (never for a responder). */
  get finished(): boolean {
    return this.#respond === undefined && this.#calls >= this.#steps.length;
  }

  /** LangChain's name for the model type, used in tracing. */
  _llmType(): string {
    return "scripted";
  }

  override bindTools(_tools: BindToolsInput[]): this {
    return this;
  }

  /** Answers one model call from the next step, or from the responder. */
  _generate(messages: BaseMessage[]): Promise<ChatResult> {
    const index = this.#calls;
    this.#calls += 1;
    const step = this.#respond ?? this.#steps[index];
    if (step === undefined) {
      return Promise.reject(
        new Error(`ScriptedModel: no step ${String(index + 1)} in a script of ${String(this.#steps.length)}`),
      );
    }
    let reply: ScriptReply;
    try {
      reply = typeof step === "function" ? step(messages) : step;
    } catch (error) {
      return Promise.reject(error instanceof Error ? error : new Error(String(error)));
    }
    const message = AIMessage.isInstance(reply)
      ? reply
      : new AIMessage({
          content: reply.content ?? "",
          tool_calls: (reply.toolCalls ?? []).map((call) => ({
            id: call.id,
            name: call.name,
            args: structuredClone(call.args),
            type: "tool_call" as const,
          })),
        });
    return Promise.resolve({ generations: [{ text: typeof message.content === "string" ? message.content : "", message }] });
  }
}
