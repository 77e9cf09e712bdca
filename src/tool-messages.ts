/** The `ToolMessage`s the pipeline answers with, and how it reads a tool's result. */
import { ToolMessage } from "@langchain/core/messages";
import { Command } from "@langchain/langgraph";
import type { GuardrailVerdict, JsonValue, MutationResult, RefusalCode } from "./contracts/index.js";
import { REFUSAL_MESSAGES } from "./decision/plan.js";
import { textContent } from "./decision/transcript.js";

export type ToolResult = ToolMessage | Command;

interface CallRef {
  readonly id?: string | undefined;
  readonly name: string;
}

/**
 * A refusal: an error `ToolMessage` whose content is JSON `{"guardrail": code, "message": ...}`
 * plus optional details. Fixed messages only: no server error text reaches the model.
 */
export function refusalMessage(
  call: CallRef,
  code: string,
  message: string,
  details?: Readonly<Record<string, JsonValue | undefined>>,
): ToolMessage {
  return new ToolMessage({
    content: JSON.stringify({ guardrail: code, message, ...withoutReserved(details) }),
    tool_call_id: call.id ?? "",
    name: call.name,
    status: "error",
  });
}

/** Details may add fields to a refusal, never replace its code or its message. */
function withoutReserved(details: Readonly<Record<string, JsonValue | undefined>> | undefined) {
  if (details === undefined) return undefined;
  const { guardrail: _code, message: _message, ...rest } = details;
  return rest;
}

export function refusal(call: CallRef, code: RefusalCode, details?: Readonly<Record<string, JsonValue>>): ToolMessage {
  return refusalMessage(call, code, REFUSAL_MESSAGES[code], details);
}

/** A guardrail's denial: its code (default `guardrail_denied`), its reason and details. */
export function denialMessage(call: CallRef, verdict: GuardrailVerdict): ToolMessage {
  const code = verdict.code ?? "guardrail_denied";
  const fixed = (REFUSAL_MESSAGES as Readonly<Record<string, string>>)[code] ?? REFUSAL_MESSAGES.guardrail_denied;
  return refusalMessage(call, code, verdict.reason ?? fixed, verdict.details);
}

export function replayMessage(call: { readonly id: string; readonly name: string }, result: MutationResult): ToolMessage {
  return new ToolMessage({ content: result.content, status: result.status, tool_call_id: call.id, name: call.name });
}

/**
 * What a model is told when its side effect was not carried out because an identical call already
 * ran in the turn: a note first, then that call's result. Plain text, so every provider takes it as
 * it takes any tool result, with the stored result's own status (a success stays one).
 */
export function duplicateEffectContent(content: string, earlierCallId: string | undefined): string {
  const earlier = earlierCallId === undefined ? "" : ` (call ${earlierCallId})`;
  return (
    `[Not carried out again: an identical call${earlier} with the same tool and arguments already ran in this turn, ` +
    "so this call did nothing; that call's result follows. Calling it again with the same arguments will not repeat it; " +
    "if it was meant to happen twice, tell the user it happened once.]\n\n" +
    content
  );
}

/** A side effect's replay for an identical call: {@link duplicateEffectContent}, with the stored status. */
export function duplicateEffectMessage(
  call: { readonly id: string; readonly name: string },
  result: MutationResult,
  earlierCallId: string | undefined,
): ToolMessage {
  return replayMessage(call, { content: duplicateEffectContent(result.content, earlierCallId), status: result.status });
}

/**
 * Whether a tool result carries an artifact beside its content, which a text replay would drop. An
 * empty one (`null`, `[]`: what an MCP tool returns with a text result) carries nothing to lose.
 */
export function hasArtifact(result: ToolResult): boolean {
  if (!ToolMessage.isInstance(result)) return false;
  const { artifact } = result as { artifact?: unknown };
  return artifact !== undefined && artifact !== null && !(Array.isArray(artifact) && artifact.length === 0);
}

/** The text and status of a tool result, or undefined when it is not a text `ToolMessage`. */
export function resultText(result: ToolResult): MutationResult | undefined {
  if (!ToolMessage.isInstance(result)) return undefined;
  const content = textContent(result);
  if (content === undefined) return undefined;
  return { content, status: result.status === "error" ? "error" : "success" };
}

/**
 * A body's `ToolMessage` bound to its own call: one the body built under another call's id or tool
 * name (LangChain passes it through as it is) is rebuilt with the call's, so it can neither answer
 * another call in the transcript nor take another call's refusal in the turn's outcome. The
 * result has no message id of the body's choosing: LangGraph's messages reducer replaces the
 * message with that id (the admitted user message, an earlier refusal), so one the body set is
 * dropped and the reducer gives the result a fresh one. A `Command` is bound by {@link ownCommand}.
 */
export function ownResult(result: ToolResult, call: CallBinding): ToolResult {
  return ToolMessage.isInstance(result) ? ownMessage(result, call) : result;
}

function ownMessage(message: ToolMessage, call: CallBinding): ToolMessage {
  if (message.tool_call_id === call.id && message.name === call.name && message.id === undefined) return message;
  return new ToolMessage({
    content: message.content,
    status: message.status,
    artifact: message.artifact as unknown,
    tool_call_id: call.id,
    name: call.name,
    response_metadata: message.response_metadata,
  });
}

/**
 * The `response_metadata` key under which a governed call's `ToolMessage` carries the id of the
 * execution that answered it: the `executionId` of the audit events recorded for that execution.
 * The turn service binds each result to the event that ended its own execution by it (src/turns/outcome.ts).
 */
export const EXECUTION_ID_KEY = "arkahExecutionId";

/**
 * The pipeline's answer for a call, stamped with its execution id ({@link EXECUTION_ID_KEY}),
 * always by the pipeline: whatever a tool body or an inner middleware put under that key is
 * overwritten, so no body can bind its result to another execution's refusal. A rebuilt message,
 * all else kept. A `Command` is answered as it is (its messages carry no stamp, and so no refusal).
 */
export function stampedResult(result: ToolResult, executionId: string): ToolResult {
  if (!ToolMessage.isInstance(result)) return result;
  return new ToolMessage({
    content: result.content,
    status: result.status,
    artifact: result.artifact as unknown,
    tool_call_id: result.tool_call_id,
    ...(result.name === undefined ? {} : { name: result.name }),
    ...(result.id === undefined ? {} : { id: result.id }),
    // eslint-disable-next-line @typescript-eslint/no-deprecated -- kept as the body gave it: the stamp changes nothing else
    additional_kwargs: result.additional_kwargs,
    ...(result.metadata === undefined ? {} : { metadata: result.metadata }),
    response_metadata: { ...result.response_metadata, [EXECUTION_ID_KEY]: executionId },
  });
}

/** The call a result is bound to: its id and tool name. */
interface CallBinding {
  readonly id: string;
  readonly name: string;
}

/**
 * The state keys LangChain's agent keeps for itself besides `messages`: `jumpTo` routes the graph
 * after a middleware hook (a tool that set it would choose where the run goes next), and
 * `structuredResponse` is the agent's structured answer (a tool that set it would answer for the
 * model; it stays the last value written).
 */
const AGENT_KEYS: ReadonlySet<string> = new Set(["jumpTo", "structuredResponse"]);

/**
 * A tool's `Command` bound to its call, with the one `ToolMessage` it answers with, or undefined
 * when the guardrails cannot bind it. Bound: it routes nothing (no `goto`, `graph` or `resume`: a
 * guarded call answers, it does not steer the graph or answer an interrupt), writes none of the
 * agent's own keys, and its `update.messages` is exactly one `ToolMessage`, rebuilt as
 * {@link ownResult} rebuilds one (the call's id and tool name, no message id of its own). Another
 * message (a user's, a system one, a second answer, a removal) could speak for the user or another
 * call, and none would leave the call unanswered. Other state keys (the application's own) pass
 * as they are.
 */
export function ownCommand(command: Command, call: CallBinding): { readonly command: Command; readonly message: ToolMessage } | undefined {
  const { goto, graph, resume } = command as { readonly goto?: unknown; readonly graph?: unknown; readonly resume?: unknown };
  if (graph !== undefined || resume !== undefined || !(goto === undefined || (Array.isArray(goto) && goto.length === 0))) return undefined;
  const entries = updateEntries(command.update);
  if (entries === undefined) return undefined;
  let answer: ToolMessage | undefined;
  const rest: [string, unknown][] = [];
  for (const [key, value] of entries) {
    if (AGENT_KEYS.has(key)) return undefined;
    if (key !== "messages") {
      rest.push([key, value]);
      continue;
    }
    const messages: readonly unknown[] = Array.isArray(value) ? value : [value];
    const [only] = messages;
    if (answer !== undefined || messages.length !== 1 || !ToolMessage.isInstance(only)) return undefined;
    answer = ownMessage(only, call);
  }
  if (answer === undefined) return undefined;
  return { command: new Command({ update: Object.fromEntries([...rest, ["messages", [answer]]]) }), message: answer };
}

/**
 * A `Command`'s update as LangGraph reads it (a record, or `[key, value]` pairs), or undefined for
 * any other shape (LangGraph writes it whole to the root) and for pairs that name a key twice.
 */
function updateEntries(update: unknown): readonly (readonly [string, unknown])[] | undefined {
  if (typeof update !== "object" || update === null) return undefined;
  if (!Array.isArray(update)) return Object.entries(update);
  const pairs = update as readonly unknown[];
  if (!pairs.every((pair) => Array.isArray(pair) && pair.length === 2 && typeof pair[0] === "string")) return undefined;
  const typed = pairs as readonly (readonly [string, unknown])[];
  return new Set(typed.map(([key]) => key)).size === typed.length ? typed : undefined;
}
