/** User and group commands: useradd, userdel, groupadd, usermod, token, delegate, whoami. */
import type { Command } from 'commander';
import type { CommandHost } from '../context.js';
import { UsageError } from '../errors.js';
import { columns } from '../format.js';

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
      .argument('<user>', 'user name')
      .option('--expires-in <seconds>', 'the token stops working this many seconds from now'),
    async (ctx, cmd) => {
      const [name] = cmd.processedArgs as [string];
      const o = cmd.opts<{ expiresIn?: string }>();
      let expires_in: number | undefined;
      if (o.expiresIn !== undefined) {
        expires_in = Number(o.expiresIn);
        if (!/^[0-9]+$/.test(o.expiresIn) || !Number.isSafeInteger(expires_in) || expires_in < 1)
          throw new UsageError(`token: --expires-in takes a whole number of seconds, not '${o.expiresIn}'`);
      }
      const t = await ctx.caller.call('admin.token', expires_in === undefined ? { name } : { name, expires_in });
      ctx.out.write(`${t.token}\n`);
      if (t.expires !== undefined)
        ctx.err.write(`mdvfs: the token expires at ${new Date(t.expires * 1000).toISOString()}\n`);
    },
  );

  const delegate = program
    .command('delegate')
    .description('delegation grants: let an agent act on your behalf (add), stop it (rm), list grants (ls)');
  host.action(
    delegate
      .command('add')
      .description('let an agent act on your behalf (--on-behalf-of you) until you revoke it')
      .argument('<agent>', 'agent (or wheel member) name')
      .option('--for <user>', 'root/wheel only: grant on behalf of this user')
      .option('--share', 'also put the agent in your personal group: a folder you open to it is open to the agent'),
    async (ctx, cmd) => {
      const [agent] = cmd.processedArgs as [string];
      const o = cmd.opts<{ for?: string; share?: boolean }>();
      const g = await ctx.caller.call('auth.delegationAdd', {
        agent,
        ...(o.for === undefined ? {} : { user: o.for }),
        ...(o.share === true ? { share: true } : {}),
      });
      ctx.out.write(
        `${g.agent} may act on behalf of ${g.user}${g.shares_group === true ? ` and is in group ${g.user}` : ''}\n`,
      );
    },
  );
  host.action(
    delegate
      .command('rm')
      .description("revoke an agent's grant: its next request on your behalf is refused")
      .argument('<agent>', 'agent name')
      .option('--for <user>', 'root/wheel only: the user whose grant ends'),
    async (ctx, cmd) => {
      const [agent] = cmd.processedArgs as [string];
      const o = cmd.opts<{ for?: string }>();
      const r = await ctx.caller.call('auth.delegationDel', o.for === undefined ? { agent } : { agent, user: o.for });
      ctx.out.write(`${r.revoked.agent} may no longer act on behalf of ${r.revoked.user}\n`);
    },
  );
  host.action(
    delegate
      .command('ls')
      .description('the grants given by or to you (root/wheel: every grant)')
      .option('--json', 'print as JSON'),
    async (ctx, cmd) => {
      const r = await ctx.caller.call('auth.delegationList', {});
      if (cmd.opts<{ json?: boolean }>().json) ctx.out.write(`${JSON.stringify(r)}\n`);
      else
        for (const line of columns(
          r.delegations.map((g) => [
            g.user,
            g.agent,
            new Date(g.created * 1000).toISOString(),
            g.shares_group === true ? 'shares group' : '',
          ]),
          'llll',
        ))
          ctx.out.write(`${line.trimEnd()}\n`);
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
