import path from 'node:path';
import { loadConfig, sessionConfigOf } from '../config/load.js';
import { applyPolicyFile, readPolicyFile } from '../config/policy-file.js';
import type { BrokeredShellConfig } from '../config/schema.js';

/**
 * What `run` and `serve` enforce in a workspace: the defaults, the home config, the
 * project's `.brokered-shell.json` (which may only narrow) with its own protection, then
 * `--policy FILE` on top (given on the command line, so trusted like the home config).
 */
export async function effectiveConfig(workspace: string, policyFile: string | undefined, env: NodeJS.ProcessEnv): Promise<BrokeredShellConfig> {
  const config = sessionConfigOf(await loadConfig({ workspace, env }));
  if (policyFile === undefined) return config;
  return applyPolicyFile(config, await readPolicyFile(path.resolve(policyFile), workspace));
}
