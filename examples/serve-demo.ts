/**
 * Drive `brokered-shell serve` as an external client would: ask for write access to a
 * file (it is backed up first), change it, rename another over it through the host,
 * commit the turn, then list the backups and restore the turn byte for byte.
 *
 *   npx tsx examples/serve-demo.ts
 */
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';

const cli = path.join(path.dirname(new URL(import.meta.url).pathname), '..', 'bin', 'brokered-shell.js');
const base = realpathSync(mkdtempSync(path.join(os.tmpdir(), 'brokered-shell-demo-')));
// Everything the demo made (workspace, store, socket) goes when it ends, however it ends.
process.on('exit', () => rmSync(base, { recursive: true, force: true }));
const workspace = path.join(base, 'workspace');
const env = { ...process.env, BROKERED_SHELL_HOME: path.join(base, 'home'), XDG_DATA_HOME: path.join(base, 'xdg'), BROKERED_SHELL_LOG_LEVEL: 'error' };
const socket = path.join(base, 'run', 'broker.sock');
execFileSync('mkdir', ['-p', workspace]);
const notes = path.join(workspace, 'notes.txt');
const draft = path.join(workspace, 'draft.txt');
writeFileSync(notes, 'the original notes\n');
writeFileSync(draft, 'a better draft\n');

const serve = spawn(process.execPath, [cli, 'serve', '--socket', socket, '--session', 'demo', '--workspace', workspace], { env, stdio: ['pipe', 'pipe', 'inherit'] });
const answers = createInterface({ input: serve.stdout });
const nextLine = () => new Promise<string>((resolve) => answers.once('line', resolve));
await nextLine(); // {"ready":true,...}

function ask(line: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const client = net.createConnection(socket, () => client.write(`${line}\n`));
    client.once('data', (data) => {
      resolve(String(data).trim());
      client.end();
    });
    client.once('error', reject);
  });
}

const show = (label: string, value: string) => console.log(`${label.padEnd(34)} ${value}`);
show('text token, read-write notes.txt:', await ask(`demo.read-write\t${notes}\tdemo\ttool-1`));
writeFileSync(notes, 'notes overwritten by the command\n');
show('JSON rename draft.txt → notes.txt:', await ask(JSON.stringify({ id: 'r1', command: 'HostFileOperation', operation: 'rename', from: draft, to: notes, sessionId: 'demo' })));
show('text token, write outside:', await ask(`demo.read-write\t/etc/hostname\tdemo\ttool-1`));
serve.stdin.write(`${JSON.stringify({ command: 'CommitModifyBackup', commitMsg: 'demo turn' })}\n`);
show('commit:', await nextLine());
serve.stdin.end();
await new Promise((resolve) => serve.once('exit', resolve));

console.log(`\nnotes.txt now: ${JSON.stringify(readFileSync(notes, 'utf8'))}\n`);
console.log(execFileSync(process.execPath, [cli, 'backups', 'show', 'latest'], { env, encoding: 'utf8' }));
console.log(execFileSync(process.execPath, [cli, 'backups', 'restore', 'latest'], { env, encoding: 'utf8' }));
console.log(`notes.txt restored: ${JSON.stringify(readFileSync(notes, 'utf8'))}`);
console.log(`draft.txt restored: ${JSON.stringify(readFileSync(draft, 'utf8'))}`);
