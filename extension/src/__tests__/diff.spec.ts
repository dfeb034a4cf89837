import { diffLines, diffSequences, diffWords, layoutDiff } from '../diff';

describe('diffSequences', () => {
  it('finds a longest common subsequence edit script', () => {
    const ops = diffSequences('ABCABBA'.split(''), 'CBABAC'.split(''));
    const kept = ops.filter(op => op === 'equal').length;
    expect(kept).toBe(4); // LCS("ABCABBA", "CBABAC") has length 4
    expect(ops.filter(op => op === 'del')).toHaveLength(3);
    expect(ops.filter(op => op === 'add')).toHaveLength(2);
  });

  it('orders deletions before additions within a change', () => {
    expect(diffSequences(['a', 'x', 'b'], ['a', 'y', 'b'])).toEqual(['equal', 'del', 'add', 'equal']);
  });
});

describe('diffLines', () => {
  it('numbers old and new lines', () => {
    const lines = diffLines('a\nb\nc\n', 'a\nB\nc\nd\n');
    expect(lines.map(l => [l.op, l.text, l.oldNo, l.newNo])).toEqual([
      ['equal', 'a', 1, 1],
      ['del', 'b', 2, null],
      ['add', 'B', null, 2],
      ['equal', 'c', 3, 3],
      ['add', 'd', null, 4]
    ]);
  });

  it('treats null text as empty', () => {
    expect(diffLines(null, 'x\n').map(l => l.op)).toEqual(['add']);
    expect(diffLines('x', null).map(l => l.op)).toEqual(['del']);
  });
});

describe('diffWords', () => {
  it('marks only the changed tokens', () => {
    const { old, new: next } = diffWords('    y = x * 2', '    y = x * 4');
    expect(old.filter(s => s.changed).map(s => s.text)).toEqual(['2']);
    expect(next.filter(s => s.changed).map(s => s.text)).toEqual(['4']);
    expect(next.map(s => s.text).join('')).toBe('    y = x * 4');
  });
});

describe('layoutDiff', () => {
  it('folds unchanged runs beyond the context', () => {
    const old = Array.from({ length: 20 }, (_, i) => `line ${i}`).join('\n');
    const next = old.replace('line 10', 'LINE 10');
    const rows = layoutDiff(diffLines(old, next), 2);
    expect(rows.map(r => r.kind)).toEqual(['fold', 'equal', 'equal', 'change', 'equal', 'equal', 'fold']);
    expect(rows[0]).toEqual({ kind: 'fold', count: 8 });
    expect(rows[6]).toEqual({ kind: 'fold', count: 7 });
  });
});

describe('diffWords whitespace', () => {
  it('does not mark re-indentation as a changed word', () => {
    const { old, new: next } = diffWords('    f(a)', '        f(b)');
    expect(old.filter(s => s.changed).map(s => s.text)).toEqual(['a']);
    expect(next.filter(s => s.changed).map(s => s.text)).toEqual(['b']);
  });
});
