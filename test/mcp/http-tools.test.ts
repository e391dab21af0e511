// Every tool end to end over Streamable HTTP (the SDK's real client) against `mdvfs serve`.
import t from 'tap';
import { TOOL_NAMES, call, data, errorCode, httpClient, rawMcp, text, withCast, INIT } from '../helpers/mcp.js';

const cast = await withCast(t);
const { svc } = cast;
const { client: alice } = await httpClient(t, svc, { authorization: 'User alice' });

void t.test('lists the 13 tools with schemas and annotations', async (t) => {
  const { tools } = await alice.listTools();
  t.same(tools.map((x) => x.name).sort(), [...TOOL_NAMES].sort());
  for (const tool of tools) {
    t.ok(tool.description && tool.description.length > 20, `${tool.name} has a description`);
    t.equal(tool.inputSchema.type, 'object', `${tool.name} input schema`);
    t.equal(tool.outputSchema?.type, 'object', `${tool.name} output schema`);
    t.type(tool.annotations?.readOnlyHint, 'boolean', `${tool.name} readOnlyHint`);
    t.type(tool.annotations?.destructiveHint, 'boolean', `${tool.name} destructiveHint`);
    t.type(tool.annotations?.idempotentHint, 'boolean', `${tool.name} idempotentHint`);
  }
  const byName = new Map(tools.map((x) => [x.name, x]));
  t.equal(byName.get('read_file')?.annotations?.readOnlyHint, true);
  t.equal(byName.get('delete_file')?.annotations?.destructiveHint, true);
  t.same(byName.get('write_file')?.inputSchema.required?.sort(), ['content', 'path']);
  t.same(byName.get('move_file')?.inputSchema.required?.sort(), ['destination', 'source']);
});

void t.test("write_file and read_file: relative paths land in the caller's home", async (t) => {
  const w = data(await call(alice, 'write_file', { path: 'notes/today.md', content: '# Today\nbuy milk\n' }));
  t.equal(w.path, '/home/alice/notes/today.md');
  t.equal(w.created, true);
  t.equal(w.size, 17);
  const r = await call(alice, 'read_file', { path: '/home/alice/notes/today.md' });
  t.equal(text(r), '# Today\nbuy milk\n');
  t.equal(data(r).etag, w.etag);
  const home = await call(alice, 'read_file', { path: '~/notes/today.md' });
  t.equal(text(home), '# Today\nbuy milk\n');
  t.equal(data(home).content, undefined, 'the content travels once, in the text block');
  t.equal(home.content.length, 1, 'a whole file: no note');
  // the same bytes through the daemon, as root
  const { data: bytes } = await cast.daemon.request('fs.read', { path: '/home/alice/notes/today.md' });
  t.equal(bytes.toString(), '# Today\nbuy milk\n');
  const st = await cast.daemon.call('fs.stat', { path: '/home/alice/notes/today.md' });
  const me = await cast.daemon.as({ authorization: 'User alice' }).call('auth.whoami', {});
  t.equal(st.uid, me.uid, 'owned by alice');
});

void t.test('write_file with expected_etag is optimistic locking', async (t) => {
  const first = data(await call(alice, 'write_file', { path: 'lock.md', content: 'v1' }));
  const second = data(await call(alice, 'write_file', { path: 'lock.md', content: 'v2', expected_etag: first.etag }));
  t.not(second.etag, first.etag);
  const stale = await call(alice, 'write_file', { path: 'lock.md', content: 'v3', expected_etag: first.etag });
  t.equal(stale.isError, true);
  t.equal(errorCode(stale), 'EPRECOND');
  t.match(text(stale), /^EPRECOND: /);
  t.equal(text(await call(alice, 'read_file', { path: 'lock.md' })), 'v2');
});

void t.test('create_directory, list_directory, move_file, delete_file', async (t) => {
  const d = data(await call(alice, 'create_directory', { path: 'proj/a/b' }));
  t.equal(d.path, '/home/alice/proj/a/b');
  t.equal(data(await call(alice, 'create_directory', { path: 'proj/a/b' })).created, false, 'mkdir -p is idempotent');
  await call(alice, 'write_file', { path: 'proj/readme.md', content: 'hello' });
  const l = data(await call(alice, 'list_directory', { path: 'proj' }));
  t.equal(l.path, '/home/alice/proj');
  t.same(
    l.entries.map((e: { name: string; is_dir: boolean }) => [e.name, e.is_dir]),
    [
      ['a', true],
      ['readme.md', false],
    ],
  );
  const readme = l.entries.find((e: { name: string }) => e.name === 'readme.md');
  t.equal(readme.size, 5);
  t.match(readme.mode, /^0[0-7]{3}$/);
  const home = data(await call(alice, 'list_directory', {}));
  t.equal(home.path, '/home/alice', 'no path lists the home directory');
  t.ok(home.entries.some((e: { name: string }) => e.name === 'proj'));

  const m = data(await call(alice, 'move_file', { source: 'proj/readme.md', destination: 'proj/a/README.md' }));
  t.same(m, { source: '/home/alice/proj/readme.md', destination: '/home/alice/proj/a/README.md' });
  t.equal(errorCode(await call(alice, 'read_file', { path: 'proj/readme.md' })), 'ENOENT');
  t.equal(text(await call(alice, 'read_file', { path: 'proj/a/README.md' })), 'hello');

  const notEmpty = await call(alice, 'delete_file', { path: 'proj' });
  t.equal(notEmpty.isError, true, 'a non-empty directory needs recursive');
  t.equal(errorCode(notEmpty), 'ENOTEMPTY');
  const del = data(await call(alice, 'delete_file', { path: 'proj', recursive: true }));
  t.equal(del.path, '/home/alice/proj');
  t.ok(del.deleted >= 4);
  t.equal(errorCode(await call(alice, 'list_directory', { path: 'proj' })), 'ENOENT');
  await call(alice, 'write_file', { path: 'gone.md', content: 'x' });
  t.equal(data(await call(alice, 'delete_file', { path: 'gone.md' })).path, '/home/alice/gone.md');
});

void t.test('search_files and find_files', async (t) => {
  await call(alice, 'write_file', { path: 'kb/one.md', content: 'alpha\nTODO: write more\n' });
  await call(alice, 'write_file', { path: 'kb/deep/two.md', content: 'todo lower\nbeta\n' });
  await call(alice, 'write_file', { path: 'kb/deep/three.txt', content: 'nothing\n' });

  const g = data(await call(alice, 'search_files', { pattern: 'TODO', path: 'kb' }));
  t.same(g.results, [{ file: '/home/alice/kb/one.md', line_num: 2, line: 'TODO: write more' }]);
  t.equal(g.count, 1);
  const gi = data(await call(alice, 'search_files', { pattern: 'todo', path: 'kb', ignore_case: true }));
  t.same(gi.results.map((r: { file: string }) => r.file).sort(), [
    '/home/alice/kb/deep/two.md',
    '/home/alice/kb/one.md',
  ]);
  const flat = data(
    await call(alice, 'search_files', { pattern: 'todo', path: 'kb', ignore_case: true, recursive: false }),
  );
  t.same(
    flat.results.map((r: { file: string }) => r.file),
    ['/home/alice/kb/one.md'],
    'recursive: false stays in the directory',
  );
  const none = await call(alice, 'search_files', { pattern: 'zzz-not-there', path: 'kb' });
  t.equal(data(none).count, 0);
  const bad = await call(alice, 'search_files', { pattern: '(unclosed', path: 'kb' });
  t.equal(bad.isError, true, 'an invalid regex is an error result');

  const f = data(await call(alice, 'find_files', { name: '*.md', path: 'kb' }));
  t.same(f.results.slice().sort(), ['/home/alice/kb/deep/two.md', '/home/alice/kb/one.md']);
  const dirs = data(await call(alice, 'find_files', { path: 'kb', type: 'd' }));
  t.ok(dirs.results.includes('/home/alice/kb/deep'));
  t.notOk(dirs.results.includes('/home/alice/kb/one.md'));
});

void t.test('commit, get_history, revert', async (t) => {
  await call(alice, 'write_file', { path: 'vc/doc.md', content: 'version 1' });
  const c1 = data(await call(alice, 'commit', { message: 'first version' }));
  t.match(c1.hash, /^[0-9a-f]{12}$/);
  t.equal(c1.author, 'alice');
  t.equal(c1.message, 'first version');
  await call(alice, 'write_file', { path: 'vc/doc.md', content: 'version 2' });
  const c2 = data(await call(alice, 'commit', { message: 'second version' }));
  const log = data(await call(alice, 'get_history', {}));
  t.same(
    log.commits.slice(0, 2).map((c: { hash: string }) => c.hash),
    [c2.hash, c1.hash],
    'newest first',
  );
  t.equal(data(await call(alice, 'get_history', { limit: 1 })).commits.length, 1);
  const hist = await call(alice, 'get_history', { limit: 2 });
  t.match(text(hist), c2.hash);

  const r = data(await call(alice, 'revert', { hash: c1.hash.slice(0, 8) }));
  t.equal(r.reverted_to, c1.hash);
  t.equal(r.commit.hash, r.hash);
  t.equal(text(await call(alice, 'read_file', { path: 'vc/doc.md' })), 'version 1');
  t.equal(data(await call(alice, 'get_history', { limit: 1 })).commits[0].hash, r.hash, 'the revert is a new commit');
  const unknown = await call(alice, 'revert', { hash: 'ffffffffffff' });
  t.equal(unknown.isError, true);
});

void t.test("errors are isError results with the daemon's message and code", async (t) => {
  const r = await call(alice, 'read_file', { path: 'no/such/file.md' });
  t.equal(r.isError, true);
  t.equal(errorCode(r), 'ENOENT');
  t.match(text(r), /^ENOENT: no such file or directory/);
  t.match(text(r), /\/home\/alice\/no\/such\/file\.md/);
  const dir = await call(alice, 'read_file', { path: '~' });
  t.equal(errorCode(dir), 'EISDIR');
});

void t.test('invalid arguments are schema errors, and the server keeps serving', async (t) => {
  const missing = await call(alice, 'read_file', {});
  t.equal(missing.isError, true);
  t.match(text(missing), /Input validation error/);
  const wrongType = await call(alice, 'write_file', { path: 'x.md', content: 42 });
  t.equal(wrongType.isError, true);
  t.match(text(wrongType), /Input validation error/);
  const badEnum = await call(alice, 'find_files', { type: 'socket' });
  t.match(text(badEnum), /Input validation error/);
  await t.rejects(
    alice.callTool({ name: 'no_such_tool', arguments: {} }).then((r) => {
      if (r.isError) throw new Error(String((r.content as { text: string }[])[0]?.text));
    }),
    /not found/,
  );
  t.equal(data(await call(alice, 'list_directory', {})).path, '/home/alice', 'still serving');
});

void t.test('stateless: requests without Mcp-Session-Id work', async (t) => {
  const list = await rawMcp(
    svc,
    'POST',
    { jsonrpc: '2.0', id: 7, method: 'tools/list', params: {} },
    { authorization: 'User alice' },
  );
  t.equal(list.status, 200);
  t.equal(list.headers['mcp-session-id'], undefined, 'no session was created');
  t.equal(list.json.result.tools.length, TOOL_NAMES.length);
  const r = await rawMcp(
    svc,
    'POST',
    {
      jsonrpc: '2.0',
      id: 8,
      method: 'tools/call',
      params: { name: 'read_file', arguments: { path: 'notes/today.md' } },
    },
    { authorization: 'User alice' },
  );
  t.equal(r.status, 200);
  t.equal(r.json.result.structuredContent.path, '/home/alice/notes/today.md');
  t.equal(r.json.result.content[0].text, '# Today\nbuy milk\n');
  const init = await rawMcp(svc, 'POST', INIT, { authorization: 'User alice' });
  t.equal(init.status, 200);
  t.match(init.headers['mcp-session-id'], /^[0-9a-f-]{36}$/, 'initialize starts a session');
});

void t.test('malformed JSON is a JSON-RPC parse error', async (t) => {
  const r = await rawMcp(svc, 'POST', '{"jsonrpc":', { authorization: 'User alice' });
  t.equal(r.status, 400);
  t.equal(r.json.error.code, -32700);
});

void t.test('DELETE ends a session', async (t) => {
  const { client, transport } = await httpClient(t, svc, { authorization: 'User alice' });
  const sid = transport.sessionId;
  t.ok(sid);
  await transport.terminateSession();
  const after = await rawMcp(
    svc,
    'POST',
    { jsonrpc: '2.0', id: 2, method: 'tools/list', params: {} },
    { authorization: 'User alice', 'mcp-session-id': sid! },
  );
  t.equal(after.status, 404, 'the session is gone');
  await client.close();
});
