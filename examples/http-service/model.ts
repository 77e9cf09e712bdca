/**
 * The chat model, one line to swap: a real provider when its API key is set, else the offline
 * scripted model. The provider packages are not dependencies of the package: install the one you
 * use (`pnpm add @langchain/openai` or `pnpm add @langchain/anthropic`).
 */
import type { BaseChatModel } from "@langchain/core/language_models/chat_models";
import { AIMessage, HumanMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import { ScriptedModel, type ScriptReply } from "arkah-agent-guardrails/testing";

/** What the user may ask the offline model, and what a real model is told it can do. */
export const SYSTEM_PROMPT =
  "You edit one note for the user. Read it with read_note first, then change it with edit_note in a step of its own. " +
  "Make at most one change. If a tool refuses, tell the user why in one sentence.";

type ProviderClass = new (fields: { model: string }) => BaseChatModel;

/** Loads `exportName` from an optional provider package, with a clear error if it is missing. */
async function provider(packageName: string, exportName: string, model: string): Promise<BaseChatModel> {
  let loaded: Record<string, unknown>;
  try {
    // A variable specifier: the package is optional, so neither tsc nor a bundler may require it.
    const specifier: string = packageName;
    loaded = (await import(specifier)) as Record<string, unknown>;
  } catch (error) {
    throw new Error(`the model needs ${packageName}: install it (pnpm add ${packageName}) or unset its API key to use the offline model`, {
      cause: error,
    });
  }
  const Provider = loaded[exportName];
  if (typeof Provider !== "function") throw new Error(`${packageName} has no ${exportName} export`);
  return new (Provider as ProviderClass)({ model });
}

/** The model the service runs: ChatOpenAI, ChatAnthropic, or the offline script. */
export async function chatModel(env: NodeJS.ProcessEnv): Promise<BaseChatModel> {
  if (env.OPENAI_API_KEY) return provider("@langchain/openai", "ChatOpenAI", env.OPENAI_MODEL ?? "gpt-4o-mini");
  if (env.ANTHROPIC_API_KEY) return provider("@langchain/anthropic", "ChatAnthropic", env.ANTHROPIC_MODEL ?? "claude-3-5-haiku-latest");
  return new ScriptedModel(noteResponder);
}

/** "Set note-7 to: Buy oat milk" or "Clear note-7". */
const REQUEST = /^(?:set (?<setId>[\w-]+) to: (?<body>[\s\S]*)|clear (?<clearId>[\w-]+))$/i;

/** The refusal code in a guardrail's error result, or the result as it is. */
function outcome(message: ToolMessage): string {
  const text = message.text;
  if (message.status !== "error") return text;
  try {
    const parsed = JSON.parse(text) as { guardrail?: unknown };
    return typeof parsed.guardrail === "string" ? parsed.guardrail : text;
  } catch {
    return text;
  }
}

/**
 * The offline model: a function of the transcript, so one model serves every request and a run
 * that starts again from the same user message proposes the same calls, with the same ids. A real
 * provider mints fresh call ids on every run (see this example's README).
 */
export function noteResponder(messages: readonly BaseMessage[]): ScriptReply {
  const start = messages.findLastIndex((message) => HumanMessage.isInstance(message));
  const request = REQUEST.exec(messages[start]?.text.trim() ?? "")?.groups;
  const noteId = request?.setId ?? request?.clearId;
  if (request === undefined || noteId === undefined) return { content: 'I can change a note: say "Set note-7 to: ..." or "Clear note-7".' };
  const turn = messages.slice(start + 1);
  const step = turn.filter((message) => AIMessage.isInstance(message)).length + 1;
  const results = turn.filter((message) => ToolMessage.isInstance(message));
  const read = results.find((message) => message.name === "read_note");
  const edit = results.find((message) => message.name === "edit_note");
  if (read === undefined) return { toolCalls: [{ id: `call-${String(step)}`, name: "read_note", args: { noteId } }] };
  if (read.status === "error") return { content: `I could not read ${noteId}: ${outcome(read)}.` };
  if (edit === undefined) {
    return { toolCalls: [{ id: `call-${String(step)}`, name: "edit_note", args: { noteId, body: request.body ?? "" } }] };
  }
  return { content: edit.status === "error" ? `${noteId} was not changed: ${outcome(edit)}.` : `Done: ${outcome(edit)}` };
}
