/**
 * Pure reads of the transcript. The transcript is untrusted (a caller can put any message in it),
 * so nothing here grants anything by itself: read evidence found here only counts once the store
 * confirms it.
 */
import { AIMessage, type BaseMessage, ToolMessage } from "@langchain/core/messages";
import type { ToolKind } from "../contracts/index.js";

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

/**
 * Message types whose content a provider sends in the user's role. `generic` is `ChatMessage`:
 * its `role` is not a safe guide, because providers disagree on it (Ollama sends every
 * `ChatMessage` as the user's whatever its role; OpenAI's converter for `output_version: "v1"`
 * messages sends any role it does not know, `"User"` and `" user"` included, as `user`), so every
 * `ChatMessage` is user text. `user` is what LangChain coerces to `HumanMessage`.
 */
const USER_TYPES: ReadonlySet<string> = new Set(["human", "user", "generic"]);

/** Serialized classes LangChain revives as a user message (`{ lc: 1, type: "constructor", id }`). */
const USER_CLASSES: ReadonlySet<string> = new Set(["HumanMessage", "HumanMessageChunk", "ChatMessage", "ChatMessageChunk"]);

/** The types LangChain's own messages carry, as they are: what almost every message is. */
const KNOWN_TYPES: ReadonlySet<string> = new Set(["ai", "tool", "system", "developer", "function", "remove", ...USER_TYPES]);

// The exact forms first: this runs on every message of the turn for every call.
const isUserType = (value: unknown): boolean =>
  typeof value === "string" && (KNOWN_TYPES.has(value) ? USER_TYPES.has(value) : USER_TYPES.has(value.trim().toLowerCase()));

/**
 * Whether a model would receive this message as the user's: a `HumanMessage` (any subclass, any
 * content), any `ChatMessage`, and the message-like values LangChain coerces into those (a string,
 * `["human" | "user", content]`, `{ role: "user" | "human", ... }`, `{ type: "human", ... }`, a
 * serialized `HumanMessage`). Case and surrounding whitespace are ignored: where LangChain or a
 * provider would not accept such a variant, counting it as user text only fails closed.
 * See SECURITY.md for the provider mapping this follows.
 */
export function isUserText(message: unknown): boolean {
  if (typeof message === "string") return true;
  if (Array.isArray(message)) return isUserType(message[0]);
  if (typeof message !== "object" || message === null) return false;
  const fields = message as { type?: unknown; role?: unknown; id?: unknown; lc?: unknown; _getType?: unknown };
  if (fields.lc === 1 && fields.type === "constructor" && Array.isArray(fields.id)) {
    const className: unknown = fields.id.at(-1);
    return typeof className === "string" && USER_CLASSES.has(className);
  }
  // Providers read `_getType()` or `type`; a message whose two disagree counts if either says user.
  if (typeof fields._getType === "function") {
    let type: unknown;
    try {
      type = (fields._getType as () => unknown).call(message);
    } catch {
      return true; // unreadable: fail closed
    }
    if (isUserType(type)) return true;
  }
  if (isUserType(fields.type)) return true;
  // A plain `{ role }` object is coerced by its role; a message's own `role` is a ChatMessage's.
  return isUserType(fields.role);
}

/**
 * Index of the latest message a model receives as the user's (`isUserText`), or -1. The turn's
 * own messages follow it.
 */
export function latestUserTextIndex(messages: readonly unknown[]): number {
  for (let index = messages.length - 1; index >= 0; index--) {
    if (isUserText(messages[index])) return index;
  }
  return -1;
}

/**
 * Whether a message is marked as LangChain's `summarizationMiddleware` summary (a `HumanMessage`
 * with `additional_kwargs.lc_source === "summarization"`). The marker is forgeable: it is used to
 * explain a refusal, never to grant anything.
 */
export function isSummaryMarked(message: unknown): boolean {
  if (typeof message !== "object" || message === null) return false;
  const kwargs = (message as { additional_kwargs?: unknown }).additional_kwargs;
  return typeof kwargs === "object" && kwargs !== null && (kwargs as { lc_source?: unknown }).lc_source === "summarization";
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
