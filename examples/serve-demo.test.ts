import { execFileSync } from 'node:child_process';
import { expect, it } from 'vitest';

it('the serve demo backs a file up, denies a write outside, and restores the turn', () => {
  const demo = new URL('./serve-demo.ts', import.meta.url).pathname;
  const out = execFileSync(process.execPath, ['--import', 'tsx', demo], { encoding: 'utf8' });
  expect(out).toMatch(/text token, read-write notes\.txt:\s+SANDBOX/);
  expect(out).toMatch(/"decision":"host-op"/);
  expect(out).toMatch(/text token, write outside:\s+DENY/);
  expect(out).toMatch(/"files":2/);
  expect(out).toContain('notes.txt restored: "the original notes\\n"');
  expect(out).toContain('draft.txt restored: "a better draft\\n"');
});
