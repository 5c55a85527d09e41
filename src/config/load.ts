import { readFile, realpath } from 'node:fs/promises';
import path from 'node:path';
import type { z } from 'zod';
import { resolveHome } from '../backup/layout.js';
import { BrokerError, ErrorCodes, errnoOf, issueLines } from '../core/index.js';
import type { FileSafetyRule } from '../plugins/file-safety/options.js';
import { confineProjectRules, mergeProjectConfig, normalWorkspace, parsableProjectRules, projectConfigSchema, projectFileRules } from './project.js';
import { HOME_CONFIG_FILE, PROJECT_CONFIG_FILE, brokeredShellConfigSchema, type BrokeredShellConfig } from './schema.js';

/**
 * Where the configuration comes from, in order:
 *
 * 1. the defaults of the schema (schema.ts): sandbox on, backups on, no extra roots;
 * 2. `<home>/config.json`, home = `$BROKERED_SHELL_HOME` or `~/.brokered-shell`: the
 *    user's own file, which may set everything (its writable roots must be absolute);
 * 3. `<workspace>/.brokered-shell.json`: the project's file, which may only narrow what
 *    the first two give (project.ts says exactly how, and why).
 *
 * A missing file counts as `{}`. Anything wrong in either file is one INVALID_OPTIONS
 * error naming each file and each bad key; nothing is loaded half.
 */

export interface LoadConfigOptions {
  /** The project directory; its `.brokered-shell.json` may narrow the home config. */
  workspace: string;
  /** Store root holding `config.json`; default `resolveHome(env)`. */
  home?: string;
  env?: NodeJS.ProcessEnv;
}

export interface ConfigSource {
  readonly file: string;
  readonly found: boolean;
}

export interface LoadedConfig {
  /** The effective configuration: what a session is given. */
  readonly config: BrokeredShellConfig;
  /**
   * Rules to add to `config.fileSafety.rules` when building file-safety, always: they
   * keep the project file itself from being changed by the commands it restricts.
   */
  readonly protectionRules: FileSafetyRule[];
  readonly sources: { readonly home: ConfigSource; readonly project: ConfigSource };
  /** The workspace as a real path (as given when it does not exist). */
  readonly workspace: string;
}

/** A config file never needs to be large; a bigger one is refused unread. */
const MAX_CONFIG_BYTES = 1024 * 1024;

/** `key: message` lines, per file, gathered until the end so one error names them all. */
type Problems = Map<string, string[]>;

/** Read one file as JSON; a missing file reads as `{}`. Problems go to `problems` (value `undefined`). */
async function readJson(file: string, problems: Problems): Promise<{ found: boolean; value: unknown }> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    // ENOTDIR: a directory above it is a file, so there is no such file either (a home
    // that is not a directory is the backup store's problem, reported as such).
    const code = errnoOf(error);
    if (code === 'ENOENT' || code === 'ENOTDIR') return { found: false, value: {} };
    problems.set(file, [`cannot be read: ${(error as Error).message}`]);
    return { found: true, value: undefined };
  }
  if (Buffer.byteLength(text) > MAX_CONFIG_BYTES) {
    problems.set(file, [`is larger than ${MAX_CONFIG_BYTES} bytes`]);
    return { found: true, value: undefined };
  }
  try {
    return { found: true, value: JSON.parse(text) as unknown };
  } catch (error) {
    problems.set(file, [`is not valid JSON: ${(error as Error).message}`]);
    return { found: true, value: undefined };
  }
}

function parseWith<S extends z.ZodType>(schema: S, file: string, value: unknown, problems: Problems): z.infer<S> | undefined {
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  problems.set(file, issueLines(parsed.error, '(top level)'));
  return undefined;
}

/** One friendly multi-line message: each file, then each bad key in it. */
export function configError(problems: ReadonlyMap<string, readonly string[]>, hint?: string): BrokerError {
  const lines = ['invalid brokered-shell configuration:'];
  for (const [file, keys] of problems) {
    lines.push(`  ${file}:`);
    for (const key of keys) lines.push(`    - ${key}`);
  }
  if (hint) lines.push(hint);
  return new BrokerError(ErrorCodes.INVALID_OPTIONS, lines.join('\n'), {
    details: { problems: Object.fromEntries([...problems].map(([file, keys]) => [file, [...keys]])) },
  });
}

const NARROW_HINT = `(${PROJECT_CONFIG_FILE} may only narrow the home configuration: add deny or prompt rules, turn the sandbox or backups on, choose "deny"; everything else belongs in <home>/${HOME_CONFIG_FILE})`;

/** The home config alone (defaults when the file is missing). */
export async function loadHomeConfig(options: { home?: string; env?: NodeJS.ProcessEnv } = {}): Promise<{ config: BrokeredShellConfig; source: ConfigSource }> {
  const file = path.join(options.home ?? resolveHome(options.env), HOME_CONFIG_FILE);
  const problems: Problems = new Map();
  const read = await readJson(file, problems);
  const config = problems.size === 0 ? parseWith(brokeredShellConfigSchema, file, read.value, problems) : undefined;
  if (!config) throw configError(problems);
  return { config, source: { file, found: read.found } };
}

/** The effective configuration for a workspace: defaults, home config, project file. */
export async function loadConfig(options: LoadConfigOptions): Promise<LoadedConfig> {
  const given = normalWorkspace(options.workspace);
  const real = await realpath(given).catch(() => given);
  const homeFile = path.join(options.home ?? resolveHome(options.env), HOME_CONFIG_FILE);
  const projectFile = path.join(real, PROJECT_CONFIG_FILE);
  const problems: Problems = new Map();

  const homeRead = await readJson(homeFile, problems);
  const home = problems.has(homeFile) ? undefined : parseWith(brokeredShellConfigSchema, homeFile, homeRead.value, problems);
  const projectRead = await readJson(projectFile, problems);
  const project = problems.has(projectFile) ? undefined : parseWith(projectConfigSchema, projectFile, projectRead.value, problems);
  const confined = confineProjectRules(project?.fileSafety?.rules ?? parsableProjectRules(projectRead.value), [given, real]);
  if (confined.problems.length > 0) problems.set(projectFile, [...(problems.get(projectFile) ?? []), ...confined.problems]);

  if (problems.size > 0 || !home || !project) throw configError(problems, problems.has(projectFile) ? NARROW_HINT : undefined);
  return {
    config: mergeProjectConfig(home, project, confined.rules),
    protectionRules: projectFileRules([given, real]),
    sources: { home: { file: homeFile, found: homeRead.found }, project: { file: projectFile, found: projectRead.found } },
    workspace: real,
  };
}

/**
 * The configuration to build a session's file-safety from: `config` with the
 * `protectionRules` added to its rules. Hand this (not `config` alone) to a session.
 */
export function sessionConfigOf(loaded: Pick<LoadedConfig, 'config' | 'protectionRules'>): BrokeredShellConfig {
  const { config } = loaded;
  return { ...config, fileSafety: { ...config.fileSafety, rules: [...config.fileSafety.rules, ...loaded.protectionRules] } };
}
