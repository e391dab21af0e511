/** `/health` and `/auth/*`. */
import { bodyString, callerOf, jsonBody, sendJson, type Registrar, type RouteContext } from '../request.js';

export function registerAuth(r: Registrar, ctx: RouteContext): void {
  // Works without credentials (even with SERVICE_ANONYMOUS=deny) and reveals nothing private.
  r.add('get', '/health', async (_req, res) => {
    sendJson(res, await ctx.client.call('sys.health', {}));
  });
  r.add('post', '/auth/login', ...jsonBody(), async (req, res) => {
    sendJson(res, await callerOf(ctx, req).call('auth.login', { username: bodyString(req, 'username') }));
  });
  r.add('get', '/auth/whoami', async (req, res) => {
    sendJson(res, await callerOf(ctx, req).call('auth.whoami', {}));
  });
  r.add('post', '/auth/bootstrap', ...jsonBody(), async (req, res) => {
    sendJson(res, await callerOf(ctx, req).call('auth.bootstrap', { username: bodyString(req, 'username') }));
  });
}
