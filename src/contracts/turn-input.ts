/**
 * Turns: the trusted user turn a server issues, and its labelled segments.
 */
import { z } from "zod";

/**
 * Text a turn's keys are digested from: well-formed UTF-16. A lone surrogate has no UTF-8 form, so
 * no digest takes it (`DigestError`); refused here, it is the caller's invalid input instead.
 * (The ES2023 lib typings lack `isWellFormed`; Node 20 has it.)
 */
const TurnTextSchema = z
  .string()
  .refine((text) => (text as unknown as { isWellFormed(): boolean }).isWellFormed(), "must be well-formed text (no lone UTF-16 surrogate)");
const TurnIdSchema = TurnTextSchema.min(1, "must not be empty");

/** One labelled piece of the turn's input, moderated together with the others. */
export const SegmentSchema = z.strictObject({
  label: TurnIdSchema,
  /** Exact text; whitespace and empty content are significant. */
  content: TurnTextSchema,
});
/** A {@link SegmentSchema} value. */
export type Segment = z.infer<typeof SegmentSchema>;

/**
 * One trusted user turn, issued by the server. A fresh user request gets a fresh `turnId`; a
 * transport retry of the same request keeps it.
 */
export const TurnInputSchema = z
  .strictObject({
    /** The document, record or file the turn may edit. */
    scopeId: TurnIdSchema,
    turnId: TurnIdSchema,
    /** Bound into the admission receipt; not part of the turn key. */
    policyVersion: TurnIdSchema,
    segments: z.array(SegmentSchema).min(1, "a turn needs at least one segment"),
    /**
     * Who the user is, as your server authenticated them. Bound into the admission receipt, so a
     * turn admitted for one principal cannot run as another (`input_mismatch`); not part of the
     * turn key.
     */
    principal: TurnIdSchema.optional(),
  })
  .superRefine((input, ctx) => {
    const seen = new Set<string>();
    input.segments.forEach((segment, index) => {
      if (seen.has(segment.label)) {
        ctx.addIssue({
          code: "custom",
          path: ["segments", index, "label"],
          message: `duplicate segment label "${segment.label}"`,
        });
      }
      seen.add(segment.label);
    });
  });
/** A {@link TurnInputSchema} value: what `admitTurn` moderates and `turnContext` carries. */
export type TurnInput = z.infer<typeof TurnInputSchema>;

/** What identifies a turn: the turn key hashes exactly these two fields. */
export type TurnRef = Pick<TurnInput, "scopeId" | "turnId">;
