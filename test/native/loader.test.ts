import fs from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { BrokerError, ErrorCodes } from '../../src/core/errors.js';
import { addonCandidates, findPackageRoot, loadNative, native } from '../../src/native/index.js';
import { makeTempDir, removeDir } from './helpers.js';

function loadError(root: string): BrokerError {
  try {
    loadNative(root);
  } catch (error) {
    if (error instanceof BrokerError) return error;
    throw error;
  }
  throw new Error('expected loadNative to fail');
}

describe('native loader', () => {
  let root: string;

  beforeEach(() => {
    root = makeTempDir('loader');
  });

  afterEach(() => removeDir(root));

  it('fails with NATIVE_UNAVAILABLE naming every path tried', () => {
    const error = loadError(root);
    expect(error.code).toBe(ErrorCodes.NATIVE_UNAVAILABLE);
    const [release, debug] = addonCandidates(root);
    expect(release).toBe(path.join(root, 'build', 'Release', 'brokered_shell_native.node'));
    expect(debug).toBe(path.join(root, 'build', 'Debug', 'brokered_shell_native.node'));
    expect(error.message).toContain(`${release}: not found`);
    expect(error.message).toContain(`${debug}: not found`);
    expect(error.message).toContain('npm run build');
  });

  it('says why a present but broken addon did not load, then tries the next folder', () => {
    const [release, debug] = addonCandidates(root);
    if (release === undefined || debug === undefined) throw new Error('two candidates expected');
    fs.mkdirSync(path.dirname(release), { recursive: true });
    fs.writeFileSync(release, 'not an ELF file');
    const error = loadError(root);
    expect(error.message).toMatch(new RegExp(`${release}: failed to load: .*`));
    expect(error.message).toContain(`${debug}: not found`);

    // A working build in Debug is used when Release is broken.
    fs.mkdirSync(path.dirname(debug), { recursive: true });
    fs.copyFileSync(path.join(findPackageRoot(), 'build', 'Release', 'brokered_shell_native.node'), debug);
    expect(typeof loadNative(root).probeKernel).toBe('function');
  });

  it('finds this package and memoises the binding', () => {
    expect(fs.existsSync(path.join(findPackageRoot(), 'binding.gyp'))).toBe(true);
    expect(native()).toBe(native());
  });
});
