// mdvfs-mcp's own stdio transport (mcp/stdio-transport.ts) on real streams, checked against the
// SDK's own message schema, and over the real `mdvfs-mcp` binary with calls in flight.
import { PassThrough, Writable } from 'node:stream';
import t from 'tap';
import { JSONRPCMessageSchema, type JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { LeanStdioServerTransport, MAX_LINE_BYTES, toMessage } from '../../mcp/stdio-transport.js';
import { runStdio, withCast } from '../helpers/mcp.js';

/** A stdout that records each write it receives. */
class Recorder extends Writable {
  writes: string[] = [];
  override _write(chunk: Buffer, _enc: BufferEncoding, cb: () => void): void {
    this.writes.push(chunk.toString('utf8'));
    cb();
  }
}

function open(): {
  stdin: PassThrough;
  stdout: Recorder;
  tr: LeanStdioServerTransport;
  got: JSONRPCMessage[];
  errors: Error[];
  closed: () => boolean;
} {
  const stdin = new PassThrough();
  const stdout = new Recorder();
  const tr = new LeanStdioServerTransport(stdin, stdout);
  const got: JSONRPCMessage[] = [];
  const errors: Error[] = [];
  let closed = false;
  tr.onmessage = (m) => got.push(m);
  tr.onerror = (e) => errors.push(e);
  tr.onclose = () => (closed = true);
  return { stdin, stdout, tr, got, errors, closed: () => closed };
}

const tick = (): Promise<void> => new Promise((r) => setImmediate(r));

void t.test('the hand check accepts and returns exactly what the SDK schema does', async (t) => {
  const samples: unknown[] = [
    { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'read_file', arguments: { path: 'a.md' } } },
    { jsonrpc: '2.0', id: 'x', method: 'tools/list' },
    { jsonrpc: '2.0', method: 'notifications/initialized' },
    { jsonrpc: '2.0', id: 2, method: 'ping', params: {} },
    { jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'x', _meta: { progressToken: 7 } } },
    { jsonrpc: '2.0', id: 4, result: {} },
    { jsonrpc: '2.0', id: 5, error: { code: -1, message: 'no' } },
    { jsonrpc: '2.0', id: 1.5, method: 'ping' },
    { jsonrpc: '2.0', id: 2 ** 53 + 2, method: 'ping' }, // an integer the SDK's schema refuses (not a safe integer)
    { jsonrpc: '2.0', id: null, method: 'ping' },
    { jsonrpc: '2.0', id: 6, method: 'ping', extra: true },
    { jsonrpc: '2.0', id: 7, method: 'ping', params: [1] },
    { jsonrpc: '2.0', id: 8, method: 'ping', params: null },
    { jsonrpc: '1.0', id: 9, method: 'ping' },
    { jsonrpc: '2.0', id: 10, method: 42 },
    { jsonrpc: '2.0', id: 11, method: 'tools/call', params: { _meta: 'bad' } },
    [{ jsonrpc: '2.0', id: 12, method: 'ping' }],
    null,
    'ping',
  ];
  for (const s of samples) {
    const want = JSONRPCMessageSchema.safeParse(s);
    let got: JSONRPCMessage | undefined;
    let threw = false;
    try {
      got = toMessage(s);
    } catch {
      threw = true;
    }
    t.equal(threw, !want.success, `same verdict: ${JSON.stringify(s)}`);
    if (want.success) t.same(got, want.data, `same message: ${JSON.stringify(s)}`);
  }
});

void t.test('framing: split lines, CRLF, bad lines, an oversized line', async (t) => {
  const { stdin, tr, got, errors, closed } = open();
  await tr.start();
  const a = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' });
  const b = JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list', params: {} });
  stdin.write(a.slice(0, 10));
  stdin.write(`${a.slice(10)}\n${b.slice(0, 5)}`);
  stdin.write(`${b.slice(5)}\r\nnot json\n{"jsonrpc":"2.0","id":3,"method":"ping","x":1}\n`);
  stdin.write(`${JSON.stringify({ jsonrpc: '2.0', id: 4, method: 'ping' })}\n`);
  await tick();
  t.same(
    got.map((m) => ('id' in m ? m.id : null)),
    [1, 2, 4],
    'whole messages in order, across chunk boundaries and with CRLF',
  );
  t.equal(errors.length, 2, 'a line that is not JSON and one the schema refuses are reported, and skipped');
  t.notOk(closed(), 'bad lines do not close the transport');
  stdin.write(Buffer.alloc(MAX_LINE_BYTES + 1, 'x'));
  await tick();
  t.match(errors.at(-1)?.message, /exceeded maximum size/);
  t.ok(closed(), 'an oversized line closes the transport, as the SDK transport does');
});

void t.test('the answers of one event-loop turn leave in one write', async (t) => {
  const { stdout, tr } = open();
  await tr.start();
  const sent = [1, 2, 3].map((id) => tr.send({ jsonrpc: '2.0', id, result: { n: id } }));
  await Promise.all(sent);
  t.equal(stdout.writes.length, 1, 'one write for three answers');
  t.same(
    stdout.writes[0]!.split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l).id),
    [1, 2, 3],
  );
  await tr.send({ jsonrpc: '2.0', id: 4, result: {} });
  t.equal(stdout.writes.length, 2, 'a later answer is written on its own');
  void tr.send({ jsonrpc: '2.0', id: 5, result: {} });
  await tr.close();
  t.equal(stdout.writes.length, 3, 'close writes what is still queued');
});

void t.test('mdvfs-mcp: many calls in flight, all answered, each with its own id', async (t) => {
  const cast = await withCast(t);
  const init = JSON.stringify({
    jsonrpc: '2.0',
    id: 0,
    method: 'initialize',
    params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
  });
  const lines = [init, JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' })];
  for (let i = 1; i <= 40; i++) {
    const args =
      i % 2 === 0
        ? { name: 'write_file', arguments: { path: `burst/f${i}.md`, content: `file ${i}\n` } }
        : { name: 'list_directory', arguments: {} };
    lines.push(JSON.stringify({ jsonrpc: '2.0', id: i, method: 'tools/call', params: args }));
  }
  lines.push('{broken');
  lines.push(
    JSON.stringify({
      jsonrpc: '2.0',
      id: 41,
      method: 'tools/call',
      params: { name: 'list_directory', arguments: { path: '/home' } },
    }),
  );
  const r = await runStdio(cast.svc.dataDir, { SERVICE_AS_USER: 'alice' }, `${lines.join('\n')}\n`);
  t.equal(r.code, 0);
  const answers = r.stdout
    .split('\n')
    .filter(Boolean)
    .map(
      (l) => JSON.parse(l) as { id: number; result: { isError?: boolean; structuredContent: Record<string, unknown> } },
    );
  t.same(
    answers.map((a) => a.id).sort((x, y) => x - y),
    Array.from({ length: 42 }, (_, i) => i),
    'one answer per request, nothing else on stdout',
  );
  t.notOk(
    answers.some((a) => a.result.isError),
    'no call failed',
  );
  const byId = new Map(answers.map((a) => [a.id, a]));
  t.equal(byId.get(40)!.result.structuredContent.path, '/home/alice/burst/f40.md');
  t.equal(byId.get(41)!.result.structuredContent.path, '/home', 'a malformed line in between does not end the session');
});
