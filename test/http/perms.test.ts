// The permission personas of the foundation issue, through HTTP only.
import t from 'tap';
import { withCast } from '../helpers/http.js';

const { root, admin, alice, bob, bot } = await withCast(t);
const dir = { headers: { 'x-service-type': 'directory' } };

t.test('homes are private (0700)', async (t) => {
  t.equal((await alice.put('/fs/secret.md', 'alice only')).status, 200);
  t.equal((await alice.post('/admin/chmod/secret.md', { mode: '0644' })).status, 200);
  t.equal((await alice.get('/fs/?stat=true')).json.mode, '0700');
  const r = await bob.get('/fs//home/alice/secret.md');
  t.equal(r.status, 403, 'a 0644 file inside a 0700 home is unreadable');
  t.equal(r.json.code, 'EACCES');
  t.equal((await bob.get('/fs//home/alice')).status, 403, 'cannot list');
  t.equal((await bob.put('/fs//home/alice/x.md', 'x')).status, 403, 'cannot create');
  t.equal((await bob.del('/fs//home/alice/secret.md')).status, 403, 'cannot delete');
  t.equal((await bob.post('/fs//home/alice/secret.md?op=copy&dst=stolen.md')).status, 403, 'cannot copy out');
  const g = await bob.get('/search/grep?pattern=alice&path=/home/alice&recursive=true');
  t.equal(g.status === 200 ? g.json.count : 0, 0, 'grep never leaks content');
  const f = await bob.get('/search/find?path=/&name=secret*');
  t.notOk(f.text.includes('/home/alice/secret.md'), 'find never leaks names');
  t.notMatch((await bob.get('/tree//home')).text, /secret/, 'tree never leaks names');
});

t.test('a file owned by someone else is not writable', async (t) => {
  await root.put('/fs//pub', undefined, dir);
  await root.post('/admin/chmod//pub', { mode: '0777' });
  t.equal((await alice.put('/fs//pub/alice.md', 'a')).status, 200);
  t.equal((await bob.get('/fs//pub/alice.md')).status, 200, '0644 is readable');
  t.equal((await bob.put('/fs//pub/alice.md', 'b')).status, 403, 'but not writable');
  t.equal((await bob.post('/admin/chmod//pub/alice.md', { mode: '0666' })).status, 403, 'only the owner chmods');
});

t.test('wheel reads everything and chmods anything, but cannot chown', async (t) => {
  t.equal((await admin.get('/fs//home/alice/secret.md')).text, 'alice only', 'wheel reads a private file');
  t.equal((await admin.get('/fs//home/alice')).status, 200, 'wheel lists a private dir');
  t.equal(
    (await admin.post('/admin/chmod//home/alice/secret.md', { mode: '0600' })).status,
    200,
    'wheel chmods a file it does not own',
  );
  t.equal((await alice.get('/fs/secret.md?stat=true')).json.mode, '0600');
  const chown = await admin.post('/admin/chown//home/alice/secret.md', { owner: 'bob' });
  t.equal(chown.status, 403, 'only uid 0 chowns between users');
  t.equal((await alice.post('/admin/chown/secret.md', { owner: 'bob' })).status, 403, 'owners cannot give files away');
  const r = await root.post('/admin/chown//pub/alice.md', { owner: 'bob' });
  t.equal(r.status, 200, r.text);
  t.equal((await bob.put('/fs//pub/alice.md', "now bob's")).status, 200, 'root chown moved ownership');
});

t.test('chgrp: only to a group the owner belongs to', async (t) => {
  await root.post('/admin/groups', { name: 'team' });
  await root.post('/admin/users/alice/groups/team');
  await alice.put('/fs//pub/team.md', 't');
  const ok = await alice.post('/admin/chown//pub/team.md', { owner: 'alice', group: 'team' });
  t.equal(ok.status, 200, ok.text);
  const groups = await root.get('/admin/groups');
  const team = groups.json.groups.find((g: { name: string }) => g.name === 'team');
  t.equal(ok.json.gid, team.gid);
  t.equal(
    (await alice.post('/admin/chown//pub/team.md', { owner: 'alice', group: 'bob' })).status,
    403,
    'not a member of bob',
  );
});

t.test('sticky directory: only the owner deletes or renames', async (t) => {
  await root.put('/fs//tmpdir', undefined, dir);
  t.equal((await root.post('/admin/chmod//tmpdir', { mode: '1777' })).json.mode, '1777');
  t.equal((await alice.put('/fs//tmpdir/a.md', 'a')).status, 200);
  t.equal((await bob.put('/fs//tmpdir/b.md', 'b')).status, 200, 'anyone may create');
  t.equal((await bob.del('/fs//tmpdir/a.md')).status, 403, "bob cannot delete alice's entry");
  t.equal((await bob.post('/fs//tmpdir/a.md?op=move&dst=/tmpdir/stolen.md')).status, 403, 'nor rename it');
  t.equal((await bob.del('/fs//tmpdir/b.md')).status, 200, 'but may delete his own');
  t.equal((await alice.del('/fs//tmpdir/a.md')).status, 200);
});

t.test('setgid directory: new entries take its group', async (t) => {
  await root.put('/fs//team', undefined, dir);
  t.equal((await root.post('/admin/chown//team', { owner: 'root', group: 'team' })).status, 200);
  t.equal((await root.post('/admin/chmod//team', { mode: '2775' })).json.mode, '2775');
  const teamGid = (await root.get('/fs//team?stat=true')).json.gid;
  t.equal((await alice.put('/fs//team/doc.md', 'd')).status, 200, 'a member writes');
  t.equal((await alice.get('/fs//team/doc.md?stat=true')).json.gid, teamGid, 'file takes the directory group');
  await alice.put('/fs//team/sub', undefined, dir);
  const sub = await alice.get('/fs//team/sub?stat=true');
  t.equal(sub.json.gid, teamGid);
  t.match(sub.json.mode, /^2/, 'subdirectories inherit setgid');
  t.equal((await bob.put('/fs//team/nope.md', 'n')).status, 403, 'a non-member cannot write');
});

t.test('delegation is the intersection of both', async (t) => {
  await alice.put('/fs/plan.md', 'plan');
  const d = { onBehalfOf: 'alice' };
  t.equal((await bot.get('/fs//tmp', d)).status, 403, 'no delegation without her grant');
  t.equal((await alice.post('/auth/delegations', { agent: 'bot' })).status, 200, "alice's consent");
  t.equal((await alice.post('/auth/delegations', { agent: 'admin' })).status, 200);
  t.equal((await bot.get('/fs/plan.md', d)).status, 403, "bot cannot enter alice's home, so neither can bot-for-alice");
  await root.put('/fs//pub/bobonly.md', 'b');
  await root.post('/admin/chown//pub/bobonly.md', { owner: 'bob' });
  await root.post('/admin/chmod//pub/bobonly.md', { mode: '0600' });
  t.equal((await bot.get('/fs//pub/bobonly.md', d)).status, 403, 'neither can read');
  await root.post('/admin/chmod//pub/bobonly.md', { mode: '0604' });
  t.equal((await bot.get('/fs//pub/bobonly.md')).status, 200, 'others-readable: bot alone reads');
  t.equal((await bot.get('/fs//pub/bobonly.md', d)).status, 200, 'and so does bot for alice');
  await root.post('/admin/chmod//pub/bobonly.md', { mode: '0640' });
  await root.post('/admin/chown//pub/bobonly.md', { owner: 'bob', group: 'alice' });
  t.equal((await alice.get('/fs//pub/bobonly.md')).status, 200, 'alice reads through her group');
  t.equal((await bot.get('/fs//pub/bobonly.md', d)).status, 403, 'bot does not: the intersection denies');

  // Share alice's home with bot: now delegated work succeeds and belongs to alice.
  await root.post('/admin/users/bot/groups/alice');
  await alice.post('/admin/chmod/~', { mode: '0770' });
  await alice.post('/admin/chmod/plan.md', { mode: '0664' });
  t.equal((await bot.get('/fs/plan.md', d)).text, 'plan');
  t.equal((await bot.put('/fs/plan.md', 'edited by bot', d)).status, 200);
  t.equal((await alice.get('/fs/plan.md')).text, 'edited by bot');

  const bobDelegates = await bob.get('/fs/', d);
  t.ok(
    bobDelegates.status === 401 || bobDelegates.status === 403,
    `a plain user cannot delegate (${bobDelegates.status})`,
  );
  t.equal((await admin.get('/auth/whoami', { onBehalfOf: 'alice' })).json.on_behalf_of, 'alice', 'wheel may delegate');
  const ghost = await bot.get('/fs/', { onBehalfOf: 'ghost' });
  t.ok(ghost.status >= 400 && ghost.status < 500, `delegating to an unknown user fails (${ghost.status})`);
  const c = await bot.post('/vcs/commit', { message: 'by bot for alice' }, d);
  t.equal(c.json.author, 'bot');
  t.equal(c.json.on_behalf_of, 'alice');
});
