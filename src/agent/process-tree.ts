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
 * Kill every descendant of `root` (and `root` itself with `includeRoot`). Processes are
 * stopped first, level by level, so none can fork while the tree is walked; then all
 * are killed. Used for the sandbox launcher (whose supervisor then kills whatever is
 * left and exits: killing its command is enough) and for runs without a supervisor.
 */
export function killTree(root: number, options: { includeRoot?: boolean } = {}): number[] {
  const seen = new Set<number>();
  let frontier = [root];
  if (options.includeRoot) {
    signal(root, 'SIGSTOP');
    seen.add(root);
  }
  // Bounded: a tree deeper than this is killed as far as it was walked.
  for (let depth = 0; depth < 256 && frontier.length > 0; depth++) {
    const next: number[] = [];
    for (const pid of frontier) {
      for (const child of childrenOf(pid)) {
        if (seen.has(child)) continue;
        seen.add(child);
        signal(child, 'SIGSTOP');
        next.push(child);
      }
    }
    frontier = next;
  }
  for (const pid of seen) signal(pid, 'SIGKILL');
  return [...seen];
}
