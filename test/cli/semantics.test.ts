// Issue 13 on the CLI, over the socket and over --url: stat -L/--follow, cp/mv into a directory,
// useradd --agent prints the token once, HEAD~n in diff/revert, and one-sentence errors on stderr.
import { writeFileSync } from 'node:fs';
import t, { type Test } from 'tap';
import { cliEnv, runCli, tempDir, type RunOptions, type RunResult } from '../helpers/cli.js';
import { startService } from '../helpers/http.js';

type Run = (args: string[], opts?: RunOptions) => Promise<RunResult>;

async function scenario(t: Test, run: Run): Promise<void> {
  const ok = async (args: string[], opts: RunOptions = {}): Promise<RunResult> => {
    const r = await run(args, opts);
    t.equal(r.code, 0, `${args.join(' ')}: ${r.stderr}`);
    return r;
  };

  // useradd --agent: the token is printed once, on stdout, and works.
  const made = await ok(['useradd', '--agent', 'bot9']);
  const m = /^token: (mdvfs_\S+)$/m.exec(made.stdout);
  t.ok(m, `the agent's token is on stdout: ${made.stdout}`);
  t.notOk(made.stderr.includes('mdvfs_'), 'and not on stderr');
  t.equal(
    (await run(['whoami'], { token: m?.[1] ?? 'none' })).stdout,
    'bot9\n',
    'the printed token authenticates as the agent',
  );
  const user = await ok(['useradd', 'dave']);
  t.notMatch(user.stdout, /token/, 'a user gets no token');
  const as = { user: 'dave' };

  // stat: lstat unless -L / --follow.
  await ok(['write', 'real.md', 'hello'], as);
  await ok(['ln', '-s', 'real.md', 'link.md'], as);
  t.equal(JSON.parse((await ok(['stat', '--json', 'link.md'], as)).stdout).kind, 'symlink');
  t.equal(JSON.parse((await ok(['stat', '--json', '-L', 'link.md'], as)).stdout).kind, 'file');
  t.equal(JSON.parse((await ok(['stat', '--json', '--follow', 'link.md'], as)).stdout).kind, 'file');
  t.match((await ok(['stat', 'link.md'], as)).stdout, /Kind: symlink/);

  // cp/mv onto a directory.
  await ok(['mkdir', 'box'], as);
  await ok(['mv', 'real.md', 'box'], as);
  t.equal((await ok(['cat', 'box/real.md'], as)).stdout, 'hello\n');
  await ok(['write', 'tree/x.md', 'X'], as);
  await ok(['cp', '-r', 'tree', 'box'], as);
  t.equal((await ok(['cat', 'box/tree/x.md'], as)).stdout, 'X\n');
  let r = await run(['mv', 'box', 'box'], as);
  t.equal(r.code, 1, 'a directory into itself');
  t.match(r.stderr, /^mdvfs: cannot move a directory into itself, rename '\/home\/dave\/box\/box' \(EINVAL\)\n$/);
  r = await run(['mv', 'tree', 'box'], as);
  t.equal(r.code, 1, 'box/tree exists and is not empty');
  t.match(r.stderr, /\(ENOTEMPTY\)\n$/);
  t.equal((await ok(['cat', 'tree/x.md'], as)).stdout, 'X\n', 'nothing lost');

  // HEAD in diff and revert.
  await ok(['commit', '-m', 'one'], as);
  await ok(['write', 'tree/x.md', 'Y'], as);
  t.match((await ok(['diff', 'HEAD', '--path', 'tree'], as)).stdout, /-X\n\+Y/, 'mdvfs diff HEAD');
  await ok(['commit', '-m', 'two'], as);
  t.match((await ok(['diff', 'HEAD~1', 'HEAD', '--path', 'tree'], as)).stdout, /-X\n\+Y/, 'HEAD~1 HEAD');
  r = await run(['diff', 'HEAD~99'], as);
  t.equal(r.code, 1);
  t.equal(r.stderr, 'mdvfs: no commit HEAD~99: HEAD has only 1 commit before it (ENOENT)\n');
  await ok(['revert', 'HEAD~1'], as);
  t.equal((await ok(['cat', 'tree/x.md'], as)).stdout, 'X\n', 'revert HEAD~1');

  // One clean sentence.
  r = await run(['whoami'], { token: 'mdvfs_not-a-real-token' });
  t.equal(r.code, 1);
  t.equal(r.stderr, 'mdvfs: invalid token (EAUTH)\n');
}

t.test('over the socket', async (t) => {
  const c = await cliEnv(t);
  await scenario(t, c.run);
});

t.test('over --url', async (t) => {
  const svc = await startService(t);
  const env: NodeJS.ProcessEnv = { ...process.env, SERVICE_DATA_DIR: tempDir(t), SERVICE_URL: svc.base };
  for (const k of ['SERVICE_AS_USER', 'SERVICE_TOKEN', 'SERVICE_ON_BEHALF_OF', 'SERVICE_WORKSPACE']) delete env[k];
  await scenario(t, (args, opts) => runCli(env, args, opts));
});

t.test('startup errors name the value and carry the right code', async (t) => {
  const dataDir = tempDir(t);
  const env: NodeJS.ProcessEnv = { ...process.env, SERVICE_DATA_DIR: dataDir };
  let r = await runCli({ ...env, SERVICE_LISTEN: 'bogus' }, ['serve']);
  t.equal(r.code, 2);
  t.equal(r.stderr, "mdvfs: SERVICE_LISTEN must be host:port (got 'bogus') (EINVAL)\n");
  const missing = `${dataDir}/no/such/dir`;
  r = await runCli(env, ['mount', missing]);
  t.equal(r.code, 1);
  t.equal(r.stderr, `mdvfs: cannot mount at '${missing}': no such directory (ENOENT)\n`);
  // An empty name is no directory at all, not the working directory (which it would resolve to).
  // (A data dir that cannot be one: without the check, the mount fails fast instead of serving.)
  const blocked = `${dataDir}/not-a-dir`;
  writeFileSync(blocked, '');
  for (const cmd of ['mount', 'umount']) {
    r = await runCli({ ...env, SERVICE_DATA_DIR: blocked }, [cmd, ''], { cwd: dataDir });
    t.equal(r.code, 2, `${cmd} ''`);
    t.equal(r.stderr, 'mdvfs: the directory is empty: name the mount point (EUSAGE)\n');
  }
});
