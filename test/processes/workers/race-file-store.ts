/** The store module test/processes/race-harness.test.ts hands `raceGuardrailStore`: the example file store on one shared directory. */
import { FileGuardrailStore } from "../../../examples/file-store/store.js";

export default function openStore(options: { directory: string }): Promise<FileGuardrailStore> {
  return FileGuardrailStore.open({ directory: options.directory, lockTimeoutMs: 120_000 });
}
