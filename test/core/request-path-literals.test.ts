import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

// Node 20's V8 (11.3) makes an object literal that spreads an object and then goes on with
// more members pay a runtime call per member, ≈ 1 µs each (bench/object-literals.ts): a
// request used to pay tens of µs for it. The modules every request runs through stay free
// of the pattern; a spread last (`{ a, ...(c ? { b } : {}) }`) is cheap and allowed.
const REQUEST_PATH = [
  'core/broker.ts',
  'ipc/json-protocol.ts',
  'ipc/text-protocol.ts',
  'sandbox/kernel-bridge.ts',
  'plugins/path-resolution/plugin.ts',
  'plugins/path-resolution/resolve.ts',
  'plugins/path-resolution/walk.ts',
  'plugins/path-resolution/rule-form.ts',
  'plugins/path-resolution/strategies.ts',
  'plugins/file-safety',
  'plugins/modify-backup/index.ts',
  'plugins/modify-backup/affected-files.ts',
  'plugins/requester-access.ts',
  'plugins/sandbox-token.ts',
  'plugins/audit.ts',
  'backup/entry-builder.ts',
  'backup/file-state.ts',
  'backup/blob-store.ts',
  'backup/journal.ts',
];

const src = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../src');

function filesOf(entry: string): string[] {
  const full = path.join(src, entry);
  if (full.endsWith('.ts')) return [full];
  return ts.sys.readDirectory(full, ['.ts']);
}

/**
 * `file:line` of every object literal that starts with a spread and goes on, or has a
 * member other than a spread after one (the costly shapes; spreads at the end are cheap).
 */
function spreadsFollowedByMembers(file: string): string[] {
  const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true);
  const found: string[] = [];
  const visit = (node: ts.Node): void => {
    if (ts.isObjectLiteralExpression(node)) {
      const members = node.properties;
      const first = members.findIndex(ts.isSpreadAssignment);
      const costly = first === 0 ? members.length > 1 : first > 0 && members.slice(first).some((m) => !ts.isSpreadAssignment(m));
      if (costly) {
        const { line } = source.getLineAndCharacterOfPosition(node.getStart(source));
        found.push(`${path.relative(src, file)}:${line + 1}`);
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

describe('object literals on the request path', () => {
  it('never spread an object before more members', () => {
    const files = REQUEST_PATH.flatMap(filesOf);
    expect(files.length).toBeGreaterThan(REQUEST_PATH.length);
    expect(files.flatMap(spreadsFollowedByMembers)).toEqual([]);
  });
});
