/** Commands that exist only inside `mdvfs shell`: cd, pwd, echo, wc, head, tail, history, clear, exit. */
import type { Command } from 'commander';
import { VfsError } from '../../daemon/errors.js';
import type { Caller } from '../../daemon/rpc/client.js';
import type { CmdContext, CommandHost } from '../context.js';
import { UsageError } from '../errors.js';

/** What the built-ins may read and change in the session. */
export interface ShellState {
  cwd: string;
  home: string;
  previousCwd: string | undefined;
  exitRequested: number | undefined;
  readonly caller: Caller;
  resolve(p: string): string;
  history(): string[];
}

function count(v: string): number {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0) throw new UsageError(`invalid number of lines: '${v}'`);
  return n;
}

/** The text a filter works on: the named files, or else what was piped in. */
async function sources(
  ctx: CmdContext,
  paths: string[],
  verb: string,
): Promise<Array<{ name: string | undefined; data: Buffer }>> {
  if (paths.length === 0) {
    const input = await ctx.input();
    if (input === undefined) throw new UsageError(`${verb}: give a file or pipe text in`);
    return [{ name: undefined, data: input }];
  }
  const out: Array<{ name: string | undefined; data: Buffer }> = [];
  for (const p of paths) {
    try {
      out.push({ name: p, data: (await ctx.caller.request('fs.read', { path: ctx.path(p) })).data });
    } catch (err) {
      ctx.report(err);
    }
  }
  return out;
}

function lines(data: Buffer): string[] {
  const l = data.toString('utf8').split('\n');
  if (l[l.length - 1] === '') l.pop();
  return l;
}

export function registerShellBuiltins(program: Command, host: CommandHost, shell: ShellState): void {
  host.action(
    program
      .command('cd')
      .description('change the working directory (cd, cd -, cd ~, cd <dir>)')
      .argument('[dir]', 'directory (default: home)'),
    async (ctx, cmd) => {
      const [dir] = cmd.processedArgs as [string | undefined];
      let target: string;
      if (dir === undefined) target = shell.home;
      else if (dir === '-') {
        if (shell.previousCwd === undefined) throw new VfsError('EINVAL', 'cd', undefined, 'no previous directory');
        target = shell.previousCwd;
        ctx.out.write(`${target}\n`);
      } else target = ctx.path(dir);
      const st = await ctx.caller.call('fs.stat', { path: target });
      if (st.kind !== 'directory') throw new VfsError('ENOTDIR', 'cd', target);
      // Listing proves search and read permission now rather than at the next command.
      await ctx.caller.call('fs.list', { path: target });
      shell.previousCwd = shell.cwd;
      shell.cwd = target;
    },
  );

  host.action(program.command('pwd').description('print the working directory'), async (ctx) => {
    ctx.out.write(`${shell.cwd}\n`);
  });

  host.action(
    program
      .command('echo')
      .description('print the arguments')
      .argument('[text...]', 'words to print')
      .option('-n', 'no trailing newline')
      .allowUnknownOption(),
    async (ctx, cmd) => {
      const [text] = cmd.processedArgs as [string[]];
      ctx.out.write(text.join(' ') + (cmd.opts<{ n?: boolean }>().n ? '' : '\n'));
    },
  );

  host.action(
    program
      .command('wc')
      .description('count lines, words and bytes of files or piped text')
      .argument('[paths...]', 'files (default: piped text)')
      .option('-l, --lines', 'lines only')
      .option('-w, --words', 'words only')
      .option('-c, --bytes', 'bytes only'),
    async (ctx, cmd) => {
      const [paths] = cmd.processedArgs as [string[]];
      const o = cmd.opts<{ lines?: boolean; words?: boolean; bytes?: boolean }>();
      const all = !o.lines && !o.words && !o.bytes;
      for (const s of await sources(ctx, paths, 'wc')) {
        const text = s.data.toString('utf8');
        const cols: number[] = [];
        if (all || o.lines) cols.push(s.data.filter((b) => b === 10).length);
        if (all || o.words) cols.push(text.split(/\s+/).filter((w) => w !== '').length);
        if (all || o.bytes) cols.push(s.data.length);
        ctx.out.write(`${cols.join(' ')}${s.name === undefined ? '' : ` ${s.name}`}\n`);
      }
    },
  );

  for (const which of ['head', 'tail'] as const) {
    host.action(
      program
        .command(which)
        .description(`print the ${which === 'head' ? 'first' : 'last'} lines of files or piped text`)
        .argument('[paths...]', 'files (default: piped text)')
        .option('-n, --lines <n>', 'number of lines', count, 10),
      async (ctx, cmd) => {
        const [paths] = cmd.processedArgs as [string[]];
        const n = cmd.opts<{ lines: number }>().lines;
        const srcs = await sources(ctx, paths, which);
        for (const [i, s] of srcs.entries()) {
          if (srcs.length > 1) ctx.out.write(`${i === 0 ? '' : '\n'}==> ${s.name ?? ''} <==\n`);
          const l = lines(s.data);
          const picked = which === 'head' ? l.slice(0, n) : n === 0 ? [] : l.slice(-n);
          for (const line of picked) ctx.out.write(`${line}\n`);
        }
      },
    );
  }

  host.action(program.command('history').description('list the commands typed in this session'), async (ctx) => {
    shell.history().forEach((line, i) => ctx.out.write(`${String(i + 1).padStart(5)}  ${line}\n`));
  });

  host.action(program.command('clear').description('clear the screen'), async (ctx) => {
    ctx.out.write('\x1b[H\x1b[2J');
  });

  host.action(
    program.command('exit').description('leave the shell (as does Ctrl-D)').argument('[status]', 'exit status', count),
    async (_ctx, cmd) => {
      const [status] = cmd.processedArgs as [number | undefined];
      shell.exitRequested = status ?? 0;
    },
  );
}
