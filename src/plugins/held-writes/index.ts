export { HeldWritesPlugin, PLUGIN_NAME, type HeldWritesOptions } from './plugin.js';
export { heldWritableFiles, type HeldFile } from './held-files.js';
