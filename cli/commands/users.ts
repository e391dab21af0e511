/** User and group commands: useradd, userdel, groupadd, usermod, token, whoami. */
import type { Command } from 'commander';
import type { CommandHost } from '../context.js';
import { UsageError } from '../errors.js';

export function registerUserCommands(program: Command, host: CommandHost): void {
  host.action(
    program
      .command('useradd')
      .description('create a user (admin only): a personal group and a home /home/<name>')
      .argument('<name>', 'user name')
      .option('--agent', 'create an agent user (an AI agent; can act on behalf of others)')
      .option('--issue-token', 'also issue an API token and print it (shown once)'),
    async (ctx, cmd) => {
      const [name] = cmd.processedArgs as [string];
      const o = cmd.opts<{ agent?: boolean; issueToken?: boolean }>();
      const u = await ctx.caller.call('admin.userAdd', { name, is_agent: o.agent === true });
      ctx.out.write(
        `created ${u.is_agent ? 'agent' : 'user'} ${u.name} (uid ${u.uid}, gid ${u.gid}, home ${u.home})\n`,
      );
      // An agent's token comes with its creation (shown once); issuing another would replace it.
      if (u.token !== undefined) ctx.out.write(`token: ${u.token}\n`);
      else if (o.issueToken) {
        const t = await ctx.caller.call('admin.token', { name });
        ctx.out.write(`token: ${t.token}\n`);
      }
    },
  );

  host.action(
    program
      .command('userdel')
      .description('delete a user (admin only); their files keep their uid')
      .argument('<name>', 'user name'),
    async (ctx, cmd) => {
      const [name] = cmd.processedArgs as [string];
      await ctx.caller.call('admin.userDel', { name });
    },
  );

  host.action(
    program.command('groupadd').description('create a group (admin only)').argument('<name>', 'group name'),
    async (ctx, cmd) => {
      const [name] = cmd.processedArgs as [string];
      const g = await ctx.caller.call('admin.groupAdd', { name });
      ctx.out.write(`created group ${g.name} (gid ${g.gid})\n`);
    },
  );

  host.action(
    program
      .command('usermod')
      .description('change group membership (admin only): usermod -aG <groups> <user>')
      .argument('<user>', 'user name')
      .requiredOption('-G, --groups <groups>', 'comma-separated group names')
      .option('-a, --append', 'add the user to the groups')
      .option('-r, --remove', 'remove the user from the groups'),
    async (ctx, cmd) => {
      const [user] = cmd.processedArgs as [string];
      const o = cmd.opts<{ groups: string; append?: boolean; remove?: boolean }>();
      if (o.append === o.remove)
        throw new UsageError('usermod: give exactly one of -a (append) or -r (remove) with -G');
      const groups = o.groups
        .split(',')
        .map((g) => g.trim())
        .filter((g) => g !== '');
      if (groups.length === 0) throw new UsageError('usermod: -G needs at least one group');
      for (const group of groups) {
        try {
          await ctx.caller.call(o.append ? 'admin.groupMemberAdd' : 'admin.groupMemberDel', { user, group });
        } catch (err) {
          ctx.report(err);
        }
      }
    },
  );

  host.action(
    program
      .command('token')
      .description("issue (or regenerate) a user's API token and print it; it is shown only once")
      .argument('<user>', 'user name'),
    async (ctx, cmd) => {
      const [name] = cmd.processedArgs as [string];
      const t = await ctx.caller.call('admin.token', { name });
      ctx.out.write(`${t.token}\n`);
    },
  );

  host.action(
    program
      .command('whoami')
      .description('print who you are acting as')
      .option('-v, --verbose', 'uid, groups, home, delegation, workspace')
      .option('--json', 'print as JSON'),
    async (ctx, cmd) => {
      const o = cmd.opts<{ verbose?: boolean; json?: boolean }>();
      const w = await ctx.caller.call('auth.whoami', {});
      if (o.json) ctx.out.write(`${JSON.stringify(w)}\n`);
      else if (!o.verbose) ctx.out.write(`${w.user}\n`);
      else {
        const lines = [
          `user: ${w.user}${w.is_agent ? ' (agent)' : ''}${w.is_admin ? ' (admin)' : ''}`,
          `uid: ${w.uid}  gid: ${w.gid}  groups: ${w.groups.join(',')}`,
          `home: ${w.home}`,
          ...(w.on_behalf_of !== undefined ? [`on behalf of: ${w.on_behalf_of}`] : []),
          ...(w.workspace !== undefined
            ? [`workspace: ${w.workspace.name} (${w.workspace.id}) at ${w.workspace.root_path}`]
            : []),
        ];
        ctx.out.write(`${lines.join('\n')}\n`);
      }
    },
  );
}
