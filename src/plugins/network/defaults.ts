import { accessSync, constants, existsSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { parseGitConfig } from '../file-safety/git-config-parse.js';

/**
 * What `network.mode: "allowlist"` allows with no configuration: the package registries
 * this user's own tools are set to, where each tool is present, and the hosts of the
 * workspace repository's git remotes (https and ssh), so that installs, `git fetch` and
 * `git push` work as they do outside the sandbox. Each is read as its tool reads it, for
 * the registry setting only; a project's own tool config (`.npmrc`, `pip.conf` in the
 * workspace) is not read: a repository must not open hosts for itself.
 */
export interface NetworkDefault {
  /** A `network.allow` entry. */
  rule: string;
  /** Where it comes from, for `config show` and the audit log. */
  from: string;
}

export interface DefaultsPlace {
  env: NodeJS.ProcessEnv;
  userHome: string;
  workspace: string;
}

function readText(file: string): string | undefined {
  try {
    return statSync(file).size > 1024 * 1024 ? undefined : readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
}

function onPath(env: NodeJS.ProcessEnv, program: string): boolean {
  return (env.PATH ?? '').split(':').some((dir) => {
    if (!dir.startsWith('/')) return false;
    try {
      accessSync(path.join(dir, program), constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });
}

/** A URL's host and port as an allow entry (`host:443`), or undefined for what is not a network URL. */
export function urlRule(text: string): string | undefined {
  let url: URL;
  try {
    url = new URL(text.replace(/^(sparse|registry|git)\+/, ''));
  } catch {
    return undefined;
  }
  const known: Record<string, number> = { 'https:': 443, 'http:': 80, 'ssh:': 22, 'git:': 9418 };
  const port = url.port === '' ? known[url.protocol] : Number(url.port);
  if (port === undefined || url.hostname === '') return undefined;
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}

/** `key = value` lines of an ini file (npm's and pip's), by section; `${VAR}` expanded from env as npm does. */
function iniValues(text: string, env: NodeJS.ProcessEnv): Map<string, string[]> {
  const values = new Map<string, string[]>();
  let section = '';
  for (const raw of text.split(/\r?\n/)) {
    const line = raw.trim();
    if (line === '' || line.startsWith(';') || line.startsWith('#')) continue;
    const header = /^\[(.*)\]$/.exec(line);
    if (header) {
      section = (header[1] ?? '').trim().toLowerCase();
      continue;
    }
    const at = line.indexOf('=');
    if (at < 0) continue;
    const key = `${section === '' ? '' : `${section}.`}${line.slice(0, at).trim().toLowerCase()}`;
    const value = line
      .slice(at + 1)
      .trim()
      .replace(/^"(.*)"$/, '$1')
      .replace(/\$\{([^}]+)\}/g, (_, name: string) => env[name] ?? '');
    values.set(key, [...(values.get(key) ?? []), value]);
  }
  return values;
}

/** npm's `registry`: the environment, the user config, the global config, else npm's own default. */
function npmRegistry(place: DefaultsPlace): NetworkDefault | undefined {
  const { env } = place;
  if (!onPath(env, 'npm')) return undefined;
  const fromEnv = Object.entries(env).find(([key]) => key.toLowerCase() === 'npm_config_registry')?.[1];
  if (fromEnv) return rule(fromEnv, 'npm registry ($npm_config_registry)');
  const configValue = (key: string) => Object.entries(env).find(([name]) => name.toLowerCase() === key)?.[1];
  const prefix = configValue('npm_config_prefix') ?? path.dirname(path.dirname(process.execPath));
  const files = [
    [configValue('npm_config_userconfig') ?? path.join(place.userHome, '.npmrc'), 'user config'],
    [configValue('npm_config_globalconfig') ?? path.join(prefix, 'etc', 'npmrc'), 'global config'],
  ] as const;
  for (const [file, what] of files) {
    const registry = iniValues(readText(file) ?? '', env).get('registry')?.at(-1);
    if (registry) return rule(registry, `npm registry (${what} ${file})`);
  }
  return rule('https://registry.npmjs.org/', "npm's default registry");
}

/** pip's index (and extra indexes): the environment, then pip's config files, else PyPI and its file host. */
function pipIndexes(place: DefaultsPlace): NetworkDefault[] {
  const { env } = place;
  if (!onPath(env, 'pip') && !onPath(env, 'pip3')) return [];
  const found: NetworkDefault[] = [];
  for (const name of ['PIP_INDEX_URL', 'PIP_EXTRA_INDEX_URL']) {
    for (const url of (env[name] ?? '').split(/\s+/).filter(Boolean)) found.push(...maybe(rule(url, `pip index ($${name})`)));
  }
  const configHome = env.XDG_CONFIG_HOME ?? path.join(place.userHome, '.config');
  const files = [env.PIP_CONFIG_FILE, '/etc/pip.conf', path.join(configHome, 'pip', 'pip.conf'), path.join(place.userHome, '.pip', 'pip.conf')];
  for (const file of files) {
    if (file === undefined) continue;
    const values = iniValues(readText(file) ?? '', env);
    for (const key of ['global.index-url', 'global.extra-index-url', 'install.index-url', 'install.extra-index-url']) {
      for (const url of (values.get(key) ?? []).flatMap((v) => v.split(/\s+/)).filter(Boolean)) found.push(...maybe(rule(url, `pip index (${file})`)));
    }
  }
  if (found.length > 0) return found;
  return [
    { rule: 'pypi.org:443', from: "pip's default index" },
    { rule: 'files.pythonhosted.org:443', from: "pip's default index (its files)" },
  ];
}

/** crates.io (sparse index, downloads), and the registries cargo's config names, where cargo keeps its home. */
function cargoRegistries(place: DefaultsPlace): NetworkDefault[] {
  const home = place.env.CARGO_HOME ?? path.join(place.userHome, '.cargo');
  if (!existsSync(home) && !onPath(place.env, 'cargo')) return [];
  const found: NetworkDefault[] = [
    { rule: 'index.crates.io:443', from: "cargo's default registry" },
    { rule: 'static.crates.io:443', from: "cargo's default registry (downloads)" },
    { rule: 'crates.io:443', from: "cargo's default registry" },
  ];
  for (const file of [path.join(home, 'config.toml'), path.join(home, 'config')]) {
    const text = readText(file) ?? '';
    for (const match of text.matchAll(/^\s*(?:registry|index)\s*=\s*"([^"]+)"/gm)) found.push(...maybe(rule(match[1] ?? '', `cargo registry (${file})`)));
  }
  return found;
}

/** Go's module proxy and checksum database: the environment, then go's env file, else Google's. */
function goProxies(place: DefaultsPlace): NetworkDefault[] {
  const { env } = place;
  if (!onPath(env, 'go')) return [];
  const envFile = env.GOENV ?? path.join(env.XDG_CONFIG_HOME ?? path.join(place.userHome, '.config'), 'go', 'env');
  const fileValues = new Map((readText(envFile) ?? '').split('\n').map((line) => [line.split('=')[0] ?? '', line.slice(line.indexOf('=') + 1)] as const));
  const proxy = env.GOPROXY ?? fileValues.get('GOPROXY') ?? 'https://proxy.golang.org,direct';
  const sumdb = env.GOSUMDB ?? fileValues.get('GOSUMDB') ?? 'sum.golang.org';
  const found = proxy
    .split(/[,|]/)
    .filter((entry) => entry !== 'direct' && entry !== 'off')
    .flatMap((url) => maybe(rule(url, 'go module proxy (GOPROXY)')));
  const sumHost = sumdb.split(/\s+/)[0] ?? '';
  if (sumHost !== '' && sumHost !== 'off') found.push(...maybe(rule(sumHost.includes('://') ? sumHost : `https://${sumHost}`, 'go checksum database (GOSUMDB)')));
  return found;
}

/** The workspace's repository: its git directory (a `.git` folder, or a file pointing to one), walking up. */
function gitConfigFiles(workspace: string): string[] {
  for (let dir = workspace; ; dir = path.dirname(dir)) {
    const dotGit = path.join(dir, '.git');
    const text = readText(dotGit);
    let gitDir: string | undefined;
    if (text !== undefined) {
      const match = /^gitdir:\s*(.+)$/m.exec(text);
      if (match) gitDir = path.resolve(dir, (match[1] ?? '').trim());
    } else if (existsSync(path.join(dotGit, 'config'))) {
      gitDir = dotGit;
    }
    if (gitDir) {
      const common = readText(path.join(gitDir, 'commondir'))?.trim();
      return [path.join(common ? path.resolve(gitDir, common) : gitDir, 'config')];
    }
    if (dir === path.dirname(dir)) return [];
  }
}

/** ssh's `Host alias` → `HostName`/`Port`, as far as a plain alias goes. */
function sshAliases(userHome: string): Map<string, { host?: string; port?: string }> {
  const aliases = new Map<string, { host?: string; port?: string }>();
  let current: string[] = [];
  for (const raw of (readText(path.join(userHome, '.ssh', 'config')) ?? '').split('\n')) {
    const [keyword = '', ...rest] = raw.trim().split(/\s+|=/).filter(Boolean);
    const key = keyword.toLowerCase();
    if (key === 'host') current = rest.filter((name) => !/[*?!]/.test(name));
    else if (key === 'match') current = [];
    else if (key === 'hostname' || key === 'port') {
      for (const alias of current) {
        const entry = aliases.get(alias) ?? {};
        if (key === 'hostname') entry.host ??= rest[0];
        else entry.port ??= rest[0];
        aliases.set(alias, entry);
      }
    }
  }
  return aliases;
}

/** A remote URL (https, ssh, scp-like `user@host:path`, git) as an allow entry. */
export function remoteRule(url: string, aliases: ReadonlyMap<string, { host?: string; port?: string }>): string | undefined {
  const scp = /^(?:[^@/]+@)?(\[[^\]]+\]|[^:/]+):(?!\/\/)/.exec(url);
  let target = url;
  if (scp && !/^[a-z][a-z0-9+.-]*:\/\//i.test(url)) target = `ssh://${scp[1] ?? ''}/`;
  const base = urlRule(target);
  if (!base || !target.startsWith('ssh://')) return base;
  const host = new URL(target).hostname;
  const alias = aliases.get(host);
  if (!alias) return base;
  const port = new URL(target).port || alias.port || '22';
  return `${alias.host ?? host}:${port}`;
}

function gitRemotes(place: DefaultsPlace): NetworkDefault[] {
  const aliases = sshAliases(place.userHome);
  const found: NetworkDefault[] = [];
  for (const file of gitConfigFiles(place.workspace)) {
    const text = readText(file);
    if (text === undefined) continue;
    const parsed = parseGitConfig(Buffer.from(text, 'latin1'));
    if ('error' in parsed) continue;
    const rewrites = parsed.entries.filter((e) => /^url\..*\.insteadof$/i.test(e.key) && e.value !== null);
    for (const entry of parsed.entries) {
      const match = /^remote\.(.+)\.(url|pushurl)$/i.exec(entry.key);
      if (!match || entry.value === null) continue;
      let url = entry.value;
      // The longest insteadOf prefix wins, as in git.
      const rewrite = rewrites.filter((r) => url.startsWith(r.value ?? '')).sort((a, b) => (b.value ?? '').length - (a.value ?? '').length)[0];
      if (rewrite) url = `${rewrite.key.slice(4, -'.insteadof'.length)}${url.slice((rewrite.value ?? '').length)}`;
      found.push(...maybe(remoteRule(url, aliases), `git remote ${match[1] ?? ''} (${file})`));
    }
  }
  return found;
}

function rule(url: string, from: string): NetworkDefault | undefined {
  const entry = urlRule(url);
  return entry ? { rule: entry, from } : undefined;
}

function maybe(entry: NetworkDefault | string | undefined, from = ''): NetworkDefault[] {
  if (entry === undefined) return [];
  return typeof entry === 'string' ? [{ rule: entry, from }] : [entry];
}

/** The default allow entries for this machine, user and workspace, each with where it came from. */
export function networkDefaults(place: DefaultsPlace): NetworkDefault[] {
  const all = [...maybe(npmRegistry(place)), ...pipIndexes(place), ...cargoRegistries(place), ...goProxies(place), ...gitRemotes(place)];
  const seen = new Set<string>();
  return all.filter((entry) => !seen.has(entry.rule) && seen.add(entry.rule));
}
