/**
 * `ChatOpenAI` (@langchain/openai) driving the guarded agent over OpenAI's Chat Completions API,
 * served on loopback by test/providers/support/openai-wire.ts. The client gets a dummy key and
 * `maxRetries: 0` (retries belong to `modelRetryMiddleware` where a test adds it), and no
 * `streaming: true`: with it, `ChatOpenAI` estimates token usage with a tokenizer it downloads at run
 * time; streaming goes through `agent.stream` instead, which streams from the same client.
 */
import { ChatOpenAI } from "@langchain/openai";
import { describeProvider } from "./suite.js";
import { OPENAI_CALL_ID, openAIWire } from "./support/openai-wire.js";

describeProvider({
  wire: openAIWire,
  callId: OPENAI_CALL_ID,
  client: (server) =>
    new ChatOpenAI({
      model: "gpt-4o-mini",
      apiKey: "sk-test-not-a-real-key",
      configuration: { baseURL: `${server.url}/v1` },
      maxRetries: 0,
    }),
});
