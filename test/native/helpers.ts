import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'vitest';
import { findPackageRoot, isNativeErrnoError, type NativeErrnoError } from '../../src/native/index.js';

/** A fresh temp dir with its symlinks resolved (openat2 refuses symlinked components). */
export function makeTempDir(prefix: string, parent: string = os.tmpdir()): string {
  return fs.realpathSync(fs.mkdtempSync(path.join(parent, `bsh-native-${prefix}-`)));
}

export function removeDir(dir: string): void {
  fs.rmSync(dir, { recursive: true, force: true });
}

/** Runs `fn`, expects it to throw a native errno error, and returns that error. */
export function catchErrno(fn: () => unknown): NativeErrnoError {
  let caught: unknown;
  try {
    fn();
  } catch (error) {
    caught = error;
  }
  expect(caught).toBeDefined();
  if (!isNativeErrnoError(caught)) throw new Error(`expected a native errno error, got ${String(caught)}`);
  return caught;
}

export function modeOf(file: string): number {
  return fs.lstatSync(file).mode & 0o7777;
}

/** A second directory on another device than `dir`, and how to dispose of it. */
export interface OtherDevice {
  dir: string;
  cleanup: () => void;
}

/**
 * Finds a writable directory on a different device than `dir`: /dev/shm when it is one
 * (unless `mount` is 'always'), else a tmpfs this test mounts itself (the tests run as
 * root here and in CI).
 */
export function otherDevice(dir: string, mount: 'if-needed' | 'always' = 'if-needed'): OtherDevice {
  const device = fs.statSync(dir).dev;
  try {
    if (mount === 'if-needed' && fs.statSync('/dev/shm').dev !== device) {
      fs.accessSync('/dev/shm', fs.constants.W_OK);
      const shmDir = makeTempDir('xdev', '/dev/shm');
      return { dir: shmDir, cleanup: () => removeDir(shmDir) };
    }
  } catch {
    // No usable /dev/shm: mount our own below.
  }
  const mountPoint = makeTempDir('mnt');
  execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', mountPoint]);
  return {
    dir: mountPoint,
    cleanup: () => {
      execFileSync('umount', [mountPoint]);
      removeDir(mountPoint);
    },
  };
}

/** The package's build/ dir: on the repo's file system, used when the temp fs lacks user xattrs. */
export function buildDir(): string {
  const dir = path.join(findPackageRoot(), 'build');
  fs.mkdirSync(dir, { recursive: true });
  return dir;
}
