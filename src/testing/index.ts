export { ScriptedModel, type ScriptStep, type ScriptedToolCall } from "./scripted-model.js";
