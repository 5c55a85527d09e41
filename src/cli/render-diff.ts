import { createTwoFilesPatch } from 'diff';

const BINARY_PROBE_BYTES = 8000;

/** Git's heuristic: a NUL byte near the start means binary. */
export function isBinary(bytes: Buffer): boolean {
  return bytes.subarray(0, BINARY_PROBE_BYTES).includes(0);
}

const paint = (code: string, text: string) => `\u001b[${code}m${text}\u001b[0m`;
const octal = (mode: number) => mode.toString(8).padStart(4, '0');

export interface RenderDiffOptions {
  color: boolean;
  /** Permission bits of the backup and of the file now; a difference is shown git-style. */
  modes?: { before: number; now?: number };
}

/** `old mode`/`new mode` lines when the permission bits changed (git's wording). */
function modeLines(options: RenderDiffOptions): string[] {
  const modes = options.modes;
  if (!modes || modes.now === undefined || modes.now === modes.before) return [];
  return [`old mode ${octal(modes.before)}`, `new mode ${octal(modes.now)}`];
}

/**
 * A unified diff from the backup (before the turn) to what is on disk now; `now`
 * undefined means the file is gone, `before` undefined that the turn created it (either
 * side is then /dev/null, like git).
 */
export function renderDiff(path: string, before: Buffer | undefined, now: Buffer | undefined, options: RenderDiffOptions): string {
  const modes = now === undefined || before === undefined ? [] : modeLines(options);
  const header = (lines: string[]) => (options.color ? lines.map((l) => paint('1', l)) : lines);
  if (now !== undefined && before?.equals(now)) {
    if (modes.length === 0) return `${path}: unchanged since the backup`;
    return [`${path}: content unchanged since the backup`, ...header(modes)].join('\n');
  }
  const oldName = before === undefined ? '/dev/null' : `${path} (backup)`;
  const newName = now === undefined ? '/dev/null' : `${path} (now)`;
  if ((before !== undefined && isBinary(before)) || (now !== undefined && isBinary(now))) {
    const beforePart = before === undefined ? '/dev/null' : `${path} (backup, ${before.length} B)`;
    const nowPart = now === undefined ? '/dev/null' : `${path} (now, ${now.length} B)`;
    return [...header(modes), `Binary files ${beforePart} and ${nowPart} differ`].join('\n');
  }
  const patch = createTwoFilesPatch(oldName, newName, before?.toString('utf8') ?? '', now === undefined ? '' : now.toString('utf8'));
  // The library opens with a line of '=' that neither diff(1) nor git prints.
  const lines = patch.trimEnd().split('\n');
  if (lines[0]?.startsWith('====')) lines.shift();
  if (!options.color) return [...modes, ...lines].join('\n');
  // Only lines before the first hunk are headers: a removed line "-- x" reads "--- x" in a hunk.
  let inHunks = false;
  const painted = lines.map((line) => {
    if (line.startsWith('@@')) {
      inHunks = true;
      return paint('36', line);
    }
    if (!inHunks) return paint('1', line);
    if (line.startsWith('+')) return paint('32', line);
    if (line.startsWith('-')) return paint('31', line);
    return line;
  });
  return [...header(modes), ...painted].join('\n');
}

/** What a symlink's backup says against what is at its path now (`beforeTarget` undefined: the turn created it). */
export function renderLinkDiff(
  path: string,
  beforeTarget: string | undefined,
  now: { type: 'absent' } | { type: 'symlink'; target: string } | { type: 'other'; what: string },
  options: { color: boolean },
): string {
  if (now.type === 'symlink' && now.target === beforeTarget) return `${path}: symlink unchanged since the backup (-> ${beforeTarget})`;
  const was = beforeTarget === undefined ? [] : [`-symlink -> ${beforeTarget}`];
  const is = now.type === 'absent' ? [] : now.type === 'symlink' ? [`+symlink -> ${now.target}`] : [`+${now.what}`];
  const lines = [`--- ${beforeTarget === undefined ? '/dev/null' : `${path} (backup)`}`, `+++ ${now.type === 'absent' ? '/dev/null' : `${path} (now)`}`, ...was, ...is];
  if (!options.color) return lines.join('\n');
  return lines.map((line, i) => (i < 2 ? paint('1', line) : paint(line.startsWith('+') ? '32' : '31', line))).join('\n');
}
