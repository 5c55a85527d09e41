export { FileSafetyPlugin, FILE_SAFETY_TAPS, PLUGIN_NAME } from './plugin.js';
export {
  fileSafetyOptionsSchema,
  fileSafetyRuleSchema,
  fileSafetyRulesSchema,
  parseFileSafetyOptions,
  refuseReadPrompts,
  ruleAccess,
  type FileSafetyOptions,
  type FileSafetyRule,
  type ParsedFileSafetyOptions,
} from './options.js';
export { compileFileSafety, type CompiledRule, type FileSafetyPolicy, type WritableRoot } from './policy.js';
export {
  evaluateFileSafety,
  evaluateMandatoryStage,
  evaluateRoots,
  evaluateRules,
  policyTargetFor,
  shadowedRules,
  VERDICT_SEVERITY,
  type ShadowedRule,
} from './evaluate.js';
export {
  buildProtections,
  GIT_PROTECTED_PATTERNS,
  GLOBAL_GIT_CONFIG,
  SHELL_STARTUP_FILES,
  type Protection,
} from './mandatory.js';
export { compilePattern, formsOf, isBeneath, isWithin, type PathMatcher, type PolicyTarget, type TargetForms } from './patterns.js';
export { HOME_CODE_PATHS, WORKSPACE_CODE_PATTERNS } from './code-paths.js';
