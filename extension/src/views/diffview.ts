/**
 * Renders a text diff as a unified listing or side by side, with changed
 * words highlighted inside paired deleted/added lines.
 */
import {
  countChanges,
  diffLines,
  diffWords,
  IChangeBlock,
  IDiffLine,
  IWordSegment,
  layoutDiff
} from '../diff';
import { h } from '../dom';

export type DiffMode = 'unified' | 'split';

export interface IDiffOptions {
  mode: DiffMode;
  /** Captions of the old and new side, e.g. pass names or kernel labels. */
  labels: [string, string];
  testid?: string;
  context?: number;
}

/**
 * Below this share of unchanged characters, word highlighting of a paired
 * line is noise (everything is marked); the line colour alone says enough.
 */
const MIN_WORD_SIMILARITY = 0.35;

/** Word segments for each deleted/added line that has a similar partner. */
function pairWords(block: IChangeBlock, into: Map<IDiffLine, IWordSegment[]>): void {
  const pairs = Math.min(block.dels.length, block.adds.length);
  for (let k = 0; k < pairs; k++) {
    const words = diffWords(block.dels[k].text, block.adds[k].text);
    const kept = words.new.filter(seg => !seg.changed).reduce((n, seg) => n + seg.text.length, 0);
    const total = Math.max(block.dels[k].text.length, block.adds[k].text.length, 1);
    if (kept / total >= MIN_WORD_SIMILARITY) {
      into.set(block.dels[k], words.old);
      into.set(block.adds[k], words.new);
    }
  }
}

function lineText(line: IDiffLine, words: Map<IDiffLine, IWordSegment[]>): HTMLElement {
  const segments = words.get(line);
  if (!segments) {
    return h('span', { class: 'tw-diff-text' }, line.text);
  }
  const cls = line.op === 'add' ? 'tw-word-add' : 'tw-word-del';
  return h(
    'span',
    { class: 'tw-diff-text' },
    ...segments.map(seg => (seg.changed ? h('span', { class: cls }, seg.text) : seg.text))
  );
}

const SIGN: Record<string, string> = { equal: ' ', del: '-', add: '+' };
const OP_CLASS: Record<string, string> = {
  equal: 'tw-diff-ctx',
  del: 'tw-diff-del',
  add: 'tw-diff-add'
};

function unifiedLine(line: IDiffLine, words: Map<IDiffLine, IWordSegment[]>): HTMLElement {
  return h(
    'div',
    { class: `tw-diff-line ${OP_CLASS[line.op]}`, 'data-op': line.op },
    h('span', { class: 'tw-ln' }, line.oldNo ?? ''),
    h('span', { class: 'tw-ln' }, line.newNo ?? ''),
    h('span', { class: 'tw-diff-sign' }, SIGN[line.op]),
    lineText(line, words)
  );
}

function foldRow(count: number): HTMLElement {
  return h('div', { class: 'tw-diff-fold' }, `⋯ ${count} unchanged line${count === 1 ? '' : 's'}`);
}

function renderUnified(lines: IDiffLine[], context: number): HTMLElement {
  const words = new Map<IDiffLine, IWordSegment[]>();
  const body = h('div', { class: 'tw-diff-body tw-code' });
  for (const row of layoutDiff(lines, context)) {
    if (row.kind === 'fold') {
      body.appendChild(foldRow(row.count));
    } else if (row.kind === 'equal') {
      body.appendChild(unifiedLine(row.line, words));
    } else {
      pairWords(row.block, words);
      for (const line of [...row.block.dels, ...row.block.adds]) {
        body.appendChild(unifiedLine(line, words));
      }
    }
  }
  return body;
}

function splitCell(
  line: IDiffLine | undefined,
  side: 'old' | 'new',
  words: Map<IDiffLine, IWordSegment[]>
): Node[] {
  if (!line) {
    return [h('td', { class: 'tw-ln' }), h('td', { class: 'tw-diff-empty' })];
  }
  return [
    h('td', { class: 'tw-ln' }, side === 'old' ? line.oldNo : line.newNo),
    h('td', { class: `tw-diff-cell ${OP_CLASS[line.op]}`, 'data-op': line.op }, lineText(line, words))
  ];
}

function renderSplit(lines: IDiffLine[], context: number, labels: [string, string]): HTMLElement {
  const words = new Map<IDiffLine, IWordSegment[]>();
  const rows: HTMLElement[] = [];
  for (const row of layoutDiff(lines, context)) {
    if (row.kind === 'fold') {
      rows.push(h('tr', {}, h('td', { colspan: 4 }, foldRow(row.count))));
    } else if (row.kind === 'equal') {
      rows.push(h('tr', {}, ...splitCell(row.line, 'old', words), ...splitCell(row.line, 'new', words)));
    } else {
      pairWords(row.block, words);
      const { dels, adds } = row.block;
      for (let k = 0; k < Math.max(dels.length, adds.length); k++) {
        rows.push(h('tr', {}, ...splitCell(dels[k], 'old', words), ...splitCell(adds[k], 'new', words)));
      }
    }
  }
  // Fixed layout with wrapped lines: both halves stay visible side by side
  // however long a line is (tables do not scroll, and halves must align).
  return h(
    'div',
    { class: 'tw-diff-body' },
    h(
      'table',
      { class: 'tw-diff-split' },
      h(
        'colgroup',
        {},
        h('col', { class: 'tw-col-ln' }),
        h('col'),
        h('col', { class: 'tw-col-ln' }),
        h('col')
      ),
      h('thead', {}, h('tr', {}, h('th', { colspan: 2 }, labels[0]), h('th', { colspan: 2 }, labels[1]))),
      h('tbody', {}, ...rows)
    )
  );
}

/** The diff of `oldText` → `newText` as a self-contained element. */
export function renderDiff(
  oldText: string | null,
  newText: string | null,
  options: IDiffOptions
): HTMLElement {
  const lines = diffLines(oldText, newText);
  const { added, removed } = countChanges(lines);
  const context = options.context ?? 3;
  const root = h('div', {
    class: `tw-diff tw-diff-${options.mode}`,
    'data-testid': options.testid ?? 'tw-diff',
    'data-added': added,
    'data-removed': removed
  });
  root.appendChild(
    h(
      'div',
      { class: 'tw-diff-summary' },
      h('span', { class: 'tw-diff-labels' }, `${options.labels[0]} → ${options.labels[1]}`),
      h('span', { class: 'tw-diff-stat-add' }, `+${added}`),
      h('span', { class: 'tw-diff-stat-del' }, `−${removed}`)
    )
  );
  if (added === 0 && removed === 0) {
    root.appendChild(h('div', { class: 'tw-diff-nochange' }, 'No textual change.'));
    return root;
  }
  root.appendChild(
    options.mode === 'split' ? renderSplit(lines, context, options.labels) : renderUnified(lines, context)
  );
  return root;
}
