export { CACHE_ROOTS_STAGE, CacheRootsPlugin, KEPT_OUT_REMEDY, PLUGIN_NAME } from './plugin.js';
export {
  cacheRootPathSchema,
  cacheRootRemovalSchema,
  cacheRootsOptionsSchema,
  cacheRootsSettingsSchema,
  type CacheRootsOptions,
  type CacheRootsSettings,
  type CacheRootsSettingsInput,
} from './options.js';
export { CACHE_ROOT_DEFAULTS, CACHE_ROOT_DEFAULT_NAMES, presentDefaults, type CacheRootDefault, type CacheRootLocation } from './defaults.js';
export { compileCacheRoots, expandHome, type CacheRoot, type CacheRootPlace, type CacheRootSet, type KeptOut } from './roots.js';
