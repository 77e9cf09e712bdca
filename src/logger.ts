/** Receives warnings about failed tools, checks and settlements. Never given tool results. */
export interface GuardrailLogger {
  warn(message: string, fields: Readonly<Record<string, unknown>>): void;
}

export const consoleLogger: GuardrailLogger = {
  warn: (message, fields) => {
    console.warn(`[arkah-agent-guardrails] ${message}`, fields);
  },
};

export function isLogger(value: unknown): value is GuardrailLogger {
  return typeof value === "object" && value !== null && typeof (value as { warn?: unknown }).warn === "function";
}
