/**
 * The web UI: `GET /` (the page) and `GET /assets/*` (its script and styles), built into dist/web
 * at install (scripts/build-web.mjs), never at start.
 *
 * Security: the page is same-origin with the API, so it is the one origin the browser guard always
 * allows (browser-guard.ts). A strict Content-Security-Policy allows only this origin's own script
 * and styles (no inline script, no eval), connections to this origin only, no framing, no forms,
 * no plugins; user content is rendered by the page after sanitising, and the API never serves
 * user files as HTML (routes/fs.ts).
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import express, { type Express, type Response } from 'express';

export const CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "font-src 'self'",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
  "object-src 'none'",
].join('; ');

/** dist/web next to dist/http; absent when running from sources without a build. */
const WEB_DIR = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'web');

function pageHeaders(res: Response): void {
  res.setHeader('Content-Security-Policy', CONTENT_SECURITY_POLICY);
  res.setHeader('X-Frame-Options', 'DENY');
  res.setHeader('Referrer-Policy', 'no-referrer');
  res.setHeader('Cross-Origin-Opener-Policy', 'same-origin');
  res.setHeader('Cross-Origin-Resource-Policy', 'same-origin');
}

export function mountWeb(app: Express): void {
  const index = path.join(WEB_DIR, 'index.html');
  if (!existsSync(index)) return;
  // A middleware, not a route: the page is not part of the REST API (nor of its OpenAPI document).
  app.use((req, res, next) => {
    if ((req.method !== 'GET' && req.method !== 'HEAD') || (req.path !== '/' && req.path !== '/index.html')) {
      next();
      return;
    }
    pageHeaders(res);
    res.setHeader('Cache-Control', 'no-cache');
    res.sendFile(index);
  });
  app.use(
    '/assets',
    express.static(path.join(WEB_DIR, 'assets'), {
      index: false,
      dotfiles: 'ignore',
      fallthrough: true,
      redirect: false,
      setHeaders: (res) => {
        pageHeaders(res);
        res.setHeader('Cache-Control', 'no-cache');
      },
    }),
  );
}
