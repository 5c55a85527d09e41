import os from 'node:os';
import path from 'node:path';
import { resolveHome } from '../backup/layout.js';
import type { BrokeredShellConfig } from '../config/schema.js';
import { printable } from '../core/printable.js';
import { compileReadPolicy, unreadableNow, type UnreadablePath } from '../plugins/read-policy/index.js';

/**
 * What a command started now in `workspace` could not read under `config` (the store,
 * the secret list, the rules that deny read), as `run` would tell the launcher.
 */
export async function unreadableFor(config: BrokeredShellConfig, workspace: string, env: NodeJS.ProcessEnv): Promise<UnreadablePath[]> {
  const policy = compileReadPolicy({
    store: resolveHome(env),
    secrets: config.secrets,
    rules: config.fileSafety.rules,
    roots: [workspace, ...config.writableRoots.map((root) => path.resolve(workspace, root))],
    home: os.homedir(),
    env,
  });
  return unreadableNow(policy);
}

/** `unreadableLines` of what a command started now could not read, or the line saying why no command could start. */
export async function unreadableReport(config: BrokeredShellConfig, workspace: string, env: NodeJS.ProcessEnv): Promise<string[]> {
  try {
    return unreadableLines(rowsOf(await unreadableFor(config, workspace, env)));
  } catch (error) {
    return [printable(`the read policy cannot be applied, so no command would start: ${error instanceof Error ? error.message : String(error)}`)];
  }
}

/** A path as `doctor --json` reports it. */
export interface UnreadableRow {
  path: string;
  /** What denies it. */
  by: string;
  /** The path it is under another mount. */
  aliasOf?: string;
  /** Its other hard links, which stay readable. */
  otherLinks?: number;
}

export function rowsOf(unreadable: readonly UnreadablePath[]): UnreadableRow[] {
  return unreadable.map((entry) => ({
    path: entry.path,
    by: entry.denial.by,
    ...(entry.aliasOf === undefined ? {} : { aliasOf: entry.aliasOf }),
    ...(entry.otherLinks === undefined ? {} : { otherLinks: entry.otherLinks }),
  }));
}

/** One line per path, with what denies it and what about it the policy cannot cover. */
export function unreadableLines(unreadable: readonly UnreadableRow[]): string[] {
  if (unreadable.length === 0) return ['nothing is kept from commands\' reads'];
  return [
    'unreadable to commands (the read policy: the store, secrets, fileSafety rules that deny read):',
    ...unreadable.map((entry) => {
      const notes = [
        entry.aliasOf === undefined ? undefined : `the same as ${entry.aliasOf}, under another mount`,
        entry.otherLinks === undefined ? undefined : `${entry.otherLinks} other hard link${entry.otherLinks === 1 ? '' : 's'}, elsewhere, stay readable`,
      ].filter((note) => note !== undefined);
      return printable(`  ${entry.path} (${entry.by})${notes.length > 0 ? `; ${notes.join('; ')}` : ''}`);
    }),
  ];
}
