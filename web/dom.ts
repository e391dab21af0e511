/** Small DOM helpers shared by the page's modules. */
import { ApiError } from './api.js';

export function $(id: string): HTMLElement {
  const e = document.getElementById(id);
  if (e === null) throw new Error(`missing #${id}`);
  return e;
}
export function input(id: string): HTMLInputElement {
  return $(id) as HTMLInputElement;
}
export function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  cls?: string,
  text?: string,
): HTMLElementTagNameMap[K] {
  const e = document.createElement(tag);
  if (cls !== undefined) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}
export function show(id: string, on: boolean): void {
  $(id).hidden = !on;
}
export function button(text: string, onclick: () => void, title?: string): HTMLButtonElement {
  const b = el('button', undefined, text);
  b.type = 'button';
  b.onclick = onclick;
  if (title !== undefined) b.title = title;
  return b;
}

/** "12 s ago", "3 min ago", else the local date and time. */
export function ago(ms: number): string {
  const s = Math.max(0, Math.round((Date.now() - ms) / 1000));
  if (s < 60) return `${s} s ago`;
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  return new Date(ms).toLocaleString();
}
/** "alice", or "helper on behalf of alice" for an agent's delegated work. */
export function whoText(by: string | undefined, obo: string | undefined): string {
  if (by === undefined) return 'the service';
  return obo === undefined ? by : `${by} on behalf of ${obo}`;
}

/** A refusal as one readable sentence (the API's message starts with its code). */
export function describe(err: unknown): string {
  if (err instanceof ApiError) return `${err.message}${err.message.startsWith(err.code) ? '' : ` (${err.code})`}`;
  return err instanceof Error ? err.message : String(err);
}

/**
 * Copies a shown secret to the clipboard; where the browser refuses, selects it for Ctrl+C.
 * Answers what happened, for the page to say.
 */
export async function copyText(node: HTMLElement): Promise<string> {
  try {
    await navigator.clipboard.writeText(node.textContent ?? '');
    return 'Copied';
  } catch {
    const range = document.createRange();
    range.selectNodeContents(node);
    getSelection()?.removeAllRanges();
    getSelection()?.addRange(range);
    return 'Copying was refused by the browser: the text is selected, press Ctrl+C';
  }
}

/** Asks in the page's small dialog: a line of text (`value` its default), or a yes/no question (`value` null). */
export function ask(label: string, value: string | null): Promise<string | null> {
  const dlg = $('ask') as HTMLDialogElement;
  $('ask-label').textContent = label;
  const box = input('ask-input');
  box.hidden = value === null;
  box.value = value ?? '';
  dlg.showModal();
  if (value !== null) box.select();
  return new Promise((resolve) => {
    const done = (v: string | null): void => {
      $('ask-form').onsubmit = null;
      $('ask-cancel').onclick = null;
      dlg.close();
      resolve(v);
    };
    $('ask-form').onsubmit = (e) => {
      e.preventDefault();
      done(value === null ? '' : box.value.trim());
    };
    $('ask-cancel').onclick = () => done(null);
    dlg.oncancel = () => done(null);
  });
}
