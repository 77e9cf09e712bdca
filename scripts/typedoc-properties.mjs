// TypeDoc plugin: every property of an exported interface or class is documented. TypeDoc's own
// `notDocumented` check cannot require that alone: with "Property" in `requiredToBeDocumented` it
// also demands a comment on every member of every zod-inferred object type (hundreds, unreachable
// by TSDoc). Inherited members are the base class's to document (ScriptedModel's come from LangChain).
import { Application, ReflectionKind } from "typedoc";

/** @param {Application} app */
export function load(app) {
  app.on(Application.EVENT_VALIDATE_PROJECT, (project) => {
    for (const reflection of project.getReflectionsByKind(ReflectionKind.Property)) {
      const parent = reflection.parent;
      if (parent === undefined || !parent.kindOf(ReflectionKind.Interface | ReflectionKind.Class)) continue;
      if (reflection.inheritedFrom !== undefined || reflection.hasComment()) continue;
      app.logger.warn(`${reflection.getFriendlyFullName()} (property) does not have any documentation`);
    }
  });
}
