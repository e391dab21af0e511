/**
 * Security (issue 12, low): `POST /auth/bootstrap` hands out an administrator token to anyone, so
 * it is open only while the store never had a user besides root. Deleting the administrator (so
 * that only root remains) must not reopen it, neither at once nor after a restart.
 */
import t from 'tap';
import { client, startService, tempDataDir } from '../helpers/http.js';

t.test('bootstrap stays closed once the store had an administrator', async (t) => {
  const dataDir = tempDataDir(t);
  let svc = await startService(t, { dataDir });
  let root = client(svc);
  t.equal((await root.get('/health')).json.needs_bootstrap, true, 'a fresh store needs bootstrap');
  const boot = await root.post('/auth/bootstrap', { username: 'admin' });
  t.equal(boot.status, 200, boot.text);
  t.equal((await root.del('/admin/users/admin')).status, 200, 'the administrator is deleted; only root remains');
  t.equal((await root.get('/admin/users')).json.users.length, 1, 'only root is left');

  const again = await root.post('/auth/bootstrap', { username: 'mallory' });
  t.equal(again.status, 409, 'a second bootstrap is refused');
  t.match(again.json.error, /already bootstrapped/);
  t.equal((await root.get('/health')).json.needs_bootstrap, false);

  await svc.stop();
  svc = await startService(t, { dataDir });
  root = client(svc);
  t.equal((await root.post('/auth/bootstrap', { username: 'mallory' })).status, 409, 'still refused after a restart');
  t.equal((await root.get('/health')).json.needs_bootstrap, false);
  t.notOk(
    (await root.get('/admin/users')).json.users.some((u: { name: string }) => u.name === 'mallory'),
    'no mallory was created',
  );
});

t.test('a user created by root closes bootstrap too, for good', async (t) => {
  const svc = await startService(t);
  const root = client(svc);
  t.equal((await root.post('/admin/users', { name: 'alice' })).status, 200);
  t.equal((await root.del('/admin/users/alice')).status, 200);
  t.equal((await root.post('/auth/bootstrap', { username: 'mallory' })).status, 409);
});
