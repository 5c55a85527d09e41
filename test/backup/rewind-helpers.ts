/**
 * Helpers for the rewind tests of the store: turns recorded the way the broker records
 * them (the real modify-backup plugin answers a `check` request for every change, as it
 * does for the kernel supervisor, and then the test makes the change itself), and whole
 * trees snapshotted (type, mode, owner, mtime, content, link target, xattrs) to compare.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { createHash } from 'node:crypto';
import { expect } from 'vitest';
import { BackupHome, type TurnManifest } from '../../src/backup/index.js';
import type { MetadataOps } from '../../src/backup/metadata-ops.js';
import { Broker, type BrokerRequestInput, type Operation } from '../../src/core/index.js';
import { native } from '../../src/native/loader.js';
import { nativeMetadataOps } from '../../src/native/metadata-ops.js';
import { ModifyBackupPlugin } from '../../src/plugins/modify-backup/index.js';
import { PathResolutionPlugin } from '../../src/plugins/path-resolution/index.js';
import { operationTargets, openTargets, type OperationPaths } from '../../src/requests/targets.js';
import { allowAll } from '../helpers/bare-broker.js';
import { closeLater } from '../helpers/close-opened.js';
import { tempDir } from './helpers.js';

export const SESSION = 'rewind-session';

/** What the CLI gives a restore: the addon's metadata operations with xattr removal. */
export function metadataOps(): MetadataOps {
  const ops = nativeMetadataOps();
  return { ...ops, xattrs: { ...ops.xattrs!, remove: (file, name) => native().removeXattr(file, name) } };
}

export interface Recorder {
  home: string;
  ws: string;
  broker: Broker;
  backups: BackupHome;
  /** Ask the broker (which backs up first), then make the change. */
  change(operation: Operation, paths: OperationPaths, perform: () => Promise<unknown>, options?: BrokerRequestInput['options']): Promise<void>;
  /** A write-mode open (creating the file when absent), then the write. */
  write(file: string, content: string | Buffer): Promise<void>;
  mkdir(dir: string, mode?: number): Promise<void>;
  unlink(file: string): Promise<void>;
  rmdir(dir: string): Promise<void>;
  /** `rm -rf` as the kernel sees it: every file, then every directory, deepest first. */
  rmTree(dir: string): Promise<void>;
  rename(from: string, to: string): Promise<void>;
  chmod(file: string, mode: number): Promise<void>;
  /** Sets atime and mtime to the nanosecond. */
  touch(file: string, atimeNs: bigint, mtimeNs: bigint): Promise<void>;
  setXattr(file: string, name: string, value: string): Promise<void>;
  chown(file: string, uid: number, gid: number): Promise<void>;
  symlink(target: string, link: string): Promise<void>;
  /** CommitModifyBackup; returns the committed manifest. */
  commit(message: string): Promise<TurnManifest>;
}

export async function recorder(): Promise<Recorder> {
  const home = await tempDir('bsh-rewind-home-');
  const ws = await tempDir('bsh-rewind-ws-');
  const broker = closeLater(new Broker({ sessionId: SESSION })).use(new PathResolutionPlugin(), allowAll(), new ModifyBackupPlugin({ home }, { metadata: metadataOps() }));
  const backups = new BackupHome({ home, metadata: metadataOps() });
  const ask = async (input: BrokerRequestInput) => {
    const outcome = await broker.handle(input);
    expect(outcome.ok, JSON.stringify(outcome)).toBe(true);
  };
  const change: Recorder['change'] = async (operation, paths, perform, options = {}) => {
    await ask({ origin: 'kernel', action: 'check', operation, targets: operationTargets(operation, paths), sessionId: SESSION, options });
    await perform();
  };
  const rec: Recorder = {
    home,
    ws,
    broker,
    backups,
    change,
    write: async (file, content) => {
      await ask({ origin: 'kernel', action: 'check', operation: 'open', targets: openTargets(file, true), sessionId: SESSION });
      await fs.writeFile(file, content);
    },
    mkdir: (dir, mode = 0o755) => change('mkdir', { path: dir }, () => fs.mkdir(dir, { mode }), { mode }),
    unlink: (file) => change('delete', { path: file }, () => fs.unlink(file)),
    rmdir: (dir) => change('delete', { path: dir }, () => fs.rmdir(dir)),
    rmTree: async (dir) => {
      for (const entry of await fs.readdir(dir, { withFileTypes: true })) {
        const child = path.join(dir, entry.name);
        if (entry.isDirectory()) await rec.rmTree(child);
        else await rec.unlink(child);
      }
      await rec.rmdir(dir);
    },
    rename: (from, to) => change('rename', { from, to }, () => fs.rename(from, to)),
    chmod: (file, mode) => change('chmod', { path: file }, () => fs.chmod(file, mode), { mode }),
    touch: (file, atimeNs, mtimeNs) => change('touch', { path: file }, () => metadataOps().setTimesNs!(file, atimeNs, mtimeNs, { noFollow: true })),
    setXattr: (file, name, value) => change('xattr', { path: file }, async () => native().setXattr(file, name, Buffer.from(value))),
    chown: (file, uid, gid) => change('chown', { path: file }, () => fs.lchown(file, uid, gid)),
    symlink: (target, link) => change('link', { to: link, symbolic: true }, () => fs.symlink(target, link), { symbolic: true, linkTarget: target }),
    commit: async (message) => {
      const answer = await broker.control('CommitModifyBackup', { commitMsg: message });
      expect(answer).toMatchObject({ ok: true });
      return (await backups.findTurn(String(answer.turnId))).manifest;
    },
  };
  return rec;
}

/** Everything a rewind promises to bring back for one path (atime aside: reading moves it). */
export interface NodeSnap {
  type: 'file' | 'symlink' | 'directory' | 'other';
  mode: number;
  uid: number;
  gid: number;
  mtimeNs: string;
  sha256?: string;
  target?: string;
  xattrs?: Record<string, string>;
}

/** Every path under `root` and `root` itself (as '.'), sorted. */
export async function treeSnapshot(root: string): Promise<Record<string, NodeSnap>> {
  const out: Record<string, NodeSnap> = {};
  const visit = async (rel: string): Promise<void> => {
    const file = rel === '.' ? root : path.join(root, rel);
    const stats = await fs.lstat(file, { bigint: true });
    const common = { mode: Number(stats.mode & 0o7777n), uid: Number(stats.uid), gid: Number(stats.gid), mtimeNs: stats.mtimeNs.toString() };
    if (stats.isSymbolicLink()) {
      out[rel] = { type: 'symlink', ...common, target: await fs.readlink(file) };
      return;
    }
    const xattrs = Object.fromEntries(native().listXattrs(file).sort().map((name) => [name, native().getXattr(file, name).toString('base64')]));
    if (stats.isFile()) {
      out[rel] = { type: 'file', ...common, sha256: createHash('sha256').update(await fs.readFile(file)).digest('hex'), xattrs };
    } else if (stats.isDirectory()) {
      out[rel] = { type: 'directory', ...common, xattrs };
      for (const name of (await fs.readdir(file)).sort()) await visit(rel === '.' ? name : path.join(rel, name));
    } else out[rel] = { type: 'other', ...common };
  };
  await visit('.');
  return out;
}

/** Gives a file or directory an old, distinctive mtime (and atime), so a rewind that loses it shows. */
export async function stamp(file: string, seconds: number): Promise<void> {
  const ns = BigInt(seconds) * 1_000_000_000n + 123_456_789n;
  await metadataOps().setTimesNs!(file, ns, ns, { noFollow: true });
}

/** A file with content, mode and an old mtime. */
export async function plant(file: string, content: string, mode = 0o644, seconds = 1_500_000_000): Promise<void> {
  await fs.mkdir(path.dirname(file), { recursive: true });
  await fs.writeFile(file, content);
  await fs.chmod(file, mode);
  await stamp(file, seconds);
}

/** Old distinctive times on every directory under and including `root`, deepest first (so setting one does not move another). */
export async function stampDirs(root: string, seconds = 1_400_000_000): Promise<void> {
  const dirs: string[] = [];
  const walk = async (dir: string) => {
    dirs.push(dir);
    for (const entry of await fs.readdir(dir, { withFileTypes: true })) if (entry.isDirectory()) await walk(path.join(dir, entry.name));
  };
  await walk(root);
  for (const dir of dirs.reverse()) await stamp(dir, seconds);
}

export async function exists(file: string): Promise<boolean> {
  return fs.lstat(file).then(
    () => true,
    () => false,
  );
}
