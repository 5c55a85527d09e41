/**
 * Where one request's time goes inside the broker, per plugin tap: `sed -i`'s sequence
 * (create a temp file, set an xattr on it, rename it over an existing file) sent through
 * `broker.handle` as the seccomp runtime sends it, with the standard plugins, on real
 * files, with the file operations done between requests. Every tap is timed through a
 * tapable interceptor (a promise tap until it settles), and the backup store's methods
 * are timed around their calls: taps overlap the store, and the sum of the taps is less
 * than the request, the rest being the core.
 *
 *   node --import tsx bench/tap-times.ts [--files 1000]
 *
 * Needs the compiled dist/ (`npx tsc -p tsconfig.build.json`). Not a test: no vitest.
 */
import { constants as C, mkdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import type { KernelRequest } from '../src/sandbox/protocol.js';
import { positiveInt } from './lib/cli-options.js';
import { loadProduct } from './lib/sandbox-runner.js';
import { REPO_ROOT, benchTempDir } from './lib/serve.js';
import { formatMicros, markdownTable } from './lib/table.js';

/** The three requests of one file, and the turn's begin and commit (once for the run, shown per file). */
type Op = 'open' | 'setxattr' | 'rename' | 'turn';
const OPS: readonly Op[] = ['open', 'setxattr', 'rename', 'turn'];
const STORE_METHODS = ['backup', 'recordCreated', 'recordDirectory'] as const;

/** Total ns per key; `current` names the op the time belongs to. */
class Ledger {
  current: Op = 'open';
  readonly totals = new Map<string, number>();
  add(key: string, startedNs: bigint): void {
    const k = `${this.current}\0${key}`;
    this.totals.set(k, (this.totals.get(k) ?? 0) + Number(process.hrtime.bigint() - startedNs));
  }
}

/** Time every tap registered from now on; a promise tap until it settles. */
function timeTaps(hooks: object, ledger: Ledger): void {
  for (const [hookName, hook] of Object.entries(hooks) as Array<[string, { intercept?: (i: object) => void }]>) {
    hook.intercept?.({
      register(tap: { name: string; type: string; fn: (...args: unknown[]) => unknown }) {
        if (tap.type === 'async') return tap; // callback taps: none in the standard set
        const original = tap.fn;
        const key = `tap ${hookName}: ${tap.name}`;
        tap.fn = (...args: unknown[]) => {
          const started = process.hrtime.bigint();
          const value = original(...args);
          if (value instanceof Promise) return value.finally(() => ledger.add(key, started));
          ledger.add(key, started);
          return value;
        };
        return tap;
      },
    });
  }
}

/** Time the store's methods around their calls (prototype-wide: only this process's store runs). */
function timeStore(proto: Record<string, unknown>, ledger: Ledger): void {
  for (const name of STORE_METHODS) {
    const original = proto[name] as (...args: unknown[]) => Promise<unknown>;
    proto[name] = function (this: unknown, ...args: unknown[]) {
      const started = process.hrtime.bigint();
      return original.apply(this, args).finally(() => ledger.add(`store ${name}`, started));
    };
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { files: { type: 'string' } }, strict: true });
  const files = positiveInt('--files', values.files, 1000);
  const { index, bridge } = await loadProduct(REPO_ROOT);
  const base = benchTempDir('bsh-tap-times-');
  const ledger = new Ledger();
  const broker = new index.Broker({ sessionId: 'bench-tap-times', logger: index.createLogger({ level: 'error' }) });
  try {
    const dir = path.join(base, 'ws', 'a', 'b', 'c');
    mkdirSync(dir, { recursive: true });
    const targets = Array.from({ length: files }, (_, i) => path.join(dir, `f${i}.txt`));
    for (const [i, file] of targets.entries()) writeFileSync(file, `line ${i}\n`.repeat(20));
    timeTaps(broker.hooks, ledger);
    timeStore(index.SessionBackupStore.prototype as unknown as Record<string, unknown>, ledger);
    broker.use(...index.standardPlugins({ home: path.join(base, 'home'), writableRoots: [path.join(base, 'ws')], backup: {} }));
    const handle = bridge.kernelBridge(broker, { toolCallId: 'bench-call', traceId: 'bench-trace' });
    const ask = async (op: Exclude<Op, 'turn'>, request: Omit<KernelRequest, 'id' | 'pid' | 'tgid' | 'op'>) => {
      ledger.current = op;
      const started = process.hrtime.bigint();
      const answer = await handle({ id: 1, op, pid: process.pid, tgid: process.pid, ...request });
      ledger.add('request', started);
      if (answer.errno !== 0) throw new Error(`the broker answered errno ${answer.errno} for ${op} ${request.path}`);
    };
    ledger.current = 'turn';
    await broker.beginTurn();
    for (const [i, target] of targets.entries()) {
      const temp = path.join(dir, `sed${i.toString(36).padStart(6, '0')}`);
      await ask('open', { path: temp, flags: C.O_RDWR | C.O_CREAT | C.O_EXCL, mode: 0o600, follow: false });
      writeFileSync(temp, `new line ${i}\n`);
      await ask('setxattr', { path: temp, flags: 0, mode: 0, follow: true });
      await ask('rename', { path: temp, to: target, flags: 0, mode: 0, follow: false });
      renameSync(temp, target);
    }
    ledger.current = 'turn';
    await broker.commitTurn('bench tap-times');
    const rows = [...ledger.totals]
      .map(([key, ns]) => {
        const [op, what] = key.split('\0') as [Op, string];
        return { op, what, us: ns / files / 1000 };
      })
      .filter((row) => row.what === 'request' || row.us >= 1)
      .sort((a, b) => OPS.indexOf(a.op) - OPS.indexOf(b.op) || (a.what === 'request' ? -1 : b.what === 'request' ? 1 : b.us - a.us));
    process.stdout.write(`## Where a request's time goes, per tap (sed's sequence over ${files.toLocaleString('en-US')} files, in process)\n\n`);
    process.stdout.write(
      `${markdownTable<(typeof rows)[number]>(
        [
          { header: 'request', value: (r) => (r.op === 'turn' ? 'begin + commit of the turn' : r.op) },
          { header: 'what', value: (r) => (r.what === 'request' ? '**the whole request**' : r.what) },
          { header: 'µs per request (mean)', align: 'right', value: (r) => formatMicros(r.us) },
        ],
        rows,
      )}\n`,
    );
  } finally {
    await broker.close().catch(() => undefined);
    rmSync(base, { recursive: true, force: true });
  }
}

await main();
