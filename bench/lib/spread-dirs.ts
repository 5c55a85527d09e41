import { execFileSync } from 'node:child_process';
import { mkdirSync, rmSync } from 'node:fs';
import path from 'node:path';

/**
 * Where the bench's runs write, and why it matters on ext4 without a journal.
 *
 * ext2/3/4 put a new directory in the block-group cluster of its parent, and a new file in
 * the first group of its directory's cluster that has a free inode. Without a journal, ext4
 * also skips every free inode freed in the last minute (six, while its inode table block is
 * dirty) when it allocates one, looking each of them up again on every allocation. A run
 * that frees a thousand inodes (sed -i replaces every file it edits; removing a tree of ten
 * thousand) would then slow every file creation of whatever comes next in that cluster, for
 * minutes: the next runner's, not its own. The "top of directory hierarchy" flag
 * (`chattr +T`) makes ext4 place each subdirectory in a cluster of its own instead, so every
 * run writes where no other run freed anything; on other file systems it does nothing.
 */
export class RunPlacement {
  readonly #spread = new Set<string>();
  /** Why a directory could not be flagged (the first failure), when one could not. */
  failure: string | undefined;

  /** Make `dir` (if missing) and let each directory made in it later go to a cluster of its own. */
  spread(dir: string): string {
    if (this.#spread.has(dir)) return dir;
    mkdirSync(dir, { recursive: true });
    try {
      execFileSync('chattr', ['+T', dir], { stdio: ['ignore', 'ignore', 'pipe'] });
    } catch (error) {
      this.failure ??= firstLine(error);
    }
    this.#spread.add(dir);
    return dir;
  }

  /** An empty directory `parent/name` for one run, `parent` spread (any earlier one of that name is removed). */
  runDir(parent: string, name: string): string {
    const dir = path.join(this.spread(parent), name);
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir);
    return dir;
  }

  /** For the report: where runs write. */
  describe(): string {
    return this.failure === undefined
      ? "each run's directory in a block-group cluster of its own (chattr +T); nothing removed until the end"
      : `runs share block-group clusters (chattr +T failed: ${this.failure}); nothing removed until the end`;
  }
}

function firstLine(error: unknown): string {
  const stderr = (error as { stderr?: Buffer }).stderr?.toString().trim();
  const text = stderr || (error instanceof Error ? error.message : String(error));
  return text.split('\n')[0]?.slice(0, 160) ?? 'unknown error';
}
