/**
 * What the daemon counts about itself for `sys.metrics` (and so `GET /metrics`): one set per
 * process, updated where things happen (the socket server, the stores' batches, the lease).
 */
import { Histogram } from './rpc/metrics.js';
import type { LeaseState } from './rpc/protocol.js';

export const daemonMetrics = {
  /** Socket requests received and not yet answered (the daemon's queue). */
  rpcInFlight: 0,
  /** Socket requests answered since start. */
  rpcRequests: 0,
  /** Seconds each store batch (one group-commit transaction) took to be written. */
  storeBatches: new Histogram(),
  /** Store batches that failed. */
  storeBatchErrors: 0,
  state: 'active' as LeaseState,
  /** Times this daemon took the lease from standby. */
  takeovers: 0,
  /** Times this daemon lost PostgreSQL (or the lease) and reconnected. */
  storeReconnects: 0,
};
