import { randomBytes } from 'node:crypto';
import { rmSync, statSync } from 'node:fs';
import { mkdtemp, realpath, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { resolveHome, validateSessionId } from '../backup/layout.js';
import { BrokerError } from '../core/errors.js';
import { silentLogger, type Broker, type Logger } from '../core/index.js';
import { BrokerServer } from '../ipc/server.js';
import { socketPeerCredentials } from '../native/index.js';
import { addNetworkAllow } from '../config/network-save.js';
import { CacheRootsPlugin } from '../plugins/cache-roots/index.js';
import { networkDefaults } from '../plugins/network/index.js';
import { standardPlugins } from '../plugins/standard.js';
import { locatePreloadLibrary } from '../sandbox/preload.js';
import { completeSessionConfig, standardOptionsOf, type SessionConfig } from './config.js';
import { createBroker } from './create-broker.js';
import { SandboxUnavailableError } from './errors.js';
import { checkAddon, checkLauncher, checkStore } from './preflight.js';
import { selectRuntime, type RuntimeChoice } from './runtime.js';
import { SOCKET_NAME, makeSocketDir } from './socket-dir.js';
import { resolveWorkspace } from './workspace.js';
import type { SandboxSessionOptions } from './types.js';

/** A resolv.conf of its own for the broker to find the resolvers in (tests point it at a resolver they run). */
export const RESOLV_CONF_ENV = 'BROKERED_SHELL_RESOLV_CONF';

export const newId = (prefix: string) => `${prefix}-${Date.now().toString(36)}-${randomBytes(4).toString('hex')}`;

/** What the sandbox needs while the session lives; absent when the sandbox is disabled. */
export interface SandboxResources {
  runtime: RuntimeChoice;
  socketPath: string;
  /** Each call gets its own temp dir below this one (a writable root). */
  scratchBase: string;
}

export interface SessionResources {
  sessionId: string;
  workspace: string;
  /** The backup store root. */
  home: string;
  config: SessionConfig;
  log: Logger;
  env: NodeJS.ProcessEnv;
  broker: Broker;
  /** What the preload runtime's Landlock lets the command write: the writable roots and the existing cache roots. */
  writableRoots: string[];
  sandbox: SandboxResources | undefined;
  /** Undo what was set up, in reverse order. */
  release(): Promise<void>;
}

async function step<T>(what: string, action: () => Promise<T>): Promise<T> {
  try {
    return await action();
  } catch (error) {
    const message = error instanceof BrokerError ? `${error.message} [${error.code}]` : error instanceof Error ? error.message : String(error);
    throw new SandboxUnavailableError(`${what}: ${message}`, { cause: error });
  }
}

function isDirectory(dir: string): boolean {
  try {
    return statSync(dir).isDirectory();
  } catch {
    return false;
  }
}

/** Temp dirs of sessions still open, removed if the process exits without closing them. */
const openSessionDirs = new Set<string>();
function removeOpenSessionDirs(): void {
  for (const dir of openSessionDirs) rmSync(dir, { recursive: true, force: true });
}
function removedAtExit(dirs: readonly string[]): void {
  if (openSessionDirs.size === 0) process.once('exit', removeOpenSessionDirs);
  for (const dir of dirs) openSessionDirs.add(dir);
}
function keptAfterExit(dirs: readonly string[]): void {
  for (const dir of dirs) openSessionDirs.delete(dir);
  if (openSessionDirs.size === 0) process.off('exit', removeOpenSessionDirs);
}

/**
 * The runtime, the temp and socket directories, the broker with the standard plugins
 * (plus the caller's) and its socket server. Anything that fails undoes what was made
 * and throws (SandboxUnavailableError for the sandbox's own needs).
 */
export async function setUpSession(options: SandboxSessionOptions): Promise<SessionResources> {
  const config = completeSessionConfig(options.config);
  const env = options.env ?? process.env;
  const log = options.logger ?? silentLogger();
  const workspace = await resolveWorkspace(options.workspace);
  // Names the session's store directory: a bad one is bad input, not a store to run without.
  const sessionId = validateSessionId(options.sessionId ?? newId('session'));
  const home = options.home ?? resolveHome(env);
  const undo: Array<() => Promise<unknown>> = [];
  // Before anything is made or started: what a command would otherwise fail on halfway.
  // The broker calls the addon in every session (backups, peer credentials).
  const launcher = config.sandbox.enabled ? checkLauncher() : undefined;
  checkAddon();
  // A store where a mkdir never returns (procfs) would hang the first backup.
  await checkStore(home, 'possible');
  const release = async () => {
    for (const action of undo.splice(0).reverse()) await action().catch(() => undefined);
  };
  try {
    let sandbox: SandboxResources | undefined;
    let socketDir: string | undefined;
    let scratchBase: string | undefined;
    let runtime: RuntimeChoice | undefined;
    if (launcher) {
      runtime = selectRuntime(config.sandbox.runtime, { seccomp: () => launcher, preload: () => locatePreloadLibrary() });
      if (runtime.fallback) log.warn({ phase: 'session', runtime: runtime.runtime }, runtime.fallback);
      // The preload runtime governs no connection: under a network policy it would leave the network open.
      if (runtime.runtime === 'preload' && config.network.mode !== 'open') {
        throw new SandboxUnavailableError(
          `the preload runtime cannot enforce network.mode "${config.network.mode}" (it does not govern connections); the seccomp runtime does, or set network.mode to "open" to run without a network policy`,
        );
      }
      scratchBase = await step("cannot make the command's temp dir", async () => {
        const dir = await realpath(await mkdtemp(path.join(os.tmpdir(), 'brokered-shell-scratch-')));
        undo.push(() => rm(dir, { recursive: true, force: true }));
        return dir;
      });
      socketDir = await step("cannot make the broker's socket dir", async () => {
        const dir = await makeSocketDir();
        undo.push(() => rm(dir, { recursive: true, force: true }));
        return dir;
      });
    }
    const standard = standardOptionsOf(config, {
      home,
      workspace,
      extraRoots: scratchBase ? [scratchBase] : [],
      volatileRoots: scratchBase ? [scratchBase] : [],
      protectedPaths: socketDir ? [socketDir] : [],
      ...(options.userHome ? { userHome: options.userHome } : {}),
      env,
      network: {
        defaults: config.network.mode === 'allowlist' ? networkDefaults({ env, userHome: options.userHome ?? os.homedir(), workspace }) : [],
        ...(env[RESOLV_CONF_ENV] ? { resolvConf: env[RESOLV_CONF_ENV] } : {}),
      },
    });
    const broker = createBroker({
      sessionId,
      logger: log,
      ...(options.policyTimeoutMs === undefined ? {} : { policyTimeoutMs: options.policyTimeoutMs }),
      plugins: [
        ...standardPlugins({ ...standard, networkSave: (rule, file) => addNetworkAllow(file, rule) }),
        ...(options.plugins ?? []),
      ],
    });
    undo.push(() => broker.close());
    // The preload runtime's Landlock must let the command write the caches (the library asks the broker first).
    const cacheDirs = broker.plugin<CacheRootsPlugin>(CacheRootsPlugin.PLUGIN_NAME)?.roots.roots.map((root) => root.real) ?? [];
    const writableRoots = [...standard.writableRoots, ...cacheDirs.filter(isDirectory)];
    if (runtime && socketDir && scratchBase) {
      const socketPath = path.join(socketDir, SOCKET_NAME);
      const server = new BrokerServer({ broker, socketPath, peerCredentials: socketPeerCredentials });
      await step('the broker cannot listen', async () => {
        undo.push(() => server.close());
        await server.listen();
      });
      // A session its owner never closes must not keep the process alive by its socket
      // alone, nor leave its socket and temp dirs behind when the process exits.
      server.unref();
      const dirs = [socketDir, scratchBase];
      removedAtExit(dirs);
      undo.push(async () => void keptAfterExit(dirs));
      sandbox = { runtime, socketPath, scratchBase };
    }
    return { sessionId, workspace, home, config, log, env, broker, writableRoots, sandbox, release };
  } catch (error) {
    await release();
    throw error;
  }
}
