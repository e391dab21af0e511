/** `/workspaces`, `/workspaces/<id>/tokens` (issue, list) and `/workspaces/<id>/tokens/<token_id>` (revoke). */
import { bodyString, callerOf, jsonBody, sendJson, type Registrar, type RouteContext } from '../request.js';

export function registerWorkspaces(r: Registrar, ctx: RouteContext): void {
  r.add('get', '/workspaces', async (req, res) => {
    sendJson(res, await callerOf(ctx, req).call('ws.list', {}));
  });
  r.add('post', '/workspaces', ...jsonBody(), async (req, res) => {
    sendJson(res, await callerOf(ctx, req).call('ws.create', { name: bodyString(req, 'name'), root_path: bodyString(req, 'root_path') }));
  });
  r.add('post', '/workspaces/:id/tokens', ...jsonBody(), async (req, res) => {
    const id = String(req.params.id ?? '');
    sendJson(res, await callerOf(ctx, req).call('ws.token', { id, name: bodyString(req, 'name'), agent_token: bodyString(req, 'agent_token') }));
  });
  r.add('get', '/workspaces/:id/tokens', async (req, res) => {
    sendJson(res, await callerOf(ctx, req).call('ws.tokenList', { id: String(req.params.id ?? '') }));
  });
  r.add('delete', '/workspaces/:id/tokens/:tokenId', async (req, res) => {
    sendJson(res, await callerOf(ctx, req).call('ws.tokenRevoke', { id: String(req.params.id ?? ''), token_id: String(req.params.tokenId ?? '') }));
  });
}
