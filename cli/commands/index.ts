/** Registers the file, VCS, user, workspace, transfer, shell and maintenance commands on the program. */
import type { Command } from 'commander';
import { cliHost } from '../cli-host.js';
import { addIdentityOptions, type IdentityOptions } from '../identity.js';
import { registerMaintenance } from './maintenance.js';
import { registerMigrate } from './migrate.js';
import { registerAll } from './shared.js';

export function registerCommands(program: Command): void {
  registerAll(program, cliHost());
  registerMaintenance(program);
  registerMigrate(program);
  addIdentityOptions(
    program
      .command('shell')
      .description('interactive shell with a working directory, pipes, history and tab completion'),
  ).action(async (_opts: unknown, cmd: Command) => {
    const { runShell } = await import('../shell.js');
    const status = await runShell(cmd.optsWithGlobals<IdentityOptions>());
    if (status !== 0) process.exitCode = status;
  });
}
