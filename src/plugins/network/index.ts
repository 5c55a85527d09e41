export { NETWORK_REFUSED, describeConnection, type ConnectionFact } from './connections.js';
export { networkDefaults, remoteRule, urlRule, type DefaultsPlace, type NetworkDefault } from './defaults.js';
export { NameAddresses, RESOLVED_TTL_SECONDS, systemLookup, type Lookup } from './lookup.js';
export {
  NetworkPlugin,
  PLUGIN_NAME,
  networkOptionsSchema,
  ruleFor,
  type ConnectionApprover,
  type ConnectionChoice,
  type ConnectionPrompt,
  type NetworkOptions,
  type RefusedConnection,
  type SaveRule,
} from './plugin.js';
export { RESOLV_CONF, readResolvers, type Resolver } from './resolvers.js';
export { GUARDED_RANGES, MODE_REACH, networkModeSchema, networkRuleSchema, parseNetworkRule, parseNetworkRules, type NetworkMode, type NetworkRule } from './rules.js';
