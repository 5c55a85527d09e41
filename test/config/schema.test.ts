import { describe, expect, expectTypeOf, it } from 'vitest';
import { z } from 'zod';
import {
  brokeredShellConfigSchema,
  configJsonSchema,
  defaultConfig,
  projectConfigSchema,
  type BrokeredShellConfig,
  type ProjectConfig,
} from '../../src/config/index.js';
import type { FileSafetyRule } from '../../src/plugins/file-safety/index.js';

describe('the configuration schema', () => {
  it('gives every field its default from {}', () => {
    expect(defaultConfig()).toEqual({
      sandbox: { enabled: true, excludedCommands: [], runtime: 'auto', unixSockets: [] },
      writableRoots: [],
      cacheRoots: { defaults: true, add: [], remove: [] },
      fileBackup: { enabled: true, maxSizeMB: 10, oversize: 'deny', durability: 'turn' },
      fileSafety: { rules: [], outsideRoots: 'deny' },
      secrets: { defaults: true, add: [], remove: [] },
      network: { mode: 'allowlist', allow: [], deny: [] },
      approvals: 'inline',
      approvalTimeoutSeconds: 300,
    });
  });

  it('fills the defaults of a section that is given in part', () => {
    const config = brokeredShellConfigSchema.parse({ sandbox: { runtime: 'preload' }, fileBackup: { maxSizeMB: 2 } });
    expect(config.sandbox).toEqual({ enabled: true, excludedCommands: [], runtime: 'preload', unixSockets: [] });
    expect(config.fileBackup).toEqual({ enabled: true, maxSizeMB: 2, oversize: 'deny', durability: 'turn' });
  });

  it.each<[string, unknown, string]>([
    ['an unknown top-level key', { sandboxes: {} }, 'unrecognized_keys'],
    ['an unknown nested key', { fileBackup: { maxSize: 3 } }, 'unrecognized_keys'],
    ['a relative writable root', { writableRoots: ['build'] }, 'invalid_format'],
    ['a ~ writable root', { writableRoots: ['~/cache'] }, 'invalid_format'],
    ['an unknown runtime', { sandbox: { runtime: 'bwrap' } }, 'invalid_value'],
    ['a size cap under 1 MB', { fileBackup: { maxSizeMB: 0 } }, 'too_small'],
    ['a rule without a decision', { fileSafety: { rules: [{ pattern: '*.pem' }] } }, 'invalid_value'],
    ['an unknown cacheRoots key', { cacheRoots: { include: ['/x'] } }, 'unrecognized_keys'],
    ['a relative cache root', { cacheRoots: { add: ['.cache'] } }, 'custom'],
    ['a cache root that is all of home', { cacheRoots: { add: ['~/'] } }, 'custom'],
    ['a cache root that is /', { cacheRoots: { add: ['//'] } }, 'custom'],
    ["a cache root with '..'", { cacheRoots: { add: ['~/x/../../etc'] } }, 'custom'],
    ['a removal that is neither a default nor a path', { cacheRoots: { remove: ['npmm'] } }, 'custom'],
    ['the same path added and removed', { cacheRoots: { add: ['~/.m2'], remove: ['~/.m2'] } }, 'custom'],
  ])('refuses %s', (_what, input, code) => {
    const parsed = brokeredShellConfigSchema.safeParse(input);
    expect(parsed.success).toBe(false);
    expect(parsed.error?.issues.map((i) => i.code)).toContain(code);
  });

  it('keeps ~ and relative rule patterns as they are: they mean what they mean to file-safety', () => {
    const rules: FileSafetyRule[] = [
      { pattern: '~/.aws/**', decision: 'deny' },
      { pattern: 'secrets/**', decision: 'prompt', access: ['write'] },
    ];
    expect(brokeredShellConfigSchema.parse({ fileSafety: { rules } }).fileSafety.rules).toEqual(rules);
  });

  it('has the types of the schema (z.infer), with the shape the session takes', () => {
    expectTypeOf<BrokeredShellConfig>().toEqualTypeOf<z.infer<typeof brokeredShellConfigSchema>>();
    expectTypeOf<BrokeredShellConfig['sandbox']['runtime']>().toEqualTypeOf<'auto' | 'seccomp' | 'preload'>();
    expectTypeOf<BrokeredShellConfig['fileBackup']['oversize']>().toEqualTypeOf<'deny' | 'skip'>();
    expectTypeOf<BrokeredShellConfig['fileSafety']['outsideRoots']>().toEqualTypeOf<'deny' | 'prompt'>();
    expectTypeOf<BrokeredShellConfig['fileSafety']['rules']>().toEqualTypeOf<FileSafetyRule[]>();
    // A project's rules can only be deny or prompt, by type too.
    expectTypeOf<NonNullable<NonNullable<ProjectConfig['fileSafety']>['rules']>[number]['decision']>().toEqualTypeOf<'deny' | 'prompt'>();
    // @ts-expect-error a project file has no writable roots to give
    const roots: ProjectConfig['writableRoots'] = ['/x'];
    expect(roots).toBeDefined();
  });
});

describe('the project schema decides every key of the configuration', () => {
  /** Every key path of a strict object schema, nested objects included. */
  function keyPaths(schema: z.ZodType, prefix = ''): string[] {
    let inner: z.ZodType = schema;
    // Unwrap optional / default / prefault to reach the object.
    for (let i = 0; i < 5 && !(inner instanceof z.ZodObject); i += 1) {
      const def = (inner as { def: { innerType?: z.ZodType } }).def;
      if (!def.innerType) break;
      inner = def.innerType;
    }
    if (!(inner instanceof z.ZodObject)) return [prefix];
    return Object.entries(inner.shape as Record<string, z.ZodType>).flatMap(([key, value]) => keyPaths(value, prefix ? `${prefix}.${key}` : key));
  }

  it('lists the same keys (allowed with a narrowing constraint, or refused with a reason)', () => {
    const home = keyPaths(brokeredShellConfigSchema).sort();
    expect(home).toEqual(expect.arrayContaining(['sandbox.enabled', 'sandbox.excludedCommands', 'sandbox.runtime', 'writableRoots', 'fileSafety.rules']));
    expect(keyPaths(projectConfigSchema).sort()).toEqual(home);
  });
});

describe('the JSON Schema', () => {
  const schema = configJsonSchema();

  it('is JSON that names every top-level key and refuses unknown ones', () => {
    const text = JSON.stringify(schema);
    expect(JSON.parse(text)).toEqual(schema);
    expect(schema).toMatchObject({ type: 'object', additionalProperties: false, title: 'brokered-shell configuration' });
    expect(Object.keys(schema.properties as object).sort()).toEqual(['$schema', 'approvalTimeoutSeconds', 'approvals', 'cacheRoots', 'fileBackup', 'fileSafety', 'network', 'sandbox', 'secrets', 'writableRoots']);
  });

  it('describes a file to write: nothing is required, defaults and enums are shown', () => {
    expect(schema.required).toBeUndefined();
    const properties = schema.properties as Record<string, { properties?: Record<string, Record<string, unknown>>; items?: Record<string, unknown> }>;
    expect(properties.sandbox?.properties?.runtime).toMatchObject({ enum: ['auto', 'seccomp', 'preload'], default: 'auto' });
    expect(properties.fileBackup?.properties?.maxSizeMB).toMatchObject({ type: 'number', default: 10, minimum: 1 });
    expect(properties.writableRoots?.items).toMatchObject({ type: 'string', pattern: '^\\/' });
  });
});
