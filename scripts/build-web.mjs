// Bundles the web UI (web/) into dist/web: index.html, assets/app.js, assets/app.css.
// Runs in `npm run build` (so at install, through `prepare`), never when the service starts.
import { copyFileSync, mkdirSync, rmSync } from 'node:fs';
import { build } from 'esbuild';

const out = 'dist/web';
rmSync(out, { recursive: true, force: true });
mkdirSync(`${out}/assets`, { recursive: true });
await build({
  entryPoints: { app: 'web/main.ts' },
  outdir: `${out}/assets`,
  bundle: true,
  format: 'esm',
  target: ['chrome110', 'firefox115', 'safari16'],
  minify: true,
  legalComments: 'linked',
  logLevel: 'warning',
});
await build({
  entryPoints: { app: 'web/styles.css' },
  outdir: `${out}/assets`,
  bundle: true,
  minify: true,
  logLevel: 'warning',
});
copyFileSync('web/index.html', `${out}/index.html`);
