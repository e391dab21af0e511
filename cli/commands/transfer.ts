/** `import` and `export`: moving folders between the host and the filesystem. */
import type { Command } from 'commander';
import type { CommandHost } from '../context.js';
import { UsageError } from '../errors.js';
import { runExport } from '../export.js';
import { runImport } from '../import.js';

export function registerTransferCommands(program: Command, host: CommandHost): void {
  host.action(
    program
      .command('import')
      .description('copy a host folder (e.g. a notes vault) into the filesystem; --watch keeps following it')
      .argument('<hostdir>', 'folder on this machine')
      .option('--to <path>', 'target directory (default: a directory named like the folder, in your home)')
      .option('-w, --watch', 'keep following adds, edits, renames and deletes until Ctrl-C'),
    async (ctx, cmd) => {
      const [hostDir] = cmd.processedArgs as [string];
      const o = cmd.opts<{ to?: string; watch?: boolean }>();
      if (o.watch && ctx.interactive)
        throw new UsageError('import --watch runs until Ctrl-C; run it outside the shell');
      await runImport(ctx, hostDir, o);
    },
  );

  host.action(
    program
      .command('export')
      .description('write a file or a subtree out to a host folder, byte for byte')
      .argument('<path>', 'file or directory in the filesystem')
      .argument('<hostdir>', 'folder on this machine (created if missing)'),
    async (ctx, cmd) => {
      const [vfsPath, hostDir] = cmd.processedArgs as [string, string];
      await runExport(ctx, vfsPath, hostDir);
    },
  );
}
