/**
 * Shared fixtures for agent tests: a document service whose writes are counted, its tools, a
 * standard turn, and helpers to run a real `createAgent` loop with a scripted model.
 */
import { HumanMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import type { BaseCheckpointSaver } from "@langchain/langgraph";
import type { StructuredTool } from "@langchain/core/tools";
import { createAgent, tool, type AgentMiddleware } from "langchain";
import { z } from "zod";
import {
  admitTurn,
  createDocumentGuardrails,
  digest,
  turnKey,
  InMemoryGuardrailStore,
  type AdmissionReceipt,
  type ApprovalDecisionResult,
  type ApprovalRecord,
  type ApprovalSubmission,
  type AuditEvent,
  type DocumentGuardrailsOptions,
  type Guardrail,
  type GuardrailContext,
  type GuardrailLogger,
  type GuardrailVerdict,
  type GuardrailStore,
  type ToolPolicy,
  type TurnInput,
} from "arkah-agent-guardrails";
import {
  toolFingerprint,
  type AdvanceAuditCursorInput,
  type TurnStart,
  type ApplyApprovalInput,
  type ApprovalQuery,
  type AuditQuery,
  type BeginTurnInput,
  type BeginTurnResult,
  type ClaimOptions,
  type ClaimResult,
  type DecideApprovalInput,
  type ExpireApprovalsInput,
  type ExpireApprovalsResult,
  type OrphanApprovalsInput,
  type OrphanApprovalsResult,
  type FinishTurnInput,
  type MutationIdentity,
  type MutationRelease,
  type MutationSettlement,
  type MutationStatus,
  type PruneOptions,
  type PruneResult,
  type ReadEvidence,
  type RecordReadOptions,
  type Reconciliation,
  type ReconcileResult,
  type ListTurnsQuery,
  type RenewTurnInput,
  type ResumeTurnInput,
  type ResumeTurnResult,
  type StoredAuditEvent,
  type TakePrunableTurnInput,
  type TurnRecord,
  type UnresolvedEffect,
  type UnresolvedMutation,
  type EffectClaimOptions,
  type EffectClaimResult,
  type EffectIdentity,
  type EffectReconciliation,
  type EffectRelease,
  type EffectSettlement,
  type EffectStatus,
  type VerdictKey,
  type VerdictRecord,
} from "arkah-agent-guardrails/store";
import { ScriptedModel, type ScriptStep, type ScriptedToolCall } from "arkah-agent-guardrails/testing";

/** A document service. `writes` counts executed renames: the side effect tests assert on. */
export class DocumentService {
  title = "Untitled";
  revision = 0;
  writes = 0;
  reads = 0;

  snapshot(): string {
    return JSON.stringify({ title: this.title, revision: this.revision });
  }

  rename(title: string, expectedRevision: number): string {
    if (expectedRevision !== this.revision) {
      throw new Error(`revision conflict at /srv/docs/secret-path: expected ${String(expectedRevision)}`);
    }
    this.writes += 1;
    this.title = title;
    this.revision += 1;
    return this.snapshot();
  }
}

/** Hooks a test can set to make a tool slow, fail or interrupt. */
export interface ToolHooks {
  beforeRead?: () => Promise<void> | void;
  beforeWrite?: (signal: AbortSignal | undefined) => Promise<void> | void;
  afterWrite?: () => Promise<void> | void;
}

export function documentTools(service: DocumentService, hooks: ToolHooks = {}) {
  const readDocument = tool(
    async () => {
      await hooks.beforeRead?.();
      service.reads += 1;
      return service.snapshot();
    },
    { name: "read_document", description: "Read the document.", schema: z.object({}) },
  );
  const searchSources = tool(() => "source: style guide says short titles", {
    name: "search_sources",
    description: "Search other sources.",
    schema: z.object({ query: z.string() }),
  });
  const renameDocument = tool(
    async ({ title, expectedRevision }, config) => {
      await hooks.beforeWrite?.(config.signal as AbortSignal | undefined);
      const result = service.rename(title, expectedRevision);
      await hooks.afterWrite?.();
      return result;
    },
    {
      name: "rename_document",
      description: "Rename the document.",
      schema: z.object({ title: z.string().min(1), expectedRevision: z.number().int().min(0) }),
    },
  );
  const remember = tool(() => "Preference saved", {
    name: "remember",
    description: "Remember a preference.",
    schema: z.object({ preference: z.string() }),
  });
  return { readDocument, searchSources, renameDocument, remember, all: [readDocument, searchSources, renameDocument, remember] };
}

/** `toolFingerprint` of the document tool named `name` (the same for every `documentTools` set). */
export function documentToolFingerprint(name: string): string {
  const found = documentTools(new DocumentService()).all.find((candidate) => candidate.name === name);
  if (found === undefined) throw new Error(`no document tool named ${name}`);
  return toolFingerprint(found);
}

export const TOOL_POLICIES: Record<string, ToolPolicy> = {
  read_document: { kind: "document-read" },
  search_sources: { kind: "source-read" },
  rename_document: { kind: "mutation" },
  remember: { kind: "auxiliary" },
};

export const USER_MESSAGE = "Please rename this document to Field notes.";

export function turnInput(overrides: Partial<TurnInput> = {}): TurnInput {
  return {
    scopeId: "doc-1",
    turnId: "turn-1",
    policyVersion: "v1",
    segments: [{ label: "user", content: USER_MESSAGE }],
    ...overrides,
  };
}

/** The user message of a turn built by `turnInput`. */
export function userText(input: TurnInput): string {
  const segment = input.segments.find((candidate) => candidate.label === "user");
  if (segment === undefined) throw new Error("turn has no user segment");
  return segment.content;
}

export const read = (id: string): ScriptedToolCall => ({ id, name: "read_document", args: {} });
export const rename = (id: string, title = "Field notes", expectedRevision = 0): ScriptedToolCall => ({
  id,
  name: "rename_document",
  args: { title, expectedRevision },
});
export const remember = (id: string): ScriptedToolCall => ({ id, name: "remember", args: { preference: "short" } });
export const search = (id: string): ScriptedToolCall => ({ id, name: "search_sources", args: { query: "titles" } });

export const silentLogger: GuardrailLogger & { warnings: string[] } = {
  warnings: [],
  warn(message) {
    this.warnings.push(message);
  },
};

export async function admit(store: GuardrailStore, input: TurnInput, allowed = true) {
  return admitTurn({ store, input, moderate: () => allowed });
}

export interface GuardedAgentOptions {
  script: readonly ScriptStep[];
  store?: GuardrailStore;
  input?: TurnInput;
  service?: DocumentService;
  hooks?: ToolHooks;
  guardrails?: Partial<DocumentGuardrailsOptions>;
  /** Extra middleware placed after the guardrails (inner layers). */
  middleware?: readonly AgentMiddleware[];
  checkpointer?: BaseCheckpointSaver;
  /** More tools beside the document tools (their policies in `guardrails.tools`). */
  extraTools?: readonly StructuredTool[];
}

/** Builds a real agent guarded by `createDocumentGuardrails` with a scripted model. */
export function guardedAgent(options: GuardedAgentOptions) {
  const store = options.store ?? new InMemoryGuardrailStore();
  const input = options.input ?? turnInput();
  const service = options.service ?? new DocumentService();
  const model = new ScriptedModel(options.script);
  const guardrails: AgentMiddleware = createDocumentGuardrails({
    input,
    store,
    userMessageLabel: "user",
    authorize: () => true,
    tools: TOOL_POLICIES,
    logger: { warn: () => undefined },
    ...options.guardrails,
  });
  const agent = createAgent({
    model,
    tools: [...documentTools(service, options.hooks).all, ...(options.extraTools ?? [])],
    middleware: [guardrails, ...(options.middleware ?? [])],
    ...(options.checkpointer === undefined ? {} : { checkpointer: options.checkpointer }),
  });
  return { agent, store, input, service, model };
}

/** Runs one invocation with the turn's user message. */
export async function invokeTurn(
  agent: ReturnType<typeof guardedAgent>["agent"],
  input: TurnInput,
  config: Parameters<ReturnType<typeof guardedAgent>["agent"]["invoke"]>[1] = {},
) {
  const result = await agent.invoke({ messages: [new HumanMessage(userText(input))] }, config);
  return result.messages;
}

/** One entry per ToolMessage: the refusal code for refusals, otherwise the content. */
export interface ToolOutcome {
  name: string | undefined;
  callId: string;
  status: "success" | "error";
  code: string | undefined;
  content: string;
}

export function toolOutcomes(messages: readonly BaseMessage[]): ToolOutcome[] {
  return messages.filter(ToolMessage.isInstance).map((message) => {
    const content = typeof message.content === "string" ? message.content : JSON.stringify(message.content);
    return {
      name: message.name,
      callId: message.tool_call_id,
      status: message.status === "error" ? "error" : "success",
      code: refusalCode(content),
      content,
    };
  });
}

export function refusalCode(content: string): string | undefined {
  try {
    const parsed: unknown = JSON.parse(content);
    if (typeof parsed === "object" && parsed !== null && "guardrail" in parsed && typeof parsed.guardrail === "string") {
      return parsed.guardrail;
    }
  } catch {
    // An ordinary tool result.
  }
  return undefined;
}

/** The outcome for one call id; fails the test if there is not exactly one. */
export function outcomeOf(messages: readonly BaseMessage[], callId: string): ToolOutcome {
  const matches = toolOutcomes(messages).filter((outcome) => outcome.callId === callId);
  if (matches.length !== 1) throw new Error(`expected one ToolMessage for ${callId}, found ${String(matches.length)}`);
  return matches[0] as ToolOutcome;
}

/**
 * A `GuardrailStore` view that forwards every method to a shared store. Subclass it to inject a
 * failure into one method while other views of the same store stay healthy.
 */
export class ForwardingStore implements GuardrailStore {
  constructor(protected readonly inner: GuardrailStore) {}
  getReceipt(turnKey: string): Promise<AdmissionReceipt | undefined> {
    return this.inner.getReceipt(turnKey);
  }
  putReceiptIfAbsent(receipt: AdmissionReceipt): Promise<AdmissionReceipt> {
    return this.inner.putReceiptIfAbsent(receipt);
  }
  recordSuccessfulRead(evidence: ReadEvidence, options?: RecordReadOptions): Promise<void> {
    return options === undefined ? this.inner.recordSuccessfulRead(evidence) : this.inner.recordSuccessfulRead(evidence, options);
  }
  hasSuccessfulRead(evidence: ReadEvidence): Promise<boolean> {
    return this.inner.hasSuccessfulRead(evidence);
  }
  claimMutation(identity: MutationIdentity, options?: ClaimOptions): Promise<ClaimResult> {
    return this.inner.claimMutation(identity, options);
  }
  settleMutation(settlement: MutationSettlement): Promise<boolean> {
    return this.inner.settleMutation(settlement);
  }
  releaseMutation(release: MutationRelease): Promise<boolean> {
    return this.inner.releaseMutation(release);
  }
  recordVerdict(record: VerdictRecord): Promise<VerdictRecord> {
    return this.inner.recordVerdict(record);
  }
  getVerdict(key: VerdictKey): Promise<VerdictRecord | undefined> {
    return this.inner.getVerdict(key);
  }
  requestApproval(request: ApprovalSubmission): Promise<ApprovalRecord> {
    return this.inner.requestApproval(request);
  }
  getApproval(approvalId: string): Promise<ApprovalRecord | undefined> {
    return this.inner.getApproval(approvalId);
  }
  decideApproval(input: DecideApprovalInput): Promise<ApprovalDecisionResult> {
    return this.inner.decideApproval(input);
  }
  applyApproval(input: ApplyApprovalInput): Promise<boolean> {
    return this.inner.applyApproval(input);
  }
  listApprovals(query?: ApprovalQuery): Promise<ApprovalRecord[]> {
    return this.inner.listApprovals(query);
  }
  expireApprovals(input: ExpireApprovalsInput): Promise<ExpireApprovalsResult> {
    return this.inner.expireApprovals(input);
  }
  orphanApprovals(input: OrphanApprovalsInput): Promise<OrphanApprovalsResult> {
    return this.inner.orphanApprovals(input);
  }
  appendAudit(event: AuditEvent): Promise<void> {
    return this.inner.appendAudit(event);
  }
  readAudit(query?: AuditQuery): Promise<StoredAuditEvent[]> {
    return this.inner.readAudit(query);
  }
  getAuditCursor(sink: string): Promise<number> {
    return this.inner.getAuditCursor(sink);
  }
  advanceAuditCursor(input: AdvanceAuditCursorInput): Promise<boolean> {
    return this.inner.advanceAuditCursor(input);
  }
  listUnresolved(): Promise<UnresolvedMutation[]> {
    return this.inner.listUnresolved();
  }
  reconcileMutation(reconciliation: Reconciliation): Promise<ReconcileResult> {
    return this.inner.reconcileMutation(reconciliation);
  }
  prune(options: PruneOptions): Promise<PruneResult> {
    return this.inner.prune(options);
  }
  getMutation(turnKey: string): Promise<MutationStatus | undefined> {
    return this.inner.getMutation(turnKey);
  }
  beginTurn(input: BeginTurnInput): Promise<BeginTurnResult> {
    return this.inner.beginTurn(input);
  }
  finishTurn(input: FinishTurnInput): Promise<boolean> {
    return this.inner.finishTurn(input);
  }
  resumeTurn(input: ResumeTurnInput): Promise<ResumeTurnResult> {
    return this.inner.resumeTurn(input);
  }
  renewTurn(input: RenewTurnInput): Promise<boolean> {
    return this.inner.renewTurn(input);
  }
  listTurns(query: ListTurnsQuery): Promise<TurnRecord[]> {
    return this.inner.listTurns(query);
  }
  getTurn(turnKey: string): Promise<TurnRecord | undefined> {
    return this.inner.getTurn(turnKey);
  }
  takePrunableTurn(input: TakePrunableTurnInput): Promise<boolean> {
    return this.inner.takePrunableTurn(input);
  }
  claimEffect(identity: EffectIdentity, options?: EffectClaimOptions): Promise<EffectClaimResult> {
    return this.inner.claimEffect(identity, options);
  }
  settleEffect(settlement: EffectSettlement): Promise<boolean> {
    return this.inner.settleEffect(settlement);
  }
  releaseEffect(release: EffectRelease): Promise<boolean> {
    return this.inner.releaseEffect(release);
  }
  getEffect(effectKey: string): Promise<EffectStatus | undefined> {
    return this.inner.getEffect(effectKey);
  }
  listUnresolvedEffects(): Promise<UnresolvedEffect[]> {
    return this.inner.listUnresolvedEffects();
  }
  reconcileEffect(reconciliation: EffectReconciliation): Promise<ReconcileResult> {
    return this.inner.reconcileEffect(reconciliation);
  }
}

/** The rejection of a promise that must reject. */
export async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error("expected a rejection");
}

/** A promise and the function that resolves it, for a test to decide when something finishes. */
export function deferred<T = void>() {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((done) => {
    resolve = done;
  });
  return { promise, resolve };
}

/**
 * A guardrail answering `answer` (a verdict, or a function of the context, which may answer
 * anything: a test of invalid verdicts returns non-verdicts); `contexts` keeps every context it was
 * given, `runs` counts them, in total or for one call id.
 */
export function detector(name: string, answer: GuardrailVerdict | ((context: GuardrailContext) => unknown), extra: Partial<Omit<Guardrail, "name" | "check">> = {}) {
  const contexts: GuardrailContext[] = [];
  const guardrail: Guardrail = {
    name,
    placements: ["tool-args"],
    ...extra,
    check: (context) => {
      contexts.push(context);
      return (typeof answer === "function" ? answer(context) : answer) as GuardrailVerdict | Promise<GuardrailVerdict>;
    },
  };
  return {
    guardrail,
    contexts,
    runs: (callId?: string) => contexts.filter((context) => callId === undefined || context.toolCall.id === callId).length,
  };
}

/**
 * A turn service's start of turn `turnId` in `scopeId`, for alice, as the service derives its keys
 * (the request key from the principal and the turn id).
 */
export function turnStartOf(scopeId: string, turnId: string, content = "Rename it."): TurnStart {
  const input = { scopeId, turnId, policyVersion: "policy-1", principal: "alice", segments: [{ label: "user", content }] };
  const key = turnKey(input);
  return {
    turnKey: key,
    scopeId,
    principal: "alice",
    input,
    inputDigest: digest({ kind: "test.turn-input", input }),
    requestKey: digest({ kind: "test.turn-request", principal: "alice", turnId }),
    threadId: `turn:${key}`,
  };
}
