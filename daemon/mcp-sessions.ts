/**
 * MCP over HTTP sessions, kept in the daemon so that every HTTP worker (SERVICE_HTTP_WORKERS) can
 * serve any session: a request, or the event stream, may land on a worker other than the one that
 * answered `initialize`. A session holds whose it is (a digest of the credentials that opened it),
 * whose cap it counts against, its resource subscriptions, and how many event streams are open on
 * it. Sessions live in memory: a daemon restart ends them (clients start a new one on 404).
 *
 * Resource notifications: every change is matched against every session's subscriptions here, as
 * it happens, and each match is kept in the session's buffer under the session's next event id
 * (the last `MAX_EVENTS`). A worker sends them on the session's stream with those ids, so a client
 * whose stream broke (its worker killed) sends `Last-Event-ID` on its next GET, on any worker, and
 * gets what it missed from the buffer.
 *
 * Bounds: the opening server's SERVICE_MCP_MAX_SESSIONS (in all, the last resort; beyond it new
 * sessions are refused, nobody is evicted), SERVICE_MCP_MAX_SESSIONS_PER_USER (all the sessions of
 * one user or agent, whatever token, workspace or delegation opened them) and
 * SERVICE_MCP_MAX_SESSIONS_PER_CLIENT (one credential): a user or client over its cap loses its own
 * least recently used session, those without an open stream first; SERVICE_MCP_SESSION_TTL (a
 * session without an open stream and no request for that long is closed), and at most
 * `MAX_SUBSCRIPTIONS` subscriptions and `MAX_STREAMS_PER_SESSION` open event streams per session.
 */
import { createHash, randomUUID, timingSafeEqual } from 'node:crypto';
import { VfsError } from './errors.js';
import type { Cred } from './core/perms.js';
import type { Creds, McpSubscription } from './rpc/protocol.js';
import { slicer, sortSliced } from './core/vfs.js';
import { affects } from './rpc/affects.js';

/** Resource subscriptions one session may hold. */
export const MAX_SUBSCRIPTIONS = 1000;
/**
 * Event streams (GET /mcp) open at once on one session: a client needs one, a few allow for
 * reconnects that overlap; with the per-user session cap this bounds one user's open streams.
 */
export const MAX_STREAMS_PER_SESSION = 4;
/** Resource notifications a session keeps for replay. */
export const MAX_EVENTS = 1000;
/** Changed paths one recorded notification keeps (for the worker's visibility check, which reads the first 64). */
const EVENT_PATHS = 65;

interface SessionEvent {
  id: number;
  subscription: McpSubscription;
  paths: string[];
}

interface Limits {
  idleMs: number;
  maxSessions: number;
  maxSessionsPerClient: number;
  maxSessionsPerUser: number;
}

interface McpSession {
  id: string;
  fingerprint: Buffer;
  client: string;
  user: string;
  idleMs: number;
  lastSeen: number;
  /** Event streams open on it, by connection id (a connection that closes takes its streams along). */
  streams: Map<number, number>;
  subscriptions: Map<string, McpSubscription>;
  /** Recent notifications (oldest first) and the last event id given. */
  events: SessionEvent[];
  lastEvent: number;
}

/** Security: a digest of the raw credentials, so the daemon never keeps a second copy of a token to compare. */
function fingerprint(c: Creds): Buffer {
  return createHash('sha256')
    .update(JSON.stringify([c.authorization ?? null, c.workspace ?? null, c.onBehalfOf ?? null]))
    .digest();
}

/**
 * Whose session cap a new session counts against: the authenticated identity (user, delegate,
 * workspace), so spelling the same credentials differently does not buy more sessions; anonymous
 * callers (who all share the empty credentials) count per address.
 */
function clientKey(c: Creds, cred: Cred, address: string): string {
  if (c.authorization === undefined) return `anon:${address}`;
  return JSON.stringify([cred.user.uid, cred.delegate?.uid ?? null, cred.workspace?.id ?? null]);
}

/**
 * Whose per-user cap a new session counts against: the authenticated user or agent alone, so that
 * its workspaces, its delegations and its token all draw on one budget (an agent acting for alice
 * counts as the agent, which holds the session). Anonymous callers count per address, as above.
 */
function userKey(c: Creds, cred: Cred, address: string): string {
  if (c.authorization === undefined) return `anon:${address}`;
  return `uid:${cred.user.uid}`;
}

const streamCount = (s: McpSession): number => {
  let n = 0;
  for (const v of s.streams.values()) n += v;
  return n;
};

export class McpSessions {
  private readonly sessions = new Map<string, McpSession>();
  private readonly byClient = new Map<string, Set<McpSession>>();
  private readonly byUser = new Map<string, Set<McpSession>>();
  private sweepEvery = 60_000;
  private sweeper: NodeJS.Timeout | null = null;

  /** Opens a session for `cred`; EBUSY when the server is full and neither the client nor its user is at its own cap. */
  open(creds: Creds, cred: Cred, address: string, limits: Limits): string {
    const key = clientKey(creds, cred, address);
    const user = userKey(creds, cred, address);
    const mine = this.byClient.get(key);
    const ours = this.byUser.get(user);
    // Security: a full server refuses new sessions instead of evicting other users' sessions. A
    // client or user already at its own cap may still start one (it replaces its own oldest).
    if (
      this.sessions.size >= limits.maxSessions &&
      (mine?.size ?? 0) < limits.maxSessionsPerClient &&
      (ours?.size ?? 0) < limits.maxSessionsPerUser
    ) {
      throw new VfsError(
        'EBUSY',
        'mcp session',
        undefined,
        `Too many MCP sessions on this server (SERVICE_MCP_MAX_SESSIONS=${limits.maxSessions}); close unused sessions (DELETE /mcp) or retry later`,
      );
    }
    const s: McpSession = {
      id: randomUUID(),
      fingerprint: fingerprint(creds),
      client: key,
      user,
      idleMs: limits.idleMs,
      lastSeen: Date.now(),
      streams: new Map(),
      subscriptions: new Map(),
      events: [],
      lastEvent: 0,
    };
    this.sessions.set(s.id, s);
    const set = mine ?? new Set<McpSession>();
    if (mine === undefined) this.byClient.set(key, set);
    set.add(s);
    const userSet = ours ?? new Set<McpSession>();
    if (ours === undefined) this.byUser.set(user, userSet);
    userSet.add(s);
    this.enforceCap(set, limits.maxSessionsPerClient, s);
    this.enforceCap(userSet, limits.maxSessionsPerUser, s);
    this.schedule(limits.idleMs);
    return s.id;
  }

  /**
   * The session `id` for the credentials presenting it: ENOENT when unknown (or expired), EPERM
   * when it belongs to other credentials. Counts as activity.
   */
  get(creds: Creds, id: string): McpSession {
    const s = this.sessions.get(id);
    if (s === undefined) throw new VfsError('ENOENT', 'mcp session', undefined, 'Session not found');
    // Security: the credential-switch attack. The session acts with its creator's identity, so a
    // request presenting other credentials must not ride on it.
    if (!timingSafeEqual(s.fingerprint, fingerprint(creds)))
      throw new VfsError(
        'EPERM',
        'mcp session',
        undefined,
        'This session belongs to another identity; start a new session with these credentials',
      );
    s.lastSeen = Date.now();
    return s;
  }

  subscriptions(s: McpSession): McpSubscription[] {
    return [...s.subscriptions.values()];
  }

  /** An event stream opened (+1) or closed (-1) on connection `conn`; ELIMIT beyond MAX_STREAMS_PER_SESSION. */
  stream(s: McpSession, conn: number, delta: 1 | -1): number {
    if (delta > 0 && streamCount(s) >= MAX_STREAMS_PER_SESSION)
      throw new VfsError(
        'ELIMIT',
        'mcp session',
        undefined,
        `this session already has ${MAX_STREAMS_PER_SESSION} event streams open (GET /mcp), as many as one session may; close one first`,
      );
    const n = Math.max(0, (s.streams.get(conn) ?? 0) + delta);
    if (n === 0) s.streams.delete(conn);
    else s.streams.set(conn, n);
    return streamCount(s);
  }

  /** A connection closed: its streams are gone. */
  dropConnection(conn: number): void {
    const now = Date.now();
    for (const s of this.sessions.values()) if (s.streams.delete(conn)) s.lastSeen = now; // its idle time starts now
  }

  subscribe(s: McpSession, sub: McpSubscription): number {
    if (!s.subscriptions.has(sub.uri) && s.subscriptions.size >= MAX_SUBSCRIPTIONS)
      throw new VfsError(
        'EBUSY',
        'resources/subscribe',
        undefined,
        `a session holds at most ${MAX_SUBSCRIPTIONS} subscriptions; unsubscribe from some first`,
      );
    s.subscriptions.set(sub.uri, sub);
    return s.subscriptions.size;
  }

  unsubscribe(s: McpSession, uri: string): number {
    s.subscriptions.delete(uri);
    return s.subscriptions.size;
  }

  close(id: string): boolean {
    const s = this.sessions.get(id);
    if (s === undefined) return false;
    this.sessions.delete(id);
    const mine = this.byClient.get(s.client);
    mine?.delete(s);
    if (mine?.size === 0) this.byClient.delete(s.client);
    const ours = this.byUser.get(s.user);
    ours?.delete(s);
    if (ours?.size === 0) this.byUser.delete(s.user);
    return true;
  }

  /**
   * Which subscriptions of sessions `ids` a change to `paths` may affect (see rpc/affects.ts), and
   * which sessions are gone. Security: one change event may name 100,000 paths and the sessions
   * 1,000 subscriptions each, so it is not the product of the two: each subscription costs a few set
   * lookups and one binary search, and the work yields to the event loop between slices.
   */
  async match(
    ids: readonly string[],
    paths: readonly string[],
  ): Promise<{ matches: { id: string; subscription: McpSubscription }[]; gone: string[] }> {
    const matches: { id: string; subscription: McpSubscription }[] = [];
    const gone: string[] = [];
    const changed = await ChangedPaths.of(paths);
    const pause = slicer();
    for (const id of ids) {
      const s = this.sessions.get(id);
      if (s === undefined) {
        gone.push(id);
        continue;
      }
      for (const sub of s.subscriptions.values()) {
        if (changed.affects(sub.global)) matches.push({ id, subscription: sub });
        await pause();
      }
    }
    return { matches, gone };
  }

  private recording: Promise<void> = Promise.resolve();

  /** Records the notifications a change causes, in every session with subscriptions (in order of the changes). */
  record(paths: readonly string[]): void {
    if (this.sessions.size === 0) return;
    this.recording = this.recording.then(() => this.recordNow(paths)).catch(() => undefined);
  }

  /** Resolves once every change reported so far is recorded. */
  recorded(): Promise<void> {
    return this.recording;
  }

  /** The session's notifications after `after` (none without it), its newest id, and whether some were dropped. */
  events(s: McpSession, after: number | undefined): { events: SessionEvent[]; head: number; lost: boolean } {
    if (after === undefined) return { events: [], head: s.lastEvent, lost: false };
    const oldest = s.events[0]?.id ?? s.lastEvent + 1;
    return {
      events: s.events.filter((e) => e.id > after),
      head: s.lastEvent,
      lost: after < oldest - 1 && after < s.lastEvent,
    };
  }

  private async recordNow(paths: readonly string[]): Promise<void> {
    const changed = await ChangedPaths.of(paths);
    const pause = slicer();
    for (const s of [...this.sessions.values()]) {
      for (const sub of s.subscriptions.values()) {
        await pause();
        if (!changed.affects(sub.global)) continue;
        const relevant: string[] = [];
        for (const p of paths) {
          if (affects(p, sub.global)) relevant.push(p);
          if (relevant.length >= EVENT_PATHS) break;
        }
        s.events.push({ id: ++s.lastEvent, subscription: sub, paths: relevant });
        if (s.events.length > MAX_EVENTS) s.events.shift();
      }
    }
  }

  get size(): number {
    return this.sessions.size;
  }

  /**
   * Security: a client (or user) over its cap loses its own least recently used sessions (those
   * without an open stream first), never another's, and never the one just opened.
   */
  private enforceCap(mine: Set<McpSession>, cap: number, keep: McpSession): void {
    while (mine.size > cap) {
      let victim: McpSession | undefined;
      let victimStreams = 0;
      for (const o of mine) {
        if (o === keep) continue;
        const n = streamCount(o);
        if (
          victim === undefined ||
          (n === 0 && victimStreams > 0) ||
          ((n === 0) === (victimStreams === 0) && o.lastSeen < victim.lastSeen)
        ) {
          victim = o;
          victimStreams = n;
        }
      }
      if (victim === undefined) break;
      this.close(victim.id);
    }
  }

  /** Sweeps idle sessions every half of the shortest TTL seen (1 s to 60 s). */
  private schedule(idleMs: number): void {
    const every = Math.min(60_000, Math.max(1000, idleMs / 2));
    if (this.sweeper !== null && every >= this.sweepEvery) return;
    if (this.sweeper !== null) clearInterval(this.sweeper);
    this.sweepEvery = every;
    this.sweeper = setInterval(() => this.sweep(), every);
    this.sweeper.unref();
  }

  private sweep(): void {
    const now = Date.now();
    for (const s of [...this.sessions.values()])
      if (streamCount(s) === 0 && now - s.lastSeen > s.idleMs) this.close(s.id);
  }
}

/** The paths of one change event, indexed to answer `affects(changed, watched)` for any of them at once. */
class ChangedPaths {
  private constructor(
    private readonly set: ReadonlySet<string>,
    private readonly sorted: readonly string[],
  ) {}

  static async of(paths: readonly string[]): Promise<ChangedPaths> {
    const set = new Set(paths);
    return new ChangedPaths(set, await sortSliced(set));
  }

  /** Does some changed path equal `watched`, lie inside it, or above it (or is either the root)? */
  affects(watched: string): boolean {
    if (this.set.size === 0) return false;
    if (watched === '/' || this.set.has('/') || this.set.has(watched)) return true;
    for (let i = watched.indexOf('/', 1); i !== -1; i = watched.indexOf('/', i + 1))
      if (this.set.has(watched.slice(0, i))) return true;
    const inside = `${watched}/`;
    let lo = 0;
    let hi = this.sorted.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.sorted[mid]! < inside) lo = mid + 1;
      else hi = mid;
    }
    return this.sorted[lo]?.startsWith(inside) ?? false;
  }
}
