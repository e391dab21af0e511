// Every REST route and its statuses, through the real `mdvfs serve`.
import t from 'tap';
import { client, request, startService, type Client } from '../helpers/http.js';

// debug: one log line per request (checked below)
const svc = await startService(t, { env: { SERVICE_LOG_LEVEL: 'debug' } });
const root = client(svc);

t.test('health works without credentials and reports bootstrap', async (t) => {
  const r = await root.get('/health');
  t.equal(r.status, 200);
  t.equal(r.json.status, 'ok');
  t.equal(r.json.needs_bootstrap, true);
  t.match(r.headers['content-type'], /application\/json/);
});

let admin: Client;
let adminToken = '';
t.test('bootstrap once, then 409', async (t) => {
  const r = await root.post('/auth/bootstrap', { username: 'admin' });
  t.equal(r.status, 200, r.text);
  t.equal(r.json.username, 'admin');
  t.type(r.json.token, 'string');
  t.type(r.json.uid, 'number');
  adminToken = r.json.token;
  admin = client(svc, { auth: `Bearer ${adminToken}` });
  const again = await root.post('/auth/bootstrap', { username: 'other' });
  t.equal(again.status, 409, again.text);
  t.type(again.json.error, 'string');
  t.type(again.json.code, 'string');
  t.equal((await root.get('/health')).json.needs_bootstrap, false);
});

t.test('whoami and login', async (t) => {
  const me = await admin.get('/auth/whoami');
  t.equal(me.status, 200);
  t.equal(me.json.user, 'admin');
  t.equal(me.json.is_admin, true);
  const rootMe = await root.get('/auth/whoami');
  t.equal(rootMe.json.uid, 0, 'no Authorization header runs as root');
  const bad = await request(svc, 'GET', '/auth/whoami', { auth: 'Bearer not-a-token' });
  t.equal(bad.status, 401);
  t.equal(bad.json.code, 'EAUTH');
  const weird = await request(svc, 'GET', '/auth/whoami', { auth: 'Basic YWxpY2U6eA==' });
  t.equal(weird.status, 401, 'unknown schemes fail closed');
  const login = await root.post('/auth/login', { username: 'admin' });
  t.equal(login.status, 200, login.text);
  t.ok(Array.isArray(login.json.groups));
  t.ok(
    login.json.groups.every((g: unknown) => typeof g === 'number'),
    'groups are numeric gids',
  );
  t.equal(login.json.groups[0], me.json.gid, 'primary group first');
  t.ok(login.json.groups.includes(1), 'the bootstrap admin is in wheel (gid 1)');
  const nobody = await root.post('/auth/login', { username: 'nobody' });
  t.ok(nobody.status === 404 || nobody.status === 401, `unknown user: ${nobody.status}`);
});

let botToken = '';
t.test('admin users, tokens, groups', async (t) => {
  const alice = await admin.post('/admin/users', { name: 'alice', is_agent: false });
  t.equal(alice.status, 200, alice.text);
  t.equal(alice.json.name, 'alice');
  t.equal(alice.json.is_agent, false);
  t.equal((await admin.post('/admin/users', { name: 'alice', is_agent: false })).status, 409);
  const bot = await root.post('/admin/users', { name: 'bot', is_agent: true });
  t.equal(bot.json.is_agent, true);
  const tok = await admin.post('/admin/users/bot/tokens');
  t.equal(tok.status, 200, tok.text);
  t.type(tok.json.token, 'string');
  botToken = tok.json.token;
  const tok2 = await admin.post('/admin/users/bot/tokens');
  t.not(tok2.json.token, botToken, 'regenerating issues a fresh token');
  t.equal(
    (await request(svc, 'GET', '/auth/whoami', { auth: `Bearer ${botToken}` })).status,
    401,
    'the old token no longer works',
  );
  botToken = tok2.json.token;
  const who = await request(svc, 'GET', '/auth/whoami', { auth: `Bearer ${botToken}` });
  t.equal(who.json.user, 'bot');
  t.equal((await admin.post('/admin/users/ghost/tokens')).status, 404);

  const list = await admin.get('/admin/users');
  t.equal(list.status, 200);
  t.ok(list.json.users.some((u: { name: string }) => u.name === 'alice'));
  t.notOk(
    list.text.includes(botToken) || list.text.includes(adminToken) || list.text.includes(tok.json.token),
    'tokens never appear in listings',
  );
  t.equal(
    (await request(svc, 'GET', '/admin/users', { auth: 'User alice' })).status,
    403,
    'non-admins cannot list users',
  );
  t.equal(
    (await request(svc, 'POST', '/admin/users', { auth: 'User alice', body: { name: 'eve', is_agent: false } })).status,
    403,
  );

  const g = await admin.post('/admin/groups', { name: 'team' });
  t.equal(g.status, 200, g.text);
  t.equal(g.json.name, 'team');
  t.equal((await admin.post('/admin/groups', { name: 'team' })).status, 409);
  const add = await admin.post('/admin/users/alice/groups/team');
  t.equal(add.status, 200, add.text);
  t.ok(add.json.members.includes('alice'));
  const groups = await admin.get('/admin/groups');
  t.ok(
    groups.json.groups.some(
      (x: { name: string; members: string[] }) => x.name === 'team' && x.members.includes('alice'),
    ),
  );
  const rm = await admin.del('/admin/users/alice/groups/team');
  t.equal(rm.status, 200);
  t.notOk(rm.json.members.includes('alice'));
  t.equal((await admin.post('/admin/users/alice/groups/nogroup')).status, 404);

  t.equal((await admin.post('/admin/users', { name: 'temp', is_agent: false })).status, 200);
  const del = await admin.del('/admin/users/temp');
  t.equal(del.status, 200, del.text);
  t.equal((await admin.del('/admin/users/temp')).status, 404);
});

t.test('files: write, read, ETag, preconditions, list, stat', async (t) => {
  const alice = client(svc, { auth: 'User alice' });
  const w = await alice.put('/fs/notes/a.md', '# Hello\n', { headers: { 'content-type': 'text/markdown' } });
  t.equal(w.status, 200, w.text);
  t.same(Object.keys(w.json).sort(), ['etag', 'path', 'size']);
  t.equal(w.json.path, '/home/alice/notes/a.md');
  t.equal(w.json.size, 8);
  t.equal(w.headers.etag, `"${w.json.etag}"`);

  const r = await alice.get('/fs/notes/a.md');
  t.equal(r.status, 200);
  t.equal(r.text, '# Hello\n');
  t.equal(r.headers['content-type'], 'text/markdown; charset=utf-8');
  t.equal(r.headers.etag, `"${w.json.etag}"`);
  const head = await alice.req('HEAD', '/fs/notes/a.md');
  t.equal(head.status, 200);
  t.equal(head.headers.etag, r.headers.etag);

  t.equal((await alice.get('/fs/notes/a.md', { headers: { 'if-none-match': r.headers.etag! } })).status, 304);
  t.equal((await alice.get('/fs/notes/a.md', { headers: { 'if-none-match': '"nope"' } })).status, 200);

  const stale = await alice.put('/fs/notes/a.md', 'x', { headers: { 'if-match': '"0000"' } });
  t.equal(stale.status, 412, stale.text);
  t.equal(stale.json.code, 'EPRECOND');
  const ok = await alice.put('/fs/notes/a.md', '# Hello again\n', { headers: { 'if-match': r.headers.etag! } });
  t.equal(ok.status, 200, ok.text);
  t.not(ok.json.etag, w.json.etag);
  t.equal(
    (await alice.put('/fs/notes/a.md', 'x', { headers: { 'if-none-match': '*' } })).status,
    412,
    'create-only on an existing file',
  );
  t.equal(
    (await alice.put('/fs/notes/new.md', 'x', { headers: { 'if-none-match': '*' } })).status,
    200,
    'create-only on a new file',
  );

  const bin = Buffer.from([0, 1, 2, 255, 254]);
  await alice.put('/fs/data.bin', bin, { headers: { 'content-type': 'application/octet-stream' } });
  const rb = await alice.get('/fs/data.bin');
  t.same(rb.body, bin, 'bytes round-trip');
  t.equal(rb.headers['content-type'], 'application/octet-stream');

  const list = await alice.get('/fs/notes');
  t.equal(list.status, 200);
  t.equal(list.json.path, '/home/alice/notes');
  t.same(
    list.json.entries.map((e: { name: string }) => e.name),
    ['a.md', 'new.md'],
  );
  const e = list.json.entries[0];
  for (const k of ['name', 'is_dir', 'is_symlink', 'mode', 'uid', 'gid', 'size', 'modified'])
    t.ok(k in e, `entry has ${k}`);
  t.match(e.mode, /^[0-7]{4}$/);
  const home = await alice.get('/fs/');
  t.equal(home.json.path, '/home/alice');
  t.ok(home.json.entries.some((x: { name: string; is_dir: boolean }) => x.name === 'notes' && x.is_dir));

  const st = await alice.get('/fs/notes/a.md?stat=true');
  t.equal(st.status, 200);
  t.equal(st.json.kind, 'file');
  t.equal(st.json.size, 14);
  t.equal(st.json.mode, '0644');
  for (const k of ['inode_id', 'uid', 'gid', 'created', 'modified']) t.type(st.json[k], 'number');
  t.equal((await alice.get('/fs/notes?stat=true')).json.kind, 'directory');
  t.equal((await alice.get('/fs/missing.md')).status, 404);
  t.equal((await alice.get('/fs/missing.md')).json.code, 'ENOENT');
});

t.test('mkdir, symlink, delete, copy, move', async (t) => {
  const alice = client(svc, { auth: 'User alice' });
  const mk = await alice.put('/fs/deep/a/b', undefined, { headers: { 'x-service-type': 'directory' } });
  t.equal(mk.status, 200, mk.text);
  t.equal((await alice.get('/fs/deep/a/b?stat=true')).json.kind, 'directory');
  t.equal(
    (await alice.put('/fs/deep/a/b', undefined, { headers: { 'x-service-type': 'directory' } })).status,
    200,
    'mkdir -p is idempotent',
  );

  const ln = await alice.put('/fs/link.md', 'notes/a.md', { headers: { 'x-service-type': 'symlink' } });
  t.equal(ln.status, 200, ln.text);
  t.equal((await alice.get('/fs/link.md')).text, '# Hello again\n', 'reads follow the symlink');
  t.equal((await alice.get('/fs/link.md?stat=true&nofollow=true')).json.kind, 'symlink');
  t.equal((await alice.put('/fs/x', 'y', { headers: { 'x-service-type': 'fifo' } })).status, 400);

  t.equal((await alice.post('/fs/notes/a.md?op=copy&dst=notes/b.md')).status, 200);
  t.equal((await alice.get('/fs/notes/b.md')).text, '# Hello again\n');
  const cpDir = await alice.post('/fs/notes?op=copy&dst=notes2');
  t.equal(cpDir.status, 200, cpDir.text);
  t.equal((await alice.get('/fs/notes2/b.md')).status, 200, 'directories copy recursively');
  const mv = await alice.post('/fs/notes/b.md?op=move&dst=notes/c.md');
  t.equal(mv.status, 200, mv.text);
  t.equal((await alice.get('/fs/notes/b.md')).status, 404);
  t.equal((await alice.get('/fs/notes/c.md')).text, '# Hello again\n');
  t.equal((await alice.post('/fs/nope.md?op=move&dst=x.md')).status, 404);

  t.equal((await alice.del('/fs/notes/c.md')).status, 200);
  t.equal((await alice.get('/fs/notes/c.md')).status, 404);
  const nonEmpty = await alice.del('/fs/notes2');
  t.equal(nonEmpty.status, 409, nonEmpty.text);
  t.equal(nonEmpty.json.code, 'ENOTEMPTY');
  t.equal((await alice.del('/fs/notes2?recursive=true')).status, 200);
  t.equal((await alice.get('/fs/notes2')).status, 404);
  t.equal((await alice.del('/fs/notes2')).status, 404);
});

t.test('search and tree', async (t) => {
  const alice = client(svc, { auth: 'User alice' });
  await alice.put('/fs/notes/sub/deep.md', 'needle here\nno\n');
  await alice.put('/fs/notes/top.md', 'a needle\n');
  const flat = await alice.get('/search/grep?pattern=needle&path=notes');
  t.equal(flat.status, 200, flat.text);
  t.same(flat.json.results, [{ file: '/home/alice/notes/top.md', line_num: 1, line: 'a needle' }]);
  t.equal(flat.json.count, 1);
  const rec = await alice.get('/search/grep?pattern=need%28le%29&path=notes&recursive=true');
  t.equal(rec.json.count, 2);
  t.ok(rec.json.results.some((m: { file: string }) => m.file === '/home/alice/notes/sub/deep.md'));
  t.equal((await alice.get('/search/grep?pattern=NEEDLE&path=notes&recursive=true&ignore_case=true')).json.count, 2);

  const find = await alice.get('/search/find?path=notes&name=*.md');
  t.equal(find.status, 200, find.text);
  t.ok(find.json.results.includes('/home/alice/notes/sub/deep.md'));
  t.equal(find.json.count, find.json.results.length);
  const dirs = await alice.get('/search/find?path=notes&type=d');
  t.ok(dirs.json.results.includes('/home/alice/notes/sub'));
  t.notOk(dirs.json.results.includes('/home/alice/notes/top.md'));

  const tree = await alice.get('/tree');
  t.equal(tree.status, 200);
  t.match(tree.headers['content-type'], /^text\/plain/);
  t.match(tree.text, /notes/);
  t.match(tree.text, /deep\.md/);
  const sub = await alice.get('/tree/notes/sub');
  t.match(sub.text, /deep\.md/);
  t.notMatch(sub.text, /top\.md/);
  t.equal((await alice.get('/tree/nowhere')).status, 404);
});

t.test('version control', async (t) => {
  const alice = client(svc, { auth: 'User alice' });
  await alice.put('/fs/vc.md', 'one\n');
  const c1 = await alice.post('/vcs/commit', { message: 'first' });
  t.equal(c1.status, 200, c1.text);
  t.match(c1.json.hash, /^[0-9a-f]{12}$/);
  t.equal(c1.json.author, 'alice');
  t.equal(c1.json.message, 'first');
  await alice.put('/fs/vc.md', 'two\n');
  await alice.put('/fs/vc-new.md', 'new\n');
  const st = await alice.get('/vcs/status');
  t.equal(st.status, 200);
  t.match(st.headers['content-type'], /^text\/plain/);
  t.match(st.text, /vc\.md/);
  const stj = await alice.get('/vcs/status?format=json');
  t.ok(stj.json.modified.some((p: string) => p.endsWith('/vc.md')));
  t.ok(stj.json.added.some((p: string) => p.endsWith('/vc-new.md')));
  const diff = await alice.get('/vcs/diff?path=vc.md');
  t.equal(diff.status, 200);
  t.match(diff.text, /-one/);
  t.match(diff.text, /\+two/);
  const c2 = await alice.post('/vcs/commit', { message: 'second' });
  t.equal(c2.status, 200);
  const log = await alice.get('/vcs/log');
  t.equal(log.status, 200);
  t.same(
    log.json.commits.slice(0, 2).map((c: { message: string }) => c.message),
    ['second', 'first'],
    'newest first',
  );
  for (const k of ['hash', 'message', 'author', 'timestamp']) t.ok(k in log.json.commits[0]);
  t.equal((await alice.get('/vcs/log?limit=1')).json.commits.length, 1);
  const d2 = await alice.get(`/vcs/diff?from=${c1.json.hash}&to=${c2.json.hash}&format=json`);
  t.match(d2.json.diff, /\+two/);

  const rv = await alice.post('/vcs/revert', { hash: c1.json.hash.slice(0, 6) });
  t.equal(rv.status, 200, rv.text);
  t.equal((await alice.get('/fs/vc.md')).text, 'one\n');
  t.equal((await alice.get('/fs/vc-new.md')).status, 404);
  t.match((await alice.get('/vcs/log?limit=1')).json.commits[0].message, /revert/);
  t.equal((await alice.post('/vcs/revert', { hash: 'ffffffffffff' })).status, 404);
});

t.test('workspaces', async (t) => {
  await root.put('/fs//proj/w/readme.md', 'hi\n');
  const ws = await admin.post('/workspaces', { name: 'w', root_path: '/proj/w' });
  t.equal(ws.status, 200, ws.text);
  t.match(ws.json.id, /^[0-9a-f-]{36}$/);
  t.equal(ws.json.root_path, '/proj/w');
  const list = await admin.get('/workspaces');
  t.ok(list.json.workspaces.some((w: { id: string }) => w.id === ws.json.id));
  const tok = await admin.post(`/workspaces/${ws.json.id}/tokens`, { name: 'ci', agent_token: botToken });
  t.equal(tok.status, 200, tok.text);
  t.type(tok.json.secret, 'string');
  const wsc = client(svc, { auth: `Bearer ${tok.json.secret}`, workspace: ws.json.id });
  t.equal((await wsc.get('/fs/readme.md')).text, 'hi\n');
  t.equal((await wsc.get('/vcs/status')).status, 200);
  t.equal((await admin.post(`/workspaces/${ws.json.id}/tokens`, { name: 'x', agent_token: 'bogus' })).status, 401);
  t.equal(
    (await admin.post('/workspaces/00000000-0000-4000-8000-000000000000/tokens', { name: 'x', agent_token: botToken }))
      .status,
    404,
  );
  t.notOk((await admin.get('/workspaces')).text.includes(tok.json.secret), 'secrets never listed');
});

t.test('chmod and chown', async (t) => {
  const alice = client(svc, { auth: 'User alice' });
  await alice.put('/fs/perm.md', 'x');
  const ch = await alice.post('/admin/chmod/perm.md', { mode: '0600' });
  t.equal(ch.status, 200, ch.text);
  t.equal(ch.json.mode, '0600');
  t.equal((await alice.get('/fs/perm.md?stat=true')).json.mode, '0600');
  const co = await root.post('/admin/chown//home/alice/perm.md', { owner: 'bot' });
  t.equal(co.status, 200, co.text);
  t.equal((await alice.get('/fs/perm.md?stat=true')).json.uid, co.json.uid);
});

t.test('CORS, errors, methods, unknown routes, OpenAPI, logs', async (t) => {
  // Local mode: only allowed origins (here the server's own) get CORS; test/http/origin.test.ts has the rest.
  const own = `http://127.0.0.1:${svc.port}`;
  const pre = await request(svc, 'OPTIONS', '/fs/notes/a.md', {
    headers: {
      origin: own,
      'access-control-request-method': 'PUT',
      'access-control-request-headers': 'authorization,x-service-type',
    },
  });
  t.equal(pre.status, 204);
  t.equal(pre.headers['access-control-allow-origin'], own);
  for (const h of [
    'Authorization',
    'Content-Type',
    'X-Service-Type',
    'X-Service-Workspace',
    'X-Service-On-Behalf-Of',
    'If-Match',
    'If-None-Match',
  ])
    t.match(pre.headers['access-control-allow-headers'], h);
  t.match(pre.headers['access-control-allow-methods'], /PUT/);
  const get = await request(svc, 'GET', '/health', { headers: { origin: own } });
  t.equal(get.headers['access-control-allow-origin'], own);
  t.match(get.headers['access-control-expose-headers'], /ETag/);

  const unknown = await root.get('/nope');
  t.equal(unknown.status, 404);
  t.same(Object.keys(unknown.json).sort(), ['code', 'error']);
  t.equal(unknown.json.code, 'ENOSYS');
  t.equal((await root.get('/FS/notes/a.md')).status, 404, 'routes are case-sensitive');
  const wrong = await root.req('PATCH', '/fs/notes/a.md');
  t.equal(wrong.status, 405);
  t.equal(wrong.json.code, 'EMETHOD');
  t.match(wrong.headers.allow, /GET/);
  t.equal((await root.req('DELETE', '/vcs/log')).status, 405);
  t.equal((await root.get('/vcs/commit')).status, 405);

  const api = await root.get('/openapi.json');
  t.equal(api.status, 200);
  t.equal(api.json.openapi, '3.1.0');
  t.ok(api.json.paths['/fs/{path}'].put);

  const rid = await request(svc, 'GET', '/health', { headers: { 'x-request-id': 'test-req-42' } });
  t.equal(rid.headers['x-request-id'], 'test-req-42');
  const secret = 'Bearer super-secret-value-123';
  await request(svc, 'GET', '/auth/whoami', { auth: secret });
  await new Promise((r) => setTimeout(r, 200));
  const lines = svc
    .stderr()
    .split('\n')
    .filter((l) => l.startsWith('{'));
  const line = lines.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.req_id === 'test-req-42');
  t.ok(line, 'one structured log line per request with its id');
  t.equal(line?.status, 200);
  t.notOk(svc.stderr().includes('super-secret-value-123'), 'Authorization values are never logged');
  t.notOk(svc.stderr().includes(adminToken), 'tokens are never logged');
});
