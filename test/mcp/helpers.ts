import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { ElicitRequestSchema, type CallToolResult, type ElicitRequest, type ElicitResult } from '@modelcontextprotocol/sdk/types.js';
import { afterEach } from 'vitest';
import { CLI } from '../helpers/serve-process.js';

const made: string[] = [];
const clients: Array<{ close(): Promise<void> }> = [];

afterEach(async () => {
  for (const client of clients.splice(0)) await client.close().catch(() => undefined);
  for (const dir of made.splice(0)) await fs.rm(dir, { recursive: true, force: true });
});

/** A fresh temp dir (its real path: the store records resolved paths), removed after the test. */
export async function tempDir(prefix: string): Promise<string> {
  const dir = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), prefix)));
  made.push(dir);
  return dir;
}

export interface McpClient {
  client: Client;
  /** Call a tool; its text and its structured content. */
  call(name: string, args?: Record<string, unknown>): Promise<{ text: string; structured: Record<string, unknown>; isError: boolean }>;
  /** Each elicitation the server sent, in order. */
  elicitations: ElicitRequest['params'][];
  stderr(): string;
  close(): Promise<void>;
}

export interface ConnectOptions {
  home: string;
  workspace: string;
  args?: string[];
  /** Answer elicitations (the client then says it supports them); without it the client has no elicitation. */
  elicit?: (request: ElicitRequest['params']) => ElicitResult | Promise<ElicitResult>;
}

/** The real CLI's `mcp` as a child process, driven by the SDK's own client over stdio. */
export async function connect(options: ConnectOptions): Promise<McpClient> {
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries(process.env)) if (value !== undefined && key !== 'FORCE_COLOR') env[key] = value;
  Object.assign(env, { BROKERED_SHELL_HOME: options.home, BROKERED_SHELL_LOG_LEVEL: 'warn', XDG_DATA_HOME: path.join(options.home, 'xdg') });
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [CLI, 'mcp', '--workspace', options.workspace, ...(options.args ?? [])],
    cwd: os.tmpdir(),
    env,
    stderr: 'pipe',
  });
  let stderr = '';
  transport.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
  const client = new Client({ name: 'brokered-shell-test', version: '1.0.0' }, { capabilities: options.elicit ? { elicitation: {} } : {} });
  const elicitations: ElicitRequest['params'][] = [];
  if (options.elicit) {
    const elicit = options.elicit;
    client.setRequestHandler(ElicitRequestSchema, async (request) => {
      elicitations.push(request.params);
      return elicit(request.params);
    });
  }
  await client.connect(transport);
  const handle: McpClient = {
    client,
    elicitations,
    stderr: () => stderr,
    async call(name, args = {}) {
      const result = (await client.callTool({ name, arguments: args }, undefined, { timeout: 120_000 })) as CallToolResult;
      const text = result.content.map((part) => (part.type === 'text' ? part.text : '')).join('\n');
      return { text, structured: (result.structuredContent ?? {}) as Record<string, unknown>, isError: result.isError === true };
    },
    close: () => client.close(),
  };
  clients.push(handle);
  return handle;
}
