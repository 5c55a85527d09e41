import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { BrokerError, ErrorCodes } from '../core/errors.js';
import { missingBindingFunctions, isNativeBinding, type NativeBinding } from './bindings.js';

const PACKAGE_NAME = 'brokered-shell';
const ADDON_FILE = 'brokered_shell_native.node';
/** Where node-gyp puts the addon, in the order we prefer them. */
const BUILD_DIRS = ['build/Release', 'build/Debug'] as const;

const packageJsonSchema = z.object({ name: z.string() });

export interface LoadAttempt {
  path: string;
  reason: string;
}

/**
 * The package root: the nearest ancestor of this file whose package.json names this
 * package. Works from src/native (tsx, vitest) and from dist/native (the built package).
 */
export function findPackageRoot(from: string = path.dirname(fileURLToPath(import.meta.url))): string {
  for (let dir = from; ; dir = path.dirname(dir)) {
    const manifest = path.join(dir, 'package.json');
    if (existsSync(manifest)) {
      try {
        const parsed = packageJsonSchema.safeParse(JSON.parse(readFileSync(manifest, 'utf8')));
        if (parsed.success && parsed.data.name === PACKAGE_NAME) return dir;
      } catch {
        // An unreadable or invalid manifest is not ours; keep walking up.
      }
    }
    if (path.dirname(dir) === dir) break;
  }
  throw new BrokerError(
    ErrorCodes.NATIVE_UNAVAILABLE,
    `cannot find the ${PACKAGE_NAME} package root above ${from}`,
  );
}

/** The addon paths tried under `root`, in order. */
export function addonCandidates(root: string): string[] {
  return BUILD_DIRS.map((dir) => path.join(root, dir, ADDON_FILE));
}

function reasonOf(error: unknown): string {
  return error instanceof Error ? error.message.split('\n')[0] ?? error.message : String(error);
}

/**
 * Loads the addon from the build folders under `root` (no memo). Throws
 * NATIVE_UNAVAILABLE naming every path tried and why each failed.
 */
export function loadNative(root: string): NativeBinding {
  const require = createRequire(import.meta.url);
  const attempts: LoadAttempt[] = [];
  for (const candidate of addonCandidates(root)) {
    if (!existsSync(candidate)) {
      attempts.push({ path: candidate, reason: 'not found' });
      continue;
    }
    let loaded: unknown;
    try {
      loaded = require(candidate);
    } catch (error) {
      attempts.push({ path: candidate, reason: `failed to load: ${reasonOf(error)}` });
      continue;
    }
    if (isNativeBinding(loaded)) return loaded;
    attempts.push({
      path: candidate,
      reason: `stale build, missing functions: ${missingBindingFunctions(loaded).join(', ')}`,
    });
  }
  const lines = attempts.map((attempt) => `  ${attempt.path}: ${attempt.reason}`);
  throw new BrokerError(
    ErrorCodes.NATIVE_UNAVAILABLE,
    [
      `the ${PACKAGE_NAME} native addon could not be loaded; tried:`,
      ...lines,
      'Build it with `npm run build` (or `npx node-gyp rebuild`) in the package root.',
    ].join('\n'),
    { details: { root, tried: attempts } },
  );
}

let memo: NativeBinding | undefined;

/** The addon of this package, loaded on first use. A failed load is retried on the next call. */
export function native(): NativeBinding {
  memo ??= loadNative(findPackageRoot());
  return memo;
}
