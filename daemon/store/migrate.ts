/**
 * `mdvfs migrate --from <data dir | postgres://…> --to <postgres://… | new data dir>`: copies a whole
 * store (content, history, refs, users, groups, tokens, workspaces, who made the changes not yet
 * committed) into an empty one in one transaction, then verifies the copy: fsck over what the copy
 * now holds, and every row compared with the source.
 *
 * - From a data dir (SQLite): its daemon must be stopped (the store's lock). Into PostgreSQL, the data
 *   dir then belongs to the copy (store.json), so its old store.db is never served again.
 * - From PostgreSQL: read on one consistent snapshot without the lease, so its daemons keep serving
 *   (a backup without downtime; into a data dir it is a portable SQLite store).
 * - Into PostgreSQL: the database must be empty and no daemon may lead it (the lease is taken).
 *   Into a data dir: a new one (or one without a store).
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { VfsError } from '../errors.js';
import { Vcs } from '../vcs/vcs.js';
import { securePrivateDataDir } from '../rpc/private-dir.js';
import { storeLabel } from '../rpc/settings.js';
import { writeStoreRecord } from '../rpc/store-record.js';
import { PostgresStore } from './postgres.js';
import { SqliteStore } from './sqlite.js';
import type { RegistryRows } from './store.js';

export interface MigrateResult {
  objects: number;
  inodes: number;
  refs: number;
  users: number;
  groups: number;
  workspaces: number;
  wsTokens: number;
  /** Where the copy went, without a password. */
  to: string;
}

/** Rows in a canonical form (sorted keys, bigints as strings, sorted rows): equal stores give equal strings. */
function canonical(rows: object[]): string {
  const one = (r: object): string =>
    JSON.stringify(
      Object.keys(r)
        .sort()
        .map((k) => [k, (r as Record<string, unknown>)[k]]),
      (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v),
    );
  return rows.map(one).sort().join('\n');
}

const isUrl = (spec: string): boolean => /^postgres(ql)?:\/\//i.test(spec);

/** Where one end of a migration is, for messages (never a password). */
const label = (s: SqliteStore | PostgresStore): string => (s instanceof PostgresStore ? s.where : s.dataDir);

/** The source: a stopped daemon's data dir, or a PostgreSQL store read without its lease. */
async function openSource(spec: string): Promise<SqliteStore | PostgresStore> {
  if (isUrl(spec)) return PostgresStore.connect(spec);
  const file = path.join(spec, 'store.db');
  if (!existsSync(file)) throw new VfsError('ENOENT', 'migrate', spec, `no store here (${file} does not exist)`);
  return new SqliteStore(spec, 'full');
}

/** The destination: an empty PostgreSQL database (its lease taken), or a new data dir. */
async function openDestination(spec: string): Promise<SqliteStore | PostgresStore> {
  if (isUrl(spec)) return PostgresStore.open(spec);
  const dir = path.resolve(spec);
  securePrivateDataDir(dir);
  return new SqliteStore(dir, 'full');
}

export async function migrateStore(from: string, to: string, log: (line: string) => void): Promise<MigrateResult> {
  if (!isUrl(from) && !isUrl(to) && path.resolve(from) === path.resolve(to))
    throw new VfsError('EINVAL', 'migrate', from, '--from and --to are the same data dir');
  const src = await openSource(from);
  try {
    // A PostgreSQL source is read on one snapshot: every row of the copy and of the check is of one moment.
    const run = (fn: () => Promise<MigrateResult>): Promise<MigrateResult> =>
      src instanceof PostgresStore ? src.snapshot(fn) : fn();
    return await run(async () => {
      const before = await src.fsck(Vcs.refsOf);
      if (before.problems.length > 0)
        throw new VfsError(
          'EIO',
          'migrate',
          label(src),
          `the source store has ${before.problems.length} problem(s), first: ${before.problems[0]}; run 'mdvfs fsck' and repair it first`,
        );
      const inodes = await src.inodeRows();
      const refs = await src.refRows();
      const auth: RegistryRows = await src.authRows();
      const marks = await src.markRows();
      const dst = await openDestination(to);
      try {
        log(
          `migrate: copying ${before.objects} objects, ${inodes.length} inodes, ${refs.length} refs and ${auth.users.length} users to ${label(dst)}`,
        );
        await dst.importAll({ objects: src.objects(), inodes, refs, auth, marks });
        // Verify what the copy holds now, as a daemon starting on it would read it.
        const after = await dst.fsck(Vcs.refsOf);
        const problems = [...after.problems];
        if (after.objects !== before.objects) problems.push(`${after.objects} objects copied of ${before.objects}`);
        if (canonical(await dst.inodeRows()) !== canonical(inodes))
          problems.push('the copied inodes differ from the source');
        if (canonical(await dst.refRows()) !== canonical(refs)) problems.push('the copied refs differ from the source');
        const got = await dst.authRows();
        for (const k of ['users', 'groups', 'workspaces', 'wsTokens', 'delegations', 'meta'] as const)
          if (canonical(got[k]) !== canonical(auth[k])) problems.push(`the copied ${k} differ from the source`);
        if (canonical([...(await dst.markRows())]) !== canonical([...marks]))
          problems.push('the copied pending attribution differs from the source');
        const srcIds = new Set<string>();
        for await (const o of src.objects()) srcIds.add(o.id);
        for await (const o of dst.objects())
          if (!srcIds.has(o.id)) problems.push(`object ${o.id.slice(0, 12)} is not in the source`);
        if (problems.length > 0)
          throw new VfsError(
            'EIO',
            'migrate',
            label(dst),
            `the copy does not verify: ${problems.slice(0, 5).join('; ')}`,
          );
        if (dst instanceof SqliteStore) writeStoreRecord(dst.dataDir, dst.identity(), 'sqlite');
        // A data dir moved into PostgreSQL belongs to the copy: a SQLite daemon never starts on its old store.db.
        else if (src instanceof SqliteStore)
          writeStoreRecord(src.dataDir, dst.identity(), storeLabel({ kind: 'postgres', url: to }));
        return {
          objects: after.objects,
          inodes: after.inodes,
          refs: refs.length,
          users: auth.users.length,
          groups: auth.groups.length,
          workspaces: auth.workspaces.length,
          wsTokens: auth.wsTokens.length,
          to: label(dst),
        };
      } finally {
        await dst.close();
      }
    });
  } finally {
    await src.close();
  }
}
