import { BROKER_ENV } from '../requests/broker-env.js';

export { BROKER_ENV };

/** The session's environment with a call's additions (an `undefined` value removes a variable). */
export function mergeEnv(base: NodeJS.ProcessEnv, extra: NodeJS.ProcessEnv | undefined): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...base };
  for (const [name, value] of Object.entries(extra ?? {})) {
    if (value === undefined) delete env[name];
    else env[name] = value;
  }
  return env;
}

/** A broker variable the caller's environment may have left (from an outer session) that must not leak into a local run. */
export function withoutBrokerEnv(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const out: NodeJS.ProcessEnv = { ...env };
  for (const name of Object.values(BROKER_ENV)) delete out[name];
  return out;
}
