/**
 * A deliberately broken store module for test/processes/race-harness.test.ts: every process gets a
 * private in-memory store, so nothing is shared and every process acquires every claim.
 */
import { InMemoryGuardrailStore } from "arkah-agent-guardrails";

export const openStore = (): InMemoryGuardrailStore => new InMemoryGuardrailStore();
