/**
 * `GET /metrics`: Prometheus text of this HTTP worker (its requests by route class and status,
 * their latencies, its daemon queue and connections) and of the daemon (`sys.metrics`: its queue,
 * store batch times, lease state and epoch, takeovers). The daemon checks the caller as for every
 * admin route (root or wheel), so the page is protected exactly like `/admin/*`. Every sample
 * carries `worker`: with several workers a scrape shows the one that answered (docs/deploy.md).
 */
import type { AppClient } from '../daemon/rpc/reconnecting.js';
import { Exposition, Histogram } from '../daemon/rpc/metrics.js';
import { LEASE_STATES, type DaemonMetrics } from '../daemon/rpc/protocol.js';

/** The route classes requests are counted under: a bounded set, whatever paths clients send. */
const CLASSES = new Set([
  'fs',
  'vcs',
  'search',
  'tree',
  'admin',
  'auth',
  'workspaces',
  'events',
  'mcp',
  'health',
  'metrics',
  'openapi.json',
  'assets',
]);

/** The class of a request URL: its first path segment when known, `web` for the UI's page, else `other`. */
function routeClass(url: string): string {
  const first = /^\/([^/?#]*)/.exec(url)?.[1] ?? '';
  if (first === '' || first === 'index.html') return 'web';
  return CLASSES.has(first) ? first : 'other';
}

/**
 * Tests and `mdvfs serve` name the worker (MDVFS_WORKER, internal: the worker's slot, 1..N, stable
 * across its restarts); a lone `mdvfs http` is worker 1.
 */
const WORKER = /^\d{1,3}$/.test(process.env.MDVFS_WORKER ?? '') ? process.env.MDVFS_WORKER! : '1';

const startSeconds = Math.floor(Date.now() / 1000);
const requests = new Map<string, { route: string; status: string; n: number }>();
const latency = new Map<string, Histogram>();
let inFlight = 0;
let daemonConnects = 0;

/** A request began (its end is `requestDone`). */
export function requestStarted(): void {
  inFlight++;
}

/** A request ended with `status` after `seconds`. */
export function requestDone(path: string, status: number, seconds: number): void {
  inFlight--;
  const route = routeClass(path);
  const key = `${route} ${status}`;
  const c = requests.get(key);
  if (c === undefined) requests.set(key, { route, status: String(status), n: 1 });
  else c.n++;
  let h = latency.get(route);
  if (h === undefined) latency.set(route, (h = new Histogram()));
  h.observe(seconds);
}

/** This worker connected to a daemon (at start, and again after each reconnect or failover). */
export function daemonConnected(): void {
  daemonConnects++;
}

/** The exposition for one scrape: this worker's metrics, then the daemon's. */
export function exposition(client: Pick<AppClient, 'inFlight'>, d: DaemonMetrics): string {
  const e = new Exposition({ worker: WORKER });
  e.gauge('mdvfs_http_start_time_seconds', 'When this HTTP worker started (Unix seconds); a change means a restart.', [
    { value: startSeconds },
  ]);
  e.counter(
    'mdvfs_http_requests_total',
    'HTTP requests answered by this worker, by route class and status.',
    [...requests.values()].map((c) => ({ labels: { route: c.route, status: c.status }, value: c.n })),
  );
  e.histogram(
    'mdvfs_http_request_duration_seconds',
    'Time from a request to its response, by route class.',
    [...latency].map(([route, h]) => ({ labels: { route }, h: h.snapshot() })),
  );
  e.gauge('mdvfs_http_requests_in_flight', 'HTTP requests this worker is serving.', [{ value: inFlight }]);
  e.gauge('mdvfs_http_daemon_requests_in_flight', "This worker's requests sent to the daemon and not yet answered.", [
    { value: client.inFlight },
  ]);
  e.counter(
    'mdvfs_http_daemon_connects_total',
    'Connections this worker made to a daemon: 1 at start, one more per reconnect (failover).',
    [{ value: daemonConnects }],
  );
  e.gauge('mdvfs_daemon_uptime_seconds', 'Seconds since the daemon started.', [{ value: d.uptime }]);
  e.gauge('mdvfs_daemon_clients', 'Open connections to the daemon (front ends, CLI commands).', [{ value: d.clients }]);
  e.gauge('mdvfs_daemon_requests_in_flight', "The daemon's queue: socket requests received and not yet answered.", [
    { value: d.rpc_in_flight },
  ]);
  e.counter('mdvfs_daemon_requests_total', 'Socket requests the daemon answered.', [{ value: d.rpc_requests }]);
  e.histogram('mdvfs_store_batch_duration_seconds', 'Time to write one store batch (group commit).', [
    { h: d.store_batches },
  ]);
  e.counter('mdvfs_store_batch_errors_total', 'Store batches that could not be written.', [
    { value: d.store_batch_errors },
  ]);
  e.gauge(
    'mdvfs_lease_state',
    'The daemon serving this worker: 1 for its state (active, standby, waiting for PostgreSQL, degraded), 0 for the others.',
    LEASE_STATES.map((s) => ({
      labels: { state: s },
      value: d.lease_state === s ? 1 : 0,
    })),
  );
  e.gauge('mdvfs_lease_epoch', 'The PostgreSQL lease epoch (one more at each failover; 0 with SQLite).', [
    { value: d.lease_epoch },
  ]);
  e.counter('mdvfs_daemon_takeovers_total', 'Times this daemon took the lease as a standby (failovers to it).', [
    { value: d.takeovers },
  ]);
  e.counter('mdvfs_daemon_store_reconnects_total', 'Times this daemon lost PostgreSQL and reconnected.', [
    { value: d.store_reconnects },
  ]);
  return e.toString();
}
