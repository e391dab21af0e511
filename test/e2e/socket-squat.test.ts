/**
 * Security (issue 12, item 5): with a deep data dir and no XDG_RUNTIME_DIR the socket falls back to
 * a short path under the temp dir. Another local user who takes that path first must receive
 * nothing: the CLI refuses to connect (and so never sends its token), and says why.
 */
import t from 'tap';
import { chmodSync, existsSync, lstatSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { socketPathFor } from '../../daemon/rpc/connect.js';
import { runCli, until } from '../helpers/cli.js';
import { alive } from '../helpers/http.js';
import { localUser } from '../helpers/unix-user.js';

const TOKEN = 'mdvfs_victims-token-must-never-leave-9d1e';

/** A sticky, world-writable temp dir of our own (like /tmp), so no other test shares the fallback path. */
function sharedTmp(): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'mdvfs-squat-'));
  chmodSync(dir, 0o1777);
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** A data dir whose `daemon.sock` would pass the 107-byte limit, so the fallback path is used. */
function deepDataDir(): string {
  const top = mkdtempSync(path.join(os.tmpdir(), 'mdvfs-deep-'));
  t.teardown(() => rmSync(top, { recursive: true, force: true }));
  return path.join(top, 'a-rather-long-directory-name-'.repeat(3), 'data');
}

/** The socket path the victim's processes will use, computed exactly as they compute it. */
function fallbackSocket(dataDir: string, tmp: string): string {
  const saved = { TMPDIR: process.env.TMPDIR, XDG: process.env.XDG_RUNTIME_DIR };
  process.env.TMPDIR = tmp;
  delete process.env.XDG_RUNTIME_DIR;
  try {
    return socketPathFor(dataDir, { TMPDIR: tmp });
  } finally {
    if (saved.TMPDIR === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = saved.TMPDIR;
    if (saved.XDG !== undefined) process.env.XDG_RUNTIME_DIR = saved.XDG;
  }
}

function victimEnv(dataDir: string, tmp: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, SERVICE_DATA_DIR: dataDir, TMPDIR: tmp, SERVICE_TOKEN: TOKEN };
  delete env.XDG_RUNTIME_DIR;
  for (const k of ['SERVICE_AS_USER', 'SERVICE_ON_BEHALF_OF', 'SERVICE_WORKSPACE', 'SERVICE_URL']) delete env[k];
  return env;
}

/** The attacker's listener: creates the socket's directory if missing (open to all), listens, prints what it receives. */
const LISTENER = `
const net = require('node:net'), fs = require('node:fs'), path = require('node:path');
const sock = process.argv[1];
fs.mkdirSync(path.dirname(sock), { recursive: true, mode: 0o777 });
try { fs.chmodSync(path.dirname(sock), 0o777); } catch {}
const srv = net.createServer((c) => c.on('data', (b) => { process.stdout.write('GOT:' + b.toString('latin1') + '\\n'); c.destroy(); }));
srv.listen(sock, () => { fs.chmodSync(sock, 0o777); process.stderr.write('listening\\n'); });
`;

t.test('a socket path squatted by another local user', async (t) => {
  const evil = await localUser(t);
  if (typeof evil === 'string') {
    t.plan(0, `skipped: ${evil}`);
    return;
  }
  const tmp = sharedTmp();
  const dataDir = deepDataDir();
  const sock = fallbackSocket(dataDir, tmp);
  t.ok(sock.startsWith(tmp + '/'), `the fallback socket ${sock} is under the temp dir`);

  const listener = evil.spawn(process.execPath, ['-e', LISTENER, sock]);
  let got = '';
  let err = '';
  listener.stdout!.on('data', (b: Buffer) => (got += b.toString()));
  listener.stderr!.on('data', (b: Buffer) => (err += b.toString()));
  t.ok(await until(() => err.includes('listening'), 10000), `the attacker listens on ${sock} (${err})`);
  t.equal(lstatSync(sock).uid, evil.uid, 'the squatted socket is the attacker’s');

  const r = await runCli(victimEnv(dataDir, tmp), ['ls', '/']);
  await new Promise((r) => setTimeout(r, 300)); // anything sent would have arrived by now
  t.equal(got, '', 'the attacker received nothing');
  t.notOk(got.includes(TOKEN), 'in particular not the token');
  t.equal(r.code, 1, 'the CLI fails');
  t.match(
    r.stderr,
    /refusing to connect to the daemon socket .*(owned by uid \d+, not by you|open to other users)/,
    'and says why',
  );
  t.notOk(r.stderr.includes(TOKEN) || r.stdout.includes(TOKEN), 'the token is never printed');
});

t.test('without an attacker the fallback socket lives in a private directory', async (t) => {
  const tmp = sharedTmp();
  const dataDir = deepDataDir();
  const sock = fallbackSocket(dataDir, tmp);
  const env = victimEnv(dataDir, tmp);
  delete env.SERVICE_TOKEN;
  t.teardown(async () => {
    const pidFile = path.join(dataDir, 'daemon.pid');
    if (!existsSync(pidFile)) return;
    const pid = Number(readFileSync(pidFile, 'utf8').trim());
    if (pid > 0 && alive(pid)) process.kill(pid, 'SIGTERM');
    await until(() => !alive(pid), 5000);
  });
  const r = await runCli(env, ['whoami']);
  t.equal(r.code, 0, r.stderr);
  const dir = statSync(path.dirname(sock));
  t.equal(dir.mode & 0o777, 0o700, 'the socket directory is 0700');
  t.equal(dir.uid, process.getuid!(), 'and ours');
  t.equal(lstatSync(sock).mode & 0o777, 0o600, 'the socket is 0600');
});
