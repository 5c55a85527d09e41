import { AsyncSeriesHook, SyncHook } from 'tapable';
import type { Broker } from '../../core/index.js';
import type { TurnEntry } from '../../backup/manifest-schema.js';
import type { Lease } from './schema.js';

/**
 * How plugins take part in a lease (plugin.ts). A plugin that judges or changes kernel
 * requests (a tap on validate-session, resolve-path, evaluate-policy, pre-modify-backup,
 * or modify-backup's exempt) must tap `contribute`, under its own name, to say what it
 * would answer as data: a policy plugin adds what it denies or asks about to the lease's
 * round-trip lists, a plugin that is code claims the scope it cares about (`claims`), and
 * one with nothing to say for kernel changes taps it with nothing to add. A tap of any of
 * those hooks by a plugin that does not contribute leaves the session without a lease:
 * every change then makes the round trip.
 */
export interface LeaseHooks {
  /** Each participant adds to the lease being compiled (it starts as emptyLease() with the broker's roots and ops unset). */
  readonly contribute: AsyncSeriesHook<[Lease]>;
  /**
   * A participant's data is about to change (an allowed write of git config, say): the
   * running supervisors lose their lease now, before that change is answered.
   */
  readonly revoke: SyncHook<[]>;
  /** A participant's data changed: the running supervisors get a new lease. */
  readonly changed: SyncHook<[]>;
  /** Each record a supervisor made under a lease, as the broker reads it (observers that must see every change tap this). */
  readonly leased: SyncHook<[TurnEntry]>;
  /** Read what the supervisors recorded so far: before the broker decides a kernel request, so it knows every earlier change. */
  readonly catchUp: AsyncSeriesHook<[]>;
}

const leaseHooks = new WeakMap<Broker, LeaseHooks>();

export function getLeaseHooks(broker: Broker): LeaseHooks {
  let hooks = leaseHooks.get(broker);
  if (!hooks) {
    hooks = Object.freeze({
      contribute: new AsyncSeriesHook<[Lease]>(['lease']),
      revoke: new SyncHook<[]>([]),
      changed: new SyncHook<[]>([]),
      leased: new SyncHook<[TurnEntry]>(['entry']),
      catchUp: new AsyncSeriesHook<[]>([]),
    });
    leaseHooks.set(broker, hooks);
  }
  return hooks;
}
