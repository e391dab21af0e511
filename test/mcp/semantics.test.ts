// Issue 13 over MCP (the SDK client against /mcp of the real `mdvfs serve`): move_file into a
// directory, revert HEAD~n, and isError texts that are one clean sentence.
import t from 'tap';
import { call, data, errorCode, httpClient, text, withCast } from '../helpers/mcp.js';

const cast = await withCast(t);
const { client } = await httpClient(t, cast.svc, { authorization: 'User alice' });

t.test('move_file onto an existing directory moves the source inside it', async (t) => {
  data(await call(client, 'write_file', { path: 'm/a.md', content: 'A' }));
  data(await call(client, 'write_file', { path: 'm/t/x.md', content: 'X' }));
  data(await call(client, 'create_directory', { path: 'm/dir' }));
  const r = data(await call(client, 'move_file', { source: 'm/a.md', destination: 'm/dir' }));
  t.equal(r.destination, '/home/alice/m/dir/a.md');
  t.equal(text(await call(client, 'read_file', { path: 'm/dir/a.md' })), 'A');
  data(await call(client, 'move_file', { source: 'm/t', destination: 'm/dir' }));
  t.equal(text(await call(client, 'read_file', { path: 'm/dir/t/x.md' })), 'X', 'a directory too');

  data(await call(client, 'write_file', { path: 'm/b.md', content: 'B' }));
  data(await call(client, 'move_file', { source: 'm/b.md', destination: 'm/dir/a.md' }));
  t.equal(text(await call(client, 'read_file', { path: 'm/dir/a.md' })), 'B', 'a file is still overwritten');

  const self = await call(client, 'move_file', { source: 'm/dir', destination: 'm/dir' });
  t.equal(errorCode(self), 'EINVAL', 'into itself');
  t.equal(text(self), "EINVAL: cannot move a directory into itself, rename '/home/alice/m/dir/dir'");
  data(await call(client, 'write_file', { path: 'm/o/t/keep.md', content: 'K' }));
  const full = await call(client, 'move_file', { source: 'm/o/t', destination: 'm/dir' });
  t.equal(errorCode(full), 'ENOTEMPTY');
  t.equal(text(await call(client, 'read_file', { path: 'm/o/t/keep.md' })), 'K', 'nothing lost');
});

t.test('revert and errors name commits as HEAD~n', async (t) => {
  const none = await call(client, 'revert', { hash: 'HEAD' });
  t.equal(errorCode(none), 'ENOENT');
  t.equal(text(none), 'ENOENT: no commit HEAD: nothing has been committed yet', 'one sentence, no trailing op');
  data(await call(client, 'write_file', { path: 'h.md', content: 'one' }));
  const c1 = data(await call(client, 'commit', { message: 'one' })).hash as string;
  data(await call(client, 'write_file', { path: 'h.md', content: 'two' }));
  data(await call(client, 'commit', { message: 'two' }));
  const far = await call(client, 'revert', { hash: 'HEAD~99' });
  t.equal(errorCode(far), 'ENOENT');
  t.equal(text(far), 'ENOENT: no commit HEAD~99: HEAD has only 1 commit before it');
  const bad = await call(client, 'revert', { hash: 'zzzz' });
  t.equal(errorCode(bad), 'EINVAL');
  t.notMatch(text(bad), /, [a-z]+$/, `no stray word: ${text(bad)}`);
  const r = data(await call(client, 'revert', { hash: 'HEAD~1' }));
  t.equal(r.reverted_to, c1);
  t.equal(text(await call(client, 'read_file', { path: 'h.md' })), 'one');
});

t.test('get_file_info describes a symlink itself unless follow is set', async (t) => {
  data(await call(client, 'write_file', { path: 'l/target.md', content: 'hello' }));
  // A symlink made over REST (MCP has no symlink tool), as alice.
  const res = await fetch(`${cast.svc.base}/fs/l/link`, {
    method: 'PUT',
    headers: { authorization: 'User alice', 'x-service-type': 'symlink' },
    body: 'target.md',
  });
  t.ok(res.ok, await res.text());
  const link = data(await call(client, 'get_file_info', { path: 'l/link' }));
  t.equal(link.kind, 'symlink');
  t.equal(link.target, 'target.md');
  t.match(text(await call(client, 'get_file_info', { path: 'l/link' })), /symlink.* -> target\.md$/);
  const file = data(await call(client, 'get_file_info', { path: 'l/link', follow: true }));
  t.equal(file.kind, 'file');
  t.equal(file.size, 5);
  t.type(file.etag, 'string');
  t.equal(data(await call(client, 'get_file_info', { path: 'l' })).kind, 'directory');
  const missing = await call(client, 'get_file_info', { path: 'l/nope' });
  t.equal(errorCode(missing), 'ENOENT');
});
