/** `mdvfs fsck` and `mdvfs gc`. */
import type { Command } from 'commander';
import { connectDaemon } from '../../daemon/rpc/connect.js';

export function registerMaintenance(program: Command): void {
  program
    .command('fsck')
    .description('verify every object hash and every reference in the store')
    .action(async () => {
      const client = await connectDaemon();
      try {
        const r = await client.call('sys.fsck', {});
        for (const p of r.problems) process.stderr.write(`fsck: ${p}\n`);
        process.stdout.write(
          r.ok ? `fsck: ok (${r.objects} objects, ${r.inodes} inodes)\n` : `fsck: ${r.problems.length} problem(s)\n`,
        );
        if (!r.ok) process.exitCode = 1;
      } finally {
        client.close();
      }
    });

  program
    .command('gc')
    .description('remove blobs reachable from neither the working tree nor any commit')
    .action(async () => {
      const client = await connectDaemon();
      try {
        const r = await client.call('sys.gc', {});
        process.stdout.write(`gc: removed ${r.removed} object(s), kept ${r.kept}\n`);
      } finally {
        client.close();
      }
    });
}
