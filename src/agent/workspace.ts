import { realpath, stat } from 'node:fs/promises';
import path from 'node:path';
import { BrokerError, ErrorCodes } from '../core/index.js';

/**
 * The workspace commands run in, as a real path: the directory given (or the current
 * one). A missing path or a file is bad input, said in a person's words.
 */
export async function resolveWorkspace(dir: string | undefined): Promise<string> {
  const named = path.resolve(dir ?? process.cwd());
  let real: string;
  try {
    real = await realpath(named);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') throw new BrokerError(ErrorCodes.INVALID_OPTIONS, `the workspace ${named} does not exist`, { cause: error });
    throw error;
  }
  if (!(await stat(real)).isDirectory()) throw new BrokerError(ErrorCodes.INVALID_OPTIONS, `the workspace ${named} is not a directory`);
  return real;
}
