import { promises as fs } from 'node:fs';
import { dirname } from 'node:path';

/**
 * Finds the "top directory" of a volume (its mount point) for a directory given as a
 * real path. The kernel's own list (/proc/self/mountinfo) is asked first, because walking
 * up by st_dev overshoots a bind mount of a subtree (same device above and below).
 * The walk is the fallback when mountinfo is unreadable or disagrees with stat (btrfs
 * subvolumes report their own st_dev, and rename cannot cross them, so the subvolume
 * root is then the right top directory).
 */

export interface MountEntry {
  mountPoint: string;
  /** `major:minor` as the kernel prints it. */
  device: string;
  fsType: string;
}

/** Undoes mountinfo's octal escapes (`\040` for space, `\012` for newline, …). */
function unescapeMountField(field: string): string {
  const bytes: number[] = [];
  for (let i = 0; i < field.length; i += 1) {
    const octal = field.slice(i + 1, i + 4);
    if (field[i] === '\\' && /^[0-7]{3}$/.test(octal)) {
      bytes.push(Number.parseInt(octal, 8));
      i += 3;
    } else {
      bytes.push(...Buffer.from(field[i] ?? '', 'utf8'));
    }
  }
  return Buffer.from(bytes).toString('utf8');
}

export function parseMountInfo(text: string): MountEntry[] {
  const entries: MountEntry[] = [];
  for (const line of text.split('\n')) {
    // id parent major:minor root mount-point options [optional…] - fstype source superopts
    const fields = line.split(' ');
    const separator = fields.indexOf('-', 6);
    const device = fields[2];
    const mountPoint = fields[4];
    if (device === undefined || mountPoint === undefined || separator < 0) continue;
    entries.push({ mountPoint: unescapeMountField(mountPoint), device, fsType: fields[separator + 1] ?? '' });
  }
  return entries;
}

function contains(mountPoint: string, dir: string): boolean {
  return mountPoint === '/' || dir === mountPoint || dir.startsWith(`${mountPoint}/`);
}

/** The innermost mount containing `realDir`; among stacked mounts on one point, the last listed (the visible one). */
export function innermostMount(entries: readonly MountEntry[], realDir: string): MountEntry | undefined {
  let best: MountEntry | undefined;
  for (const entry of entries) {
    if (!contains(entry.mountPoint, realDir)) continue;
    if (best === undefined || entry.mountPoint.length >= best.mountPoint.length) best = entry;
  }
  return best;
}

async function walkUpSameDevice(realDir: string, device: number): Promise<string> {
  let current = realDir;
  for (;;) {
    const parent = dirname(current);
    if (parent === current) return current;
    const stat = await fs.stat(parent);
    if (stat.dev !== device) return current;
    current = parent;
  }
}

/**
 * @param realDir an absolute, symlink-free directory path
 * @param device  `stat(realDir).dev`
 */
export async function findTopDir(realDir: string, device: number): Promise<string> {
  let text: string | undefined;
  try {
    text = await fs.readFile('/proc/self/mountinfo', 'utf8');
  } catch {
    text = undefined;
  }
  if (text !== undefined) {
    const mount = innermostMount(parseMountInfo(text), realDir);
    if (mount !== undefined) {
      const stat = await fs.stat(mount.mountPoint).catch(() => undefined);
      if (stat?.dev === device) return mount.mountPoint;
    }
  }
  return walkUpSameDevice(realDir, device);
}
