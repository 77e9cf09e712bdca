/**
 * The guarded agent of the security suite (the notes service that counts writes, its tools, one
 * turn on note-7) with a real provider client as its model instead of the scripted one.
 */
import type { BaseChatModel } from "@langchain/core/language_models/chat_models";
import { HumanMessage, type BaseMessage } from "@langchain/core/messages";
import type { BaseCheckpointSaver } from "@langchain/langgraph";
import { createAgent, type AgentMiddleware } from "langchain";
import {
  admitTurn,
  createDocumentGuardrails,
  InMemoryGuardrailStore,
  turnKey,
  type DocumentGuardrailsOptions,
  type GuardrailStore,
  type ToolPolicy,
  type TurnInput,
} from "arkah-agent-guardrails";
import { noteTurn, NotesService, noteTools, USER } from "../../security/support.js";

/** Both note tools name the note they touch, so a call on another note is `out_of_scope`. */
export const SCOPED_POLICIES: Record<string, ToolPolicy> = {
  read_note: { kind: "document-read", scope: (args) => args.noteId as string },
  edit_note: { kind: "mutation", scope: (args) => args.noteId as string },
};

export interface WireAgentOptions {
  readonly model: BaseChatModel;
  readonly service?: NotesService;
  readonly store?: GuardrailStore;
  readonly input?: TurnInput;
  readonly guardrails?: Partial<DocumentGuardrailsOptions>;
  /** Placed after the guardrails (inside them). */
  readonly inner?: readonly AgentMiddleware[];
  readonly checkpointer?: BaseCheckpointSaver;
}

export function wireAgent(options: WireAgentOptions) {
  const store = options.store ?? new InMemoryGuardrailStore();
  const input = options.input ?? noteTurn();
  const service = options.service ?? new NotesService();
  const warnings: string[] = [];
  const agent = createAgent({
    model: options.model,
    tools: noteTools(service).all,
    middleware: [
      createDocumentGuardrails({
        input,
        store,
        userMessageLabel: "user",
        authorize: () => true,
        tools: SCOPED_POLICIES,
        logger: { warn: (message) => warnings.push(message) },
        ...options.guardrails,
      }),
      ...(options.inner ?? []),
    ],
    ...(options.checkpointer === undefined ? {} : { checkpointer: options.checkpointer }),
  });
  const admit = () => admitTurn({ store, input, moderate: () => true });
  const userMessage = () => ({ messages: [new HumanMessage(USER)] });
  /** Admits the turn (once; later runs reuse the receipt) and runs it to the end. */
  const run = async (config: Parameters<typeof agent.invoke>[1] = {}): Promise<BaseMessage[]> => {
    await admit();
    return (await agent.invoke(userMessage(), config)).messages;
  };
  /** The mutation decisions in the store's audit trail, in order, as `[decision, code]`. */
  const mutationAudit = async () =>
    (await store.readAudit({ turnKey: turnKey(input) }))
      .filter((event) => event.toolName === "edit_note")
      .map((event) => [event.decision, event.code ?? null]);
  return { agent, store, input, service, warnings, admit, userMessage, run, mutationAudit };
}
