import path from 'node:path';

/**
 * Where this machine's tools keep credentials a command has no business reading: each
 * tool's own variable where it has one, and its documented default too (a file left at
 * the default still holds what it held). Only the files and folders that hold secrets
 * are listed, never a tool's whole config where the rest is needed: `~/.kube/config`, not
 * `~/.kube` (its cache is not secret); `~/.docker/config.json`, not its CLI plugins.
 *
 * `keep` names entries directly inside a listed folder that stay readable, because the
 * tools a command runs need them and they hold no secret: ssh (which git runs for ssh
 * remotes) reads its `config` (host aliases, ports, which key to offer, `Include`s from
 * `config.d`) and `known_hosts` (without it every host is unknown and a batch ssh
 * refuses to connect), and offers the public halves (`*.pub`) to an agent; the private
 * keys stay unreadable, so a push authenticates through an ssh agent
 * (`sandbox.unixSockets`), never by reading a key.
 */

type Env = Readonly<Record<string, string | undefined>>;

export interface SecretLocation {
  /** Absolute; counts only where it exists when a command starts. */
  readonly path: string;
  /** Entries directly inside `path` (globs of one name) that stay readable. */
  readonly keep?: readonly string[];
}

export interface SecretDefault {
  /** What `secrets.remove` names it by. */
  readonly name: string;
  readonly what: string;
  locate(env: Env, home: string): SecretLocation[];
}

/** An absolute path a variable names (`~/` expanded); a relative or empty one names none. */
function fromVariable(value: string | undefined, home: string): string | undefined {
  if (value === undefined || value === '') return undefined;
  const expanded = value === '~' ? home : value.startsWith('~/') ? path.posix.join(home, value.slice(2)) : value;
  return expanded.startsWith('/') ? path.posix.normalize(expanded) : undefined;
}

/** Each of `paths` that is set, once. */
function places(...paths: Array<string | undefined>): SecretLocation[] {
  return [...new Set(paths.filter((p): p is string => p !== undefined))].map((p) => ({ path: p }));
}

const under = (home: string, ...parts: string[]) => path.posix.join(home, ...parts);
const xdgConfig = (env: Env, home: string) => fromVariable(env.XDG_CONFIG_HOME, home) ?? under(home, '.config');
const xdgData = (env: Env, home: string) => fromVariable(env.XDG_DATA_HOME, home) ?? under(home, '.local/share');
/** npm reads its settings from any case of `npm_config_<key>`. */
function npmSetting(env: Env, key: string): string | undefined {
  const wanted = `npm_config_${key}`;
  for (const [name, value] of Object.entries(env)) if (name.toLowerCase() === wanted && value) return value;
  return undefined;
}
/** Each `:`-separated entry of a path-list variable (KUBECONFIG). */
const listVariable = (value: string | undefined, home: string) => (value ?? '').split(':').map((entry) => fromVariable(entry, home));

export const SSH_KEEP: readonly string[] = Object.freeze(['config', 'config.d', 'known_hosts', 'known_hosts2', '*.pub']);

export const SECRET_DEFAULTS: readonly SecretDefault[] = Object.freeze([
  { name: 'ssh', what: "ssh's private keys", locate: (_env, home) => [{ path: under(home, '.ssh'), keep: SSH_KEEP }] },
  {
    name: 'aws',
    what: "the AWS CLI's credentials and config",
    locate: (env, home) => places(under(home, '.aws'), fromVariable(env.AWS_SHARED_CREDENTIALS_FILE, home), fromVariable(env.AWS_CONFIG_FILE, home)),
  },
  { name: 'gnupg', what: "GnuPG's keyrings", locate: (env, home) => places(under(home, '.gnupg'), fromVariable(env.GNUPGHOME, home)) },
  { name: 'gcloud', what: "the Google Cloud CLI's credentials", locate: (env, home) => places(under(xdgConfig(env, home), 'gcloud'), fromVariable(env.CLOUDSDK_CONFIG, home)) },
  { name: 'azure', what: "the Azure CLI's tokens", locate: (env, home) => places(under(home, '.azure'), fromVariable(env.AZURE_CONFIG_DIR, home)) },
  { name: 'kube', what: "kubectl's config (cluster credentials)", locate: (env, home) => places(under(home, '.kube/config'), ...listVariable(env.KUBECONFIG, home)) },
  {
    name: 'docker',
    what: "docker's config.json (registry logins)",
    locate: (env, home) => {
      const dir = fromVariable(env.DOCKER_CONFIG, home);
      return places(under(home, '.docker/config.json'), dir ? under(dir, 'config.json') : undefined);
    },
  },
  { name: 'netrc', what: 'the .netrc logins (curl, git, ftp)', locate: (env, home) => places(under(home, '.netrc'), fromVariable(env.NETRC, home)) },
  {
    name: 'git-credentials',
    what: "git's stored credentials (credential.helper store)",
    locate: (env, home) => places(under(home, '.git-credentials'), under(xdgConfig(env, home), 'git/credentials')),
  },
  {
    name: 'gh',
    what: "the GitHub CLI's tokens",
    locate: (env, home) => {
      const dir = fromVariable(env.GH_CONFIG_DIR, home);
      return places(under(xdgConfig(env, home), 'gh/hosts.yml'), dir ? under(dir, 'hosts.yml') : undefined);
    },
  },
  { name: 'npmrc', what: "npm's user config (registry tokens)", locate: (env, home) => places(under(home, '.npmrc'), fromVariable(npmSetting(env, 'userconfig'), home)) },
  {
    name: 'cargo',
    what: "cargo's registry tokens",
    locate: (env, home) => {
      const cargo = fromVariable(env.CARGO_HOME, home) ?? under(home, '.cargo');
      return places(under(cargo, 'credentials.toml'), under(cargo, 'credentials'));
    },
  },
  { name: 'pypi', what: "twine's PyPI logins (.pypirc)", locate: (_env, home) => places(under(home, '.pypirc')) },
  {
    name: 'password-stores',
    what: 'password stores and keyrings (pass, GNOME Keyring, KWallet, 1Password and Bitwarden CLIs)',
    locate: (env, home) =>
      places(
        under(home, '.password-store'),
        fromVariable(env.PASSWORD_STORE_DIR, home),
        under(xdgData(env, home), 'keyrings'),
        under(xdgData(env, home), 'kwalletd'),
        under(home, '.kde/share/apps/kwallet'),
        under(xdgConfig(env, home), 'op'),
        under(home, '.op'),
        under(xdgConfig(env, home), 'Bitwarden CLI'),
      ),
  },
  {
    name: 'browsers',
    what: 'browser profiles (cookies, saved passwords)',
    locate: (env, home) =>
      places(
        under(home, '.mozilla'),
        under(home, '.thunderbird'),
        ...['google-chrome', 'google-chrome-beta', 'chromium', 'BraveSoftware', 'microsoft-edge', 'vivaldi', 'opera'].map((dir) => under(xdgConfig(env, home), dir)),
        under(home, 'snap/firefox'),
        under(home, 'snap/chromium'),
        under(home, '.var/app/org.mozilla.firefox'),
        under(home, '.var/app/com.google.Chrome'),
        under(home, '.var/app/org.chromium.Chromium'),
      ),
  },
]);

export const SECRET_DEFAULT_NAMES: readonly string[] = Object.freeze(SECRET_DEFAULTS.map((entry) => entry.name));
