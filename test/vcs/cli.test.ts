/** The CLI's history commands for many users: commit [paths...], log <path>, cat --at, restore --from (and nothing to restore). */
import t from 'tap';
import { cliEnv } from '../helpers/cli.js';

void t.test('commit paths, log of one file, cat --at and restore --from', async (t) => {
  const cli = await cliEnv(t);
  const alice = (args: string[], input?: string) =>
    cli.run(args, input === undefined ? { user: 'alice' } : { user: 'alice', input });
  t.equal((await cli.run(['useradd', 'alice'])).code, 0);
  t.equal((await alice(['write', 'a.md', 'a v1'])).code, 0);
  t.equal((await alice(['write', 'b.md', 'b v1'])).code, 0);
  const c1 = await alice(['commit', '-m', 'only a', 'a.md']);
  t.equal(c1.code, 0, c1.stderr);
  t.match(c1.stdout, /1 change\n/);
  const st = await alice(['status', '--json']);
  t.same(
    (JSON.parse(st.stdout) as { added: string[] }).added.filter((p) => p.startsWith('/home/')),
    ['/home/alice/b.md'],
    'b.md is still pending',
  );
  t.equal((await alice(['commit', '-m', 'b too'])).code, 0);
  t.equal((await alice(['write', 'a.md', 'a v2'])).code, 0);
  t.equal((await alice(['commit', '-m', 'a v2'])).code, 0);

  const log = await alice(['log', '--oneline', 'a.md']);
  t.match(log.stdout, /^\w{12} a v2\n\w{12} only a\n$/, 'the history of one file');
  t.equal((await alice(['cat', '--at', 'HEAD~2', 'a.md'])).stdout, 'a v1\n');
  const r = await alice(['restore', 'a.md', '--from', 'HEAD~2']);
  t.equal(r.code, 0, r.stderr);
  t.equal((await alice(['cat', 'a.md'])).stdout, 'a v1\n');
  t.equal((await alice(['cat', 'b.md'])).stdout, 'b v1\n');

  // no empty commits: restoring what already is as the commit has it fails and records nothing
  const head = (await alice(['log', '--oneline', '-n', '1'])).stdout;
  const again = await alice(['restore', 'a.md', '--from', 'HEAD~3']);
  t.equal(again.code, 1);
  t.match(
    again.stderr,
    /^mdvfs: nothing to revert: the paths given already are as commit \w{12} has them \(no commit recorded\)/,
  );
  t.equal((await alice(['log', '--oneline', '-n', '1'])).stdout, head, 'no commit was recorded');
});
