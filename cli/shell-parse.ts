/**
 * The shell's command-line grammar: words with '…' and "…" quoting and backslash escapes,
 * pipelines (`a | b`), sequences (`a ; b`), output redirection into the filesystem (`> f`,
 * `>> f`) and `#` comments. No variables, globs or subshells: it drives built-ins only.
 */
import { UsageError } from './errors.js';

type Token = { word: string } | { op: '|' | ';' | '>' | '>>' };

export interface Pipeline {
  stages: string[][];
  redirect?: { path: string; append: boolean };
}

/** Where a scan of a line ended: the word being typed (for completion), and whether a quote is open. */
export interface ScanEnd {
  /** Offset in the line where the last word starts (the line's length when no word is open). */
  start: number;
  /** The last word as it means (quotes and escapes removed), '' when no word is open. */
  value: string;
  /** The quote still open at the end of the line, '' when none. */
  quote: '' | "'" | '"';
  /** True when the last word is a command name: the first word of a stage, not a redirection target. */
  command: boolean;
  /** True when the line ends inside a `#` comment. */
  comment: boolean;
}

/**
 * Splits a line into words and operators. Strict (the default): an unterminated quote is an error.
 * Partial (for completion of what is being typed): open quotes and a trailing backslash are allowed,
 * and `end` says where the last word starts and what it means so far.
 */
function scan(line: string, partial: boolean): { tokens: Token[]; end: ScanEnd } {
  const tokens: Token[] = [];
  let word = '';
  let inWord = false;
  let start = 0;
  let quote: ScanEnd['quote'] = '';
  let comment = false;
  let i = 0;
  const unterminated = () => {
    if (!partial) throw new UsageError('syntax error: unterminated quote');
  };
  const begin = () => {
    if (!inWord) start = i;
    inWord = true;
  };
  const endWord = () => {
    if (inWord) tokens.push({ word });
    word = '';
    inWord = false;
  };
  while (i < line.length) {
    const c = line[i] as string;
    if (c === '\\') {
      begin();
      if (i + 1 < line.length) word += line[i + 1];
      i += 2;
    } else if (c === "'") {
      begin();
      const end = line.indexOf("'", i + 1);
      if (end < 0) {
        unterminated();
        word += line.slice(i + 1);
        quote = "'";
        i = line.length;
        break;
      }
      word += line.slice(i + 1, end);
      i = end + 1;
    } else if (c === '"') {
      begin();
      i++;
      for (;;) {
        if (i >= line.length) {
          unterminated();
          quote = '"';
          break;
        }
        const d = line[i] as string;
        if (d === '"') break;
        if (d === '\\' && i + 1 < line.length && '"\\$`'.includes(line[i + 1] as string)) {
          word += line[i + 1];
          i += 2;
        } else {
          word += d;
          i++;
        }
      }
      i++;
    } else if (c === ' ' || c === '\t') {
      endWord();
      i++;
    } else if (c === '#' && !inWord) {
      comment = true;
      break;
    } else if (c === '|' || c === ';') {
      endWord();
      tokens.push({ op: c });
      i++;
    } else if (c === '>') {
      endWord();
      if (line[i + 1] === '>') {
        tokens.push({ op: '>>' });
        i += 2;
      } else {
        tokens.push({ op: '>' });
        i++;
      }
    } else {
      begin();
      word += c;
      i++;
    }
  }
  const open = inWord && !comment;
  endWord();
  // The last word is a command name when nothing but operators other than a redirection precede it in its stage.
  const before = open ? tokens.slice(0, -1) : tokens;
  const prev = before[before.length - 1];
  const command = prev === undefined || ('op' in prev && (prev.op === '|' || prev.op === ';'));
  const last = tokens[tokens.length - 1];
  return {
    tokens,
    end: {
      start: open ? start : line.length,
      value: open && last !== undefined && 'word' in last ? last.word : '',
      quote: open ? quote : '',
      command,
      comment,
    },
  };
}

export function tokenize(line: string): Token[] {
  return scan(line, false).tokens;
}

/** The word being typed at the end of `line` (the text before the cursor), for tab completion. */
export function scanPartial(line: string): ScanEnd {
  return scan(line, true).end;
}

/**
 * Writes `value` as a word the tokenizer reads back as `value`, in the quoting style the user started:
 * backslash escapes when none, else inside the open quote. `close` ends the quote (a finished word).
 */
export function quoteWord(value: string, quote: ScanEnd['quote'], close: boolean): string {
  if (quote === "'") return `'${value.replaceAll("'", `'\\''`)}${close ? "'" : ''}`;
  if (quote === '"') return `"${value.replace(/["\\$`]/g, '\\$&')}${close ? '"' : ''}`;
  return value.replace(/[\s\\'"|;>#]/g, '\\$&');
}

/** Parses a line into pipelines separated by `;`. An empty line gives []. */
export function parseLine(line: string): Pipeline[] {
  const out: Pipeline[] = [];
  let current: Pipeline = { stages: [] };
  let stage: string[] = [];
  let expectRedirect: boolean | undefined; // the append flag while waiting for a redirect target
  const closeStage = (op: string) => {
    if (stage.length === 0) throw new UsageError(`syntax error near '${op}'`);
    current.stages.push(stage);
    stage = [];
  };
  for (const t of tokenize(line)) {
    if ('word' in t) {
      if (expectRedirect !== undefined) {
        current.redirect = { path: t.word, append: expectRedirect };
        expectRedirect = undefined;
      } else if (current.redirect) throw new UsageError(`syntax error: '${t.word}' after a redirection`);
      else stage.push(t.word);
      continue;
    }
    if (expectRedirect !== undefined) throw new UsageError(`syntax error near '${t.op}'`);
    if (t.op === '>' || t.op === '>>') {
      if (stage.length === 0 || current.redirect) throw new UsageError(`syntax error near '${t.op}'`);
      expectRedirect = t.op === '>>';
    } else if (t.op === '|') {
      if (current.redirect) throw new UsageError("syntax error: '|' after a redirection");
      closeStage('|');
    } else {
      if (stage.length === 0 && current.stages.length === 0 && !current.redirect) continue; // `;;` or a leading ';'
      closeStage(';');
      out.push(current);
      current = { stages: [] };
    }
  }
  if (expectRedirect !== undefined) throw new UsageError('syntax error: missing file after redirection');
  if (stage.length > 0) current.stages.push(stage);
  else if (current.stages.length > 0) throw new UsageError("syntax error near '|'");
  if (current.stages.length > 0) out.push(current);
  return out;
}
