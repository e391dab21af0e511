/** `mdvfs migrate --from <data dir | postgres://…> --to <postgres://… | new data dir>`: copies a store and verifies the copy. */
import type { Command } from 'commander';
import { UsageError } from '../errors.js';

export function registerMigrate(program: Command): void {
  program
    .command('migrate')
    .description(
      'copy a whole store into an empty one, then verify it like fsck: a data dir (stopped daemon) into PostgreSQL, or a PostgreSQL store (read on a snapshot while it serves) into a new data dir (a portable backup) or another database',
    )
    .requiredOption(
      '--from <dir|url>',
      'the data dir whose store.db is copied (its daemon must be stopped), or postgres://user@host/db',
    )
    .requiredOption(
      '--to <url|dir>',
      'postgres://user@host/db of an empty database (prefer PGPASSWORD or ~/.pgpass to a password in the URL), or a new data dir',
    )
    .action(async (opts: { from: string; to: string }) => {
      const { storeFromEnv } = await import('../../daemon/rpc/settings.js');
      // A URL is checked as SERVICE_STORE would be (never repeated: it may hold a password).
      const kind = (spec: string): 'sqlite' | 'postgres' =>
        /^[a-z][a-z0-9+.-]*:\/\//i.test(spec) ? storeFromEnv({ SERVICE_STORE: spec }).kind : 'sqlite';
      if (opts.from.trim() === '' || opts.to.trim() === '') throw new UsageError('--from and --to must not be empty');
      const from = kind(opts.from);
      const to = kind(opts.to);
      if (from === 'sqlite' && to === 'sqlite')
        throw new UsageError('copy one data dir into another by stopping its daemon and copying the directory');
      const { migrateStore } = await import('../../daemon/store/migrate.js');
      const r = await migrateStore(opts.from, opts.to, (line) => process.stderr.write(`${line}\n`));
      process.stdout.write(
        `migrate: ok (${r.objects} objects, ${r.inodes} inodes, ${r.refs} refs, ${r.users} users, ${r.groups} groups, ${r.workspaces} workspaces, ${r.wsTokens} workspace tokens) to ${r.to}\n`,
      );
      process.stdout.write(
        to === 'postgres'
          ? `migrate: start the daemon with SERVICE_STORE set to that URL\n`
          : `migrate: serve the copy with SERVICE_DATA_DIR=${r.to} (SERVICE_STORE unset)\n`,
      );
    });
}
