/**
 * Certificates for the daemon's TLS listener, made at test time with the `openssl` CLI: a CA, a
 * server certificate it issues for 127.0.0.1 and localhost, a second (foreign) CA with a server
 * certificate of its own, and a shared secret file (0600). The env maps give a daemon its listener
 * (SERVICE_DAEMON_LISTEN on a free port) and a front end what it needs for tls:// addresses.
 *
 *   const pki = makePki(t);
 *   const d = await spawnDaemon(t, pki.daemonEnv());
 *   const addr = await tlsAddress(d.client);      // tls://127.0.0.1:<port>
 *   await runCli({ ...process.env, ...pki.frontEnv(addr) }, ['ls']);
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { DaemonClient } from '../../daemon/rpc/client.js';

interface Teardown {
  teardown(fn: () => unknown): void;
}

export interface Pki {
  dir: string;
  ca: string;
  cert: string;
  key: string;
  foreignCa: string;
  foreignCert: string;
  foreignKey: string;
  /** A certificate of the right CA for another host (elsewhere.example) only. */
  elsewhereCert: string;
  elsewhereKey: string;
  /** The shared secret file (0600). */
  secret: string;
  /** Another secret file (0600), holding a different secret. */
  otherSecret: string;
  /** A daemon's TLS settings, listening on 127.0.0.1 (a free port unless given). */
  daemonEnv(extra?: Record<string, string>): Record<string, string>;
  /** A front end's settings with SERVICE_DAEMONS = `daemons`. */
  frontEnv(daemons: string, extra?: Record<string, string>): Record<string, string>;
}

const openssl = (cwd: string, args: string[]): void => {
  execFileSync('openssl', args, { cwd, stdio: ['ignore', 'ignore', 'pipe'] });
};

const EC = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes'];

/** A CA (`name`.pem/.key) and a server certificate it issued (`name`-server.pem/.key) for 127.0.0.1 and localhost. */
function makeCa(dir: string, name: string): void {
  openssl(dir, [
    'req',
    '-x509',
    ...EC,
    '-keyout',
    `${name}.key`,
    '-out',
    `${name}.pem`,
    '-days',
    '2',
    '-subj',
    `/CN=${name}`,
  ]);
  issue(dir, name, `${name}-server`, 'IP:127.0.0.1,DNS:localhost');
}

/** A server certificate `cert`.pem/.key issued by CA `ca` for the subject alternative names `san`. */
function issue(dir: string, ca: string, cert: string, san: string): void {
  openssl(dir, ['req', ...EC, '-keyout', `${cert}.key`, '-out', `${cert}.csr`, '-subj', '/CN=mdvfs-daemon']);
  writeFileSync(
    path.join(dir, `${cert}.cnf`),
    `basicConstraints=CA:FALSE\nsubjectAltName=${san}\nextendedKeyUsage=serverAuth\n`,
  );
  openssl(dir, [
    'x509',
    '-req',
    '-in',
    `${cert}.csr`,
    '-CA',
    `${ca}.pem`,
    '-CAkey',
    `${ca}.key`,
    '-CAcreateserial',
    '-out',
    `${cert}.pem`,
    '-days',
    '2',
    '-extfile',
    `${cert}.cnf`,
  ]);
}

export function makePki(t: Teardown): Pki {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'mdvfs-pki-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  makeCa(dir, 'ca');
  makeCa(dir, 'foreign');
  issue(dir, 'ca', 'elsewhere', 'DNS:elsewhere.example');
  const secret = path.join(dir, 'secret');
  writeFileSync(secret, `${randomBytes(32).toString('hex')}\n`, { mode: 0o600 });
  const otherSecret = path.join(dir, 'other-secret');
  writeFileSync(otherSecret, `${randomBytes(32).toString('hex')}\n`, { mode: 0o600 });
  const p = (f: string): string => path.join(dir, f);
  const pki: Pki = {
    dir,
    ca: p('ca.pem'),
    cert: p('ca-server.pem'),
    key: p('ca-server.key'),
    foreignCa: p('foreign.pem'),
    foreignCert: p('foreign-server.pem'),
    foreignKey: p('foreign-server.key'),
    elsewhereCert: p('elsewhere.pem'),
    elsewhereKey: p('elsewhere.key'),
    secret,
    otherSecret,
    daemonEnv: (extra = {}) => ({
      SERVICE_DAEMON_LISTEN: '127.0.0.1:0',
      SERVICE_DAEMON_TLS_CERT: pki.cert,
      SERVICE_DAEMON_TLS_KEY: pki.key,
      SERVICE_DAEMON_TLS_CA: pki.ca,
      SERVICE_DAEMON_SECRET_FILE: pki.secret,
      ...extra,
    }),
    frontEnv: (daemons, extra = {}) => ({
      SERVICE_DAEMONS: daemons,
      SERVICE_DAEMON_TLS_CA: pki.ca,
      SERVICE_DAEMON_SECRET_FILE: pki.secret,
      ...extra,
    }),
  };
  return pki;
}

/** The daemon's TLS address as `sys.status` shows it. */
export async function tlsAddress(client: DaemonClient): Promise<string> {
  const st = await client.call('sys.status', {});
  if (st.listen === undefined) throw new Error('the daemon has no TCP listener');
  return st.listen;
}
