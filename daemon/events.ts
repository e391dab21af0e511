/**
 * The change feed with attribution and resume (`events.subscribe`, REST's `GET /events`).
 *
 * Every change the core reports is recorded once, with an id, the time, and who made it (the
 * authenticated caller of the request that made it, and on whose behalf), in a bounded ring of the
 * last RING events. A subscription belongs to one connection and one set of credentials; it first
 * replays the ring after the id it names (`since`), then receives every new event.
 *
 * Security: filtering happens here, in the daemon, with the subscriber's own identity (delegation
 * and workspace included), never in a front end. A changed path is shown only if the subscriber may
 * read it, or may list its parent directory (where the entry's appearance, removal, size or time
 * shows anyway); changes inside a private directory below a readable one are never shown. Workspace
 * subscribers see workspace paths and nothing outside. Credentials are authenticated again whenever
 * identities change (`paths: []`), so a revoked token's subscription ends. An identity change (users,
 * groups, tokens, workspaces) names who made it, so it is shown only to subscribers who may list
 * users (`admin.userList`: root and wheel), never to others or to workspace secrets.
 *
 * Caps (docs/security.md, "Caps"): one user or agent holds at most `perUser` subscriptions, all its
 * credentials together (token, workspace secrets, delegations: an agent acting for alice counts as
 * the agent), beyond which it is refused with ELIMIT; the daemon holds at most `total` (EBUSY), a
 * last resort above any one user's cap (SERVICE_EVENTS_MAX_STREAMS[_PER_USER]).
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { VfsError } from './errors.js';
import { R, isAdminCred, type Cred } from './core/perms.js';
import { displayPath, isWithin, splitParent } from './core/paths.js';
import type { Vfs } from './core/vfs.js';
import type { Creds, FeedEvent } from './rpc/protocol.js';
import { DEFAULT_PRINCIPAL_CAPS } from './rpc/settings.js';

/** Events kept for resume (`since`); older ids answer `reset: true`. */
export const RING = 4096;
/**
 * Paths one event carries. A bigger change (a revert, a large copy) is recorded as `paths: []`
 * ("anything may have changed: reload"), so that filtering one event costs at most this many
 * permission checks per subscriber.
 */
export const EVENT_PATHS = 64;
/** Subscription caps: in the whole daemon (each costs up to EVENT_PATHS permission checks per change) and per user. */
export interface FeedCaps {
  total: number;
  perUser: number;
}

/**
 * The request being handled, for attribution: the RPC server runs every handler inside `run`, and
 * authentication stores the caller's identity in the slot. Changes made outside a request (start,
 * in-process calls) carry no author.
 */
export const requestScope = new AsyncLocalStorage<{ cred?: Cred }>();

interface Recorded {
  seq: number;
  time: number;
  /** Absolute paths; empty means "anything may have changed" (identities, groups, tokens). */
  paths: string[];
  /** A change of identities (users, groups, tokens, workspaces), shown only to those who may list users. */
  identity?: true;
  by?: string;
  onBehalfOf?: string;
}

interface Subscription {
  /** Whose cap it counts against: the authenticated user or agent's uid. */
  owner: number;
  creds: Creds;
  cred: Cred;
  push: (ev: FeedEvent) => void;
  end: (reason: string) => void;
}

export class EventFeed {
  /** Ids are `<boot>.<seq>`: a daemon restart changes `boot`, so an old id asks for a reset. */
  private readonly boot = Date.now().toString(36);
  private seq = 0;
  /** Event `seq` sits at `ring[seq % RING]`: a fixed array written in place (shifting a 4,096-entry array on every change cost ~20 µs a write). */
  private readonly ring: (Recorded | undefined)[] = new Array<Recorded | undefined>(RING);
  private readonly subs = new Map<string, Subscription>();
  /** Subscriptions per owner uid. */
  private readonly perOwner = new Map<number, number>();

  constructor(
    private readonly vfs: Vfs,
    private readonly authenticate: (creds: Creds) => Cred,
    private readonly caps: FeedCaps = {
      total: DEFAULT_PRINCIPAL_CAPS.eventStreams,
      perUser: DEFAULT_PRINCIPAL_CAPS.eventStreamsPerUser,
    },
  ) {
    vfs.onChange((paths) => this.record(paths));
  }

  /** The newest id (what a subscriber that wants only new events starts from). */
  get lastId(): string {
    return `${this.boot}.${this.seq}`;
  }

  private record(paths: string[]): void {
    const cred = requestScope.getStore()?.cred;
    const r: Recorded = { seq: ++this.seq, time: Date.now(), paths: paths.length > EVENT_PATHS ? [] : paths };
    if (paths.length === 0) r.identity = true;
    if (cred !== undefined) {
      r.by = cred.user.name;
      if (cred.delegate !== undefined) r.onBehalfOf = cred.delegate.name;
    }
    this.ring[r.seq % RING] = r;
    if (paths.length === 0) this.reauthenticate();
    for (const s of this.subs.values()) {
      const ev = this.view(s.cred, r);
      if (ev !== null) s.push(ev);
    }
  }

  /**
   * Adds subscription `key` (unique per connection) and replays what it missed since `since`.
   * Answers whether the gap could not be replayed (`reset`: the client must reload what it shows).
   */
  subscribe(
    key: string,
    creds: Creds,
    cred: Cred,
    since: string | undefined,
    push: (ev: FeedEvent) => void,
    end: (reason: string) => void,
  ): { last_id: string; reset: boolean } {
    if (this.subs.has(key))
      throw new VfsError('EEXIST', 'events.subscribe', undefined, 'subscription id in use on this connection');
    // Security: one user's streams count together, whichever credentials opened them, and stop
    // well below the daemon's total, so that one user can never take every stream.
    const owner = cred.user.uid;
    const held = this.perOwner.get(owner) ?? 0;
    if (held >= this.caps.perUser)
      throw new VfsError(
        'ELIMIT',
        'events.subscribe',
        undefined,
        `${cred.user.name} already holds ${held} event streams, as many as one user may (SERVICE_EVENTS_MAX_STREAMS_PER_USER=${this.caps.perUser}); close one first`,
      );
    if (this.subs.size >= this.caps.total)
      throw new VfsError(
        'EBUSY',
        'events.subscribe',
        undefined,
        `too many event subscriptions on this server (SERVICE_EVENTS_MAX_STREAMS=${this.caps.total}); try again later`,
      );
    let reset = false;
    if (since !== undefined && since !== '') {
      const m = /^([0-9a-z]+)\.(\d+)$/.exec(since);
      const seq = m === null ? -1 : Number(m[2]);
      const oldest = Math.max(1, this.seq - RING + 1);
      if (m === null || m[1] !== this.boot || seq > this.seq || seq < oldest - 1) reset = true;
      else {
        // Replay every event after `since`, oldest first.
        for (let i = seq + 1; i <= this.seq; i++) {
          const ev = this.view(cred, this.ring[i % RING]!);
          if (ev !== null) push(ev);
        }
      }
    }
    this.subs.set(key, { owner, creds, cred, push, end });
    this.perOwner.set(owner, held + 1);
    return { last_id: this.lastId, reset };
  }

  unsubscribe(key: string): boolean {
    const s = this.subs.get(key);
    if (s === undefined) return false;
    this.drop(key, s);
    return true;
  }

  private drop(key: string, s: Subscription): void {
    this.subs.delete(key);
    const n = (this.perOwner.get(s.owner) ?? 1) - 1;
    if (n <= 0) this.perOwner.delete(s.owner);
    else this.perOwner.set(s.owner, n);
  }

  get subscriptions(): number {
    return this.subs.size;
  }

  /** Ends every subscription (the daemon replaced its core): their front ends subscribe again and get a reset. */
  endAll(reason: string): void {
    const all = [...this.subs.values()];
    this.subs.clear();
    for (const s of all) s.end(reason);
  }

  /** After identities changed: refresh every subscriber's identity; end those no longer valid. */
  private reauthenticate(): void {
    for (const [key, s] of this.subs) {
      try {
        s.cred = this.authenticate(s.creds);
      } catch (err) {
        this.drop(key, s);
        s.end(err instanceof Error ? err.message : String(err));
      }
    }
  }

  /** What subscriber `cred` may see of one event, or null when nothing. */
  private view(cred: Cred, r: Recorded): FeedEvent | null {
    // Security: who changed which identity is for those who may list users (the rule of admin.userList).
    if (r.identity === true && !isAdminCred(cred)) return null;
    const jail = cred.workspace?.root;
    const shown: string[] = [];
    for (const p of r.paths) {
      if (jail !== undefined && !isWithin(p, jail)) continue;
      if (this.visible(cred, p)) shown.push(displayPath(p, jail));
    }
    if (r.paths.length > 0 && shown.length === 0) return null;
    const ev: FeedEvent = { id: `${this.boot}.${r.seq}`, time: r.time, paths: shown };
    if (r.by !== undefined) ev.by = r.by;
    if (r.onBehalfOf !== undefined) ev.on_behalf_of = r.onBehalfOf;
    return ev;
  }

  private visible(cred: Cred, abs: string): boolean {
    if (this.may(cred, abs)) return true;
    return abs !== '/' && this.may(cred, splitParent(abs).dir);
  }

  private may(cred: Cred, abs: string): boolean {
    try {
      this.vfs.access(cred, abs, R);
      return true;
    } catch {
      return false;
    }
  }
}
