import { z } from "zod";
import { StoreContractError } from "../errors.js";

/**
 * Parses a value crossing the store boundary, in either direction: what a caller hands a store,
 * and what a store (possibly a third-party adapter) answers. Parsing also detaches: zod builds a
 * new object, so neither side keeps a reference into the other's state.
 */
export const StoreBooleanSchema = z.boolean();

export function parseStoreValue<T>(schema: z.ZodType<T>, value: unknown, what: string): T {
  const parsed = schema.safeParse(value);
  if (!parsed.success) {
    throw new StoreContractError(`invalid ${what}: ${z.prettifyError(parsed.error)}`);
  }
  return parsed.data;
}
