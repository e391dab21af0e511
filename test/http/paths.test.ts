// The contract's path-resolution table through /fs, for a user, an agent on behalf of a user, and root.
import t from 'tap';
import { withCast } from '../helpers/http.js';

const { root, alice, bot, svc } = await withCast(t);

t.test('a user: relative, ~, ~/x, empty, absolute', async (t) => {
  const cases: [string, string][] = [
    ['/fs/notes/a.md', '/home/alice/notes/a.md'],
    ['/fs/~/b.md', '/home/alice/b.md'],
    ['/fs/%7E/c.md', '/home/alice/c.md'],
    ['/fs/notes/../d.md', '/home/alice/d.md'],
    ['/fs/./notes/./e.md', '/home/alice/notes/e.md'],
  ];
  for (const [url, want] of cases) {
    const r = await alice.put(url, `content of ${want}`);
    t.equal(r.status, 200, `${url}: ${r.text}`);
    t.equal(r.json.path, want, url);
    t.equal((await root.get(`/fs/${want}`)).text, `content of ${want}`, `${url} landed at ${want}`);
  }
  t.equal((await alice.get('/fs/~')).json.path, '/home/alice', '~ is the home');
  t.equal((await alice.get('/fs/')).json.path, '/home/alice', 'empty is the home');
  t.equal((await alice.get('/fs')).json.path, '/home/alice', '/fs alone is the home');
  t.equal((await alice.get('/fs/notes/a.md?stat=true')).json.path, '/home/alice/notes/a.md');

  await root.put('/fs//srv/shared', undefined, { headers: { 'x-service-type': 'directory' } });
  t.equal((await root.post('/admin/chmod//srv/shared', { mode: '0777' })).status, 200);
  for (const url of ['/fs//srv/shared/abs.md', '/fs/%2Fsrv/shared/abs.md', '/fs/%2fsrv%2fshared%2fabs.md']) {
    const r = await alice.put(url, 'abs');
    t.equal(r.json.path, '/srv/shared/abs.md', `${url} is absolute`);
  }
  const up = await alice.put('/fs//srv/../srv/shared/../shared/up.md', 'up');
  t.equal(up.json.path, '/srv/shared/up.md', '.. is resolved lexically');
  const top = await root.put('/fs//../../../toplevel.md', 'top');
  t.equal(top.json.path, '/toplevel.md', '.. never climbs above /');
  const parents = await alice.put('/fs/auto/created/parents/f.md', 'p');
  t.equal(parents.status, 200, 'parents are created on write');
  t.equal((await alice.get('/fs/auto/created?stat=true')).json.kind, 'directory');
});

t.test("an agent on behalf of a user uses the delegate's home", async (t) => {
  // Intersection semantics: bot must also be allowed into alice's home, so share it by group.
  t.equal((await root.post('/admin/users/bot/groups/alice')).status, 200);
  t.equal((await alice.post('/admin/chmod/~', { mode: '0770' })).status, 200);
  t.equal((await alice.post('/auth/delegations', { agent: 'bot' })).status, 200, "alice's consent");
  t.equal((await alice.put('/fs/notes', undefined, { headers: { 'x-service-type': 'directory' } })).status, 200);
  t.equal((await alice.post('/admin/chmod/notes', { mode: '0775' })).status, 200);

  const delegated = { onBehalfOf: 'alice' };
  const w = await bot.put('/fs/notes/by-bot.md', 'from bot', delegated);
  t.equal(w.status, 200, w.text);
  t.equal(w.json.path, '/home/alice/notes/by-bot.md', "relative → the delegate's home");
  t.equal((await bot.put('/fs/~/tilde.md', 't', delegated)).json.path, '/home/alice/tilde.md');
  t.equal((await bot.get('/fs/', delegated)).json.path, '/home/alice');
  const st = await alice.get('/fs/notes/by-bot.md?stat=true');
  const aliceMe = await alice.get('/auth/whoami');
  t.equal(st.json.uid, aliceMe.json.uid, 'new files belong to the delegate');
  const who = await bot.get('/auth/whoami', delegated);
  t.equal(who.json.on_behalf_of, 'alice');
  const own = await bot.put('/fs/mine.md', 'bot home');
  t.equal(own.json.path, '/home/bot/mine.md', "without the header: the agent's own home");
});

t.test('root: relative paths resolve at /', async (t) => {
  const r = await root.put('/fs/rootfile.md', 'r');
  t.equal(r.json.path, '/rootfile.md');
  t.equal((await root.get('/fs/')).json.path, '/');
  t.ok((await root.get('/fs/')).json.entries.some((e: { name: string }) => e.name === 'home'));
  t.equal((await root.put('/fs/a/b.md', 'x')).json.path, '/a/b.md');
  t.equal((await root.get('/fs//home/alice/notes/by-bot.md')).text, 'from bot');
});

t.test('404 on a relative path when the identity changed', async (t) => {
  await alice.put('/fs/only-alice.md', 'a');
  const r = await bot.get('/fs/only-alice.md');
  t.equal(r.status, 404, "relative paths depend on the caller's home");
  t.ok(svc.port > 0);
});
