/** Registers the file, VCS, user and maintenance commands on the program. */
import type { Command } from 'commander';
import { registerMaintenance } from './maintenance.js';

export function registerCommands(program: Command): void {
  registerMaintenance(program);
}
