/**
 * `guardTools`: governed twins of a tool list, for graphs built without `createAgent` (a
 * `StateGraph` with LangGraph's `ToolNode`, or a model given the tools with `bindTools`). A twin
 * has its original's name, description and schema, and each call it gets goes through the
 * middleware's own core (`documentCore`, src/middleware.ts): the same turn gate, stages, seal,
 * claims, approvals, retries, audit and refusal codes. The original's body runs only as that
 * core's sealed invocation.
 */
import { BaseMessage, ToolMessage } from "@langchain/core/messages";
import { StructuredTool, type ToolRunnableConfig } from "@langchain/core/tools";
import { isCommand } from "@langchain/langgraph";
import type { ToolCallHandler, ToolCallRequest } from "langchain";
import { z } from "zod";
import type { GuardrailStore, TurnInput } from "./contracts/index.js";
import { ConfigurationError, AdmissionError } from "./errors.js";
import { invocation } from "./execution/seal.js";
import { checkApprovalsCanPause } from "./guardrails/approval.js";
import { documentCore, fixedTurn, type DocumentCore, type DocumentGuardrailsOptions } from "./middleware.js";
import { markTwin } from "./one-middleware.js";
import type { ToolResult } from "./tool-messages.js";
import { TurnGate } from "./turn-gate.js";

/**
 * `guardTools`' options: `createDocumentGuardrails`' options, so one object can configure both.
 * `tools` maps every tool in the list (and any other) to its policy. There is no
 * `unregisteredTools`: a tool without a policy is a `ConfigurationError` when the twins are built.
 */
export type GuardToolsOptions = Omit<DocumentGuardrailsOptions, "unregisteredTools">;

/**
 * What a twin reads of the config its `invoke` gets (LangGraph's `ToolNode` passes the node's
 * config with `context` and `state` added). The turn is read from `context` only, as the
 * middleware reads it; `state` (the graph state, which the model writes) gives the transcript and
 * nothing else.
 */
const InvokeConfigSchema = z.looseObject({
  context: z.unknown().optional(),
  configurable: z.record(z.string(), z.unknown()).optional(),
  signal: z.instanceof(AbortSignal).optional(),
  state: z.unknown().optional(),
});

const MessagesSchema = z.array(z.custom<BaseMessage>((value) => BaseMessage.isInstance(value)));

/**
 * Returns a governed twin of each tool, in order: use the twins wherever the originals went
 * (`new ToolNode(twins)`, `model.bindTools(twins)`). Each call a twin gets is decided by the same
 * pipeline as `createDocumentGuardrails`, on the turn in the run's context
 * (`graph.invoke(input, { context: turnContext(turn), configurable: { thread_id } })`, or
 * `options.input` for a graph built for one turn) and the graph state's `messages` as the
 * transcript. A twin answers with the call's `ToolMessage` (a refusal is one; an original that
 * returns a `Command` is refused `unsupported_result`, as in the middleware); a call without an
 * admitted turn throws `AdmissionError`, as it does in the middleware.
 *
 * Throws `ConfigurationError` for invalid options, a tool with no policy in `options.tools`, a
 * tool the guardrails cannot seal, two tools of one name, or a tool that is already a twin.
 */
export function guardTools<const T extends readonly StructuredTool[]>(
  tools: T,
  options: GuardToolsOptions,
): GovernedTools<T> {
  const core = documentCore(options, "guardTools");
  if (core.options.unregisteredTools !== undefined) {
    throw new ConfigurationError(
      "invalid guardTools options: unregisteredTools does not apply; every tool in the list needs a policy in tools",
    );
  }
  if (!Array.isArray(tools) || tools.length === 0) {
    throw new ConfigurationError("guardTools: pass a non-empty array of tools built with tool()");
  }
  const names = new Set<string>();
  const twins = tools.map((original: unknown) => {
    const { name } = (typeof original === "object" && original !== null ? original : {}) as { name?: unknown };
    if (typeof name !== "string" || !core.policies.has(name)) {
      throw new ConfigurationError(
        `guardTools: ${typeof name === "string" ? `tool "${name}" has` : "a tool without a name has"} no policy; add it to options.tools`,
      );
    }
    if (names.has(name)) throw new ConfigurationError(`guardTools: two tools are named "${name}"; give each a unique name`);
    names.add(name);
    core.checkSealable(original); // the same check the middleware makes at the first model call
    return new GovernedTool(original as StructuredTool, core);
  });
  return twins as unknown as GovernedTools<T>;
}

/**
 * The twins, one per tool and in order: a mutable array (or tuple), as `ToolNode` and `bindTools`
 * take it. Each is a `StructuredTool` whose `invoke` answers the call's `ToolMessage`.
 */
export type GovernedTools<T extends readonly StructuredTool[]> = { -readonly [K in keyof T]: StructuredTool };

/** A governed twin: the original's face, the core's decisions. */
class GovernedTool extends StructuredTool {
  name: string;
  description: string;
  schema: StructuredTool["schema"];
  readonly #original: StructuredTool;
  readonly #core: DocumentCore;

  constructor(original: StructuredTool, core: DocumentCore) {
    super({
      responseFormat: original.responseFormat,
      verboseParsingErrors: original.verboseParsingErrors,
      ...(original.metadata === undefined ? {} : { metadata: original.metadata }),
      ...(original.tags === undefined ? {} : { tags: original.tags }),
    });
    this.name = original.name;
    this.description = original.description;
    this.schema = original.schema;
    this.returnDirect = original.returnDirect;
    if (original.extras !== undefined) this.extras = original.extras;
    this.#original = original;
    this.#core = core;
    markTwin(this);
  }

  // Always the call's ToolMessage (the pipeline refuses an original's Command), whatever the
  // input's form; `never` fits the base class's generic signature, which promises a ToolMessage for
  // a tool-call input.
  override invoke(input: unknown, config?: ToolRunnableConfig): Promise<never> {
    return this.#govern(input, config) as Promise<never>;
  }

  /** Reached only through LangChain's deprecated `call`: a twin runs its calls through `invoke`. */
  protected _call(): Promise<never> {
    return Promise.reject(new Error(`${this.name} is a governed twin: run it through invoke (ToolNode does)`));
  }

  async #govern(input: unknown, config: unknown): Promise<ToolResult> {
    const parsed = InvokeConfigSchema.safeParse(config ?? {});
    if (!parsed.success) {
      throw new AdmissionError("invalid_input", `${this.name}: the invoke config is not a LangChain RunnableConfig`);
    }
    const runConfig = parsed.data;
    const { id, args } = invocation(input, config);
    // The call is to this tool whatever name the input gives: its policy is this tool's.
    // Arguments of any shape go on as given: the parse stage refuses what the schema does not take.
    const toolCall = { name: this.name, args: args as Record<string, unknown>, ...(id === undefined ? {} : { id }) };
    // Replaces the middleware's model-call check: an approval needs a checkpointer to pause.
    checkApprovalsCanPause(this.#core.governance.guardrails, runConfig.configurable);
    const request = {
      toolCall,
      tool: this.#original,
      state: { messages: transcriptOf(runConfig) },
      runtime: { context: runConfig.context, configurable: runConfig.configurable, signal: runConfig.signal },
    } as unknown as ToolCallRequest;
    // What LangChain's ToolNode does innermost: invoke the tool the request names (the sealed one).
    const handler: ToolCallHandler = async (sealed) => {
      const tool = sealed.tool as StructuredTool | undefined;
      if (tool === undefined) throw new Error("unreachable: the pipeline always names the sealed tool");
      const output: unknown = await tool.invoke({ ...sealed.toolCall, type: "tool_call" }, { ...(config as ToolRunnableConfig | undefined) });
      if (ToolMessage.isInstance(output) || isCommand(output)) return output;
      return new ToolMessage({
        name: this.name,
        content: typeof output === "string" ? output : JSON.stringify(output),
        tool_call_id: sealed.toolCall.id ?? "",
      });
    };
    return this.#core.govern(request, handler);
  }
}

/**
 * The transcript a call is decided on: the graph state's `messages` as `ToolNode` passes it (or,
 * for a twin invoked from a node of your own, the node's input LangGraph keeps in the task's
 * scratchpad). None: an empty transcript, which the turn gate refuses (`transcript_mismatch`).
 */
function transcriptOf(config: z.infer<typeof InvokeConfigSchema>): readonly BaseMessage[] {
  const scratchpad = config.configurable?.__pregel_scratchpad as { currentTaskInput?: unknown } | undefined;
  return messagesOf(config.state ?? scratchpad?.currentTaskInput);
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * What `admittedTurn` needs: pass the options you gave `guardTools` (they have these three), so the
 * model node checks the turn exactly as the twins do.
 */
export interface AdmittedTurnOptions {
  /** The store the turn was admitted in (`admitTurn`), the one the twins use. */
  readonly store: Pick<GuardrailStore, "getReceipt">;
  /** The label of the turn's segment the user typed, as for `guardTools`. */
  readonly userMessageLabel: string;
  /** For a graph built for one turn: that turn (as `guardTools`' `input`); else the run's context holds it. */
  readonly input?: TurnInput | undefined;
}

const AdmittedTurnOptionsSchema = z.looseObject({
  store: z.custom<Pick<GuardrailStore, "getReceipt">>(
    (value) => typeof value === "object" && value !== null && typeof (value as { getReceipt?: unknown }).getReceipt === "function",
    "store must be the GuardrailStore the turn was admitted in",
  ),
  userMessageLabel: z.string().min(1),
  input: z.unknown().optional(),
});

/** What `admittedTurn` reads of a node's config: the run's `context`, nothing else. */
const NodeConfigSchema = z.looseObject({ context: z.unknown().optional() });

/** Gates per store and label: a gate keeps what it learned of a turn's user segment. */
const gates = new WeakMap<object, Map<string, TurnGate>>();

/**
 * The admission check of a model call, for a graph built without `createAgent`: call it first in
 * your model node, with the node's own `state` and `config`, so the model is never called for a
 * turn that was not admitted. `guardTools`' twins check each tool call; the model node is yours,
 * and this is the check `createDocumentGuardrails` makes before every model call, from the same
 * code: the turn from `config.context` (`turnContext(turn)`, validated), or `options.input`; its
 * allowed admission receipt in the store; and the transcript's latest user message (`state.messages`,
 * or `state` itself when it is an array) equal to the admitted user text.
 *
 * Answers the admitted turn. Throws `AdmissionError` with the middleware's codes and messages:
 * `invalid_input` (no turn in the context, or an invalid one; a config that is not an object),
 * `not_admitted`, `denied`, `input_mismatch`, `transcript_mismatch`; `ConfigurationError` for
 * invalid options.
 */
export async function admittedTurn(state: unknown, config: unknown, options: AdmittedTurnOptions): Promise<TurnInput> {
  const parsedOptions = AdmittedTurnOptionsSchema.safeParse(options);
  if (!parsedOptions.success) {
    throw new ConfigurationError(`invalid admittedTurn options: ${z.prettifyError(parsedOptions.error)}`);
  }
  const { store, userMessageLabel, input } = parsedOptions.data;
  const parsedConfig = NodeConfigSchema.safeParse(config ?? {});
  if (!parsedConfig.success) {
    throw new AdmissionError("invalid_input", "admittedTurn: the node's config is not a LangChain RunnableConfig");
  }
  const fixed = fixedTurn(input, userMessageLabel, "admittedTurn");
  const admitted = await gateFor(store, userMessageLabel, fixed).admit(parsedConfig.data.context, messagesOf(state));
  return admitted.turn.input;
}

function gateFor(store: Pick<GuardrailStore, "getReceipt">, userMessageLabel: string, fixed: ReturnType<typeof fixedTurn>): TurnGate {
  // A fixed turn is checked by a gate of its own (cheap); a gate per store and label otherwise.
  if (fixed !== undefined) return new TurnGate(store as GuardrailStore, userMessageLabel, fixed);
  let byLabel = gates.get(store);
  if (byLabel === undefined) {
    byLabel = new Map();
    gates.set(store, byLabel);
  }
  let gate = byLabel.get(userMessageLabel);
  if (gate === undefined) {
    gate = new TurnGate(store as GuardrailStore, userMessageLabel, undefined);
    byLabel.set(userMessageLabel, gate);
  }
  return gate;
}

/** A node's transcript: `state.messages`, or the state itself when it is an array; else none, which admission refuses. */
function messagesOf(state: unknown): readonly BaseMessage[] {
  const messages = Array.isArray(state) ? state : isRecord(state) ? state.messages : undefined;
  const parsed = MessagesSchema.safeParse(messages);
  return parsed.success ? parsed.data : [];
}
