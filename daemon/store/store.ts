/**
 * What every store backend shares (DESIGN.md §6, §8): the `Store` interface the core writes through,
 * the rows it loads at start, the auth tables' rows, and the fsck rules over stored rows. SQLite
 * (sqlite.ts, the embedded default) and PostgreSQL (postgres.ts) differ only in how rows move.
 */
import type { Journal } from '../core/blobs.js';
import type { Node, NodeRow } from '../core/inode.js';
import { isWithin, MAX_DEPTH } from '../core/paths.js';
import {
  delegationKey,
  type DelegationRow,
  type GroupRow,
  type Registry,
  type UserRow,
  type WorkspaceRow,
  type WsTokenRow,
} from '../auth/registry.js';
import { verifyObject, type ObjectType } from '../core/objects.js';
import type { StoreIdentity } from '../rpc/protocol.js';

export const SCHEMA_VERSION = '1';

/**
 * Whether a store holds nothing yet. A store with no inode and no user is fresh even when its schema
 * row is there: a daemon killed after writing that row and before its first batch left exactly that.
 */
export function isFresh(version: string | undefined, inodes: number, users: number): boolean {
  return inodes === 0 && users === 0 && (version === undefined || version === SCHEMA_VERSION);
}

export interface FsckResult {
  problems: string[];
  objects: number;
  inodes: number;
}

/**
 * Who last changed a path since it was last committed (the VCS's pending attribution, docs/vcs.md),
 * one row per absolute path, so that a restart does not credit the committer with an agent's work.
 */
export interface MarkRow {
  by: string;
  on_behalf_of: string | null;
  /** order of the changes (a newer change of a directory's whole subtree wins over an older one below it) */
  seq: number;
  /** the change reached everything below the path (a removal, move or copy of a directory) */
  subtree: boolean;
}

/**
 * The paths strictly below `root`, as a range [from, to) of the byte order both stores compare them
 * in: every `root/…`, up to `root0` ('0' is the byte after '/'); below `/`, every path.
 */
export function markRange(root: string): [string, string] {
  const base = root === '/' ? '' : root;
  return [`${base}/`, `${base}0`];
}

/** Storage behind one interface, so that another backend (e.g. PostgreSQL) can take over. */
export interface Store extends Journal {
  setRef(scope: string, commitId: string): void;
  /** Records a path's pending attribution, or (null) that it was committed. */
  mark(path: string, row: MarkRow | null): void;
  /** Records that every path at or below `root` was committed: one range, however many rows it holds. */
  forgetMarks(root: string): void;
  /** Resolves when everything changed so far is durable (group commit: one transaction per batch). */
  durable(): Promise<void>;
  /** Writes what is pending and lets go of the store. */
  close(): void | Promise<void>;
}

/** A store as the daemon opens it: everything is read into memory once, at start. */
export interface OpenedStore extends Store {
  load(): LoadedState | Promise<LoadedState>;
  /** Fills `reg` from the auth tables (after load). */
  loadRegistry(reg: Registry): void | Promise<void>;
  /** The registry whose `dirty` flag makes the next batch rewrite the auth tables. */
  registry: Registry | undefined;
  /** Called when a batch could not be written: the daemon stops rather than diverge from the store. */
  onFatal: (err: Error) => void;
  /** Verifies what is stored (what a restart would load); see StoredCheck. */
  fsck(decodeRefs: DecodeRefs): FsckResult | Promise<FsckResult>;
  /** Which store this is (kind, its id, and for PostgreSQL the database and the lease epoch). */
  identity(): StoreIdentity;
}

/** Everything a store holds, as `mdvfs migrate` copies it into an empty store (`importAll`). */
export interface StoreContents {
  objects: AsyncIterable<StoredObject> | Iterable<StoredObject>;
  inodes: InodeRow[];
  refs: { scope: string; commit_id: string }[];
  auth: RegistryRows;
  marks: ReadonlyMap<string, MarkRow>;
}

/**
 * The meta row holding a store's id (made once, at the first open). It names this store only: the
 * auth rows that `mdvfs migrate` copies leave it out, so a copy gets an id of its own.
 */
export const STORE_ID_KEY = 'store_id';

export type DecodeRefs = (type: ObjectType, data: Buffer) => string[];

export interface StoredObject {
  id: string;
  type: ObjectType;
  data: Buffer;
}

export interface LoadedState {
  inodes: InodeRow[];
  objects: StoredObject[];
  refs: Map<string, string>;
  /** pending attribution by absolute path */
  marks: Map<string, MarkRow>;
  fresh: boolean;
}

export interface InodeRow extends NodeRow {
  parent: number | null;
}

/** An inode as its row, in column order (id, parent, name, kind, mode, uid, gid, atime, mtime, ctime, btime, blob, size, target). */
export function inodeValues(
  n: Node,
): [
  number,
  number | null,
  string,
  Node['kind'],
  number,
  number,
  number,
  bigint,
  bigint,
  bigint,
  bigint,
  string | null,
  number,
  string | null,
] {
  return [
    n.id,
    n.parent === null ? null : n.parent.id,
    n.name,
    n.kind,
    n.mode,
    n.uid,
    n.gid,
    n.atime,
    n.mtime,
    n.ctime,
    n.btime,
    n.kind === 'file' ? n.blob : null,
    n.kind === 'file' ? n.size : 0,
    n.kind === 'symlink' ? n.target : null,
  ];
}

/** The auth tables as stored (column names as in the tables). */
export interface RegistryRows {
  users: {
    uid: number;
    name: string;
    gid: number;
    is_agent: number;
    token_hash: string | null;
    /** Unix seconds; null (or absent in rows of older stores): never expires. */
    token_expires?: number | null;
    created: number;
  }[];
  groups: { gid: number; name: string; members: string }[];
  workspaces: { id: string; name: string; root: string; owner_uid: number; created: number }[];
  wsTokens: {
    hash: string;
    id: string | null;
    workspace_id: string;
    name: string;
    agent_uid: number;
    agent_token_hash: string | null;
    created: number;
  }[];
  /** Delegation grants: `user_uid` lets `agent_uid` act on its behalf. */
  delegations: { user_uid: number; agent_uid: number; created: number }[];
  meta: { key: string; value: string }[];
}

/** Fills a registry from stored rows, upgrading rows written by older versions. */
export function applyRegistryRows(reg: Registry, rows: RegistryRows): void {
  for (const r of rows.users)
    reg.putUser({
      uid: r.uid,
      name: r.name,
      gid: r.gid,
      isAgent: r.is_agent === 1,
      tokenHash: r.token_hash,
      tokenExpires: r.token_expires ?? null,
      created: r.created,
    });
  for (const r of rows.groups)
    reg.putGroup({ gid: r.gid, name: r.name, members: new Set(JSON.parse(r.members) as number[]) });
  for (const r of rows.workspaces)
    reg.workspaces.set(r.id, { id: r.id, name: r.name, root: r.root, ownerUid: r.owner_uid, created: r.created });
  for (const r of rows.wsTokens) {
    // An older row is bound to the agent's token of today, so the next rotation revokes it.
    const agentTokenHash = r.agent_token_hash ?? reg.users.get(r.agent_uid)?.tokenHash ?? null;
    reg.wsTokens.set(r.hash, {
      hash: r.hash,
      id: r.id ?? r.hash.slice(0, 16),
      workspaceId: r.workspace_id,
      name: r.name,
      agentUid: r.agent_uid,
      agentTokenHash,
      created: r.created,
    });
  }
  for (const r of rows.delegations)
    reg.delegations.set(delegationKey(r.user_uid, r.agent_uid), {
      userUid: r.user_uid,
      agentUid: r.agent_uid,
      created: r.created,
    });
  for (const m of rows.meta) {
    if (m.key === 'next_uid') reg.nextUid = Math.max(reg.nextUid, Number(m.value));
    if (m.key === 'next_gid') reg.nextGid = Math.max(reg.nextGid, Number(m.value));
    if (m.key === 'bootstrapped' && m.value === '1') reg.bootstrapped = true;
  }
  // A store written before the flag existed: other users mean it was bootstrapped.
  if (reg.users.size > 1) reg.bootstrapped = true;
}

/** A registry as the rows to store (a snapshot: later changes do not reach it). */
export function registryRows(reg: Registry): RegistryRows {
  return {
    users: [...(reg.users.values() as Iterable<UserRow>)].map((u) => ({
      uid: u.uid,
      name: u.name,
      gid: u.gid,
      is_agent: u.isAgent ? 1 : 0,
      token_hash: u.tokenHash,
      token_expires: u.tokenExpires,
      created: u.created,
    })),
    groups: [...(reg.groups.values() as Iterable<GroupRow>)].map((g) => ({
      gid: g.gid,
      name: g.name,
      members: JSON.stringify([...g.members].sort((a, b) => a - b)),
    })),
    workspaces: [...(reg.workspaces.values() as Iterable<WorkspaceRow>)].map((w) => ({
      id: w.id,
      name: w.name,
      root: w.root,
      owner_uid: w.ownerUid,
      created: w.created,
    })),
    wsTokens: [...(reg.wsTokens.values() as Iterable<WsTokenRow>)].map((t) => ({
      hash: t.hash,
      id: t.id,
      workspace_id: t.workspaceId,
      name: t.name,
      agent_uid: t.agentUid,
      agent_token_hash: t.agentTokenHash,
      created: t.created,
    })),
    delegations: [...(reg.delegations.values() as Iterable<DelegationRow>)].map((g) => ({
      user_uid: g.userUid,
      agent_uid: g.agentUid,
      created: g.created,
    })),
    meta: [
      { key: 'next_uid', value: String(reg.nextUid) },
      { key: 'next_gid', value: String(reg.nextGid) },
      { key: 'bootstrapped', value: reg.bootstrapped ? '1' : '0' },
    ],
  };
}

/**
 * The table and primary key column of each kind of identity row (a new kind of RegistryRows must
 * name its own here: the writes below are generic).
 */
export const AUTH_TABLES = {
  users: { table: 'users', keys: ['uid'] },
  groups: { table: 'groups_', keys: ['gid'] },
  workspaces: { table: 'workspaces', keys: ['id'] },
  wsTokens: { table: 'ws_tokens', keys: ['hash'] },
  delegations: { table: 'delegations', keys: ['user_uid', 'agent_uid'] },
  meta: { table: 'meta', keys: ['key'] },
} as const satisfies {
  [K in keyof RegistryRows]: { table: string; keys: readonly (string & keyof RegistryRows[K][number])[] };
};

/** What one auth table needs written: every row replaced (`replaceAll`), or only these upserts and deletes. */
export interface AuthTableChange {
  table: string;
  /** The primary key's columns. */
  keys: readonly string[];
  replaceAll: boolean;
  upserts: Record<string, unknown>[];
  /** The primary key values (its columns only) of rows to delete. */
  deletes: Record<string, unknown>[];
}

/**
 * The identity rows last written, so that an identity change writes only the rows it changed (it
 * used to rewrite every row on the event loop: 41-75 ms at 6,000 secrets). A store primes it with
 * the rows of the registry it loaded; until then (a fresh store, an import) the first write replaces
 * the tables. The meta table is never replaced: it holds other keys than the registry's.
 */
export class AuthRowDiff {
  /** Per table: each row's primary key (as JSON) → the row as JSON. */
  private last: Map<string, Map<string, string>> | undefined;

  /** `rows` are what the store holds (as the registry loaded from it presents them). */
  prime(rows: RegistryRows): void {
    this.last = undefined;
    this.changes(rows);
  }

  /** The changes from the rows last given to `rows`; from now on `rows` count as written. */
  changes(rows: RegistryRows): AuthTableChange[] {
    const full = this.last === undefined;
    const last = (this.last ??= new Map());
    const out: AuthTableChange[] = [];
    for (const kind of Object.keys(AUTH_TABLES) as (keyof RegistryRows)[]) {
      const { table, keys } = AUTH_TABLES[kind];
      const before = last.get(table) ?? new Map<string, string>();
      const now = new Map<string, string>();
      const upserts: Record<string, unknown>[] = [];
      for (const row of rows[kind] as Record<string, unknown>[]) {
        const json = JSON.stringify(row);
        const id = JSON.stringify(keys.map((c) => row[c]));
        now.set(id, json);
        if (full || before.get(id) !== json) upserts.push(row);
      }
      const deletes: Record<string, unknown>[] = [];
      if (!full)
        for (const id of before.keys())
          if (!now.has(id)) {
            const values = JSON.parse(id) as unknown[];
            deletes.push(Object.fromEntries(keys.map((c, i) => [c, values[i]])));
          }
      last.set(table, now);
      const replaceAll = full && kind !== 'meta';
      if (replaceAll || upserts.length > 0 || deletes.length > 0)
        out.push({ table, keys, replaceAll, upserts, deletes });
    }
    return out;
  }
}

/**
 * fsck over stored rows: every object's hash, every reference between objects, inodes and refs,
 * one root, every inode reachable from it. Objects are fed one at a time (a store streams them).
 */
export class StoredCheck {
  readonly problems: string[] = [];
  private readonly ids = new Set<string>();
  private readonly types = new Map<string, ObjectType>();
  private readonly refsOf: [string, string[]][] = [];
  private objects = 0;

  constructor(private readonly decodeRefs: DecodeRefs) {}

  object(r: StoredObject): void {
    this.objects++;
    try {
      verifyObject(r.id, r.type, r.data);
    } catch (err) {
      this.problems.push((err as Error).message);
    }
    this.ids.add(r.id);
    this.types.set(r.id, r.type);
    if (r.type !== 'blob') {
      try {
        this.refsOf.push([r.id, this.decodeRefs(r.type, r.data)]);
      } catch {
        this.problems.push(`object ${r.id.slice(0, 12)} (${r.type}) cannot be parsed`);
      }
    }
  }

  finish(
    rows: { id: number; parent: number | null; name: string; kind: string; blob: string | null }[],
    refs: { scope: string; commit_id: string }[],
  ): FsckResult {
    const { problems, ids, types } = this;
    for (const [id, refs] of this.refsOf)
      for (const ref of refs)
        if (!ids.has(ref)) problems.push(`object ${id.slice(0, 12)} refers to missing object ${ref.slice(0, 12)}`);
    const inodeIds = new Map(rows.map((r) => [r.id, r]));
    let roots = 0;
    const seenNames = new Set<string>();
    for (const r of rows) {
      if (r.parent === null) roots++;
      else {
        const p = inodeIds.get(r.parent);
        if (p === undefined) problems.push(`inode ${r.id} ('${r.name}') has a missing parent ${r.parent}`);
        else if (p.kind !== 'directory')
          problems.push(`inode ${r.id} ('${r.name}') has a parent ${r.parent} that is not a directory`);
        const key = `${r.parent}/${r.name}`;
        if (seenNames.has(key)) problems.push(`two entries named '${r.name}' in directory ${r.parent}`);
        seenNames.add(key);
      }
      if (r.kind === 'file' && (r.blob === null || types.get(r.blob) !== 'blob'))
        problems.push(`file inode ${r.id} ('${r.name}') refers to missing content ${String(r.blob).slice(0, 12)}`);
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
    if (seen.size !== rows.length)
      problems.push(`${rows.length - seen.size} inode(s) are not reachable from / (a parent cycle or a lost subtree)`);
    if (tooDeep > 0)
      problems.push(
        `${tooDeep} inode(s) lie deeper than the ${MAX_DEPTH}-level limit, down to level ${deepest.depth} (${pathBelow(inodeIds, deepest.id)}): they are served, but nothing can be created there; move that subtree up or delete it`,
      );
    for (const r of refs) {
      if (types.get(r.commit_id) !== 'commit')
        problems.push(`ref '${r.scope || 'HEAD'}' points to missing commit ${r.commit_id.slice(0, 12)}`);
    }
    return { problems, objects: this.objects, inodes: rows.length };
  }
}

/** The path of an inode from the stored rows, shortened to its first and last components when long. */
function pathBelow(rows: Map<number, { parent: number | null; name: string }>, id: number): string {
  const parts: string[] = [];
  for (let r = rows.get(id); r !== undefined && r.parent !== null; r = rows.get(r.parent)) parts.push(r.name);
  parts.reverse();
  return parts.length <= 8 ? `/${parts.join('/')}` : `/${parts.slice(0, 4).join('/')}/.../${parts.slice(-3).join('/')}`;
}

/** Changes recorded through the Journal and not yet written: one batch of a group commit. */
export class PendingChanges {
  readonly inodes = new Map<number, Node>();
  readonly deletedInodes = new Set<number>();
  readonly objects = new Map<string, { type: ObjectType; data: Buffer }>();
  readonly deletedObjects = new Set<string>();
  readonly refs = new Map<string, string>();
  readonly marks = new Map<string, MarkRow | null>();
  /** Roots whose marks were all forgotten, written before `marks` (which holds only later ones below them). */
  readonly forgottenMarks: string[] = [];

  inode(node: Node): void {
    this.inodes.set(node.id, node);
  }

  inodeRemoved(id: number): void {
    this.inodes.delete(id);
    this.deletedInodes.add(id);
  }

  object(id: string, type: ObjectType, payload: Buffer): void {
    this.deletedObjects.delete(id);
    this.objects.set(id, { type, data: payload });
  }

  /** A copy written earlier may be in the store, so the removal is recorded even for one never written. */
  objectRemoved(id: string): void {
    this.objects.delete(id);
    this.deletedObjects.add(id);
  }

  setRef(scope: string, commitId: string): void {
    this.refs.set(scope, commitId);
  }

  mark(path: string, row: MarkRow | null): void {
    this.marks.set(path, row);
  }

  forgetMarks(root: string): void {
    for (const p of this.marks.keys()) if (isWithin(p, root)) this.marks.delete(p);
    this.forgottenMarks.push(root);
  }

  any(): boolean {
    return (
      this.inodes.size > 0 ||
      this.deletedInodes.size > 0 ||
      this.objects.size > 0 ||
      this.deletedObjects.size > 0 ||
      this.refs.size > 0 ||
      this.marks.size > 0 ||
      this.forgottenMarks.length > 0
    );
  }
}

/**
 * The Journal half every store shares: each change is recorded in the pending batch and a batch is
 * scheduled. A store writes `pending` in its own way (one SQLite transaction, one PostgreSQL
 * transaction) and starts a new batch when it takes one.
 */
export abstract class BatchingJournal implements Journal {
  protected pending = new PendingChanges();

  /** Schedules the write of the pending batch (group commit). */
  protected abstract schedule(): void;

  inode(node: Node): void {
    this.pending.inode(node);
    this.schedule();
  }

  inodeRemoved(id: number): void {
    this.pending.inodeRemoved(id);
    this.schedule();
  }

  object(id: string, type: ObjectType, payload: Buffer): void {
    this.pending.object(id, type, payload);
    this.schedule();
  }

  objectRemoved(id: string): void {
    this.pending.objectRemoved(id);
    this.schedule();
  }

  setRef(scope: string, commitId: string): void {
    this.pending.setRef(scope, commitId);
    this.schedule();
  }

  mark(path: string, row: MarkRow | null): void {
    this.pending.mark(path, row);
    this.schedule();
  }

  forgetMarks(root: string): void {
    this.pending.forgetMarks(root);
    this.schedule();
  }
}
