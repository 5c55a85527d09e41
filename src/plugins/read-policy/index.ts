export { ReadPolicyPlugin, PLUGIN_NAME, type ReadLaunch, type RuleDenies } from './plugin.js';
export {
  readPolicyOptionsSchema,
  secretPathSchema,
  secretRemovalSchema,
  secretsSettingsSchema,
  type ParsedReadPolicyOptions,
  type ReadPolicyOptions,
  type SecretsSettings,
  type SecretsSettingsInput,
} from './options.js';
export { compileReadPolicy, deniesRead, entryDenies, type ReadDenial, type ReadPolicy, type ReadRule, type SecretEntry } from './policy.js';
export { SECRET_DEFAULTS, SECRET_DEFAULT_NAMES, SSH_KEEP, type SecretDefault, type SecretLocation } from './secrets.js';
export { READ_WALK_LIMIT, unreadableNow, type UnreadablePath } from './unreadable.js';
export { HELD_WALK_LIMIT, heldDenial, type HeldDenial } from './held-inside.js';
export { mountAliases, parseMountInfo, type MountAlias } from './mount-aliases.js';
export { npmUserConfigCopy, withoutCredentials } from './npm-userconfig.js';
export { namedUnreadable, unreadableHint } from './hint.js';
