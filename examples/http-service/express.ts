/**
 * The same routes on Express 5 (which passes an async handler's rejection to the error handler):
 * `POST /turns`, `POST /approvals/:id`, `GET /turns/:turnKey`. Everything but the framework's
 * request and response objects is shared with hono.ts (http.ts, the turn service).
 */
import express, { type ErrorRequestHandler, type Response } from "express";
import type { Service } from "./agent.js";
import { turnHttpErrorReply, turnHttpReply } from "arkah-agent-guardrails";
import { decideRequest, readRequest, turnRequest, viewReply, type HttpReply } from "./http.js";

export function createExpressApp({ turns }: Pick<Service, "turns">): express.Express {
  const app = express();
  app.use(express.json());
  const send = (res: Response, reply: HttpReply) => res.status(reply.status).json(reply.body);
  const run = (work: () => Promise<HttpReply>) => work().catch(turnHttpErrorReply);

  app.post("/turns", async (req, res) => {
    const turn = turnRequest({ user: req.get("x-user"), idempotencyKey: req.get("idempotency-key"), body: req.body as unknown });
    if (!turn.ok) return send(res, turn.reply);
    send(res, await run(async () => turnHttpReply(await turns.submit({ turn: turn.value }))));
  });

  app.post("/approvals/:id", async (req, res) => {
    const decision = decideRequest({ user: req.get("x-user"), approvalId: req.params.id, body: req.body as unknown });
    if (!decision.ok) return send(res, decision.reply);
    send(res, await run(async () => turnHttpReply(await turns.decide(decision.value))));
  });

  app.get("/turns/:turnKey", async (req, res) => {
    const read = readRequest({ user: req.get("x-user"), turnKey: req.params.turnKey });
    if (!read.ok) return send(res, read.reply);
    const { user, turnKey } = read.value;
    send(res, await run(async () => viewReply(await turns.get(turnKey), user)));
  });

  // A body that is not JSON: 400 as any other invalid request, not Express's HTML page.
  const invalidJson: ErrorRequestHandler = (_error, _req, res, _next) => {
    send(res, { status: 400, body: { error: "invalid_request", issues: [{ path: "", message: "the body must be JSON" }] } });
  };
  app.use(invalidJson);
  return app;
}
