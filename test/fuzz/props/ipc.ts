import fc from 'fast-check';
import { ErrorCodes } from '../../../src/core/index.js';
import { CONTROL_COMMANDS, HOST_FILE_OPERATION, parseJsonRequest } from '../../../src/ipc/json-protocol.js';
import { LineSplitter } from '../../../src/ipc/line-splitter.js';
import { looksLikeTextRequest, parseTextRequest } from '../../../src/ipc/text-protocol.js';

/**
 * The socket's two wire protocols (text token lines and JSON HostFileOperation lines,
 * as in the reference design) and the line splitter in front of them: any bytes a
 * client sends become lines of bounded size, and any line becomes a request or a
 * refusal with a reason, never an exception.
 */
const codes = new Set<string>(Object.values(ErrorCodes));
const operations = ['delete', 'mkdir', 'rename', 'copy', 'chmod', 'link', 'touch'] as const;

/** Lines biased towards the shapes the parsers split on. */
const lineText = fc.oneof(
  fc.string({ unit: 'grapheme', maxLength: 80 }),
  fc.string({ unit: fc.constantFrom('\t', '/', '.read', '.read-write', 'x', '{', '"', '\r', 'é', '\0'), maxLength: 24 }),
  fc.json({ maxDepth: 3 }),
  fc.constant('{"command":"HostFileOperation","__proto__":{"operation":"delete"},"path":"/x","sessionId":"s"}'),
);
const field = fc.string({ unit: 'grapheme', maxLength: 30 }).filter((s) => !s.includes('\t'));

/** Objects shaped like HostFileOperation requests with any field of any type. */
const hostOpLike = fc
  .record(
    {
      id: fc.oneof(fc.string({ maxLength: 300 }), fc.integer(), fc.double(), fc.boolean(), fc.constant(null)),
      command: fc.oneof(fc.constant(HOST_FILE_OPERATION), fc.constantFrom(...CONTROL_COMMANDS), fc.string({ maxLength: 70 }), fc.integer()),
      operation: fc.oneof(fc.constantFrom(...operations, 'open', 'shred'), fc.anything()),
      path: fc.oneof(fc.string({ maxLength: 40 }), fc.constant('/a/b'), fc.constant(''), fc.string({ minLength: 4097, maxLength: 4100 }), fc.anything()),
      from: fc.oneof(fc.string({ maxLength: 40 }), fc.constant('/a/c'), fc.anything()),
      to: fc.oneof(fc.string({ maxLength: 40 }), fc.constant('/a/d'), fc.anything()),
      sessionId: fc.oneof(fc.string({ maxLength: 20 }), fc.string({ minLength: 257, maxLength: 260 }), fc.anything()),
      toolCallId: fc.oneof(fc.string({ maxLength: 20 }), fc.anything()),
      deleteMode: fc.oneof(fc.constantFrom('trash', 'unlink'), fc.anything()),
      recursive: fc.oneof(fc.boolean(), fc.anything()),
      mode: fc.oneof(fc.integer({ min: -1, max: 0o10000 }), fc.string({ unit: fc.constantFrom('0', '7', '8', 'x'), maxLength: 6 }), fc.anything()),
      symbolic: fc.oneof(fc.boolean(), fc.anything()),
      constructor: fc.anything(),
      extra: fc.anything(),
    },
    { requiredKeys: [] },
  )
  .map((o) => JSON.stringify(o));

function checkJsonAnswer(line: string): void {
  const parsed = parseJsonRequest(line);
  if (parsed.ok === false) {
    const { answer } = parsed;
    if (answer.ok !== false || answer.decision !== 'deny') throw new Error(`a refusal that does not deny: ${JSON.stringify(answer)}`);
    if (!codes.has(answer.errorCode ?? '') || !answer.error) throw new Error(`no stable code or message: ${JSON.stringify(answer)}`);
    // The answer is one JSON line, whatever the request held.
    const wire = JSON.stringify(answer);
    if (wire.includes('\n') || JSON.stringify(JSON.parse(wire)) !== wire) throw new Error('the answer is not one JSON line');
    return;
  }
  let value: Record<string, unknown>;
  try {
    value = JSON.parse(line) as Record<string, unknown>;
  } catch {
    throw new Error('accepted a line that is not JSON');
  }
  if (parsed.ok === 'client-command') {
    if (parsed.command !== value.command || CONTROL_COMMANDS.has(parsed.command) || parsed.command === HOST_FILE_OPERATION) {
      throw new Error(`client command ${parsed.command}`);
    }
    return;
  }
  const { request, message } = parsed;
  if (value.command !== HOST_FILE_OPERATION || request.operation !== message.operation || request.sessionId !== value.sessionId) {
    throw new Error('request differs from its line');
  }
  if (request.targets.length === 0) throw new Error('a request without targets');
  for (const t of request.targets) {
    if (typeof t.path !== 'string' || t.path === '' || t.path.length > 4096) throw new Error(`target path ${JSON.stringify(t.path)}`);
    if (![value.path, value.from, value.to].includes(t.path)) throw new Error('a target path the client did not send');
  }
  if ((typeof value.id === 'string' || typeof value.id === 'number') !== (request.clientId !== undefined)) throw new Error('id not echoed');
}

export const properties = {
  'LineSplitter: any chunking gives the lines a plain split gives, and never holds more than its limit': () =>
    fc.property(
      fc.array(fc.uint8Array({ maxLength: 40 }).map((b) => Buffer.from(b.map((x) => (x % 5 === 0 ? 0x0a : x)))), { maxLength: 12 }),
      fc.integer({ min: 1, max: 64 }),
      (chunks, max) => {
        const splitter = new LineSplitter(max);
        const got: string[] = [];
        for (const chunk of chunks) {
          got.push(...splitter.push(chunk).map((l) => l.toString('latin1')));
          if (splitter.pendingBytes > max) throw new Error(`holds ${splitter.pendingBytes} > ${max}`);
          if (splitter.overflowed) break;
        }
        const all = Buffer.concat(chunks).toString('latin1').split('\n');
        const tail = all.pop() as string;
        const firstLong = all.findIndex((l) => l.length > max);
        const overflow = firstLong >= 0 || tail.length > max;
        if (splitter.overflowed !== overflow) throw new Error(`overflowed ${splitter.overflowed}, want ${overflow}`);
        const want = firstLong >= 0 ? all.slice(0, firstLong) : all;
        if (JSON.stringify(got) !== JSON.stringify(want)) throw new Error(`lines ${JSON.stringify(got)} want ${JSON.stringify(want)}`);
        if (!overflow && splitter.pendingBytes !== tail.length) throw new Error('pending bytes');
      },
    ),

  'text protocol: any line is a request or a refusal with a reason': () =>
    fc.property(lineText, (line) => {
      const parsed = parseTextRequest(line);
      looksLikeTextRequest(line);
      const fields = line.split('\t');
      if (!parsed.ok) {
        if (!parsed.reason) throw new Error('a refusal without a reason');
        return;
      }
      const [cls = '', path = '', session = '', call = ''] = fields;
      const target = parsed.request.targets[0];
      if (fields.length !== 4 || parsed.request.targets.length !== 1 || !target) throw new Error('accepted a line without 4 fields');
      if (target.path !== path || !path.startsWith('/')) throw new Error('path changed or relative');
      if (target.access !== (cls.endsWith('.read-write') ? 'write' : 'read') || !(cls.endsWith('.read') || cls.endsWith('.read-write'))) throw new Error('access');
      if (parsed.request.sessionId !== session || (parsed.request.toolCallId ?? '') !== call) throw new Error('ids');
    }),

  'text protocol: well-formed lines parse to exactly their fields': () =>
    fc.property(fc.constantFrom('com.x.sandbox.read', 'com.x.sandbox.read-write', '.read', 'a.read-write'), field.map((p) => `/${p}`), field, field, (cls, path, session, call) => {
      const parsed = parseTextRequest([cls, path, session, call].join('\t'));
      if (!parsed.ok) throw new Error(parsed.reason);
      const target = parsed.request.targets[0];
      if (target?.path !== path || target.access !== (cls.endsWith('.read-write') ? 'write' : 'read')) throw new Error('target');
      if (parsed.request.sessionId !== session || (parsed.request.toolCallId ?? '') !== call) throw new Error('ids');
    }),

  'JSON protocol: any line is a request, a client command or a refusal with a stable code': () => fc.property(lineText, checkJsonAnswer),

  'JSON protocol: HostFileOperation-shaped objects with any field values': () => fc.property(hostOpLike, checkJsonAnswer),
} satisfies Record<string, () => fc.IRawProperty<unknown[]>>;
