import { basename, dirname, isAbsolute, join, normalize } from 'node:path';
import { badRequest } from './fs-failure.js';
import { trashTopDir } from './trash-dir.js';

/** Maps between a trashed item's paths and the original location its `.trashinfo` records. */

const INFO_SUFFIX = '.trashinfo';

export interface TrashItemLocation {
  trashDir: string;
  name: string;
  trashedPath: string;
  infoPath: string;
}

/** Accepts `<trash>/files/<name>` or `<trash>/info/<name>.trashinfo`. */
export function locateTrashItem(given: string): TrashItemLocation {
  if (!isAbsolute(given)) throw badRequest(`restore needs an absolute path, got ${JSON.stringify(given)}`);
  const path = normalize(given).replace(/(.)\/+$/, '$1');
  const folder = basename(dirname(path));
  const trashDir = dirname(dirname(path));
  const file = basename(path);
  if (folder === 'info' && file.endsWith(INFO_SUFFIX) && file.length > INFO_SUFFIX.length) {
    const name = file.slice(0, -INFO_SUFFIX.length);
    return { trashDir, name, infoPath: path, trashedPath: join(trashDir, 'files', name) };
  }
  if (folder === 'files') {
    return { trashDir, name: file, trashedPath: path, infoPath: join(trashDir, 'info', file + INFO_SUFFIX) };
  }
  throw badRequest(`${path} is neither <trash>/files/<name> nor <trash>/info/<name>.trashinfo`);
}

/** The absolute original path recorded for an item (relative `Path=` joined with the trash's top directory). */
export function originalPathFor(trashDir: string, recorded: string): string {
  // Spec: a relative Path= must not contain "..": refuse rather than restore outside the volume.
  if (recorded.split('/').includes('..')) throw badRequest(`Path= must not contain "..": ${recorded}`);
  const target = isAbsolute(recorded) ? recorded : join(trashTopDir(trashDir), recorded);
  if (target === '/' || basename(target) === '') throw badRequest(`Path= names no file: ${recorded}`);
  return target.replace(/(.)\/+$/, '$1');
}

