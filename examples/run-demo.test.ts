import { execFileSync } from 'node:child_process';
import { expect, it } from 'vitest';

it('the run demo changes files in the sandbox, is refused outside, and restores the turn', () => {
  const script = new URL('./run-demo.sh', import.meta.url).pathname;
  const out = execFileSync('bash', [script], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  expect(out).toContain('notes.txt: the edited notes; draft.txt: gone');
  expect(out).toMatch(/rename\s+19 B\s+0644/);
  expect(out).toMatch(/delete\s+8 B\s+0644/);
  expect(out).toContain('notes.txt: the original notes; draft.txt: keep me');
});
