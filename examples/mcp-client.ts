/**
 * An MCP client driving `brokered-shell mcp`, as Claude Desktop, Cursor, Zed or Codex do
 * once the server is in their configuration:
 *
 *   { "mcpServers": { "brokered-shell": { "command": "npx", "args": ["brokered-shell", "mcp", "--workspace", "/path/to/project"] } } }
 *
 * It runs a command that changes a file, reads the turn's diff and restores the turn, and
 * answers the server's approval questions (MCP elicitation) the way a person would in a
 * client's dialog: here, yes once.
 *
 * Run it:  node --import tsx examples/mcp-client.ts WORKSPACE
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { ElicitRequestSchema, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';

const workspace = path.resolve(process.argv[2] ?? process.cwd());
// The package's own CLI, next to where 'brokered-shell' resolves (dist/ installed, src/ here).
const cli = fileURLToPath(new URL('../bin/brokered-shell.js', import.meta.resolve('brokered-shell')));
const env = Object.fromEntries(Object.entries(process.env).filter((entry): entry is [string, string] => entry[1] !== undefined));

const client = new Client({ name: 'example-client', version: '1.0.0' }, { capabilities: { elicitation: {} } });
// The server asks here when a change needs approval; the choices are in the form's one field.
client.setRequestHandler(ElicitRequestSchema, async (request) => {
  console.log(`asked: ${request.params.message.split('\n')[0]}`);
  return { action: 'accept', content: { answer: 'once' } };
});
await client.connect(new StdioClientTransport({ command: process.execPath, args: [cli, 'mcp', '--workspace', workspace], env, stderr: 'inherit' }));

const text = (result: unknown) => (result as CallToolResult).content.map((part) => (part.type === 'text' ? part.text : '')).join('\n');
try {
  const { tools } = await client.listTools();
  console.log(`tools: ${tools.map((tool) => tool.name).join(', ')}`);
  const run = await client.callTool({ name: 'run', arguments: { command: 'echo changed > notes.txt && echo "{}" > .brokered-shell.json && cat notes.txt' } });
  const report = run.structuredContent as { exitCode: number; turnId: string; stdout: string };
  console.log(`run: exit ${report.exitCode}, stdout ${JSON.stringify(report.stdout)}, turn ${report.turnId}`);
  const diff = await client.callTool({ name: 'diff_turn', arguments: { turn: report.turnId, path: 'notes.txt' } });
  console.log(`diff: ${text(diff).split('\n').filter((line) => /^[-+][^-+]/.test(line)).join(' ')}`);
  const restore = await client.callTool({ name: 'restore_turn', arguments: { turn: 'latest' } });
  const restored = (restore.structuredContent as { restored: Array<{ path: string; action: string }> }).restored.filter((item) => item.action !== 'metadata');
  console.log(`restore: ${restored.map((item) => `${item.action} ${path.basename(item.path)}`).join(', ')}`);
} finally {
  await client.close();
}
