/**
 * Small line and word diff (longest common subsequence).
 *
 * IR snapshots are mostly identical between passes, so the common prefix and
 * suffix are trimmed first and the quadratic LCS table only covers the changed
 * middle. A middle too large for the table (pathological inputs) degrades to
 * "delete all, add all", which is still a correct diff, just not minimal.
 */

export type DiffOp = 'equal' | 'del' | 'add';

export interface IDiffLine {
  op: DiffOp;
  text: string;
  /** 1-based line number in the old text (null for added lines). */
  oldNo: number | null;
  /** 1-based line number in the new text (null for deleted lines). */
  newNo: number | null;
}

/** A run of unchanged lines, or a change block: deletions then additions. */
export interface IChangeBlock {
  kind: 'change';
  dels: IDiffLine[];
  adds: IDiffLine[];
}
export type DiffBlock = { kind: 'equal'; lines: IDiffLine[] } | IChangeBlock;

export interface IWordSegment {
  text: string;
  changed: boolean;
}

/** Cells of the LCS table allowed before falling back to a non-minimal diff. */
const MAX_TABLE_CELLS = 4_000_000;

/** Edit script turning `a` into `b`, deletions ordered before additions. */
export function diffSequences<T>(a: readonly T[], b: readonly T[]): DiffOp[] {
  let start = 0;
  while (start < a.length && start < b.length && a[start] === b[start]) {
    start++;
  }
  let endA = a.length;
  let endB = b.length;
  while (endA > start && endB > start && a[endA - 1] === b[endB - 1]) {
    endA--;
    endB--;
  }
  const ops: DiffOp[] = new Array(start).fill('equal');
  ops.push(...diffMiddle(a.slice(start, endA), b.slice(start, endB)));
  for (let i = endA; i < a.length; i++) {
    ops.push('equal');
  }
  return ops;
}

function diffMiddle<T>(a: readonly T[], b: readonly T[]): DiffOp[] {
  const n = a.length;
  const m = b.length;
  if (n === 0 || m === 0 || (n + 1) * (m + 1) > MAX_TABLE_CELLS) {
    return [...new Array<DiffOp>(n).fill('del'), ...new Array<DiffOp>(m).fill('add')];
  }
  // lcs[i * (m + 1) + j] = LCS length of a[i:] and b[j:].
  const width = m + 1;
  const lcs = new Uint32Array((n + 1) * width);
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) {
      lcs[i * width + j] =
        a[i] === b[j]
          ? lcs[(i + 1) * width + j + 1] + 1
          : Math.max(lcs[(i + 1) * width + j], lcs[i * width + j + 1]);
    }
  }
  const ops: DiffOp[] = [];
  let i = 0;
  let j = 0;
  while (i < n && j < m) {
    if (a[i] === b[j]) {
      ops.push('equal');
      i++;
      j++;
    } else if (lcs[(i + 1) * width + j] >= lcs[i * width + j + 1]) {
      ops.push('del');
      i++;
    } else {
      ops.push('add');
      j++;
    }
  }
  while (i++ < n) {
    ops.push('del');
  }
  while (j++ < m) {
    ops.push('add');
  }
  return ops;
}

export function splitLines(text: string | null | undefined): string[] {
  if (!text) {
    return [];
  }
  const lines = text.split('\n');
  if (lines[lines.length - 1] === '') {
    lines.pop();
  }
  return lines;
}

export function diffLines(oldText: string | null, newText: string | null): IDiffLine[] {
  const a = splitLines(oldText);
  const b = splitLines(newText);
  const result: IDiffLine[] = [];
  let i = 0;
  let j = 0;
  for (const op of diffSequences(a, b)) {
    if (op === 'equal') {
      result.push({ op, text: b[j], oldNo: ++i, newNo: ++j });
    } else if (op === 'del') {
      result.push({ op, text: a[i], oldNo: ++i, newNo: null });
    } else {
      result.push({ op, text: b[j], oldNo: null, newNo: ++j });
    }
  }
  return result;
}

/** Group a line diff into unchanged runs and change blocks (for pairing lines). */
export function diffBlocks(lines: IDiffLine[]): DiffBlock[] {
  const blocks: DiffBlock[] = [];
  for (const line of lines) {
    const last = blocks[blocks.length - 1];
    if (line.op === 'equal') {
      if (last && last.kind === 'equal') {
        last.lines.push(line);
      } else {
        blocks.push({ kind: 'equal', lines: [line] });
      }
    } else {
      // A deletion after additions starts a new block so pairs stay in order.
      let block: IChangeBlock | null = last && last.kind === 'change' ? last : null;
      if (!block || (line.op === 'del' && block.adds.length > 0)) {
        block = { kind: 'change', dels: [], adds: [] };
        blocks.push(block);
      }
      (line.op === 'del' ? block.dels : block.adds).push(line);
    }
  }
  return blocks;
}

export function countChanges(lines: IDiffLine[]): { added: number; removed: number } {
  let added = 0;
  let removed = 0;
  for (const line of lines) {
    if (line.op === 'add') {
      added++;
    } else if (line.op === 'del') {
      removed++;
    }
  }
  return { added, removed };
}

/** Identifiers, numbers, whitespace runs and single punctuation characters. */
function tokenize(line: string): string[] {
  return line.match(/\w+|\s+|[^\w\s]/g) ?? [];
}

/**
 * Word-level diff of one old line against one new line.
 * Adjacent segments with the same flag are merged to keep the DOM small.
 */
export function diffWords(oldLine: string, newLine: string): { old: IWordSegment[]; new: IWordSegment[] } {
  const a = tokenize(oldLine);
  const b = tokenize(newLine);
  const oldSegs: IWordSegment[] = [];
  const newSegs: IWordSegment[] = [];
  const push = (segs: IWordSegment[], text: string, changed: boolean): void => {
    // A whitespace-only change (re-indentation) is plain from the line colour;
    // marking it would strike through empty space.
    changed = changed && /\S/.test(text);
    const last = segs[segs.length - 1];
    if (last && last.changed === changed) {
      last.text += text;
    } else {
      segs.push({ text, changed });
    }
  };
  let i = 0;
  let j = 0;
  for (const op of diffSequences(a, b)) {
    if (op === 'equal') {
      push(oldSegs, a[i++], false);
      push(newSegs, b[j++], false);
    } else if (op === 'del') {
      push(oldSegs, a[i++], true);
    } else {
      push(newSegs, b[j++], true);
    }
  }
  return { old: oldSegs, new: newSegs };
}

/** Rows of a rendered diff: unchanged lines, folded runs, and change blocks. */
export type DiffRow =
  | { kind: 'equal'; line: IDiffLine }
  | { kind: 'fold'; count: number }
  | { kind: 'change'; block: IChangeBlock };

/**
 * Keep `context` unchanged lines on each side of every change and fold the
 * rest, like `diff -U3`. An identical pair of texts folds to a single row.
 */
export function layoutDiff(lines: IDiffLine[], context = 3): DiffRow[] {
  const blocks = diffBlocks(lines);
  const rows: DiffRow[] = [];
  blocks.forEach((block, idx) => {
    if (block.kind === 'change') {
      rows.push({ kind: 'change', block });
      return;
    }
    const head = idx > 0 ? context : 0; // lines after the previous change
    const tail = idx < blocks.length - 1 ? context : 0; // lines before the next change
    const n = block.lines.length;
    if (head + tail >= n) {
      block.lines.forEach(line => rows.push({ kind: 'equal', line }));
      return;
    }
    block.lines.slice(0, head).forEach(line => rows.push({ kind: 'equal', line }));
    rows.push({ kind: 'fold', count: n - head - tail });
    block.lines.slice(n - tail).forEach(line => rows.push({ kind: 'equal', line }));
  });
  return rows;
}
