import { findPackageRoot, locateNativeFile, nativeCandidates } from '../native/loader.js';

/** The launcher's file name; node-gyp builds it next to the addon. */
export const SANDBOX_BINARY = 'brokered-sandbox';
/** The broker client the command dispatcher (shims/brokered-bin) sends its announcements with. */
export const REQUEST_CLIENT = 'brokered-request';

/** The launcher paths tried under the package root, in order. */
export function sandboxBinaryCandidates(root: string): string[] {
  return nativeCandidates(root, SANDBOX_BINARY);
}

/**
 * The built `brokered-sandbox` executable of this package (found from the package
 * root, never from PATH). Throws NATIVE_UNAVAILABLE naming every path tried.
 */
export function locateSandboxBinary(root: string = findPackageRoot()): string {
  return locateNativeFile(root, SANDBOX_BINARY, `the ${SANDBOX_BINARY} launcher`, 'execute');
}

/** The built `brokered-request` client of this package; throws NATIVE_UNAVAILABLE naming every path tried. */
export function locateRequestClient(root: string = findPackageRoot()): string {
  return locateNativeFile(root, REQUEST_CLIENT, `the ${REQUEST_CLIENT} client`, 'execute');
}
