import { z } from "zod";
import { StoreContractError } from "../errors.js";

/**
 * Parses a value crossing the store boundary. Parsing also detaches: zod builds a new object, so
 * neither side keeps a reference into the other's state.
 */
export function parseStoreValue<T>(schema: z.ZodType<T>, value: unknown, what: string): T {
  const parsed = schema.safeParse(value);
  if (!parsed.success) {
    throw new StoreContractError(`invalid ${what}: ${z.prettifyError(parsed.error)}`);
  }
  return parsed.data;
}
