// mcp/tool-calls.ts answers tools/call exactly as the SDK's own handler does: the same server built
// both ways (createMcpServer with and without sdkToolCalls), on the same daemon, gets the same raw
// JSON-RPC requests and must send back the same bytes, for successes, tool errors, bad arguments,
// unknown tools, malformed requests and unknown methods.
import t from 'tap';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { createMcpServer } from '../../mcp/server.js';
import { withCast } from '../helpers/mcp.js';

const cast = await withCast(t);
const alice = cast.daemon.as({ authorization: 'User alice', origin: 'local' });
await alice.call('fs.write', { path: 'notes/a.md' }, { data: Buffer.from('# A\nfind me\n') });

/** A raw JSON-RPC line to one server, in memory: send a message, get the answer to its id. */
async function rawServer(sdkToolCalls: boolean): Promise<(msg: Record<string, unknown>) => Promise<string>> {
  const server = createMcpServer({ callerFor: () => alice, sdkToolCalls });
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  const waiting = new Map<unknown, (m: string) => void>();
  clientSide.onmessage = (m: JSONRPCMessage) => {
    if ('id' in m) waiting.get(m.id)?.(JSON.stringify(m));
  };
  await server.connect(serverSide);
  await clientSide.start();
  t.teardown(() => server.close());
  let id = 0;
  const send = (msg: Record<string, unknown>): Promise<string> => {
    const withId = { jsonrpc: '2.0', id: ++id, ...msg };
    return new Promise((resolve) => {
      waiting.set(withId.id, resolve);
      void clientSide.send(withId as JSONRPCMessage);
    });
  };
  await send({
    method: 'initialize',
    params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
  });
  await clientSide.send({ jsonrpc: '2.0', method: 'notifications/initialized' });
  return send;
}

const call = (name: unknown, args?: unknown, extra: Record<string, unknown> = {}): Record<string, unknown> => ({
  method: 'tools/call',
  params: { name, ...(args === undefined ? {} : { arguments: args }), ...extra },
});

const requests: [string, Record<string, unknown>][] = [
  ['read_file', call('read_file', { path: 'notes/a.md' })],
  ['read_file, absolute path', call('read_file', { path: '/home/alice/notes/a.md' })],
  ['read_file of a missing file (ENOENT)', call('read_file', { path: 'notes/missing.md' })],
  ['read_file where alice may not read (EACCES)', call('read_file', { path: '/home/bob/x.md' })],
  ['read_file with a wrong argument', call('read_file', { nope: 1 })],
  ['read_file without arguments', call('read_file')],
  ['read_file with a number for path', call('read_file', { path: 7 })],
  ['read_file with _meta', call('read_file', { path: 'notes/a.md' }, { _meta: { progressToken: 5 } })],
  ['write_file, same content', call('write_file', { path: 'notes/a.md', content: '# A\nfind me\n' })],
  [
    'write_file with a stale etag (EPRECOND)',
    call('write_file', { path: 'notes/a.md', content: 'x', expected_etag: 'bogus' }),
  ],
  ['list_directory', call('list_directory', {})],
  ['search_files', call('search_files', { pattern: 'find me' })],
  ['search_files with a bad max_results', call('search_files', { pattern: 'x', max_results: 0 })],
  ['find_files', call('find_files', { name: '*.md', type: 'file' })],
  ['create_directory that exists', call('create_directory', { path: 'notes' })],
  ['get_history', call('get_history', { limit: 3 })],
  ['revert to an unknown hash', call('revert', { hash: 'ffffffff' })],
  ['an unknown tool', call('no_such_tool', {})],
  ['a number for the tool name', call(5, {})],
  ['arguments as an array', call('read_file', ['notes/a.md'])],
  ['no params', { method: 'tools/call' }],
  ['an unknown method', { method: 'nothing/here', params: {} }],
  ['tools/list', { method: 'tools/list', params: {} }],
];

void t.test("the same answer, byte for byte, as the SDK's tools/call handler", async (t) => {
  const sdk = await rawServer(true);
  const lean = await rawServer(false);
  for (const [what, req] of requests) {
    const want = await sdk(req);
    const got = await lean(req);
    t.equal(got, want, what);
  }
  // the comparison can fail: two different calls answer differently
  t.not(
    await lean(call('read_file', { path: 'notes/a.md' })),
    await lean(call('read_file', { path: 'notes/missing.md' })),
  );
});
