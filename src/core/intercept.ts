import type { HookMap } from 'tapable';
import { PluginError } from './errors.js';
import type { BrokerHooks } from './hooks.js';

type AnyFn = (...args: unknown[]) => unknown;
interface InterceptableHook {
  name: string | undefined;
  intercept(interceptor: { register?: (tap: any) => any }): void;
}

function wrapError(plugin: string, hook: string, error: unknown): unknown {
  return error instanceof PluginError ? error : new PluginError(plugin, hook, error);
}

/** Wrap every tap's function so a throw names the plugin and the hook it came from. */
function wrapTaps(hook: InterceptableHook, hookName: string): void {
  hook.intercept({
    register(tap: { name: string; type: string; fn: AnyFn }) {
      const original = tap.fn;
      if (tap.type === 'async') {
        tap.fn = (...args: unknown[]) => {
          const callback = args.pop() as (error?: unknown, result?: unknown) => void;
          return original(...args, (error?: unknown, result?: unknown) =>
            error ? callback(wrapError(tap.name, hookName, error)) : callback(null, result),
          );
        };
        return tap;
      }
      tap.fn = (...args: unknown[]) => {
        try {
          const value = original(...args);
          if (value instanceof Promise) return value.catch((error: unknown) => Promise.reject(wrapError(tap.name, hookName, error)));
          return value;
        } catch (error) {
          throw wrapError(tap.name, hookName, error);
        }
      };
      return tap;
    },
  });
}

/** Install error attribution on every hook, including hooks a HookMap creates later. */
export function attributeErrors(hooks: BrokerHooks): void {
  for (const [name, hook] of Object.entries(hooks)) {
    if (isHookMap(hook)) {
      hook.intercept({
        factory: (key: unknown, created: InterceptableHook) => {
          wrapTaps(created, `${name}(${String(key)})`);
          return created;
        },
      } as Parameters<HookMap<InterceptableHook>['intercept']>[0]);
    } else {
      wrapTaps(hook as InterceptableHook, name);
    }
  }
}

export function isHookMap(value: unknown): value is HookMap<InterceptableHook> {
  return typeof value === 'object' && value !== null && typeof (value as { for?: unknown }).for === 'function';
}
