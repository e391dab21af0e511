/**
 * `mdvfs mount --shared`: one mount for every local user. Mounted with allow_other and
 * default_permissions, it serves each request as the store's user with the same name as the local
 * user making it (the request's uid, looked up in the local user database), and refuses local users
 * the store has no user for (EACCES). Owners and groups show by name too: a store user or group shows
 * as the local one of the same name, one with no local namesake as an id no local account or group
 * has (see UNMATCHED); chown(2) takes local ids back the same way.
 *
 * All users' requests share the mount's one daemon connection (DaemonLink.as), so their replies keep
 * their order with the change events, as a one-principal mount's do.
 *
 * Security: the daemon decides every open, create and change as the caller's own user. What the
 * kernel already holds (entries, attributes, the listing of a directory someone listed) it shows to
 * any local user the shown mode bits allow (default_permissions, with the local group membership), as
 * a local filesystem would; a file's contents are read only after an open the daemon granted.
 */
import { execFile } from 'node:child_process';
import { promises as fsp } from 'node:fs';
import { promisify } from 'node:util';
import { VfsError } from '../daemon/errors.js';
import type { DaemonLink } from '../daemon/rpc/link.js';
import { InodeNumbers, unchangedId, type Owners } from './attrs.js';
import { MountFs, type MountFsOptions } from './mount-fs.js';
import { MountFsSet } from './mount-set.js';

const execFileP = promisify(execFile);

/**
 * Security: what store ids with no local namesake show as: the highest valid id no local account (or
 * group) has, looked up at every reload. Not nobody/nogroup (65534): the kernel checks the shown modes
 * itself (default_permissions), so the local `nobody` would be the owner of such a user's 0700
 * directories and could stat the entries the kernel cached inside them. (uid_t)-1 means "unchanged".
 */
const UNMATCHED = 0xfffffffe;
/** How many ids below UNMATCHED are tried when local accounts have taken the first ones. */
const UNMATCHED_TRIES = 64;
/** A request from a local uid the tables do not know reloads them, at most this often. */
const RELOAD_MS = 2000;

/** One kind of id (users or groups) mapped by name between the store and the local system. */
class IdMap {
  /** store id → local id, and back; local id → the name both share. */
  readonly out = new Map<number, number>();
  readonly in = new Map<number, number>();
  readonly names = new Map<number, string>();

  constructor(
    private readonly kind: 'user' | 'group',
    store: { name: string; id: number }[],
    local: Map<string, number>,
  ) {
    for (const { name, id } of store) {
      const l = local.get(name);
      if (l === undefined || this.in.has(l)) continue;
      this.out.set(id, l);
      this.in.set(l, id);
      this.names.set(l, name);
    }
  }

  /** chown(2)'s local id as the store's; undefined for -1 ("leave unchanged"); EINVAL with no namesake. */
  toStore(local: number): number | undefined {
    if (unchangedId(local)) return undefined;
    const id = this.in.get(local);
    if (id === undefined)
      throw new VfsError(
        'EINVAL',
        'chown',
        undefined,
        `local ${this.kind === 'user' ? 'uid' : 'gid'} ${local} has no ${this.kind} of the same name in the store`,
      );
    return id;
  }
}

/** Owners by name (see the file's comment). */
export class SharedOwners implements Owners {
  readonly inodes = new InodeNumbers();
  readonly localUid = 0;
  readonly localGid = 0;
  private users = new IdMap('user', [], new Map());
  private groups = new IdMap('group', [], new Map());
  private unmatchedUid = UNMATCHED;
  private unmatchedGid = UNMATCHED;

  update(users: IdMap, groups: IdMap, unmatched: { uid: number; gid: number }): void {
    this.users = users;
    this.groups = groups;
    this.unmatchedUid = unmatched.uid;
    this.unmatchedGid = unmatched.gid;
  }

  uidOut(uid: number): number {
    return this.users.out.get(uid) ?? this.unmatchedUid;
  }

  gidOut(gid: number): number {
    return this.groups.out.get(gid) ?? this.unmatchedGid;
  }

  uidIn(uid: number): number | undefined {
    return this.users.toStore(uid);
  }

  gidIn(gid: number): number | undefined {
    return this.groups.toStore(gid);
  }

  /** The name of the store's user acting for local uid `uid`, if there is one. */
  userOf(uid: number): string | undefined {
    return this.users.names.get(uid);
  }
}

/**
 * The local ids of `names` in the local user or group database (getent: files, LDAP and whatever
 * else NSS has; /etc/passwd or /etc/group when there is no getent).
 */
async function localIds(db: 'passwd' | 'group', names: string[]): Promise<Map<string, number>> {
  const ids = new Map<string, number>();
  // A few hundred names per getent: a store of many users (agents) must not overflow one command line.
  for (let i = 0; i === 0 || i < names.length; i += GETENT_NAMES) {
    let text: string;
    try {
      text = (await execFileP('getent', [db, '--', ...names.slice(i, i + GETENT_NAMES)])).stdout;
    } catch (err) {
      const e = err as NodeJS.ErrnoException & { stdout?: string };
      if (e.code === 'ENOENT') return parseIds(await fsp.readFile(`/etc/${db}`, 'utf8').catch(() => ''), ids);
      text = e.stdout ?? ''; // exit 2: some names are not there; the others are printed all the same
    }
    parseIds(text, ids);
  }
  return ids;
}

const GETENT_NAMES = 500;

/** The highest id from UNMATCHED down that no entry of the local user or group database has. */
async function unmatchedId(db: 'passwd' | 'group'): Promise<number> {
  const candidates = Array.from({ length: UNMATCHED_TRIES }, (_, i) => UNMATCHED - i);
  let text: string;
  try {
    text = (await execFileP('getent', [db, ...candidates.map(String)])).stdout;
  } catch (err) {
    const e = err as NodeJS.ErrnoException & { stdout?: string };
    text = e.code === 'ENOENT' ? await fsp.readFile(`/etc/${db}`, 'utf8').catch(() => '') : (e.stdout ?? '');
  }
  const taken = new Set(parseIds(text, new Map()).values());
  const free = candidates.find((id) => !taken.has(id));
  if (free === undefined)
    throw new VfsError(
      'EEXIST',
      'mount',
      undefined,
      `local ${db} ids ${UNMATCHED - UNMATCHED_TRIES + 1} to ${UNMATCHED} are all taken`,
    );
  return free;
}

/** Adds name → id of each `name:x:id:...` line of a passwd or group database to `ids`. */
function parseIds(text: string, ids: Map<string, number>): Map<string, number> {
  for (const line of text.split('\n')) {
    const [name, , id] = line.split(':');
    if (name && id !== undefined && /^\d+$/.test(id) && !ids.has(name)) ids.set(name, Number(id));
  }
  return ids;
}

export class SharedUsers {
  readonly owners = new SharedOwners();
  readonly set: MountFsSet;
  /** Local uid → the MountFs acting for it, until the next reload. */
  private readonly ready = new Map<number, MountFs>();
  /** Store user name → its MountFs (kept across reloads: the kernel may hold its handles). */
  private readonly byName = new Map<string, MountFs>();
  /** Date.now() when the tables were last read; 0: they may be stale (see stale). */
  private loadedAt = 0;
  /** Counts stale() calls: a reload begun before one does not count as fresh. */
  private generation = 0;
  private loading: Promise<void> | null = null;
  /** Local uids already reported as refused (one log line each, until the next reload). */
  private readonly refused = new Set<number>();

  constructor(
    private readonly link: DaemonLink,
    private readonly options: Omit<MountFsOptions, 'owners'>,
  ) {
    const root = new MountFs(link, { ...options, owners: this.owners });
    this.byName.set('root', root);
    this.set = new MountFsSet(root, this.owners, (uid) => this.ready.get(uid) ?? this.resolve(uid));
  }

  /**
   * Users or groups may have changed (or the daemon connection was lost): the tables are read again
   * before the next request is served. Not now: after `mdvfs stop`, only a request may start a daemon.
   */
  stale(): void {
    this.generation++;
    this.loadedAt = 0;
    this.ready.clear();
  }

  /** Reads the store's users and groups and their local namesakes (at start, and after stale). */
  reload(): Promise<void> {
    this.loading ??= (async () => {
      const generation = this.generation;
      try {
        const [{ users }, { groups }] = await Promise.all([
          this.link.call('admin.userList', {}),
          this.link.call('admin.groupList', {}),
        ]);
        const [localUsers, localGroups, uid, gid] = await Promise.all([
          localIds(
            'passwd',
            users.map((u) => u.name),
          ),
          localIds(
            'group',
            groups.map((g) => g.name),
          ),
          unmatchedId('passwd'),
          unmatchedId('group'),
        ]);
        this.owners.update(
          new IdMap(
            'user',
            users.map((u) => ({ name: u.name, id: u.uid })),
            localUsers,
          ),
          new IdMap(
            'group',
            groups.map((g) => ({ name: g.name, id: g.gid })),
            localGroups,
          ),
          { uid, gid },
        );
        this.ready.clear();
        this.refused.clear();
        if (generation === this.generation) this.loadedAt = Date.now();
      } finally {
        this.loading = null;
      }
    })();
    return this.loading;
  }

  private async resolve(uid: number): Promise<MountFs> {
    if (this.loadedAt === 0) await this.reload();
    let name = this.owners.userOf(uid);
    if (name === undefined && Date.now() - this.loadedAt >= RELOAD_MS) {
      await this.reload();
      name = this.owners.userOf(uid);
    }
    if (name === undefined) {
      const why = `local uid ${uid} has no user of the same name in the store`;
      if (!this.refused.has(uid)) {
        this.refused.add(uid);
        process.stderr.write(`mdvfs mount: ${why}: its requests are refused (EACCES)\n`);
      }
      throw new VfsError('EACCES', 'mount', undefined, why);
    }
    let fs = this.byName.get(name);
    if (fs === undefined) {
      fs = new MountFs(this.link.as({ origin: 'local', authorization: `User ${name}` }), {
        ...this.options,
        owners: this.owners,
      });
      this.byName.set(name, fs);
      this.set.add(fs);
    }
    this.ready.set(uid, fs);
    return fs;
  }
}
