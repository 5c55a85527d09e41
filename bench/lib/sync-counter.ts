import fs from 'node:fs/promises';
import nodeFs from 'node:fs';
import os from 'node:os';

/** How many fsync and fdatasync calls were made since `countSyncs` started. */
export interface SyncCounts {
  fsync: number;
  fdatasync: number;
}

type SyncFn = (this: fs.FileHandle) => Promise<void>;
type SyncFdFn = (fd: number, done: (error: NodeJS.ErrnoException | null) => void) => void;

/**
 * Count every fsync/fdatasync the process makes from now on, through either door the
 * store uses: FileHandle.sync/datasync and the callback API on a descriptor (fs-util.ts).
 * Returns the live counts and a function that puts the originals back.
 */
export async function countSyncs(): Promise<{ counts: SyncCounts; stop: () => void }> {
  const probe = await fs.open(os.devNull, 'r');
  const proto = Object.getPrototypeOf(probe) as { sync: SyncFn; datasync: SyncFn };
  await probe.close();
  const { sync, datasync } = proto;
  const { fsync, fdatasync } = nodeFs;
  const counts: SyncCounts = { fsync: 0, fdatasync: 0 };
  proto.sync = function (this: fs.FileHandle) {
    counts.fsync++;
    return sync.call(this);
  };
  proto.datasync = function (this: fs.FileHandle) {
    counts.fdatasync++;
    return datasync.call(this);
  };
  nodeFs.fsync = ((fd, done) => {
    counts.fsync++;
    fsync(fd, done);
  }) as SyncFdFn as typeof nodeFs.fsync;
  nodeFs.fdatasync = ((fd, done) => {
    counts.fdatasync++;
    fdatasync(fd, done);
  }) as SyncFdFn as typeof nodeFs.fdatasync;
  const stop = () => {
    Object.assign(proto, { sync, datasync });
    Object.assign(nodeFs, { fsync, fdatasync });
  };
  return { counts, stop };
}
