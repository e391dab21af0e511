/** Text output helpers shared by the commands: `ls -l` rows, mode strings, times, owner names. */
import type { Caller } from '../daemon/rpc/client.js';
import type { Kind } from '../daemon/rpc/protocol.js';

/** `0644` + file → `-rw-r--r--`, including setuid/setgid/sticky letters. */
export function modeString(kind: Kind, mode: string): string {
  const m = parseInt(mode, 8);
  const type = kind === 'directory' ? 'd' : kind === 'symlink' ? 'l' : '-';
  const bits = (shift: number, special: boolean, specialChar: string): string => {
    const r = m & (4 << shift) ? 'r' : '-';
    const w = m & (2 << shift) ? 'w' : '-';
    const xSet = (m & (1 << shift)) !== 0;
    const x = special ? (xSet ? specialChar : specialChar.toUpperCase()) : xSet ? 'x' : '-';
    return r + w + x;
  };
  return type + bits(6, (m & 0o4000) !== 0, 's') + bits(3, (m & 0o2000) !== 0, 's') + bits(0, (m & 0o1000) !== 0, 't');
}

/** Unix seconds → `2026-11-21 11:30` in local time (what `ls -l --time-style=long-iso` prints). */
export function shortTime(sec: number): string {
  const d = new Date(sec * 1000);
  const p = (n: number) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}`;
}

/** Unix seconds → ISO 8601 in UTC. */
export function isoTime(sec: number): string {
  return new Date(sec * 1000).toISOString().replace('.000Z', 'Z');
}

/** Right-aligns or left-aligns columns of rows. `align` has one 'l' or 'r' per column. */
export function columns(rows: string[][], align: string): string[] {
  const widths: number[] = [];
  for (const row of rows) row.forEach((cell, i) => (widths[i] = Math.max(widths[i] ?? 0, [...cell].length)));
  return rows.map((row) =>
    row
      .map((cell, i) => {
        if (i === row.length - 1) return cell;
        const pad = ' '.repeat((widths[i] ?? 0) - [...cell].length);
        return align[i] === 'r' ? pad + cell : cell + pad;
      })
      .join(' '),
  );
}

/**
 * uid/gid → names. Listing users and groups is an admin call; other callers see their own names
 * and plain numbers for the rest, as `ls -l` does for ids missing from /etc/passwd.
 */
export class Names {
  private users = new Map<number, string>();
  private groups = new Map<number, string>();

  static async load(caller: Caller): Promise<Names> {
    const n = new Names();
    const [users, groups, me] = await Promise.allSettled([
      caller.call('admin.userList', {}),
      caller.call('admin.groupList', {}),
      caller.call('auth.whoami', {}),
    ]);
    if (users.status === 'fulfilled') for (const u of users.value.users) n.users.set(u.uid, u.name);
    if (groups.status === 'fulfilled') for (const g of groups.value.groups) n.groups.set(g.gid, g.name);
    if (me.status === 'fulfilled') {
      if (!n.users.has(me.value.uid)) n.users.set(me.value.uid, me.value.user);
      // A user's primary group is named after them.
      if (!n.groups.has(me.value.gid) && !me.value.is_agent) n.groups.set(me.value.gid, me.value.user);
    }
    if (!n.users.has(0)) n.users.set(0, 'root');
    if (!n.groups.has(0)) n.groups.set(0, 'root');
    return n;
  }

  user(uid: number): string {
    return this.users.get(uid) ?? String(uid);
  }

  group(gid: number): string {
    return this.groups.get(gid) ?? String(gid);
  }
}

/** Joins a directory and a name for display and for the daemon, keeping `''` (home) relative. */
export function joinPath(dir: string, name: string): string {
  if (dir === '') return name;
  return dir.endsWith('/') ? dir + name : `${dir}/${name}`;
}

/** The last path segment (`a/b/` → `b`). */
export function baseName(p: string): string {
  const trimmed = p.replace(/\/+$/, '');
  const i = trimmed.lastIndexOf('/');
  return i < 0 ? trimmed : trimmed.slice(i + 1);
}
