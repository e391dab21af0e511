/** `workspace create|list|token`: hosted workspaces rooted at a path, with their own tokens. */
import type { Command } from 'commander';
import type { CommandHost } from '../context.js';
import { UsageError } from '../errors.js';
import { readTokenFile, warnSecretFlag } from '../identity.js';
import { columns } from '../format.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function registerWorkspaceCommands(program: Command, host: CommandHost): void {
  const ws = program.command('workspace').description('hosted workspaces: create, list, token');

  host.action(
    ws.command('create').description('create a workspace rooted at an absolute path').argument('<name>', 'workspace name').argument('<root_path>', 'absolute path of its root'),
    async (ctx, cmd) => {
      const [name, root] = cmd.processedArgs as [string, string];
      const w = await ctx.caller.call('ws.create', { name, root_path: ctx.interactive ? ctx.path(root) : root });
      ctx.out.write(`${w.id}\n`);
    },
  );

  host.action(
    ws.command('list').description('list workspaces').option('--json', 'print as JSON'),
    async (ctx, cmd) => {
      const r = await ctx.caller.call('ws.list', {});
      if (cmd.opts<{ json?: boolean }>().json) {
        ctx.out.write(`${JSON.stringify(r)}\n`);
        return;
      }
      const rows = r.workspaces.map((w) => [w.id, w.name, w.owner ?? '', w.root_path]);
      for (const line of columns(rows, 'llll')) ctx.out.write(`${line}\n`);
    },
  );

  host.action(
    ws
      .command('token')
      .description("issue a workspace secret against an agent's token; use it as --token with --workspace <id>")
      .argument('<workspace>', 'workspace id or name')
      .argument('<name>', 'a name for the secret')
      .option('--agent-token <token>', "the agent's API token (default: the token you act with; visible in ps: prefer --agent-token-file)")
      .option('--agent-token-file <path>', "a file holding the agent's API token"),
    async (ctx, cmd) => {
      const [wsArg, name] = cmd.processedArgs as [string, string];
      const o = cmd.opts<{ agentToken?: string; agentTokenFile?: string }>();
      if (o.agentToken !== undefined && o.agentTokenFile !== undefined) throw new UsageError('workspace token: --agent-token and --agent-token-file are mutually exclusive');
      if (o.agentToken !== undefined) warnSecretFlag('--agent-token', '--agent-token-file', (line) => ctx.err.write(`mdvfs: warning: ${line}\n`));
      const fromFile = o.agentTokenFile !== undefined ? readTokenFile(o.agentTokenFile, '--agent-token-file', (line) => ctx.err.write(`mdvfs: warning: ${line}\n`)) : undefined;
      const auth = ctx.caller.creds.authorization;
      const agentToken = fromFile ?? o.agentToken ?? (auth?.startsWith('Bearer ') ? auth.slice(7) : undefined);
      if (agentToken === undefined) throw new UsageError('workspace token: --agent-token is required (or act with --token <agent token>)');
      let id = wsArg;
      if (!UUID.test(wsArg)) {
        const list = await ctx.caller.call('ws.list', {});
        const found = list.workspaces.filter((w) => w.name === wsArg);
        if (found.length !== 1 || found[0] === undefined) throw new UsageError(`workspace token: ${found.length === 0 ? 'no' : 'more than one'} workspace named '${wsArg}'; give its id`);
        id = found[0].id;
      }
      const r = await ctx.caller.call('ws.token', { id, name, agent_token: agentToken });
      ctx.out.write(`${r.secret}\n`);
    },
  );
}
