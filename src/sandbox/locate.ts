import { accessSync, constants, existsSync } from 'node:fs';
import path from 'node:path';
import { BrokerError, ErrorCodes } from '../core/errors.js';
import { findPackageRoot } from '../native/loader.js';

/** The launcher's file name; node-gyp builds it next to the addon. */
export const SANDBOX_BINARY = 'brokered-sandbox';
const BUILD_DIRS = ['build/Release', 'build/Debug'] as const;

/** The launcher paths tried under the package root, in order. */
export function sandboxBinaryCandidates(root: string): string[] {
  return BUILD_DIRS.map((dir) => path.join(root, dir, SANDBOX_BINARY));
}

/**
 * The built `brokered-sandbox` executable of this package (found from the package
 * root, never from PATH). Throws NATIVE_UNAVAILABLE naming every path tried.
 */
export function locateSandboxBinary(root: string = findPackageRoot()): string {
  const tried: { path: string; reason: string }[] = [];
  for (const candidate of sandboxBinaryCandidates(root)) {
    if (!existsSync(candidate)) {
      tried.push({ path: candidate, reason: 'not found' });
      continue;
    }
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      tried.push({ path: candidate, reason: 'not executable' });
    }
  }
  throw new BrokerError(
    ErrorCodes.NATIVE_UNAVAILABLE,
    [
      `the ${SANDBOX_BINARY} launcher was not found; tried:`,
      ...tried.map((attempt) => `  ${attempt.path}: ${attempt.reason}`),
      'Build it with `npm run build` (or `npx node-gyp rebuild`) in the package root.',
    ].join('\n'),
    { details: { root, tried } },
  );
}
