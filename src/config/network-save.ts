import { randomBytes } from 'node:crypto';
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { BrokerError, ErrorCodes } from '../core/index.js';
import { brokeredShellConfigSchema } from './schema.js';

/**
 * Adds an entry to `network.allow` of the home config, for a "save" answer to a
 * connection question. The file is read, changed and checked as a whole, then replaced
 * in one rename, so a reader never sees half of it; an entry already there is not added
 * twice. A file that does not parse is left as it is (the answer then fails).
 */
export async function addNetworkAllow(file: string, rule: string): Promise<void> {
  let value: Record<string, unknown> = {};
  try {
    value = JSON.parse(await readFile(file, 'utf8')) as Record<string, unknown>;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') {
      throw new BrokerError(ErrorCodes.INVALID_OPTIONS, `cannot add ${rule} to ${file}: ${(error as Error).message}`, { cause: error });
    }
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new BrokerError(ErrorCodes.INVALID_OPTIONS, `cannot add ${rule} to ${file}: it is not a JSON object`);
  const network = (typeof value.network === 'object' && value.network !== null ? value.network : {}) as Record<string, unknown>;
  const allow = Array.isArray(network.allow) ? network.allow : [];
  if (allow.includes(rule)) return;
  const next = { ...value, network: { ...network, allow: [...allow, rule] } };
  const checked = brokeredShellConfigSchema.safeParse(next);
  if (!checked.success) throw new BrokerError(ErrorCodes.INVALID_OPTIONS, `cannot add ${rule} to ${file}: the file would not be a valid configuration`);
  await mkdir(path.dirname(file), { recursive: true });
  const temp = `${file}.${randomBytes(4).toString('hex')}.tmp`;
  await writeFile(temp, `${JSON.stringify(next, null, 2)}\n`, { mode: 0o600 });
  await rename(temp, file);
}
