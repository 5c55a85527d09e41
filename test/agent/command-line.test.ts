import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { commandWords, isExcluded, toInvocation } from '../../src/agent/command-line.js';
import { approvalQuestion, askOnTerminal, isYes } from '../../src/cli/approve.js';

describe('toInvocation', () => {
  it('a string is a bash script; with raw it is split on whitespace; an array is always raw', () => {
    expect(toInvocation('echo "a b" | wc')).toEqual({ kind: 'shell', script: 'echo "a b" | wc', display: 'echo "a b" | wc' });
    expect(toInvocation('  ls   -l\t/tmp ', true)).toEqual({ kind: 'raw', argv: ['ls', '-l', '/tmp'], display: 'ls -l /tmp' });
    expect(toInvocation(['printf', '%s', 'a b'])).toEqual({ kind: 'raw', argv: ['printf', '%s', 'a b'], display: 'printf %s a b' });
    expect(() => toInvocation('   ', true)).toThrow(RangeError);
    expect(() => toInvocation([])).toThrow(RangeError);
  });
});

describe('excludedCommands matching', () => {
  const excluded = ['docker', 'git push', 'npm:*', 'make *'];
  it.each<[string, boolean]>([
    ['docker ps', true],
    ['/usr/bin/docker ps -a', true],
    ['DOCKER_HOST=x FOO=1 docker ps', true],
    ['"docker" ps', true],
    ['docker ps $HOME', true],
    ['git push origin main', true],
    ['git pull', false],
    ['npm install', true],
    ['make', true],
    ['dockerd', false],
    ['echo docker', false],
    ['docker ps; rm -rf ~', false],
    ['docker ps && true', false],
    ['docker ps | cat', false],
    ['docker ps > out', false],
    ['docker run $(whoami)', false],
    ['docker run `whoami`', false],
    ['docker ps &', false],
    ['docker ps\nrm -rf ~', false],
    ['X=1', false],
  ])('%j → %s', (script, expected) => {
    expect(isExcluded(toInvocation(script), excluded)).toBe(expected);
  });

  it('a raw argv is matched by its program, without assignments', () => {
    expect(isExcluded(toInvocation(['/usr/bin/docker', 'ps']), excluded)).toBe(true);
    expect(isExcluded(toInvocation(['X=1', 'docker']), excluded)).toBe(false);
    expect(commandWords(toInvocation('A=1 B=2 ls -l'))).toEqual(['ls', '-l']);
  });
});

describe('run: the terminal question', () => {
  it('y or yes approves; anything else refuses', () => {
    for (const answer of ['y', 'Y', 'yes', ' YES ']) expect(isYes(answer)).toBe(true);
    for (const answer of ['', 'n', 'no', 'yep', 'y y', undefined]) expect(isYes(answer)).toBe(false);
  });

  it('lists every block, control characters escaped', () => {
    const lines = approvalQuestion({
      kind: 'paths',
      blocks: [
        { path: '/w/a\nb', normalisedPath: '/w/a\nb', operation: 'open', access: 'write', sessionId: 's', toolCallIds: [], firstSeenAt: '', count: 1, reason: 'why' },
      ],
    });
    expect(lines).toEqual(['brokered-shell: the command needs approval for:', '  write /w/a\\nb by open (why)', 'Approve for this session and run it again? [y/N] ']);
  });
});

describe('askOnTerminal', () => {
  const request = {
    kind: 'paths' as const,
    blocks: [{ path: '/w/a', normalisedPath: '/w/a', operation: 'open' as const, access: 'write' as const, sessionId: 's', toolCallIds: [], firstSeenAt: '', count: 1 }],
  };

  it('answers no without asking when what was typed before cannot be dropped', async () => {
    const said: string[] = [];
    const input = new PassThrough();
    input.end('y\n');
    const answer = await askOnTerminal({ out: () => undefined, err: (line) => void said.push(line) }, request, input, () => {
      throw new Error('ENOTTY');
    });
    expect(answer).toBe(false);
    expect(said).toEqual([expect.stringMatching(/cannot clear what was typed before the question .*ENOTTY.*the answer is no/)]);
  });

  it('reads the answer typed after the input was dropped', async () => {
    const input = new PassThrough();
    let flushed = false;
    const answer = askOnTerminal({ out: () => undefined, err: () => undefined }, request, input, () => void (flushed = true));
    input.end('yes\n');
    expect(await answer).toBe(true);
    expect(flushed).toBe(true);
  });
});

