export {
  HOME_CONFIG_FILE,
  PROJECT_CONFIG_FILE,
  absoluteRootSchema,
  brokeredShellConfigSchema,
  cacheRootsConfigSchema,
  configJsonSchema,
  defaultConfig,
  fileBackupConfigSchema,
  fileSafetyConfigSchema,
  sandboxConfigSchema,
  sandboxRuntimeSchema,
  secretsConfigSchema,
  type BrokeredShellConfig,
  type BrokeredShellConfigInput,
  type SandboxRuntime,
} from './schema.js';
export {
  confineProjectRules,
  mergeProjectConfig,
  parsableProjectRules,
  projectConfigSchema,
  projectFileRules,
  projectRuleSchema,
  type ProjectConfig,
  type ProjectRule,
} from './project.js';
export { configError, loadConfig, loadHomeConfig, sessionConfigOf, type ConfigSource, type LoadConfigOptions, type LoadedConfig } from './load.js';
export { applyPolicyFile, policyFileSchema, readPolicyFile, type PolicyFile } from './policy-file.js';
