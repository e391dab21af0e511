// The built `mdvfs-mcp` over stdio with the SDK's real StdioClientTransport, sharing the daemon of
// a running `mdvfs serve` (so REST and stdio see one copy of the data).
import t from 'tap';
import { ResourceUpdatedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { TOOL_NAMES, call, data, errorCode, runStdio, stdioClient, text, until, withCast } from '../helpers/mcp.js';

const cast = await withCast(t);
const { svc, daemon } = cast;
const dataDir = svc.dataDir;

void t.test("as SERVICE_AS_USER: every tool, paths in the user's home", async (t) => {
  const { client: alice } = await stdioClient(t, dataDir, { SERVICE_AS_USER: 'alice' });
  const { tools } = await alice.listTools();
  t.same(tools.map((x) => x.name).sort(), [...TOOL_NAMES].sort());

  t.equal(data(await call(alice, 'create_directory', { path: 'notes' })).path, '/home/alice/notes');
  const w = data(await call(alice, 'write_file', { path: 'notes/a.md', content: '# A\nfind me\n' }));
  t.equal(w.path, '/home/alice/notes/a.md');
  t.equal(text(await call(alice, 'read_file', { path: 'notes/a.md' })), '# A\nfind me\n');
  t.same(
    data(await call(alice, 'list_directory', { path: 'notes' })).entries.map((e: { name: string }) => e.name),
    ['a.md'],
  );
  t.same(data(await call(alice, 'search_files', { pattern: 'find me' })).results, [
    { file: '/home/alice/notes/a.md', line_num: 2, line: 'find me' },
  ]);
  t.same(data(await call(alice, 'find_files', { name: '*.md' })).results, ['/home/alice/notes/a.md']);
  const c1 = data(await call(alice, 'commit', { message: 'add a' }));
  t.equal(c1.author, 'alice');
  t.same(
    data(await call(alice, 'move_file', { source: 'notes/a.md', destination: 'notes/b.md' })).destination,
    '/home/alice/notes/b.md',
  );
  await call(alice, 'commit', { message: 'rename' });
  t.equal(data(await call(alice, 'get_history', { limit: 5 })).commits[0].message, 'rename');
  t.equal(data(await call(alice, 'delete_file', { path: 'notes/b.md' })).path, '/home/alice/notes/b.md');
  const rv = data(await call(alice, 'revert', { hash: c1.hash }));
  t.equal(rv.reverted_to, c1.hash);
  t.equal(text(await call(alice, 'read_file', { path: 'notes/a.md' })), '# A\nfind me\n', 'revert restored a.md');
  t.equal(errorCode(await call(alice, 'read_file', { path: 'notes/b.md' })), 'ENOENT');
  t.equal(
    errorCode(await call(alice, 'read_file', { path: '/home/bob/x.md' })),
    'EACCES',
    'permissions apply over stdio too',
  );
  t.match(text(await call(alice, 'read_file', { nope: 1 })), /Input validation error/, 'schema errors, not crashes');
  t.equal(data(await call(alice, 'list_directory', {})).path, '/home/alice', 'still serving');
});

void t.test('stdio and REST see the same data', async (t) => {
  const { client: bob } = await stdioClient(t, dataDir, { SERVICE_AS_USER: 'bob' });
  await call(bob, 'write_file', { path: 'shared-view.md', content: 'written over stdio' });
  const rest = await fetch(`${svc.base}/fs/shared-view.md`, { headers: { Authorization: 'User bob' } });
  t.equal(rest.status, 200);
  t.equal(await rest.text(), 'written over stdio');
  const put = await fetch(`${svc.base}/fs/from-rest.md`, {
    method: 'PUT',
    headers: { Authorization: 'User bob' },
    body: 'written over REST',
  });
  t.equal(put.status, 200);
  t.equal(text(await call(bob, 'read_file', { path: 'from-rest.md' })), 'written over REST');
});

void t.test('SERVICE_TOKEN and SERVICE_ON_BEHALF_OF', async (t) => {
  await daemon.call('admin.groupMemberAdd', { user: 'bot', group: 'alice' });
  await daemon.call('fs.chmod', { path: '/home/alice', mode: '0770' });
  await daemon.call('auth.delegationAdd', { agent: 'bot', user: 'alice' }); // alice's consent
  const { client: bot } = await stdioClient(t, dataDir, { SERVICE_TOKEN: cast.botToken });
  t.equal(data(await call(bot, 'list_directory', {})).path, '/home/bot');
  const { client: delegated } = await stdioClient(t, dataDir, {
    SERVICE_TOKEN: cast.botToken,
    SERVICE_ON_BEHALF_OF: 'alice',
  });
  t.equal(
    data(await call(delegated, 'write_file', { path: 'by-bot.md', content: 'x' })).path,
    '/home/alice/by-bot.md',
    "the delegate's home",
  );
  await daemon.call('fs.chmod', { path: '/home/alice/notes/a.md', mode: '0600' });
  t.equal(
    errorCode(await call(delegated, 'read_file', { path: 'notes/a.md' })),
    'EACCES',
    'intersection: bot lacks read',
  );
});

void t.test('no identity variables: root (local, trusted)', async (t) => {
  const { client: root } = await stdioClient(t, dataDir);
  t.equal(data(await call(root, 'list_directory', {})).path, '/');
  t.equal(text(await call(root, 'read_file', { path: '/home/alice/notes/a.md' })), '# A\nfind me\n');
});

void t.test('an unknown user or a bad token is an error, never root', async (t) => {
  const unknown = await runStdio(dataDir, { SERVICE_AS_USER: 'mallory' });
  t.equal(unknown.code, 1);
  t.equal(unknown.stdout, '', 'nothing on stdout');
  t.match(unknown.stderr, /^mdvfs-mcp: cannot act as user 'mallory': EAUTH/);
  t.equal(unknown.stderr.trim().split('\n').length, 1, 'one line');
  const bad = await runStdio(dataDir, { SERVICE_TOKEN: 'mdvfs_bogus' });
  t.equal(bad.code, 1);
  t.equal(bad.stdout, '');
  t.match(bad.stderr, /cannot act as the token in SERVICE_TOKEN: EAUTH/);
  t.notMatch(bad.stderr, /mdvfs_bogus/, 'the token is not echoed');
  const both = await runStdio(dataDir, { SERVICE_AS_USER: 'alice', SERVICE_TOKEN: cast.botToken });
  t.equal(both.code, 1);
  t.match(both.stderr, /not both/);
  const badDelegate = await runStdio(dataDir, { SERVICE_AS_USER: 'bob', SERVICE_ON_BEHALF_OF: 'alice' });
  t.equal(badDelegate.code, 1, 'a user who may not delegate is refused at startup');
});

void t.test('stdout carries only JSON-RPC', async (t) => {
  const init = JSON.stringify({
    jsonrpc: '2.0',
    id: 1,
    method: 'initialize',
    params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
  });
  const list = JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list', params: {} });
  const read = JSON.stringify({
    jsonrpc: '2.0',
    id: 3,
    method: 'tools/call',
    params: { name: 'list_directory', arguments: {} },
  });
  // stdin closes right after the last request: every answer must still arrive
  const r = await runStdio(dataDir, { SERVICE_AS_USER: 'alice' }, `${init}\n${list}\n${read}\n`);
  t.equal(r.code, 0, 'exits when stdin closes');
  const lines = r.stdout.split('\n').filter((l) => l !== '');
  t.same(
    lines.map((l) => JSON.parse(l).id),
    [1, 2, 3],
  );
  t.equal(JSON.parse(lines[2]!).result.structuredContent.path, '/home/alice');
  for (const l of lines) t.equal(JSON.parse(l).jsonrpc, '2.0');
  t.match(r.stderr, /serving .* as alice/);
});

void t.test('resource subscriptions over stdio', async (t) => {
  const { client: alice } = await stdioClient(t, dataDir, { SERVICE_AS_USER: 'alice' });
  const seen: string[] = [];
  alice.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => {
    seen.push(n.params.uri);
  });
  const uri = 'mdvfs:///home/alice/notes/a.md';
  await alice.subscribeResource({ uri });
  // a change through REST reaches the stdio subscriber
  const put = await fetch(`${svc.base}/fs/notes/a.md`, {
    method: 'PUT',
    headers: { Authorization: 'User alice' },
    body: 'changed over REST',
  });
  t.equal(put.status, 200);
  await until(() => seen.includes(uri), 'notifications/resources/updated');
  t.equal(((await alice.readResource({ uri })).contents[0] as { text: string }).text, 'changed over REST');
});

void t.test('mdvfs-mcp starts a daemon when none runs, and outlives a daemon restart', async (t) => {
  const { tempDir, rootDaemon } = await import('../helpers/mcp.js');
  const fresh = tempDir(t);
  const daemonPids = new Set<number>();
  // stop every daemon it started (found by pid), so nothing outlives the test
  t.teardown(() => {
    for (const pid of daemonPids) {
      try {
        process.kill(pid, 'SIGTERM');
      } catch {
        // already gone
      }
    }
  });
  const pingPid = async (): Promise<number> => {
    const c = await rootDaemon(t, fresh);
    const { pid } = await c.call('sys.ping', {});
    c.close();
    daemonPids.add(pid);
    return pid;
  };
  const { client: root } = await stdioClient(t, fresh);
  t.equal(data(await call(root, 'write_file', { path: '/hello.md', content: 'hi' })).path, '/hello.md');
  const first = await pingPid();
  t.ok(first > 0, 'a daemon runs for the fresh data dir');

  process.kill(first, 'SIGTERM');
  await until(() => {
    try {
      process.kill(first, 0);
      return false;
    } catch {
      return true;
    }
  }, 'the daemon to exit');
  // the first call after the restart may fail (its connection is gone); a later one reconnects
  await until(
    async () => !(await call(root, 'read_file', { path: '/hello.md' })).isError,
    'a call after the daemon restart',
  );
  t.equal(text(await call(root, 'read_file', { path: '/hello.md' })), 'hi', 'the data survived, the session too');
  t.not(await pingPid(), first, 'a new daemon serves the data dir');
});
