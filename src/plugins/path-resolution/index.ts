export { PathResolutionPlugin, PLUGIN_NAME, resolveTarget, type ResolveContext } from './plugin.js';
export { pathResolutionOptionsSchema, type PathResolutionOptions, type ParsedPathResolutionOptions } from './options.js';
export {
  kindOf,
  lexicalPath,
  refuseProcSelf,
  resolveExisting,
  resolveExistingOrCreatable,
  resolveThroughParent,
  resolveWith,
} from './resolve.js';
export { expandHome, normaliseForRuleMatch, type RuleFormOptions } from './rule-form.js';
export { STRATEGY_TABLE, strategyFor, type ResolveStrategy, type StrategyRow } from './strategies.js';
