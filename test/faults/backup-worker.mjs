// The victim of the crash-consistency test (store-crash.test.ts), killed with SIGKILL at
// random points: opens one session's store (the compiled dist/, so it starts fast) and,
// in a loop, writes a new source file of random bytes and backs it up into one open
// turn (begun before `ready`), printing `begin PATH` before each backup and `ok PATH SHA256` once it returned.
// Lines on a pipe are written synchronously on Linux: an `ok` seen means acknowledged.
//
// DURABILITY is the store's ('each': synced before `ok`; 'turn': written, synced at commit).
//
//   node backup-worker.mjs DIST_BACKUP_INDEX HOME SESSION TURN DATA_DIR MIN_BYTES MAX_BYTES DURABILITY
import { randomBytes, randomInt } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const [dist, home, sessionId, turnId, dataDir, minBytes, maxBytes, durability] = process.argv.slice(2);
const { SessionBackupStore } = await import(pathToFileURL(dist).href);
const store = await SessionBackupStore.open({ home, sessionId, settings: { fileBackupMaxSizeMB: 64 }, durability });
// The turn's journal exists before the first kill can land (a turn with no backup yet is still listed).
await store.beginTurn(turnId);
process.stdout.write('ready\n');
for (let k = 0; ; k++) {
  const file = path.join(dataDir, `src-${process.pid}-${k}`);
  await fs.writeFile(file, randomBytes(randomInt(Number(minBytes), Number(maxBytes) + 1)));
  process.stdout.write(`begin ${file}\n`);
  const entry = await store.backup(file, { turnId, operation: 'open' });
  process.stdout.write(`ok ${file} ${entry.sha256}\n`);
}
