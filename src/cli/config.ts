import os from 'node:os';
import path from 'node:path';
import { loadConfig } from '../config/load.js';
import { PROJECT_CONFIG_FILE, configJsonSchema, type BrokeredShellConfig } from '../config/schema.js';
import { compileCacheRoots } from '../plugins/cache-roots/index.js';
import { networkDefaults } from '../plugins/network/index.js';
import { ExitCode } from './exit-codes.js';
import { printJson, type Io } from './output.js';
import { unreadableReport } from './unreadable-list.js';

/** `config schema`: the JSON Schema of `<home>/config.json`, on stdout. */
export async function schemaCommand(io: Io): Promise<number> {
  printJson(io, configJsonSchema());
  return ExitCode.OK;
}

/**
 * `config show`: the effective configuration for a workspace (defaults, home config,
 * project file) as JSON on stdout; which files were read, the cache roots and what a
 * command started now could not read go to stderr.
 */
export async function showCommand(io: Io, options: { workspace?: string }, env: NodeJS.ProcessEnv = process.env): Promise<number> {
  const loaded = await loadConfig({ workspace: path.resolve(options.workspace ?? process.cwd()), env });
  for (const [what, source] of Object.entries(loaded.sources)) {
    io.err(`brokered-shell: ${what} config ${source.file}${source.found ? '' : ' (not found)'}`);
  }
  io.err(`brokered-shell: ${PROJECT_CONFIG_FILE} itself is protected: changing it needs approval`);
  for (const line of cacheRootLines(loaded.config.cacheRoots, env)) io.err(`brokered-shell: ${line}`);
  for (const line of await unreadableReport(loaded.config, loaded.workspace, env)) io.err(`brokered-shell: ${line}`);
  for (const line of networkLines(loaded.config.network, loaded.workspace, env)) io.err(`brokered-shell: ${line}`);
  printJson(io, loaded.config);
  return ExitCode.OK;
}

/**
 * The effective cache roots, as a session started now would have them (the defaults
 * present on this machine, less `remove`, plus `add`), and what is kept out of them.
 */
function cacheRootLines(settings: BrokeredShellConfig['cacheRoots'], env: NodeJS.ProcessEnv): string[] {
  const set = compileCacheRoots(settings, { home: os.homedir(), env });
  if (set.roots.length === 0) return ['no cache roots (cacheRoots): every write outside the writable roots is judged as usual'];
  return [
    'cache roots, changed without a question or a backup (cacheRoots):',
    ...set.roots.map((root) => `  ${root.real} (${root.from === 'add' ? 'added' : root.from})`),
    ...(set.keptOut.length > 0 ? ['kept out of them:', ...set.keptOut.map((out) => `  ${out.real} (${out.why})`)] : []),
  ];
}

/** The network's mode and, under allowlist, the defaults a session started now would allow, with where each comes from. */
function networkLines(network: BrokeredShellConfig['network'], workspace: string, env: NodeJS.ProcessEnv): string[] {
  if (network.mode !== 'allowlist') return [`network.mode is ${network.mode}`];
  const defaults = networkDefaults({ env, userHome: env.HOME ?? os.homedir(), workspace });
  if (defaults.length === 0) return ['network allowed by default: nothing here (no tool, registry or git remote found)'];
  return ['network allowed by default (network.mode allowlist):', ...defaults.map((entry) => `  ${entry.rule} (${entry.from})`)];
}
