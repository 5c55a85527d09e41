import { basename, dirname } from 'node:path';
import type { MetadataOps } from '../backup/metadata-ops.js';
import { native } from './loader.js';
import { timeSpecFromNs } from './types.js';

/**
 * The backup store's metadata needs, served by the addon: xattrs of regular files,
 * nanosecond times (of a symlink itself when asked) and special files made again. Loading is deferred to first use so
 * a missing build surfaces as a failed backup (deny), not as a crash at start.
 */
export function nativeMetadataOps(): MetadataOps {
  return {
    xattrs: {
      list: (path) => native().listXattrs(path),
      get: (path, name) => native().getXattr(path, name),
      set: (path, name, value) => native().setXattr(path, name, value),
    },
    makeNode: (path, { fileType, mode, rdev, owner, xattrs }) => {
      const pairs = Object.entries(xattrs ?? {}).map(([name, value]): [string, Buffer] => [name, Buffer.from(value, 'base64')]);
      return native().mknodAt(dirname(path), basename(path), fileType, mode, rdev, owner?.uid ?? -1, owner?.gid ?? -1, pairs);
    },
    heldForWriting: (fd) => native().heldForWriting(fd),
    setTimesNs: async (path, atimeNs, mtimeNs) => {
      // The final component is never followed: for a symlink this sets the link's own times.
      native().utimesAt(dirname(path), basename(path), timeSpecFromNs(atimeNs), timeSpecFromNs(mtimeNs));
    },
  };
}
