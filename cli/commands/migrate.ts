/** `mdvfs migrate --from <data dir> --to postgres://…`: copies a store into PostgreSQL and verifies the copy. */
import type { Command } from 'commander';
import { UsageError } from '../errors.js';

export function registerMigrate(program: Command): void {
  program
    .command('migrate')
    .description(
      'copy the store of a data dir (stopped daemon) into an empty PostgreSQL database, then verify it like fsck',
    )
    .requiredOption('--from <dir>', 'the data dir whose store.db is copied (its daemon must be stopped)')
    .requiredOption(
      '--to <url>',
      'postgres://user@host/db of an empty database (prefer PGPASSWORD or ~/.pgpass to a password in the URL)',
    )
    .action(async (opts: { from: string; to: string }) => {
      const { storeFromEnv } = await import('../../daemon/rpc/settings.js');
      const to = storeFromEnv({ SERVICE_STORE: opts.to });
      if (to.kind !== 'postgres') throw new UsageError('--to must be a postgres:// URL');
      const { migrateStore } = await import('../../daemon/store/migrate.js');
      const r = await migrateStore(opts.from, to.url, (line) => process.stderr.write(`${line}\n`));
      process.stdout.write(
        `migrate: ok (${r.objects} objects, ${r.inodes} inodes, ${r.refs} refs, ${r.users} users, ${r.groups} groups, ${r.workspaces} workspaces, ${r.wsTokens} workspace tokens) to ${r.to}\n`,
      );
      process.stdout.write(`migrate: start the daemon with SERVICE_STORE set to that URL\n`);
    });
}
