/** The commands shared by the CLI and the shell (which registers them on each stage's program). */
import type { Command } from 'commander';
import type { CommandHost } from '../context.js';
import { registerFileCommands } from './files.js';
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
