// Who may do what over /mcp: permissions, delegation, workspaces, sessions bound to identities,
// authentication on every request, and the Host check.
import http from 'node:http';
import t from 'tap';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { INIT, call, data, errorCode, httpClient, rawMcp, startServe, text, withCast } from '../helpers/mcp.js';

const cast = await withCast(t);
const { svc, daemon } = cast;
const { client: alice } = await httpClient(t, svc, { authorization: 'User alice' });
const { client: bob } = await httpClient(t, svc, { authorization: 'User bob' });

let workspace: { id: string; secret: string } | undefined;
await call(alice, 'write_file', { path: 'secret.md', content: 'alice only' });
await call(bob, 'write_file', { path: 'bob.md', content: 'bob only' });

void t.test('permission denials are isError results with EACCES', async (t) => {
  const read = await call(bob, 'read_file', { path: '/home/alice/secret.md' });
  t.equal(read.isError, true);
  t.equal(errorCode(read), 'EACCES');
  t.match(text(read), /^EACCES: permission denied/);
  t.equal(errorCode(await call(bob, 'write_file', { path: '/home/alice/evil.md', content: 'x' })), 'EACCES');
  t.equal(errorCode(await call(bob, 'list_directory', { path: '/home/alice' })), 'EACCES');
  t.equal(errorCode(await call(bob, 'delete_file', { path: '/home/alice/secret.md' })), 'EACCES');
  t.equal(
    errorCode(await call(bob, 'move_file', { source: '/home/alice/secret.md', destination: '/home/bob/stolen.md' })),
    'EACCES',
  );
  t.equal(errorCode(await call(bob, 'create_directory', { path: '/home/alice/x' })), 'EACCES');
  // search skips what bob cannot read instead of leaking it
  const g = data(await call(bob, 'search_files', { pattern: 'alice', path: '/home' }));
  t.same(g.results, []);
  const f = data(await call(bob, 'find_files', { name: '*.md', path: '/home' }));
  t.same(f.results, ['/home/bob/bob.md']);
  t.equal(text(await call(alice, 'read_file', { path: 'secret.md' })), 'alice only', 'the file is intact');
});

void t.test("delegation: the delegate's home, intersection of both identities' rights", async (t) => {
  // bot may enter alice's home through alice's group; alice's home is group-writable
  await daemon.call('admin.groupMemberAdd', { user: 'bot', group: 'alice' });
  await daemon.call('fs.chmod', { path: '/home/alice', mode: '0770' });
  await daemon.call('fs.mkdir', { path: '/shared', parents: true, mode: '0777' });
  await daemon.call('fs.chmod', { path: '/shared', mode: '0777' });
  await daemon.call('fs.write', { path: '/shared/open.md' }, { data: Buffer.from('everyone') });
  await daemon.call('fs.write', { path: '/shared/root-only.md', mode: '0600' }, { data: Buffer.from('root') });
  await daemon.call('fs.chmod', { path: '/shared/root-only.md', mode: '0600' });

  await daemon.call('auth.delegationAdd', { agent: 'bot', user: 'alice' }); // alice's consent
  const { client: delegated } = await httpClient(t, svc, {
    authorization: `Bearer ${cast.botToken}`,
    onBehalfOf: 'alice',
  });
  const w = data(await call(delegated, 'write_file', { path: 'from-bot.md', content: 'drafted by bot' }));
  t.equal(w.path, '/home/alice/from-bot.md', "relative paths land in the delegate's home");
  const st = await daemon.call('fs.stat', { path: '/home/alice/from-bot.md' });
  const aliceId = await daemon.as({ authorization: 'User alice' }).call('auth.whoami', {});
  t.equal(st.uid, aliceId.uid, 'new files belong to the delegate');

  // alice may read her 0600 file, bot (group member) may not: the intersection denies
  await daemon.call('fs.chmod', { path: '/home/alice/secret.md', mode: '0600' });
  t.equal(
    errorCode(await call(delegated, 'read_file', { path: 'secret.md' })),
    'EACCES',
    'alice can, bot cannot: denied',
  );
  // bot may read its own home, alice may not: denied
  await daemon
    .as({ authorization: `Bearer ${cast.botToken}` })
    .call('fs.write', { path: '/home/bot/mine.md' }, { data: Buffer.from('bot') });
  t.equal(
    errorCode(await call(delegated, 'read_file', { path: '/home/bot/mine.md' })),
    'EACCES',
    'bot can, alice cannot: denied',
  );
  t.equal(errorCode(await call(delegated, 'read_file', { path: '/shared/root-only.md' })), 'EACCES');
  t.equal(text(await call(delegated, 'read_file', { path: '/shared/open.md' })), 'everyone', 'both can: allowed');

  const c = data(await call(delegated, 'commit', { message: 'delegated commit' }));
  t.equal(c.author, 'bot');
  t.equal(c.on_behalf_of, 'alice');

  // a plain user may not delegate by name
  const r = await rawMcp(svc, 'POST', INIT, { authorization: 'User bob', 'x-service-on-behalf-of': 'alice' });
  t.not(r.status, 200, 'bob cannot act on behalf of alice');
  t.ok(r.json?.error, 'with a JSON-RPC error body');
});

void t.test('workspace tokens are confined to the workspace', async (t) => {
  await daemon.call('fs.mkdir', { path: '/projects/ws1/docs', parents: true });
  await daemon.call('fs.chown', { path: '/projects/ws1', owner: 'bot' });
  await daemon.call('fs.chown', { path: '/projects/ws1/docs', owner: 'bot' });
  await daemon.call('fs.write', { path: '/projects/outside.md' }, { data: Buffer.from('outside') });
  const ws = await daemon.call('ws.create', { name: 'ws1', root_path: '/projects/ws1' });
  const { secret } = await daemon.call('ws.token', { id: ws.id, name: 'mcp', agent_token: cast.botToken });
  workspace = { id: ws.id, secret };

  const { client: wsc } = await httpClient(t, svc, { authorization: `Bearer ${secret}`, workspace: ws.id });
  const w = data(await call(wsc, 'write_file', { path: 'docs/plan.md', content: 'the plan' }));
  t.equal(w.path, '/docs/plan.md', 'workspace paths are workspace-relative');
  const real = await daemon.request('fs.read', { path: '/projects/ws1/docs/plan.md' });
  t.equal(real.data.toString(), 'the plan', 'stored under the workspace root');
  t.same(
    data(await call(wsc, 'list_directory', { path: '/' })).entries.map((e: { name: string }) => e.name),
    ['docs'],
    '/ is the workspace root',
  );
  const escape = await call(wsc, 'read_file', { path: '/../outside.md' });
  t.equal(escape.isError, true, '.. stops at the workspace root');
  t.equal(errorCode(escape), 'ENOENT');
  t.equal(
    errorCode(await call(wsc, 'read_file', { path: '/home/alice/secret.md' })),
    'ENOENT',
    'absolute paths stay inside',
  );
  const found = data(await call(wsc, 'find_files', { path: '/', name: '*.md' }));
  t.same(found.results, ['/docs/plan.md']);

  const wrongWs = await rawMcp(svc, 'POST', INIT, {
    authorization: `Bearer ${secret}`,
    'x-service-workspace': '00000000-0000-4000-8000-000000000000',
  });
  t.equal(wrongWs.status, 401, 'a secret with the wrong workspace id is refused');
});

void t.test('the credential-switch attack is refused', async (t) => {
  const { transport } = await httpClient(t, svc, { authorization: 'User alice' });
  const sid = transport.sessionId!;
  t.ok(sid);
  const call1 = {
    jsonrpc: '2.0',
    id: 11,
    method: 'tools/call',
    params: { name: 'read_file', arguments: { path: '/home/alice/secret.md' } },
  };
  const asBob = await rawMcp(svc, 'POST', call1, {
    authorization: 'User bob',
    'mcp-session-id': sid,
    'mcp-protocol-version': '2025-06-18',
  });
  t.equal(asBob.status, 403, "bob cannot ride alice's session");
  t.equal(asBob.json.result, undefined);
  t.notMatch(asBob.text, /alice only/);
  const anonymous = await rawMcp(svc, 'POST', call1, { 'mcp-session-id': sid, 'mcp-protocol-version': '2025-06-18' });
  t.equal(anonymous.status, 403, 'nor can an anonymous (root) request');
  const delegating = await rawMcp(svc, 'POST', call1, {
    authorization: 'User alice',
    'x-service-on-behalf-of': 'bob',
    'mcp-session-id': sid,
  });
  t.not(delegating.status, 200, 'nor the same user with a different delegation');
  const sse = await rawMcp(svc, 'GET', undefined, {
    authorization: 'User bob',
    'mcp-session-id': sid,
    accept: 'text/event-stream',
  });
  t.equal(sse.status, 403, "nor can bob open the session's event stream");
  const del = await rawMcp(svc, 'DELETE', undefined, { authorization: 'User bob', 'mcp-session-id': sid });
  t.equal(del.status, 403, 'nor end it');

  // the SDK client with bob's credentials and alice's session id fails too
  const hijack = new Client({ name: 'hijack', version: '1' });
  const tr = new StreamableHTTPClientTransport(svc.url, {
    sessionId: sid,
    requestInit: { headers: { Authorization: 'User bob' } },
  });
  await hijack.connect(tr).catch(() => undefined);
  await t.rejects(hijack.callTool({ name: 'read_file', arguments: { path: '/home/alice/secret.md' } }));
  await hijack.close().catch(() => undefined);

  const ok = await rawMcp(svc, 'POST', call1, {
    authorization: 'User alice',
    'mcp-session-id': sid,
    'mcp-protocol-version': '2025-06-18',
  });
  t.equal(ok.status, 200, 'alice herself still may');
  t.match(ok.text, /alice only/);
});

void t.test('every request is authenticated', async (t) => {
  const unknown = await rawMcp(svc, 'POST', INIT, { authorization: 'User mallory' });
  t.equal(unknown.status, 401);
  t.equal(unknown.json.error.data.code, 'EAUTH');
  const badToken = await rawMcp(svc, 'POST', INIT, { authorization: 'Bearer not-a-token' });
  t.equal(badToken.status, 401);
  const garbage = await rawMcp(svc, 'POST', INIT, { authorization: 'Basic Zm9vOmJhcg==' });
  t.equal(garbage.status, 401, 'unknown schemes fail closed');
  const anon = await rawMcp(svc, 'POST', {
    jsonrpc: '2.0',
    id: 1,
    method: 'tools/call',
    params: { name: 'list_directory', arguments: {} },
  });
  t.equal(anon.status, 200, 'no header is root (contract default)');
  t.equal(anon.json.result.structuredContent.path, '/');

  // a token regenerated mid-session stops working on that session
  await daemon.call('admin.userAdd', { name: 'tmpbot', is_agent: true });
  const { token } = await daemon.call('admin.token', { name: 'tmpbot' });
  const { client: c, transport } = await httpClient(t, svc, { authorization: `Bearer ${token}` });
  t.equal(data(await call(c, 'list_directory', {})).path, '/home/tmpbot');
  await daemon.call('admin.token', { name: 'tmpbot' });
  const stale = await rawMcp(
    svc,
    'POST',
    { jsonrpc: '2.0', id: 3, method: 'tools/list', params: {} },
    { authorization: `Bearer ${token}`, 'mcp-session-id': transport.sessionId! },
  );
  t.equal(stale.status, 401);
});

void t.test('SERVICE_ANONYMOUS=deny: no credentials is 401, as in REST', async (t) => {
  const strict = await startServe(t, { env: { SERVICE_ANONYMOUS: 'deny' } });
  const r = await rawMcp(strict, 'POST', INIT);
  t.equal(r.status, 401);
  t.equal(r.json.error.data.code, 'EAUTH');
  const rest = await fetch(`${strict.base}/fs/`);
  t.equal(rest.status, 401, 'REST agrees');
  const d = await (await import('../helpers/mcp.js')).rootDaemon(t, strict.dataDir);
  await d.call('admin.userAdd', { name: 'carol' });
  const ok = await rawMcp(strict, 'POST', INIT, { authorization: 'User carol' });
  t.equal(ok.status, 200);
});

void t.test('DNS-rebinding protection: the Host header must be a loopback name', async (t) => {
  const withHost = (host: string): Promise<number> =>
    new Promise((resolve, reject) => {
      const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} });
      const req = http.request(
        {
          host: '127.0.0.1',
          port: svc.port,
          method: 'POST',
          path: '/mcp',
          setHost: false,
          headers: {
            host,
            'content-type': 'application/json',
            accept: 'application/json, text/event-stream',
            'content-length': Buffer.byteLength(body),
          },
        },
        (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode ?? 0));
        },
      );
      req.on('error', reject);
      req.end(body);
    });
  t.equal(await withHost('evil.example'), 403);
  t.equal(await withHost(`evil.example:${svc.port}`), 403);
  t.equal(await withHost(`127.0.0.1:${svc.port + 1}`), 403, 'another port is another origin');
  t.equal(await withHost(`127.0.0.1:${svc.port}`), 200);
  t.equal(await withHost(`localhost:${svc.port}`), 200);
  t.equal(await withHost(`[::1]:${svc.port}`), 200);
});

void t.test("resources: listed and read with the caller's permissions", async (t) => {
  const { resources } = await alice.listResources();
  const uris = resources.map((r) => r.uri);
  t.ok(uris.includes('mdvfs:///home/alice/secret.md'));
  t.ok(uris.includes('mdvfs:///home/alice'), 'the home directory is a resource');
  t.notOk(
    uris.some((u) => u.startsWith('mdvfs:///home/bob')),
    "nothing of bob's",
  );
  const r = await alice.readResource({ uri: 'mdvfs:///home/alice/secret.md' });
  t.equal((r.contents[0] as { text: string }).text, 'alice only');
  t.equal(r.contents[0]?.mimeType, 'text/markdown');
  const dir = await alice.readResource({ uri: 'mdvfs:///home/alice' });
  const listing = JSON.parse((dir.contents[0] as { text: string }).text);
  t.equal(listing.path, '/home/alice');
  await t.rejects(bob.readResource({ uri: 'mdvfs:///home/alice/secret.md' }), /EACCES/);
  await t.rejects(
    bob.subscribeResource({ uri: 'mdvfs:///home/alice/secret.md' }),
    /EACCES/,
    'no subscriptions to unreadable files',
  );
  await t.rejects(alice.readResource({ uri: 'file:///etc/passwd' }));
  const templates = await alice.listResourceTemplates();
  t.equal(templates.resourceTemplates[0]?.uriTemplate, 'mdvfs://{+path}');
});

void t.test('resource subscriptions: updates for readable files only', async (t) => {
  await daemon.call('fs.write', { path: '/shared/watched.md' }, { data: Buffer.from('v1') });
  await daemon.call('fs.write', { path: '/shared/revoked.md' }, { data: Buffer.from('v1') });
  const { client: watcher } = await httpClient(t, svc, { authorization: 'User bob' });
  const seen: string[] = [];
  const { ResourceUpdatedNotificationSchema } = await import('@modelcontextprotocol/sdk/types.js');
  watcher.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => {
    seen.push(n.params.uri);
  });
  await watcher.subscribeResource({ uri: 'mdvfs:///shared/watched.md' });
  await watcher.subscribeResource({ uri: 'mdvfs:///shared/revoked.md' });
  // the GET stream opens in the background; wait until an update arrives for a change made elsewhere
  const { until } = await import('../helpers/mcp.js');
  let n = 0;
  await until(async () => {
    await daemon.call('fs.write', { path: '/shared/watched.md' }, { data: Buffer.from(`v${++n}`) });
    await new Promise((r) => setTimeout(r, 100));
    return seen.includes('mdvfs:///shared/watched.md');
  }, 'a resource update notification');

  // root takes revoked.md away from bob, then changes both files: only watched.md is announced
  await daemon.call('fs.chmod', { path: '/shared/revoked.md', mode: '0600' });
  seen.length = 0;
  await daemon.call('fs.write', { path: '/shared/revoked.md' }, { data: Buffer.from('secret now') });
  await daemon.call('fs.chmod', { path: '/shared/watched.md', mode: '0666' });
  data(await call(alice, 'write_file', { path: '/shared/watched.md', content: 'changed over MCP' }));
  await until(() => seen.includes('mdvfs:///shared/watched.md'), 'the second update');
  await daemon.call('fs.write', { path: '/shared/watched.md' }, { data: Buffer.from('once more') });
  await until(() => seen.filter((u) => u === 'mdvfs:///shared/watched.md').length >= 2, 'the third update');
  t.notOk(seen.includes('mdvfs:///shared/revoked.md'), 'no update for a file bob may no longer read');

  await watcher.unsubscribeResource({ uri: 'mdvfs:///shared/watched.md' });
  t.pass('unsubscribed');
});

void t.test('resource subscriptions inside a workspace use workspace paths', async (t) => {
  if (!workspace) return t.fail('the workspace subtest did not run');
  const { client: wsc } = await httpClient(t, svc, {
    authorization: `Bearer ${workspace.secret}`,
    workspace: workspace.id,
  });
  const { resources } = await wsc.listResources();
  t.ok(
    resources.some((r) => r.uri === 'mdvfs:///docs/plan.md'),
    'listed with its workspace path',
  );
  const seen: string[] = [];
  const { ResourceUpdatedNotificationSchema } = await import('@modelcontextprotocol/sdk/types.js');
  wsc.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => {
    seen.push(n.params.uri);
  });
  await wsc.subscribeResource({ uri: 'mdvfs:///docs/plan.md' });
  const { until } = await import('../helpers/mcp.js');
  let n = 0;
  // a change made outside the workspace view (root, global path) reaches the workspace subscriber
  await until(async () => {
    await daemon.call('fs.write', { path: '/projects/ws1/docs/plan.md' }, { data: Buffer.from(`plan v${++n}`) });
    await new Promise((r) => setTimeout(r, 100));
    return seen.includes('mdvfs:///docs/plan.md');
  }, 'a workspace resource update');
  const r = await wsc.readResource({ uri: 'mdvfs:///docs/plan.md' });
  t.match((r.contents[0] as { text: string }).text, /^plan v\d+$/);
});
