/**
 * A daemon over TCP, for front ends on other machines (SERVICE_DAEMON_LISTEN on the daemon,
 * `tls://host:port` in the front ends' SERVICE_DAEMONS). On the Unix socket the private 0700
 * directory is the authentication; here it is TLS 1.3 (the front end believes only
 * SERVICE_DAEMON_TLS_CA, for the address's host name) and then a shared secret
 * (SERVICE_DAEMON_SECRET_FILE), proven before anything else may be sent:
 *
 *   front end → daemon   HELLO  = "mdvfs/1\n" ‖ HMAC-SHA256(secret, "front end" ‖ 0 ‖ ekm)   (40 bytes)
 *   daemon → front end   OK     = "mdvfs ok" ‖ HMAC-SHA256(secret, "daemon" ‖ 0 ‖ ekm)      (40 bytes)
 *                        or NO  = "mdvfs no" ‖ 32 zero bytes, and the connection closes
 *
 * `ekm` is the TLS exporter of this connection (RFC 8446 §7.5, `exportKeyingMaterial`): both ends
 * derive it from the handshake, it differs on every connection and no third party knows it. So
 * the secret never crosses the wire, even inside TLS: a proof shows only that its sender holds the
 * secret on this one connection, and cannot be replayed on another or relayed by a man in the
 * middle (his two connections have two different exporters). A front end pointed at a wrong host
 * whose certificate the CA vouches for learns nothing it could use either, and the daemon's answer
 * proves to the front end that the daemon too holds the secret. A proof could be brute-forced
 * offline only for a guessable secret: the secret file must hold at least 32 bytes.
 *
 * The daemon reads exactly one 40-byte hello (nothing else is buffered, whatever arrives), compares
 * it in constant time, and closes a connection that sends more than the hello before it is
 * answered, a wrong hello, no TLS handshake within HELLO_TIMEOUT_MS of the TCP accept, or no hello
 * within HELLO_TIMEOUT_MS of the handshake (slowloris). A proven connection is handed to the
 * RPC server and served exactly as a Unix-socket connection (same framing, same server).
 */
import { createHmac, timingSafeEqual, X509Certificate } from 'node:crypto';
import type net from 'node:net';
import tls from 'node:tls';
import { VfsError } from '../errors.js';
import { DaemonClient } from './client.js';
import type { Logger } from './server.js';
import {
  formatDaemonAddress,
  type DaemonAddress,
  type DaemonTlsClientSettings,
  type DaemonTlsServerSettings,
  type ListenAddress,
  SettingsError,
} from './settings.js';

/** How long a connection may take for its TLS handshake (from the TCP accept), and then for its hello. */
export const HELLO_TIMEOUT_MS = 5000;

/**
 * Connections not yet proven (in the TLS handshake or before their hello) that one peer address,
 * and all peers together, may hold; beyond that a new one is closed at once. Security: each costs
 * a handshake's memory and CPU for up to two timeouts, so a peer opening thousands must not exhaust
 * the daemon; a proven connection no longer counts.
 */
export const MAX_UNPROVEN_PER_PEER = 32;
export const MAX_UNPROVEN = 256;

/**
 * Refused connections are logged at most once per this many ms: the first at once, the others counted
 * and summed up (by reason) in one line at the end of the window. A flood of connections must not
 * flood the log (it wrote 1,402 lines in 8 s).
 */
export const REFUSAL_LOG_MS = 10_000;

/** The log of refused connections, rate-limited (REFUSAL_LOG_MS). Every line carries `refused`, the count it stands for. */
class RefusalLog {
  private readonly counts = new Map<string, number>();
  private lastPeer: string | undefined;
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly log: Logger) {}

  /** `why` names the refusal (`connection refused: <reason>`, `TLS handshake refused`); `err` goes on a logged line only. */
  refused(peer: string | undefined, why: string, err?: string): void {
    if (this.timer === undefined) {
      this.log.info({ peer, refused: 1, ...(err === undefined ? {} : { err }) }, `daemon tcp: ${why}`);
      this.quiet();
      return;
    }
    this.counts.set(why, (this.counts.get(why) ?? 0) + 1);
    this.lastPeer = peer;
  }

  /** Ends the quiet window: one line for what was refused during it, and a new window if there was any. */
  private flush(): void {
    this.timer = undefined;
    if (this.counts.size === 0) return;
    let n = 0;
    for (const c of this.counts.values()) n += c;
    const reasons = [...this.counts].map(([why, c]) => `${c} × ${why}`).join('; ');
    this.log.info(
      { refused: n, last_peer: this.lastPeer },
      `daemon tcp: ${n} more connection${n === 1 ? '' : 's'} refused in the last ${REFUSAL_LOG_MS / 1000} s (${reasons})`,
    );
    this.counts.clear();
    this.quiet();
  }

  private quiet(): void {
    this.timer = setTimeout(() => this.flush(), REFUSAL_LOG_MS);
    this.timer.unref();
  }

  /** The listener closes: what is still counted is logged now. */
  close(): void {
    clearTimeout(this.timer);
    this.flush();
    clearTimeout(this.timer);
  }
}

const HELLO = Buffer.from('mdvfs/1\n');
const OK = Buffer.from('mdvfs ok');
const NO = Buffer.from('mdvfs no');
const MAC_BYTES = 32;
/** Every message of the handshake: an 8-byte tag and a 32-byte proof. */
const MESSAGE_BYTES = 8 + MAC_BYTES;
const EXPORTER_LABEL = 'EXPORTER-mdvfs-daemon-secret';
const EXPORTER_CONTEXT = Buffer.from('mdvfs/1');

function proof(secret: Buffer, sock: tls.TLSSocket, role: 'front end' | 'daemon'): Buffer {
  const ekm = sock.exportKeyingMaterial(32, EXPORTER_LABEL, EXPORTER_CONTEXT);
  return createHmac('sha256', secret).update(role).update(Buffer.of(0)).update(ekm).digest();
}

/** Whether `msg` is `tag` ‖ `mac`, compared in constant time. */
function matches(msg: Buffer, tag: Buffer, mac: Buffer): boolean {
  const tagOk = timingSafeEqual(msg.subarray(0, 8), tag);
  const macOk = timingSafeEqual(msg.subarray(8, MESSAGE_BYTES), mac);
  return tagOk && macOk;
}

export interface TlsListener {
  /** The address bound (the port chosen when 0 was asked for). */
  address: ListenAddress;
  /** Stops listening and drops the connections still unproven (the proven ones belong to the RPC server). */
  close(): void;
  /**
   * Serves new connections with these settings' certificate, key and secret (the listen address
   * stays); connections already made keep theirs. Throws a SettingsError, changing nothing, when the
   * certificate and key are not a pair in PEM.
   */
  reload(settings: DaemonTlsServerSettings): void;
}

/**
 * Opens the daemon's TLS listener; every connection that proves the secret goes to `accept`
 * (the RPC server's), and nothing else does.
 */
export async function listenTls(
  settings: DaemonTlsServerSettings,
  accept: (sock: net.Socket) => void,
  log: Logger,
): Promise<TlsListener> {
  let { secret } = settings;
  warnUnlessSignedByCa(settings, log);
  const refusals = new RefusalLog(log);
  const unproven = new Set<tls.TLSSocket>();
  let server: tls.Server;
  try {
    server = tls.createServer({
      key: settings.key,
      cert: settings.cert,
      minVersion: 'TLSv1.3',
      // A peer slow in the TLS handshake is closed by node:tls, one slow with its hello by the timer below.
      handshakeTimeout: HELLO_TIMEOUT_MS,
    });
  } catch (err) {
    throw new SettingsError(
      `SERVICE_DAEMON_TLS_CERT and SERVICE_DAEMON_TLS_KEY are not a certificate and its private key in PEM (${(err as Error).message})`,
    );
  }
  // Unproven connections by peer address, each as the `address|port` it came from.
  const pending = new Map<string, Set<string>>();
  let pendingAll = 0;
  const keyOf = (sock: net.Socket): [string, string] => [
    sock.remoteAddress ?? '?',
    `${sock.remoteAddress ?? '?'}|${sock.remotePort ?? '?'}`,
  ];
  const proven = (sock: net.Socket): void => {
    const [peer, key] = keyOf(sock);
    const mine = pending.get(peer);
    if (mine?.delete(key) !== true) return;
    pendingAll--;
    if (mine.size === 0) pending.delete(peer);
  };
  server.on('connection', (raw: net.Socket) => {
    const [peer, key] = keyOf(raw);
    const mine = pending.get(peer) ?? new Set<string>();
    if (mine.size >= MAX_UNPROVEN_PER_PEER || pendingAll >= MAX_UNPROVEN) {
      refusals.refused(peer, 'connection refused: too many connections not yet proven');
      raw.destroy();
      return;
    }
    mine.add(key);
    pending.set(peer, mine);
    pendingAll++;
    raw.once('close', () => proven(raw));
  });
  server.on('tlsClientError', (err, sock) => {
    refusals.refused(sock.remoteAddress, 'TLS handshake refused', err.message);
    sock.destroy();
  });
  server.on('secureConnection', (sock: tls.TLSSocket) => {
    const peer = sock.remoteAddress;
    let got = Buffer.alloc(0);
    unproven.add(sock);
    const timer = setTimeout(() => refuse(`no hello within ${HELLO_TIMEOUT_MS} ms`, false), HELLO_TIMEOUT_MS);
    timer.unref();
    const settle = (): void => {
      clearTimeout(timer);
      unproven.delete(sock);
      sock.off('data', onData);
    };
    const refuse = (why: string, answer: boolean): void => {
      settle();
      refusals.refused(peer, `connection refused: ${why}`);
      if (!answer) {
        sock.destroy();
        return;
      }
      sock.end(Buffer.concat([NO, Buffer.alloc(MAC_BYTES)]));
      setTimeout(() => sock.destroy(), 1000).unref();
    };
    const onData = (chunk: Buffer): void => {
      got = Buffer.concat([got, chunk]);
      if (got.length < MESSAGE_BYTES) return;
      if (got.length > MESSAGE_BYTES) return refuse('it sent more than the hello before it was answered', false);
      if (!matches(got, HELLO, proof(secret, sock, 'front end')))
        return refuse('wrong hello (not the shared secret of SERVICE_DAEMON_SECRET_FILE)', true);
      settle();
      proven(sock);
      sock.pause();
      sock.write(Buffer.concat([OK, proof(secret, sock, 'daemon')]));
      accept(sock);
      sock.resume(); // paused above: a 'data' listener does not restart a stream paused by hand
    };
    sock.on('data', onData);
    sock.on('error', () => sock.destroy());
    sock.once('close', settle);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(settings.listen.port, settings.listen.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  server.on('error', (err) => log.error({ err: err.message }, 'daemon tcp listener'));
  const bound = server.address() as net.AddressInfo;
  return {
    address: { host: settings.listen.host, port: bound.port },
    close: () => {
      server.close();
      for (const s of unproven) s.destroy();
      refusals.close();
    },
    reload: (next) => {
      try {
        server.setSecureContext({ key: next.key, cert: next.cert, minVersion: 'TLSv1.3' });
      } catch (err) {
        throw new SettingsError(
          `SERVICE_DAEMON_TLS_CERT and SERVICE_DAEMON_TLS_KEY are not a certificate and its private key in PEM (${(err as Error).message})`,
        );
      }
      secret = next.secret;
      warnUnlessSignedByCa(next, log);
    },
  };
}

/** Front ends would refuse a certificate the CA did not issue: say so at start rather than on every connection. */
function warnUnlessSignedByCa(settings: DaemonTlsServerSettings, log: Logger): void {
  try {
    const cert = new X509Certificate(settings.cert);
    const ca = new X509Certificate(settings.ca);
    if (!cert.checkIssued(ca) || !cert.verify(ca.publicKey))
      log.error(
        { subject: cert.subject, ca: ca.subject },
        'SERVICE_DAEMON_TLS_CERT is not issued by SERVICE_DAEMON_TLS_CA: front ends that trust that CA will refuse this daemon',
      );
  } catch (err) {
    log.error(
      { err: (err as Error).message },
      'SERVICE_DAEMON_TLS_CERT or SERVICE_DAEMON_TLS_CA is not a PEM certificate',
    );
  }
}

/** TLS errors that mean the daemon's certificate is not one SERVICE_DAEMON_TLS_CA vouches for, for this host. */
const CERT_REFUSED = /CERT|ISSUER|SELF_SIGNED|UNABLE_TO_VERIFY|UNABLE_TO_GET|ALTNAME|SIGNATURE/;

/**
 * Connects to a daemon at a tls:// address: TLS 1.3 believing only the CA, the host name checked,
 * then the handshake above. A certificate refused or a secret refused is EACCES (retrying cannot
 * help); anything else (no answer, refused, closed) is the network's error.
 */
export function connectTls(
  addr: Extract<DaemonAddress, { kind: 'tls' }>,
  settings: DaemonTlsClientSettings,
): Promise<DaemonClient> {
  const where = formatDaemonAddress(addr);
  return new Promise((resolve, reject) => {
    const sock = tls.connect({ host: addr.host, port: addr.port, ca: settings.ca, minVersion: 'TLSv1.3' });
    // The kernel probes an idle link (the client's heartbeat finds a silent daemon sooner; see DaemonClient.watch).
    sock.setKeepAlive(true, 1000);
    let settled = false;
    const fail = (err: Error): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      sock.destroy();
      reject(err);
    };
    const timer = setTimeout(
      () =>
        fail(new VfsError('ETIMEDOUT', 'connect', where, `no TLS handshake and hello within ${HELLO_TIMEOUT_MS} ms`)),
      HELLO_TIMEOUT_MS,
    );
    timer.unref();
    const onError = (err: NodeJS.ErrnoException): void => {
      if (CERT_REFUSED.test(err.code ?? ''))
        fail(
          new VfsError(
            'EACCES',
            'connect',
            where,
            `refusing to talk to the daemon at ${where}: its certificate is not one SERVICE_DAEMON_TLS_CA vouches for, for ${addr.host} (${err.code})`,
          ),
        );
      else fail(err);
    };
    const onClose = (): void =>
      fail(new VfsError('EIO', 'connect', where, 'the daemon closed the connection during the handshake'));
    sock.on('error', onError);
    sock.once('close', onClose);
    sock.once('secureConnect', () => {
      sock.write(Buffer.concat([HELLO, proof(settings.secret, sock, 'front end')]));
      let got = Buffer.alloc(0);
      const onData = (chunk: Buffer): void => {
        got = Buffer.concat([got, chunk]);
        if (got.length < MESSAGE_BYTES) return;
        sock.off('data', onData);
        sock.pause();
        const answer = got.subarray(0, MESSAGE_BYTES);
        if (timingSafeEqual(answer.subarray(0, 8), NO))
          return fail(
            new VfsError(
              'EACCES',
              'connect',
              where,
              `the daemon at ${where} refused our shared secret: SERVICE_DAEMON_SECRET_FILE must hold the daemon's secret`,
            ),
          );
        if (!matches(answer, OK, proof(settings.secret, sock, 'daemon')))
          return fail(
            new VfsError(
              'EACCES',
              'connect',
              where,
              `refusing to talk to the daemon at ${where}: it did not prove the shared secret of SERVICE_DAEMON_SECRET_FILE`,
            ),
          );
        if (got.length > MESSAGE_BYTES) sock.unshift(got.subarray(MESSAGE_BYTES));
        settled = true;
        clearTimeout(timer);
        sock.off('error', onError);
        sock.off('close', onClose);
        const client = new DaemonClient(sock);
        sock.resume();
        resolve(client);
      };
      sock.on('data', onData);
    });
  });
}
