import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { REPO_ROOT } from './serve.js';

export interface ServerProcess {
  readonly pid: number;
  /** SIGTERM it (unless it already ended) and wait for it to exit. */
  stop(): Promise<void>;
}

/**
 * Run a bench server script (via tsx, from the repository root) in a process of its own,
 * as `serve` runs apart from its clients; resolves once it prints its one ready line on
 * stdout, rejects with its stderr if it exits first.
 */
export async function startServerProcess(script: string, args: readonly string[], label: string, nodeArgs: readonly string[] = []): Promise<ServerProcess> {
  const child = spawn(process.execPath, [...nodeArgs, '--import', 'tsx', script, ...args], { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (chunk: string) => (stderr += chunk));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  await new Promise<void>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`${label} exited with ${String(code)}: ${stderr}`)));
    createInterface({ input: child.stdout }).once('line', () => resolve());
  });
  return {
    pid: child.pid ?? -1,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}
