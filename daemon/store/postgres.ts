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
 * One daemon per database: the connection holds a session advisory lock for as long as it lives
 * (released by PostgreSQL when the daemon dies, even by kill -9).
 */
import pg from 'pg';
import { VfsError } from '../errors.js';
import type { Node } from '../core/inode.js';
import type { Registry } from '../auth/registry.js';
import { redactUrl } from '../rpc/settings.js';
import { verifyObject } from '../core/objects.js';
import { applyRegistryRows, BatchingJournal, inodeValues, isFresh, PendingChanges, registryRows, SCHEMA_VERSION, StoredCheck, type DecodeRefs, type FsckResult, type InodeRow, type LoadedState, type OpenedStore, type RegistryRows, type StoredObject } from './store.js';

/** The advisory lock key of an mdvfs store (one per database): 'mdvfs' as a number. */
const LOCK_KEY = 0x6d_64_76_66_73;
/** How long to wait for the lock at start: a killed daemon's session ends a moment after its death. */
const LOCK_WAIT_MS = 5000;
/** Objects per page when reading them all (load, fsck, migrate): bounded memory per round trip. */
const OBJECT_PAGE = 128;
/** Rows and bytes per statement in a batch, so that no single parameter grows without bound. */
const ROWS_PER_STATEMENT = 5000;
const BYTES_PER_STATEMENT = 32 * 1024 * 1024;

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
];

type Values = unknown[];

export class PostgresStore extends BatchingJournal implements OpenedStore {
  private waiters: { resolve: () => void; reject: (e: Error) => void }[] = [];
  private scheduled = false;
  private writing: Promise<void> | undefined;
  private closed = false;
  private failed: Error | undefined;
  private auth: RegistryRows | undefined;
  registry: Registry | undefined;
  onFatal: (err: Error) => void = (err) => {
    throw err;
  };

  private constructor(private readonly client: pg.Client, readonly where: string) {
    super();
  }

  /** Connects, takes the store's lock and brings the schema up to date. */
  static async open(url: string): Promise<PostgresStore> {
    const where = redactUrl(url);
    const client = new pg.Client({ connectionString: url, application_name: 'mdvfs' });
    // Until the store takes over, a lost connection is an error of whatever awaits it.
    client.on('error', () => undefined);
    try {
      await client.connect();
    } catch (err) {
      throw new VfsError('EIO', 'open store', where, `cannot connect to PostgreSQL at ${where}: ${(err as Error).message}`);
    }
    const store = new PostgresStore(client, where);
    try {
      await client.query('SET synchronous_commit = on');
      await store.lock();
      await store.migrate();
    } catch (err) {
      await client.end().catch(() => undefined);
      if (err instanceof VfsError) throw err;
      throw new VfsError('EIO', 'open store', where, `the PostgreSQL store at ${where} cannot be opened: ${(err as Error).message}`);
    }
    client.removeAllListeners('error');
    client.on('error', (err) => store.fail(new VfsError('EIO', 'store', where, `lost the PostgreSQL connection: ${err.message}`)));
    return store;
  }

  private async lock(): Promise<void> {
    const deadline = Date.now() + LOCK_WAIT_MS;
    for (;;) {
      const r = await this.client.query<{ ok: boolean }>('SELECT pg_try_advisory_lock($1) AS ok', [LOCK_KEY]);
      if (r.rows[0]?.ok === true) return;
      if (Date.now() > deadline) throw new VfsError('EBUSY', 'open store', this.where, `another mdvfs daemon (or mdvfs migrate) uses the PostgreSQL store at ${this.where}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  private async migrate(): Promise<void> {
    await this.client.query('CREATE TABLE IF NOT EXISTS mdvfs_migrations (version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())');
    const r = await this.client.query<{ v: number | null }>('SELECT max(version) AS v FROM mdvfs_migrations');
    const current = r.rows[0]?.v ?? 0;
    if (current > MIGRATIONS.length) throw new Error(`its schema (migration ${current}) is newer than this mdvfs knows (${MIGRATIONS.length}); upgrade mdvfs`);
    for (let v = current + 1; v <= MIGRATIONS.length; v++) {
      await this.transaction(async () => {
        await this.client.query(MIGRATIONS[v - 1]!);
        await this.client.query('INSERT INTO mdvfs_migrations (version) VALUES ($1)', [v]);
      });
    }
  }

  private async transaction(fn: () => Promise<void>): Promise<void> {
    await this.client.query('BEGIN');
    try {
      await fn();
      await this.client.query('COMMIT');
    } catch (err) {
      await this.client.query('ROLLBACK').catch(() => undefined);
      throw err;
    }
  }

  /** Reads everything; throws EIO (refusing to start) on any corruption. */
  async load(): Promise<LoadedState> {
    try {
      const version = (await this.client.query<{ value: string }>('SELECT value FROM meta WHERE key = $1', ['schema'])).rows[0]?.value;
      const count = Number((await this.client.query<{ n: string }>('SELECT count(*) AS n FROM inodes')).rows[0]?.n ?? 0);
      const users = Number((await this.client.query<{ n: string }>('SELECT count(*) AS n FROM users')).rows[0]?.n ?? 0);
      if (isFresh(version, count, users)) {
        await this.client.query('INSERT INTO meta (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value', ['schema', SCHEMA_VERSION]);
        return { inodes: [], objects: [], refs: new Map(), fresh: true };
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
      return { inodes, objects, refs, fresh: false };
    } catch (err) {
      throw new VfsError('EIO', 'load store', this.where, `the store is corrupt: ${(err as Error).message}. Refusing to start; run 'mdvfs fsck' on a copy or restore a backup.`);
    }
  }

  async loadRegistry(reg: Registry): Promise<void> {
    applyRegistryRows(reg, this.auth ?? (await this.authRows()));
    this.auth = undefined;
  }

  async authRows(): Promise<RegistryRows> {
    const all = async <T extends pg.QueryResultRow>(sql: string, map: (r: Record<string, unknown>) => T): Promise<T[]> => (await this.client.query(sql)).rows.map(map);
    const num = (v: unknown): number => Number(v);
    const str = (v: unknown): string | null => (v === null ? null : String(v));
    return {
      users: await all('SELECT * FROM users ORDER BY uid', (r) => ({ uid: num(r.uid), name: String(r.name), gid: num(r.gid), is_agent: num(r.is_agent), token_hash: str(r.token_hash), created: num(r.created) })),
      groups: await all('SELECT * FROM groups_ ORDER BY gid', (r) => ({ gid: num(r.gid), name: String(r.name), members: String(r.members) })),
      workspaces: await all('SELECT * FROM workspaces ORDER BY id', (r) => ({ id: String(r.id), name: String(r.name), root: String(r.root), owner_uid: num(r.owner_uid), created: num(r.created) })),
      wsTokens: await all('SELECT * FROM ws_tokens ORDER BY hash', (r) => ({ hash: String(r.hash), id: str(r.id), workspace_id: String(r.workspace_id), name: String(r.name), agent_uid: num(r.agent_uid), agent_token_hash: str(r.agent_token_hash), created: num(r.created) })),
      meta: await all('SELECT key, value FROM meta ORDER BY key', (r) => ({ key: String(r.key), value: String(r.value) })),
    };
  }

  /** Every stored object in id order, a page at a time. */
  async *objects(): AsyncIterable<StoredObject> {
    let after = '';
    for (;;) {
      const page = await this.client.query<StoredObject>('SELECT id, type, data FROM objects WHERE id > $1 ORDER BY id LIMIT $2', [after, OBJECT_PAGE]);
      for (const r of page.rows) yield r;
      if (page.rows.length < OBJECT_PAGE) return;
      after = page.rows[page.rows.length - 1]!.id;
    }
  }

  async inodeRows(): Promise<InodeRow[]> {
    const r = await this.client.query<Record<string, string | null>>('SELECT * FROM inodes ORDER BY id');
    const n = (v: string | null): number => Number(v);
    return r.rows.map((x) => ({
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
    }));
  }

  async refRows(): Promise<{ scope: string; commit_id: string }[]> {
    return (await this.client.query<{ scope: string; commit_id: string }>('SELECT scope, commit_id FROM refs ORDER BY scope')).rows;
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
        if (this.hasPending()) await this.writeBatch(this.takeBatch());
      } catch (err) {
        this.fail(new VfsError('EIO', 'flush', undefined, `could not write to the store: ${(err as Error).message}`), waiters);
        return;
      }
      for (const w of waiters) w.resolve();
    }
  }

  private fail(e: Error, waiters: { reject: (e: Error) => void }[] = []): void {
    if (this.failed !== undefined || this.closed) return;
    this.failed = e;
    for (const w of [...waiters, ...this.waiters.splice(0)]) w.reject(e);
    this.onFatal(e);
  }

  /** The pending changes as statement parameters, taken synchronously (later changes go to the next batch). */
  private takeBatch(): [string, Values][] {
    const p = this.pending;
    this.pending = new PendingChanges();
    const reg = this.registry?.dirty ? this.registry : undefined;
    if (reg !== undefined) reg.dirty = false;
    const out: [string, Values][] = [];
    if (p.deletedObjects.size > 0) out.push(['DELETE FROM objects WHERE id = ANY($1::text[])', [[...p.deletedObjects]]]);
    for (const chunk of chunks([...p.objects], (o) => o[1].data.length)) {
      out.push(['INSERT INTO objects (id, type, data) SELECT * FROM unnest($1::text[], $2::text[], $3::bytea[]) ON CONFLICT (id) DO NOTHING', columns(chunk.map(([id, o]) => [id, o.type, o.data]), 3)]);
    }
    if (p.deletedInodes.size > 0) out.push(['DELETE FROM inodes WHERE id = ANY($1::bigint[])', [[...p.deletedInodes].map(String)]]);
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
    if (p.refs.size > 0) out.push(['INSERT INTO refs (scope, commit_id) SELECT * FROM unnest($1::text[], $2::text[]) ON CONFLICT (scope) DO UPDATE SET commit_id = EXCLUDED.commit_id', columns([...p.refs], 2)]);
    if (reg !== undefined) out.push(...authStatements(registryRows(reg)));
    return out;
  }

  private async writeBatch(statements: [string, Values][]): Promise<void> {
    await this.transaction(async () => {
      for (const [sql, values] of statements) await this.client.query(sql, values);
    });
  }

  /** Verifies what is stored, as a restart would load it (reads page by page: the event loop stays free). */
  async fsck(decodeRefs: DecodeRefs): Promise<FsckResult> {
    await this.durable();
    return this.exclusive(async () => {
      const check = new StoredCheck(decodeRefs);
      for await (const r of this.objects()) check.object(r);
      const rows = (await this.inodeRows()).map((r) => ({ id: r.id, parent: r.parent, name: r.name, kind: r.kind, blob: r.blob }));
      return check.finish(rows, await this.refRows());
    });
  }

  /**
   * Copies a whole store into this one (empty): objects, inodes, refs and the auth tables, in one
   * transaction (`mdvfs migrate`).
   */
  async importAll(src: { objects: AsyncIterable<StoredObject> | Iterable<StoredObject>; inodes: InodeRow[]; refs: { scope: string; commit_id: string }[]; auth: RegistryRows }): Promise<void> {
    const n = Number((await this.client.query<{ n: string }>('SELECT (SELECT count(*) FROM inodes) + (SELECT count(*) FROM objects) + (SELECT count(*) FROM users) AS n')).rows[0]?.n ?? 0);
    if (n > 0) throw new VfsError('EEXIST', 'migrate', this.where, `the PostgreSQL store at ${this.where} is not empty; migrate only into an empty database`);
    await this.transaction(async () => {
      let batch: StoredObject[] = [];
      let bytes = 0;
      const flush = async (): Promise<void> => {
        if (batch.length === 0) return;
        await this.client.query('INSERT INTO objects (id, type, data) SELECT * FROM unnest($1::text[], $2::text[], $3::bytea[])', columns(batch.map((o) => [o.id, o.type, o.data]), 3));
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
        const rows = src.inodes.slice(i, i + ROWS_PER_STATEMENT).map((r) => [r.id, r.parent, r.name, r.kind, r.mode, r.uid, r.gid, r.atime.toString(), r.mtime.toString(), r.ctime.toString(), r.btime.toString(), r.blob, r.size, r.target]);
        await this.client.query(
          `INSERT INTO inodes (id, parent, name, kind, mode, uid, gid, atime, mtime, ctime, btime, blob, size, target)
           SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::text[], $5::int[], $6::bigint[], $7::bigint[], $8::bigint[], $9::bigint[], $10::bigint[], $11::bigint[], $12::text[], $13::bigint[], $14::text[])`,
          columns(rows, 14),
        );
      }
      if (src.refs.length > 0) await this.client.query('INSERT INTO refs (scope, commit_id) SELECT * FROM unnest($1::text[], $2::text[])', columns(src.refs.map((r) => [r.scope, r.commit_id]), 2));
      for (const [sql, values] of authStatements(src.auth)) await this.client.query(sql, values);
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
    for (const w of this.waiters.splice(0)) w.reject(new VfsError('EIO', 'flush', undefined, 'the store is closed'));
    await this.client.end().catch(() => undefined);
  }
}

/** Statements that replace the auth tables and their meta rows with `rows`. */
function authStatements(rows: RegistryRows): [string, Values][] {
  return [
    ['DELETE FROM users', []],
    ['DELETE FROM groups_', []],
    ['DELETE FROM workspaces', []],
    ['DELETE FROM ws_tokens', []],
    ['INSERT INTO users (uid, name, gid, is_agent, token_hash, created) SELECT * FROM unnest($1::bigint[], $2::text[], $3::bigint[], $4::int[], $5::text[], $6::bigint[])', columns(rows.users.map((u) => [u.uid, u.name, u.gid, u.is_agent, u.token_hash, u.created]), 6)],
    ['INSERT INTO groups_ (gid, name, members) SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[])', columns(rows.groups.map((g) => [g.gid, g.name, g.members]), 3)],
    ['INSERT INTO workspaces (id, name, root, owner_uid, created) SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::bigint[])', columns(rows.workspaces.map((w) => [w.id, w.name, w.root, w.owner_uid, w.created]), 5)],
    [
      'INSERT INTO ws_tokens (hash, id, workspace_id, name, agent_uid, agent_token_hash, created) SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[], $6::text[], $7::bigint[])',
      columns(rows.wsTokens.map((t) => [t.hash, t.id, t.workspace_id, t.name, t.agent_uid, t.agent_token_hash, t.created]), 7),
    ],
    ['INSERT INTO meta (key, value) SELECT * FROM unnest($1::text[], $2::text[]) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value', columns(rows.meta.map((m) => [m.key, m.value]), 2)],
  ];
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
