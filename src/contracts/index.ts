/**
 * The zod schemas and types shared by everything: turn input, tool policies, store records and the
 * refusal codes. Everything that crosses a trust boundary is parsed with one of these. One file a
 * record family; this barrel is what the rest of the package imports.
 */
export { DigestSchema, JsonValueSchema, type JsonValue } from "./primitives.js";
export * from "./turn-input.js";
export * from "./policy.js";
export * from "./audit.js";
export * from "./claims.js";
export * from "./effects.js";
export * from "./approvals.js";
export * from "./reconciliation.js";
export * from "./turn-records.js";
export * from "./store.js";
export * from "./refusals.js";
