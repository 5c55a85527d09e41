import { constants, closeSync } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import {
  BrokerError,
  ErrorCodes,
  Stage,
  errnoOf,
  type Broker,
  type BrokerPlugin,
  type HostOperation,
  type HostOpResult,
  type ResolvedRequest,
  type ResolvedTarget,
} from '../../core/index.js';
import { parseOptions } from '../options.js';
import { copyPath, isWithin } from './copy.js';
import { deletePath } from './delete.js';
import { FsAt, fsError } from './fs-at.js';
import { makeDirectories } from './mkdir.js';

export const hostOperationsOptionsSchema = z.strictObject({
  /** Where `delete` goes when the request does not say: the trash, or gone for good. */
  defaultDeleteMode: z.enum(['trash', 'unlink']).default('trash'),
  /** Environment for locating the home trash (XDG_DATA_HOME, HOME); defaults to the process's. */
  env: z.record(z.string(), z.string()).optional(),
  /**
   * Directories the command changes without asking (its temp dir). A directory there can
   * change between the policy's look at what it holds and the operation, so a rename or a
   * recursive copy from there fails with EXDEV, as from another file system: the caller
   * copies file by file, each asked about on its own. A hard link from elsewhere into
   * them fails the same way: writes through that name would skip the broker.
   */
  volatileRoots: z.array(z.string().refine((p) => path.isAbsolute(p), 'must be an absolute path')).default([]),
});
export type HostOperationsOptions = z.input<typeof hostOperationsOptionsSchema>;

function target(resolved: ResolvedRequest, role: ResolvedTarget['role']): ResolvedTarget {
  const found = resolved.targets.find((t) => t.role === role);
  if (!found) throw new BrokerError(ErrorCodes.BAD_REQUEST, `request has no ${role} path`);
  return found;
}

/**
 * Performs host operations (delete, mkdir, rename, copy, chmod, link, touch) on the
 * paths the pipeline resolved and approved, after the backup. Each operation is one
 * tap on its own key of the execute-host-op HookMap, at a late stage so organisation
 * plugins can take an operation over first.
 */
export class HostOperationsPlugin implements BrokerPlugin {
  static readonly PLUGIN_NAME = 'host-operations';
  readonly name = HostOperationsPlugin.PLUGIN_NAME;
  readonly #options: z.infer<typeof hostOperationsOptionsSchema>;
  #fsAt: FsAt | undefined;

  constructor(options: HostOperationsOptions = {}, fsAt?: FsAt) {
    this.#options = parseOptions(this.name, hostOperationsOptionsSchema, options);
    this.#fsAt = fsAt;
  }

  apply(broker: Broker): void {
    const operations: Record<HostOperation, (r: ResolvedRequest) => Promise<HostOpResult>> = {
      delete: (r) => this.#delete(r),
      mkdir: (r) => this.#mkdir(r),
      rename: async (r) => {
        this.#refuseVolatile(target(r, 'from').resolved, target(r, 'to').resolved, 'a rename');
        this.#fs().rename(target(r, 'from').resolved, target(r, 'to').resolved);
        return {};
      },
      copy: async (r) => {
        const recursive = r.request.options.recursive ?? false;
        if (recursive) this.#refuseVolatile(target(r, 'from').resolved, target(r, 'to').resolved, 'a recursive copy');
        await copyPath(this.#fs(), target(r, 'from').resolved, target(r, 'to').resolved, recursive);
        return {};
      },
      chmod: async (r) => {
        const mode = r.request.options.mode;
        if (mode === undefined) throw new BrokerError(ErrorCodes.BAD_REQUEST, 'chmod needs a mode');
        this.#fs().chmod(target(r, 'path').resolved, mode);
        return {};
      },
      link: async (r) => {
        const to = target(r, 'to').resolved;
        const { symbolic, linkTarget } = r.request.options;
        if (symbolic) {
          if (!linkTarget) throw new BrokerError(ErrorCodes.BAD_REQUEST, 'a symbolic link needs its content (linkTarget)');
          this.#fs().symlink(linkTarget, to);
        } else {
          this.#refuseIntoVolatile(target(r, 'from').resolved, to);
          this.#fs().link(target(r, 'from').resolved, to);
        }
        return {};
      },
      touch: (r) => this.#touch(r),
    };
    for (const [operation, perform] of Object.entries(operations)) {
      broker.hooks.executeHostOp
        .for(operation)
        .tapPromise({ name: this.name, stage: Stage.LATE }, async (resolved, _decision, context) => {
          const result = await perform(resolved).catch((error: unknown) => {
            throw hostFailure(operation, error);
          });
          context.log.info(
            { phase: 'host-op', operation, paths: resolved.targets.map((t) => t.resolved), ...result },
            `host ${operation} done`,
          );
          return result;
        });
    }
  }

  #volatileRootOf(file: string): string | undefined {
    return this.#options.volatileRoots.find((dir) => isWithin(file, dir));
  }

  /** EXDEV for a source in a volatile root when the destination is not in one too. */
  #refuseVolatile(source: string, destination: string, what: string): void {
    const root = this.#volatileRootOf(source);
    if (root === undefined || this.#volatileRootOf(destination) !== undefined) return;
    throw fsError('EXDEV', `${what} out of ${root}, which the command changes without asking, is not done whole: copy its files one by one`);
  }

  /** EXDEV for a hard link from elsewhere into a volatile root: writes through that name would skip the broker (the kernel path's rule too). */
  #refuseIntoVolatile(source: string, destination: string): void {
    const root = this.#volatileRootOf(destination);
    if (root === undefined || this.#volatileRootOf(source) !== undefined) return;
    throw fsError('EXDEV', `a hard link into ${root} to a file from elsewhere would let writes there skip the broker`);
  }

  #fs(): FsAt {
    this.#fsAt ??= new FsAt();
    return this.#fsAt;
  }

  async #delete(resolved: ResolvedRequest): Promise<HostOpResult> {
    const { options } = resolved.request;
    const result = await deletePath(this.#fs(), target(resolved, 'path').resolved, {
      mode: options.deleteMode ?? this.#options.defaultDeleteMode,
      recursive: options.recursive ?? false,
      force: options.force ?? false,
      ...(this.#options.env ? { env: this.#options.env } : {}),
    });
    return result.trashedTo ? { trashedTo: result.trashedTo } : {};
  }

  async #mkdir(resolved: ResolvedRequest): Promise<HostOpResult> {
    const path = target(resolved, 'path');
    const mode = resolved.request.options.mode ?? 0o777;
    if (resolved.request.options.recursive) await makeDirectories(this.#fs(), path.resolved, mode);
    else this.#fs().mkdir(path.resolved, mode);
    return {};
  }

  async #touch(resolved: ResolvedRequest): Promise<HostOpResult> {
    const path = target(resolved, 'path');
    const { atime, mtime } = resolved.request.options;
    if (path.kind === 'absent') {
      closeSync(this.#fs().open(path.resolved, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 0o666));
    }
    this.#fs().utimes(path.resolved, atime, mtime);
    return {};
  }
}

/** A file-system failure as HOST_OP_FAILED with its errno; the plugin's own errors keep their code. */
function hostFailure(operation: string, error: unknown): BrokerError {
  if (error instanceof BrokerError) return error;
  const message = error instanceof Error ? error.message : String(error);
  return new BrokerError(ErrorCodes.HOST_OP_FAILED, `${operation}: ${message}`, { cause: error, errno: errnoOf(error) });
}
