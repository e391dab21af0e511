/**
 * Issue 30, items 1 and 6, through the real transports (`mdvfs serve`: REST, and MCP over HTTP):
 * every history answer applies one rule set. Content at a commit is shown only if the caller may
 * read it now and could read it in that commit; a path's name only if the caller could list its
 * parent in the commit and may list its nearest existing ancestor now; a commit with nothing
 * visible is hidden, and naming it (hash, prefix, HEAD~n) is ENOENT like a commit that does not
 * exist. HEAD~n walks the caller's own view of history (what its log lists).
 */
import t from 'tap';
import { client, type Client } from '../helpers/http.js';
import { call, errorCode, httpClient, text, withCast } from '../helpers/mcp.js';

const cast = await withCast(t);
const { svc, daemon } = cast;
const root = client(svc);
const alice = client(svc, { auth: 'User alice' });
const bob = client(svc, { auth: 'User bob' });
const { client: bobMcp } = await httpClient(t, svc, { authorization: 'User bob' });

async function ok(what: string, p: Promise<{ status: number; text: string }>): Promise<void> {
  const r = await p;
  if (r.status !== 200) throw new Error(`setup: ${what}: ${r.status} ${r.text}`);
}
async function commit(who: Client, message: string): Promise<string> {
  const r = await who.post('/vcs/commit', { message });
  if (r.status !== 200) throw new Error(`setup: commit ${message}: ${r.status} ${r.text}`);
  return r.json.hash as string;
}
async function messages(who: Client, query = ''): Promise<string[]> {
  const r = await who.get(`/vcs/log${query}`);
  if (r.status !== 200) throw new Error(`log: ${r.status} ${r.text}`);
  return (r.json.commits as { message: string }[]).map((c) => c.message);
}

// A public file bob may read, committed by root: the one commit bob sees to begin with.
await daemon.call('fs.mkdir', { path: '/srv', parents: true });
await ok('PUT /srv/pub.md', root.put('/fs//srv/pub.md', 'public\n'));
const base = await commit(root, 'base');
// alice opens her home to others (0755), as in the issue
await ok('chmod home', alice.post('/admin/chmod//home/alice', { mode: '0755' }));
await commit(alice, 'open home');

void t.test('issue 30.1: a diff between two commits obeys what bob may read today', async (t) => {
  await ok('pub v1', alice.put('/fs//home/alice/pub.md', 'alpha version\n'));
  const c1 = await commit(alice, 'pub v1');
  await ok('pub v2', alice.put('/fs//home/alice/pub.md', 'beta version\n'));
  const c2 = await commit(alice, 'pub v2');
  await ok('chmod pub', alice.post('/admin/chmod//home/alice/pub.md', { mode: '0600' }));
  await commit(alice, 'pub private');

  t.equal((await bob.get('/fs//home/alice/pub.md')).status, 403, 'bob may not read the file now');
  const at = await bob.get('/fs//home/alice/pub.md?at=HEAD~1');
  t.not(at.status, 200, 'nor at HEAD~1');
  t.notMatch(at.text, /alpha|beta/);
  const c3 = (await alice.get('/vcs/log?limit=1')).json.commits[0].hash as string;
  // bob's HEAD~1 is the second commit of his own log, none of alice's commits of the file
  const show = await bob.get('/vcs/show?rev=HEAD~1');
  t.notOk([c1, c2, c3].includes(show.json.commit?.hash as string), 'show HEAD~1 is not a commit hidden from bob');
  t.notMatch(show.text, /alice\/pub/);

  // the attack: the diff printed both versions
  const d = await bob.get('/vcs/diff?from=HEAD~2&to=HEAD~1');
  t.equal(d.status, 404, 'HEAD~2 and HEAD~1 do not reach commits hidden from bob');
  t.notMatch(d.text, /alpha|beta/, 'no content in the answer');
  const byHash = await bob.get(`/vcs/diff?from=${c1}&to=${c2}`);
  t.equal(byHash.status, 404, 'nor do their hashes: a hidden commit is ENOENT');
  t.notMatch(byHash.text, /alpha|beta/);
  t.equal((await bob.get(`/vcs/diff?from=${c1.slice(0, 6)}&to=HEAD`)).status, 404, 'nor a prefix');
  t.equal((await bob.get(`/vcs/show?rev=${c1}`)).status, 404);
  t.same(
    (await messages(bob)).filter((m) => m.startsWith('pub')),
    [],
    "bob's log lists none of alice's commits of the file",
  );

  // alice may read her file: she still sees both versions; so does root
  const mine = await alice.get(`/vcs/diff?from=${c1}&to=${c2}`);
  t.equal(mine.status, 200);
  t.match(mine.text, /-alpha version\n\+beta version/);
  t.match((await root.get(`/vcs/diff?from=${c1}&to=${c2}`)).text, /\+beta version/);
});

void t.test('issue 30.1: a visible commit still hides the content bob may not read now', async (t) => {
  await ok('notes v1', alice.put('/fs//home/alice/notes.md', 'notes one\n'));
  await ok('plan v1', alice.put('/fs//home/alice/plan.md', 'plan gamma\n'));
  const d1 = await commit(alice, 'notes and plan v1');
  await ok('notes v2', alice.put('/fs//home/alice/notes.md', 'notes two\n'));
  await ok('plan v2', alice.put('/fs//home/alice/plan.md', 'plan delta\n'));
  const d2 = await commit(alice, 'notes and plan v2');
  // today: plan.md is private (not committed: the working tree is what counts now)
  await ok('chmod plan', alice.post('/admin/chmod//home/alice/plan.md', { mode: '0600' }));

  const d = await bob.get(`/vcs/diff?from=${d1}&to=${d2}`);
  t.equal(d.status, 200, 'both commits stay visible to bob (notes.md)');
  t.match(d.text, /-notes one\n\+notes two/);
  t.notMatch(d.text, /plan/, 'but neither the name nor the content of plan.md');
  const show = await bob.get(`/vcs/show?rev=${d2}`);
  t.same(
    (show.json.changes as { path: string }[]).map((c) => c.path),
    ['/home/alice/notes.md'],
    'show lists what bob may read now',
  );
  // diff to the working tree
  const w = await bob.get(`/vcs/diff?from=${d1}`);
  t.equal(w.status, 200);
  t.match(w.text, /\+notes two/);
  t.notMatch(w.text, /plan/);
  // read at a commit: refused now, as the live file is
  t.equal((await bob.get(`/fs//home/alice/plan.md?at=${d1}`)).status, 403);
  t.equal((await bob.get(`/fs//home/alice/notes.md?at=${d1}`)).text, 'notes one\n');
  // alice still sees it all
  t.match((await alice.get(`/vcs/diff?from=${d1}&to=${d2}`)).text, /-plan gamma\n\+plan delta/);
  await ok('chmod plan back', alice.post('/admin/chmod//home/alice/plan.md', { mode: '0644' }));
  await commit(alice, 'plan public again');
});

void t.test("issue 30.6: a since-deleted private directory's names and messages stay hidden", async (t) => {
  await ok('secret', alice.put('/fs//home/alice/secret/merger-with-acme.md', 'offer 12M\n'));
  await ok('chmod secret', alice.post('/admin/chmod//home/alice/secret', { mode: '0700' }));
  const s1 = await commit(alice, 'acquisition talks');
  await ok('rm secret', alice.del('/fs//home/alice/secret?recursive=true'));
  const s2 = await commit(alice, 'tidy up the deal folder');

  const log = await bob.get('/vcs/log');
  t.notMatch(log.text, /acquisition|deal folder|acme/, "bob's log shows neither message nor name");
  for (const rev of [s1, s2, s1.slice(0, 8)]) {
    const r = await bob.get(`/vcs/show?rev=${rev}`);
    t.equal(r.status, 404, `show ${rev}: no such commit for bob`);
    t.notMatch(r.text, /acme|acquisition/);
  }
  t.notMatch(text(await call(bobMcp, 'get_history', {})), /acquisition|deal folder|acme/, 'nor over MCP');
  const d = await bob.get(`/vcs/diff?from=${s1}`);
  t.equal(d.status, 404, 'nor a diff from it to the working tree');
  t.notMatch(d.text, /acme/);
  t.equal((await bob.post('/vcs/revert', { hash: s1 })).status, 404, 'nor a revert to it');

  // alice and root see both commits and the names
  t.match((await alice.get('/vcs/log')).text, /acquisition talks/);
  t.same(
    ((await alice.get(`/vcs/show?rev=${s2}`)).json.changes as { path: string }[]).map((c) => c.path),
    ['/home/alice/secret/merger-with-acme.md'],
  );
  t.same(
    ((await root.get(`/vcs/show?rev=${s1}`)).json.changes as { path: string }[]).map((c) => c.path),
    ['/home/alice/secret/merger-with-acme.md'],
  );
});

void t.test('read at a commit bob may not see is ENOENT, over REST and MCP', async (t) => {
  const hidden = (await alice.get('/vcs/log?limit=1')).json.commits[0].hash as string;
  t.notMatch((await bob.get('/vcs/log')).text, new RegExp(hidden), 'the newest commit is hidden from bob');
  for (const rev of [hidden, hidden.slice(0, 5)]) {
    const r = await bob.get(`/fs//srv/pub.md?at=${rev}`);
    t.equal(r.status, 404, `?at=${rev}: no such commit`);
    t.equal(r.json.code, 'ENOENT');
  }
  t.equal((await bob.get(`/fs//srv?at=${hidden}`)).status, 404, 'nor a listing');
  t.equal((await bob.get(`/fs//srv/pub.md?at=${base}`)).text, 'public\n', 'a commit bob sees reads as before');
  t.equal(errorCode(await call(bobMcp, 'read_file', { path: '/srv/pub.md', at: hidden })), 'ENOENT');
  t.equal(text(await call(bobMcp, 'read_file', { path: '/srv/pub.md', at: base })), 'public\n');
});

void t.test("a file's private past stays out of bob's log after it is made public", async (t) => {
  await ok('draft', alice.put('/fs//home/alice/draft.md', 'we buy acme\n'));
  await ok('chmod draft', alice.post('/admin/chmod//home/alice/draft.md', { mode: '0600' }));
  await commit(alice, 'draft: we buy acme');
  await ok('publish', alice.post('/admin/chmod//home/alice/draft.md', { mode: '0644' }));
  await commit(alice, 'publish the draft');
  t.same(await messages(bob, '?path=/home/alice/draft.md'), ['publish the draft'], 'the path log');
  const all = await messages(bob);
  t.ok(all.includes('publish the draft'));
  t.notOk(all.includes('draft: we buy acme'), 'the full log');
  t.same(await messages(alice, '?path=/home/alice/draft.md'), ['publish the draft', 'draft: we buy acme']);
});

void t.test("HEAD~n walks bob's own history: the commits his log lists, in order", async (t) => {
  const mine = (await bob.get('/vcs/log')).json.commits as { hash: string }[];
  const everyone = (await root.get('/vcs/log')).json.commits as { hash: string }[];
  t.ok(everyone.length > mine.length, 'root sees more commits than bob');
  for (let i = 0; i < mine.length; i++) {
    const r = await bob.get(`/vcs/show?rev=HEAD~${i}`);
    t.equal(r.status, 200, `HEAD~${i}`);
    t.equal(r.json.commit.hash, mine[i]!.hash, `HEAD~${i} is the entry ${i} of bob's log`);
  }
  t.equal((await bob.get(`/vcs/show?rev=${mine[0]!.hash}^`)).json.commit.hash, mine[1]!.hash, 'hash^');
  const past = await bob.get(`/vcs/show?rev=HEAD~${mine.length}`);
  t.equal(past.status, 404);
  t.match(past.json.error, new RegExp(`HEAD has only ${mine.length - 1} commits before it`), 'counted in his view');
  for (let i = 0; i < everyone.length; i++)
    t.equal(
      (await root.get(`/vcs/show?rev=HEAD~${i}`)).json.commit.hash,
      everyone[i]!.hash,
      `root's HEAD~${i} is unchanged`,
    );
});
