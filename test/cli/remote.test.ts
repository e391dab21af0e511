/** `--url`: the file and VCS commands against a real REST server (`mdvfs serve`) instead of the socket. */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { runCli, tempDir } from '../helpers/cli.js';
import { startService } from '../helpers/http.js';

void t.test('file and VCS commands over --url', async (t) => {
  const svc = await startService(t);
  // A CLI environment whose data dir has no daemon: everything must go over HTTP.
  const localData = tempDir(t);
  const env: NodeJS.ProcessEnv = { ...process.env, SERVICE_DATA_DIR: localData, SERVICE_URL: svc.base };
  for (const k of ['SERVICE_AS_USER', 'SERVICE_TOKEN', 'SERVICE_ON_BEHALF_OF', 'SERVICE_WORKSPACE']) delete env[k];
  const run = (args: string[], user?: string, input?: string) =>
    runCli(env, args, { ...(user !== undefined ? { user } : {}), ...(input !== undefined ? { input } : {}) });

  let r = await run(['useradd', 'alice']);
  t.equal(r.code, 0, r.stderr);
  t.equal((await run(['whoami'], 'alice')).stdout, 'alice\n');
  const tok = (await run(['token', 'alice'])).stdout.trim();
  t.equal(
    (await runCli({ ...env, SERVICE_URL: '' }, ['whoami', '--url', svc.base], { token: tok })).stdout,
    'alice\n',
    '--url flag and SERVICE_TOKEN',
  );

  t.equal((await run(['mkdir', 'notes'], 'alice')).code, 0);
  r = await run(['mkdir', 'notes'], 'alice');
  t.equal(r.code, 1, 'plain mkdir of an existing directory fails over REST too');
  t.match(r.stderr, /\(EEXIST\)\n$/);
  r = await run(['mkdir', 'deep/er'], 'alice');
  t.equal(r.code, 1, 'plain mkdir needs the parent');
  t.match(r.stderr, /\(ENOENT\)\n$/);
  t.equal((await run(['mkdir', '-p', '-m', '750', 'deep/er'], 'alice')).code, 0);
  t.equal(JSON.parse((await run(['stat', '--json', 'deep/er'], 'alice')).stdout).mode, '0750', 'mkdir -m over REST');
  t.equal((await run(['write', 'notes/a.md', 'hello', 'remote'], 'alice')).code, 0);
  t.equal((await run(['write', 'notes/b.md'], 'alice', 'from stdin\n')).code, 0);
  t.equal((await run(['cat', 'notes/a.md'], 'alice')).stdout, 'hello remote\n');
  r = await run(['cat', 'notes'], 'alice');
  t.equal(r.code, 1);
  t.match(r.stderr, /\(EISDIR\)\n$/);
  t.equal((await run(['ls', 'notes'], 'alice')).stdout, 'a.md\nb.md\n');
  r = await run(['ls', '-l', '/home/alice/notes'], 'alice');
  t.match(r.stdout, /^-rw-r--r-- alice alice +13 .* a\.md\n/);
  t.equal((await run(['cp', 'notes/a.md', 'notes/c.md'], 'alice')).code, 0);
  t.equal((await run(['mv', 'notes/c.md', 'notes/d.md'], 'alice')).code, 0);
  t.equal((await run(['ln', '-s', 'a.md', 'notes/link.md'], 'alice')).code, 0);
  t.equal((await run(['chmod', '600', 'notes/d.md'], 'alice')).code, 0);
  r = await run(['stat', '--json', 'notes/d.md'], 'alice');
  t.equal(JSON.parse(r.stdout).mode, '0600');
  r = await run(['stat', 'notes/link.md'], 'alice');
  t.match(r.stdout, /-> a\.md/);
  r = await run(['grep', '-r', 'remote', 'notes'], 'alice');
  t.match(r.stdout, /\/home\/alice\/notes\/a\.md:hello remote\n/);
  r = await run(['find', 'notes', '--name', '*.md', '--type', 'f'], 'alice');
  t.same(r.stdout.trimEnd().split('\n').sort(), [
    '/home/alice/notes/a.md',
    '/home/alice/notes/b.md',
    '/home/alice/notes/d.md',
  ]);
  r = await run(['tree', 'notes'], 'alice');
  t.match(r.stdout, /── d\.md/);
  t.equal((await run(['rm', 'notes/d.md'], 'alice')).code, 0);
  r = await run(['rm', 'notes'], 'alice');
  t.equal(r.code, 1);
  t.match(r.stderr, /\(EISDIR\)\n$/);
  r = await run(['cat', '/home/alice/notes/a.md'], undefined);
  t.equal(r.stdout, 'hello remote\n', 'no identity is root over REST too');
  await run(['useradd', 'bob']);
  r = await run(['cat', '/home/alice/notes/a.md'], 'bob');
  t.equal(r.code, 1);
  t.match(r.stderr, /\(EACCES\)\n$/);

  r = await run(['commit', '-m', 'remote commit'], 'alice');
  t.match(r.stdout, /^\[[0-9a-f]{12}\] remote commit\n/);
  const hash = /\[([0-9a-f]{12})\]/.exec(r.stdout)?.[1] ?? '';
  await run(['write', 'notes/a.md', 'changed'], 'alice');
  r = await run(['status'], 'alice');
  t.match(r.stdout, /notes\/a\.md/);
  r = await run(['diff'], 'alice');
  t.match(r.stdout, /^\+changed$/m);
  r = await run(['log', '--oneline'], 'alice');
  t.equal(r.stdout, `${hash} remote commit\n`);
  t.equal((await run(['revert', hash], 'alice')).code, 0);
  t.equal((await run(['cat', 'notes/a.md'], 'alice')).stdout, 'hello remote\n');

  // import/export work over --url as well.
  const tmp = tempDir(t);
  mkdirSync(path.join(tmp, 'v', 'd'), { recursive: true });
  writeFileSync(path.join(tmp, 'v', 'd', 'x.md'), 'x\n');
  r = await run(['import', path.join(tmp, 'v')], 'alice');
  t.equal(r.code, 0, r.stderr);
  r = await run(['export', 'v', path.join(tmp, 'out')], 'alice');
  t.equal(r.code, 0, r.stderr);
  t.equal(readFileSync(path.join(tmp, 'out', 'd', 'x.md'), 'utf8'), 'x\n');

  r = await runCli({ ...env, SERVICE_URL: 'http://127.0.0.1:1' }, ['ls']);
  t.equal(r.code, 1, 'an unreachable server is an operation error');
  t.match(r.stderr, /^mdvfs: cannot reach http:\/\/127\.0\.0\.1:1.* \(EIO\)\n$/);
  r = await runCli(env, ['ls', '--url', 'ftp://x']);
  t.equal(r.code, 2);
});
