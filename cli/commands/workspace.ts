/** `workspace create|list|token|tokens|revoke`: hosted workspaces rooted at a path, with their own tokens. */
import type { Command } from 'commander';
import type { CmdContext, CommandHost } from '../context.js';
import { UsageError } from '../errors.js';
import { readTokenFile, warnSecretFlag } from '../identity.js';
import { columns } from '../format.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** A workspace given by id or by (unique) name. */
async function workspaceId(ctx: CmdContext, arg: string, cmd: string): Promise<string> {
  if (UUID.test(arg)) return arg;
  const list = await ctx.caller.call('ws.list', {});
  const found = list.workspaces.filter((w) => w.name === arg);
  if (found.length !== 1 || found[0] === undefined)
    throw new UsageError(
      `workspace ${cmd}: ${found.length === 0 ? 'no' : 'more than one'} workspace named '${arg}'; give its id`,
    );
  return found[0].id;
}

export function registerWorkspaceCommands(program: Command, host: CommandHost): void {
  const ws = program.command('workspace').description('hosted workspaces: create, list, token, tokens, revoke');

  host.action(
    ws
      .command('create')
      .description('create a workspace rooted at an absolute path')
      .argument('<name>', 'workspace name')
      .argument('<root_path>', 'absolute path of its root'),
    async (ctx, cmd) => {
      const [name, root] = cmd.processedArgs as [string, string];
      const w = await ctx.caller.call('ws.create', { name, root_path: ctx.interactive ? ctx.path(root) : root });
      ctx.out.write(`${w.id}\n`);
    },
  );

  host.action(ws.command('list').description('list workspaces').option('--json', 'print as JSON'), async (ctx, cmd) => {
    const r = await ctx.caller.call('ws.list', {});
    if (cmd.opts<{ json?: boolean }>().json) {
      ctx.out.write(`${JSON.stringify(r)}\n`);
      return;
    }
    const rows = r.workspaces.map((w) => [w.id, w.name, w.owner ?? '', w.root_path]);
    for (const line of columns(rows, 'llll')) ctx.out.write(`${line}\n`);
  });

  host.action(
    ws
      .command('token')
      .description("issue a workspace secret against an agent's token; use it as --token with --workspace <id>")
      .argument('<workspace>', 'workspace id or name')
      .argument('<name>', 'a name for the secret')
      .option(
        '--agent-token <token>',
        "the agent's API token (default: the token you act with; visible in ps: prefer --agent-token-file)",
      )
      .option('--agent-token-file <path>', "a file holding the agent's API token"),
    async (ctx, cmd) => {
      const [wsArg, name] = cmd.processedArgs as [string, string];
      const o = cmd.opts<{ agentToken?: string; agentTokenFile?: string }>();
      if (o.agentToken !== undefined && o.agentTokenFile !== undefined)
        throw new UsageError('workspace token: --agent-token and --agent-token-file are mutually exclusive');
      if (o.agentToken !== undefined)
        warnSecretFlag('--agent-token', '--agent-token-file', (line) => ctx.err.write(`mdvfs: warning: ${line}\n`));
      const fromFile =
        o.agentTokenFile !== undefined
          ? readTokenFile(o.agentTokenFile, '--agent-token-file', (line) => ctx.err.write(`mdvfs: warning: ${line}\n`))
          : undefined;
      const auth = ctx.caller.creds.authorization;
      const agentToken = fromFile ?? o.agentToken ?? (auth?.startsWith('Bearer ') ? auth.slice(7) : undefined);
      if (agentToken === undefined)
        throw new UsageError('workspace token: --agent-token is required (or act with --token <agent token>)');
      const id = await workspaceId(ctx, wsArg, 'token');
      const r = await ctx.caller.call('ws.token', { id, name, agent_token: agentToken });
      ctx.out.write(`${r.secret}\n`);
    },
  );

  host.action(
    ws
      .command('tokens')
      .description("list a workspace's secrets (id, name, agent, created; never the secrets)")
      .argument('<workspace>', 'workspace id or name')
      .option('--json', 'print as JSON'),
    async (ctx, cmd) => {
      const [wsArg] = cmd.processedArgs as [string];
      const r = await ctx.caller.call('ws.tokenList', { id: await workspaceId(ctx, wsArg, 'tokens') });
      if (cmd.opts<{ json?: boolean }>().json) {
        ctx.out.write(`${JSON.stringify(r)}\n`);
        return;
      }
      const rows = r.tokens.map((t) => [t.id, t.name, t.agent, new Date(t.created * 1000).toISOString()]);
      for (const line of columns(rows, 'llll')) ctx.out.write(`${line}\n`);
    },
  );

  host.action(
    ws
      .command('revoke')
      .description('revoke one workspace secret by its id (see workspace tokens)')
      .argument('<workspace>', 'workspace id or name')
      .argument('<token-id>', 'the token id'),
    async (ctx, cmd) => {
      const [wsArg, tokenId] = cmd.processedArgs as [string, string];
      const r = await ctx.caller.call('ws.tokenRevoke', {
        id: await workspaceId(ctx, wsArg, 'revoke'),
        token_id: tokenId,
      });
      ctx.out.write(`revoked ${r.revoked}\n`);
    },
  );
}
