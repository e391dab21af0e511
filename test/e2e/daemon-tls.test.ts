/**
 * A daemon over TCP (SERVICE_DAEMON_LISTEN; front ends with `tls://host:port` in SERVICE_DAEMONS):
 * TLS 1.3 with the test's own CA, then the shared secret proven by an HMAC over the connection's
 * TLS exporter (daemon/rpc/tcp.ts). The CLI and `mdvfs serve` work through it from another data
 * dir; every attack below is refused and the daemon goes on serving.
 */
import t from 'tap';
import { spawn } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { chmodSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import tls from 'node:tls';
import type { DaemonClient } from '../../daemon/rpc/client.js';
import { encodeFrame } from '../../daemon/rpc/framing.js';
import { daemonTlsClientFromEnv, daemonsFromEnv } from '../../daemon/rpc/settings.js';
import { connectTls, MAX_UNPROVEN_PER_PEER, REFUSAL_LOG_MS } from '../../daemon/rpc/tcp.js';
import { runCli } from '../helpers/cli.js';
import { DAEMON_ENTRY, readText, spawnDaemon, tempDir } from '../helpers/daemon.js';
import { startServe } from '../helpers/mcp.js';
import { makePki, tlsAddress } from '../helpers/tls.js';
import { until } from '../helpers/poll.js';

const pki = makePki(t);

/** A front end's connection to `addr` made in this process, with `env`'s CA and secret. */
async function frontEnd(addr: string, env: Record<string, string> = pki.frontEnv(addr)): Promise<DaemonClient> {
  const [a] = daemonsFromEnv(env);
  if (a?.kind !== 'tls') throw new Error(`not a tls address: ${addr}`);
  return connectTls(a, daemonTlsClientFromEnv(env));
}

/** Whether the daemon at `addr` still serves a proper front end. */
async function serves(addr: string): Promise<boolean> {
  const c = await frontEnd(addr);
  try {
    return (await c.call('sys.health', {})) !== undefined;
  } finally {
    c.close();
  }
}

const hostPort = (addr: string): { host: string; port: number } => {
  const m = /^tls:\/\/(.+):(\d+)$/.exec(addr)!;
  return { host: m[1]!, port: Number(m[2]) };
};

/** A TLS connection that believes the test CA (and so gets past the daemon's certificate), nothing more. */
function rawTls(addr: string): Promise<tls.TLSSocket> {
  return new Promise((resolve, reject) => {
    const s = tls.connect({ ...hostPort(addr), ca: readFileSync(pki.ca), minVersion: 'TLSv1.3' });
    s.once('secureConnect', () => resolve(s));
    s.once('error', reject);
  });
}

/**
 * Everything the peer sends until it closes the connection (the test waits as long as that takes),
 * or until it answers a request or accepts the hello (then we close, and the caller's check fails on that).
 */
function untilClosed(s: net.Socket): Promise<Buffer> {
  const got: Buffer[] = [];
  s.on('data', (b: Buffer) => {
    got.push(b);
    const all = Buffer.concat(got);
    if (all.includes('"result"') || all.subarray(0, 8).toString() === 'mdvfs ok') s.destroy();
  });
  s.on('error', () => undefined);
  return new Promise((resolve) => s.once('close', () => resolve(Buffer.concat(got))));
}

/** The proof a front end holding the secret sends on `s` (as daemon/rpc/tcp.ts makes it). */
function helloProof(s: tls.TLSSocket): Buffer {
  const secret = Buffer.from(readFileSync(pki.secret, 'latin1').trim(), 'latin1');
  const ekm = s.exportKeyingMaterial(32, 'EXPORTER-mdvfs-daemon-secret', Buffer.from('mdvfs/1'));
  return createHmac('sha256', secret).update('front end').update(Buffer.of(0)).update(ekm).digest();
}

/** A request frame as a front end would send it after the hello. */
const statusFrame = (): Buffer =>
  Buffer.concat(encodeFrame({ id: 1, method: 'sys.status', params: {}, creds: { origin: 'local' } }));

/** Runs the daemon entry until it exits (or is ready: then it is killed); its exit code and stderr. */
function daemonExit(env: Record<string, string>): Promise<{ code: number | null; stderr: string }> {
  const dataDir = tempDir();
  return new Promise((resolve) => {
    const p = spawn(process.execPath, [DAEMON_ENTRY], {
      env: { ...process.env, SERVICE_DATA_DIR: dataDir, ...env },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    p.stderr!.on('data', (b: Buffer) => {
      stderr += b.toString();
      // It started after all (the check under test is off): stop it, and the caller's checks fail.
      if (stderr.includes('daemon ready')) p.kill('SIGKILL');
    });
    p.once('close', (code) => resolve({ code, stderr }));
  });
}

t.test('the CLI and mdvfs serve work through tls:// against a daemon whose socket they cannot use', async (t) => {
  const d = await spawnDaemon(t, pki.daemonEnv());
  const addr = await tlsAddress(d.client);
  t.match(addr, /^tls:\/\/127\.0\.0\.1:\d+$/, 'sys.status shows the TCP listen address');
  const status = await runCli({ ...process.env, SERVICE_DATA_DIR: d.dataDir }, ['daemon', 'status']);
  t.match(status.stdout, `listen:   ${addr}`, 'mdvfs status shows it too');
  // No data dir of their own: the tls:// address is all they have.
  const nowhere = path.join(tempDir(), 'none');
  const env = { ...process.env, SERVICE_DATA_DIR: nowhere, ...pki.frontEnv(addr) };
  const w = await runCli(env, ['write', '-n', '/cli.md', 'over tls']);
  t.equal(w.code, 0, w.stderr);
  t.equal(await readText(d.client.as({}), '/cli.md'), 'over tls', 'the CLI wrote through the TLS listener');
  const r = await runCli(env, ['cat', '/cli.md']);
  t.equal(r.stdout, 'over tls');
  t.notOk(existsSync(nowhere), 'no data dir was made for the CLI');

  const serveDir = tempDir();
  const s = await startServe(t, { dataDir: serveDir, env: pki.frontEnv(addr) });
  const put = await fetch(`${s.base}/fs/rest.md`, { method: 'PUT', body: 'through serve' });
  t.equal(put.status, 200);
  t.equal(await readText(d.client.as({}), '/rest.md'), 'through serve', 'REST wrote through the TLS listener');
  t.equal(await (await fetch(`${s.base}/fs/cli.md`)).text(), 'over tls', 'REST reads the remote daemon');
});

t.test('attacks on the TLS listener are refused and the daemon goes on serving', async (t) => {
  const d = await spawnDaemon(t, pki.daemonEnv());
  const addr = await tlsAddress(d.client);
  const nowhere = path.join(tempDir(), 'none');

  t.test('a wrong secret', async (t) => {
    const env = {
      ...process.env,
      SERVICE_DATA_DIR: nowhere,
      ...pki.frontEnv(addr, { SERVICE_DAEMON_SECRET_FILE: pki.otherSecret }),
    };
    const r = await runCli(env, ['write', '-n', '/wrong.md', 'x']);
    t.not(r.code, 0);
    t.match(r.stderr, /refused our shared secret/);
    // By hand: a hello whose proof is not made with the secret gets "no" and the connection closes.
    const s = await rawTls(addr);
    s.write(Buffer.concat([Buffer.from('mdvfs/1\n'), Buffer.alloc(32, 7)]));
    s.write(statusFrame());
    const got = await untilClosed(s);
    t.equal(got.subarray(0, 8).toString(), 'mdvfs no');
    t.notMatch(got.toString('latin1'), /"result"/, 'no request was answered');
    await t.rejects(d.client.as({}).call('fs.stat', { path: '/wrong.md' }), { code: 'ENOENT' }, 'nothing was written');
    t.ok(await serves(addr), 'the daemon still serves');
  });

  t.test('no hello: closed after the handshake timeout', async (t) => {
    const s = await rawTls(addr);
    const got = await untilClosed(s);
    t.equal(got.length, 0, 'closed by the daemon without a word');
    // Nor a TLS handshake: a bare TCP connection that says nothing is closed as well.
    const raw = net.connect(hostPort(addr));
    t.equal((await untilClosed(raw)).length, 0);
    t.ok(await serves(addr), 'the daemon still serves');
  });

  t.test('plain TCP (no TLS): a request frame gets no answer', async (t) => {
    const raw = net.connect(hostPort(addr));
    raw.once('connect', () => raw.write(statusFrame()));
    const got = await untilClosed(raw);
    t.notMatch(got.toString('latin1'), /"result"|pid/, 'nothing but a TLS alert, at most');
    t.ok(await serves(addr), 'the daemon still serves');
  });

  t.test('a frame before the hello, or right behind it, closes the connection', async (t) => {
    const before = await rawTls(addr);
    before.write(statusFrame());
    t.notMatch((await untilClosed(before)).toString('latin1'), /"result"/);
    // A proper hello with a frame in the same write: the frame came before the daemon's answer.
    const behind = await rawTls(addr);
    behind.write(Buffer.concat([Buffer.from('mdvfs/1\n'), helloProof(behind), statusFrame()]));
    const got = await untilClosed(behind);
    t.notMatch(got.toString('latin1'), /"result"|mdvfs ok/, 'closed without an answer');
    // The same hello alone is answered (so the refusal above was for the frame).
    const alone = await rawTls(addr);
    alone.write(Buffer.concat([Buffer.from('mdvfs/1\n'), helloProof(alone)]));
    const answer = await new Promise<Buffer>((resolve) => alone.once('data', resolve));
    t.equal(answer.subarray(0, 8).toString(), 'mdvfs ok');
    alone.destroy();
    t.ok(await serves(addr), 'the daemon still serves');
  });

  t.test('a peer holding many connections that prove nothing: those beyond the cap are closed at once', async (t) => {
    const held: net.Socket[] = [];
    const closedAt: number[] = [];
    const closed: Promise<void>[] = [];
    for (let i = 0; i < MAX_UNPROVEN_PER_PEER + 8; i++) {
      const s = net.connect(hostPort(addr));
      s.on('error', () => undefined);
      closed.push(new Promise((resolve) => s.once('close', () => (closedAt.push(i), resolve()))));
      await new Promise<void>((resolve) => s.once('connect', () => resolve()));
      held.push(s);
    }
    // The first to close are the ones over the cap, long before the held ones' handshake timeout.
    await Promise.all(closed);
    t.same(
      closedAt.slice(0, 8).sort((a, b) => a - b),
      Array.from({ length: 8 }, (_, k) => MAX_UNPROVEN_PER_PEER + k),
      `the ${8} connections over the cap of ${MAX_UNPROVEN_PER_PEER} closed first`,
    );
    t.ok(await serves(addr), 'once they are gone, a front end is served');
  });

  t.test('a 20 MB hello', async (t) => {
    const s = await rawTls(addr);
    s.write(Buffer.alloc(20 * 1024 * 1024, 0x41));
    const got = await untilClosed(s);
    t.notMatch(got.toString('latin1'), /"result"/);
    t.ok(await serves(addr), 'the daemon still serves');
    t.ok(d.proc.exitCode === null, 'and still runs');
  });

  t.test('a daemon whose certificate the foreign CA issued: the front end refuses to talk', async (t) => {
    const foreign = await spawnDaemon(
      t,
      pki.daemonEnv({ SERVICE_DAEMON_TLS_CERT: pki.foreignCert, SERVICE_DAEMON_TLS_KEY: pki.foreignKey }),
    );
    const faddr = await tlsAddress(foreign.client);
    const r = await runCli({ ...process.env, SERVICE_DATA_DIR: nowhere, ...pki.frontEnv(faddr) }, [
      'write',
      '-n',
      '/foreign.md',
      'x',
    ]);
    t.not(r.code, 0);
    t.match(r.stderr, /certificate is not one SERVICE_DAEMON_TLS_CA vouches for/);
    t.notMatch(foreign.stderr(), /connection refused|wrong hello/, 'the front end sent it no hello at all');
    await t.rejects(
      foreign.client.as({}).call('fs.stat', { path: '/foreign.md' }),
      { code: 'ENOENT' },
      'nothing was written',
    );
    t.ok(await serves(addr), 'the proper daemon still serves');
  });

  t.test('a certificate of the right CA for another host: the host name is checked', async (t) => {
    const other = await spawnDaemon(
      t,
      pki.daemonEnv({ SERVICE_DAEMON_TLS_CERT: pki.elsewhereCert, SERVICE_DAEMON_TLS_KEY: pki.elsewhereKey }),
    );
    const oaddr = await tlsAddress(other.client);
    const r = await runCli({ ...process.env, SERVICE_DATA_DIR: nowhere, ...pki.frontEnv(oaddr) }, [
      'write',
      '-n',
      '/x.md',
      'x',
    ]);
    t.not(r.code, 0);
    t.match(
      r.stderr,
      /certificate is not one SERVICE_DAEMON_TLS_CA vouches for, for 127\.0\.0\.1 \(ERR_TLS_CERT_ALTNAME_INVALID\)/,
    );
    t.notMatch(other.stderr(), /connection refused|wrong hello/, 'the front end sent it no hello at all');
    await t.rejects(other.client.as({}).call('fs.stat', { path: '/x.md' }), { code: 'ENOENT' }, 'nothing was written');
  });
});

t.test('a flood of refused connections: the log says so once per window, with the count', async (t) => {
  // Issue 30 (low): every refused connection used to be one log line (1,402 lines in 8 s).
  const d = await spawnDaemon(t, pki.daemonEnv());
  const addr = await tlsAddress(d.client);
  const FLOOD = 300;
  /** The daemon's lines about refused connections (JSON lines), each with the count it stands for. */
  const refusalLines = (): { msg: string; refused: number }[] =>
    d
      .stderr()
      .split('\n')
      .filter((l) => l.includes('daemon tcp:') && l.includes('refused'))
      .map((l) => JSON.parse(l) as { msg: string; refused: number });
  // Plain TCP that sends an HTTP request: each one fails the TLS handshake and is refused at once.
  for (let i = 0; i < FLOOD; i += 20) {
    await Promise.all(
      Array.from({ length: 20 }, async () => {
        const raw = net.connect(hostPort(addr));
        raw.once('connect', () => raw.write('GET / HTTP/1.0\r\n\r\n'));
        await untilClosed(raw);
      }),
    );
  }
  t.ok(await serves(addr), 'the daemon still serves');
  const during = refusalLines().length;
  t.ok(during >= 1 && during <= 2, `a few lines for ${FLOOD} refusals, not one each (got ${during})`);
  // At the end of the window, one line sums up the rest, by reason.
  await until(() => refusalLines().reduce((n, l) => n + l.refused, 0) >= FLOOD, 'the summary line', REFUSAL_LOG_MS * 4);
  const lines = refusalLines();
  t.equal(
    lines.reduce((n, l) => n + l.refused, 0),
    FLOOD,
    'every refusal is counted exactly once',
  );
  t.ok(lines.length <= 3, `${lines.length} lines in all`);
  t.match(lines.at(-1)!.msg, /more connections refused in the last \d+ s \(\d+ × TLS handshake refused/);
});

t.test('settings: the daemon refuses to start with a secret others can read, short, or missing', async (t) => {
  const open = path.join(pki.dir, 'open-secret');
  writeFileSync(open, readFileSync(pki.secret), { mode: 0o600 });
  chmodSync(open, 0o644);
  let r = await daemonExit(pki.daemonEnv({ SERVICE_DAEMON_SECRET_FILE: open }));
  t.equal(r.code, 2);
  t.match(r.stderr, /SERVICE_DAEMON_SECRET_FILE: .*open-secret is open to other users \(mode 0644\)/);
  t.equal(r.stderr.trim().split('\n').length, 1, 'one line');
  // A front end refuses it as well.
  const c = await runCli(
    {
      ...process.env,
      SERVICE_DATA_DIR: path.join(tempDir(), 'none'),
      ...pki.frontEnv('tls://127.0.0.1:1', { SERVICE_DAEMON_SECRET_FILE: open }),
    },
    ['ls'],
  );
  t.not(c.code, 0);
  t.match(c.stderr, /open to other users/);

  const short = path.join(pki.dir, 'short-secret');
  writeFileSync(short, 'hunter2\n', { mode: 0o600 });
  r = await daemonExit(pki.daemonEnv({ SERVICE_DAEMON_SECRET_FILE: short }));
  t.equal(r.code, 2);
  t.match(r.stderr, /a secret of 7 bytes; it needs at least 32/);

  const blank = path.join(pki.dir, 'blank-secret');
  writeFileSync(blank, '\n \n', { mode: 0o600 });
  r = await daemonExit(pki.daemonEnv({ SERVICE_DAEMON_SECRET_FILE: blank }));
  t.match(r.stderr, /holds no secret/);

  r = await daemonExit(pki.daemonEnv({ SERVICE_DAEMON_TLS_KEY: pki.foreignKey }));
  t.equal(r.code, 1);
  t.match(r.stderr, /SERVICE_DAEMON_TLS_CERT and SERVICE_DAEMON_TLS_KEY are not a certificate and its private key/);

  r = await daemonExit(pki.daemonEnv({ SERVICE_DAEMON_SECRET_FILE: '', SERVICE_DAEMON_TLS_KEY: '' }));
  t.equal(r.code, 2);
  t.match(r.stderr, /SERVICE_DAEMON_LISTEN needs .*; missing: SERVICE_DAEMON_TLS_KEY, SERVICE_DAEMON_SECRET_FILE/);
  t.equal(r.stderr.trim().split('\n').length, 1, 'one line');
});

t.test('SERVICE_DAEMONS: socket paths and tls:// addresses, parsed once', async (t) => {
  t.same(daemonsFromEnv({ SERVICE_DAEMONS: '/a/daemon.sock, tls://db.internal:7070,tls://[::1]:7071' }), [
    { kind: 'unix', path: '/a/daemon.sock' },
    { kind: 'tls', host: 'db.internal', port: 7070 },
    { kind: 'tls', host: '::1', port: 7071 },
  ]);
  for (const bad of [
    'a/daemon.sock',
    'tls://db.internal',
    'tls://:7070',
    'tls://7070',
    'https://db:7070',
    'tls://h:99999',
  ])
    t.throws(
      () => daemonsFromEnv({ SERVICE_DAEMONS: bad }),
      { code: 'EINVAL', message: /each an absolute socket path or tls:\/\/host:port/ },
      bad,
    );
  // The CLI says it as a bad setting (EINVAL), not as a daemon it could not reach.
  const cli = await runCli(
    { ...process.env, SERVICE_DATA_DIR: path.join(tempDir(), 'd'), SERVICE_DAEMONS: 'tls://h' },
    ['ls', '/'],
  );
  t.equal(cli.code, 1);
  t.match(cli.stderr, /^mdvfs: SERVICE_DAEMONS must list .* \(EINVAL\)$/m);
  t.throws(() => daemonTlsClientFromEnv({}), {
    message:
      /a tls:\/\/ address in SERVICE_DAEMONS needs SERVICE_DAEMON_TLS_CA, SERVICE_DAEMON_SECRET_FILE; missing: SERVICE_DAEMON_TLS_CA, SERVICE_DAEMON_SECRET_FILE/,
  });
});
