import { execFileSync } from 'node:child_process';
import { closeSync, ftruncateSync, mkdirSync, mkdtempSync, openSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/** A file system that clones (FICLONE), mounted for as long as a bench row or a test needs it. */
export interface ReflinkMount {
  /** The mounted file system's root. */
  dir: string;
  /** Unmount it and remove the image; safe to call twice. */
  release(): void;
}

/**
 * Mount a fresh XFS image with reflink on a loop device, in the temp dir. For measuring
 * and testing the backup store's clone path on machines whose disks cannot clone (ext4):
 * needs root (mount), a loop device and mkfs.xfs (Debian's xfsprogs,
 * toolchain/install-debian-packages.sh). Throws, saying which is missing, when it cannot.
 */
export function mountReflinkImage(sizeMiB: number): ReflinkMount {
  const base = mkdtempSync(path.join(os.tmpdir(), 'bsh-xfs-'));
  const image = path.join(base, 'image.xfs');
  const dir = path.join(base, 'mnt');
  let mounted = false;
  const release = () => {
    if (mounted) {
      // Lazy: a descriptor still open on it must not leave the image behind.
      execFileSync('umount', ['--lazy', dir], { stdio: 'pipe' });
      mounted = false;
    }
    rmSync(base, { recursive: true, force: true });
  };
  try {
    const fd = openSync(image, 'wx');
    try {
      ftruncateSync(fd, sizeMiB * 1024 * 1024); // sparse: only what the tests write takes disk space
    } finally {
      closeSync(fd);
    }
    run('mkfs.xfs', ['-q', '-m', 'reflink=1', image], 'install xfsprogs (toolchain/install-debian-packages.sh)');
    mkdirSync(dir);
    run('mount', ['-o', 'loop', image, dir], 'mounting a loop device needs root');
    mounted = true;
    return { dir, release };
  } catch (error) {
    release();
    throw error;
  }
}

function run(command: string, args: string[], hint: string): void {
  try {
    execFileSync(command, args, { stdio: 'pipe' });
  } catch (error) {
    const failure = error as NodeJS.ErrnoException & { stderr?: Buffer };
    const detail = failure.code === 'ENOENT' ? `${command} not found` : (failure.stderr?.toString().trim() || failure.message);
    throw new Error(`cannot make a reflink file system: ${detail} (${hint})`, { cause: error });
  }
}
