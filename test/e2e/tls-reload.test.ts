// Issue 31 (operations): certificate rotation without downtime. SIGHUP makes a daemon's TLS listener
// take its certificate, key and secret from their files again: the daemon keeps serving (it used to
// die of SIGHUP), new connections get the new certificate, and files it cannot use are refused with
// an error line while the previous certificate stays in use.
import t from 'tap';
import { execFileSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { copyFileSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import tls from 'node:tls';
import { runCli } from '../helpers/cli.js';
import { spawnDaemon, tempDir } from '../helpers/daemon.js';
import { until } from '../helpers/poll.js';
import { makePki, tlsAddress } from '../helpers/tls.js';

const pki = makePki(t);
const dir = tempDir('mdvfs-tls-reload-');
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const cert = path.join(dir, 'daemon.pem');
const key = path.join(dir, 'daemon.key');
copyFileSync(pki.cert, cert);
copyFileSync(pki.key, key);

/** A new certificate for 127.0.0.1 from the same CA, and its key: `name`.pem and `name`.key in `dir`. */
function renewed(name: string): { pem: string; key: string } {
  const run = (args: string[]): void => void execFileSync('openssl', args, { cwd: dir, stdio: 'ignore' });
  const ca = path.join(pki.dir, 'ca');
  run(
    ['req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes'].concat([
      '-keyout',
      `${name}.key`,
      '-out',
      `${name}.csr`,
      '-subj',
      '/CN=mdvfs-daemon-renewed',
    ]),
  );
  writeFileSync(
    path.join(dir, `${name}.cnf`),
    'basicConstraints=CA:FALSE\nsubjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n',
  );
  run(
    ['x509', '-req', '-in', `${name}.csr`, '-CA', `${ca}.pem`, '-CAkey', `${ca}.key`, '-CAcreateserial'].concat([
      '-out',
      `${name}.pem`,
      '-days',
      '2',
      '-extfile',
      `${name}.cnf`,
    ]),
  );
  return { pem: path.join(dir, `${name}.pem`), key: path.join(dir, `${name}.key`) };
}

/** The SHA-256 fingerprint of the certificate a new TLS connection to `addr` gets (checked against the CA). */
function servedCert(addr: string): Promise<string> {
  const m = /^tls:\/\/([^:]+):(\d+)$/.exec(addr)!;
  return new Promise((resolve, reject) => {
    const s = tls.connect({ host: m[1], port: Number(m[2]), ca: readFileSync(pki.ca) }, () => {
      const fp = s.getPeerCertificate().fingerprint256;
      s.destroy();
      resolve(fp);
    });
    s.once('error', reject);
  });
}

const fingerprint = (file: string): string => new X509Certificate(readFileSync(file)).fingerprint256;

t.test('SIGHUP: new connections get the renewed certificate and the daemon goes on serving', async (t) => {
  const d = await spawnDaemon(t, pki.daemonEnv({ SERVICE_DAEMON_TLS_CERT: cert, SERVICE_DAEMON_TLS_KEY: key }));
  const addr = await tlsAddress(d.client);
  const front = { ...process.env, SERVICE_DATA_DIR: path.join(dir, 'none'), ...pki.frontEnv(addr) };
  const w = await runCli(front, ['write', '-n', '/before.md', 'before']);
  t.equal(w.code, 0, w.stderr);
  t.equal(await servedCert(addr), fingerprint(pki.cert), 'the first certificate is served');

  const next = renewed('next');
  copyFileSync(next.pem, cert);
  copyFileSync(next.key, key);
  d.proc.kill('SIGHUP');
  await until(() => /reloaded the TLS certificate/.test(d.stderr()), 'the reload line', 20000);
  t.equal(d.proc.exitCode, null, 'the daemon did not stop');
  t.equal(await servedCert(addr), fingerprint(next.pem), 'new connections get the renewed certificate');
  const after = await runCli(front, ['write', '-n', '/after.md', 'after']);
  t.equal(after.code, 0, after.stderr);
  const r = await runCli(front, ['cat', '/before.md']);
  t.equal(r.stdout, 'before', 'a front end still works through the same address');

  // Files it cannot use: an error line, and the renewed certificate stays.
  writeFileSync(cert, 'not a certificate\n');
  d.proc.kill('SIGHUP');
  await until(() => /kept the previous TLS certificate/.test(d.stderr()), 'the refusal line', 20000);
  const line = d
    .stderr()
    .split('\n')
    .find((l) => l.includes('kept the previous TLS certificate'));
  t.match(JSON.parse(line!), { level: 'error', role: 'daemon' });
  t.equal(await servedCert(addr), fingerprint(next.pem), 'the previous certificate is still served');
  const still = await runCli(front, ['cat', '/after.md']);
  t.equal(still.stdout, 'after', 'and front ends still work');
});
