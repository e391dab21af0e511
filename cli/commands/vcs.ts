/** Version control commands: commit, log, status, diff, revert. */
import type { Command } from 'commander';
import type { CommitRecord } from '../../daemon/rpc/protocol.js';
import type { CommandHost } from '../context.js';
import { UsageError } from '../errors.js';
import { isoTime } from '../format.js';

function positiveInt(v: string): number {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1) throw new UsageError(`not a positive number: '${v}'`);
  return n;
}

function author(c: CommitRecord): string {
  return c.on_behalf_of === undefined ? c.author : `${c.author} (on behalf of ${c.on_behalf_of})`;
}

export function registerVcsCommands(program: Command, host: CommandHost): void {
  host.action(
    program
      .command('commit')
      .description(
        'commit the pending changes you may read (all of them for root and wheel), or only those at or below paths',
      )
      .argument('[paths...]', 'only the changes at or below these paths')
      .requiredOption('-m, --message <message>', 'commit message'),
    async (ctx, cmd) => {
      const { message } = cmd.opts<{ message: string }>();
      const [paths] = cmd.processedArgs as [string[]];
      const c = await ctx.caller.call(
        'vcs.commit',
        paths.length === 0 ? { message } : { message, paths: paths.map((p) => ctx.path(p)) },
      );
      ctx.out.write(
        `[${c.hash}] ${c.message.split('\n')[0] ?? ''}\n ${c.changes} change${c.changes === 1 ? '' : 's'}\n`,
      );
    },
  );

  host.action(
    program
      .command('log')
      .description('show the commits you may see, newest first (with a path: those that changed it)')
      .argument('[path]', 'only commits that changed this file or directory')
      .option('--path <path>', 'the same as the path argument')
      .option('-n, --max-count <n>', 'show at most n commits', positiveInt)
      .option('--cursor <commit>', 'go on after this commit (the next_cursor of a previous page)')
      .option('--oneline', 'one line per commit')
      .option('--json', 'print the log as JSON'),
    async (ctx, cmd) => {
      const o = cmd.opts<{ path?: string; maxCount?: number; cursor?: string; oneline?: boolean; json?: boolean }>();
      const path = (cmd.processedArgs as [string | undefined])[0] ?? o.path;
      const r = await ctx.caller.call('vcs.log', {
        ...(path !== undefined ? { path: ctx.path(path) } : {}),
        ...(o.maxCount !== undefined ? { limit: o.maxCount } : {}),
        ...(o.cursor !== undefined ? { cursor: o.cursor } : {}),
      });
      if (o.json) {
        ctx.out.write(`${JSON.stringify(r)}\n`);
        return;
      }
      r.commits.forEach((c, i) => {
        if (o.oneline) {
          ctx.out.write(`${c.hash} ${c.message.split('\n')[0] ?? ''}\n`);
          return;
        }
        const body = c.message
          .split('\n')
          .map((l) => `    ${l}`)
          .join('\n');
        ctx.out.write(
          `${i === 0 ? '' : '\n'}commit ${c.hash}\nAuthor: ${author(c)}\nDate:   ${isoTime(c.timestamp)}\n\n${body}\n`,
        );
      });
    },
  );

  host.action(
    program
      .command('status')
      .description('show what changed since the last commit')
      .option('-n, --max-count <n>', 'list at most n changes (default and maximum 10000)', positiveInt)
      .option('--cursor <cursor>', 'go on after the changes of a previous page (its next_cursor)')
      .option('--json', 'print the status as JSON'),
    async (ctx, cmd) => {
      const o = cmd.opts<{ maxCount?: number; cursor?: string; json?: boolean }>();
      const r = await ctx.caller.call('vcs.status', {
        ...(o.maxCount !== undefined ? { limit: o.maxCount } : {}),
        ...(o.cursor !== undefined ? { cursor: o.cursor } : {}),
      });
      if (o.json) {
        ctx.out.write(`${JSON.stringify(r)}\n`);
        return;
      }
      const text =
        typeof r.text === 'string'
          ? r.text
          : [
              ...r.added.map((p) => `added:    ${p}`),
              ...r.modified.map((p) => `modified: ${p}`),
              ...r.deleted.map((p) => `deleted:  ${p}`),
            ].join('\n');
      if (text !== '') ctx.out.write(text.endsWith('\n') ? text : `${text}\n`);
    },
  );

  host.action(
    program
      .command('diff')
      .description('unified diff between commits (default: HEAD against the working tree)')
      .argument('[from]', 'commit: HEAD, a hash prefix, or either with ~n or ^ (default: HEAD)')
      .argument('[to]', 'commit, named the same way (default: the working tree)')
      .option('--path <path>', 'limit the diff to this path'),
    async (ctx, cmd) => {
      const [from, to] = cmd.processedArgs as [string | undefined, string | undefined];
      const o = cmd.opts<{ path?: string }>();
      const r = await ctx.caller.call('vcs.diff', {
        ...(from !== undefined ? { from } : {}),
        ...(to !== undefined ? { to } : {}),
        ...(o.path !== undefined ? { path: ctx.path(o.path) } : {}),
      });
      if (r.diff !== '') ctx.out.write(r.diff.endsWith('\n') ? r.diff : `${r.diff}\n`);
    },
  );

  host.action(
    program
      .command('revert')
      .description('restore the paths you may read (or only paths) to a commit, recorded as a new commit')
      .argument('<hash>', 'commit: a unique hash prefix of 4+ digits, HEAD, or either with ~n or ^ (HEAD~1)')
      .argument('[paths...]', 'only these files or directories'),
    async (ctx, cmd) => {
      const [hash, paths] = cmd.processedArgs as [string, string[]];
      const r = await ctx.caller.call(
        'vcs.revert',
        paths.length === 0 ? { hash } : { hash, paths: paths.map((p) => ctx.path(p)) },
      );
      if (r.saved) ctx.out.write(`saved uncommitted changes as ${r.saved}\n`);
      ctx.out.write(`reverted to ${r.reverted_to} as [${r.commit?.hash ?? r.hash}]\n`);
    },
  );

  host.action(
    program
      .command('undo')
      .description(
        'restore every path last changed by a user or agent since a commit or time (default: the last commit), as a new commit',
      )
      .argument('<actor>', 'the user or agent whose changes to undo')
      .option('--since <commit-or-time>', 'a commit (HEAD~3, a hash prefix) or an ISO date-time'),
    async (ctx, cmd) => {
      const [actor] = cmd.processedArgs as [string];
      const { since } = cmd.opts<{ since?: string }>();
      const r = await ctx.caller.call('vcs.undo', since === undefined ? { actor } : { actor, since });
      if (r.saved) ctx.out.write(`saved uncommitted changes as ${r.saved}\n`);
      ctx.out.write(
        `undid ${actor}'s changes to ${r.paths.length} path${r.paths.length === 1 ? '' : 's'} (back to ${r.reverted_to}) as [${r.commit.hash}]\n`,
      );
    },
  );

  host.action(
    program
      .command('restore')
      .description('restore files or directories as they were at a commit (a revert narrowed to them)')
      .argument('<paths...>', 'files or directories to restore')
      .requiredOption('--from <commit>', 'commit: a hash prefix, HEAD, HEAD~n'),
    async (ctx, cmd) => {
      const [paths] = cmd.processedArgs as [string[]];
      const { from } = cmd.opts<{ from: string }>();
      const r = await ctx.caller.call('vcs.revert', { hash: from, paths: paths.map((p) => ctx.path(p)) });
      if (r.saved) ctx.out.write(`saved uncommitted changes as ${r.saved}\n`);
      ctx.out.write(`restored ${paths.join(' ')} from ${r.reverted_to} as [${r.commit.hash}]\n`);
    },
  );
}
