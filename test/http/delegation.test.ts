// Issue 30, items 2 and 3: an agent acts for a user only with that user's grant (nobody acts for root
// but root), the README's agent set-up works for a real agent (create, re-write, edit, move, delete
// with no chmod by hand), an EACCES under delegation names who lacked which right, and tokens expire.
// All through REST against a real `mdvfs serve`.
import t from 'tap';
import { client, startService, until, withCast } from '../helpers/http.js';

const cast = await withCast(t);
const { svc, root, admin, alice, bot, botToken } = cast;
const helperFor = (user: string) => client(svc, { auth: `Bearer ${botToken}`, onBehalfOf: user });

t.test('nobody acts on behalf of root but root: refused, the refusal says why, nothing created', async (t) => {
  // the attack: a tree the agent made under /tmp, copied "as root"
  t.equal((await bot.put('/fs//tmp/evil/.git/config', '[core]\n\tfsmonitor = "touch /tmp/pwned"\n')).status, 200);
  const asRoot = helperFor('root');
  const copy = await asRoot.post('/fs//tmp/evil?op=copy&dst=/tmp/owned-by-root');
  t.equal(copy.status, 403, copy.text);
  t.equal(copy.json.code, 'EPERM');
  t.match(copy.json.error, /nobody acts on behalf of root but root/);
  t.equal((await root.get('/fs//tmp/owned-by-root?stat=true')).status, 404, 'nothing was created');
  t.equal((await asRoot.put('/fs//tmp/x.md', 'x')).status, 403, 'nor written');
  t.equal((await root.get('/fs//tmp/x.md?stat=true')).status, 404);
  // not even a wheel member, and not with a grant either (root grants none)
  const wheelAsRoot = client(svc, { auth: `Bearer ${cast.adminToken}`, onBehalfOf: 'root' });
  t.equal((await wheelAsRoot.get('/auth/whoami')).status, 403, 'a wheel member may not act for root');
  const g = await root.post('/auth/delegations', { agent: 'bot' });
  t.equal(g.status, 403, g.text);
  t.match(g.json.error, /root grants no delegation/);
  // root itself may act for anyone (it needs no consent: it could do everything anyway)
  const rootForAlice = client(svc, { onBehalfOf: 'alice' });
  t.equal((await rootForAlice.get('/auth/whoami')).json.on_behalf_of, 'alice');
});

t.test('an agent acts for alice only while her grant holds', async (t) => {
  const forAlice = helperFor('alice');
  const before = await forAlice.put('/fs//tmp/for-alice.md', 'x');
  t.equal(before.status, 403, 'no grant yet');
  t.equal(before.json.code, 'EPERM');
  t.match(before.json.error, /no delegation grant: alice has not granted bot/, 'the refusal names the missing grant');
  t.equal((await root.get('/fs//tmp/for-alice.md?stat=true')).status, 404, 'nothing created');

  // bob may not grant for alice; alice may
  t.equal((await cast.bob.post('/auth/delegations', { agent: 'bot', user: 'alice' })).status, 403);
  const g = await alice.post('/auth/delegations', { agent: 'bot' });
  t.equal(g.status, 200, g.text);
  t.match(g.json, { user: 'alice', agent: 'bot' });
  t.same(
    (await alice.get('/auth/delegations')).json.delegations.map((d: { user: string; agent: string }) => [
      d.user,
      d.agent,
    ]),
    [['alice', 'bot']],
    'alice lists her grant',
  );
  t.equal((await client(svc, { auth: `Bearer ${botToken}` }).get('/auth/delegations')).json.delegations.length, 1);
  t.equal((await cast.bob.get('/auth/delegations')).json.delegations.length, 0, "bob sees nobody else's grants");

  const who = await forAlice.get('/auth/whoami');
  t.equal(who.status, 200, who.text);
  t.equal(who.json.on_behalf_of, 'alice');
  t.equal((await forAlice.put('/fs//tmp/for-alice.md', 'x')).status, 200, 'works with the grant');

  // the agent cannot pass its grant on to itself for bob
  t.equal((await forAlice.post('/auth/delegations', { agent: 'bot', user: 'bob' })).status, 403);

  const r = await alice.del('/auth/delegations/bot');
  t.equal(r.status, 200, r.text);
  const after = await forAlice.put('/fs//tmp/for-alice.md', 'y');
  t.equal(after.status, 403, 'the next request after the revocation is refused');
  t.match(after.json.error, /no delegation grant/);
  t.equal((await root.get('/fs//tmp/for-alice.md')).text, 'x', 'nothing changed');
  t.equal((await alice.del('/auth/delegations/bot')).status, 404, 'revoking twice: no such grant');
});

t.test("the README's agent set-up: grant, share the folder, done", async (t) => {
  // alice alone, no administrator: grant with `share` (the agent joins her personal group), open her
  // home to that group
  const grant = await alice.post('/auth/delegations', { agent: 'bot', share: true });
  t.equal(grant.status, 200, grant.text);
  t.equal(grant.json.shares_group, true, 'the grant says the agent is in her group');
  const aliceGroup = (await admin.get('/admin/groups')).json.groups.find((g: { name: string }) => g.name === 'alice');
  t.same(aliceGroup.members, ['alice', 'bot'], 'the agent is in her personal group');
  t.equal((await alice.post('/admin/chmod/~', { mode: '0770' })).status, 200);
  const agent = helperFor('alice');

  // create, write again, edit (conditional write), move and delete: no chmod by hand
  const w1 = await agent.put('/fs/notes/agent-own.md', 'first\n');
  t.equal(w1.status, 200, w1.text);
  const w2 = await agent.put('/fs/notes/agent-own.md', 'second\n');
  t.equal(w2.status, 200, `its second write works: ${w2.text}`);
  const st = (await root.get('/fs//home/alice/notes/agent-own.md?stat=true')).json;
  t.equal(st.mode, '0664', 'a delegated create gets group write');
  t.equal((await root.get('/fs//home/alice/notes?stat=true')).json.mode, '0775', 'so does its new folder');
  const ed = await agent.put('/fs/notes/agent-own.md', 'second, edited\n', { headers: { 'if-match': w2.json.etag } });
  t.equal(ed.status, 200, ed.text);
  const mv = await agent.post('/fs/notes/agent-own.md?op=move&dst=notes/renamed.md');
  t.equal(mv.status, 200, mv.text);
  t.equal((await alice.get('/fs/notes/renamed.md')).text, 'second, edited\n');
  t.equal((await agent.put('/fs/notes/renamed.md', 'after the move\n')).status, 200);
  const rm = await agent.del('/fs/notes/renamed.md');
  t.equal(rm.status, 200, rm.text);
  t.equal((await alice.get('/fs/notes/renamed.md')).status, 404);

  // a note alice shares with her group (0664) the agent may revise; her 0644 note it may not
  t.equal((await alice.put('/fs/notes/shared.md', 'alice shares\n')).status, 200);
  t.equal((await alice.post('/admin/chmod/notes/shared.md', { mode: '0664' })).status, 200);
  t.equal((await agent.put('/fs/notes/shared.md', 'revised by the agent\n')).status, 200);
  t.equal((await alice.put('/fs/notes/todo.md', '# Todo\n')).status, 200);
  const denied = await agent.put('/fs/notes/todo.md', 'overwrite');
  t.equal(denied.status, 403);
  t.equal(denied.json.code, 'EACCES');
  t.match(
    denied.json.error,
    'bot (acting for alice) lacks write on /home/alice/notes/todo.md: group bits r--',
    'the refusal names the principal, the right, the path and the bits',
  );
  // the delegate's own lack is named as hers
  t.equal((await root.put('/fs//srv/bot-only.md', 'x')).status, 200);
  t.equal((await root.post('/admin/chown//srv/bot-only.md', { owner: 'bot' })).status, 200);
  t.equal((await root.post('/admin/chmod//srv/bot-only.md', { mode: '0600' })).status, 200);
  const hers = await agent.get('/fs//srv/bot-only.md');
  t.equal(hers.status, 403);
  t.match(hers.json.error, 'alice (on whose behalf bot acts) lacks read on /srv/bot-only.md: other bits ---');
  t.equal((await alice.del('/auth/delegations/bot')).status, 200);
  t.equal((await agent.put('/fs/notes/shared.md', 'after revoke')).status, 403, 'revoked: refused');
  const groups = (await admin.get('/admin/groups')).json.groups as { name: string; members: string[] }[];
  t.notOk(groups.find((g) => g.name === 'alice')?.members.includes('bot'), 'and it has left her group');
  t.equal((await bot.get('/fs//home/alice/notes/shared.md')).status, 403, 'so it reads nothing of hers either');
  // sharing needs a personal group: a grant with `share` by one whose primary group is another is refused
  const shareFromRoot = await root.post('/auth/delegations', { agent: 'bot', user: 'bob', share: true });
  t.equal(shareFromRoot.status, 200, "root grants for bob, sharing bob's personal group");
  t.equal(shareFromRoot.json.shares_group, true);
});

t.test('tokens may expire: an expired token is 401 saying so', async (t) => {
  const long = await admin.post('/admin/users/bob/tokens', { expires_in: 3600 });
  t.equal(long.status, 200, long.text);
  t.type(long.json.expires, 'number');
  const listed = (await admin.get('/admin/users')).json.users.find((u: { name: string }) => u.name === 'bob');
  t.equal(listed.token_expires, long.json.expires, 'the listing shows when it expires');
  t.equal((await client(svc, { auth: `Bearer ${long.json.token}` }).get('/auth/whoami')).json.user, 'bob');

  const short = await admin.post('/admin/users/bob/tokens', { expires_in: 1 });
  t.equal(short.status, 200, short.text);
  const bob = client(svc, { auth: `Bearer ${short.json.token}` });
  let last = await bob.get('/auth/whoami');
  await until(async () => (last = await bob.get('/auth/whoami')).status === 401, 'the token to expire');
  t.equal(last.json.code, 'EAUTH');
  t.match(last.json.error, /this token expired at \d{4}-\d\d-\d\dT/);
  t.equal((await admin.post('/admin/users/bob/tokens', { expires_in: 0 })).status, 400, 'expires_in must be positive');
  const again = await admin.post('/admin/users/bob/tokens');
  t.equal(again.json.expires, undefined, 'a token issued without expires_in never expires');
  t.equal(
    (await admin.get('/admin/users')).json.users.find((u: { name: string }) => u.name === 'bob').token_expires,
    undefined,
  );
});

t.test('grants and expiries are durable: a restart keeps them', async (t) => {
  t.equal((await alice.post('/auth/delegations', { agent: 'bot' })).status, 200);
  const exp = await admin.post('/admin/users/alice/tokens', { expires_in: 7200 });
  await svc.stop();
  const again = await startService(t, { dataDir: svc.dataDir });
  const agent = client(again, { auth: `Bearer ${botToken}`, onBehalfOf: 'alice' });
  t.equal((await agent.get('/auth/whoami')).json.on_behalf_of, 'alice', 'the grant holds after a restart');
  const aliceUser = (await client(again, { auth: `Bearer ${cast.adminToken}` }).get('/admin/users')).json.users.find(
    (u: { name: string }) => u.name === 'alice',
  );
  t.equal(aliceUser.token_expires, exp.json.expires, 'the expiry too');
  t.equal((await client(again, { auth: 'User alice' }).del('/auth/delegations/bot')).status, 200);
  t.equal((await agent.get('/auth/whoami')).status, 403);
});
