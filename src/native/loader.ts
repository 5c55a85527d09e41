import { accessSync, constants, existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { BrokerError, ErrorCodes } from '../core/errors.js';
import { missingBindingFunctions, isNativeBinding, type NativeBinding } from './bindings.js';

const PACKAGE_NAME = 'brokered-shell';
const ADDON_FILE = 'brokered_shell_native.node';

/**
 * Where the native parts (addon, launcher, preload library, request client) are looked
 * for under the package root, in order. A build made here comes first: node-gyp makes one
 * only when asked (a developer) or when no prebuild fits this machine (the install script,
 * toolchain/install-native.mjs). Then the prebuild the package was packed with
 * (toolchain/prepack.mjs). Kept in step with toolchain/native-dirs.mjs, which the install
 * scripts read before dist/ exists (test/package/native-dirs.test.ts checks).
 */
export function nativeDirs(platform: string = process.platform, arch: string = process.arch): string[] {
  return ['build/Release', 'build/Debug', `prebuilds/${platform}-${arch}`];
}

/** The paths tried for one native file under `root`, in order. */
export function nativeCandidates(root: string, file: string): string[] {
  return nativeDirs().map((dir) => path.join(root, dir, file));
}

const packageJsonSchema = z.object({ name: z.string() });

export interface LoadAttempt {
  path: string;
  reason: string;
}

/** Details of a NATIVE_UNAVAILABLE error: what was looked for, under which root, and each try. */
const nativeUnavailableDetailsSchema = z.object({
  what: z.string(),
  root: z.string(),
  tried: z.array(z.object({ path: z.string(), reason: z.string() })),
});
export type NativeUnavailableDetails = z.infer<typeof nativeUnavailableDetailsSchema>;

/** How a missing or unusable native part is repaired, where it is installed and in a checkout. */
export const REBUILD_HINT = 'rebuild it: `npm rebuild brokered-shell` where the package is installed, `npm run build` (or `npx node-gyp rebuild`) in a checkout';

/** NATIVE_UNAVAILABLE for `what` (the addon, the launcher, …), listing every path tried and why each failed. */
export function nativeUnavailable(what: string, root: string, tried: LoadAttempt[]): BrokerError {
  const details: NativeUnavailableDetails = { what, root, tried };
  return new BrokerError(
    ErrorCodes.NATIVE_UNAVAILABLE,
    [`${what}; tried:`, ...tried.map((attempt) => `  ${attempt.path}: ${attempt.reason}`), `To ${REBUILD_HINT}.`].join('\n'),
    { details: { ...details } },
  );
}

/**
 * A native part's failure on one line (a CLI's refusal, a doctor row): what is missing and
 * why each path tried did not do. Other errors: their first line.
 */
export function nativeProblemLine(error: unknown): string {
  const parsed = error instanceof BrokerError ? nativeUnavailableDetailsSchema.safeParse(error.details) : undefined;
  if (!parsed?.success) return reasonOf(error);
  const { what, tried } = parsed.data;
  return `${what} (tried ${tried.map((attempt) => `${attempt.path}: ${attempt.reason}`).join('; ')}); ${REBUILD_HINT}`;
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
  return nativeCandidates(root, ADDON_FILE);
}

/**
 * The first of the native folders under `root` holding `file` usable as `use` says (an
 * executable, or a library to read). Throws NATIVE_UNAVAILABLE naming every path tried.
 */
export function locateNativeFile(root: string, file: string, what: string, use: 'execute' | 'read'): string {
  const tried: LoadAttempt[] = [];
  for (const candidate of nativeCandidates(root, file)) {
    if (!existsSync(candidate)) {
      tried.push({ path: candidate, reason: 'not found' });
      continue;
    }
    try {
      accessSync(candidate, use === 'execute' ? constants.X_OK : constants.R_OK);
      return candidate;
    } catch {
      tried.push({ path: candidate, reason: use === 'execute' ? 'not executable' : 'not readable' });
    }
  }
  throw nativeUnavailable(`${what} was not found`, root, tried);
}

function reasonOf(error: unknown): string {
  return error instanceof Error ? error.message.split('\n')[0] ?? error.message : String(error);
}

/**
 * Loads the addon from the native folders under `root` (no memo). Throws
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
  throw nativeUnavailable(`the ${PACKAGE_NAME} native addon could not be loaded`, root, attempts);
}

let memo: NativeBinding | undefined;

/** The addon of this package, loaded on first use. A failed load is retried on the next call. */
export function native(): NativeBinding {
  memo ??= loadNative(findPackageRoot());
  return memo;
}
