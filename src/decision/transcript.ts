/**
 * Pure reads of the transcript. The transcript is untrusted (a caller can put any message in it),
 * so nothing here grants anything by itself: read evidence found here only counts once the store
 * confirms it.
 */
import { AIMessage, type BaseMessage, HumanMessage, ToolMessage } from "@langchain/core/messages";
import type { ToolKind } from "../contracts.js";

/** A tool call as it appears on an `AIMessage`. */
export interface StepCall {
  readonly id?: string | undefined;
  readonly name: string;
  readonly args: unknown;
}

/**
 * The text of a message, when its content is a string or a list of text blocks only.
 * Anything else (images, tool-use blocks) is not text and yields `undefined`.
 */
export function textContent(message: BaseMessage): string | undefined {
  const { content } = message;
  if (typeof content === "string") return content;
  let text = "";
  for (const block of content) {
    if (typeof block !== "object" || block.type !== "text" || typeof block.text !== "string") {
      return undefined;
    }
    text += block.text;
  }
  return text;
}

/** Index of the latest `HumanMessage`, or -1. The turn's own messages follow it. */
export function latestHumanIndex(messages: readonly BaseMessage[]): number {
  for (let index = messages.length - 1; index >= 0; index--) {
    if (HumanMessage.isInstance(messages[index])) return index;
  }
  return -1;
}

/** The tool calls of the model step that proposed `toolCallId`: the latest `AIMessage` holding it. */
export function findStep(messages: readonly BaseMessage[], toolCallId: string): readonly StepCall[] | undefined {
  for (let index = messages.length - 1; index >= 0; index--) {
    const message = messages[index];
    if (AIMessage.isInstance(message) && message.tool_calls?.some((call) => call.id === toolCallId)) {
      return message.tool_calls;
    }
  }
  return undefined;
}

/** A successful document read as the transcript shows it. */
export interface ReadCandidate {
  readonly toolCallId: string;
  readonly toolName: string;
  readonly content: string;
}

/**
 * The document reads after `fromIndex` that the transcript shows as successful, newest first.
 * A read counts only if an `AIMessage` after `fromIndex` proposed it under a `document-read` tool
 * and its `ToolMessage` is a text success; the caller still has to confirm each with the store.
 */
export function readCandidates(
  messages: readonly BaseMessage[],
  fromIndex: number,
  kindOf: (toolName: string) => ToolKind | undefined,
): ReadCandidate[] {
  const proposedReads = new Map<string, string>();
  const candidates: ReadCandidate[] = [];
  for (let index = fromIndex + 1; index < messages.length; index++) {
    const message = messages[index];
    if (AIMessage.isInstance(message)) {
      for (const call of message.tool_calls ?? []) {
        if (call.id !== undefined && kindOf(call.name) === "document-read") {
          proposedReads.set(call.id, call.name);
        }
      }
    } else if (ToolMessage.isInstance(message) && message.status !== "error") {
      const toolName = proposedReads.get(message.tool_call_id);
      const content = toolName === undefined ? undefined : textContent(message);
      if (toolName !== undefined && content !== undefined) {
        candidates.push({ toolCallId: message.tool_call_id, toolName, content });
      }
    }
  }
  return candidates.reverse();
}
