import { realpath } from 'node:fs/promises';
import { dirname } from 'node:path';
import { errorCode, openForSnapshot } from '../backup/fs-util.js';

/**
 * What a recorded file holds now, for a diff: read as the regular file of `size` bytes its
 * lstat showed, or a reason it is not read. Never through a folder above it that has become
 * a symlink (a turn can point one at /proc, whose files say they are empty and then give
 * more, some without end, or block), never waiting on it, and never more than `size` bytes.
 */
export async function contentNow(file: string, size: number): Promise<Buffer | string> {
  const parent = dirname(file);
  const real = await realpath(parent).catch(() => undefined);
  if (real !== parent) return `the folder above it now resolves to ${real ?? 'nothing'}; not read`;
  let handle;
  try {
    handle = await openForSnapshot(file);
  } catch (error) {
    return `cannot be read now (${errorCode(error) ?? String(error)})`;
  }
  try {
    if (!(await handle.stat()).isFile()) return 'not a regular file any more; not read';
    const buffer = Buffer.alloc(size + 1);
    let length = 0;
    for (;;) {
      const { bytesRead } = await handle.read(buffer, length, buffer.length - length, length);
      if (bytesRead === 0 || (length += bytesRead) === buffer.length) break;
    }
    if (length > size) return `holds more than the ${size} B its size says (not a plain file); not read`;
    return buffer.subarray(0, length);
  } catch (error) {
    return `cannot be read now (${errorCode(error) ?? String(error)})`;
  } finally {
    await handle.close();
  }
}
