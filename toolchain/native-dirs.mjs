// Where the native parts live under the package root. src/native/loader.ts looks in the
// same folders in the same order (test/package/native-dirs.test.ts checks); this copy is
// for the install and pack scripts, which run before dist/ exists.

/** What node-gyp builds from binding.gyp: the addon, the launcher, the preload library, the request client. */
export const NATIVE_FILES = ['brokered_shell_native.node', 'brokered-sandbox', 'brokered-preload.so', 'brokered-request'];

/** Where node-gyp puts a release build. */
export const BUILD_DIR = 'build/Release';

/** Where the package carries the binaries it was packed with, for this platform (prebuildify's layout). */
export function prebuildDir(platform = process.platform, arch = process.arch) {
  return `prebuilds/${platform}-${arch}`;
}

/** The folders looked in, in order: a build made here, then the prebuild. */
export function nativeDirs(platform = process.platform, arch = process.arch) {
  return [BUILD_DIR, 'build/Debug', prebuildDir(platform, arch)];
}
