import { pathToFileURL } from 'node:url';
import path from 'node:path';
import { startPlain, timeProcess } from './timed-process.js';

/** Where the time of one `brokered-shell run -- COMMAND` goes, from inside that Node process. */
export interface CliPhases {
  /** Process start → first line of the entry script (Node's own bootstrap). */
  bootMs: number;
  /** `import('dist/cli/main.js')`: commander and the command tree. */
  importMainMs: number;
  /** What the run action imports lazily: `dist/cli/run.js` (core, plugins, backup, ipc, sandbox) and the logger. */
  importRunMs: number;
  /** `main(['run', …])` itself: sandbox probe, broker set-up, the command, the turn's commit, clean-up. */
  runMs: number;
  /** Whole process as the parent sees it, spawn → exit. */
  wallMs: number;
  /** wall − (boot + imports + run): process creation, script loading, exit. */
  restMs: number;
}

/**
 * Run the CLI's own entry points in a fresh `node` (no tsx, the compiled dist/) with
 * `performance.now()` stamps between the phases. The same steps as bin/brokered-shell.js.
 */
export async function measureCliPhases(repoRoot: string, workspace: string, command: string, env: NodeJS.ProcessEnv): Promise<CliPhases> {
  const url = (file: string) => JSON.stringify(pathToFileURL(path.join(repoRoot, 'dist', ...file.split('/'))).href);
  const script = [
    'const t0 = performance.now();',
    `const { main } = await import(${url('cli/main.js')});`,
    'const t1 = performance.now();',
    `await import(${url('cli/run.js')}); await import(${url('core/logger.js')});`,
    'const t2 = performance.now();',
    `const code = await main(['node', 'brokered-shell', 'run', '--workspace', ${JSON.stringify(workspace)}, '--', ${JSON.stringify(command)}]);`,
    'const t3 = performance.now();',
    'process.stdout.write(JSON.stringify({ bootMs: t0, importMainMs: t1 - t0, importRunMs: t2 - t1, runMs: t3 - t2, code }));',
    'process.exitCode = code;',
  ].join('\n');
  let out = '';
  const run = await timeProcess(() => {
    const started = startPlain(process.execPath, ['--input-type=module', '-e', script], { cwd: workspace, env });
    started.child.stdout?.setEncoding('utf8');
    started.child.stdout?.on('data', (chunk: string) => (out += chunk));
    return started;
  });
  if (run.code !== 0) throw new Error(`CLI phases run exited with ${String(run.code)}: ${run.stderrTail}`);
  const stamps = JSON.parse(out) as { bootMs: number; importMainMs: number; importRunMs: number; runMs: number };
  return { ...stamps, wallMs: run.wallMs, restMs: run.wallMs - stamps.bootMs - stamps.importMainMs - stamps.importRunMs - stamps.runMs };
}
