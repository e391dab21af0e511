/**
 * Security (issue 30, item 7): in hosted mode the first anonymous caller must not become an
 * administrator. `mdvfs serve` keeps a one-time secret in a 0600 file of the data dir and names the
 * file (never the secret) on stderr; `POST /auth/bootstrap` needs it there, and `/health` does not
 * tell anonymous callers whether the server still waits for an administrator. Against a real
 * hosted `mdvfs serve` over HTTP.
 */
import { existsSync, readFileSync, rmSync, statSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { client, startService, tempDataDir } from '../helpers/http.js';

t.test('hosted bootstrap needs the one-time secret of the data dir', async (t) => {
  const dataDir = tempDataDir(t);
  let svc = await startService(t, { dataDir, env: { SERVICE_MODE: 'hosted' } });
  const file = path.join(dataDir, 'bootstrap-secret');
  t.ok(existsSync(file), 'serve wrote the secret file at first start');
  t.equal(statSync(file).mode & 0o777, 0o600, 'the file is 0600');
  const secret = readFileSync(file, 'utf8').trim();
  t.match(secret, /^mdvfs-boot-[A-Za-z0-9_-]{43}$/, '256 random bits with a recognisable prefix');
  t.match(
    svc.stderr(),
    new RegExp(`bootstrap secret is in ${file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`),
    'serve names the file on stderr',
  );
  t.notMatch(svc.stderr(), secret, 'but never prints the secret');

  const anon = client(svc);
  const health = await anon.get('/health');
  t.equal(health.status, 200);
  t.notOk('needs_bootstrap' in health.json, '/health says nothing about bootstrap to anonymous callers');

  const none = await anon.post('/auth/bootstrap', { username: 'mallory' });
  t.equal(none.status, 401, 'the first anonymous caller is not made an administrator');
  t.equal(none.json.code, 'EAUTH');
  t.match(none.json.error, /bootstrap-secret/, 'the refusal says where the secret is');
  const wrong = await anon.post('/auth/bootstrap', { username: 'mallory', secret: `${secret.slice(0, -1)}x` });
  t.equal(wrong.status, 401, 'a wrong secret is refused');
  t.equal(wrong.json.error, none.json.error, 'with the same answer');
  t.ok(existsSync(file), 'refusals do not use up the secret');

  const boot = await anon.post('/auth/bootstrap', { username: 'admin', secret });
  t.equal(boot.status, 200, boot.text);
  t.notOk(existsSync(file), 'the secret file is deleted once used');
  const admin = client(svc, { auth: `Bearer ${boot.json.token}` });
  const users = (await admin.get('/admin/users')).json.users.map((u: { name: string }) => u.name);
  t.same(users, ['root', 'admin'], 'no mallory was created');

  const again = await anon.post('/auth/bootstrap', { username: 'mallory', secret });
  t.equal(again.status, 401, 'the secret works once');
  t.equal(again.json.error, none.json.error, 'and the refusal does not tell that the server is set up now');
  t.notOk('needs_bootstrap' in (await admin.get('/health')).json);

  await svc.stop();
  svc = await startService(t, { dataDir, env: { SERVICE_MODE: 'hosted' } });
  t.notOk(existsSync(file), 'a bootstrapped store gets no new secret');
  t.notMatch(svc.stderr(), /bootstrap secret/);
});

t.test('a hosted server started without serve: the first attempt creates the secret file', async (t) => {
  // The local CLI's daemon (local environment) is reused by a hosted serve: the file may be missing.
  const dataDir = tempDataDir(t);
  const svc = await startService(t, { dataDir, env: { SERVICE_MODE: 'hosted' } });
  const file = path.join(dataDir, 'bootstrap-secret');
  rmSync(file);
  const anon = client(svc);
  const r = await anon.post('/auth/bootstrap', { username: 'admin', secret: 'guess' });
  t.equal(r.status, 401);
  t.ok(existsSync(file), 'a new secret is written for the operator');
  const ok = await anon.post('/auth/bootstrap', { username: 'admin', secret: readFileSync(file, 'utf8') });
  t.equal(ok.status, 200, ok.text);
});

t.test('local mode is unchanged: health tells, bootstrap needs no secret, no file is written', async (t) => {
  const dataDir = tempDataDir(t);
  const svc = await startService(t, { dataDir });
  const anon = client(svc);
  t.equal((await anon.get('/health')).json.needs_bootstrap, true);
  t.notOk(existsSync(path.join(dataDir, 'bootstrap-secret')));
  t.equal((await anon.post('/auth/bootstrap', { username: 'admin' })).status, 200);
  t.equal((await anon.post('/auth/bootstrap', { username: 'again' })).status, 409);
});
