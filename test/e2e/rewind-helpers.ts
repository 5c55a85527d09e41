/**
 * Helpers for the rewind end-to-end tests: turns made by `brokered-shell run` in the
 * real kernel sandbox, undone with `brokered-shell backups restore`, and whole trees
 * compared — type, mode, owner, mtime (directories too), content, link target, xattrs.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { expect } from 'vitest';
import { native } from '../../src/native/loader.js';
import { brokeredShell, describeRun, run, sha256, turnsOf, type CliRun, type World } from './run-helpers.js';

export interface NodeSnap {
  type: 'file' | 'symlink' | 'directory' | 'fifo' | 'socket' | 'device';
  mode: number;
  uid: number;
  gid: number;
  mtimeNs: string;
  sha256?: string;
  target?: string;
  xattrs?: Record<string, string>;
  /** Special files: the device number (0 for a FIFO or socket). */
  rdev?: string;
}
export type Tree = Record<string, NodeSnap>;

/** Every path under `root`, and `root` itself as '.', with everything a rewind puts back (atime aside: reading moves it). */
export async function treeSnapshot(root: string): Promise<Tree> {
  const out: Tree = {};
  const visit = async (rel: string): Promise<void> => {
    const file = rel === '.' ? root : path.join(root, rel);
    const stats = await fs.lstat(file, { bigint: true });
    const common = { mode: Number(stats.mode & 0o7777n), uid: Number(stats.uid), gid: Number(stats.gid), mtimeNs: stats.mtimeNs.toString() };
    if (stats.isSymbolicLink()) {
      out[rel] = { type: 'symlink', ...common, target: await fs.readlink(file) };
      return;
    }
    const xattrs = Object.fromEntries(native().listXattrs(file).sort().map((name) => [name, native().getXattr(file, name).toString('base64')]));
    if (stats.isFile()) out[rel] = { type: 'file', ...common, sha256: sha256(await fs.readFile(file)), xattrs };
    else if (stats.isDirectory()) {
      out[rel] = { type: 'directory', ...common, xattrs };
      for (const name of (await fs.readdir(file)).sort()) await visit(rel === '.' ? name : path.join(rel, name));
    } else out[rel] = { type: stats.isFIFO() ? 'fifo' : stats.isSocket() ? 'socket' : 'device', ...common, rdev: stats.rdev.toString() };
  };
  await visit('.');
  return out;
}

/** Old, distinctive times on every directory under and including `root` (deepest first). */
export async function stampDirs(root: string, seconds = 1_400_000_000): Promise<void> {
  const dirs: string[] = [];
  const walk = async (dir: string) => {
    dirs.push(dir);
    for (const entry of await fs.readdir(dir, { withFileTypes: true })) if (entry.isDirectory()) await walk(path.join(dir, entry.name));
  };
  await walk(root);
  for (const dir of dirs.reverse()) await fs.utimes(dir, seconds, seconds);
}

/** `backups restore ARGS` in the world. */
export function restore(world: World, ...args: string[]): Promise<CliRun> {
  return brokeredShell(world, ['backups', 'restore', ...args]);
}

/** Run COMMAND in `dir` of the workspace as one turn of `session`; fails the test unless it exits 0. Returns the turn id. */
export async function turnIn(world: World, session: string, dir: string, command: string, message = command): Promise<string> {
  const before = new Set((await turnsOf(world, session)).map((t) => t.id));
  const result = await run(world, `cd ${JSON.stringify(dir)} && ${command}`, { session, message });
  expect(result.status, describeRun(result)).toBe(0);
  expect(result.stderr).not.toContain('brokered-shell: denied');
  const added = (await turnsOf(world, session)).filter((t) => !before.has(t.id));
  expect(added.map((t) => t.message)).toEqual([message]);
  return added[0]!.id;
}

/** The rescue turn id a restore printed. */
export function rescueOf(result: CliRun): string {
  const id = /kept in turn (\S+) /.exec(result.out)?.[1];
  if (id === undefined) throw new Error(`no rescue turn in:\n${describeRun(result)}`);
  return id;
}
