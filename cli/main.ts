#!/usr/bin/env node
/**
 * The `mdvfs` command. Process-level subcommands (daemon [status|stop], stop, serve, http, mount, umount, fsck, gc)
 * are wired here; file, VCS and user commands live in cli/commands/*.ts.
 */
import { Command, CommanderError, Option } from 'commander';
import { registerCommands } from './commands/index.js';
import { errorLine, describeError } from './errors.js';
import { addIdentityOptions, readTokenFile, refuseTokenFlag } from './identity.js';
import { UsageError } from './errors.js';
import { VERSION } from '../daemon/rpc/version.js';

/** A mount point argument: an empty one would otherwise mean the working directory. */
function mountPoint(dir: string): string {
  if (dir.trim() === '') throw new UsageError('the directory is empty: name the mount point');
  return dir;
}

export function buildProgram(): Command {
  const program = new Command('mdvfs')
    .description('A versioned markdown filesystem for people and AI agents')
    .version(VERSION)
    .exitOverride()
    // Program options only before the subcommand, so `mount --user` keeps its own option.
    .enablePositionalOptions()
    .configureOutput({
      writeErr: (s) => process.stderr.write(s),
      // Usage errors in the same one-line form as every other error: `mdvfs: <message> (EUSAGE)`.
      outputError: (s, write) =>
        write(
          `mdvfs: ${s
            .replace(/^error: /, '')
            .trim()
            .replace(/\s*\n\s*/g, ' ')} (EUSAGE)\n`,
        ),
    });
  addIdentityOptions(program);

  // `mdvfs status` is the VCS status (git's), so the daemon's own status is `mdvfs daemon status`.
  const daemon = program
    .command('daemon')
    .description('run the daemon in the foreground for SERVICE_DATA_DIR (or: daemon status, daemon stop)')
    .action(async () => {
      const { runDaemon } = await import('../daemon/main.js');
      await runDaemon();
    });
  const statusAction = async (opts: { json?: boolean }): Promise<void> => {
    const { runStatus } = await import('./daemon-control.js');
    await runStatus(opts);
  };
  const stopAction = async (): Promise<void> => {
    const { runStop } = await import('./daemon-control.js');
    await runStop();
  };
  daemon
    .command('status')
    .description('show the daemon of SERVICE_DATA_DIR: pid, data dir, socket, uptime, counts (exit 1 when none runs)')
    .option('--json', 'print one JSON object')
    .action(statusAction);
  daemon
    .command('stop')
    .description('stop the daemon of SERVICE_DATA_DIR cleanly (and the mdvfs serve that keeps it up)')
    .action(stopAction);
  program
    .command('stop')
    .description('stop the daemon of SERVICE_DATA_DIR cleanly (same as daemon stop)')
    .action(stopAction);

  program
    .command('serve')
    .description('run the daemon and the HTTP server (REST + MCP) on SERVICE_LISTEN')
    .action(async () => {
      const { runServe } = await import('../http/serve.js');
      await runServe();
    });

  program
    .command('http')
    .description('run only the HTTP server, connecting to (or starting) the daemon of SERVICE_DATA_DIR')
    .action(async () => {
      const { runHttp } = await import('../http/main.js');
      await runHttp();
    });

  program
    .command('mount <dir>')
    .description('mount the filesystem at <dir> with FUSE (foreground)')
    .option('--user <name>', 'act as this user')
    .addOption(new Option('--token <token>', 'removed: see --token-file').hideHelp())
    .option('--token-file <path>', 'act as the holder of the token in this file (env SERVICE_TOKEN)')
    .option('--on-behalf-of <user>', 'delegate to this user')
    .option('--read-only', 'mount read-only')
    .option(
      '--writeback',
      'no request at open and close (much faster); data reaches the daemon after close returns, errors then are only logged (docs/posix.md)',
    )
    .option(
      '--shared',
      'one mount for all local users (run as root): each acts as the mdvfs user of the same name, others are refused',
    )
    .action(
      async (
        dir: string,
        opts: {
          user?: string;
          token?: string;
          tokenFile?: string;
          onBehalfOf?: string;
          readOnly?: boolean;
          writeback?: boolean;
          shared?: boolean;
        },
      ) => {
        const { tokenFile, ...rest } = opts;
        refuseTokenFlag(rest.token);
        if (tokenFile !== undefined) rest.token = readTokenFile(tokenFile);
        // Without a flag, the token in SERVICE_TOKEN (never on the command line).
        else if (rest.token === undefined && rest.user === undefined && !rest.shared && process.env.SERVICE_TOKEN)
          rest.token = process.env.SERVICE_TOKEN;
        const { runMount } = await import('../fuse/mount.js');
        await runMount(mountPoint(dir), rest);
      },
    );

  program
    .command('umount <dir>')
    .description('unmount a mounted directory (EBUSY while files are open in it, unless --lazy)')
    .option('--lazy', 'detach now even if busy; the mount exits when the last open file is closed')
    .action(async (dir: string, opts: { lazy?: boolean }) => {
      const { runUmount } = await import('../fuse/mount.js');
      await runUmount(mountPoint(dir), { lazy: opts.lazy === true });
    });

  registerCommands(program);
  return program;
}

async function main(): Promise<void> {
  const program = buildProgram();
  try {
    await program.parseAsync(process.argv);
  } catch (err) {
    if (err instanceof CommanderError) {
      process.exitCode = err.exitCode === 0 ? 0 : 2;
      return;
    }
    process.stderr.write(errorLine(err));
    process.exitCode = describeError(err).exitCode;
  }
}

await main();
