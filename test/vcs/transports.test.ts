/**
 * The attacks of issue 15 through the real transports (`mdvfs serve`: REST and MCP over HTTP):
 * alice's commit recording root's private file, a non-owner's revert bringing back another user's
 * file, bob reading alice's commit messages; and reading a file as it was at a commit. Then what came
 * after: `.mdvfsignore` over REST, the MCP `undo` tool, and no empty commits from revert and undo.
 */
import t from 'tap';
import { client } from '../helpers/http.js';
import { call, data, errorCode, httpClient, text, withCast } from '../helpers/mcp.js';

const cast = await withCast(t);
const { svc, daemon, botToken } = cast;
const root = client(svc);
const alice = client(svc, { auth: 'User alice' });
const bob = client(svc, { auth: 'User bob' });
await daemon.call('auth.delegationAdd', { agent: 'bot', user: 'alice' }); // alice's consent
const { client: aliceMcp } = await httpClient(t, svc, { authorization: 'User alice' });
const { client: bobMcp } = await httpClient(t, svc, { authorization: 'User bob' });

await daemon.call('fs.mkdir', { path: '/shared', parents: true, mode: '1777' });
for (const [who, path, body] of [
  [alice, '/fs//shared/a.md', 'a v1\n'],
  [bob, '/fs//shared/bob.md', 'bob v1\n'],
] as const) {
  const r = await who.put(path, body);
  if (r.status !== 200) throw new Error(`setup: PUT ${path}: ${r.status} ${r.text}`);
}
const base = (await root.post('/vcs/commit', { message: 'base' })).json.hash as string;

void t.test("alice's commit does not record root's private file (REST and MCP)", async (t) => {
  t.equal((await root.put('/fs//shared/root-secret.md', 'secret\n')).status, 200);
  await daemon.call('fs.chmod', { path: '/shared/root-secret.md', mode: '0600' });
  t.equal((await alice.put('/fs//shared/a.md', 'a v2\n')).status, 200);
  const st = await alice.get('/vcs/status?format=json');
  t.same(st.json.added, [], "alice's status does not show root's file");
  const c = await alice.post('/vcs/commit', { message: 'alice v2' });
  t.equal(c.status, 200);
  t.equal(c.json.changes, 1);
  const show = await root.get(`/vcs/show?rev=${c.json.hash as string}`);
  t.same(show.json.changes, [{ path: '/shared/a.md', op: 'modified', by: 'alice' }]);
  t.equal(
    (await root.get(`/fs//shared/root-secret.md?at=${c.json.hash as string}`)).status,
    404,
    "root's file is not in alice's commit",
  );
  t.same(
    (await root.get('/vcs/status?format=json')).json.added,
    ['/shared/root-secret.md'],
    'it stays pending for root',
  );

  t.equal((await alice.put('/fs//shared/c.md', 'c\n')).status, 200);
  const m = data(await call(aliceMcp, 'commit', { message: 'alice c', paths: ['/shared/c.md'] }));
  t.equal(m.changes, 1);
  t.same(
    (await root.get(`/vcs/show?rev=${m.hash as string}`)).json.changes.map((x: { path: string }) => x.path),
    ['/shared/c.md'],
  );
});

void t.test("bob does not read alice's commit messages (REST and MCP)", async (t) => {
  t.equal((await alice.put('/fs/diary.md', 'dear diary\n')).status, 200);
  const priv = (await alice.post('/vcs/commit', { message: 'alice private message' })).json.hash as string;
  const log = (await bob.get('/vcs/log')).json.commits.map((c: { message: string }) => c.message);
  t.notOk(log.includes('alice private message'), "not in bob's log over REST");
  t.ok(log.includes('base'));
  const mcp = await call(bobMcp, 'get_history', {});
  t.notMatch(text(mcp), /alice private message/, 'nor over MCP');
  t.equal((await bob.get(`/vcs/show?rev=${priv}`)).status, 404, 'nor by naming it');
  t.match(text(await call(aliceMcp, 'get_history', {})), /alice private message/, 'alice sees her own');
});

void t.test('read at a commit: REST ?at=, MCP read_file {at}; only what the caller may read now', async (t) => {
  const r = await alice.get(`/fs//shared/a.md?at=${base}`);
  t.equal(r.status, 200);
  t.equal(r.text, 'a v1\n');
  t.equal(text(await call(aliceMcp, 'read_file', { path: '/shared/a.md', at: base })), 'a v1\n');
  const dir = await alice.get(`/fs//shared?at=${base}`);
  t.same(
    dir.json.entries.map((e: { name: string }) => e.name),
    ['a.md', 'bob.md'],
  );
  // bob makes his file private now: its past is closed to alice too
  await daemon.call('fs.chmod', { path: '/shared/bob.md', mode: '0600' });
  t.equal((await alice.get(`/fs//shared/bob.md?at=${base}`)).status, 403);
  t.equal(errorCode(await call(aliceMcp, 'read_file', { path: '/shared/bob.md', at: base })), 'EACCES');
  await daemon.call('fs.chmod', { path: '/shared/bob.md', mode: '0644' });
});

void t.test("a non-owner's revert does not resurrect another user's file (REST and MCP)", async (t) => {
  t.equal((await bob.del('/fs//shared/bob.md')).status, 200);
  await bob.post('/vcs/commit', { message: 'bob removes his file' });
  const r = await alice.post('/vcs/revert', { hash: base, paths: ['/shared/bob.md'] });
  t.equal(r.status, 403);
  t.match(r.text, /\/shared\/bob\.md/, 'the error names the path');
  t.equal((await root.get('/fs//shared/bob.md')).status, 404, 'nothing came back');
  t.equal(errorCode(await call(aliceMcp, 'revert', { hash: base, paths: ['/shared/bob.md'] })), 'EACCES');
  t.equal((await root.get('/fs//shared/bob.md')).status, 404);
  // alice restores her own file from the same commit
  const own = await alice.post('/vcs/revert', { hash: base, paths: ['/shared/a.md'] });
  t.equal(own.status, 200);
  t.equal((await alice.get('/fs//shared/a.md')).text, 'a v1\n');
  t.equal((await root.get('/fs//shared/bob.md')).status, 404, "bob's file still gone");
  // bob brings back his own over MCP
  data(await call(bobMcp, 'revert', { hash: base, paths: ['/shared/bob.md'] }));
  t.equal((await bob.get('/fs//shared/bob.md')).text, 'bob v1\n');
});

void t.test('.mdvfsignore over REST: ignored files stay out of status and commits, in the tree', async (t) => {
  t.equal((await alice.put('/fs//shared/.mdvfsignore', '*.draft\n')).status, 200);
  t.equal((await alice.put('/fs//shared/x.draft', 'draft\n')).status, 200);
  t.equal((await alice.put('/fs//shared/.x.md.swp', 'swap\n')).status, 200);
  t.equal((await alice.put('/fs//shared/x.md', 'x\n')).status, 200);
  const st = await alice.get('/vcs/status?format=json');
  t.same(st.json.added, ['/shared/.mdvfsignore', '/shared/x.md']);
  const c = await alice.post('/vcs/commit', { message: 'x', paths: ['/shared'] });
  t.equal(c.json.changes, 2);
  t.equal((await alice.get(`/fs//shared/x.draft?at=${c.json.hash as string}`)).status, 404, 'not committed');
  t.equal((await alice.get('/fs//shared/x.draft')).text, 'draft\n', 'still in the live tree');
  t.equal((await alice.get('/vcs/diff?path=/shared')).text, '', 'nor in a diff');
});

void t.test("MCP undo: alice undoes her agent's changes, and only them", async (t) => {
  const { client: botMcp } = await httpClient(t, svc, { authorization: `Bearer ${botToken}`, onBehalfOf: 'alice' });
  t.equal((await alice.put('/fs//shared/a.md', 'alice before the agent\n')).status, 200);
  await daemon.call('fs.chmod', { path: '/shared/a.md', mode: '0666' }); // the agent may write it
  const before = (await alice.post('/vcs/commit', { message: 'before the agent', paths: ['/shared'] })).json
    .hash as string;
  data(await call(botMcp, 'write_file', { path: '/shared/a.md', content: 'agent broke it\n' }));
  data(await call(botMcp, 'write_file', { path: '/shared/agent-new.md', content: 'agent\n' }));
  t.equal((await alice.put('/fs//shared/mine.md', 'alice, meanwhile\n')).status, 200);
  const done = await call(aliceMcp, 'undo', { actor: 'bot' });
  const u = data(done);
  t.same(u.paths, ['/shared/a.md', '/shared/agent-new.md'], 'exactly what the agent changed');
  t.equal(u.reverted_to, before.slice(0, 12));
  t.match(text(done), /^Undid bot's changes to 2 paths since \w{12}; new commit \w{12}/);
  t.equal(u.commit.author, 'alice');
  t.equal((await alice.get('/fs//shared/a.md')).text, 'alice before the agent\n');
  t.equal((await alice.get('/fs//shared/agent-new.md')).status, 404);
  t.equal((await alice.get('/fs//shared/mine.md')).text, 'alice, meanwhile\n', "alice's own change stays");
  t.equal(errorCode(await call(aliceMcp, 'undo', { actor: 'bot' })), 'ENOENT', 'nothing left to undo');
  // a change bob may not read is neither undone by him nor named to him: alice and bot share a
  // directory closed to others
  await daemon.call('admin.groupAdd', { name: 'alicebot' });
  await daemon.call('admin.groupMemberAdd', { user: 'alice', group: 'alicebot' });
  await daemon.call('admin.groupMemberAdd', { user: 'bot', group: 'alicebot' });
  await daemon.call('fs.mkdir', { path: '/shared/team', mode: '0770' });
  await daemon.call('fs.chown', { path: '/shared/team', owner: 'alice', group: 'alicebot' });
  data(await call(botMcp, 'write_file', { path: '/shared/team/bot-private.md', content: 'private\n' }));
  const b = await call(bobMcp, 'undo', { actor: 'bot' });
  t.equal(errorCode(b), 'ENOENT', 'for bob there is no change by bot');
  t.notMatch(text(b), /bot-private/);
  t.equal((await alice.get('/fs//shared/team/bot-private.md')).text, 'private\n');
  t.equal((await alice.post('/vcs/commit', { message: 'team', paths: ['/shared/team'] })).status, 200);
});

void t.test('no empty commits: a revert or undo that changes nothing records nothing (REST, MCP)', async (t) => {
  t.equal((await alice.put('/fs//shared/same.md', 'same\n')).status, 200);
  await daemon.call('fs.chmod', { path: '/shared/same.md', mode: '0666' }); // the agent writes it below
  await alice.post('/vcs/commit', { message: 'same', paths: ['/shared/same.md'] });
  const head = (await root.get('/vcs/log?limit=1')).json.commits[0].hash as string;
  const r = await alice.post('/vcs/revert', { hash: 'HEAD', paths: ['/shared/same.md'] });
  t.equal(r.status, 400);
  t.equal(r.json.code, 'EINVAL');
  t.match(
    r.json.error,
    /^EINVAL: nothing to revert: the paths given already are as commit \w{12} has them \(no commit recorded\)$/,
  );
  const m = await call(aliceMcp, 'revert', { hash: 'HEAD', paths: ['/shared/same.md'] });
  t.equal(errorCode(m), 'EINVAL');
  t.match(text(m), /nothing to revert/);
  t.equal((await root.get('/vcs/log?limit=1')).json.commits[0].hash, head, 'no commit recorded');
  // an undo whose paths are already back as they were: the agent changed a file, then changed it back
  const { client: botMcp } = await httpClient(t, svc, { authorization: `Bearer ${botToken}`, onBehalfOf: 'alice' });
  data(await call(botMcp, 'write_file', { path: '/shared/same.md', content: 'other\n' }));
  t.equal((await alice.post('/vcs/commit', { message: 'agent work', paths: ['/shared/same.md'] })).status, 200);
  data(await call(botMcp, 'write_file', { path: '/shared/same.md', content: 'same\n' }));
  t.equal((await alice.post('/vcs/commit', { message: 'agent undid it', paths: ['/shared/same.md'] })).status, 200);
  const head2 = (await root.get('/vcs/log?limit=1')).json.commits[0].hash as string;
  const u = await alice.post('/vcs/undo', { actor: 'bot', since: head });
  t.equal(u.status, 400, u.text);
  t.match(u.json.error, /^EINVAL: nothing to undo/);
  t.equal((await root.get('/vcs/log?limit=1')).json.commits[0].hash, head2, 'no commit recorded');
});
