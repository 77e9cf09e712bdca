/**
 * `ChatAnthropic` (@langchain/anthropic) driving the guarded agent over Anthropic's Messages API,
 * served on loopback by test/providers/support/anthropic-wire.ts. The client gets a dummy key and
 * `maxRetries: 0` (retries belong to `modelRetryMiddleware` where a test adds it).
 */
import { ChatAnthropic } from "@langchain/anthropic";
import { describeProvider } from "./suite.js";
import { ANTHROPIC_CALL_ID, anthropicWire } from "./support/anthropic-wire.js";

describeProvider({
  wire: anthropicWire,
  callId: ANTHROPIC_CALL_ID,
  client: (server) =>
    new ChatAnthropic({
      model: "claude-sonnet-4-5",
      apiKey: "sk-ant-test-not-a-real-key",
      anthropicApiUrl: server.url,
      maxRetries: 0,
    }),
});
