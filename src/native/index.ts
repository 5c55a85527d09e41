export {
  native,
  loadNative,
  findPackageRoot,
  addonCandidates,
  locateNativeFile,
  nativeCandidates,
  nativeDirs,
  nativeProblemLine,
  REBUILD_HINT,
  type LoadAttempt,
  type NativeUnavailableDetails,
} from './loader.js';
export { isNativeBinding, missingBindingFunctions, BINDING_FUNCTION_NAMES, type NativeBinding } from './bindings.js';
export { socketFd, socketPeerCredentials } from './socket-fd.js';
export {
  isNativeErrnoError,
  kernelProbeSchema,
  peerCredentialsSchema,
  timeSpecFromNs,
  type KernelProbe,
  type NativeErrnoError,
  type PeerCredentials,
  type RenameAtOptions,
  type TimeSpec,
  type UnlinkAtOptions,
  type UtimeValue,
} from './types.js';
