import { createTwoFilesPatch } from 'diff';

const BINARY_PROBE_BYTES = 8000;

/** Git's heuristic: a NUL byte near the start means binary. */
export function isBinary(bytes: Buffer): boolean {
  return bytes.subarray(0, BINARY_PROBE_BYTES).includes(0);
}

const paint = (code: string, text: string) => `\u001b[${code}m${text}\u001b[0m`;

/** A unified diff from the backup (before the turn) to what is on disk now. */
export function renderDiff(path: string, before: Buffer, now: Buffer | undefined, options: { color: boolean }): string {
  if (now === undefined) return `--- ${path} (backup)\n+++ ${path} (now: missing)\n@@ file removed since the backup @@`;
  if (before.equals(now)) return `${path}: unchanged since the backup`;
  if (isBinary(before) || isBinary(now)) return `Binary files ${path} (backup, ${before.length} B) and ${path} (now, ${now.length} B) differ`;
  const patch = createTwoFilesPatch(`${path} (backup)`, `${path} (now)`, before.toString('utf8'), now.toString('utf8'));
  if (!options.color) return patch.trimEnd();
  return patch
    .trimEnd()
    .split('\n')
    .map((line) => {
      if (line.startsWith('+++') || line.startsWith('---')) return paint('1', line);
      if (line.startsWith('+')) return paint('32', line);
      if (line.startsWith('-')) return paint('31', line);
      if (line.startsWith('@@')) return paint('36', line);
      return line;
    })
    .join('\n');
}
