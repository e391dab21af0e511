/**
 * Write grants: POSIX checks write access when a file is opened or created, not at each write; a
 * descriptor opened for writing stays writable after a chmod (git creates its objects 0444 and then
 * writes through the descriptor it created them with). The mount sends a file's content to the daemon
 * at close, so the daemon needs to know that the write was authorised at open.
 *
 * A grant is issued by the core only right after it checked write access to a file (or created it),
 * and it lets a later write or truncate of that same inode, by that same principal (user, delegate
 * and workspace), over that same socket connection, skip the file's w-bit check and nothing else.
 * It ends when released, when that connection closes, or when the daemon stops. A grant that does not
 * apply (unknown, released, another principal, another inode, another connection) grants nothing:
 * the request is checked as if it had none.
 */
import { randomFillSync } from 'node:crypto';
import { VfsError } from '../errors.js';
import type { Cred } from './perms.js';

/** Per connection: a bound on what one client can make the daemon hold. */
export const MAX_GRANTS_PER_CONNECTION = 65536;

/** Who presents a grant: the request's credential and the connection it came on. */
export interface GrantHolder {
  cred: Cred;
  conn: number;
}

interface Grant {
  inode: number;
  principal: string;
  conn: number;
}

/** Random bytes in a grant id. */
const ID_BYTES = 24;
/**
 * Grant ids are cut from a pool of random bytes refilled 168 ids at a time, as node:crypto's
 * randomUUID does: one call into the random generator per grant was 3% of the daemon's CPU for a
 * file created through the mount. Each byte is used once; the ids are as unpredictable as before.
 */
const pool = Buffer.alloc(ID_BYTES * 168);
let poolAt = pool.length;

function newGrantId(): string {
  if (poolAt === pool.length) {
    randomFillSync(pool);
    poolAt = 0;
  }
  const id = pool.toString('base64url', poolAt, poolAt + ID_BYTES);
  poolAt += ID_BYTES;
  return id;
}

function principalKey(cred: Cred): string {
  return `${cred.user.uid}/${cred.delegate?.uid ?? ''}/${cred.workspace?.id ?? ''}`;
}

export class WriteGrants {
  private readonly grants = new Map<string, Grant>();
  private readonly byConn = new Map<number, Set<string>>();

  /** Throws EBUSY when `holder`'s connection may not hold another grant. */
  checkRoom(holder: GrantHolder, op: string, path: string): void {
    if ((this.byConn.get(holder.conn)?.size ?? 0) >= MAX_GRANTS_PER_CONNECTION)
      throw new VfsError(
        'EBUSY',
        op,
        path,
        `this connection holds ${MAX_GRANTS_PER_CONNECTION} write grants (open files); release some first`,
      );
  }

  /** A new grant for `inode`; the caller has just checked (or created) write access to it. */
  issue(holder: GrantHolder, inode: number, op: string, path: string): string {
    this.checkRoom(holder, op, path);
    let mine = this.byConn.get(holder.conn);
    if (mine === undefined) {
      mine = new Set();
      this.byConn.set(holder.conn, mine);
    }
    const id = newGrantId();
    this.grants.set(id, { inode, principal: principalKey(holder.cred), conn: holder.conn });
    mine.add(id);
    return id;
  }

  /** Whether `id` is a live grant of this holder for this inode. */
  allows(id: string | undefined, holder: GrantHolder | undefined, inode: number): boolean {
    if (id === undefined || holder === undefined) return false;
    const g = this.grants.get(id);
    return g !== undefined && g.inode === inode && g.conn === holder.conn && g.principal === principalKey(holder.cred);
  }

  /** Ends a grant of this connection; anything else is ignored (a grant is released at most once). */
  release(id: string, conn: number): boolean {
    const g = this.grants.get(id);
    if (g === undefined || g.conn !== conn) return false;
    this.grants.delete(id);
    this.byConn.get(conn)?.delete(id);
    return true;
  }

  /** The connection closed: every grant it held ends. */
  dropConnection(conn: number): void {
    for (const id of this.byConn.get(conn) ?? []) this.grants.delete(id);
    this.byConn.delete(conn);
  }

  get size(): number {
    return this.grants.size;
  }
}
