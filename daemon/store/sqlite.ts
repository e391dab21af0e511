/**
 * Durable storage in SERVICE_DATA_DIR/store.db (SQLite via better-sqlite3, WAL mode).
 *
 * The core mutates memory synchronously and records what changed through the Journal interface;
 * `durable()` resolves once those changes are committed. All mutations that arrive within one
 * turn of the event loop share one transaction (group commit), so a burst of small writes costs
 * one fsync, and no reply is sent before its change is on disk.
 */
import Database from 'better-sqlite3';
import { chmodSync, closeSync, openSync } from 'node:fs';
import path from 'node:path';
import { VfsError } from '../errors.js';
import type { Journal } from '../core/blobs.js';
import type { Node } from '../core/inode.js';
import { MAX_DEPTH } from '../core/paths.js';
import type { GroupRow, Registry, UserRow, WorkspaceRow, WsTokenRow } from '../auth/registry.js';
import { verifyObject, type ObjectType } from './objects.js';

export const SCHEMA_VERSION = '1';

/** Storage behind one interface, so that another backend (e.g. PostgreSQL) can take over. */
export interface Store extends Journal {
  setRef(scope: string, commitId: string): void;
  durable(): Promise<void>;
  close(): void;
}

export interface LoadedState {
  inodes: InodeRow[];
  objects: { id: string; type: ObjectType; data: Buffer }[];
  refs: Map<string, string>;
  fresh: boolean;
}

export interface InodeRow {
  id: number;
  parent: number | null;
  name: string;
  kind: Node['kind'];
  mode: number;
  uid: number;
  gid: number;
  atime: bigint;
  mtime: bigint;
  ctime: bigint;
  btime: bigint;
  blob: string | null;
  size: number;
  target: string | null;
}

const SCHEMA = `
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS inodes (
  id INTEGER PRIMARY KEY, parent INTEGER, name TEXT NOT NULL, kind TEXT NOT NULL,
  mode INTEGER NOT NULL, uid INTEGER NOT NULL, gid INTEGER NOT NULL,
  atime INTEGER NOT NULL, mtime INTEGER NOT NULL, ctime INTEGER NOT NULL, btime INTEGER NOT NULL,
  blob TEXT, size INTEGER NOT NULL DEFAULT 0, target TEXT);
CREATE TABLE IF NOT EXISTS objects (id TEXT PRIMARY KEY, type TEXT NOT NULL, data BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS users (uid INTEGER PRIMARY KEY, name TEXT UNIQUE NOT NULL, gid INTEGER NOT NULL, is_agent INTEGER NOT NULL, token_hash TEXT, created INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS groups_ (gid INTEGER PRIMARY KEY, name TEXT UNIQUE NOT NULL, members TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS workspaces (id TEXT PRIMARY KEY, name TEXT NOT NULL, root TEXT NOT NULL, owner_uid INTEGER NOT NULL, created INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS ws_tokens (hash TEXT PRIMARY KEY, workspace_id TEXT NOT NULL, name TEXT NOT NULL, agent_uid INTEGER NOT NULL, created INTEGER NOT NULL, id TEXT, agent_token_hash TEXT);
CREATE TABLE IF NOT EXISTS refs (scope TEXT PRIMARY KEY, commit_id TEXT NOT NULL);
`;

type Fsync = 'full' | 'normal' | 'off';

export class SqliteStore implements Store {
  private readonly db: Database.Database;
  private pendingInodes = new Map<number, Node>();
  private deletedInodes = new Set<number>();
  private pendingObjects = new Map<string, { type: ObjectType; data: Buffer }>();
  private deletedObjects = new Set<string>();
  private pendingRefs = new Map<string, string>();
  private waiters: { resolve: () => void; reject: (e: Error) => void }[] = [];
  private scheduled = false;
  private closed = false;
  registry: Registry | undefined;
  /** Called when a batch could not be written: the daemon stops rather than diverge from disk. */
  onFatal: (err: Error) => void = (err) => {
    throw err;
  };

  constructor(readonly dataDir: string, fsync: Fsync = 'full') {
    const file = path.join(dataDir, 'store.db');
    try {
      // timeout 0: a second daemon fails at once instead of waiting 5 s on the lock and then
      // quietly taking over the data dir if the first one happens to stop meanwhile.
      // Security: SQLite gives the -wal and -shm files the main file's mode, so it is created 0600 first.
      closeSync(openSync(file, 'a', 0o600));
      this.db = new Database(file, { timeout: 0 });
      this.db.pragma('journal_mode = WAL');
      for (const f of [file, `${file}-wal`, `${file}-shm`]) {
        try {
          chmodSync(f, 0o600);
        } catch {
          // -shm is absent in exclusive locking mode
        }
      }
      // Security/durability: one daemon per data dir, enforced by SQLite's own file lock.
      this.db.pragma('locking_mode = EXCLUSIVE');
      this.db.pragma(`synchronous = ${fsync === 'full' ? 'FULL' : fsync === 'normal' ? 'NORMAL' : 'OFF'}`);
      this.db.pragma('foreign_keys = OFF');
      this.db.exec('BEGIN IMMEDIATE; COMMIT;'); // takes the exclusive lock now
      const check = this.db.pragma('quick_check', { simple: true });
      if (check !== 'ok') throw new Error(`integrity check failed: ${String(check)}`);
      this.db.exec(SCHEMA);
      // Stores made before workspace secrets had a public id and were bound to the agent's token.
      const wsCols = new Set((this.db.prepare('PRAGMA table_info(ws_tokens)').all() as { name: string }[]).map((c) => c.name));
      if (!wsCols.has('id')) this.db.exec('ALTER TABLE ws_tokens ADD COLUMN id TEXT');
      if (!wsCols.has('agent_token_hash')) this.db.exec('ALTER TABLE ws_tokens ADD COLUMN agent_token_hash TEXT');
    } catch (err) {
      const msg = (err as Error).message;
      if (/locked|busy/i.test(msg)) throw new VfsError('EBUSY', 'open store', dataDir, `another mdvfs daemon owns this data dir (${file} is locked)`);
      throw new VfsError('EIO', 'open store', dataDir, `the store ${file} is corrupt or unreadable: ${msg}. Refusing to start; restore it from a backup or move it away.`);
    }
  }

  /** Reads everything; throws EIO (refusing to start) on any corruption. */
  load(): LoadedState {
    try {
      const version = this.db.prepare('SELECT value FROM meta WHERE key = ?').pluck().get('schema') as string | undefined;
      const count = this.db.prepare('SELECT count(*) FROM inodes').pluck().get() as number;
      if (version === undefined && count === 0) {
        this.db.prepare('INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)').run('schema', SCHEMA_VERSION);
        return { inodes: [], objects: [], refs: new Map(), fresh: true };
      }
      if (version !== SCHEMA_VERSION) throw new Error(`unknown schema version ${String(version)}`);
      const inodes = (this.db.prepare('SELECT * FROM inodes ORDER BY id').safeIntegers(true).all() as Record<string, unknown>[]).map(rowToInode);
      const objects: LoadedState['objects'] = [];
      for (const r of this.db.prepare('SELECT id, type, data FROM objects').iterate() as Iterable<{ id: string; type: ObjectType; data: Buffer }>) {
        verifyObject(r.id, r.type, r.data);
        objects.push(r);
      }
      const refs = new Map<string, string>();
      for (const r of this.db.prepare('SELECT scope, commit_id FROM refs').all() as { scope: string; commit_id: string }[]) refs.set(r.scope, r.commit_id);
      return { inodes, objects, refs, fresh: false };
    } catch (err) {
      throw new VfsError('EIO', 'load store', this.dataDir, `the store is corrupt: ${(err as Error).message}. Refusing to start; run 'mdvfs fsck' on a copy or restore a backup.`);
    }
  }

  loadRegistry(reg: Registry): void {
    for (const r of this.db.prepare('SELECT * FROM users').all() as { uid: number; name: string; gid: number; is_agent: number; token_hash: string | null; created: number }[]) {
      reg.putUser({ uid: r.uid, name: r.name, gid: r.gid, isAgent: r.is_agent === 1, tokenHash: r.token_hash, created: r.created });
    }
    for (const r of this.db.prepare('SELECT * FROM groups_').all() as { gid: number; name: string; members: string }[]) {
      reg.putGroup({ gid: r.gid, name: r.name, members: new Set(JSON.parse(r.members) as number[]) });
    }
    for (const r of this.db.prepare('SELECT * FROM workspaces').all() as { id: string; name: string; root: string; owner_uid: number; created: number }[]) {
      reg.workspaces.set(r.id, { id: r.id, name: r.name, root: r.root, ownerUid: r.owner_uid, created: r.created });
    }
    for (const r of this.db.prepare('SELECT * FROM ws_tokens').all() as { hash: string; id: string | null; workspace_id: string; name: string; agent_uid: number; agent_token_hash: string | null; created: number }[]) {
      // An older row is bound to the agent's token of today, so the next rotation revokes it.
      const agentTokenHash = r.agent_token_hash ?? reg.users.get(r.agent_uid)?.tokenHash ?? null;
      reg.wsTokens.set(r.hash, { hash: r.hash, id: r.id ?? r.hash.slice(0, 16), workspaceId: r.workspace_id, name: r.name, agentUid: r.agent_uid, agentTokenHash, created: r.created });
    }
    const meta = this.db.prepare('SELECT key, value FROM meta').all() as { key: string; value: string }[];
    for (const m of meta) {
      if (m.key === 'next_uid') reg.nextUid = Math.max(reg.nextUid, Number(m.value));
      if (m.key === 'next_gid') reg.nextGid = Math.max(reg.nextGid, Number(m.value));
      if (m.key === 'bootstrapped' && m.value === '1') reg.bootstrapped = true;
    }
    // A store written before the flag existed: other users mean it was bootstrapped.
    if (reg.users.size > 1) reg.bootstrapped = true;
  }

  // ---------- Journal ----------

  inode(node: Node): void {
    this.pendingInodes.set(node.id, node);
    this.schedule();
  }

  inodeRemoved(id: number): void {
    this.pendingInodes.delete(id);
    this.deletedInodes.add(id);
    this.schedule();
  }

  object(id: string, type: ObjectType, payload: Buffer): void {
    this.deletedObjects.delete(id);
    this.pendingObjects.set(id, { type, data: payload });
    this.schedule();
  }

  objectRemoved(id: string): void {
    if (this.pendingObjects.delete(id)) {
      // never written; but an older copy may be on disk
    }
    this.deletedObjects.add(id);
    this.schedule();
  }

  setRef(scope: string, commitId: string): void {
    this.pendingRefs.set(scope, commitId);
    this.schedule();
  }

  /** Marks the auth tables for rewriting in the next batch. */
  authChanged(): void {
    this.schedule();
  }

  private hasPending(): boolean {
    return this.pendingInodes.size > 0 || this.deletedInodes.size > 0 || this.pendingObjects.size > 0 || this.deletedObjects.size > 0 || this.pendingRefs.size > 0 || this.registry?.dirty === true;
  }

  private schedule(): void {
    if (this.scheduled || this.closed) return;
    this.scheduled = true;
    setImmediate(() => this.flushNow());
  }

  /** Resolves when everything changed so far is on disk. */
  durable(): Promise<void> {
    if (!this.hasPending() && !this.scheduled) return Promise.resolve();
    return new Promise((resolve, reject) => {
      this.waiters.push({ resolve, reject });
      this.schedule();
    });
  }

  /** Writes one batch in one transaction and releases everyone waiting on it. */
  flushNow(): void {
    this.scheduled = false;
    const waiters = this.waiters;
    this.waiters = [];
    if (this.closed) {
      for (const w of waiters) w.reject(new VfsError('EIO', 'flush', undefined, 'the store is closed'));
      return;
    }
    if (this.hasPending()) {
      try {
        this.writeBatch();
      } catch (err) {
        const e = new VfsError('EIO', 'flush', undefined, `could not write to the store: ${(err as Error).message}`);
        for (const w of waiters) w.reject(e);
        this.onFatal(e);
        return;
      }
    }
    for (const w of waiters) w.resolve();
  }

  private stmts: Record<string, Database.Statement> | undefined;

  private statements(): Record<string, Database.Statement> {
    if (this.stmts === undefined) {
      this.stmts = {
        upsertInode: this.db.prepare('INSERT OR REPLACE INTO inodes (id, parent, name, kind, mode, uid, gid, atime, mtime, ctime, btime, blob, size, target) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)'),
        deleteInode: this.db.prepare('DELETE FROM inodes WHERE id = ?'),
        insertObject: this.db.prepare('INSERT OR IGNORE INTO objects (id, type, data) VALUES (?, ?, ?)'),
        deleteObject: this.db.prepare('DELETE FROM objects WHERE id = ?'),
        setRef: this.db.prepare('INSERT OR REPLACE INTO refs (scope, commit_id) VALUES (?, ?)'),
        setMeta: this.db.prepare('INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)'),
        insertUser: this.db.prepare('INSERT INTO users (uid, name, gid, is_agent, token_hash, created) VALUES (?, ?, ?, ?, ?, ?)'),
        insertGroup: this.db.prepare('INSERT INTO groups_ (gid, name, members) VALUES (?, ?, ?)'),
        insertWorkspace: this.db.prepare('INSERT INTO workspaces (id, name, root, owner_uid, created) VALUES (?, ?, ?, ?, ?)'),
        insertWsToken: this.db.prepare('INSERT INTO ws_tokens (hash, id, workspace_id, name, agent_uid, agent_token_hash, created) VALUES (?, ?, ?, ?, ?, ?, ?)'),
      };
    }
    return this.stmts;
  }

  private writeBatch(): void {
    const s = this.statements();
    const inodes = this.pendingInodes;
    const deleted = this.deletedInodes;
    const objects = this.pendingObjects;
    const deletedObjects = this.deletedObjects;
    const refs = this.pendingRefs;
    this.pendingInodes = new Map();
    this.deletedInodes = new Set();
    this.pendingObjects = new Map();
    this.deletedObjects = new Set();
    this.pendingRefs = new Map();
    const reg = this.registry?.dirty ? this.registry : undefined;
    if (reg !== undefined) reg.dirty = false;
    this.db.transaction(() => {
      for (const id of deletedObjects) s.deleteObject!.run(id);
      for (const [id, o] of objects) s.insertObject!.run(id, o.type, o.data);
      for (const id of deleted) s.deleteInode!.run(id);
      for (const n of inodes.values()) {
        s.upsertInode!.run(n.id, n.parent === null ? null : n.parent.id, n.name, n.kind, n.mode, n.uid, n.gid, n.atime, n.mtime, n.ctime, n.btime, n.kind === 'file' ? n.blob : null, n.kind === 'file' ? n.size : 0, n.kind === 'symlink' ? n.target : null);
      }
      for (const [scope, id] of refs) s.setRef!.run(scope, id);
      if (reg !== undefined) this.writeRegistry(reg);
    })();
  }

  private writeRegistry(reg: Registry): void {
    const s = this.statements();
    this.db.exec('DELETE FROM users; DELETE FROM groups_; DELETE FROM workspaces; DELETE FROM ws_tokens;');
    for (const u of reg.users.values() as Iterable<UserRow>) s.insertUser!.run(u.uid, u.name, u.gid, u.isAgent ? 1 : 0, u.tokenHash, u.created);
    for (const g of reg.groups.values() as Iterable<GroupRow>) s.insertGroup!.run(g.gid, g.name, JSON.stringify([...g.members].sort((a, b) => a - b)));
    for (const w of reg.workspaces.values() as Iterable<WorkspaceRow>) s.insertWorkspace!.run(w.id, w.name, w.root, w.ownerUid, w.created);
    for (const t of reg.wsTokens.values() as Iterable<WsTokenRow>) s.insertWsToken!.run(t.hash, t.id, t.workspaceId, t.name, t.agentUid, t.agentTokenHash, t.created);
    s.setMeta!.run('next_uid', String(reg.nextUid));
    s.setMeta!.run('next_gid', String(reg.nextGid));
    s.setMeta!.run('bootstrapped', reg.bootstrapped ? '1' : '0');
  }

  /**
   * Verifies every stored object's hash and every reference between inodes, objects and refs,
   * reading from disk (what a restart would load).
   */
  fsck(decodeRefs: (type: ObjectType, data: Buffer) => string[]): { problems: string[]; objects: number; inodes: number } {
    const problems: string[] = [];
    const ids = new Set<string>();
    const types = new Map<string, ObjectType>();
    let objects = 0;
    const refsOf: [string, string[]][] = [];
    for (const r of this.db.prepare('SELECT id, type, data FROM objects').iterate() as Iterable<{ id: string; type: ObjectType; data: Buffer }>) {
      objects++;
      try {
        verifyObject(r.id, r.type, r.data);
      } catch (err) {
        problems.push((err as Error).message);
      }
      ids.add(r.id);
      types.set(r.id, r.type);
      if (r.type !== 'blob') {
        try {
          refsOf.push([r.id, decodeRefs(r.type, r.data)]);
        } catch {
          problems.push(`object ${r.id.slice(0, 12)} (${r.type}) cannot be parsed`);
        }
      }
    }
    for (const [id, refs] of refsOf) for (const ref of refs) if (!ids.has(ref)) problems.push(`object ${id.slice(0, 12)} refers to missing object ${ref.slice(0, 12)}`);
    const rows = this.db.prepare('SELECT id, parent, name, kind, blob FROM inodes').all() as { id: number; parent: number | null; name: string; kind: string; blob: string | null }[];
    const inodeIds = new Map(rows.map((r) => [r.id, r]));
    let roots = 0;
    const seenNames = new Set<string>();
    for (const r of rows) {
      if (r.parent === null) roots++;
      else {
        const p = inodeIds.get(r.parent);
        if (p === undefined) problems.push(`inode ${r.id} ('${r.name}') has a missing parent ${r.parent}`);
        else if (p.kind !== 'directory') problems.push(`inode ${r.id} ('${r.name}') has a parent ${r.parent} that is not a directory`);
        const key = `${r.parent}/${r.name}`;
        if (seenNames.has(key)) problems.push(`two entries named '${r.name}' in directory ${r.parent}`);
        seenNames.add(key);
      }
      if (r.kind === 'file' && (r.blob === null || types.get(r.blob) !== 'blob')) problems.push(`file inode ${r.id} ('${r.name}') refers to missing content ${String(r.blob).slice(0, 12)}`);
    }
    if (rows.length > 0 && roots !== 1) problems.push(`expected one root directory, found ${roots}`);
    // Every inode must hang off the root: a parent cycle or a lost subtree is unreachable.
    const children = new Map<number, number[]>();
    for (const r of rows) {
      if (r.parent === null) continue;
      const list = children.get(r.parent);
      if (list === undefined) children.set(r.parent, [r.id]);
      else list.push(r.id);
    }
    const seen = new Set<number>();
    const stack = rows.filter((r) => r.parent === null).map((r) => ({ id: r.id, depth: 0 }));
    let tooDeep = 0;
    let deepest = { id: 0, depth: 0 };
    while (stack.length > 0) {
      const { id, depth } = stack.pop()!;
      if (seen.has(id)) continue;
      seen.add(id);
      if (depth > MAX_DEPTH) tooDeep++;
      if (depth > deepest.depth) deepest = { id, depth };
      for (const c of children.get(id) ?? []) stack.push({ id: c, depth: depth + 1 });
    }
    if (seen.size !== rows.length) problems.push(`${rows.length - seen.size} inode(s) are not reachable from / (a parent cycle or a lost subtree)`);
    if (tooDeep > 0) problems.push(`${tooDeep} inode(s) lie deeper than the ${MAX_DEPTH}-level limit, down to level ${deepest.depth} (${pathBelow(inodeIds, deepest.id)}): they are served, but nothing can be created there; move that subtree up or delete it`);
    for (const r of this.db.prepare('SELECT scope, commit_id FROM refs').all() as { scope: string; commit_id: string }[]) {
      if (types.get(r.commit_id) !== 'commit') problems.push(`ref '${r.scope || 'HEAD'}' points to missing commit ${r.commit_id.slice(0, 12)}`);
    }
    return { problems, objects, inodes: rows.length };
  }

  close(): void {
    if (this.closed) return;
    this.flushNow();
    this.closed = true;
    try {
      this.db.pragma('wal_checkpoint(TRUNCATE)');
    } catch {
      // a checkpoint is an optimisation; the WAL is replayed on the next open anyway
    }
    this.db.close();
  }
}

function rowToInode(r: Record<string, unknown>): InodeRow {
  const n = (v: unknown): number => Number(v as bigint);
  return {
    id: n(r.id),
    parent: r.parent === null ? null : n(r.parent),
    name: r.name as string,
    kind: r.kind as Node['kind'],
    mode: n(r.mode),
    uid: n(r.uid),
    gid: n(r.gid),
    atime: r.atime as bigint,
    mtime: r.mtime as bigint,
    ctime: r.ctime as bigint,
    btime: r.btime as bigint,
    blob: (r.blob as string | null) ?? null,
    size: n(r.size),
    target: (r.target as string | null) ?? null,
  };
}

/** The path of an inode from the stored rows, shortened to its first and last components when long. */
function pathBelow(rows: Map<number, { parent: number | null; name: string }>, id: number): string {
  const parts: string[] = [];
  for (let r = rows.get(id); r !== undefined && r.parent !== null; r = rows.get(r.parent)) parts.push(r.name);
  parts.reverse();
  return parts.length <= 8 ? `/${parts.join('/')}` : `/${parts.slice(0, 4).join('/')}/.../${parts.slice(-3).join('/')}`;
}
