/**
 * What the server makes of a run a client asked for: the trusted turn, built from what the client
 * may choose (the note, its request's id, its one new user message) and what it may not (the
 * principal, the turn id, the policy version). Pure, and nothing happens on import: `auth.ts` does
 * the I/O.
 */
import { z } from "zod";
import type { Moderate, TurnInput } from "arkah-agent-guardrails";

/** The moderation policy turns are admitted under; bound into every receipt. */
export const POLICY_VERSION = "notes-v1";

/** Stand-in moderation: your provider's verdict on exactly these segments, asked once per turn. */
export const moderate: Moderate = ({ segments }) => !segments.some((segment) => /password/i.test(segment.content));

/** What a client may choose for a run: the note, and its request's id (a retry sends the same one). */
const RunRequestSchema = z.strictObject({ noteId: z.string().min(1), requestId: z.uuid() });

const UserMessageSchema = z.union([
  z.strictObject({ role: z.enum(["user", "human"]), content: z.string(), id: z.string().optional() }),
  z.strictObject({ type: z.literal("human"), content: z.string(), id: z.string().optional() }),
]);
/** A new turn is one new user message, in plain text: the text admission moderates. */
const RunInputSchema = z.strictObject({ messages: z.tuple([UserMessageSchema]) });

/** A resume names the same request and repeats its message: the turn is rebuilt, never admitted anew. */
const ResumeRequestSchema = RunRequestSchema.extend({ message: z.string() });
/** A resume answers the pause, and does nothing else (no `update`, no `goto`: no new text). */
const ResumeCommandSchema = z.strictObject({ resume: z.unknown() });

/** The turn a run asked for: a new turn (admit it) or a resume of an admitted one (check it). */
export interface RunTurn {
  /** The trusted turn, built by the server. */
  readonly turn: TurnInput;
  /** Whether the run resumes a pause: its turn must already be admitted. */
  readonly resume: boolean;
}

/**
 * The trusted turn for a run `principal` asked for (the `kwargs` LangGraph Server hands the
 * `threads:create_run` handler), or why not. The turn id is the request id scoped to the principal,
 * so a retry is the same turn, two users never share one (nor block each other's by reusing an id),
 * and only the user who made a request can resume it.
 */
export function serverTurn(principal: string, kwargs: Readonly<Record<string, unknown>>): RunTurn | string {
  const turn = (noteId: string, requestId: string, text: string): TurnInput => ({
    scopeId: noteId,
    turnId: `${principal}/${requestId}`,
    policyVersion: POLICY_VERSION,
    segments: [{ label: "user", content: text }],
    principal,
  });
  if (kwargs.command != null) {
    if (kwargs.input != null) return "a run has input or a command, not both";
    const command = ResumeCommandSchema.safeParse(kwargs.command);
    if (!command.success) return `a command may only resume: ${z.prettifyError(command.error)}`;
    const request = ResumeRequestSchema.safeParse(kwargs.context);
    if (!request.success) return `a resume's context must be { noteId, requestId, message } and nothing else: ${z.prettifyError(request.error)}`;
    return { turn: turn(request.data.noteId, request.data.requestId, request.data.message), resume: true };
  }
  const request = RunRequestSchema.safeParse(kwargs.context);
  if (!request.success) return `context must be { noteId, requestId } and nothing else: ${z.prettifyError(request.error)}`;
  const input = RunInputSchema.safeParse(kwargs.input);
  if (!input.success) return `input must be { messages: [one user message with text content] }: ${z.prettifyError(input.error)}`;
  return { turn: turn(request.data.noteId, request.data.requestId, input.data.messages[0].content), resume: false };
}
