/** `mdvfs import --watch`: edits, new files, renames and deletes reach the filesystem within 2 s each. */
import { spawn } from 'node:child_process';
import { mkdirSync, renameSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { VfsError } from '../../daemon/errors.js';
import { CLI, cliEnv, tempDir, until } from '../helpers/cli.js';

void t.test('import --watch follows a folder until SIGINT', async (t) => {
  const cli = await cliEnv(t);
  await cli.run(['useradd', 'alice']);
  const tmp = tempDir(t);
  const vault = path.join(tmp, 'vault');
  mkdirSync(path.join(vault, 'daily'), { recursive: true });
  writeFileSync(path.join(vault, 'index.md'), '# Index\n');
  writeFileSync(path.join(vault, 'daily', 'monday.md'), 'gym\n');

  const proc = spawn(process.execPath, [CLI, 'import', vault, '--watch'], {
    env: { ...cli.env, SERVICE_AS_USER: 'alice' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  proc.stdout.on('data', (b: Buffer) => (stdout += b.toString()));
  proc.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
  const exited = new Promise<number | null>((resolve) => proc.on('exit', (code) => resolve(code)));
  t.teardown(() => {
    if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL');
  });
  t.ok(await until(() => stderr.includes('watching'), 30000), `the watcher starts: ${stderr}`);
  t.match(stdout, /^imported 2 files, 1 directory \(\d+ bytes\) into \/home\/alice\/vault\n/);

  const client = await cli.client();
  const alice = client.as({ authorization: 'User alice' });
  const read = async (p: string): Promise<string | null> => {
    try {
      return (await alice.request('fs.read', { path: p })).data.toString('utf8');
    } catch (err) {
      if (err instanceof VfsError && err.code === 'ENOENT') return null;
      throw err;
    }
  };
  t.equal(await read('vault/daily/monday.md'), 'gym\n');

  writeFileSync(path.join(vault, 'daily', 'monday.md'), 'gym\nread\n');
  t.ok(
    await until(async () => (await read('vault/daily/monday.md')) === 'gym\nread\n', 2000),
    'an edit arrives within 2 s',
  );

  writeFileSync(path.join(vault, 'daily', 'tuesday.md'), 'swim\n');
  t.ok(
    await until(async () => (await read('vault/daily/tuesday.md')) === 'swim\n', 2000),
    'a new file arrives within 2 s',
  );

  renameSync(path.join(vault, 'daily', 'tuesday.md'), path.join(vault, 'daily', 'wednesday.md'));
  t.ok(
    await until(
      async () =>
        (await read('vault/daily/wednesday.md')) === 'swim\n' && (await read('vault/daily/tuesday.md')) === null,
      2000,
    ),
    'a rename arrives within 2 s',
  );

  unlinkSync(path.join(vault, 'index.md'));
  t.ok(await until(async () => (await read('vault/index.md')) === null, 2000), 'a delete arrives within 2 s');

  mkdirSync(path.join(vault, 'projects', 'x'), { recursive: true });
  writeFileSync(path.join(vault, 'projects', 'x', 'plan.md'), 'plan\n');
  t.ok(
    await until(async () => (await read('vault/projects/x/plan.md')) === 'plan\n', 2000),
    'a new directory with a file arrives within 2 s',
  );
  rmSync(path.join(vault, 'projects'), { recursive: true });
  t.ok(
    await until(
      async () =>
        (await read('vault/projects/x/plan.md')) === null &&
        (await alice.call('fs.stat', { path: 'vault/projects' }).then(
          () => false,
          () => true,
        )),
      2000,
    ),
    'a removed directory goes too',
  );

  proc.kill('SIGINT');
  t.equal(await exited, 0, 'SIGINT stops the watcher cleanly');
  t.match(stdout, /updated \/home\/alice\/vault\/daily\/monday\.md\n/);
  t.match(stdout, /removed \/home\/alice\/vault\/index\.md\n/);
});
