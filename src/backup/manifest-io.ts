import fs from 'node:fs/promises';
import path from 'node:path';
import { BrokerError, ErrorCodes } from '../core/errors.js';
import type { Logger } from '../core/logger.js';
import { errorCode, writeFileAtomic } from './fs-util.js';
import { manifestFileName, turnIdSchema, type StoreLayout } from './layout.js';
import { describeIssues, turnManifestSchema, type TurnManifest } from './manifest-schema.js';

/** Validate, then write atomically: a manifest on disk is always whole and always valid. */
export async function writeManifest(layout: StoreLayout, manifest: TurnManifest): Promise<void> {
  const checked = turnManifestSchema.safeParse(manifest);
  if (!checked.success) {
    throw new BrokerError(ErrorCodes.BACKUP_FAILED, `refusing to write an invalid manifest for turn ${manifest.id}:\n${describeIssues(checked.error)}`);
  }
  const target = path.join(layout.turns, manifestFileName(manifest.id));
  await writeFileAtomic(target, `${JSON.stringify(checked.data, null, 2)}\n`, layout.tmp);
}

/** Read one manifest back through the schema. */
export async function readManifestFile(layout: StoreLayout, sessionId: string, turnId: string): Promise<TurnManifest> {
  const file = path.join(layout.turns, manifestFileName(turnId));
  let text: string;
  try {
    text = await fs.readFile(file, 'utf8');
  } catch (error) {
    if (errorCode(error) === 'ENOENT') {
      throw new BrokerError(ErrorCodes.TURN_NOT_FOUND, `no turn ${turnId} in session ${sessionId}`, { details: { turnId, sessionId } });
    }
    throw new BrokerError(ErrorCodes.STORE_UNAVAILABLE, `cannot read manifest ${file}: ${String(error)}`, { cause: error, errno: errorCode(error) });
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    throw new BrokerError(ErrorCodes.BACKUP_FAILED, `manifest of turn ${turnId} is not valid JSON`, { cause: error });
  }
  const parsed = turnManifestSchema.safeParse(json);
  if (!parsed.success) {
    throw new BrokerError(ErrorCodes.BACKUP_FAILED, `manifest of turn ${turnId} is damaged:\n${describeIssues(parsed.error)}`);
  }
  if (parsed.data.id !== turnId || parsed.data.sessionId !== sessionId) {
    throw new BrokerError(ErrorCodes.BACKUP_FAILED, `manifest ${file} names turn ${parsed.data.id} of session ${parsed.data.sessionId}`);
  }
  return parsed.data;
}

export interface ReadManifestsOptions {
  /** 'skip' logs and leaves damaged manifests out (listing); 'throw' fails (anything that deletes). */
  onDamaged: 'skip' | 'throw';
  log: Logger;
}

/** All manifests of a store, ordered by start time, then id. */
export async function readManifestsIn(layout: StoreLayout, sessionId: string, options: ReadManifestsOptions): Promise<TurnManifest[]> {
  let names: string[];
  try {
    names = await fs.readdir(layout.turns);
  } catch (error) {
    if (errorCode(error) === 'ENOENT') return [];
    throw new BrokerError(ErrorCodes.STORE_UNAVAILABLE, `cannot list ${layout.turns}: ${String(error)}`, { cause: error, errno: errorCode(error) });
  }
  const out: TurnManifest[] = [];
  for (const name of names) {
    if (!name.endsWith('.json')) continue;
    const turnId = name.slice(0, -'.json'.length);
    try {
      if (!turnIdSchema.safeParse(turnId).success) {
        throw new BrokerError(ErrorCodes.BACKUP_FAILED, `unexpected file ${name} among manifests`);
      }
      out.push(await readManifestFile(layout, sessionId, turnId));
    } catch (error) {
      if (options.onDamaged === 'throw') throw error;
      options.log.warn({ file: { name }, err: error }, 'skipping a damaged manifest');
    }
  }
  return sortTurns(out);
}

export function sortTurns(turns: TurnManifest[]): TurnManifest[] {
  return turns.sort((a, b) => compareTimes(a.startedAt, b.startedAt) || compare(a.sessionId, b.sessionId) || compare(a.id, b.id));
}

/** ISO times may carry offsets, so compare instants, not strings. */
export function compareTimes(a: string, b: string): number {
  return Date.parse(a) - Date.parse(b);
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
