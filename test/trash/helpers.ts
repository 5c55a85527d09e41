import { promises as fs } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** A temp tree with its own XDG_DATA_HOME, so no test ever touches the real home trash. */
export interface Sandbox {
  root: string;
  /** A place for items to trash. */
  work: string;
  env: NodeJS.ProcessEnv;
  homeTrash: string;
  cleanup: () => Promise<void>;
}

export async function makeSandbox(prefix = 'bsh-trash-'): Promise<Sandbox> {
  const root = await fs.mkdtemp(join(tmpdir(), prefix));
  const work = join(root, 'work');
  await fs.mkdir(work);
  const xdg = join(root, 'xdg-data');
  return {
    root,
    work,
    env: { XDG_DATA_HOME: xdg, HOME: join(root, 'home') },
    homeTrash: join(xdg, 'Trash'),
    cleanup: () => fs.rm(root, { recursive: true, force: true }),
  };
}

/** A local-time date, so the expected DeletionDate text does not depend on the TZ of the run. */
export const FIXED_NOW = new Date(2024, 0, 2, 3, 4, 5);
export const FIXED_NOW_TEXT = '2024-01-02T03:04:05';

export async function exists(path: string): Promise<boolean> {
  return fs.lstat(path).then(
    () => true,
    () => false,
  );
}

/** Every file under `dir` with its bytes, keyed by relative path (directories end with '/'; links as '-> target'). */
export async function snapshotTree(dir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  const walk = async (current: string, rel: string): Promise<void> => {
    for (const entry of (await fs.readdir(current, { withFileTypes: true })).sort((a, b) => a.name.localeCompare(b.name))) {
      const full = join(current, entry.name);
      const key = rel === '' ? entry.name : `${rel}/${entry.name}`;
      if (entry.isDirectory()) {
        out[`${key}/`] = '';
        await walk(full, key);
      } else if (entry.isSymbolicLink()) {
        out[key] = `-> ${await fs.readlink(full)}`;
      } else {
        out[key] = (await fs.readFile(full)).toString('base64');
      }
    }
  };
  await walk(dir, '');
  return out;
}
