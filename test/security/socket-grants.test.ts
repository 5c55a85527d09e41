/**
 * Escape suite, broker socket: token (fd-grant) requests and host operations a
 * sandboxed command sends for paths it must not write — outside the roots (directly,
 * through `..`, a symlink, a hard link, /proc/self/root), a path a rule denies and a path
 * a rule puts to a person (refused here: `run --no`), and another user's files in the
 * workspace that the command, having no capabilities, may not change itself. Each is
 * refused, carries no fd, leaves its target as it was and is in the broker's audit trail
 * as a denial.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeRun, makeWorld, removeWorld, writeOld, type World } from '../e2e/run-helpers.js';
import { attack, deniedPath, hostOp, summarise, tokenLine, type AttackRun, type Route } from './socket-helpers.js';

const SESSION = 'sec-grants';

let world: World;
let result: AttackRun;
let routes: Route[];

const ws = (name: string) => path.join(world.ws, name);
const out = (name: string) => path.join(world.outside, name);
const token = (file: string) => tokenLine(file, SESSION, '@CALL@');
const op = (fields: Record<string, unknown>) => hostOp({ sessionId: SESSION, toolCallId: '@CALL@', ...fields });

/** A route aimed at one target, audited by that target's path. */
const at = (name: string, send: string, target: string, audited = target): Route => ({ name, send: [send], targets: [target], audited: deniedPath(audited) });

function buildRoutes(): Route[] {
  return [
    at('token-outside', token(out('t-outside')), out('t-outside')),
    at('token-dotdot', token(`${world.ws}/../out/t-dotdot`), out('t-dotdot')),
    at('token-symlink', token(ws('link-t')), out('t-symlink')),
    at('token-symlinked-dir', token(ws('out-dir/t-dir')), out('t-dir')),
    at('token-hardlink', token(ws('hard-t')), out('t-hard'), ws('hard-t')),
    // The broker cannot resolve the caller's /proc/self: refused as unresolvable, under the path as sent.
    at('token-proc-root', token(`/proc/self/root${out('t-proc')}`), out('t-proc'), `/proc/self/root${out('t-proc')}`),
    at('token-missing-outside', token(out('t-new')), out('t-new')),
    at('token-deny-rule', token(ws('t.deny')), ws('t.deny')),
    at('token-prompt-rule', token(ws('t.prompt')), ws('t.prompt')),
    at('token-shell-startup', token(ws('.bashrc')), ws('.bashrc')),
    at('token-git-hook', token(ws('.git/hooks/pre-commit')), ws('.git/hooks/pre-commit')),
    at('op-touch-outside', op({ operation: 'touch', path: out('o-touch') }), out('o-touch')),
    at('op-chmod-outside', op({ operation: 'chmod', path: out('o-chmod'), mode: '0777' }), out('o-chmod')),
    at('op-delete-outside', op({ operation: 'delete', path: out('o-delete'), deleteMode: 'unlink' }), out('o-delete')),
    at('op-mkdir-outside', op({ operation: 'mkdir', path: out('o-mkdir') }), out('o-mkdir')),
    at('op-rename-out', op({ operation: 'rename', from: ws('mv-src'), to: out('o-rename') }), out('o-rename')),
    at('op-copy-out', op({ operation: 'copy', from: ws('mv-src'), to: out('o-copy') }), out('o-copy')),
    at('op-symlink-out', op({ operation: 'link', from: '/etc/passwd', to: out('o-link'), symbolic: true }), out('o-link')),
    at('op-delete-deny-rule', op({ operation: 'delete', path: ws('o.deny'), deleteMode: 'unlink' }), ws('o.deny')),
    at('op-chmod-deny-rule', op({ operation: 'chmod', path: ws('c.deny'), mode: 511 }), ws('c.deny')),
    at('op-delete-prompt-rule', op({ operation: 'delete', path: ws('o.prompt'), deleteMode: 'unlink' }), ws('o.prompt')),
    at('op-rename-over-prompt', op({ operation: 'rename', from: ws('mv-src'), to: ws('r.prompt') }), ws('r.prompt')),
    // Another user's files in the workspace: the command may not change them itself (no
    // capabilities), so the broker must not change them for it either.
    at('theirs-chmod', op({ operation: 'chmod', path: ws('theirs.txt'), mode: '0666' }), ws('theirs.txt')),
    at('theirs-touch', op({ operation: 'touch', path: ws('theirs.txt') }), ws('theirs.txt')),
    at('theirs-copy-over', op({ operation: 'copy', from: ws('mv-src'), to: ws('theirs.txt') }), ws('theirs.txt')),
    at('theirs-hard-link', op({ operation: 'link', from: ws('theirs.txt'), to: ws('my-link') }), ws('my-link'), ws('theirs.txt')),
    at('theirs-token', token(ws('theirs.txt')), ws('theirs.txt')),
    at('theirs-dir-delete', op({ operation: 'delete', path: ws('theirs/f'), deleteMode: 'unlink' }), ws('theirs/f')),
    at('theirs-dir-trash', op({ operation: 'delete', path: ws('theirs/g') }), ws('theirs/g')),
    at('theirs-dir-rename', op({ operation: 'rename', from: ws('theirs/h'), to: ws('taken') }), ws('theirs/h')),
    at('theirs-dir-mkdir', op({ operation: 'mkdir', path: ws('theirs/new') }), ws('theirs'), ws('theirs/new')),
  ];
}

beforeAll(async () => {
  world = await makeWorld('sec-grants');
  for (const name of ['t-outside', 't-dotdot', 't-symlink', 't-dir', 't-hard', 't-proc', 'o-touch', 'o-chmod', 'o-delete']) {
    await writeOld(out(name), `${name} outside\n`, 0o644);
  }
  for (const name of ['t.deny', 't.prompt', '.bashrc', 'o.deny', 'c.deny', 'o.prompt', 'r.prompt', 'mv-src', 'plain.txt']) {
    await writeOld(ws(name), `${name} in the workspace\n`, 0o640);
  }
  await writeOld(ws('.git/hooks/pre-commit'), '#!/bin/sh\nexit 0\n', 0o755);
  await fs.symlink(out('t-symlink'), ws('link-t'));
  await fs.symlink(world.outside, ws('out-dir'));
  await fs.link(out('t-hard'), ws('hard-t'));
  await writeOld(ws('theirs.txt'), 'theirs\n', 0o644);
  for (const name of ['f', 'g', 'h']) await writeOld(ws(`theirs/${name}`), `theirs ${name}\n`, 0o666);
  for (const file of ['theirs.txt', 'theirs/f', 'theirs/g', 'theirs/h', 'theirs']) await fs.chown(ws(file), 1234, 1234);
  const policy = path.join(world.base, 'policy.json');
  await fs.writeFile(
    policy,
    JSON.stringify({
      rules: [
        { pattern: '*.deny', decision: 'deny' },
        { pattern: '*.prompt', access: ['write', 'delete'], decision: 'prompt' },
      ],
    }),
  );
  routes = buildRoutes();
  // The client works: a workspace write is answered SANDBOX (the kernel path then carries it out).
  const legit: Route = { name: 'legit', send: [token(ws('plain.txt'))], targets: [], audited: () => true, refused: () => true };
  // HOME is the workspace (an agent run in a home directory): its .bashrc is a shell startup file.
  result = await attack(world, [...routes, legit], { session: SESSION, policy, env: { HOME: world.ws } });
  result.verdicts.delete('legit');
}, 120_000);

afterAll(async () => {
  if (result) summarise('socket-grants.test.ts', result.verdicts);
  await removeWorld(world);
});

describe('socket: grants for paths a sandboxed command must not write', () => {
  it('the run ends normally with the command status, and the client reaches the broker', () => {
    expect(result.run.status, describeRun(result.run)).toBe(0);
    expect(result.results.get('legit')?.answers).toEqual(['SANDBOX']);
  });

  it.each(['token-outside', 'token-dotdot', 'token-symlink', 'token-symlinked-dir', 'token-hardlink', 'token-proc-root', 'token-missing-outside', 'token-deny-rule', 'token-prompt-rule', 'token-shell-startup', 'token-git-hook'])(
    '%s: answered DENY with no fd',
    (name) => {
      const answer = result.results.get(name);
      expect(answer?.answers, describeRun(result.run)).toEqual(['DENY']);
      expect(answer?.fds).toBe(0);
    },
  );

  it('every route is refused, leaves its target unchanged and is audited as a denial', () => {
    const failures = [...result.verdicts].filter(([, v]) => !v.refused || !v.unchanged || !v.audited);
    expect(failures, JSON.stringify([...result.results.values()])).toEqual([]);
    expect(result.verdicts.size).toBe(routes.length);
  });

  it('no file appeared outside and the new-file routes created nothing', async () => {
    for (const name of ['t-new', 'o-mkdir', 'o-rename', 'o-copy', 'o-link']) await expect(fs.lstat(out(name))).rejects.toThrow();
    for (const name of ['my-link', 'taken', 'theirs/new']) await expect(fs.lstat(ws(name))).rejects.toThrow();
    expect(await fs.readFile(ws('mv-src'), 'utf8')).toBe('mv-src in the workspace\n');
  });

  it('the prompt-rule paths were asked about and refused (run --no), not approved', () => {
    expect(result.run.stderr).toMatch(/not approved: .*t\.prompt/);
  });
});
