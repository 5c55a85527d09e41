import { promises as fs } from 'node:fs';
import { extname, join } from 'node:path';
import { BrokerError, ErrorCodes } from '../core/errors.js';
import { fsFailure, isErrno } from './fs-failure.js';

/**
 * Reserves a name in a trash directory. The spec's order is followed: the info file is
 * created first with O_EXCL, which is the atomic claim shared by every process (and every
 * conforming implementation) using this trash; only then is the item moved to `files/`.
 */

const INFO_SUFFIX = '.trashinfo';
/** NAME_MAX on Linux file systems, in bytes. */
const NAME_MAX = 255;
const MAX_ATTEMPTS = 10_000;

function byteLength(text: string): number {
  return Buffer.byteLength(text, 'utf8');
}

/** Cuts `text` to at most `maxBytes` UTF-8 bytes without splitting a character. */
function truncateBytes(text: string, maxBytes: number): string {
  let out = '';
  for (const ch of text) {
    if (byteLength(out + ch) > maxBytes) break;
    out += ch;
  }
  return out;
}

/**
 * The n-th candidate for `base`: `a.txt`, `a.2.txt`, `a.3.txt`, … (the extension stays
 * last so file managers still recognise the type). Shortened when `<name>.trashinfo`
 * would exceed NAME_MAX.
 */
export function candidateName(base: string, attempt: number): string {
  const ext = extname(base);
  const stem = base.slice(0, base.length - ext.length);
  const counter = attempt <= 1 ? '' : `.${attempt}`;
  const budget = NAME_MAX - byteLength(INFO_SUFFIX);
  const name = `${stem}${counter}${ext}`;
  if (byteLength(name) <= budget) return name;
  if (byteLength(counter + ext) < budget) return truncateBytes(stem, budget - byteLength(counter + ext)) + counter + ext;
  return truncateBytes(base, budget - byteLength(counter)) + counter;
}

export interface ClaimedName {
  name: string;
  infoPath: string;
  trashedPath: string;
}

export async function claimTrashName(trashDir: string, base: string, infoText: string): Promise<ClaimedName> {
  for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt += 1) {
    const name = candidateName(base, attempt);
    const infoPath = join(trashDir, 'info', `${name}${INFO_SUFFIX}`);
    const trashedPath = join(trashDir, 'files', name);
    let handle: fs.FileHandle;
    try {
      handle = await fs.open(infoPath, 'wx', 0o600);
    } catch (error) {
      if (isErrno(error, 'EEXIST')) continue;
      throw fsFailure(`cannot create ${infoPath}`, error);
    }
    try {
      // An orphan in files/ (left by a crash or another tool) must not be renamed over.
      const orphan = await fs.lstat(trashedPath).then(
        () => true,
        (error: unknown) => {
          if (isErrno(error, 'ENOENT')) return false;
          throw error;
        },
      );
      if (orphan) {
        await handle.close();
        await fs.unlink(infoPath);
        continue;
      }
      await handle.writeFile(infoText, 'utf8');
      await handle.close();
    } catch (error) {
      await handle.close().catch(() => undefined);
      await fs.unlink(infoPath).catch(() => undefined);
      throw fsFailure(`cannot write ${infoPath}`, error);
    }
    return { name, infoPath, trashedPath };
  }
  throw new BrokerError(ErrorCodes.HOST_OP_FAILED, `no free name for ${base} in ${trashDir} after ${MAX_ATTEMPTS} tries`, {
    errno: 'EEXIST',
  });
}
