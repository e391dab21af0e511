/**
 * Security (issue 12, item 7): a token given with `--token` is visible to every local user in ps.
 * The CLI takes it from SERVICE_TOKEN or `--token-file` instead (over the daemon and over `--url`),
 * `--token` is refused with a message naming them (issue 30; it used to work with a warning), a
 * token file others may read gets a warning, and the token is never printed.
 */
import t, { type Test } from 'tap';
import { chmodSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { cliEnv, runCli, tempDir, type RunResult } from '../helpers/cli.js';
import { client, startService } from '../helpers/http.js';

function tokenFile(t: Test, token: string, mode: number): string {
  const f = path.join(tempDir(t, 'mdvfs-tokfile-'), 'token');
  writeFileSync(f, `${token}\n`);
  chmodSync(f, mode);
  return f;
}

function noSecret(t: Test, r: RunResult, token: string): void {
  t.notOk(r.stdout.includes(token), 'the token is not on stdout');
  t.notOk(r.stderr.includes(token), 'the token is not on stderr');
}

t.test('over the local daemon', async (t) => {
  const cli = await cliEnv(t);
  const root = (await cli.client()).as({});
  await root.call('admin.userAdd', { name: 'bot', is_agent: true });
  const token = (await root.call('admin.token', { name: 'bot' })).token;

  t.test('--token-file acts as the token holder, silently', async (t) => {
    const r = await cli.run(['--token-file', tokenFile(t, token, 0o600), 'whoami']);
    t.equal(r.code, 0, r.stderr);
    t.equal(r.stdout, 'bot\n');
    t.equal(r.stderr, '', 'no warning for a private token file');
    noSecret(t, { ...r, stdout: '' }, token);
  });

  t.test('a token file other users may read works, with a warning', async (t) => {
    const f = tokenFile(t, token, 0o644);
    const r = await cli.run(['whoami', '--token-file', f]);
    t.equal(r.code, 0, r.stderr);
    t.equal(r.stdout, 'bot\n');
    t.match(r.stderr, new RegExp(`warning: ${f} is accessible by other users \\(mode 0644\\); run chmod 600`));
    noSecret(t, r, token);
  });

  t.test('--token is refused in one line naming SERVICE_TOKEN and --token-file, without the secret', async (t) => {
    for (const args of [
      ['--token', token, 'whoami'],
      ['whoami', '--token', token],
      ['ls', `--token=${token}`],
    ]) {
      const r = await cli.run(args);
      t.equal(r.code, 2, `usage error: ${args[0]}`);
      t.equal(r.stdout, '', 'nothing was done');
      t.equal(r.stderr.trim().split('\n').length, 1, 'one line');
      t.match(
        r.stderr,
        /--token is no longer accepted: a token on the command line is visible to every local user \(ps\); set SERVICE_TOKEN or use --token-file <file>/,
      );
      noSecret(t, r, token);
    }
    t.notMatch((await cli.run(['--help'])).stdout, /--token </, '--help no longer offers it');
  });

  t.test('SERVICE_TOKEN works without any warning', async (t) => {
    const r = await cli.run(['whoami'], { token });
    t.equal(r.code, 0, r.stderr);
    t.equal(r.stdout, 'bot\n');
    t.equal(r.stderr, '');
  });

  t.test('bad token files are usage errors that name the file, not its content', async (t) => {
    const missing = await cli.run(['--token-file', '/nonexistent/token', 'whoami']);
    t.equal(missing.code, 2);
    t.match(missing.stderr, /--token-file: cannot read \/nonexistent\/token \(ENOENT\)/);
    const empty = tokenFile(t, '', 0o600);
    t.match((await cli.run(['--token-file', empty, 'whoami'])).stderr, /is empty/);
    const both = await cli.run(['--token-file', tokenFile(t, token, 0o600), '--user', 'bot', 'whoami']);
    t.equal(both.code, 2);
    t.match(both.stderr, /--user and --token-file are mutually exclusive/);
    t.notOk(both.stderr.includes(token));
    const wrong = await cli.run(['--token-file', tokenFile(t, `${token}x`, 0o600), 'whoami']);
    t.equal(wrong.code, 1, 'a wrong token is refused, never root');
    t.notOk(wrong.stderr.includes(token));
  });
});

t.test('over --url (REST)', async (t) => {
  const svc = await startService(t);
  const root = client(svc);
  t.equal((await root.post('/admin/users', { name: 'bot', is_agent: true })).status, 200);
  const token: string = (await root.post('/admin/users/bot/tokens')).json.token;
  const env: NodeJS.ProcessEnv = { ...process.env, SERVICE_DATA_DIR: tempDir(t, 'mdvfs-unused-') };
  for (const k of ['SERVICE_AS_USER', 'SERVICE_TOKEN', 'SERVICE_URL']) delete env[k];
  const r = await runCli(env, ['--url', svc.base, '--token-file', tokenFile(t, token, 0o600), 'whoami']);
  t.equal(r.code, 0, r.stderr);
  t.equal(r.stdout, 'bot\n');
  t.equal(r.stderr, '');
  const w = await runCli(env, ['--url', svc.base, '--token', token, 'whoami']);
  t.equal(w.code, 2, '--token is refused over --url too');
  t.equal(w.stdout, '');
  t.match(w.stderr, /--token is no longer accepted/);
  noSecret(t, w, token);
});
