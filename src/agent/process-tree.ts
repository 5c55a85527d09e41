import { readFileSync, readdirSync } from 'node:fs';

/** The direct children of a process (every thread's), from /proc; [] when it is gone. */
export function childrenOf(pid: number): number[] {
  let tasks: string[];
  try {
    tasks = readdirSync(`/proc/${pid}/task`);
  } catch {
    return [];
  }
  const out: number[] = [];
  for (const task of tasks) {
    let text: string;
    try {
      text = readFileSync(`/proc/${pid}/task/${task}/children`, 'utf8');
    } catch {
      continue;
    }
    for (const word of text.split(/\s+/)) {
      const child = Number(word);
      if (Number.isInteger(child) && child > 0) out.push(child);
    }
  }
  return out;
}

function signal(pid: number, name: NodeJS.Signals): void {
  try {
    process.kill(pid, name);
  } catch {
    // Already gone.
  }
}

/**
 * Every descendant of `root`, level by level, calling `found` on each as it is met.
 * Bounded: a tree deeper than this is walked as far as it goes.
 */
function walkTree(root: number, found: (pid: number) => void): Set<number> {
  const seen = new Set<number>();
  let frontier = [root];
  for (let depth = 0; depth < 256 && frontier.length > 0; depth++) {
    const next: number[] = [];
    for (const pid of frontier) {
      for (const child of childrenOf(pid)) {
        if (seen.has(child) || child === root) continue;
        seen.add(child);
        found(child);
        next.push(child);
      }
    }
    frontier = next;
  }
  return seen;
}

/**
 * Send `name` to every descendant of `root` (and `root` with `includeRoot`), as a terminal
 * sends Ctrl-C to its whole foreground group: a shell waiting for a program that did not
 * get the signal would carry on after it. Walked first, then signalled; one forked
 * meanwhile is missed, as one forked just after a terminal's signal would be.
 */
export function signalTree(root: number, name: NodeJS.Signals, options: { includeRoot?: boolean } = {}): number[] {
  const pids = [...(options.includeRoot ? [root] : []), ...walkTree(root, () => undefined)];
  for (const pid of pids) signal(pid, name);
  return pids;
}

/**
 * Kill every descendant of `root` (and `root` itself with `includeRoot`). Processes are
 * stopped first, level by level, so none can fork while the tree is walked; then all
 * are killed. Used for the sandbox launcher (whose supervisor then kills whatever is
 * left and exits: killing its command is enough) and for runs without a supervisor.
 */
export function killTree(root: number, options: { includeRoot?: boolean } = {}): number[] {
  if (options.includeRoot) signal(root, 'SIGSTOP');
  const pids = [...(options.includeRoot ? [root] : []), ...walkTree(root, (pid) => signal(pid, 'SIGSTOP'))];
  for (const pid of pids) signal(pid, 'SIGKILL');
  return pids;
}
