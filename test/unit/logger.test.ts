import { describe, expect, it } from "vitest";
import {
  AdmissionError,
  ApprovalError,
  ConfigurationError,
  DigestError,
  RetryableToolError,
  SettlementError,
  StoreContractError,
  type GuardrailLogger,
} from "arkah-agent-guardrails";
import { resolveLogger, sanitizeError } from "../../src/logger.js";

const SECRET = "the argument value and the result";

describe("sanitizeError", () => {
  it("keeps this library's own messages, with their codes", () => {
    expect(sanitizeError(new AdmissionError("denied", "turn denied"))).toEqual({ name: "AdmissionError", code: "denied", message: "turn denied" });
    expect(sanitizeError(new ApprovalError("edit_rejected", "bad decision"))).toEqual({
      name: "ApprovalError",
      code: "edit_rejected",
      message: "bad decision",
    });
    expect(sanitizeError(new ConfigurationError("fix it"))).toEqual({ name: "ConfigurationError", message: "fix it" });
    expect(sanitizeError(new StoreContractError("invalid record"))).toEqual({ name: "StoreContractError", message: "invalid record" });
  });

  it("drops the message of errors whose text others write", () => {
    expect(sanitizeError(new Error(SECRET))).toEqual({ name: "Error" });
    expect(sanitizeError(new TypeError(SECRET))).toEqual({ name: "TypeError" });
    expect(sanitizeError(new RetryableToolError(SECRET))).toEqual({ name: "RetryableToolError" });
    expect(sanitizeError(new DigestError("$.secret", SECRET))).toEqual({ name: "DigestError", code: "unsupported_value" });
    class ToolInvocationError extends Error {}
    expect(sanitizeError(new ToolInvocationError(`with kwargs {"v":"${SECRET}"}`))).toEqual({ name: "ToolInvocationError" });
  });

  it("keeps short token codes (SQLSTATE, errno, driver codes) and nothing else of the error", () => {
    expect(sanitizeError(Object.assign(new Error(SECRET), { code: "23505", detail: SECRET }))).toEqual({ name: "Error", code: "23505" });
    expect(sanitizeError(Object.assign(new Error(SECRET), { code: "SQLITE_BUSY" }))).toEqual({ name: "Error", code: "SQLITE_BUSY" });
    expect(sanitizeError(Object.assign(new Error(SECRET), { code: 7 }))).toEqual({ name: "Error", code: "7" });
    expect(sanitizeError(Object.assign(new Error(SECRET), { code: SECRET }))).toEqual({ name: "Error" });
    expect(sanitizeError(Object.assign(new Error(SECRET), { name: SECRET }))).toEqual({ name: "Error" });
  });

  it("sanitizes the cause chain, a few levels deep", () => {
    const settlement = new SettlementError(
      { toolName: "rename", toolCallId: "w1", mutationKey: "k".repeat(64), outcome: "complete" },
      { cause: Object.assign(new Error(SECRET), { code: "22001" }) },
    );
    expect(sanitizeError(settlement)).toEqual({
      name: "SettlementError",
      message: settlement.message,
      cause: { name: "Error", code: "22001" },
    });
    let deep: Error = new Error(SECRET);
    for (let index = 0; index < 10; index++) deep = new Error(SECRET, { cause: deep });
    let depth = 0;
    for (let current: unknown = sanitizeError(deep); current !== undefined; current = (current as { cause?: unknown }).cause) depth++;
    expect(depth).toBe(5);
  });

  it("a thrown non-error is named by its type only", () => {
    expect(sanitizeError(SECRET)).toEqual({ name: "thrown string" });
    expect(sanitizeError(42)).toEqual({ name: "thrown number" });
    expect(sanitizeError(null)).toEqual({ name: "thrown null" });
    expect(sanitizeError(undefined)).toEqual({ name: "thrown undefined" });
    expect(sanitizeError({ message: SECRET })).toEqual({ name: "Error" });
  });

  it("names a DOMException by its name", () => {
    expect(sanitizeError(new DOMException(SECRET, "AbortError"))).toEqual({ name: "AbortError", code: "20" });
  });
});

describe("sanitizeError never throws, whatever a thrown value's getters do", () => {
  const boom = () => {
    throw new Error(SECRET);
  };
  const throwing = (keys: readonly string[], base: object = {}) =>
    Object.defineProperties(base, Object.fromEntries(keys.map((key) => [key, { get: boom, configurable: true }])));

  it("a getter that throws on name, message, code, cause or stack reads as absent", () => {
    expect(sanitizeError(throwing(["name"]))).toEqual({ name: "Error" });
    expect(sanitizeError(throwing(["stack", "name", "message", "code", "cause"], new TypeError(SECRET)))).toEqual({ name: "TypeError" });
    expect(sanitizeError(throwing(["name", "constructor"]))).toEqual({ name: "Error" });
    // This library's own error with a message getter that throws keeps its name and code.
    expect(sanitizeError(throwing(["message"], new AdmissionError("denied", "turn denied")))).toEqual({ name: "AdmissionError", code: "denied" });
    expect(sanitizeError(throwing(["cause"], new ConfigurationError("fix it")))).toEqual({ name: "ConfigurationError", message: "fix it" });
  });

  it("each field is read once: a getter that answers a token first and throws next is not asked twice", () => {
    let reads = 0;
    const flaky = Object.defineProperty(new Error(SECRET), "code", {
      get: () => {
        reads += 1;
        if (reads > 1) throw new Error(SECRET);
        return "E_ONCE";
      },
    });
    expect(sanitizeError(flaky)).toEqual({ name: "Error", code: "E_ONCE" });
    expect(reads).toBe(1);
  });

  it("a Proxy whose every trap throws, and a revoked Proxy, are unnamed errors", () => {
    const traps = { get: boom, getPrototypeOf: boom, has: boom, ownKeys: boom, getOwnPropertyDescriptor: boom };
    expect(sanitizeError(new Proxy(new Error(SECRET), traps))).toEqual({ name: "Error" });
    const { proxy, revoke } = Proxy.revocable(new Error(SECRET), {});
    revoke();
    expect(sanitizeError(proxy)).toEqual({ name: "Error" });
    expect(sanitizeError(Object.assign(new Error(SECRET), { cause: proxy }))).toEqual({ name: "Error", cause: { name: "Error" } });
  });

  it("a cause that is itself, or a cycle of two, ends after a few levels", () => {
    const self = new Error(SECRET);
    (self as { cause?: unknown }).cause = self;
    const one = { name: "One" } as { name: string; cause?: unknown };
    const two = { name: "Two", cause: one };
    one.cause = two;
    const depth = (logged: unknown) => {
      let count = 0;
      for (let current = logged; current !== undefined; current = (current as { cause?: unknown }).cause) count++;
      return count;
    };
    expect(depth(sanitizeError(self))).toBe(5);
    expect(sanitizeError(one)).toMatchObject({ name: "One", cause: { name: "Two", cause: { name: "One" } } });
  });

  it("Symbol.toPrimitive that throws is never called: on the value, on its code or on its name", () => {
    const hostile = { [Symbol.toPrimitive]: boom };
    expect(sanitizeError(hostile)).toEqual({ name: "Error" });
    expect(sanitizeError(Object.assign(new Error(SECRET), { code: hostile, name: hostile }))).toEqual({ name: "Error" });
  });

  it("a thrown function is named by its type", () => {
    expect(sanitizeError(throwing(["name"], () => undefined))).toEqual({ name: "thrown function" });
  });

  it("the error helpers' lookups (isInstance, find) answer no for such values instead of throwing", () => {
    const { proxy, revoke } = Proxy.revocable({}, {});
    revoke();
    expect(AdmissionError.isInstance(proxy)).toBe(false);
    expect(AdmissionError.find(throwing(["cause"], new Error(SECRET)))).toBeUndefined();
    expect(ApprovalError.find(Object.assign(new Error(SECRET), { cause: proxy }))).toBeUndefined();
  });
});

describe("resolveLogger", () => {
  function recording() {
    const entries: { message: string; fields: Readonly<Record<string, unknown>> }[] = [];
    const logger: GuardrailLogger = { warn: (message, fields) => entries.push({ message, fields }) };
    return { logger, entries };
  }

  it("passes primitives on, sanitizes errors under any key, and omits other objects", () => {
    const { logger, entries } = recording();
    resolveLogger(logger).warn("tool failed", {
      toolName: "note",
      attempts: 2,
      timedOut: false,
      nothing: null,
      absent: undefined,
      error: SECRET,
      cause: new Error(SECRET),
      args: { text: SECRET },
      list: [SECRET],
    });
    expect(entries).toEqual([
      {
        message: "tool failed",
        fields: {
          toolName: "note",
          attempts: 2,
          timedOut: false,
          nothing: null,
          absent: undefined,
          error: { name: "thrown string" },
          cause: { name: "Error" },
          args: "[omitted]",
          list: "[omitted]",
        },
      },
    ]);
  });

  it("defaults to console.warn, through the same wrapper", () => {
    const original = console.warn;
    const printed: unknown[][] = [];
    console.warn = (...args: unknown[]) => printed.push(args);
    try {
      resolveLogger(undefined).warn("tool failed", { error: new Error(SECRET) });
    } finally {
      console.warn = original;
    }
    expect(printed).toEqual([["[arkah-agent-guardrails] tool failed", { error: { name: "Error" } }]]);
  });

  it("never throws: not for a hostile field, nor when the host's logger throws", () => {
    const { proxy, revoke } = Proxy.revocable(new Error(SECRET), {});
    revoke();
    const { logger, entries } = recording();
    resolveLogger(logger).warn("scope threw", { error: proxy, cause: proxy });
    expect(entries).toEqual([{ message: "scope threw", fields: { error: { name: "Error" }, cause: "[omitted]" } }]);
    const failing: GuardrailLogger = {
      warn: () => {
        throw new Error(SECRET);
      },
    };
    expect(() => {
      resolveLogger(failing).warn("tool failed", { error: new Error(SECRET) });
    }).not.toThrow();
  });
});
