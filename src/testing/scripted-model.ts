/**
 * An offline chat model that answers from a script, one step per model call. For agent tests and
 * demos that must run without a provider: only the model's responses are scripted, everything else
 * (the agent loop, middleware, tools, store) is real.
 */
import { BaseChatModel, type BindToolsInput } from "@langchain/core/language_models/chat_models";
import { AIMessage, type BaseMessage } from "@langchain/core/messages";
import type { ChatResult } from "@langchain/core/outputs";

/** One tool call the scripted model proposes. Give ids explicitly: retries replay by id. */
export interface ScriptedToolCall {
  readonly id: string;
  readonly name: string;
  readonly args: Record<string, unknown>;
}

/** One model response: text, tool calls, or a function of the transcript so far. */
export type ScriptStep =
  | AIMessage
  | { readonly content?: string; readonly toolCalls?: readonly ScriptedToolCall[] }
  | ((messages: readonly BaseMessage[]) => AIMessage | { readonly content?: string; readonly toolCalls?: readonly ScriptedToolCall[] });

/**
 * Answers the n-th model call with the n-th step. Throws when the script runs out, so a test that
 * calls the model more often than it expects fails loudly.
 */
export class ScriptedModel extends BaseChatModel {
  readonly #steps: readonly ScriptStep[];
  /** Shared with bound copies, so `bindTools` does not restart the script. */
  readonly #state: { calls: number };

  constructor(steps: readonly ScriptStep[], state: { calls: number } = { calls: 0 }) {
    super({});
    this.#steps = steps;
    this.#state = state;
  }

  /** How many times the model has been called. */
  get calls(): number {
    return this.#state.calls;
  }

  /** True once every step has been used. */
  get finished(): boolean {
    return this.#state.calls >= this.#steps.length;
  }

  _llmType(): string {
    return "scripted";
  }

  override bindTools(_tools: BindToolsInput[]): ScriptedModel {
    return new ScriptedModel(this.#steps, this.#state);
  }

  _generate(messages: BaseMessage[]): Promise<ChatResult> {
    const index = this.#state.calls;
    const step = this.#steps[index];
    this.#state.calls += 1;
    if (step === undefined) {
      return Promise.reject(
        new Error(`ScriptedModel: no step ${String(index + 1)} in a script of ${String(this.#steps.length)}`),
      );
    }
    const resolved = typeof step === "function" ? step(messages) : step;
    const message = AIMessage.isInstance(resolved)
      ? resolved
      : new AIMessage({
          content: resolved.content ?? "",
          tool_calls: (resolved.toolCalls ?? []).map((call) => ({
            id: call.id,
            name: call.name,
            args: structuredClone(call.args),
            type: "tool_call" as const,
          })),
        });
    return Promise.resolve({ generations: [{ text: typeof message.content === "string" ? message.content : "", message }] });
  }
}
