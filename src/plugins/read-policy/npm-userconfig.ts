import { lstat, readFile, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { ReadPolicy } from './policy.js';

/**
 * npm's user config (`~/.npmrc`, or the file `npm_config_userconfig` names) holds the
 * registry settings npm needs (a mirror, a proxy, scopes, `strict-ssl`) next to the
 * tokens that publish as the user. When the read policy keeps it from a command, the
 * command gets a copy without the credentials, in its own temp dir, and npm (pnpm and
 * yarn 1 too) is pointed at it: `npm install` keeps its settings, a token stays unread.
 * npm itself reads an unreadable user config as empty, so without this nothing breaks
 * but the settings are lost. What `npm config set` writes then goes to the copy, and is
 * gone after the command.
 *
 * Credentials in an npmrc are the per-registry keys (`//registry.example/:_authToken`,
 * `:_auth`, `:_password`, `:username`, `:certfile`, `:keyfile`), the old global ones
 * starting with `_`, and the login words below: every such line is left out, and so is
 * anything that is not a plain `key = value` line.
 */
const LOGIN_KEYS = new Set(['username', 'password', 'email', 'otp', 'certfile', 'keyfile', 'cert', 'key']);

export function withoutCredentials(npmrc: string): string {
  const kept: string[] = [];
  for (const line of npmrc.split(/\r?\n/)) {
    const match = /^\s*([^=;#\s][^=]*?)\s*=/.exec(line);
    const key = match?.[1]?.toLowerCase();
    if (key === undefined || key.startsWith('//') || key.startsWith('_') || LOGIN_KEYS.has(key)) continue;
    kept.push(line);
  }
  return kept.length === 0 ? '' : `${kept.join('\n')}\n`;
}

/** The environment variable names npm reads its user config path from, as present (any case). */
function userconfigNames(env: Readonly<Record<string, string | undefined>>): string[] {
  return Object.keys(env).filter((name) => name.toLowerCase() === 'npm_config_userconfig');
}

/**
 * For a command about to start with `scratch` as its temp dir: when the user config npm
 * would read may not be read, write its credential-free copy there and return the
 * variables that point npm at it (undefined: remove the variable); else nothing.
 */
export async function npmUserConfigCopy(policy: ReadPolicy, scratch: string, home = policy.homes[0] ?? os.homedir()): Promise<Record<string, string | undefined>> {
  const names = userconfigNames(policy.env);
  const named = names.map((name) => policy.env[name]).find((value) => value !== undefined && value !== '');
  const file = named === undefined ? path.posix.join(home, '.npmrc') : named.startsWith('~/') ? path.posix.join(home, named.slice(2)) : named;
  if (!file.startsWith('/') || policy.denialOf([file]) === undefined) return {};
  const stats = await lstat(file).catch(() => undefined);
  if (!stats?.isFile()) return {};
  const text = await readFile(file, 'utf8').catch(() => undefined);
  if (text === undefined) return {};
  const copy = path.posix.join(scratch, '.npmrc');
  await writeFile(copy, withoutCredentials(text), { mode: 0o600, flag: 'wx' });
  const env: Record<string, string | undefined> = Object.fromEntries(names.map((name) => [name, undefined]));
  env.npm_config_userconfig = copy;
  return env;
}
