import { MiddlewareError } from "langchain";
import { describe, expect, it } from "vitest";
import {
  AdmissionError,
  ApprovalError,
  ConfigurationError,
  digest,
  DigestError,
  GuardrailsError,
  NoEffectError,
  RetryableToolError,
  SealError,
  SettlementError,
  StoreContractError,
} from "arkah-agent-guardrails";
import { PostgresStoreError } from "arkah-agent-guardrails/postgres";
import { SqliteStoreError } from "arkah-agent-guardrails/sqlite";
import { TurnServiceError } from "../../src/turns/errors.js";

const BRAND = Symbol.for("arkah-agent-guardrails.error");

interface BrandedClass {
  readonly name: string;
  readonly make: () => Error;
  readonly isInstance: (error: unknown) => boolean;
}

const CLASSES: BrandedClass[] = [
  { name: "AdmissionError", make: () => new AdmissionError("denied", "no"), isInstance: (e) => AdmissionError.isInstance(e) },
  { name: "ConfigurationError", make: () => new ConfigurationError("fix it"), isInstance: (e) => ConfigurationError.isInstance(e) },
  { name: "StoreContractError", make: () => new StoreContractError("bad"), isInstance: (e) => StoreContractError.isInstance(e) },
  { name: "RetryableToolError", make: () => new RetryableToolError("again"), isInstance: (e) => RetryableToolError.isInstance(e) },
  { name: "DigestError", make: () => new DigestError("$.x", "nope"), isInstance: (e) => DigestError.isInstance(e) },
];

/** What an error thrown by a second copy of the package (ESM beside CJS) looks like to this one. */
function fromOtherCopy(name: string): Error {
  return Object.assign(new Error("from the other copy"), { [BRAND]: name });
}

describe.each(CLASSES)("$name", ({ name, make, isInstance }) => {
  it("recognises its own instances and sets the name", () => {
    const error = make();
    expect(error).toBeInstanceOf(Error);
    expect(error.name).toBe(name);
    expect(isInstance(error)).toBe(true);
  });

  it("recognises an error branded by a second copy of the package", () => {
    const foreign = fromOtherCopy(name);
    expect(foreign).not.toBeInstanceOf(AdmissionError);
    expect(isInstance(foreign)).toBe(true);
  });

  it("recognises a branded plain object (no Error prototype)", () => {
    expect(isInstance({ [BRAND]: name })).toBe(true);
  });

  it("rejects every other brand", () => {
    for (const other of CLASSES) {
      if (other.name === name) continue;
      expect(isInstance(other.make())).toBe(false);
      expect(isInstance(fromOtherCopy(other.name))).toBe(false);
    }
    expect(isInstance(fromOtherCopy(name.toLowerCase()))).toBe(false);
  });

  it("rejects errors and values without the brand", () => {
    for (const value of [new Error(name), Object.assign(new Error(), { name }), { name }, name, null, undefined, 0]) {
      expect(isInstance(value)).toBe(false);
    }
    // The brand lives under the registered symbol, not under a string key or a local symbol.
    expect(isInstance({ "arkah-agent-guardrails.error": name })).toBe(false);
    expect(isInstance({ [Symbol("arkah-agent-guardrails.error")]: name })).toBe(false);
  });

  it("keeps the brand non-enumerable and read-only", () => {
    const error = make();
    const descriptor = Object.getOwnPropertyDescriptor(error, BRAND);
    expect(descriptor).toMatchObject({ value: name, enumerable: false, writable: false });
    const copy: Record<symbol, unknown> = {};
    Object.assign(copy, error);
    expect(copy[BRAND]).toBeUndefined();
  });
});

describe("AdmissionError", () => {
  it("sets code, message and cause", () => {
    const cause = new Error("provider down");
    const error = new AdmissionError("moderation_failed", "the provider failed", { cause });
    expect(error.code).toBe("moderation_failed");
    expect(error.message).toBe("the provider failed");
    expect(error.cause).toBe(cause);
  });

  it("has no cause unless given one", () => {
    expect(new AdmissionError("not_admitted", "x").cause).toBeUndefined();
  });

  describe("find", () => {
    const admission = new AdmissionError("denied", "denied by moderation");

    it("returns the error itself", () => {
      expect(AdmissionError.find(admission)).toBe(admission);
    });

    it("walks a cause chain", () => {
      const wrapped = new Error("x", { cause: admission });
      expect(AdmissionError.find(wrapped)).toBe(admission);
      const deeper = new Error("outer", { cause: new Error("middle", { cause: wrapped }) });
      expect(AdmissionError.find(deeper)).toBe(admission);
    });

    it("finds the error inside LangChain's real MiddlewareError", () => {
      const wrapped = MiddlewareError.wrap(admission, "documentGuardrails");
      expect(wrapped).not.toBe(admission);
      expect(AdmissionError.isInstance(wrapped)).toBe(false);
      expect(AdmissionError.find(wrapped)).toBe(admission);
    });

    it("finds an AdmissionError branded by another copy of the package", () => {
      const foreign = fromOtherCopy("AdmissionError");
      expect(AdmissionError.find(new Error("x", { cause: foreign }))).toBe(foreign);
    });

    it("returns the nearest AdmissionError in the chain", () => {
      const inner = new AdmissionError("not_admitted", "inner");
      const outer = new AdmissionError("invalid_input", "outer", { cause: new Error("m", { cause: inner }) });
      expect(AdmissionError.find(outer)).toBe(outer);
    });

    it("returns undefined when no AdmissionError is in the chain", () => {
      expect(AdmissionError.find(new Error("x"))).toBeUndefined();
      expect(AdmissionError.find(new Error("x", { cause: new StoreContractError("s") }))).toBeUndefined();
      expect(AdmissionError.find(new ConfigurationError("c", { cause: new Error("y") }))).toBeUndefined();
      expect(AdmissionError.find(undefined)).toBeUndefined();
      expect(AdmissionError.find(null)).toBeUndefined();
      expect(AdmissionError.find("AdmissionError")).toBeUndefined();
    });

    it("terminates on a cyclic cause chain", () => {
      const a = new Error("a");
      const b = new Error("b", { cause: a });
      (a as { cause?: unknown }).cause = b;
      expect(AdmissionError.find(a)).toBeUndefined();
    });
  });
});

describe("ConfigurationError and StoreContractError", () => {
  it("keep message and cause", () => {
    const cause = new Error("root");
    const config = new ConfigurationError("pass a store", { cause });
    const store = new StoreContractError("invalid receipt", { cause });
    expect([config.message, config.cause]).toEqual(["pass a store", cause]);
    expect([store.message, store.cause]).toEqual(["invalid receipt", cause]);
  });
});

describe("RetryableToolError", () => {
  it("keeps retryAfterMs", () => {
    expect(new RetryableToolError("slow down", { retryAfterMs: 1500 }).retryAfterMs).toBe(1500);
    expect(new RetryableToolError("slow down", { retryAfterMs: 0 }).retryAfterMs).toBe(0);
  });

  it("leaves retryAfterMs undefined by default", () => {
    expect(new RetryableToolError("again").retryAfterMs).toBeUndefined();
    expect(new RetryableToolError("again", {}).retryAfterMs).toBeUndefined();
  });

  it("keeps a cause only when one is given", () => {
    const cause = new Error("503");
    const withCause = new RetryableToolError("again", { cause, retryAfterMs: 10 });
    expect(withCause.cause).toBe(cause);
    expect(withCause.message).toBe("again");
    const without = new RetryableToolError("again", { retryAfterMs: 10 });
    expect("cause" in without).toBe(false);
  });
});

describe("DigestError", () => {
  it("sets code and path", () => {
    const error = new DigestError("$.items[2]", "undefined is not a JSON value");
    expect(error.code).toBe("unsupported_value");
    expect(error.path).toBe("$.items[2]");
    expect(error.message).toContain("$.items[2]");
  });

  it("is what digest throws for a non-JSON value", () => {
    let caught: unknown;
    try {
      digest({ items: [1, 2, Number.NaN] });
    } catch (error) {
      caught = error;
    }
    expect(DigestError.isInstance(caught)).toBe(true);
    expect((caught as DigestError).path).toBe("$.items[2]");
  });
});

describe("GuardrailsError, the one base", () => {
  const ours: Error[] = [
    new AdmissionError("denied", "no"),
    new ApprovalError("edit_rejected", "no"),
    new ConfigurationError("fix it"),
    new StoreContractError("bad"),
    new SettlementError({ toolName: "t", toolCallId: "c", mutationKey: "k", outcome: "unknown" }, { cause: new Error("db") }),
    new SealError("tool_swapped", { toolName: "t", toolCallId: "c" }),
    new RetryableToolError("again"),
    new NoEffectError("nothing written"),
    new DigestError("$", "nope"),
    new TurnServiceError("invalid_input", "bad turn"),
    new SqliteStoreError("claimMutation", "locked", { cause: new Error("busy"), code: "SQLITE_BUSY" }),
    new PostgresStoreError("claimMutation", "down", { cause: new Error("refused"), code: "ECONNREFUSED" }),
  ];

  it("recognises every error of the package, and only those", () => {
    for (const error of ours) {
      expect(error, error.name).toBeInstanceOf(GuardrailsError);
      expect(GuardrailsError.isInstance(error), error.name).toBe(true);
      expect(GuardrailsError.isInstance(fromOtherCopy(error.name)), error.name).toBe(true);
    }
    for (const value of [new Error("x"), { name: "AdmissionError" }, null, undefined, "ConfigurationError"]) {
      expect(GuardrailsError.isInstance(value)).toBe(false);
    }
  });

  it("finds the nearest error of the package in a cause chain", () => {
    const inner = new ConfigurationError("inner");
    const wrapped = MiddlewareError.wrap(new Error("plain", { cause: inner }), "documentGuardrails");
    expect(GuardrailsError.find(wrapped)).toBe(inner);
    expect(GuardrailsError.find(new Error("x"))).toBeUndefined();
  });

  it("gives every subclass isInstance and find for its own brand", () => {
    const sealed = new SealError("body_called", { toolName: "t", toolCallId: "c" });
    const chain = new Error("outer", { cause: new Error("mid", { cause: sealed }) });
    expect(SealError.find(chain)).toBe(sealed);
    expect(ConfigurationError.find(chain)).toBeUndefined();
    expect(NoEffectError.find(new Error("x", { cause: new NoEffectError("n") }))?.message).toBe("n");
    expect(TurnServiceError.isInstance(new AdmissionError("denied", "no"))).toBe(false);
  });

  it("gives the coded errors one shape: code, message, cause", () => {
    const cause = new Error("root");
    for (const error of [
      new AdmissionError("denied", "m", { cause }),
      new ApprovalError("edit_rejected", "m", { cause }),
      new TurnServiceError("invalid_input", "m", { cause }),
    ]) {
      expect([error.code.length > 0, error.message, error.cause], error.name).toEqual([true, "m", cause]);
    }
  });

  it("gives the two database errors one shape: operation, code, cause", () => {
    const cause = new Error("driver");
    const sqlite = new SqliteStoreError("settleMutation", "m", { cause, code: "SQLITE_FULL" });
    const postgres = new PostgresStoreError("settleMutation", "m", { cause, code: "57P01" });
    expect([sqlite.operation, sqlite.code, sqlite.cause]).toEqual(["settleMutation", "SQLITE_FULL", cause]);
    expect([postgres.operation, postgres.code, postgres.cause]).toEqual(["settleMutation", "57P01", cause]);
    expect(SqliteStoreError.isInstance(postgres)).toBe(false);
    expect(PostgresStoreError.isInstance(sqlite)).toBe(false);
  });
});
