// Issue 13 over REST: lstat by default, cp/mv into a directory, agent tokens on creation,
// clean error sentences, and HEAD~n wherever a commit is named. Through the real `mdvfs serve`.
import t, { type Test } from 'tap';
import { request, withCast } from '../helpers/http.js';

const { svc, root, alice } = await withCast(t);

/** An error body: one sentence that ends with no stray operation name (`, http`, `, authenticate`). */
function cleanError(t: Test, body: { error?: unknown; code?: unknown }, code: string): string {
  t.equal(body.code, code, String(body.error));
  const msg = String(body.error);
  t.ok(msg.startsWith(`${code}: `), `starts with its code: ${msg}`);
  t.notMatch(msg, /, [a-z]+$/, `no stray word at the end: ${msg}`);
  return msg;
}

t.test('stat describes a symlink itself unless follow=true', async (t) => {
  t.equal((await alice.put('/fs/st/real.md', 'hello')).status, 200);
  t.equal((await alice.put('/fs/st/link.md', 'real.md', { headers: { 'x-service-type': 'symlink' } })).status, 200);
  const l = await alice.get('/fs/st/link.md?stat=true');
  t.equal(l.status, 200, l.text);
  t.equal(l.json.kind, 'symlink', 'lstat by default');
  t.equal(l.json.target, 'real.md');
  const f = await alice.get('/fs/st/link.md?stat=true&follow=true');
  t.equal(f.json.kind, 'file', 'follow=true describes the target');
  t.equal(f.json.size, 5);
  t.equal(
    (await alice.get('/fs/st/link.md?stat=true&nofollow=true')).json.kind,
    'symlink',
    'nofollow=true still works',
  );
  t.equal((await alice.get('/fs/st/real.md?stat=true')).json.kind, 'file', 'a plain file is unchanged');
  const both = await alice.get('/fs/st/link.md?stat=true&follow=true&nofollow=true');
  t.equal(both.status, 400);
  cleanError(t, both.json, 'EINVAL');
});

t.test('copy and move onto an existing directory put the source inside it', async (t) => {
  await alice.put('/fs/cm/a.md', 'A');
  await alice.put('/fs/cm/b.md', 'B');
  await alice.put('/fs/cm/tree/x.md', 'X');
  await alice.put('/fs/cm/dir', undefined, { headers: { 'x-service-type': 'directory' } });

  const cp = await alice.post('/fs/cm/a.md?op=copy&dst=cm/dir');
  t.equal(cp.status, 200, cp.text);
  t.equal(cp.json.dst, '/home/alice/cm/dir/a.md', 'the answer names where the copy went');
  t.equal((await alice.get('/fs/cm/dir/a.md')).text, 'A');

  const mv = await alice.post('/fs/cm/b.md?op=move&dst=cm/dir');
  t.equal(mv.status, 200, mv.text);
  t.equal(mv.json.dst, '/home/alice/cm/dir/b.md');
  t.equal((await alice.get('/fs/cm/dir/b.md')).text, 'B');
  t.equal((await alice.get('/fs/cm/b.md')).status, 404, 'moved, not copied');

  const mvDir = await alice.post('/fs/cm/tree?op=move&dst=cm/dir');
  t.equal(mvDir.status, 200, mvDir.text);
  t.equal((await alice.get('/fs/cm/dir/tree/x.md')).text, 'X', 'a directory moves inside too');

  const cpDir = await alice.post('/fs/cm/dir/tree?op=copy&dst=cm');
  t.equal(cpDir.status, 200, cpDir.text);
  t.equal((await alice.get('/fs/cm/tree/x.md')).text, 'X', 'and is copied inside');

  // Overwriting a file stays as it was.
  await alice.put('/fs/cm/c.md', 'C');
  const over = await alice.post('/fs/cm/c.md?op=move&dst=cm/dir/a.md');
  t.equal(over.status, 200, over.text);
  t.equal((await alice.get('/fs/cm/dir/a.md')).text, 'C');

  // Edge cases as mv has them.
  const self = await alice.post('/fs/cm/dir?op=move&dst=cm/dir');
  t.equal(self.status, 400, 'a directory into itself');
  t.match(cleanError(t, self.json, 'EINVAL'), /into itself/);
  await alice.put('/fs/cm/other/tree/keep.md', 'K');
  const full = await alice.post('/fs/cm/other/tree?op=move&dst=cm/dir');
  t.equal(full.status, 409, '<dir>/<name> is a non-empty directory');
  t.equal(full.json.code, 'ENOTEMPTY');
  t.equal((await alice.get('/fs/cm/other/tree/keep.md')).text, 'K', 'nothing was lost');
  t.equal((await alice.get('/fs/cm/dir/tree/x.md')).text, 'X');

  // into_dir=false: dst is the exact path (plain rename(2)).
  const exact = await alice.post('/fs/cm/dir/a.md?op=move&dst=cm/other&into_dir=false');
  t.equal(exact.status, 400);
  t.equal(exact.json.code, 'EISDIR');
});

t.test('creating an agent answers its token once; a user gets none', async (t) => {
  const made = await root.post('/admin/users', { name: 'agent7', is_agent: true });
  t.equal(made.status, 200, made.text);
  t.equal(made.json.is_agent, true);
  t.type(made.json.token, 'string');
  t.match(made.json.token, /^mdvfs_/);
  const me = await request(svc, 'GET', '/auth/whoami', { auth: `Bearer ${made.json.token}` });
  t.equal(me.status, 200, me.text);
  t.equal(me.json.user, 'agent7', 'the returned token authenticates as the agent');
  t.equal(me.json.is_agent, true);
  t.notOk(JSON.stringify((await root.get('/admin/users')).json).includes(made.json.token), 'never listed');

  const user = await root.post('/admin/users', { name: 'carol', is_agent: false });
  t.equal(user.status, 200, user.text);
  t.notOk('token' in user.json, 'a user gets no token');

  const again = await root.post('/admin/users/agent7/tokens');
  t.equal(again.status, 200);
  t.not(again.json.token, made.json.token, 'the token endpoint still regenerates');
  t.equal(
    (await request(svc, 'GET', '/auth/whoami', { auth: `Bearer ${made.json.token}` })).status,
    401,
    'the first token stops working',
  );
  t.equal((await request(svc, 'GET', '/auth/whoami', { auth: `Bearer ${again.json.token}` })).json.user, 'agent7');
});

t.test('errors are one clean sentence', async (t) => {
  const bad = await request(svc, 'GET', '/auth/whoami', { auth: 'Bearer mdvfs_not-a-real-token' });
  t.equal(bad.status, 401);
  t.equal(cleanError(t, bad.json, 'EAUTH'), 'EAUTH: invalid token');
  const json = await alice.post('/vcs/commit', '{"message": ', { headers: { 'content-type': 'application/json' } });
  t.equal(json.status, 400);
  t.equal(cleanError(t, json.json, 'EINVAL'), 'EINVAL: malformed JSON body');
  const link = await alice.put('/fs/nolink', '', { headers: { 'x-service-type': 'symlink' } });
  t.equal(link.status, 400);
  t.match(
    cleanError(t, link.json, 'EINVAL'),
    /^EINVAL: a symlink needs its target as the request body \(path '[^']*nolink'\)$/,
    'names the path',
  );
  const missing = await alice.get('/fs/no/such.md');
  t.equal(
    missing.json.error,
    "ENOENT: no such file or directory, open '/home/alice/no/such.md'",
    'path errors name the path',
  );
  const denied = await alice.post('/admin/users', { name: 'x', is_agent: false });
  t.equal(denied.status, 403);
  cleanError(t, denied.json, 'EACCES');
});

t.test('HEAD, HEAD~n and <hash>~n name commits', async (t) => {
  const none = await alice.get('/vcs/diff?from=HEAD');
  t.equal(none.status, 404, 'HEAD before any commit');
  t.equal(cleanError(t, none.json, 'ENOENT'), 'ENOENT: no commit HEAD: nothing has been committed yet');
  await alice.put('/fs/h/v.md', 'one\n');
  const c1 = (await alice.post('/vcs/commit', { message: 'one' })).json.hash as string;
  await alice.put('/fs/h/v.md', 'two\n');
  const c2 = (await alice.post('/vcs/commit', { message: 'two' })).json.hash as string;
  await alice.put('/fs/h/v.md', 'three\n');

  const head = await alice.get('/vcs/diff?from=HEAD&format=json');
  t.equal(head.status, 200, head.text);
  t.match(head.json.diff, /-two\n\+three/, 'HEAD against the working tree');
  const back = await alice.get('/vcs/diff?from=HEAD~1&to=HEAD&format=json');
  t.equal(back.status, 200, back.text);
  t.match(back.json.diff, /-one\n\+two/, 'HEAD~1 to HEAD');
  t.same(
    (await alice.get(`/vcs/diff?from=${c2}~1&to=${c2}&format=json`)).json,
    back.json,
    '<hash>~1 is the same commit',
  );
  t.same((await alice.get('/vcs/diff?from=HEAD%5E&to=HEAD&format=json')).json, back.json, 'HEAD^ too');
  t.equal((await alice.get(`/vcs/diff?from=${c1}&to=HEAD~1&format=json`)).json.diff, '', 'HEAD~1 is the first commit');

  const far = await alice.get('/vcs/diff?from=HEAD~99');
  t.equal(far.status, 404);
  t.equal(cleanError(t, far.json, 'ENOENT'), 'ENOENT: no commit HEAD~99: HEAD has only 1 commit before it');
  const odd = await alice.get('/vcs/diff?from=HEAD%5E2');
  t.equal(odd.status, 400);
  cleanError(t, odd.json, 'EINVAL');

  const rv = await alice.post('/vcs/revert', { hash: 'HEAD~1' });
  t.equal(rv.status, 200, rv.text);
  t.equal(rv.json.reverted_to, c1);
  t.equal((await alice.get('/fs/h/v.md')).text, 'one\n');
});

t.test('PUT a directory with If-None-Match: * creates only', async (t) => {
  const first = await alice.put('/fs/once', '', { headers: { 'x-service-type': 'directory', 'if-none-match': '*' } });
  t.equal(first.status, 200);
  t.equal(first.json.created, true);
  const again = await alice.put('/fs/once', '', { headers: { 'x-service-type': 'directory', 'if-none-match': '*' } });
  t.equal(again.status, 412);
  cleanError(t, again.json, 'EPRECOND');
  const plain = await alice.put('/fs/once', '', { headers: { 'x-service-type': 'directory' } });
  t.equal(plain.status, 200, 'without the header, mkdir -p still succeeds');
  t.equal(plain.json.created, false);
});
