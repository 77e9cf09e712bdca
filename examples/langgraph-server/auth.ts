/**
 * The server's custom auth (`langgraph.json`'s `auth.path`). LangGraph Server calls `authenticate`
 * for every request, and the `threads:create_run` handler for every run it creates, whatever the
 * endpoint (`runs.wait`, `runs.stream`, `runs.create`, stateless runs). So the server, not the
 * client, builds each run's turn: `authenticate` names the principal; `serverTurn` (turns.ts) builds
 * the turn from it and the run; a new turn is admitted (`admitTurn`, moderation once per turn: a
 * retry finds the receipt), a resume's must be admitted already (`assertAdmitted`); and the run's
 * `context` becomes `turnContext(turn)`. A client-sent turn never reaches the graph: a `context`
 * with anything but the request's fields is refused.
 *
 * Threads are their creator's (`metadata.owner`): nobody runs or resumes a turn on another user's
 * thread. `langgraph.json` sets `disable_studio_auth`: without it, any request with the header
 * `x-auth-scheme: langsmith` is let in as the Studio user, without `authenticate`.
 */
import { Auth, HTTPException } from "@langchain/langgraph-sdk/auth";
import { AdmissionError, admitTurn, assertAdmitted, turnContext, type AdmissionErrorCode } from "arkah-agent-guardrails";
import { store } from "./service.js";
import { moderate, serverTurn } from "./turns.js";

/** Stand-in for your identity provider: bearer token -> user id. */
const DEMO_TOKENS: ReadonlyMap<string, string> = new Map([
  ["alice-token", "alice"],
  ["mallory-token", "mallory"],
]);

/** The HTTP status an admission failure answers. */
const ADMISSION_STATUS: Record<AdmissionErrorCode, number> = {
  invalid_input: 400,
  not_admitted: 403,
  denied: 403,
  input_mismatch: 409,
  transcript_mismatch: 409,
  moderation_failed: 503,
};

/** The server's auth: `langgraph.json` names it (`"auth": { "path": "./auth.ts:auth" }`). */
export const auth = new Auth()
  .authenticate((request) => {
    const token = /^Bearer (.+)$/.exec(request.headers.get("authorization") ?? "")?.[1];
    const user = token === undefined ? undefined : DEMO_TOKENS.get(token);
    if (user === undefined) throw new HTTPException(401, { message: "a valid bearer token is required" });
    return { identity: user, permissions: [] };
  })
  .on("threads:create_run", async ({ value, user }) => {
    const run = serverTurn(user.identity, value.kwargs);
    if (typeof run === "string") throw new HTTPException(400, { message: run });
    const { turn, resume } = run;
    try {
      // A resume never admits: its turn was admitted by the run that paused (and is this user's).
      if (resume) await assertAdmitted({ store, input: turn });
      else if (!(await admitTurn({ store, input: turn, moderate })).allowed) throw new AdmissionError("denied", "this turn was denied by moderation");
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
