import type { Access, HostOperation, Operation, RequestTarget } from '../core/index.js';

/**
 * How each operation touches its paths, for policy. Every front end (socket protocols,
 * kernel supervisor, in-process API) builds its targets here so that a rename means the
 * same thing whoever reports it.
 */
export interface OperationPaths {
  path?: string;
  from?: string;
  to?: string;
  symbolic?: boolean;
}

const SINGLE_PATH_ACCESS: Partial<Record<Operation, Access>> = {
  delete: 'delete',
  mkdir: 'write',
  chmod: 'write',
  touch: 'write',
  truncate: 'write',
  chown: 'write',
  xattr: 'write',
  mknod: 'write',
};

export class TargetError extends Error {}

function need(value: string | undefined, field: string, operation: Operation): string {
  if (value === undefined || value === '') throw new TargetError(`${operation} needs "${field}"`);
  return value;
}

/** The targets of a host or kernel operation (the open of a token request is separate). */
export function operationTargets(operation: Operation | HostOperation, paths: OperationPaths): RequestTarget[] {
  const single = SINGLE_PATH_ACCESS[operation];
  if (single) return [{ role: 'path', path: need(paths.path ?? paths.from, 'path', operation), access: single }];
  const from = () => need(paths.from ?? paths.path, 'from', operation);
  const to = () => need(paths.to, 'to', operation);
  switch (operation) {
    case 'rename':
      // The source disappears (delete) and the target is written or replaced.
      return [
        { role: 'from', path: from(), access: 'delete' },
        { role: 'to', path: to(), access: 'write' },
      ];
    case 'copy':
      return [
        { role: 'from', path: from(), access: 'read' },
        { role: 'to', path: to(), access: 'write' },
      ];
    case 'link':
      // A symbolic link's content is not a path anyone opens now; only the new link is a write.
      return paths.symbolic
        ? [{ role: 'to', path: to(), access: 'write' }]
        : [
            { role: 'from', path: from(), access: 'read' },
            { role: 'to', path: to(), access: 'write' },
          ];
    case 'open':
      throw new TargetError('open targets come from openTargets()');
    default:
      throw new TargetError(`unknown operation ${operation}`);
  }
}

/** The target of an open: read-only opens are reads, anything else writes. */
export function openTargets(path: string, writes: boolean): RequestTarget[] {
  return [{ role: 'path', path, access: writes ? 'write' : 'read' }];
}
