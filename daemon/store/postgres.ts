/**
 * Durable storage in PostgreSQL (SERVICE_STORE=postgres://…, DESIGN.md §8), through node-postgres
 * on one dedicated connection. The same logical tables as the SQLite store, created by numbered
 * migrations recorded in `mdvfs_migrations`.
 *
 * Group commit: the core mutates memory synchronously and records what changed; everything
 * recorded while the previous batch was being written becomes the next batch, written in one
 * transaction with synchronous_commit on, so no reply is sent before its change is durable in
 * PostgreSQL. The event loop never waits: batches are awaited, not blocked on.
 *
 * One active daemon per database (docs/deploy.md): a dedicated lease connection holds a session
 * advisory lock (released by PostgreSQL when the daemon dies, even by kill -9, or when the
 * connection stays idle past the lease timeout: a paused daemon) and the lease row's epoch, bumped by
 * every daemon that takes the lock. Every batch transaction first reads that row FOR SHARE and
 * writes nothing unless the epoch is still its own (fencing: a daemon that lost the lease, even one
 * that was merely paused, can never write again). Every batch also appends the keys it changed to
 * `changes` and notifies `mdvfs_changes`: standbys (other daemons on the same database) follow that
 * stream, keeping the stored rows in memory, and take over when the lock frees.
 */
import { randomUUID } from 'node:crypto';
import os from 'node:os';
import pg from 'pg';
import { VfsError } from '../errors.js';
import type { Node } from '../core/inode.js';
import type { Registry } from '../auth/registry.js';
import { DEFAULT_LEASE_TIMEOUT_MS, redactUrl } from '../rpc/settings.js';
import { verifyObject } from '../core/objects.js';
import { isWithin } from '../core/paths.js';
import type { StoreIdentity } from '../rpc/protocol.js';
import { isUnreachable } from './pg-errors.js';
import { daemonMetrics } from '../metrics.js';
import {
  applyRegistryRows,
  AuthRowDiff,
  BatchingJournal,
  inodeValues,
  isFresh,
  markRange,
  PendingChanges,
  registryRows,
  SCHEMA_VERSION,
  STORE_ID_KEY,
  StoredCheck,
  type DecodeRefs,
  type FsckResult,
  type InodeRow,
  type LoadedState,
  type MarkRow,
  type OpenedStore,
  type AuthTableChange,
  type RegistryRows,
  type StoreContents,
  type StoredObject,
} from './store.js';

/** The advisory lock key of an mdvfs store (one per database): 'mdvfs' as a number. */
const LOCK_KEY = 0x6d_64_76_66_73;
/** The transaction lock under which the schema is brought up to date (several daemons may start at once). */
const MIGRATE_KEY = LOCK_KEY + 1;
/** How long `open` waits for the lock: a killed daemon's session ends a moment after its death. */
const LOCK_WAIT_MS = 5000;
/** How often a standby tries the lock (and reads the stream's head for its lag). */
const STANDBY_POLL_MS = 200;
/** How often a standby reads the change stream when no notification came. */
const FOLLOW_POLL_MS = 1000;
/** The change stream's notification channel. */
const CHANNEL = 'mdvfs_changes';
/** The active daemon keeps this many change rows; a standby further behind reloads everything. */
const KEEP_CHANGES = 10000;
/** The active daemon trims the change stream every this many batches (and at its first). */
const TRIM_EVERY = 1000;
/** Objects per page when reading them all (load, fsck, migrate): bounded memory per round trip. */
const OBJECT_PAGE = 128;
/** Inode rows per page when a standby reads them all. */
const INODE_PAGE = 2000;
/** Rows and bytes per statement in a batch, so that no single parameter grows without bound. */
const ROWS_PER_STATEMENT = 5000;
const BYTES_PER_STATEMENT = 32 * 1024 * 1024;
/** How long a connection attempt may take before PostgreSQL counts as unreachable (a host that drops packets). */
const CONNECT_TIMEOUT_MS = 10_000;

/** Numbered schema migrations; each runs once, in its own transaction. Never edit one: add the next. */
const MIGRATIONS: string[] = [
  `CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
   CREATE TABLE inodes (
     id BIGINT PRIMARY KEY, parent BIGINT, name TEXT NOT NULL, kind TEXT NOT NULL,
     mode INTEGER NOT NULL, uid BIGINT NOT NULL, gid BIGINT NOT NULL,
     atime BIGINT NOT NULL, mtime BIGINT NOT NULL, ctime BIGINT NOT NULL, btime BIGINT NOT NULL,
     blob TEXT, size BIGINT NOT NULL DEFAULT 0, target TEXT);
   CREATE TABLE objects (id TEXT PRIMARY KEY, type TEXT NOT NULL, data BYTEA NOT NULL);
   CREATE TABLE users (uid BIGINT PRIMARY KEY, name TEXT UNIQUE NOT NULL, gid BIGINT NOT NULL, is_agent INTEGER NOT NULL, token_hash TEXT, created BIGINT NOT NULL);
   CREATE TABLE groups_ (gid BIGINT PRIMARY KEY, name TEXT UNIQUE NOT NULL, members TEXT NOT NULL);
   CREATE TABLE workspaces (id TEXT PRIMARY KEY, name TEXT NOT NULL, root TEXT NOT NULL, owner_uid BIGINT NOT NULL, created BIGINT NOT NULL);
   CREATE TABLE ws_tokens (hash TEXT PRIMARY KEY, workspace_id TEXT NOT NULL, name TEXT NOT NULL, agent_uid BIGINT NOT NULL, created BIGINT NOT NULL, id TEXT, agent_token_hash TEXT);
   CREATE TABLE refs (scope TEXT PRIMARY KEY, commit_id TEXT NOT NULL);`,
  // The lease (epoch fencing) and the change stream standbys follow (docs/deploy.md).
  `CREATE TABLE lease (id INTEGER PRIMARY KEY CHECK (id = 1), epoch BIGINT NOT NULL, holder TEXT NOT NULL, acquired_at TIMESTAMPTZ NOT NULL, trimmed BIGINT NOT NULL DEFAULT 0);
   INSERT INTO lease (id, epoch, holder, acquired_at) VALUES (1, 0, '', now());
   CREATE TABLE changes (seq BIGSERIAL PRIMARY KEY, epoch BIGINT NOT NULL, batch JSONB NOT NULL);`,
  // Who changed each path since its last commit (docs/vcs.md, Attribution), so a restart keeps it.
  `CREATE TABLE pending_attribution (path TEXT PRIMARY KEY, by_user TEXT NOT NULL, on_behalf_of TEXT, seq BIGINT NOT NULL, subtree BOOLEAN NOT NULL);`,
  // Tokens that expire, and delegation grants (docs/security.md, Delegation).
  `ALTER TABLE users ADD COLUMN token_expires BIGINT;
   CREATE TABLE delegations (user_uid BIGINT NOT NULL, agent_uid BIGINT NOT NULL, created BIGINT NOT NULL, PRIMARY KEY (user_uid, agent_uid));`,
];

/** What one batch changed, as keys: a standby reads the rows they name as they are now. */
interface ChangeKeys {
  /** Inodes written or removed. */
  i: number[];
  /** Objects written or removed. */
  o: string[];
  /** Refs set. */
  r: string[];
  /** The auth tables were rewritten. */
  a: boolean;
  /** Pending attribution: paths whose row was written or removed (absent in batches of older daemons). */
  m?: string[];
  /** Pending attribution: roots whose rows at and below were removed (a commit), before `m`. */
  f?: string[];
}

/** How a daemon stands with the lease: `sys.status` shows it. */
export interface LeaseStatus {
  role: 'active' | 'standby';
  /** The active daemon's epoch (a standby: the newest it has seen). */
  epoch: number;
  /** A standby: change batches committed and not yet applied to its memory (0 on the active daemon). */
  lag: number;
  /**
   * The change-stream position (`changes.seq`) of what this daemon's memory holds: a standby's last
   * batch applied; the active daemon's last batch committed (before its first, the stream's newest
   * when it took the lease).
   */
  applied: number;
  /** The newest position it knows was committed: a standby learns it from NOTIFY and its polls; the active daemon's is `applied`. */
  head: number;
  /** Who holds the lease (`host:pid`), as the standby last read it. */
  holder: string;
}

/**
 * What a standby is given as it follows: the rows that changed, as they are now (one snapshot of
 * the store); `full`: every row (the first read, or a reload), replacing whatever came before.
 */
export interface FollowedRows {
  full: boolean;
  inodes: InodeRow[];
  removedInodes: number[];
  objects: StoredObject[];
  removedObjects: string[];
  refs: [scope: string, commit: string][];
  removedRefs: string[];
}

/** Keeps the standby's memory current (daemon/warm.ts): each batch of rows once, in order. */
export interface FollowTarget {
  apply(rows: FollowedRows): Promise<void>;
}

/** What a standby keeps of the store besides its target's state: the identity rows and where it is in the stream. */
interface Mirror {
  target: FollowTarget;
  auth: RegistryRows;
  /** The pending attribution rows; undefined once a batch did not name its own (a takeover reads them). */
  marks: Map<string, MarkRow> | undefined;
  version: string | undefined;
  /** The last change applied; -1 until the first read of everything. */
  applied: number;
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

type Values = unknown[];

export class PostgresStore extends BatchingJournal implements OpenedStore {
  private waiters: { resolve: () => void; reject: (e: Error) => void }[] = [];
  private scheduled = false;
  private writing: Promise<void> | undefined;
  private closed = false;
  private failed: Error | undefined;
  private auth: RegistryRows | undefined;
  /** What identifies the store (read at connect; `identity()` adds the epoch). */
  private ident: StoreIdentity = { kind: 'postgres', id: '' };
  /** The identity rows this store holds, as last loaded or written. */
  private readonly authDiff = new AuthRowDiff();
  /** Our epoch while we lead; undefined on a standby. */
  private epoch: number | undefined;
  /** The newest epoch and holder seen in the lease row. */
  private seen = { epoch: 0, holder: '' };
  private head = 0;
  private nextTrim = 0;
  private mirror: Mirror | undefined;
  private timers: NodeJS.Timeout[] = [];
  private following: Promise<void> | undefined;
  private followAgain = false;
  registry: Registry | undefined;
  /**
   * Told when the store fails (the lease lost, PostgreSQL gone). A failure before anyone listens (a
   * lease connection ended while a big store loads) is told to the first listener, never thrown
   * where nothing catches it.
   */
  get onFatal(): (err: Error) => void {
    return this.fatalListener;
  }
  set onFatal(fn: (err: Error) => void) {
    this.fatalListener = fn;
    const failed = this.failed;
    if (failed !== undefined && !this.closed) queueMicrotask(() => fn(failed));
  }
  private fatalListener: (err: Error) => void = () => undefined;

  private constructor(
    private readonly client: pg.Client,
    private readonly lease: pg.Client,
    readonly where: string,
    private readonly leaseTimeoutMs: number,
  ) {
    super();
  }

  /** Connects, takes the lease (waiting a few seconds for it, else EBUSY) and brings the schema up to date. */
  static async open(url: string, leaseTimeoutMs = DEFAULT_LEASE_TIMEOUT_MS): Promise<PostgresStore> {
    const store = await PostgresStore.connect(url, leaseTimeoutMs);
    try {
      const deadline = Date.now() + LOCK_WAIT_MS;
      while (!(await store.tryLead())) {
        if (Date.now() > deadline)
          throw new VfsError(
            'EBUSY',
            'open store',
            store.where,
            `another mdvfs daemon (or mdvfs migrate) uses the PostgreSQL store at ${store.where}`,
          );
        await sleep(100);
      }
    } catch (err) {
      await store.close();
      throw err;
    }
    return store;
  }

  /**
   * Connects (a data connection and a lease connection) and brings the schema up to date, without
   * taking the lease: `tryLead` then makes this daemon the active one, or `follow` a standby.
   */
  static async connect(url: string, leaseTimeoutMs = DEFAULT_LEASE_TIMEOUT_MS): Promise<PostgresStore> {
    const where = redactUrl(url);
    const clients = [
      new pg.Client(clientConfig(url, 'mdvfs')),
      new pg.Client(clientConfig(url, 'mdvfs-lease')),
    ] as const;
    // Until the store takes over, a lost connection is an error of whatever awaits it.
    for (const c of clients) c.on('error', () => undefined);
    const endAll = (): Promise<unknown> => Promise.all(clients.map((c) => c.end().catch(() => undefined)));
    try {
      await Promise.all(clients.map((c) => c.connect()));
    } catch (err) {
      await endAll();
      // An outage is retried by the daemon; anything else (authentication, a missing database, a bad URL) is reported.
      if (isUnreachable(err)) throw unreachable(where, err);
      throw new VfsError(
        'EIO',
        'open store',
        where,
        `cannot connect to PostgreSQL at ${where}: ${(err as Error).message}`,
      );
    }
    const [client, lease] = clients;
    const store = new PostgresStore(client, lease, where, leaseTimeoutMs);
    try {
      // A transaction left open by a paused daemon would hold the lease row: the server ends it.
      await client.query(
        `SET synchronous_commit = on; SET idle_in_transaction_session_timeout = ${Math.ceil(leaseTimeoutMs)}`,
      );
      // The lease connection is never idle for long while its daemon runs (heartbeat, or a standby's
      // polls): a paused or unreachable daemon's session ends, and its lock with it.
      await lease.query(
        `SET idle_session_timeout = ${Math.ceil(leaseTimeoutMs)}; SET idle_in_transaction_session_timeout = ${Math.ceil(leaseTimeoutMs)}`,
      );
      await store.migrate();
      await store.readIdentity();
    } catch (err) {
      await endAll();
      if (err instanceof VfsError) throw err;
      if (isUnreachable(err)) throw unreachable(where, err);
      throw new VfsError(
        'EIO',
        'open store',
        where,
        `the PostgreSQL store at ${where} cannot be opened: ${(err as Error).message}`,
      );
    }
    for (const c of clients) c.removeAllListeners('error');
    client.on('error', (err) =>
      store.fail(
        new VfsError('EAGAIN', 'store', undefined, `lost the connection to PostgreSQL at ${where}: ${err.message}`),
      ),
    );
    lease.on('error', (err) => store.fail(store.leaseConnectionLost(err)));
    return store;
  }

  /**
   * Takes the lease if no other daemon holds it: the advisory lock on the lease connection, then a
   * new epoch. Everything this store writes from now on carries that epoch.
   */
  async tryLead(): Promise<boolean> {
    const r = await this.lease.query<{ ok: boolean; epoch: string; holder: string; head: string | null }>(
      'SELECT pg_try_advisory_lock($1) AS ok, l.epoch, l.holder, (SELECT max(seq) FROM changes) AS head FROM lease l WHERE l.id = 1',
      [LOCK_KEY],
    );
    const row = r.rows[0];
    if (row === undefined) throw new Error('the lease row is missing');
    this.seen = { epoch: Number(row.epoch), holder: row.holder };
    this.head = Number(row.head ?? 0);
    if (!row.ok) return false;
    const holder = `${os.hostname()}:${process.pid}`;
    const bumped = await this.lease.query<{ epoch: string }>(
      'UPDATE lease SET epoch = epoch + 1, holder = $1, acquired_at = now() WHERE id = 1 RETURNING epoch',
      [holder],
    );
    this.epoch = Number(bumped.rows[0]!.epoch);
    this.seen = { epoch: this.epoch, holder };
    // The heartbeat keeps the lease connection busy (so the server's idle timeout ends only a paused
    // daemon's session) and notices a lease taken over while this daemon was paused.
    const beat = setInterval(
      () => {
        this.lease.query<{ epoch: string }>('SELECT epoch FROM lease WHERE id = 1').then(
          (b) => {
            const now = Number(b.rows[0]?.epoch);
            if (now !== this.epoch) this.fail(this.leaseLost(now));
          },
          (err: Error) => this.fail(this.leaseConnectionLost(err)),
        );
      },
      Math.max(100, Math.floor(this.leaseTimeoutMs / 4)),
    );
    beat.unref();
    this.timers.push(beat);
    return true;
  }

  private leaseLost(stored: number): VfsError {
    return new VfsError(
      'EAGAIN',
      'store',
      undefined,
      `this daemon lost the lease of the PostgreSQL store at ${this.where}: its epoch is ${this.epoch}, the store's ${stored}; another daemon is active, so this one writes nothing and steps down`,
    );
  }

  private leaseConnectionLost(err: Error): VfsError {
    return new VfsError(
      'EAGAIN',
      'store',
      undefined,
      `lost the lease connection to PostgreSQL at ${this.where} (${err.message}); ${this.epoch === undefined ? 'a standby' : `epoch ${this.epoch}`} writes nothing until it has the lease again`,
    );
  }

  /** The role, epoch and lag for `sys.status`. */
  leaseStatus(): LeaseStatus {
    if (this.epoch !== undefined)
      return {
        role: 'active',
        epoch: this.epoch,
        lag: 0,
        applied: this.head,
        head: this.head,
        holder: this.seen.holder,
      };
    const m = this.mirror;
    const applied = Math.max(0, m?.applied ?? 0);
    return {
      role: 'standby',
      epoch: this.seen.epoch,
      // Until its first read of everything is applied, a standby is behind even on an empty stream.
      lag: m !== undefined && m.applied < 0 ? Math.max(1, this.head) : Math.max(0, this.head - applied),
      applied,
      head: Math.max(this.head, applied),
      holder: this.seen.holder,
    };
  }

  /** Makes the store's id (the first daemon to connect does) and reads what identifies the store. */
  private async readIdentity(): Promise<void> {
    await this.client.query('INSERT INTO meta (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING', [
      STORE_ID_KEY,
      randomUUID(),
    ]);
    const row = (
      await this.client.query<{ id: string; db: string }>(
        'SELECT (SELECT value FROM meta WHERE key = $1) AS id, current_database() AS db',
        [STORE_ID_KEY],
      )
    ).rows[0]!;
    let systemId: string | undefined;
    try {
      systemId = (
        await this.client.query<{ s: string }>('SELECT system_identifier::text AS s FROM pg_control_system()')
      ).rows[0]?.s;
    } catch {
      // not granted to this role: the store's id and the database name still identify it
    }
    this.ident = {
      kind: 'postgres',
      id: row.id,
      database: row.db,
      ...(systemId === undefined ? {} : { system_id: systemId }),
    };
  }

  identity(): StoreIdentity {
    return this.epoch === undefined ? this.ident : { ...this.ident, epoch: this.epoch };
  }

  /** Brings the schema up to date in one transaction, under a lock every starting daemon takes. */
  private async migrate(): Promise<void> {
    await this.transaction(async () => {
      await this.client.query('SELECT pg_advisory_xact_lock($1)', [MIGRATE_KEY]);
      await this.client.query(
        'CREATE TABLE IF NOT EXISTS mdvfs_migrations (version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())',
      );
      const r = await this.client.query<{ v: number | null }>('SELECT max(version) AS v FROM mdvfs_migrations');
      const current = r.rows[0]?.v ?? 0;
      if (current > MIGRATIONS.length)
        throw new Error(
          `its schema (migration ${current}) is newer than this mdvfs knows (${MIGRATIONS.length}); upgrade mdvfs`,
        );
      for (let v = current + 1; v <= MIGRATIONS.length; v++) {
        await this.client.query(MIGRATIONS[v - 1]!);
        await this.client.query('INSERT INTO mdvfs_migrations (version) VALUES ($1)', [v]);
      }
    });
  }

  private async transaction(fn: () => Promise<void>, begin = 'BEGIN'): Promise<void> {
    await this.client.query(begin);
    try {
      await fn();
      await this.client.query('COMMIT');
    } catch (err) {
      await this.client.query('ROLLBACK').catch(() => undefined);
      throw err;
    }
  }

  // ---------- standby ----------

  /**
   * Follows the change stream as a standby: gives `target` every stored row once (one snapshot),
   * then each committed batch's rows (notified, or read every second). Resolves once it listens:
   * the first read goes on meanwhile (a restarted daemon answers as a standby at once).
   */
  async follow(target: FollowTarget): Promise<void> {
    this.mirror = {
      target,
      auth: { users: [], groups: [], workspaces: [], wsTokens: [], delegations: [], meta: [] },
      marks: new Map(),
      version: undefined,
      applied: -1,
    };
    await this.client.query(`LISTEN ${CHANNEL}`);
    this.client.on('notification', (n) => {
      if (n.channel !== CHANNEL) return;
      this.head = Math.max(this.head, Number(n.payload ?? 0));
      this.catchUp();
    });
    const poll = setInterval(() => this.catchUp(), FOLLOW_POLL_MS);
    poll.unref();
    this.timers.push(poll);
    this.catchUp();
  }

  /** Waits until this standby holds the lease, then applies the stream to its end (nothing is written after the new epoch but by us). */
  async waitForLease(): Promise<void> {
    while (!this.closed && this.failed === undefined) {
      if (await this.tryLead()) {
        await this.settle();
        await this.client.query(`UNLISTEN ${CHANNEL}`);
        await this.applyChanges();
        return;
      }
      await sleep(STANDBY_POLL_MS);
    }
    throw this.failed ?? new VfsError('EIO', 'store', this.where, 'the store is closed');
  }

  /**
   * After `waitForLease`: the pending attribution, read now that the lease is ours (it is not
   * followed change by change), with the followed identity rows kept for `loadRegistry`; undefined
   * when the store held nothing yet (`warm`: the target loaded no tree), which `load` then starts.
   */
  async takeover(warm: boolean): Promise<Map<string, MarkRow> | undefined> {
    const m = this.mirror;
    this.mirror = undefined;
    if (m === undefined || m.applied < 0 || !warm) return undefined;
    if (m.version !== SCHEMA_VERSION)
      throw new VfsError(
        'EIO',
        'load store',
        this.where,
        `the store is corrupt: unknown schema version ${String(m.version)}. Refusing to start.`,
      );
    this.auth = m.auth;
    return m.marks ?? this.markRows();
  }

  /** One catch-up at a time; a request during one runs another after it. */
  private catchUp(): void {
    if (this.closed || this.failed !== undefined || this.epoch !== undefined) return;
    if (this.following !== undefined) {
      this.followAgain = true;
      return;
    }
    this.following = this.applyChanges()
      .catch((err: Error) =>
        this.fail(
          new VfsError('EIO', 'store', this.where, `a standby could not follow the change stream: ${err.message}`),
        ),
      )
      .finally(() => {
        this.following = undefined;
        if (this.followAgain) {
          this.followAgain = false;
          this.catchUp();
        }
      });
  }

  /** Waits for a catch-up in flight. */
  private async settle(): Promise<void> {
    this.followAgain = false;
    while (this.following !== undefined) await this.following;
  }

  /** Every stored row to the target, read in one snapshot with the stream position it matches. */
  private async reloadMirror(m: Mirror): Promise<void> {
    let rows: FollowedRows | undefined;
    let head = 0;
    let version: string | undefined;
    let auth: RegistryRows | undefined;
    let marks: Map<string, MarkRow> | undefined;
    await this.transaction(async () => {
      head = Number(
        (await this.client.query<{ head: string | null }>('SELECT max(seq) AS head FROM changes')).rows[0]?.head ?? 0,
      );
      version = (await this.client.query<{ value: string }>('SELECT value FROM meta WHERE key = $1', ['schema']))
        .rows[0]?.value;
      // A page at a time, so that no one result holds the event loop (the standby answers pings meanwhile).
      const inodes: InodeRow[] = [];
      for (let after = -1; ;) {
        const page = (
          await this.client.query<Record<string, string | null>>(
            'SELECT * FROM inodes WHERE id > $1 ORDER BY id LIMIT $2',
            [after, INODE_PAGE],
          )
        ).rows;
        for (const r of page) inodes.push(inodeRow(r));
        if (page.length < INODE_PAGE) break;
        after = inodes[inodes.length - 1]!.id;
      }
      const objects: StoredObject[] = [];
      for await (const o of this.objects()) {
        verifyObject(o.id, o.type, o.data);
        objects.push(o);
      }
      const refs = (await this.refRows()).map((r): [string, string] => [r.scope, r.commit_id]);
      auth = await this.authRows();
      marks = await this.markRows();
      rows = { full: true, inodes, removedInodes: [], objects, removedObjects: [], refs, removedRefs: [] };
    }, 'BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
    await m.target.apply(rows!);
    m.auth = auth!;
    m.marks = marks;
    m.version = version;
    m.applied = head;
    this.head = Math.max(this.head, head);
  }

  /**
   * Applies every batch committed after the last one applied: the rows they name, as they are now
   * (one snapshot), given to the target once read (the first time, or when the rows needed are
   * trimmed: everything).
   */
  private async applyChanges(): Promise<void> {
    const m = this.mirror;
    if (m === undefined) return;
    if (m.applied < 0) return this.reloadMirror(m);
    let reload = false;
    let changed:
      | {
          rows: FollowedRows;
          auth: RegistryRows | undefined;
          version: string | undefined;
          seq: number;
          marks: { forgotten: string[]; paths: string[]; rows: Map<string, MarkRow> } | undefined;
        }
      | undefined;
    await this.transaction(async () => {
      const trimmed = Number(
        (await this.client.query<{ trimmed: string }>('SELECT trimmed FROM lease WHERE id = 1')).rows[0]?.trimmed ?? 0,
      );
      if (trimmed > m.applied) {
        reload = true; // the rows we need are gone: read everything again
        return;
      }
      const batches = (
        await this.client.query<{ seq: string; batch: ChangeKeys }>(
          'SELECT seq, batch FROM changes WHERE seq > $1 ORDER BY seq',
          [m.applied],
        )
      ).rows;
      if (batches.length === 0) return;
      const inodes = new Set<number>();
      const objects = new Set<string>();
      const refs = new Set<string>();
      let auth = false;
      const marked = new Set<string>();
      const forgotten: string[] = [];
      let marksNamed = m.marks !== undefined;
      for (const r of batches) {
        for (const i of r.batch.i) inodes.add(i);
        for (const o of r.batch.o) objects.add(o);
        for (const s of r.batch.r) refs.add(s);
        auth ||= r.batch.a;
        if (r.batch.m === undefined) marksNamed = false;
        for (const p of r.batch.m ?? []) marked.add(p);
        forgotten.push(...(r.batch.f ?? []));
      }
      const paths = [...marked];
      const markRows = new Map<string, MarkRow>();
      for (let i = 0; marksNamed && i < paths.length; i += ROWS_PER_STATEMENT)
        for (const [path, row] of await this.markRows(paths.slice(i, i + ROWS_PER_STATEMENT))) markRows.set(path, row);
      const ids = [...inodes];
      const found = new Map<number, InodeRow>();
      for (let i = 0; i < ids.length; i += ROWS_PER_STATEMENT) {
        for (const r of (
          await this.client.query<Record<string, string | null>>('SELECT * FROM inodes WHERE id = ANY($1::bigint[])', [
            ids.slice(i, i + ROWS_PER_STATEMENT).map(String),
          ])
        ).rows)
          found.set(Number(r.id), inodeRow(r));
      }
      const oids = [...objects];
      const got = new Map<string, StoredObject>();
      for (let i = 0; i < oids.length; i += OBJECT_PAGE) {
        for (const o of (
          await this.client.query<StoredObject>('SELECT id, type, data FROM objects WHERE id = ANY($1::text[])', [
            oids.slice(i, i + OBJECT_PAGE),
          ])
        ).rows) {
          verifyObject(o.id, o.type, o.data);
          got.set(o.id, o);
        }
      }
      const scopes = (
        await this.client.query<{ scope: string; commit_id: string }>(
          'SELECT scope, commit_id FROM refs WHERE scope = ANY($1::text[])',
          [[...refs]],
        )
      ).rows;
      const setRefs = new Set(scopes.map((r) => r.scope));
      changed = {
        rows: {
          full: false,
          inodes: [...found.values()],
          removedInodes: ids.filter((id) => !found.has(id)),
          objects: [...got.values()],
          removedObjects: oids.filter((id) => !got.has(id)),
          refs: scopes.map((r): [string, string] => [r.scope, r.commit_id]),
          removedRefs: [...refs].filter((s) => !setRefs.has(s)),
        },
        auth: auth ? await this.authRows() : undefined,
        version: (await this.client.query<{ value: string }>('SELECT value FROM meta WHERE key = $1', ['schema']))
          .rows[0]?.value,
        seq: Number(batches[batches.length - 1]!.seq),
        marks: marksNamed ? { forgotten, paths, rows: markRows } : undefined,
      };
    }, 'BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
    if (reload) return this.reloadMirror(m);
    if (changed === undefined) return;
    // Nothing is applied before every read succeeded; a target that fails part way fails the store.
    await m.target.apply(changed.rows);
    if (changed.auth !== undefined) m.auth = changed.auth;
    const marks = changed.marks;
    if (marks === undefined) m.marks = undefined;
    else if (m.marks !== undefined) {
      // Removed roots first (a commit), then every path named, as it is now.
      for (const root of marks.forgotten) {
        if (root === '/') m.marks.clear();
        else for (const p of m.marks.keys()) if (isWithin(p, root)) m.marks.delete(p);
      }
      for (const p of marks.paths) {
        const row = marks.rows.get(p);
        if (row === undefined) m.marks.delete(p);
        else m.marks.set(p, row);
      }
    }
    m.version = changed.version;
    m.applied = changed.seq;
    this.head = Math.max(this.head, m.applied);
  }

  /** Reads everything; throws EIO (refusing to start) on any corruption. */
  async load(): Promise<LoadedState> {
    try {
      const version = (await this.client.query<{ value: string }>('SELECT value FROM meta WHERE key = $1', ['schema']))
        .rows[0]?.value;
      const count = Number(
        (await this.client.query<{ n: string }>('SELECT count(*) AS n FROM inodes')).rows[0]?.n ?? 0,
      );
      const users = Number((await this.client.query<{ n: string }>('SELECT count(*) AS n FROM users')).rows[0]?.n ?? 0);
      if (isFresh(version, count, users)) {
        await this.client.query(
          'INSERT INTO meta (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value',
          ['schema', SCHEMA_VERSION],
        );
        return { inodes: [], objects: [], refs: new Map(), marks: new Map(), fresh: true };
      }
      if (version !== SCHEMA_VERSION) throw new Error(`unknown schema version ${String(version)}`);
      const inodes = await this.inodeRows();
      const objects: StoredObject[] = [];
      for await (const r of this.objects()) {
        verifyObject(r.id, r.type, r.data);
        objects.push(r);
      }
      const refs = new Map<string, string>();
      for (const r of await this.refRows()) refs.set(r.scope, r.commit_id);
      this.auth = await this.authRows();
      return { inodes, objects, refs, marks: await this.markRows(), fresh: false };
    } catch (err) {
      throw new VfsError(
        'EIO',
        'load store',
        this.where,
        `the store is corrupt: ${(err as Error).message}. Refusing to start; run 'mdvfs fsck' on a copy or restore a backup.`,
      );
    }
  }

  async loadRegistry(reg: Registry): Promise<void> {
    applyRegistryRows(reg, this.auth ?? (await this.authRows()));
    this.auth = undefined;
    this.authDiff.prime(registryRows(reg));
  }

  async authRows(): Promise<RegistryRows> {
    const all = async <T extends pg.QueryResultRow>(
      sql: string,
      map: (r: Record<string, unknown>) => T,
    ): Promise<T[]> => (await this.client.query(sql)).rows.map(map);
    const num = (v: unknown): number => Number(v);
    const str = (v: unknown): string | null => (v === null ? null : String(v));
    return {
      users: await all('SELECT * FROM users ORDER BY uid', (r) => ({
        uid: num(r.uid),
        name: String(r.name),
        gid: num(r.gid),
        is_agent: num(r.is_agent),
        token_hash: str(r.token_hash),
        token_expires: r.token_expires === null ? null : num(r.token_expires),
        created: num(r.created),
      })),
      groups: await all('SELECT * FROM groups_ ORDER BY gid', (r) => ({
        gid: num(r.gid),
        name: String(r.name),
        members: String(r.members),
      })),
      workspaces: await all('SELECT * FROM workspaces ORDER BY id', (r) => ({
        id: String(r.id),
        name: String(r.name),
        root: String(r.root),
        owner_uid: num(r.owner_uid),
        created: num(r.created),
      })),
      wsTokens: await all('SELECT * FROM ws_tokens ORDER BY hash', (r) => ({
        hash: String(r.hash),
        id: str(r.id),
        workspace_id: String(r.workspace_id),
        name: String(r.name),
        agent_uid: num(r.agent_uid),
        agent_token_hash: str(r.agent_token_hash),
        created: num(r.created),
      })),
      delegations: await all('SELECT * FROM delegations ORDER BY user_uid, agent_uid', (r) => ({
        user_uid: num(r.user_uid),
        agent_uid: num(r.agent_uid),
        created: num(r.created),
      })),
      meta: await all(`SELECT key, value FROM meta WHERE key <> '${STORE_ID_KEY}' ORDER BY key`, (r) => ({
        key: String(r.key),
        value: String(r.value),
      })),
    };
  }

  /** Every stored object in id order, a page at a time. */
  async *objects(): AsyncIterable<StoredObject> {
    let after = '';
    for (;;) {
      const page = await this.client.query<StoredObject>(
        'SELECT id, type, data FROM objects WHERE id > $1 ORDER BY id LIMIT $2',
        [after, OBJECT_PAGE],
      );
      for (const r of page.rows) yield r;
      if (page.rows.length < OBJECT_PAGE) return;
      after = page.rows[page.rows.length - 1]!.id;
    }
  }

  async inodeRows(): Promise<InodeRow[]> {
    return (await this.client.query<Record<string, string | null>>('SELECT * FROM inodes ORDER BY id')).rows.map(
      inodeRow,
    );
  }

  /** The pending attribution rows (of `paths` only, when given). */
  async markRows(paths?: string[]): Promise<Map<string, MarkRow>> {
    const rows = (
      await this.client.query<{
        path: string;
        by_user: string;
        on_behalf_of: string | null;
        seq: string;
        subtree: boolean;
      }>(
        `SELECT path, by_user, on_behalf_of, seq, subtree FROM pending_attribution${paths === undefined ? '' : ' WHERE path = ANY($1::text[])'}`,
        paths === undefined ? [] : [paths],
      )
    ).rows;
    return new Map(
      rows.map((r) => [
        r.path,
        { by: r.by_user, on_behalf_of: r.on_behalf_of, seq: Number(r.seq), subtree: r.subtree },
      ]),
    );
  }

  async refRows(): Promise<{ scope: string; commit_id: string }[]> {
    return (
      await this.client.query<{ scope: string; commit_id: string }>('SELECT scope, commit_id FROM refs ORDER BY scope')
    ).rows;
  }

  // ---------- Journal ----------

  private hasPending(): boolean {
    return this.pending.any() || this.registry?.dirty === true;
  }

  protected schedule(): void {
    if (this.scheduled || this.closed) return;
    this.scheduled = true;
    if (this.writing === undefined) setImmediate(() => this.startWriting());
  }

  private startWriting(): void {
    if (this.writing !== undefined) return;
    this.writing = this.writeLoop().finally(() => {
      this.writing = undefined;
    });
  }

  /** Resolves when everything changed so far is durable in PostgreSQL. */
  durable(): Promise<void> {
    if (this.failed !== undefined) return Promise.reject(this.failed);
    if (this.closed) return Promise.reject(new VfsError('EIO', 'flush', undefined, 'the store is closed'));
    if (!this.hasPending() && !this.scheduled && this.writing === undefined) return Promise.resolve();
    return new Promise((resolve, reject) => {
      this.waiters.push({ resolve, reject });
      // A batch in flight may hold this caller's changes or not: the next round settles it either way.
      this.scheduled = false;
      this.schedule();
    });
  }

  /** Batches until nothing is pending; each waiter is released by the first batch that starts after it waited. */
  private async writeLoop(): Promise<void> {
    while (this.scheduled && this.failed === undefined) {
      this.scheduled = false;
      const waiters = this.waiters;
      this.waiters = [];
      try {
        if (this.hasPending()) {
          const t0 = process.hrtime.bigint();
          await this.writeBatch(this.takeBatch());
          daemonMetrics.storeBatches.observe(Number(process.hrtime.bigint() - t0) / 1e9);
        }
      } catch (err) {
        daemonMetrics.storeBatchErrors++;
        // Security: the batch is not durable, so none of its writes is acknowledged (their callers get the error).
        this.fail(
          err instanceof VfsError && err.code === 'EAGAIN'
            ? err
            : isUnreachable(err)
              ? new VfsError(
                  'EAGAIN',
                  'flush',
                  undefined,
                  `PostgreSQL at ${this.where} is unreachable (${(err as Error).message.replace(/^EAGAIN: /, '')}); the change was not made durable: retry once it is back`,
                )
              : new VfsError('EIO', 'flush', undefined, `could not write to the store: ${(err as Error).message}`),
          waiters,
        );
        return;
      }
      for (const w of waiters) w.resolve();
    }
  }

  private fail(e: Error, waiters: { reject: (e: Error) => void }[] = []): void {
    if (this.failed !== undefined || this.closed) {
      // The store failed (or closed) while this batch was in flight: its callers still get an answer.
      for (const w of waiters) w.reject(this.failed ?? e);
      return;
    }
    this.failed = e;
    for (const t of this.timers.splice(0)) clearInterval(t);
    for (const w of [...waiters, ...this.waiters.splice(0)]) w.reject(e);
    this.onFatal(e);
  }

  /** The pending changes as statement parameters, taken synchronously (later changes go to the next batch). */
  private takeBatch(): { statements: [string, Values][]; keys: ChangeKeys } {
    const p = this.pending;
    this.pending = new PendingChanges();
    const reg = this.registry?.dirty ? this.registry : undefined;
    if (reg !== undefined) reg.dirty = false;
    const out: [string, Values][] = [];
    if (p.deletedObjects.size > 0)
      out.push(['DELETE FROM objects WHERE id = ANY($1::text[])', [[...p.deletedObjects]]]);
    for (const chunk of chunks([...p.objects], (o) => o[1].data.length)) {
      out.push([
        'INSERT INTO objects (id, type, data) SELECT * FROM unnest($1::text[], $2::text[], $3::bytea[]) ON CONFLICT (id) DO NOTHING',
        columns(
          chunk.map(([id, o]) => [id, o.type, o.data]),
          3,
        ),
      ]);
    }
    if (p.deletedInodes.size > 0)
      out.push(['DELETE FROM inodes WHERE id = ANY($1::bigint[])', [[...p.deletedInodes].map(String)]]);
    for (const chunk of chunks([...p.inodes.values()], () => 0)) {
      const rows = chunk.map((n) => inodeValues(n).map((v) => (typeof v === 'bigint' ? v.toString() : v)));
      out.push([
        `INSERT INTO inodes (id, parent, name, kind, mode, uid, gid, atime, mtime, ctime, btime, blob, size, target)
         SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::text[], $5::int[], $6::bigint[], $7::bigint[], $8::bigint[], $9::bigint[], $10::bigint[], $11::bigint[], $12::text[], $13::bigint[], $14::text[])
         ON CONFLICT (id) DO UPDATE SET parent = EXCLUDED.parent, name = EXCLUDED.name, kind = EXCLUDED.kind, mode = EXCLUDED.mode, uid = EXCLUDED.uid, gid = EXCLUDED.gid,
           atime = EXCLUDED.atime, mtime = EXCLUDED.mtime, ctime = EXCLUDED.ctime, btime = EXCLUDED.btime, blob = EXCLUDED.blob, size = EXCLUDED.size, target = EXCLUDED.target`,
        columns(rows, 14),
      ]);
    }
    if (p.refs.size > 0)
      out.push([
        'INSERT INTO refs (scope, commit_id) SELECT * FROM unnest($1::text[], $2::text[]) ON CONFLICT (scope) DO UPDATE SET commit_id = EXCLUDED.commit_id',
        columns([...p.refs], 2),
      ]);
    // In byte order (COLLATE "C"), the order markRange is in, whatever the database's collation.
    for (const root of p.forgottenMarks)
      out.push(
        root === '/'
          ? ['DELETE FROM pending_attribution', []]
          : [
              'DELETE FROM pending_attribution WHERE path = $1 OR (path COLLATE "C" >= $2 AND path COLLATE "C" < $3)',
              [root, ...markRange(root)],
            ],
      );
    const unmarked = [...p.marks].filter(([, m]) => m === null).map(([path]) => path);
    if (unmarked.length > 0) out.push(['DELETE FROM pending_attribution WHERE path = ANY($1::text[])', [unmarked]]);
    out.push(...markStatements([...p.marks].flatMap(([path, m]) => (m === null ? [] : [[path, m] as const]))));
    if (reg !== undefined) out.push(...authStatements(this.authDiff.changes(registryRows(reg))));
    const keys: ChangeKeys = {
      i: [...p.deletedInodes, ...p.inodes.keys()],
      o: [...p.deletedObjects, ...p.objects.keys()],
      r: [...p.refs.keys()],
      a: reg !== undefined,
      m: [...p.marks.keys()],
      f: p.forgottenMarks,
    };
    return { statements: out, keys };
  }

  /**
   * One batch in one transaction, fenced: the first statement reads the lease row FOR SHARE (a new
   * leader's epoch bump waits for this commit, or this batch sees the new epoch and writes nothing),
   * and the last appends the batch's keys to the change stream and notifies the standbys (delivered
   * on commit only).
   */
  private async writeBatch({ statements, keys }: { statements: [string, Values][]; keys: ChangeKeys }): Promise<void> {
    let seq = 0;
    await this.transaction(async () => {
      const stored = Number(
        (await this.client.query<{ epoch: string }>('SELECT epoch FROM lease WHERE id = 1 FOR SHARE')).rows[0]?.epoch,
      );
      if (stored !== this.epoch) throw this.leaseLost(stored);
      for (const [sql, values] of statements) await this.client.query(sql, values);
      seq = Number(
        (
          await this.client.query<{ seq: string }>('INSERT INTO changes (epoch, batch) VALUES ($1, $2) RETURNING seq', [
            this.epoch,
            JSON.stringify(keys),
          ])
        ).rows[0]!.seq,
      );
      if (seq >= this.nextTrim) {
        // Sequence numbers may skip (a rolled-back batch used one): trimming goes by distance, not by multiples.
        await this.client.query('DELETE FROM changes WHERE seq <= $1', [seq - KEEP_CHANGES]);
        await this.client.query('UPDATE lease SET trimmed = greatest(trimmed, $1) WHERE id = 1', [seq - KEEP_CHANGES]);
        this.nextTrim = seq + TRIM_EVERY;
      }
      await this.client.query('SELECT pg_notify($1, $2)', [CHANNEL, String(seq)]);
    });
    this.head = Math.max(this.head, seq); // committed: what `sys.status` shows as committed_seq
  }

  /**
   * Runs `fn` on one consistent snapshot of the store, without the lease: `mdvfs migrate` from a
   * PostgreSQL store reads it this way while its daemons keep serving (a backup without downtime).
   */
  async snapshot<T>(fn: () => Promise<T>): Promise<T> {
    let out: { value: T } | undefined;
    await this.transaction(async () => {
      out = { value: await fn() };
    }, 'BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
    return out!.value;
  }

  /** Verifies what is stored, as a restart would load it (reads page by page: the event loop stays free). */
  async fsck(decodeRefs: DecodeRefs): Promise<FsckResult> {
    await this.durable();
    return this.exclusive(async () => {
      const check = new StoredCheck(decodeRefs);
      for await (const r of this.objects()) check.object(r);
      const rows = (await this.inodeRows()).map((r) => ({
        id: r.id,
        parent: r.parent,
        name: r.name,
        kind: r.kind,
        blob: r.blob,
      }));
      return check.finish(rows, await this.refRows());
    });
  }

  /**
   * Copies a whole store into this one (empty): objects, inodes, refs and the auth tables, in one
   * transaction (`mdvfs migrate`).
   */
  async importAll(src: StoreContents): Promise<void> {
    const n = Number(
      (
        await this.client.query<{ n: string }>(
          'SELECT (SELECT count(*) FROM inodes) + (SELECT count(*) FROM objects) + (SELECT count(*) FROM users) AS n',
        )
      ).rows[0]?.n ?? 0,
    );
    if (n > 0)
      throw new VfsError(
        'EEXIST',
        'migrate',
        this.where,
        `the PostgreSQL store at ${this.where} is not empty; migrate only into an empty database`,
      );
    await this.transaction(async () => {
      let batch: StoredObject[] = [];
      let bytes = 0;
      const flush = async (): Promise<void> => {
        if (batch.length === 0) return;
        await this.client.query(
          'INSERT INTO objects (id, type, data) SELECT * FROM unnest($1::text[], $2::text[], $3::bytea[])',
          columns(
            batch.map((o) => [o.id, o.type, o.data]),
            3,
          ),
        );
        batch = [];
        bytes = 0;
      };
      for await (const o of src.objects) {
        batch.push(o);
        bytes += o.data.length;
        if (batch.length >= ROWS_PER_STATEMENT || bytes >= BYTES_PER_STATEMENT) await flush();
      }
      await flush();
      for (let i = 0; i < src.inodes.length; i += ROWS_PER_STATEMENT) {
        const rows = src.inodes
          .slice(i, i + ROWS_PER_STATEMENT)
          .map((r) => [
            r.id,
            r.parent,
            r.name,
            r.kind,
            r.mode,
            r.uid,
            r.gid,
            r.atime.toString(),
            r.mtime.toString(),
            r.ctime.toString(),
            r.btime.toString(),
            r.blob,
            r.size,
            r.target,
          ]);
        await this.client.query(
          `INSERT INTO inodes (id, parent, name, kind, mode, uid, gid, atime, mtime, ctime, btime, blob, size, target)
           SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::text[], $5::int[], $6::bigint[], $7::bigint[], $8::bigint[], $9::bigint[], $10::bigint[], $11::bigint[], $12::text[], $13::bigint[], $14::text[])`,
          columns(rows, 14),
        );
      }
      if (src.refs.length > 0)
        await this.client.query(
          'INSERT INTO refs (scope, commit_id) SELECT * FROM unnest($1::text[], $2::text[])',
          columns(
            src.refs.map((r) => [r.scope, r.commit_id]),
            2,
          ),
        );
      const auth = new AuthRowDiff().changes(src.auth); // a first write: every table replaced
      for (const [sql, values] of [...authStatements(auth), ...markStatements([...src.marks])])
        await this.client.query(sql, values);
    });
  }

  /** Runs `fn` with no batch being written meanwhile (they share the one connection). */
  private async exclusive<T>(fn: () => Promise<T>): Promise<T> {
    while (this.writing !== undefined) await this.writing;
    const gate = fn();
    this.writing = gate.then(
      () => undefined,
      () => undefined,
    );
    try {
      return await gate;
    } finally {
      this.writing = undefined;
      if (this.scheduled) this.startWriting();
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    if (this.failed === undefined) {
      this.scheduled = this.scheduled || this.hasPending();
      if (this.scheduled) this.startWriting();
      while (this.writing !== undefined) await this.writing;
    }
    this.closed = true;
    for (const t of this.timers.splice(0)) clearInterval(t);
    for (const w of this.waiters.splice(0)) w.reject(new VfsError('EIO', 'flush', undefined, 'the store is closed'));
    await this.settle().catch(() => undefined);
    await Promise.all([this.client.end().catch(() => undefined), this.lease.end().catch(() => undefined)]);
  }
}

/** A node-pg client of the store: keepalive, and a bounded connection attempt (an outage, retried by the daemon). */
function clientConfig(url: string, name: string): pg.ClientConfig {
  return {
    connectionString: url,
    application_name: name,
    connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
    keepAlive: true,
  };
}

/** The error of a store that cannot reach PostgreSQL now: EAGAIN, as HTTP's 503 (the daemon retries). */
function unreachable(where: string, err: unknown): VfsError {
  return new VfsError(
    'EAGAIN',
    'open store',
    undefined,
    `PostgreSQL at ${where} is unreachable: ${(err as Error).message || String((err as { code?: unknown }).code)}`,
  );
}

/** An inode row as node-postgres gives it (bigints as strings). */
function inodeRow(x: Record<string, string | null>): InodeRow {
  const n = (v: string | null): number => Number(v);
  return {
    id: n(x.id!),
    parent: x.parent === null ? null : n(x.parent!),
    name: x.name!,
    kind: x.kind as Node['kind'],
    mode: n(x.mode!),
    uid: n(x.uid!),
    gid: n(x.gid!),
    atime: BigInt(x.atime!),
    mtime: BigInt(x.mtime!),
    ctime: BigInt(x.ctime!),
    btime: BigInt(x.btime!),
    blob: x.blob ?? null,
    size: n(x.size!),
    target: x.target ?? null,
  };
}

/** Statements writing pending attribution rows (a path's newer row replaces its older one). */
function markStatements(marks: readonly (readonly [string, MarkRow])[]): [string, Values][] {
  const rows = marks.map(([path, m]) => [path, m.by, m.on_behalf_of, String(m.seq), m.subtree]);
  const out: [string, Values][] = [];
  for (let i = 0; i < rows.length; i += ROWS_PER_STATEMENT)
    out.push([
      `INSERT INTO pending_attribution (path, by_user, on_behalf_of, seq, subtree)
       SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::boolean[])
       ON CONFLICT (path) DO UPDATE SET by_user = EXCLUDED.by_user, on_behalf_of = EXCLUDED.on_behalf_of, seq = EXCLUDED.seq, subtree = EXCLUDED.subtree`,
      columns(rows.slice(i, i + ROWS_PER_STATEMENT), 5),
    ]);
  return out;
}

/**
 * Statements for the identity rows that changed (AuthRowDiff), generic over the tables: rows travel
 * as JSON and take the table's own column types (json_populate_recordset).
 */
function authStatements(changes: AuthTableChange[]): [string, Values][] {
  const out: [string, Values][] = [];
  for (const t of changes) {
    const rowsOf = `json_populate_recordset(NULL::${t.table}, $1::json)`;
    if (t.replaceAll) out.push([`DELETE FROM ${t.table}`, []]);
    const key = t.keys.join(', ');
    if (t.deletes.length > 0)
      out.push([
        `DELETE FROM ${t.table} WHERE (${key}) IN (SELECT ${key} FROM ${rowsOf})`,
        [JSON.stringify(t.deletes)],
      ]);
    const first = t.upserts[0];
    if (first === undefined) continue;
    const cols = Object.keys(first);
    const set = cols.filter((c) => !t.keys.includes(c)).map((c) => `${c} = EXCLUDED.${c}`);
    out.push([
      `INSERT INTO ${t.table} (${cols.join(', ')}) SELECT ${cols.join(', ')} FROM ${rowsOf}
       ON CONFLICT (${key}) DO ${set.length === 0 ? 'NOTHING' : `UPDATE SET ${set.join(', ')}`}`,
      [JSON.stringify(t.upserts)],
    ]);
  }
  return out;
}

/** Rows as one array per column (the parameters of an `unnest` insert). */
function columns(rows: unknown[][], width: number): unknown[][] {
  const out: unknown[][] = Array.from({ length: width }, () => []);
  for (const r of rows) for (let i = 0; i < width; i++) out[i]!.push(r[i] ?? null);
  return out;
}

/** Splits items into statements of at most ROWS_PER_STATEMENT rows and about BYTES_PER_STATEMENT bytes. */
function chunks<T>(items: T[], size: (item: T) => number): T[][] {
  const out: T[][] = [];
  let cur: T[] = [];
  let bytes = 0;
  for (const item of items) {
    if (cur.length > 0 && (cur.length >= ROWS_PER_STATEMENT || bytes + size(item) > BYTES_PER_STATEMENT)) {
      out.push(cur);
      cur = [];
      bytes = 0;
    }
    cur.push(item);
    bytes += size(item);
  }
  if (cur.length > 0) out.push(cur);
  return out;
}
