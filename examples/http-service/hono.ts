/**
 * The routes on Hono: `POST /turns`, `POST /approvals/:id`, `GET /turns/:turnKey`. The turn
 * service does the rest (idempotency, approvals, who decides, resuming); http.ts parses requests
 * and maps answers to status codes. express.ts is the same service on Express.
 */
import { Hono, type Context } from "hono";
import type { Service } from "./agent.js";
import { turnHttpErrorReply, turnHttpReply } from "arkah-agent-guardrails";
import { decideRequest, readRequest, turnRequest, viewReply, type HttpReply } from "./http.js";

export function createHonoApp({ turns }: Pick<Service, "turns">): Hono {
  const app = new Hono();
  const send = (c: Context, reply: HttpReply) => c.json(reply.body, reply.status);
  const run = (work: () => Promise<HttpReply>) => work().catch(turnHttpErrorReply);

  app.post("/turns", async (c) => {
    const body: unknown = await c.req.json().catch(() => undefined);
    const turn = turnRequest({ user: c.req.header("x-user"), idempotencyKey: c.req.header("idempotency-key"), body });
    if (!turn.ok) return send(c, turn.reply);
    return send(c, await run(async () => turnHttpReply(await turns.submit({ turn: turn.value }))));
  });

  app.post("/approvals/:id", async (c) => {
    const body: unknown = await c.req.json().catch(() => undefined);
    const decision = decideRequest({ user: c.req.header("x-user"), approvalId: c.req.param("id"), body });
    if (!decision.ok) return send(c, decision.reply);
    return send(c, await run(async () => turnHttpReply(await turns.decide(decision.value))));
  });

  app.get("/turns/:turnKey", async (c) => {
    const read = readRequest({ user: c.req.header("x-user"), turnKey: c.req.param("turnKey") });
    if (!read.ok) return send(c, read.reply);
    const { user, turnKey } = read.value;
    return send(c, await run(async () => viewReply(await turns.get(turnKey), user)));
  });

  return app;
}
