/** The host for one-shot `mdvfs <cmd>` invocations: identity flags, one connection, process exit status. */
import type { Command } from 'commander';
import type { CmdContext, CommandHost } from './context.js';
import { reporter } from './context.js';
import { openConnection } from './connection.js';
import { addIdentityOptions, resolveIdentity, type IdentityOptions } from './identity.js';

/** Reads all of stdin (for `write` without text). A terminal reads until Ctrl-D, like `cat`. */
async function readStdin(): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(String(chunk)));
  return Buffer.concat(chunks);
}

let epipeHandled = false;
function handleEpipe(): void {
  if (epipeHandled) return;
  epipeHandled = true;
  // `mdvfs cat big.md | head -1`: a closed pipe ends the output quietly, as with any Unix tool.
  process.stdout.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code === 'EPIPE') process.exit(process.exitCode ?? 0);
    throw err;
  });
}

export function cliHost(): CommandHost {
  return {
    interactive: false,
    action(cmd, fn) {
      addIdentityOptions(cmd);
      return cmd.action(async (...args: unknown[]) => {
        const self = args[args.length - 1] as Command;
        handleEpipe();
        const { creds, url } = resolveIdentity(self.optsWithGlobals<IdentityOptions>());
        const conn = await openConnection(creds, url);
        let exitCode = 0;
        const setCode = (c: number) => {
          exitCode = Math.max(exitCode, c);
        };
        const ctx: CmdContext = {
          caller: conn.caller,
          out: process.stdout,
          err: process.stderr,
          interactive: false,
          remote: conn.remote,
          input: readStdin,
          path: (p) => p,
          here: '',
          report: reporter(process.stderr, 'mdvfs', setCode),
          get exitCode() {
            return exitCode;
          },
          set exitCode(c: number) {
            setCode(c);
          },
        };
        try {
          await fn(ctx, self);
        } finally {
          conn.close();
        }
        if (exitCode !== 0) process.exitCode = exitCode;
      });
    },
  };
}
