import { execFileSync } from 'node:child_process';
import { expect, it } from 'vitest';

it('the agent loop runs commands and a guarded Write in one turn, then lists and restores it', () => {
  const demo = new URL('./agent-loop.ts', import.meta.url).pathname;
  const out = execFileSync(process.execPath, ['--import', 'tsx', demo], { encoding: 'utf8' });
  expect(out).toMatch(/^turn \S+ begun, backup on$/m);
  expect(out).toContain('call-1: exit 0; backed up [notes.txt]; needs approval []');
  expect(out).toMatch(/^call-1 stdout: "first draft\\n" \(streamed in \d+ chunks?\)$/m);
  expect(out).toContain('call-2: exit 0; backed up [todo.txt, README.md]; needs approval []');
  // The project file is protected from the commands it restricts: asked, refused, unchanged.
  expect(out).toContain('approval asked: write .brokered-shell.json -> no');
  expect(out).toContain('call-3: exit 1; backed up []; needs approval [.brokered-shell.json]');
  expect(out).toContain('now: .brokered-shell.json "{\\"fileSafety\\":{\\"rules\\":[{\\"pattern\\":\\"*.pem\\",\\"decision\\":\\"deny\\"}]}}"');
  expect(out).toContain("call-3 refused: not-approved write .brokered-shell.json: .brokered-shell.json holds this project's restrictions; a command may not change them without approval");
  // The project's deny rule holds, and the model is told which rule.
  expect(out).toContain('call-4: exit 1; backed up []; needs approval []');
  expect(out).toMatch(/^call-4 refused: denied write server\.pem: /m);
  expect(out).toContain('server.pem "not a real key\\n"');
  expect(out).toContain('guard Write plan.md: allowed true, backed up true');
  expect(out).toContain('turn ended: ok true, 4 files backed up');
  expect(out).toContain('plan.md "new plan, by the Write tool\\n"');
  for (const line of ['notes.txt (open, 12 bytes)', 'todo.txt (rename, 16 bytes)', 'README.md (delete, 10 bytes)', 'plan.md (open, 9 bytes)']) {
    expect(out).toContain(`backed up: ${line}`);
  }
  expect(out).toContain('diff notes.txt: -first draft +second draft');
  expect(out).toContain('restored 4 files and the times of 1 directory');
  expect(out).toContain('after restore: notes.txt "first draft\\n", todo.txt "write the notes\\n", README.md "# project\\n", plan.md "old plan\\n"');
  expect(out).toContain('after undoLast: notes.txt "second draft\\n", plan.md "new plan, by the Write tool\\n"');
});
