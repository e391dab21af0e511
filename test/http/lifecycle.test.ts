// `mdvfs serve` as a whole: clean shutdown, restart keeps everything, hosted auth modes.
import t from 'tap';
import { alive, client, request, servePids, startService, tempDataDir, until } from '../helpers/http.js';

t.test('SIGTERM stops cleanly and a restart keeps everything', async (t) => {
  const dataDir = tempDataDir(t);
  const svc = await startService(t, { dataDir });
  const root = client(svc);
  const pids = servePids(svc.proc.pid!);
  t.ok(pids.daemon && pids.http, 'serve runs a daemon and a sidecar');
  const boot = await root.post('/auth/bootstrap', { username: 'admin' });
  const admin = client(svc, { auth: `Bearer ${boot.json.token}` });
  await admin.post('/admin/users', { name: 'alice', is_agent: false });
  await admin.post('/admin/users', { name: 'bot', is_agent: true });
  const botToken = (await admin.post('/admin/users/bot/tokens')).json.token;
  await admin.post('/admin/groups', { name: 'team' });
  const alice = client(svc, { auth: 'User alice' });
  await alice.put('/fs/notes/a.md', 'kept\n');
  await alice.post('/admin/chmod/notes/a.md', { mode: '0640' });
  const c = await alice.post('/vcs/commit', { message: 'before restart' });
  await alice.put('/fs/notes/uncommitted.md', 'also kept\n');
  await root.put('/fs//proj/kept.md', 'kept in a workspace\n');
  await root.post('/admin/chown//proj', { owner: 'bot' });
  const ws = (await admin.post('/workspaces', { name: 'w', root_path: '/proj' })).json;
  const secret = (await admin.post(`/workspaces/${ws.id}/tokens`, { name: 'x', agent_token: botToken })).json.secret;

  const exit = await svc.stop('SIGTERM');
  t.same(exit, { code: 0, signal: null }, 'serve exits 0 on SIGTERM');
  await until(() => !alive(pids.daemon!) && !alive(pids.http!), 'children to exit');
  t.pass('daemon and sidecar are gone');

  const svc2 = await startService(t, { dataDir });
  const root2 = client(svc2);
  const alice2 = client(svc2, { auth: 'User alice' });
  t.equal((await alice2.get('/fs/notes/a.md')).text, 'kept\n');
  t.equal((await alice2.get('/fs/notes/uncommitted.md')).text, 'also kept\n');
  t.equal((await alice2.get('/fs/notes/a.md?stat=true')).json.mode, '0640');
  t.equal((await alice2.get('/vcs/log')).json.commits[0].hash, c.json.hash);
  t.equal((await root2.post('/auth/bootstrap', { username: 'again' })).status, 409, 'bootstrap stays closed');
  t.equal(
    (await request(svc2, 'GET', '/auth/whoami', { auth: `Bearer ${boot.json.token}` })).json.user,
    'admin',
    'tokens survive',
  );
  t.equal((await request(svc2, 'GET', '/auth/whoami', { auth: `Bearer ${botToken}` })).json.user, 'bot');
  t.ok((await root2.get('/admin/groups')).json.groups.some((g: { name: string }) => g.name === 'team'));
  t.equal(
    (await request(svc2, 'GET', '/fs/kept.md', { auth: `Bearer ${secret}`, workspace: ws.id })).text,
    'kept in a workspace\n',
    'workspaces and their secrets survive',
  );
  const exit2 = await svc2.stop('SIGINT');
  t.same(exit2, { code: 0, signal: null }, 'serve exits 0 on SIGINT');
});

t.test('hosted mode: SERVICE_ANONYMOUS=deny and SERVICE_USER_AUTH=off', async (t) => {
  const svc = await startService(t, { env: { SERVICE_ANONYMOUS: 'deny', SERVICE_USER_AUTH: 'off' } });
  const anon = client(svc);
  t.equal((await anon.get('/health')).status, 200, 'health needs no credentials');
  const denied = await anon.get('/fs/');
  t.equal(denied.status, 401, 'no header is not root');
  t.equal(denied.json.code, 'EAUTH');
  const boot = await anon.post('/auth/bootstrap', { username: 'admin' });
  t.equal(boot.status, 200, `bootstrap still works once: ${boot.text}`);
  const admin = client(svc, { auth: `Bearer ${boot.json.token}` });
  t.equal((await admin.post('/admin/users', { name: 'alice', is_agent: false })).status, 200);
  t.equal((await client(svc, { auth: 'User alice' }).get('/fs/')).status, 401, 'the User scheme is off');
  t.equal((await client(svc, { auth: 'User admin' }).get('/fs/')).status, 401);
  t.equal((await admin.put('/fs/hosted.md', 'ok')).status, 200, 'tokens work');
  t.equal((await anon.post('/auth/bootstrap', { username: 'x' })).status, 409);
});
