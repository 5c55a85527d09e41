/**
 * A fake user home for the read policy's end-to-end tests: one fake credential per
 * default of the secret list, where each tool keeps it, holding a marker no real file
 * holds. The CLI runs with HOME (and XDG_CONFIG_HOME) pointing there, so no test reads
 * this machine's own secrets.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import type { CliOptions, World } from './run-helpers.js';

/** What every fake secret holds: a command's output must never show it. */
export const MARKER = 'FAKE-SECRET-MARKER';

/** One fake file per default, relative to the fake home. */
export const FAKE_SECRETS: ReadonlyArray<readonly [name: string, relative: string]> = [
  ['ssh', '.ssh/id_ed25519'],
  ['aws', '.aws/credentials'],
  ['gnupg', '.gnupg/private-keys-v1.d/A1B2.key'],
  ['gcloud', '.config/gcloud/credentials.db'],
  ['azure', '.azure/msal_token_cache.json'],
  ['kube', '.kube/config'],
  ['docker', '.docker/config.json'],
  ['netrc', '.netrc'],
  ['git-credentials', '.git-credentials'],
  ['gh', '.config/gh/hosts.yml'],
  ['npmrc', '.npmrc'],
  ['cargo', '.cargo/credentials.toml'],
  ['pypi', '.pypirc'],
  ['password-stores', '.password-store/email/work.gpg'],
  ['browsers', '.mozilla/firefox/abc.default/logins.json'],
];

/** Files beside them that stay readable. */
export const READABLE = ['.ssh/known_hosts', '.ssh/config', '.ssh/id_ed25519.pub', '.profile', '.kube/cache/discovery.json', '.docker/cli-plugins.txt', '.config/gh/config.yml'] as const;

export async function makeFakeHome(world: World): Promise<string> {
  const home = path.join(world.base, 'user');
  for (const [, relative] of FAKE_SECRETS) {
    const file = path.join(home, relative);
    await fs.mkdir(path.dirname(file), { recursive: true });
    const content = relative === '.npmrc' ? `fund=false\n//registry.npmjs.org/:_authToken=${MARKER}\n` : `${MARKER} ${relative}\n`;
    await fs.writeFile(file, content, { mode: 0o600 });
  }
  for (const relative of READABLE) {
    const file = path.join(home, relative);
    await fs.mkdir(path.dirname(file), { recursive: true });
    await fs.writeFile(file, `readable ${relative}\n`);
  }
  return home;
}

/**
 * The environment that makes the CLI (and its commands) take the fake home for the
 * user's. npm's own variables go (`npx vitest` exports them, `npm_config_userconfig`
 * naming the real ~/.npmrc among them), and so do the tools' variables that name their
 * credentials elsewhere.
 */
export function homeEnv(home: string, extra: NodeJS.ProcessEnv = {}): CliOptions {
  const named = /^(npm_config_|pnpm_config_)|^(KUBECONFIG|DOCKER_CONFIG|AWS_SHARED_CREDENTIALS_FILE|AWS_CONFIG_FILE|GNUPGHOME|CLOUDSDK_CONFIG|AZURE_CONFIG_DIR|GH_CONFIG_DIR|NETRC|PASSWORD_STORE_DIR|CARGO_HOME)$/i;
  const cleared = Object.fromEntries(Object.keys(process.env).filter((name) => named.test(name)).map((name) => [name, undefined]));
  return { env: { ...cleared, HOME: home, XDG_CONFIG_HOME: path.join(home, '.config'), ...extra } };
}
