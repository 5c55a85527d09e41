/**
 * A realistic backup store for the browser test and the README's screenshot: a small
 * project changed by three agent turns, each a real `brokered-shell run` (kernel
 * sandbox, real broker, real store), touching text, a deleted file, a binary and a symlink.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { describeRun, makeWorld, run, turnsOf, type World } from '../e2e/run-helpers.js';
import type { TurnManifest } from '../../src/backup/index.js';

export const DEMO_SESSION = 'agent-session-42';

export interface DemoStore {
  world: World;
  /** The three turns, oldest first. */
  turns: TurnManifest[];
  /** A workspace file's bytes before each turn ran: `before[i][name]` (absent: undefined). */
  before: Array<Record<string, Buffer | undefined>>;
  at(name: string): string;
}

const FILES: Record<string, string | Buffer> = {
  'src/greet.py': [
    'import sys',
    '',
    '',
    'def greet(name):',
    '    return f"Hello, {name}!"',
    '',
    '',
    'if __name__ == "__main__":',
    '    print(greet(sys.argv[1] if len(sys.argv) > 1 else "world"))',
    '',
  ].join('\n'),
  'settings.toml': ['[app]', 'name = "greeter"', 'log_level = "debug"', 'workers = 2', ''].join('\n'),
  'README.md': ['# greeter', '', 'Says hello.', '', 'Run `python3 src/greet.py NAME`.', ''].join('\n'),
  'NOTES.md': ['- try a --shout flag', '- ask about i18n', ''].join('\n'),
  'assets/logo.bin': Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x00, 0x00, 0x01, 0x02, 0x03]),
  'config/dev.json': '{ "env": "dev" }\n',
  'config/prod.json': '{ "env": "prod" }\n',
};

const TURNS: Array<{ message: string; command: string }> = [
  {
    message: 'Add a --shout option to greet.py',
    command: [
      `sed -i 's/^def greet(name):/def greet(name, shout=False):/' src/greet.py`,
      `sed -i 's/^    return f"Hello, {name}!"/    text = f"Hello, {name}!"\\n    return text.upper() if shout else text/' src/greet.py`,
    ].join(' && '),
  },
  {
    message: 'Document --shout and drop the old notes',
    command: "printf '\\nAdd `--shout` to greet loudly.\\n' >> README.md && rm NOTES.md",
  },
  {
    message: 'Use the production config, quieter logs, new logo',
    command: [
      `sed -i 's/log_level = "debug"/log_level = "warning"/; s/workers = 2/workers = 8/' settings.toml`,
      'ln -sfn config/prod.json current-config',
      `printf '\\x89PNG\\x00\\x00\\x10\\x20\\x30\\x40' > assets/logo.bin`,
      `sed -i 's/"world"/"there"/' src/greet.py`,
    ].join(' && '),
  },
];

async function snapshotFiles(world: World): Promise<Record<string, Buffer | undefined>> {
  const out: Record<string, Buffer | undefined> = {};
  for (const name of [...Object.keys(FILES), 'current-config']) {
    const file = path.join(world.ws, name);
    const stats = await fs.lstat(file).catch(() => undefined);
    out[name] = stats === undefined ? undefined : stats.isSymbolicLink() ? Buffer.from(await fs.readlink(file)) : await fs.readFile(file);
  }
  return out;
}

export async function makeDemoStore(): Promise<DemoStore> {
  const world = await makeWorld('ui');
  for (const [name, content] of Object.entries(FILES)) {
    await fs.mkdir(path.dirname(path.join(world.ws, name)), { recursive: true });
    await fs.writeFile(path.join(world.ws, name), content);
  }
  await fs.symlink('config/dev.json', path.join(world.ws, 'current-config'));
  const before: DemoStore['before'] = [];
  for (const turn of TURNS) {
    before.push(await snapshotFiles(world));
    const result = await run(world, turn.command, { session: DEMO_SESSION, message: turn.message });
    if (result.status !== 0) throw new Error(`demo turn "${turn.message}" failed: ${describeRun(result)}`);
  }
  const turns = await turnsOf(world, DEMO_SESSION);
  if (turns.length !== TURNS.length) throw new Error(`expected ${TURNS.length} turns, found ${turns.length}`);
  return { world, turns, before, at: (name) => path.join(world.ws, name) };
}
