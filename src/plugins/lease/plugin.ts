import { Stage, type Broker, type BrokerPlugin } from '../../core/index.js';
import { getModifyBackupHooks } from '../modify-backup/hooks.js';
import { getLeaseHooks } from './hooks.js';
import { emptyLease, leaseSchema, type Lease } from './schema.js';

export const PLUGIN_NAME = 'lease';

/** A plugin's name as its taps carry it: `file-safety:rules` is file-safety's. */
const owner = (tap: string) => tap.split(':')[0] ?? tap;

/**
 * Compiles the session's lease through the pipeline: a token request with `lease: true`
 * (the kernel bridge makes one at each launch, and again when a participant's data
 * changes) runs validate-session, resolve-path and evaluate-policy for the workspace like
 * any request; at issue-token, first of all, this plugin asks every participant to add to
 * the lease (hooks.ts) and hands it out as the grant. The lease is empty (every change
 * makes the round trip) when a plugin that judges or changes kernel requests takes no part.
 */
export class LeasePlugin implements BrokerPlugin {
  static readonly PLUGIN_NAME = PLUGIN_NAME;
  readonly name = PLUGIN_NAME;

  apply(broker: Broker): void {
    broker.hooks.issueToken.tapPromise({ name: this.name, stage: Stage.FIRST }, async (resolved) => {
      if (resolved.request.options.lease !== true) return undefined;
      return { kind: 'lease', lease: await compileLease(broker) };
    });
  }
}

/** The plugins that judge or change kernel requests, by the taps they hold. */
function deciders(broker: Broker): Set<string> {
  const { hooks } = broker;
  const taps = [hooks.validateSession, hooks.resolvePath, hooks.evaluatePolicy, hooks.preModifyBackup, getModifyBackupHooks(broker).exempt].flatMap((hook) => hook.taps);
  return new Set(taps.map((tap) => owner(tap.name)));
}

/** What the participants say, or the empty lease when a decider stays silent or the result is not a lease. */
export async function compileLease(broker: Broker): Promise<Lease> {
  const { contribute } = getLeaseHooks(broker);
  const participants = new Set(contribute.taps.map((tap) => owner(tap.name)));
  const silent = [...deciders(broker)].filter((name) => !participants.has(name));
  if (silent.length > 0) {
    broker.log.info({ phase: 'lease', silent }, 'no lease: these plugins judge kernel requests and say nothing the supervisor could apply');
    return emptyLease();
  }
  const lease = emptyLease();
  lease.setIdRoundTrip = false;
  await contribute.promise(lease);
  const checked = leaseSchema.safeParse(lease);
  if (!checked.success) {
    broker.log.warn({ phase: 'lease', issues: checked.error.issues.slice(0, 5) }, 'no lease: what the plugins added is not a lease');
    return emptyLease();
  }
  return checked.data;
}
