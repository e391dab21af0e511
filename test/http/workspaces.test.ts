// Workspace tokens are confined to their root: no escape by .., absolute paths or symlinks.
import t from 'tap';
import { client, withCast } from '../helpers/http.js';

const { svc, root, admin, alice, botToken } = await withCast(t);

await root.put('/fs//proj/ws/readme.md', 'inside\n');
await root.put('/fs//proj/other/secret.md', 'other workspace secret\n');
await root.put('/fs//topsecret.md', 'top secret\n');
const ws = (await admin.post('/workspaces', { name: 'ws', root_path: '/proj/ws' })).json;
const other = (await admin.post('/workspaces', { name: 'other', root_path: '/proj/other' })).json;
const secret: string = (await admin.post(`/workspaces/${ws.id}/tokens`, { name: 'ci', agent_token: botToken })).json
  .secret;
// bot must be able to work in /proj/ws on its own account (it acts as bot, confined).
await root.post('/admin/chown//proj/ws', { owner: 'bot' });
await root.post('/admin/chown//proj/ws/readme.md', { owner: 'bot' });
const w = client(svc, { auth: `Bearer ${secret}`, workspace: ws.id });

const leaked = (text: string) => text.includes('top secret') || text.includes('other workspace secret');

t.test('/ is the workspace root and paths are shown relative to it', async (t) => {
  const home = await w.get('/fs/');
  t.equal(home.status, 200, home.text);
  t.ok(home.json.entries.some((e: { name: string }) => e.name === 'readme.md'));
  t.equal((await w.get('/fs//readme.md')).text, 'inside\n', 'absolute paths are inside the root');
  const put = await w.put('/fs/new.md', 'new');
  t.equal(put.status, 200, put.text);
  t.notMatch(put.json.path, /^\/proj\//, 'responses show workspace paths');
  t.equal((await root.get('/fs//proj/ws/new.md')).text, 'new', 'the file landed under root_path');
  const missing = await w.get('/fs/missing.md');
  t.equal(missing.status, 404);
  t.notMatch(missing.json.error, /\/proj\/ws/, 'error messages do not reveal root_path either');
  t.match(missing.json.error, /'\/missing\.md'/);
  const who = await w.get('/auth/whoami');
  t.equal(who.json.user, 'bot');
  t.equal(who.json.workspace.id, ws.id);
});

t.test('no escape by ..', async (t) => {
  for (const url of [
    '/fs/../../topsecret.md',
    '/fs//../topsecret.md',
    '/fs/%2E%2E/%2E%2E/topsecret.md',
    '/fs/..%2F..%2Ftopsecret.md',
    '/fs/../other/secret.md',
  ]) {
    const r = await w.get(url);
    t.not(r.status, 200, `${url}: ${r.status}`);
    t.notOk(leaked(r.text), `${url} leaks nothing`);
  }
  const esc = await w.put('/fs/../../escaped.md', 'x');
  if (esc.status === 200) t.notMatch(esc.json.path, /\.\./);
  t.equal((await root.get('/fs//escaped.md')).status, 404, 'nothing written above the root');
  t.equal((await root.get('/fs//proj/escaped.md')).status, 404);
  const cp = await w.post('/fs/readme.md?op=copy&dst=../../copied.md');
  t.equal((await root.get('/fs//copied.md')).status, 404, `copy dst stays inside (${cp.status})`);
  t.equal((await root.get('/fs//proj/copied.md')).status, 404);
  const mv = await w.post('/fs/new.md?op=move&dst=/../../moved.md');
  t.equal((await root.get('/fs//moved.md')).status, 404, `move dst stays inside (${mv.status})`);
  const inCp = await w.post('/fs/../../topsecret.md?op=copy&dst=stolen.md');
  t.not(inCp.status, 200, 'copy src cannot reach outside');
  t.notOk(leaked((await w.get('/fs/stolen.md')).text));
  for (const q of ['path=..', 'path=/..', 'path=../..', 'path=../other']) {
    const g = await w.get(`/search/grep?pattern=secret&recursive=true&${q}`);
    t.notOk(leaked(g.text), `grep ${q} leaks nothing`);
    const f = await w.get(`/search/find?name=*secret*&${q}`);
    t.notOk(f.text.includes('topsecret') || f.text.includes('other/secret'), `find ${q} leaks nothing`);
  }
  t.notOk(leaked((await w.get('/tree/../..')).text) || (await w.get('/tree/../..')).text.includes('topsecret'));
});

t.test('no escape by symlinks', async (t) => {
  const mk = await w.put('/fs/out', '/topsecret.md', { headers: { 'x-service-type': 'symlink' } });
  if (mk.status === 200) {
    const r = await w.get('/fs/out');
    t.notOk(leaked(r.text), `an absolute target resolves inside the root (${r.status})`);
  }
  await w.put('/fs/rel', '../../topsecret.md', { headers: { 'x-service-type': 'symlink' } });
  const rel = await w.get('/fs/rel');
  t.notOk(leaked(rel.text), `a relative target cannot climb out (${rel.status})`);
  // A link planted by root that points outside the workspace.
  await root.put('/fs//proj/ws/planted', '/topsecret.md', { headers: { 'x-service-type': 'symlink' } });
  await root.put('/fs//proj/ws/planted-dir', '/proj/other', { headers: { 'x-service-type': 'symlink' } });
  const p = await w.get('/fs/planted');
  t.not(p.status, 200, `following a link outside fails (${p.status})`);
  t.notOk(leaked(p.text));
  const pd = await w.get('/fs/planted-dir/secret.md');
  t.notOk(leaked(pd.text), `nor through a directory link (${pd.status})`);
  t.not((await w.put('/fs/planted-dir/injected.md', 'x')).status, 200, 'no writes through it');
  t.equal((await root.get('/fs//proj/other/injected.md')).status, 404);
  const g = await w.get('/search/grep?pattern=secret&recursive=true');
  t.notOk(leaked(g.text), 'grep does not follow links out');
});

t.test('credentials: wrong workspace id is 401', async (t) => {
  const wrong = client(svc, { auth: `Bearer ${secret}`, workspace: other.id });
  const r = await wrong.get('/fs/');
  t.equal(r.status, 401, r.text);
  t.equal(r.json.code, 'EAUTH');
  t.equal(
    (
      await client(svc, { auth: `Bearer ${secret}`, workspace: '00000000-0000-4000-8000-000000000000' }).get(
        '/vcs/status',
      )
    ).status,
    401,
  );
  t.equal((await client(svc, { auth: `Bearer ${secret}`, workspace: 'not-a-uuid' }).get('/vcs/status')).status, 401);
  t.equal(
    (await client(svc, { auth: `Bearer ${secret}` }).get('/fs/')).status,
    401,
    'a workspace secret alone is not a token',
  );
  t.equal((await client(svc, { auth: 'Bearer wrong', workspace: ws.id }).get('/fs/')).status, 401);
});

t.test('vcs is scoped to the workspace', async (t) => {
  const c = await w.post('/vcs/commit', { message: 'ws commit' });
  t.equal(c.status, 200, c.text);
  const log = await w.get('/vcs/log');
  t.ok(log.json.commits.some((x: { message: string }) => x.message === 'ws commit'));
  await root.post('/vcs/commit', { message: 'root commit' });
  t.notOk(
    (await w.get('/vcs/log')).json.commits.some((x: { message: string }) => x.message === 'root commit'),
    'the workspace log has its own commits',
  );
  await w.put('/fs/readme.md', 'changed\n');
  await root.put('/fs//topsecret.md', 'top secret changed\n');
  const st = await w.get('/vcs/status');
  t.equal(st.status, 200);
  t.match(st.text, /readme\.md/);
  t.notMatch(st.text, /topsecret/, 'status shows only the workspace');
  const rv = await w.post('/vcs/revert', { hash: c.json.hash });
  t.equal(rv.status, 200, rv.text);
  t.equal((await w.get('/fs/readme.md')).text, 'inside\n');
  t.equal((await root.get('/fs//topsecret.md')).text, 'top secret changed\n', 'revert leaves the outside alone');
});

t.test('creating workspaces: root_path rules, tokens never listed', async (t) => {
  t.equal(
    (await alice.post('/workspaces', { name: 'mine', root_path: '/home/alice' })).status,
    200,
    'an owner may create one on her own dir',
  );
  const trav = await alice.post('/workspaces', { name: 'bobs', root_path: '/home/alice/../bob' });
  t.equal(trav.status, 403, `traversal in root_path is resolved and refused (${trav.status})`);
  t.equal((await alice.post('/workspaces', { name: 'x', root_path: '/proj/ws' })).status, 403, 'not the owner');
  const rel = await admin.post('/workspaces', { name: 'rel', root_path: 'relative/path' });
  t.ok(rel.status >= 400 && rel.status < 500, `a relative root_path is refused (${rel.status})`);
  const list = await admin.get('/workspaces');
  t.notOk(list.text.includes(secret) || list.text.includes(botToken), 'no secrets in listings');
  t.notOk((await admin.get('/admin/users')).text.includes(botToken));
  t.equal((await w.get('/workspaces')).text.includes(secret), false);
});
