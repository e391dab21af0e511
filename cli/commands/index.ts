/** Registers the file, VCS, user, workspace, transfer, shell and maintenance commands on the program. */
import type { Command } from 'commander';
import { cliHost } from '../cli-host.js';
import type { CommandHost } from '../context.js';
import { addIdentityOptions, type IdentityOptions } from '../identity.js';
import { registerFileCommands } from './files.js';
import { registerMaintenance } from './maintenance.js';
import { registerMigrate } from './migrate.js';
import { registerTransferCommands } from './transfer.js';
import { registerUserCommands } from './users.js';
import { registerVcsCommands } from './vcs.js';
import { registerWorkspaceCommands } from './workspace.js';

/** The commands shared by the CLI and the shell, bound to a host (one-shot process or shell stage). */
export function registerAll(program: Command, host: CommandHost): void {
  registerFileCommands(program, host);
  registerVcsCommands(program, host);
  registerUserCommands(program, host);
  registerWorkspaceCommands(program, host);
  registerTransferCommands(program, host);
}

export function registerCommands(program: Command): void {
  registerAll(program, cliHost());
  registerMaintenance(program);
  registerMigrate(program);
  addIdentityOptions(program.command('shell').description('interactive shell with a working directory, pipes, history and tab completion')).action(
    async (_opts: unknown, cmd: Command) => {
      const { runShell } = await import('../shell.js');
      const status = await runShell(cmd.optsWithGlobals<IdentityOptions>());
      if (status !== 0) process.exitCode = status;
    },
  );
}
