// TypeDoc plugin: "Defined in" names this package's sources only. A member inherited from a type
// outside the package (Error's `message` and `stack` from TypeScript's lib files, ScriptedModel's
// from @langchain/core) would otherwise be "defined in" a file under node_modules/.pnpm, a path
// that exists in no clone and no tarball; its "Inherited from" line already says where it comes from.
// TypeDoc 0.28 has no option for this: `disableSources` drops every source, `excludeExternals`
// drops external declarations, not the inherited members of the package's own classes.
import { Converter, DeclarationReflection, SignatureReflection } from "typedoc";

/** @param {import("typedoc").Application} app */
export function load(app) {
  // After TypeDoc's own source plugin (priority 0) has resolved every source's path.
  app.converter.on(
    Converter.EVENT_RESOLVE_BEGIN,
    (context) => {
      for (const reflection of Object.values(context.project.reflections)) {
        if (!(reflection instanceof DeclarationReflection || reflection instanceof SignatureReflection)) continue;
        if (reflection.sources === undefined) continue;
        const own = reflection.sources.filter((source) => !/[\\/]node_modules[\\/]/.test(source.fullFileName));
        reflection.sources = own.length === 0 ? undefined : own;
      }
    },
    -100,
  );
}
