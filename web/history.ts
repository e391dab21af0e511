/**
 * History in the page: the commit log (everything the caller may see) or one file's history
 * (`GET /vcs/log?path=`, paged with its cursor), each commit with who committed it and, per path,
 * who changed it (`GET /vcs/show`: "helper on behalf of alice"); diffs between versions (diff2html,
 * side by side or unified); a file as it was at a commit (read-only, with its rendered preview);
 * restoring a file's version and reverting to a commit (`POST /vcs/revert`), after a confirmation.
 * What the caller may see, read and restore is the daemon's decision; refusals are shown as its
 * readable message.
 */
import DOMPurify from 'dompurify';
import { html as diffHtml } from 'diff2html';
import type MarkdownIt from 'markdown-it';
import { fsUrl, type Api, type Change, type Commit } from './api.js';
import { $, ago, ask, button, el, show, whoText } from './dom.js';

/** What the history needs from the rest of the page. */
export interface HistoryHost {
  api: Api;
  md: MarkdownIt;
  message(text: string, kind: 'error' | 'info'): void;
  /** Runs an action, showing a refusal as a readable message. */
  act(fn: () => Promise<void>): () => void;
  /** The file in the editor and whether it has unsaved edits. */
  editing(): { path: string; unsaved: boolean } | null;
  /** Saves the editor's text; false when it could not be (a conflict, shown by the editor). */
  save(): Promise<boolean>;
  /**
   * After a restore of `path` (a file, or a directory with what is below it; null: everything): the
   * tree and the open file show what is there now; a restored file is opened.
   */
  restored(path: string | null, dir: boolean): Promise<void>;
}

/** Commits per page of the log (the API's cursor gives the next page). */
const LOG_PAGE = 25;

interface Shown {
  commit: Commit;
  changes: Change[];
  truncated?: true;
  more?: number;
}

let host: HistoryHost;
/** The path whose history is listed; null for the whole log. */
let historyPath: string | null = null;
/** Whether that path is a directory (its history gathers everything below it). */
let historyDir = false;
let cursor: string | undefined;
/** The commits listed, newest first (to order a comparison of two). */
let listed: Commit[] = [];
/** Hashes ticked for comparing two versions. */
const ticked = new Set<string>();
/** Guards against an older load finishing after a newer one. */
let generation = 0;
let diffFormat: 'side-by-side' | 'line-by-line' = 'side-by-side';
let lastDiff: { title: string; diff: string; truncated: boolean } | null = null;
/** The version in the read-only view. */
let version: { path: string; commit: Commit } | null = null;

const short = (hash: string): string => hash.slice(0, 10);
const query = (params: Record<string, string | undefined>): string =>
  Object.entries(params)
    .filter((e): e is [string, string] => e[1] !== undefined)
    .map(([k, v]) => `${k}=${encodeURIComponent(v)}`)
    .join('&');

export function wireHistory(h: HistoryHost): void {
  host = h;
  $('log-all').onclick = h.act(async () => {
    historyPath = null;
    historyDir = false;
    await loadHistory();
  });
  $('log-more').onclick = h.act(loadMore);
  $('diff-format').onclick = () => {
    diffFormat = diffFormat === 'side-by-side' ? 'line-by-line' : 'side-by-side';
    renderDiff();
  };
  $('compare').onclick = h.act(compareTicked);
  $('version-close').onclick = closeVersion;
  $('version-diff').onclick = h.act(async () => {
    if (version !== null) await diffWithWorking(version.path, version.commit);
  });
  $('version-restore').onclick = h.act(async () => {
    if (version !== null) await restoreVersion(version.path, false, version.commit);
  });
  renderDiffButton();
}

/** Lists the history of `path` next time the History panel loads (null: every commit). */
export function setHistoryPath(path: string | null, dir: boolean): void {
  historyPath = path;
  historyDir = path !== null && dir;
}

/** (Re)loads the History panel: the first page of the log or of the file's history. */
export async function loadHistory(): Promise<void> {
  const gen = ++generation;
  cursor = undefined;
  listed = [];
  ticked.clear();
  $('log').replaceChildren();
  $('commit-detail').replaceChildren();
  show('commit-detail', false);
  lastDiff = null;
  renderDiff();
  $('log-title').textContent = historyPath === null ? 'All commits you may see' : `History of ${historyPath}`;
  show('log-all', historyPath !== null);
  updateCompare();
  await page(gen);
}

async function loadMore(): Promise<void> {
  show('log-more', false); // one page at a time
  await page(generation);
}

async function page(gen: number): Promise<void> {
  const path = historyPath;
  const dir = historyDir;
  const r = await host.api.json<{ commits: Commit[]; next_cursor?: string }>(
    `/vcs/log?${query({ limit: String(LOG_PAGE), path: path ?? undefined, cursor })}`,
  );
  // The per-path attribution of each commit (who changed the file, for whom).
  const shown =
    path === null
      ? r.commits.map(() => null)
      : await Promise.all(
          r.commits.map((c) => host.api.json<Shown>(`/vcs/show?rev=${encodeURIComponent(c.hash)}`).catch(() => null)),
        );
  if (gen !== generation) return;
  cursor = r.next_cursor;
  show('log-more', cursor !== undefined);
  const list = $('log');
  if (r.commits.length === 0 && listed.length === 0)
    list.append(el('li', 'empty', path === null ? 'No commits yet' : `No commits of ${path} yet`));
  r.commits.forEach((c, i) => {
    listed.push(c);
    list.append(path === null ? logRow(c) : fileRow(path, dir, c, shown[i] ?? null));
  });
}

function commitLine(c: Commit, prefix: string): HTMLElement[] {
  const by = el('span', 'by', `${prefix}${whoText(c.author, c.on_behalf_of)} · ${ago(c.timestamp * 1000)}`);
  by.title = new Date(c.timestamp * 1000).toLocaleString();
  return [el('code', 'hash', short(c.hash)), el('span', 'msg', c.message), by];
}

/** A commit of the whole log: a click shows its changes, who made each, and its diff. */
function logRow(c: Commit): HTMLLIElement {
  const li = el('li', 'commit');
  li.dataset.hash = c.hash;
  li.append(...commitLine(c, ''));
  li.onclick = host.act(() => showCommit(c));
  return li;
}

/** Whether a change in a commit is `path` or below it (a directory's history). */
function under(change: Change, path: string): boolean {
  return change.path === path || change.path === `${path}/` || change.path.startsWith(`${path}/`);
}

/** A commit of one file's (or directory's) history, with who changed it there and what can be done with that version. */
function fileRow(path: string, dir: boolean, c: Commit, detail: Shown | null): HTMLLIElement {
  const li = el('li', 'commit version-row');
  li.dataset.hash = c.hash;
  li.append(...commitLine(c, 'committed by '));
  const mine = detail?.changes.filter((ch) => under(ch, path)) ?? [];
  if (mine.length > 0) {
    // One line per distinct (what, who): a directory's history may gather many paths.
    const lines = [...new Set(mine.map((ch) => `${ch.op} by ${whoText(ch.by, ch.on_behalf_of)}`))];
    li.append(el('span', 'attr', lines.slice(0, 3).join('; ') + (lines.length > 3 ? '; …' : '')));
  }
  const deleted = mine.length > 0 && mine.every((ch) => ch.op === 'deleted');
  const actions = el('div', 'actions');
  const tick = el('input');
  tick.type = 'checkbox';
  tick.className = 'tick';
  tick.title = 'Tick two versions to compare them';
  tick.onclick = (e) => e.stopPropagation();
  tick.onchange = () => {
    if (tick.checked) ticked.add(c.hash);
    else ticked.delete(c.hash);
    updateCompare();
  };
  // A row's buttons act on their own, not as a click on the row.
  const action = (cls: string, text: string, title: string, fn: () => Promise<void>): HTMLButtonElement => {
    const b = button(text, host.act(fn), title);
    b.className = cls;
    b.addEventListener('click', (e) => e.stopPropagation());
    return b;
  };
  const buttons = [
    action('changes', 'Changes', 'What this commit changed in it', () => commitDiff(path, c)),
    ...(deleted || dir ? [] : [action('view', 'View', 'Read it as it was at this commit', () => viewVersion(path, c))]),
    ...(deleted
      ? []
      : [action('diff-now', 'Diff with now', 'This version against the working copy', () => diffWithWorking(path, c))]),
    action('restore', 'Restore', 'Put this version back (recorded as a new commit)', () =>
      restoreVersion(path, dir, c),
    ),
  ];
  actions.append(tick, ...buttons);
  li.append(actions);
  li.onclick = host.act(() => commitDiff(path, c));
  return li;
}

function updateCompare(): void {
  const b = $('compare') as HTMLButtonElement;
  b.hidden = historyPath === null;
  b.disabled = ticked.size !== 2;
  b.textContent = ticked.size === 2 ? 'Compare the two ticked versions' : 'Tick two versions to compare';
}

// ---------- diffs ----------

function renderDiffButton(): void {
  const b = $('diff-format');
  b.textContent = diffFormat === 'side-by-side' ? 'Unified' : 'Side by side';
  b.title = `Show diffs ${diffFormat === 'side-by-side' ? 'unified' : 'side by side'}`;
}

function renderDiff(): void {
  renderDiffButton();
  const box = $('diff');
  box.classList.toggle('side-by-side', diffFormat === 'side-by-side');
  if (lastDiff === null) {
    box.replaceChildren();
    return;
  }
  const title = el('p', 'diff-title', lastDiff.title);
  if (lastDiff.diff.trim() === '') {
    box.replaceChildren(title, el('p', 'empty', 'No difference.'));
    return;
  }
  box.innerHTML = DOMPurify.sanitize(
    diffHtml(lastDiff.diff, { drawFileList: false, outputFormat: diffFormat, matching: 'lines' }),
  );
  box.prepend(title);
  if (lastDiff.truncated) title.after(el('p', 'more', 'The diff is cut: too many changes to show at once.'));
}

async function showDiff(title: string, params: { from?: string; to?: string; path?: string }): Promise<void> {
  const r = await host.api.json<{ diff: string; truncated?: boolean }>(
    `/vcs/diff?${query({ format: 'json', ...params })}`,
  );
  lastDiff = { title, diff: r.diff, truncated: r.truncated === true };
  renderDiff();
  $('diff').scrollIntoView({ block: 'nearest' });
}

function firstCommit(): void {
  lastDiff = null;
  renderDiff();
  $('diff').append(el('p', 'empty', 'The first commit: no earlier version to compare with.'));
}

/** What one commit changed in `path`. */
async function commitDiff(path: string, c: Commit): Promise<void> {
  if (c.parent === null) return firstCommit();
  await showDiff(`${path}: changes in ${short(c.hash)} (${c.message})`, { from: c.parent, to: c.hash, path });
}

async function diffWithWorking(path: string, c: Commit): Promise<void> {
  await showDiff(`${path}: version ${short(c.hash)} → the working copy`, { from: c.hash, path });
}

async function compareTicked(): Promise<void> {
  if (historyPath === null || ticked.size !== 2) return;
  // Older → newer, as the log lists them (newest first).
  const [newer, older] = listed.filter((c) => ticked.has(c.hash));
  if (newer === undefined || older === undefined) return;
  await showDiff(`${historyPath}: version ${short(older.hash)} → version ${short(newer.hash)}`, {
    from: older.hash,
    to: newer.hash,
    path: historyPath,
  });
}

/** A commit of the whole log: its changes with who made each, its diff, and reverting to it. */
async function showCommit(c: Commit): Promise<void> {
  const detail = await host.api.json<Shown>(`/vcs/show?rev=${encodeURIComponent(c.hash)}`);
  const box = $('commit-detail');
  const list = el('ul', 'change-list');
  for (const ch of detail.changes) {
    const li = el('li');
    const p = el('button', 'link', ch.path);
    p.type = 'button';
    p.title = `History of ${ch.path}`;
    p.onclick = host.act(async () => {
      // A trailing / marks a directory's own mode or owner.
      const isDir = ch.path.endsWith('/');
      setHistoryPath(isDir && ch.path !== '/' ? ch.path.slice(0, -1) : ch.path, isDir);
      await loadHistory();
    });
    li.append(el('span', `op ${ch.op}`, ch.op), p, el('span', 'by', `by ${whoText(ch.by, ch.on_behalf_of)}`));
    list.append(li);
  }
  if (detail.truncated === true) list.append(el('li', 'more', `… and ${detail.more ?? 0} more`));
  const revert = button(
    'Revert to this commit',
    host.act(() => revertTo(c)),
    'Restore what you may read to its state at this commit (recorded as a new commit)',
  );
  revert.className = 'revert';
  box.replaceChildren(
    el('p', 'detail-head', `${short(c.hash)} ${c.message}, committed by ${whoText(c.author, c.on_behalf_of)}`),
    list,
    revert,
  );
  show('commit-detail', true);
  if (c.parent === null) firstCommit();
  else await showDiff(`Changes in ${short(c.hash)} (${c.message})`, { from: c.parent, to: c.hash });
}

// ---------- a version, read-only ----------

export function closeVersion(): void {
  version = null;
  show('version', false);
  show('panes', true);
}

async function viewVersion(path: string, c: Commit): Promise<void> {
  const res = await host.api.raw(`${fsUrl(path)}?at=${encodeURIComponent(c.hash)}`);
  const text = await res.text();
  version = { path, commit: c };
  $('version-title').textContent = `${path} at ${short(c.hash)} (${c.message}, ${ago(c.timestamp * 1000)}), read-only`;
  $('version-text').textContent = text;
  $('version-preview').innerHTML = DOMPurify.sanitize(host.md.render(text));
  show('panes', false);
  show('version', true);
}

// ---------- restore, revert ----------

interface Reverted {
  hash: string;
  saved: string | null;
}

/** Whether a restore of `path` (null: everything) replaces the editor's unsaved edits. */
function touchesEdits(path: string | null, dir: boolean): boolean {
  const e = host.editing();
  return e !== null && e.unsaved && (path === null || e.path === path || (dir && e.path.startsWith(`${path}/`)));
}

/** Unsaved edits are saved first: the revert then commits them, so they stay in history. */
function unsavedNote(path: string | null, dir: boolean): string {
  return touchesEdits(path, dir)
    ? ' Your unsaved edits in the editor are saved first and kept in history.'
    : ' Uncommitted changes are committed first, so nothing is lost.';
}

async function saveEditsFirst(path: string | null, dir: boolean): Promise<boolean> {
  if (!touchesEdits(path, dir) || (await host.save())) return true;
  host.message('Not restored: your edits could not be saved (see the conflict above)', 'error');
  return false;
}

async function restoreVersion(path: string, dir: boolean, c: Commit): Promise<void> {
  const what = dir ? `${path} and everything in it` : path;
  const q = `Restore ${what} to its version of ${short(c.hash)} (${c.message})? This is recorded as a new commit.${unsavedNote(path, dir)}`;
  if ((await ask(q, null)) === null) return;
  if (!(await saveEditsFirst(path, dir))) return;
  const r = await host.api.json<Reverted>('/vcs/revert', { method: 'POST', body: { hash: c.hash, paths: [path] } });
  closeVersion();
  await host.restored(path, dir);
  host.message(
    `Restored ${path} to ${short(c.hash)} (commit ${short(r.hash)})${r.saved === null ? '' : `; the changes before it are in ${short(r.saved)}`}`,
    'info',
  );
  await loadHistory();
}

async function revertTo(c: Commit): Promise<void> {
  const q = `Revert to ${short(c.hash)} (${c.message})? Everything you may read is put back as it was at that commit, recorded as a new commit.${unsavedNote(null, true)}`;
  if ((await ask(q, null)) === null) return;
  if (!(await saveEditsFirst(null, true))) return;
  const r = await host.api.json<Reverted>('/vcs/revert', { method: 'POST', body: { hash: c.hash } });
  closeVersion();
  await host.restored(null, true);
  host.message(
    `Reverted to ${short(c.hash)} (commit ${short(r.hash)})${r.saved === null ? '' : `; the changes before it are in ${short(r.saved)}`}`,
    'info',
  );
  await loadHistory();
}
