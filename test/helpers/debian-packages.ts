import { spawnSync } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { beforeEach } from 'vitest';

/** The line that installs every Debian package the suite uses (as root). */
export const INSTALL_LINE = 'bash toolchain/install-debian-packages.sh';

/** Where `program` (a name looked up on PATH, or a path) is; undefined when it is not there. */
export function findProgram(program: string): string | undefined {
  if (program.includes('/')) {
    try {
      accessSync(program, constants.X_OK);
      return program;
    } catch {
      return undefined;
    }
  }
  const found = spawnSync('bash', ['-c', 'type -P "$1"', 'bash', program], { encoding: 'utf8' }).stdout.trim();
  return found === '' ? undefined : found;
}

/** How a missing program of a Debian package is installed. */
export function fromDebian(debianPackage: string): string {
  return `it comes with the Debian package ${debianPackage}: install it as root with \`${INSTALL_LINE}\``;
}

/**
 * Fails every test of the file, never skips it, while a program it needs is missing, saying
 * how to get it. (A throwing beforeAll makes vitest report the tests as skipped, so the check
 * runs before each test.) True when all are there, so setup that needs them can be left out.
 */
export function requirePrograms(needs: ReadonlyArray<readonly [program: string, install: string]>): boolean {
  const missing = needs.filter(([program]) => findProgram(program) === undefined);
  if (missing.length === 0) return true;
  const why = missing.map(([program, install]) => `${program} is missing: ${install}`).join('; ');
  beforeEach(() => {
    throw new Error(why);
  });
  return false;
}
