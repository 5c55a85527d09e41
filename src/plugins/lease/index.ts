export { LeasePlugin, PLUGIN_NAME, compileLease } from './plugin.js';
export { getLeaseHooks, type LeaseHooks } from './hooks.js';
export { emptyLease, leaseSchema, leasedOpSchema, type Lease, type LeasedOp } from './schema.js';
