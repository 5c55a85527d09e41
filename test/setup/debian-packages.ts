import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

// Vitest's global setup: the suite stops before its first test, with the list of what is
// missing and the line that installs it, when a Debian package of
// toolchain/install-debian-packages.sh is not installed (tests without toybox, busybox or
// chromium would otherwise fail one by one, each with a symptom). `npm test` installs them
// first where it can (toolchain/pretest.sh).
export default function checkDebianPackages(): void {
  const script = fileURLToPath(new URL('../../toolchain/install-debian-packages.sh', import.meta.url));
  const result = spawnSync('bash', [script, '--check'], { cwd: path.dirname(path.dirname(script)), encoding: 'utf8' });
  if (result.status !== 0) throw new Error(result.stderr.trim() || `${script} --check failed (${String(result.error ?? result.status)})`);
}
