/**
 * The primitives every record is built from: a digest, an identifier, a timestamp, a JSON value.
 */
import { z } from "zod";

/** A lowercase hex SHA-256, as produced by `digest`. */
export const DigestSchema = z.string().regex(/^[0-9a-f]{64}$/, "expected a lowercase hex SHA-256");

/** A non-empty identifier: a scope, a tool call, a tool, a lease token. */
export const IdSchema = z.string().min(1, "must not be empty");

/** An ISO 8601 timestamp with an offset, as every record stores its times. */
export const TimestampSchema = z.iso.datetime({ offset: true });

/** A JSON value, as stored: what a verdict's detections, an edited approval and an audit event's values may hold. */
export const JsonValueSchema = z.json();
/** A {@link JsonValueSchema} value. */
export type JsonValue = z.infer<typeof JsonValueSchema>;
