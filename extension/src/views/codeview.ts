/**
 * A read-only code listing with line numbers and case-insensitive search
 * highlighting (plain substring match, so a query like `T.copy(` needs no escaping).
 */
import { h } from '../dom';
import { splitLines } from '../diff';

export interface ICodeOptions {
  testid: string;
  query?: string;
  /** Shown instead of the listing when the text is null (e.g. lowering failed). */
  emptyMessage?: string;
  attrs?: Record<string, string>;
  /** The number of the first line (a part of a longer source keeps its line numbers). */
  firstLine?: number;
}

/** Split `line` into text and `<mark>` nodes for each occurrence of `needle`. */
function highlight(line: string, needle: string): { nodes: (Node | string)[]; count: number } {
  if (!needle) {
    return { nodes: [line], count: 0 };
  }
  const haystack = line.toLowerCase();
  const nodes: (Node | string)[] = [];
  let count = 0;
  let from = 0;
  for (let at = haystack.indexOf(needle); at >= 0; at = haystack.indexOf(needle, from)) {
    if (at > from) {
      nodes.push(line.slice(from, at));
    }
    nodes.push(h('mark', { class: 'tw-match' }, line.slice(at, at + needle.length)));
    from = at + needle.length;
    count++;
  }
  if (from < line.length) {
    nodes.push(line.slice(from));
  }
  return { nodes, count };
}

/** Render `text` as numbered lines; `data-matches` on the root holds the match count. */
export function renderCode(text: string | null, options: ICodeOptions): HTMLElement {
  if (text === null || text === undefined) {
    return h(
      'div',
      { class: 'tw-code tw-code-missing', 'data-testid': options.testid, ...options.attrs },
      options.emptyMessage ?? 'Not available.'
    );
  }
  const needle = (options.query ?? '').toLowerCase();
  let matches = 0;
  const lines = splitLines(text).map((line, idx) => {
    const { nodes, count } = highlight(line, needle);
    matches += count;
    return h(
      'div',
      { class: count ? 'tw-code-line tw-has-match' : 'tw-code-line' },
      h('span', { class: 'tw-ln' }, idx + (options.firstLine ?? 1)),
      h('span', { class: 'tw-code-text' }, ...nodes)
    );
  });
  return h(
    'div',
    { class: 'tw-code', 'data-testid': options.testid, 'data-matches': matches, ...options.attrs },
    ...lines
  );
}
