/**
 * The viewer in a real browser: Debian's Chromium driven by playwright-core, against
 * the compiled CLI's `backups ui` over a store made by real `brokered-shell run` turns.
 * A person opens the printed address, picks a turn, reads the coloured diffs, restores
 * one file, confirms a forced restore, and rewinds the session; the files on disk say
 * each click did what it said. The page is also photographed for the README
 * (BSH_UPDATE_SCREENSHOT=1 writes docs/backup-viewer.png).
 */
import fs from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fromDebian, requirePrograms } from '../helpers/debian-packages.js';
import { REPO_ROOT } from '../helpers/serve-process.js';
import { removeWorld } from '../e2e/run-helpers.js';
import { makeDemoStore, type DemoStore } from './demo-store.js';
import { startCli, type CliViewer } from './helpers.js';

/** Debian's package (toolchain/install-debian-packages.sh installs it); never a downloaded browser. */
const CHROMIUM = process.env.BROKERED_SHELL_CHROMIUM ?? '/usr/bin/chromium';
/** Headless, and quiet: this machine's network is closed, so Chromium must not try to reach out. */
const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];
const SCREENSHOT = path.join(REPO_ROOT, 'docs', 'backup-viewer.png');
/** Runs in the page (this project's types have no DOM, so the window is described here). */
const BACKGROUND = (element: unknown): string =>
  (globalThis as unknown as { getComputedStyle(e: unknown): { backgroundColor: string } }).getComputedStyle(element).backgroundColor;

let demo: DemoStore;
let viewer: CliViewer;
let profile: string;
let context: BrowserContext;
let page: Page;

const READY = requirePrograms([[CHROMIUM, fromDebian('chromium')]]);

beforeAll(async () => {
  if (!READY) return;
  demo = await makeDemoStore();
  viewer = await startCli(demo.world.home);
  profile = await fs.mkdtemp(path.join(os.tmpdir(), 'bsh-chromium-'));
  context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: CHROMIUM_ARGS,
    viewport: { width: 1280, height: 900 },
  });
  page = context.pages()[0] ?? (await context.newPage());
}, 120_000);

afterAll(async () => {
  await context?.close();
  await viewer?.stop('SIGTERM');
  if (profile) await fs.rm(profile, { recursive: true, force: true });
  await removeWorld(demo?.world);
});

const turnLink = (index: number) => page.getByRole('link', { name: new RegExp(demo.turns[index]?.id ?? '(none)') });
const restoreButton = (name: string) => page.getByRole('button', { name: `Restore file ${demo.at(name)}` });
const report = () => page.getByRole('region', { name: 'What the last action did' });
const bytes = (name: string) => fs.readFile(demo.at(name));

describe('the backup viewer in Chromium', () => {
  it('opens from the printed address and lists the session and its turns', async () => {
    const errors: string[] = [];
    page.on('pageerror', (error) => errors.push(error.message));
    await page.goto(viewer.url.href);
    // The secret left the address bar.
    expect(new URL(page.url()).hash).toBe('');
    expect(new URL(page.url()).search).toBe('');
    await expect.poll(() => page.getByRole('heading', { name: /Session agent-session-42/ }).count()).toBe(1);
    for (const [index, turn] of demo.turns.entries()) {
      const link = turnLink(index);
      await link.waitFor();
      expect(await link.textContent()).toContain(turn.message ?? '');
    }
    expect(errors).toEqual([]);
  });

  it('keeps the secret in this tab for this port: no cookie, and nothing of it reaches a page on another port of 127.0.0.1', async () => {
    const secret = /^#t=(.+)$/.exec(viewer.url.hash)?.[1] ?? '';
    expect(secret).not.toBe('');
    expect(await context.cookies()).toEqual([]);
    // Another local user's server on another port: what the browser sends it, and what its page can read.
    const seen: string[] = [];
    const other = http.createServer((req, res) => {
      seen.push(JSON.stringify(req.headers));
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end('<p>another port</p>');
    });
    await new Promise<void>((resolve) => other.listen(0, '127.0.0.1', resolve));
    const stranger = await context.newPage();
    try {
      await stranger.goto(`http://127.0.0.1:${(other.address() as AddressInfo).port}/`);
      const readable = await stranger.evaluate('JSON.stringify([Object.entries(sessionStorage), Object.entries(localStorage), document.cookie])');
      expect(readable).toBe('[[],[],""]');
    } finally {
      await stranger.close();
      const closed = new Promise((resolve) => other.close(resolve));
      other.closeAllConnections();
      await closed;
    }
    expect(seen.length).toBeGreaterThan(0);
    for (const headers of seen) expect(headers).not.toContain(secret);
    // A new tab opened on the bare address has no secret: it says where to get one, and lists nothing.
    const bare = await context.newPage();
    try {
      await bare.goto(`${viewer.url.origin}/`);
      await expect.poll(() => bare.getByRole('alert').textContent()).toContain('Open the address that `brokered-shell backups ui` printed');
      expect(await bare.getByRole('heading', { name: /Session agent-session-42/ }).count()).toBe(0);
    } finally {
      await bare.close();
    }
    // A reload still works: the secret is in this tab's sessionStorage.
    await page.reload();
    await expect.poll(() => page.getByRole('heading', { name: /Session agent-session-42/ }).count()).toBe(1);
  });

  it('shows a turn: coloured diffs, a binary file, a symlink; restores one file to its backed-up bytes', async () => {
    await turnLink(2).click();
    await page.getByRole('heading', { name: `Turn ${demo.turns[2]?.id ?? ''} turn` }).waitFor();
    const settingsDiff = page.getByLabel(`diff of ${demo.at('settings.toml')}`);
    await settingsDiff.waitFor();
    expect(await settingsDiff.locator('.del').allTextContents()).toEqual(['-log_level = "debug"', '-workers = 2']);
    expect(await settingsDiff.locator('.add').allTextContents()).toEqual(['+log_level = "warning"', '+workers = 8']);
    // Colour comes from the line's class, not from the text.
    const [addColour, delColour] = await Promise.all([
      settingsDiff.locator('.add').first().evaluate(BACKGROUND),
      settingsDiff.locator('.del').first().evaluate(BACKGROUND),
    ]);
    expect(addColour).toMatch(/^rgb/);
    expect(addColour).not.toBe(delColour);
    await expect.poll(() => page.getByLabel(`diff of ${demo.at('assets/logo.bin')}`).textContent()).toMatch(/^Binary files .* differ$/);
    await expect.poll(() => page.getByLabel(`diff of ${demo.at('current-config')}`).textContent()).toContain('-symlink -> config/dev.json+symlink -> config/prod.json');

    expect((await bytes('settings.toml')).equals(demo.before[2]?.['settings.toml'] ?? Buffer.alloc(0))).toBe(false);
    await restoreButton('settings.toml').click();
    await report().getByRole('heading', { name: 'Restore of one file' }).waitFor();
    expect(await report().getByRole('listitem').first().textContent()).toBe(demo.at('settings.toml'));
    expect(await report().textContent()).toMatch(/What was replaced is kept in turn \d{8}-\d{6}-[0-9a-f]{6}/);
    expect((await bytes('settings.toml')).equals(demo.before[2]?.['settings.toml'] ?? Buffer.alloc(0))).toBe(true);
    // The other files of the turn are as the turn left them.
    expect((await bytes('assets/logo.bin')).equals(demo.before[2]?.['assets/logo.bin'] ?? Buffer.alloc(0))).toBe(false);
    await expect.poll(() => restoreButton('settings.toml').isDisabled()).toBe(true);

    const shot = await page.screenshot({ fullPage: true });
    expect(shot.subarray(1, 4).toString('latin1')).toBe('PNG');
    if (process.env.BSH_UPDATE_SCREENSHOT === '1') await fs.writeFile(SCREENSHOT, shot);
  });

  it('a file changed since its turn is a conflict: nothing is forced until the person confirms', async () => {
    const person = '# greeter\n\nEdited by a person after the agent.\n';
    await fs.writeFile(demo.at('README.md'), person);
    await turnLink(1).click();
    await page.getByRole('heading', { name: `Turn ${demo.turns[1]?.id ?? ''} turn` }).waitFor();
    await page.getByRole('button', { name: 'Restore whole turn' }).click();
    await report().getByRole('heading', { name: 'Restore of the whole turn' }).waitFor();
    // NOTES.md (deleted by the turn) came back; README.md was left alone.
    expect((await bytes('NOTES.md')).equals(demo.before[1]?.['NOTES.md'] ?? Buffer.alloc(0))).toBe(true);
    expect(await fs.readFile(demo.at('README.md'), 'utf8')).toBe(person);
    expect(await report().getByRole('heading', { name: 'Conflicts (1)' }).count()).toBe(1);

    const force = report().getByRole('button', { name: 'Force restore' });
    expect(await force.isDisabled()).toBe(true);
    await report().getByRole('checkbox', { name: 'Replace 1 file anyway' }).check();
    expect(await force.isEnabled()).toBe(true);
    await force.click();
    await report().getByRole('heading', { name: 'Restored (1)' }).waitFor();
    expect(await report().textContent()).toContain('(forced)');
    expect((await bytes('README.md')).equals(demo.before[1]?.['README.md'] ?? Buffer.alloc(0))).toBe(true);
  });

  it('rewinds the session to before its first turn, after confirming the list of turns', async () => {
    await turnLink(0).click();
    await page.getByRole('heading', { name: `Turn ${demo.turns[0]?.id ?? ''} turn` }).waitFor();
    await page.getByRole('button', { name: 'Rewind to before this turn…' }).click();
    const confirm = page.getByRole('group', { name: 'Rewind to before this turn?' });
    await confirm.waitFor();
    expect(await confirm.getByRole('listitem').allTextContents()).toEqual(
      [...demo.turns].reverse().map((t) => expect.stringContaining(t.id) as unknown as string),
    );
    await confirm.getByRole('button', { name: 'Rewind 3 turns' }).click();
    await report().getByRole('heading', { name: /: done$/ }).waitFor();
    for (const [name, content] of Object.entries(demo.before[0] ?? {})) {
      if (name === 'current-config') expect(await fs.readlink(demo.at(name)), name).toBe(content?.toString());
      else expect((await bytes(name)).equals(content ?? Buffer.alloc(0)), name).toBe(true);
    }
  });
});
