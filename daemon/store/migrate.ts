/**
 * `mdvfs migrate --from <data dir> --to postgres://…`: copies a SQLite store (content, history,
 * refs, users, groups, tokens, workspaces, who made the changes not yet committed) into an empty PostgreSQL database in one transaction,
 * then verifies the copy: fsck over what PostgreSQL now holds, and every row compared with the source.
 * Both stores are locked meanwhile (no daemon may run on either).
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { VfsError } from '../errors.js';
import { Vcs } from '../vcs/vcs.js';
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

export async function migrateStore(
  fromDir: string,
  toUrl: string,
  log: (line: string) => void,
): Promise<MigrateResult> {
  const file = path.join(fromDir, 'store.db');
  if (!existsSync(file)) throw new VfsError('ENOENT', 'migrate', fromDir, `no store here (${file} does not exist)`);
  const src = new SqliteStore(fromDir, 'full');
  try {
    const before = src.fsck(Vcs.refsOf);
    if (before.problems.length > 0)
      throw new VfsError(
        'EIO',
        'migrate',
        fromDir,
        `the source store has ${before.problems.length} problem(s), first: ${before.problems[0]}; run 'mdvfs fsck' and repair it first`,
      );
    const inodes = src.inodeRows();
    const refs = src.refRows();
    const auth: RegistryRows = src.authRows();
    const marks = src.markRows();
    const dst = await PostgresStore.open(toUrl);
    try {
      log(
        `migrate: copying ${before.objects} objects, ${inodes.length} inodes, ${refs.length} refs and ${auth.users.length} users to ${dst.where}`,
      );
      await dst.importAll({ objects: src.objects(), inodes, refs, auth, marks });
      // Verify what PostgreSQL holds now, as a daemon starting on it would read it.
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
      for (const o of src.objects()) srcIds.add(o.id);
      for await (const o of dst.objects())
        if (!srcIds.has(o.id)) problems.push(`object ${o.id.slice(0, 12)} is not in the source`);
      if (problems.length > 0)
        throw new VfsError('EIO', 'migrate', dst.where, `the copy does not verify: ${problems.slice(0, 5).join('; ')}`);
      return {
        objects: after.objects,
        inodes: after.inodes,
        refs: refs.length,
        users: auth.users.length,
        groups: auth.groups.length,
        workspaces: auth.workspaces.length,
        wsTokens: auth.wsTokens.length,
        to: dst.where,
      };
    } finally {
      await dst.close();
    }
  } finally {
    src.close();
  }
}
