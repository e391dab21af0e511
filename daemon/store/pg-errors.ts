/**
 * Which PostgreSQL failures are an outage (retried forever, docs/deploy.md) and which are a
 * configuration error (reported at once): a daemon rides out the first and stops on the second.
 * No import of node-pg here, so that a SQLite daemon can ask too.
 */
import { VfsError } from '../errors.js';

/** Socket errors of a server that is down, restarting, or out of reach. */
const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'ENOENT', // a Unix socket whose server is stopped
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'EHOSTDOWN',
  'ENETUNREACH',
  'ENETDOWN',
  'EPIPE',
  'EAI_AGAIN', // a name server that does not answer (ENOTFOUND, an unknown host, is a configuration error)
]);

/**
 * SQLSTATEs of a server going away or not ready yet: connection exceptions (class 08), admin,
 * crash and idle-session shutdowns, "the database system is starting up / shutting down", and too
 * many connections. Authentication (28xxx) and a missing database (3D000) are configuration errors.
 */
const SERVER_CODES = new Set(['57P01', '57P02', '57P03', '57P05', '53300', '53400']);

/** node-pg's own messages for a connection that ended or never came up in time. */
const CLIENT_MESSAGES =
  /Connection terminated|connection timeout|timeout expired|Query read timeout|not queryable|Connection closed/i;

/** Whether `err` (a node-pg or socket error, or a store error made from one) means PostgreSQL is unreachable for now. */
export function isUnreachable(err: unknown): boolean {
  // The store's own errors for an outage are EAGAIN ("try again"), as HTTP's 503.
  if (err instanceof VfsError) return err.code === 'EAGAIN';
  if (typeof err !== 'object' || err === null) return false;
  const e = err as { code?: unknown; message?: unknown; errors?: unknown };
  if (typeof e.code === 'string' && (NETWORK_CODES.has(e.code) || SERVER_CODES.has(e.code) || e.code.startsWith('08')))
    return true;
  // Node's AggregateError of a host name with several addresses (IPv4 and IPv6), none answering.
  if (Array.isArray(e.errors) && e.errors.length > 0 && e.errors.every((x) => isUnreachable(x))) return true;
  return typeof e.message === 'string' && CLIENT_MESSAGES.test(e.message) && typeof e.code !== 'string';
}
