/**
 * The attacks of issue 15 through the real transports (`mdvfs serve`: REST and MCP over HTTP):
 * alice's commit recording root's private file, a non-owner's revert bringing back another user's
 * file, bob reading alice's commit messages; and reading a file as it was at a commit.
 */
import t from 'tap';
import { client } from '../helpers/http.js';
import { call, data, errorCode, httpClient, text, withCast } from '../helpers/mcp.js';

const cast = await withCast(t);
const { svc, daemon } = cast;
const root = client(svc);
const alice = client(svc, { auth: 'User alice' });
const bob = client(svc, { auth: 'User bob' });
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
