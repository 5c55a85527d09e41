import path from 'node:path';
import { loadConfig } from '../config/load.js';
import { PROJECT_CONFIG_FILE, configJsonSchema } from '../config/schema.js';
import { ExitCode } from './exit-codes.js';
import { printJson, type Io } from './output.js';

/** `config schema`: the JSON Schema of `<home>/config.json`, on stdout. */
export async function schemaCommand(io: Io): Promise<number> {
  printJson(io, configJsonSchema());
  return ExitCode.OK;
}

/**
 * `config show`: the effective configuration for a workspace (defaults, home config,
 * project file) as JSON on stdout; which files were read goes to stderr.
 */
export async function showCommand(io: Io, options: { workspace?: string }, env: NodeJS.ProcessEnv = process.env): Promise<number> {
  const loaded = await loadConfig({ workspace: path.resolve(options.workspace ?? process.cwd()), env });
  for (const [what, source] of Object.entries(loaded.sources)) {
    io.err(`brokered-shell: ${what} config ${source.file}${source.found ? '' : ' (not found)'}`);
  }
  io.err(`brokered-shell: ${PROJECT_CONFIG_FILE} itself is protected: changing it needs approval`);
  printJson(io, loaded.config);
  return ExitCode.OK;
}
