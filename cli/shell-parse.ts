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

export function tokenize(line: string): Token[] {
  const tokens: Token[] = [];
  let word = '';
  let inWord = false;
  let i = 0;
  const endWord = () => {
    if (inWord) tokens.push({ word });
    word = '';
    inWord = false;
  };
  while (i < line.length) {
    const c = line[i] as string;
    if (c === '\\') {
      if (i + 1 < line.length) word += line[i + 1];
      inWord = true;
      i += 2;
    } else if (c === "'") {
      const end = line.indexOf("'", i + 1);
      if (end < 0) throw new UsageError('syntax error: unterminated quote');
      word += line.slice(i + 1, end);
      inWord = true;
      i = end + 1;
    } else if (c === '"') {
      i++;
      inWord = true;
      for (;;) {
        if (i >= line.length) throw new UsageError('syntax error: unterminated quote');
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
      word += c;
      inWord = true;
      i++;
    }
  }
  endWord();
  return tokens;
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
