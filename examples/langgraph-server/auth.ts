/**
 * The server's custom auth (`langgraph.json`'s `auth.path`): LangGraph Server calls `authenticate`
 * for every request and the `threads:create_run` handler for every run it creates, through any
 * endpoint (`runs.wait`, `runs.stream`, `runs.create`, stateless runs). So the server, not the
 * client, builds the run's turn:
 *
 * 1. `authenticate` turns the bearer token into the principal;
 * 2. on run creation, `serverTurn` builds the turn from what the client may choose (the note, its
 *    request id, its one new user message) and from what it may not (the principal, the turn id,
 *    the policy version);
 * 3. `admitTurn` admits it on the store the graph's guardrails read (moderation once per turn: a
 *    retry of the request finds the receipt);
 * 4. the run's `context` is replaced by `turnContext(turn)`: a client-sent turn never reaches the
 *    graph (a `context` with anything but `noteId` and `requestId` is refused).
 *
 * Threads are their creator's (`metadata.owner`), so nobody runs a turn on another user's thread.
 * `langgraph.json` sets `disable_studio_auth`: otherwise any request with the header
 * `x-auth-scheme: langsmith` is let in as the Studio user without `authenticate`.
 */
import { Auth, HTTPException } from "@langchain/langgraph-sdk/auth";
import { z } from "zod";
import { AdmissionError, admitTurn, turnContext, type AdmissionErrorCode, type Moderate, type TurnInput } from "arkah-agent-guardrails";
import { POLICY_VERSION, store } from "./service.js";

/** Stand-in for your identity provider: bearer token -> user id. */
const DEMO_TOKENS: ReadonlyMap<string, string> = new Map([
  ["alice-token", "alice"],
  ["mallory-token", "mallory"],
]);

/** Stand-in moderation: your provider's verdict on exactly these segments, asked once per turn. */
const moderate: Moderate = ({ segments }) => !segments.some((segment) => /password/i.test(segment.content));

/** What a client may choose for a run: the note, and its request's id (a retry sends the same one). */
const RunRequestSchema = z.strictObject({ noteId: z.string().min(1), requestId: z.uuid() });

const UserMessageSchema = z.union([
  z.strictObject({ role: z.enum(["user", "human"]), content: z.string(), id: z.string().optional() }),
  z.strictObject({ type: z.literal("human"), content: z.string(), id: z.string().optional() }),
]);
/** A new turn is one new user message, in plain text: the text admission moderates. */
const RunInputSchema = z.strictObject({ messages: z.tuple([UserMessageSchema]) });

/**
 * The trusted turn for a run `principal` asked for, or why not. Pure: the handler does the I/O.
 * The turn id is the request id scoped to the principal, so a retry is the same turn and two users
 * can never share one (nor block each other's by reusing an id).
 */
export function serverTurn(principal: string, kwargs: Readonly<Record<string, unknown>>): TurnInput | string {
  if (kwargs.command != null) return "this server starts new turns only: a run with a command is refused";
  const request = RunRequestSchema.safeParse(kwargs.context);
  if (!request.success) return `context must be { noteId, requestId } and nothing else: ${z.prettifyError(request.error)}`;
  const input = RunInputSchema.safeParse(kwargs.input);
  if (!input.success) return `input must be { messages: [one user message with text content] }: ${z.prettifyError(input.error)}`;
  return {
    scopeId: request.data.noteId,
    turnId: `${principal}/${request.data.requestId}`,
    policyVersion: POLICY_VERSION,
    segments: [{ label: "user", content: input.data.messages[0].content }],
    principal,
  };
}

/** The HTTP status an admission failure answers. */
const ADMISSION_STATUS: Record<AdmissionErrorCode, number> = {
  invalid_input: 400,
  not_admitted: 403,
  denied: 403,
  input_mismatch: 409,
  transcript_mismatch: 409,
  moderation_failed: 503,
};

export const auth = new Auth()
  .authenticate((request) => {
    const token = /^Bearer (.+)$/.exec(request.headers.get("authorization") ?? "")?.[1];
    const user = token === undefined ? undefined : DEMO_TOKENS.get(token);
    if (user === undefined) throw new HTTPException(401, { message: "a valid bearer token is required" });
    return { identity: user, permissions: [] };
  })
  .on("threads:create_run", async ({ value, user }) => {
    const turn = serverTurn(user.identity, value.kwargs);
    if (typeof turn === "string") throw new HTTPException(400, { message: turn });
    try {
      const receipt = await admitTurn({ store, input: turn, moderate });
      if (!receipt.allowed) throw new AdmissionError("denied", "this turn was denied by moderation");
    } catch (error) {
      if (!(error instanceof AdmissionError)) throw error;
      throw new HTTPException(ADMISSION_STATUS[error.code], { message: `${error.code}: ${error.message}` });
    }
    // In place: the server reads the run's `kwargs` object the handler was given.
    value.kwargs.context = turnContext(turn);
    // A thread this run creates is the caller's; an existing one must be (the filter).
    value.metadata = { ...value.metadata, owner: user.identity };
    return { owner: user.identity };
  })
  .on("threads:create", ({ value, user }) => {
    value.metadata = { ...value.metadata, owner: user.identity };
    return { owner: user.identity };
  })
  .on("threads", ({ user }) => ({ owner: user.identity }))
  // Assistants and the server's key-value store are not the end users' to change.
  .on(["assistants:create", "assistants:update", "assistants:delete", "store"], () => false);
