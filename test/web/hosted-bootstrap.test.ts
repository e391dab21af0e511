/// <reference lib="dom" />
/**
 * Issue 30, item 7: in hosted mode the web UI's bootstrap form asks for the one-time secret (the
 * server no longer says whether it needs bootstrap, so the sign-in page offers "Set up a new
 * server"). A wrong secret is refused; the right one creates the administrator. Real headless
 * Chromium against a hosted `mdvfs serve` (see test/web/ui.test.ts).
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import puppeteer, { type Browser } from 'puppeteer-core';
import { client, startService } from '../helpers/http.js';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
if (!existsSync(CHROMIUM))
  throw new Error(`no Chromium at ${CHROMIUM}: install Debian's chromium package (.ci/run does) or set CHROMIUM_PATH`);

const svc = await startService(t, { env: { SERVICE_MODE: 'hosted' } });
const browser: Browser = await puppeteer.launch({
  executablePath: CHROMIUM,
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run'],
});
t.teardown(() => browser.close());

t.test('hosted first run: the bootstrap form asks for the secret', async (t) => {
  const page = await (await browser.createBrowserContext()).newPage();
  await page.goto(svc.base);
  await page.waitForSelector('#signin-form', { visible: true });
  t.ok(await page.$('#bootstrap[hidden]'), 'no first-run form is shown by itself');
  await page.click('#setup-open');
  await page.waitForSelector('#bootstrap:not([hidden])');
  t.ok(await page.$('#bootstrap-secret-label:not([hidden])'), 'the form has a secret field');
  t.equal(await page.$eval('#bootstrap-secret', (e) => (e as HTMLInputElement).required), true, 'and needs it');

  await page.type('#bootstrap-name', 'admin');
  await page.type('#bootstrap-secret', 'mdvfs-boot-wrong');
  await page.click('#bootstrap-form button[type=submit]');
  await page.waitForSelector('#message:not([hidden])');
  t.match(await page.$eval('#message', (e) => e.textContent ?? ''), /secret/, 'a wrong secret is refused');
  t.ok(await page.$('#bootstrap-result[hidden]'), 'no token');

  const secret = readFileSync(path.join(svc.dataDir, 'bootstrap-secret'), 'utf8').trim();
  await page.$eval('#bootstrap-secret', (e) => ((e as HTMLInputElement).value = ''));
  await page.type('#bootstrap-secret', secret);
  await page.click('#bootstrap-form button[type=submit]');
  await page.waitForSelector('#bootstrap-result:not([hidden])');
  const token = await page.$eval('#bootstrap-token', (e) => e.textContent ?? '');
  t.equal((await client(svc, { auth: `Bearer ${token}` }).get('/auth/whoami')).json.user, 'admin', 'the token works');
  t.equal(await page.$eval('#bootstrap-secret', (e) => (e as HTMLInputElement).value), '', 'the secret is cleared');
  await page.browserContext().close();
});
