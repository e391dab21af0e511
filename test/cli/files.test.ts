/** `mdvfs` file commands run as real subprocesses: output, exit codes and one-line errors. */
import { randomBytes } from 'node:crypto';
import t from 'tap';
import { cliEnv } from '../helpers/cli.js';

const ERR_LINE = /^mdvfs: .+ \([A-Z][A-Z0-9_]+\)\n$/;

void t.test('file commands', async (t) => {
  const cli = await cliEnv(t);
  const root = (args: string[], input?: string | Buffer) => cli.run(args, input === undefined ? {} : { input });
  const alice = (args: string[], input?: string | Buffer) =>
    cli.run(args, input === undefined ? { user: 'alice' } : { user: 'alice', input });

  t.equal((await root(['useradd', 'alice'])).code, 0);
  t.equal((await root(['useradd', 'bob'])).code, 0);

  await t.test('--help on every command exits 0 and shows its usage', async (t) => {
    const cmds = [
      'ls',
      'cat',
      'write',
      'mkdir',
      'rm',
      'mv',
      'cp',
      'stat',
      'tree',
      'find',
      'grep',
      'chmod',
      'chown',
      'ln',
      'commit',
      'log',
      'status',
      'diff',
      'revert',
      'useradd',
      'userdel',
      'groupadd',
      'usermod',
      'token',
      'whoami',
      'workspace',
      'import',
      'export',
      'shell',
      'fsck',
      'gc',
      'migrate',
      'daemon',
      'serve',
      'http',
      'mount',
      'umount',
    ];
    for (let i = 0; i < cmds.length; i += 6) {
      const batch = cmds.slice(i, i + 6);
      const results = await Promise.all(batch.map((c) => root([c, '--help'])));
      results.forEach((r, j) => {
        t.equal(r.code, 0, `${batch[j]} --help exit code`);
        t.match(r.stdout, new RegExp(`^Usage: mdvfs ${batch[j]} `), `${batch[j]} --help usage line`);
      });
    }
    for (const sub of ['create', 'list', 'token']) {
      const r = await root(['workspace', sub, '--help']);
      t.equal(r.code, 0);
      t.match(r.stdout, `Usage: mdvfs workspace ${sub}`);
    }
    const top = await root(['--help']);
    t.equal(top.code, 0);
    for (const c of ['ls', 'grep', 'commit', 'useradd', 'workspace', 'import', 'shell'])
      t.match(top.stdout, new RegExp(`\\n  ${c}\\b`));
  });

  await t.test('usage errors exit 2 with one line on stderr', async (t) => {
    for (const args of [
      ['ls', '--bogus'],
      ['cat'],
      ['nosuchcommand'],
      ['ln', 'a', 'b'],
      ['chmod', 'u+q', 'a.md'],
      ['find', '--type', 'x'],
      ['commit'],
      ['log', '-n', 'zero'],
      ['write'],
    ]) {
      const r = await alice(args);
      t.equal(r.code, 2, `${args.join(' ')} exits 2`);
      t.match(r.stderr, ERR_LINE, `${args.join(' ')} stderr is one line`);
      t.match(r.stderr, /\(EUSAGE\)/);
      t.equal(r.stdout, '');
    }
  });

  await t.test('write and cat: arguments get a newline, stdin is byte-exact', async (t) => {
    let r = await alice(['write', 'notes/a.md', 'hello', 'world']);
    t.equal(r.code, 0);
    t.equal(r.stdout, '');
    r = await alice(['cat', 'notes/a.md']);
    t.equal(r.stdout, 'hello world\n');
    const bytes = randomBytes(70000);
    t.equal((await alice(['write', 'notes/bin.dat'], bytes)).code, 0);
    r = await alice(['cat', '/home/alice/notes/bin.dat']);
    t.ok(r.out.equals(bytes), 'binary content round-trips through stdin and stdout');
    await alice(['write', '-n', 'notes/b.md', 'no newline']);
    await alice(['write', '--append', 'notes/b.md', '+more']);
    t.equal((await alice(['cat', 'notes/b.md'])).stdout, 'no newline+more\n');
    r = await alice(['cat', 'notes/a.md', 'notes/b.md']);
    t.equal(r.stdout, 'hello world\nno newline+more\n', 'cat concatenates');
  });

  await t.test('cat of a missing file: exit 1, the code, and the other files still print', async (t) => {
    const r = await alice(['cat', 'nope.md', 'notes/a.md']);
    t.equal(r.code, 1);
    t.equal(r.stdout, 'hello world\n');
    t.match(r.stderr, ERR_LINE);
    t.match(r.stderr, /nope\.md.*\(ENOENT\)/);
  });

  await t.test("permissions come from the daemon: bob cannot read alice's home", async (t) => {
    const r = await cli.run(['cat', '/home/alice/notes/a.md'], { user: 'bob' });
    t.equal(r.code, 1);
    t.match(r.stderr, /\(EACCES\)\n$/);
    t.equal(r.stdout, '');
  });

  await t.test('mkdir and ls', async (t) => {
    t.equal((await alice(['mkdir', 'notes/sub'])).code, 0);
    let r = await alice(['mkdir', 'notes/sub']);
    t.equal(r.code, 1);
    t.match(r.stderr, /\(EEXIST\)\n$/);
    r = await alice(['mkdir', 'deep/er/est']);
    t.equal(r.code, 1);
    t.match(r.stderr, /\(ENOENT\)\n$/);
    t.equal((await alice(['mkdir', '-p', 'deep/er/est'])).code, 0);
    t.equal((await alice(['mkdir', '-p', 'deep/er/est'])).code, 0, 'mkdir -p of an existing directory is fine');
    await alice(['write', 'notes/.hidden', 'x']);
    r = await alice(['ls', 'notes']);
    t.equal(r.stdout, 'a.md\nb.md\nbin.dat\nsub\n');
    r = await alice(['ls', '-a', 'notes']);
    t.equal(r.stdout, '.hidden\na.md\nb.md\nbin.dat\nsub\n');
    r = await alice(['ls', '-l', 'notes']);
    t.equal(r.code, 0);
    const lines = r.stdout.trimEnd().split('\n');
    t.equal(lines.length, 4);
    t.match(lines[0], /^-rw-r--r-- alice alice +12 \d{4}-\d\d-\d\d \d\d:\d\d a\.md$/);
    t.match(lines[3], /^drwxr-xr-x alice alice +\d+ .* sub$/);
    r = await alice(['ls']);
    t.equal(r.stdout, 'deep\nnotes\n', 'no path lists the home directory');
    r = await alice(['ls', 'notes/a.md']);
    t.equal(r.stdout, 'notes/a.md\n', 'ls of a file shows the file');
    r = await alice(['ls', '--json', 'notes']);
    t.same(
      JSON.parse(r.stdout).entries.map((e: { name: string }) => e.name),
      ['a.md', 'b.md', 'bin.dat', 'sub'],
    );
    r = await alice(['ls', 'missing']);
    t.equal(r.code, 1);
    t.match(r.stderr, /\(ENOENT\)\n$/);
  });

  await t.test('mv, cp, rm', async (t) => {
    t.equal((await alice(['mv', 'notes/b.md', 'notes/c.md'])).code, 0);
    t.equal((await alice(['cat', 'notes/c.md'])).stdout, 'no newline+more\n');
    t.equal((await alice(['cat', 'notes/b.md'])).code, 1);
    t.equal((await alice(['mv', 'notes/c.md', 'notes/sub'])).code, 0, 'mv into a directory');
    t.equal((await alice(['cat', 'notes/sub/c.md'])).stdout, 'no newline+more\n');
    t.equal((await alice(['cp', 'notes/a.md', 'notes/sub'])).code, 0);
    t.equal((await alice(['cat', 'notes/sub/a.md'])).stdout, 'hello world\n');
    let r = await alice(['cp', 'notes/sub', 'copy']);
    t.equal(r.code, 1);
    t.match(r.stderr, /omitting directory.*\(EISDIR\)\n$/);
    t.equal((await alice(['cp', '-r', 'notes/sub', 'copy'])).code, 0);
    t.equal((await alice(['ls', 'copy'])).stdout, 'a.md\nc.md\n');
    r = await alice(['mv', 'notes/a.md', 'notes/sub/a.md', 'notes/a.md']);
    t.equal(r.code, 1, 'several sources need a directory destination');
    t.match(r.stderr, /\(ENOTDIR\)\n$/);
    r = await alice(['rm', 'copy']);
    t.equal(r.code, 1);
    t.match(r.stderr, /is a directory.*\(EISDIR\)\n$/);
    t.equal((await alice(['rm', '-r', 'copy'])).code, 0);
    t.equal((await alice(['ls', 'copy'])).code, 1);
    t.equal((await alice(['rm', 'notes/sub/a.md'])).code, 0);
    r = await alice(['rm', 'notes/sub/a.md']);
    t.equal(r.code, 1);
    t.match(r.stderr, /\(ENOENT\)\n$/);
    t.equal((await alice(['rm', '-f', 'notes/sub/a.md'])).code, 0, 'rm -f ignores missing files');
    r = await root(['rm', '-r', '/']);
    t.equal(r.code, 1, 'rm -r / is refused');
    t.equal((await root(['ls', '/home'])).stdout, 'alice\nbob\n');
  });

  await t.test('stat, chmod, chown, ln -s', async (t) => {
    let r = await alice(['stat', 'notes/a.md']);
    t.equal(r.code, 0);
    t.match(r.stdout, /File: \/home\/alice\/notes\/a\.md\n/);
    t.match(r.stdout, /Kind: file +Size: 12/);
    t.match(r.stdout, /Access: \(0644\/-rw-r--r--\) +Uid: \(\d+\/alice\)/);
    const mode = async (p: string) =>
      (JSON.parse((await alice(['stat', '--json', p])).stdout) as { mode: string }).mode;
    t.equal((await alice(['chmod', '600', 'notes/a.md'])).code, 0);
    t.equal(await mode('notes/a.md'), '0600');
    t.equal((await alice(['chmod', 'g+r,o+rw', 'notes/a.md'])).code, 0);
    t.equal(await mode('notes/a.md'), '0646');
    t.equal((await alice(['chmod', 'a=rX', 'notes/sub'])).code, 0);
    t.equal(await mode('notes/sub'), '0555');
    await alice(['chmod', '755', 'notes/sub']);
    r = await cli.run(['chmod', '777', '/home/alice/notes/a.md'], { user: 'bob' });
    t.equal(r.code, 1, "bob cannot chmod alice's file");
    r = await alice(['chown', 'bob', 'notes/a.md']);
    t.equal(r.code, 1, 'only root may give files away');
    t.match(r.stderr, /\((EPERM|EACCES)\)\n$/);
    t.equal((await root(['chown', 'bob:bob', '/home/alice/notes/a.md'])).code, 0);
    const st = JSON.parse((await root(['stat', '--json', '/home/alice/notes/a.md'])).stdout) as {
      uid: number;
      gid: number;
    };
    const bob = JSON.parse((await cli.run(['whoami', '--json'], { user: 'bob' })).stdout) as {
      uid: number;
      gid: number;
    };
    t.same([st.uid, st.gid], [bob.uid, bob.gid]);
    await root(['chown', 'alice:alice', '/home/alice/notes/a.md']);
    t.equal((await alice(['ln', '-s', 'a.md', 'notes/link.md'])).code, 0);
    t.equal((await alice(['cat', 'notes/link.md'])).stdout, 'hello world\n', 'cat follows the link');
    r = await alice(['stat', 'notes/link.md']);
    t.match(r.stdout, /File: \/home\/alice\/notes\/link\.md -> a\.md/);
    t.match(r.stdout, /Kind: symlink/);
    r = await alice(['ls', '-l', 'notes']);
    t.match(r.stdout, /\nlrwxrwxrwx alice alice .* link\.md -> a\.md\n/);
  });

  await t.test('tree, find, grep', async (t) => {
    await alice(['write', 'notes/sub/deep.md', 'Hello again', 'x']);
    let r = await alice(['tree', 'notes']);
    t.equal(r.code, 0);
    t.match(r.stdout, /^\/home\/alice\/notes\n/);
    t.match(r.stdout, /── sub\n/);
    t.match(r.stdout, /── deep\.md\n/);
    r = await alice(['find', 'notes', '--name', '*.md']);
    t.same(
      r.stdout.trimEnd().split('\n').sort(),
      [
        '/home/alice/notes/a.md',
        '/home/alice/notes/link.md',
        '/home/alice/notes/sub/c.md',
        '/home/alice/notes/sub/deep.md',
      ].sort(),
    );
    r = await alice(['find', 'notes', '--type', 'd']);
    t.same(
      r.stdout.trimEnd().split('\n'),
      ['/home/alice/notes/sub']
        .concat(r.stdout.includes('/home/alice/notes\n') ? ['/home/alice/notes'] : [])
        .sort()
        .filter((p) => r.stdout.includes(p)),
    );
    t.notMatch(r.stdout, /\.md/);
    r = await alice(['grep', 'hello', 'notes/a.md']);
    t.equal(r.stdout, 'hello world\n', 'one file: lines only');
    r = await alice(['grep', '-n', 'hello', 'notes/a.md']);
    t.equal(r.stdout, '1:hello world\n');
    r = await alice(['grep', 'hello', 'notes']);
    t.match(r.stdout, /^\/home\/alice\/notes\/a\.md:hello world\n/);
    t.notMatch(r.stdout, /deep\.md/, "no -r: only the directory's own files");
    r = await alice(['grep', '-r', '-i', 'HELLO', 'notes']);
    t.match(r.stdout, /\/home\/alice\/notes\/sub\/deep\.md:Hello again x\n/);
    r = await alice(['grep', '-r', '-l', 'ello', 'notes']);
    t.ok(r.stdout.trimEnd().split('\n').includes('/home/alice/notes/sub/deep.md'));
    r = await alice(['grep', '-r', 'no such text', 'notes']);
    t.equal(r.code, 1, 'grep exits 1 when nothing matches');
    t.equal(r.stderr, '');
    r = await alice(['grep', '(', 'notes']);
    t.equal(r.code, 1);
    t.match(r.stderr, ERR_LINE);
  });

  await t.test('identity: flags beat environment variables; tokens work', async (t) => {
    t.equal((await cli.run(['whoami'])).stdout, 'root\n', 'no identity is root');
    t.equal((await cli.run(['whoami'], { user: 'alice' })).stdout, 'alice\n');
    t.equal((await cli.run(['whoami', '--user', 'bob'], { user: 'alice' })).stdout, 'bob\n');
    t.equal((await cli.run(['--user', 'bob', 'whoami'])).stdout, 'bob\n', 'global flag before the command');
    const tok = (await root(['token', 'alice'])).stdout.trim();
    t.match(tok, /\S{20,}/);
    t.equal((await cli.run(['whoami'], { token: tok })).stdout, 'alice\n');
    const r = await cli.run(['whoami'], { token: 'not-a-token' });
    t.equal(r.code, 1);
    t.match(r.stderr, /\(EAUTH\)\n$/);
    const u = await cli.run(['whoami'], { user: 'a', token: 'b' });
    t.equal(u.code, 2);
  });
});
