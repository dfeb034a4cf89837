/**
 * Benchmark record: TFLOP/s against problem size, ours vs cuBLAS, one chart
 * per (suite, dtype), and every row with its ratio in a table. Values are
 * shown as recorded; only the size ordering (M*N*K) is computed here.
 */
import type { IBench, IBenchRow } from '../types';
import { formatValue, h, s, svgTitle, table } from '../dom';
import { linear, niceStep, ticksOf } from './axis';
import { HoverDetail } from './hover';

const WIDTH = 640;
const HEIGHT = 300;
const MARGIN = { left: 56, right: 24, top: 16, bottom: 84 };

interface ISeries {
  key: 'ours' | 'cublas';
  label: string;
  value: (row: IBenchRow) => number | null;
}

export function sizeLabel(row: IBenchRow): string {
  return row.label ?? `${row.M}×${row.N}×${row.K}`;
}

const volume = (row: IBenchRow): number => row.M * row.N * row.K;

function groupRows(rows: IBenchRow[]): Map<string, IBenchRow[]> {
  const groups = new Map<string, IBenchRow[]>();
  for (const row of rows) {
    const key = `${row.suite} · ${row.dtype}`;
    groups.set(key, [...(groups.get(key) ?? []), row]);
  }
  groups.forEach(list => list.sort((a, b) => volume(a) - volume(b)));
  return groups;
}

function plot(title: string, rows: IBenchRow[], hover: HoverDetail): HTMLElement {
  const ours = rows.find(r => r.kernel)?.kernel ?? 'ours';
  const series: ISeries[] = [
    { key: 'ours', label: ours, value: r => r.tflops },
    { key: 'cublas', label: 'cuBLAS', value: r => r.cublas_tflops }
  ];
  const values = rows
    .flatMap(r => series.map(se => se.value(r)))
    .filter((v): v is number => typeof v === 'number');
  // The axis ends at the first round value above the largest point, so nothing is clipped.
  const top = Math.max(1, ...values);
  const step = niceStep(0, top, 5);
  const yMax = Math.ceil((top * 1.02) / step) * step;
  const ticks = ticksOf(0, yMax, step);
  const plotBottom = HEIGHT - MARGIN.bottom;
  const y = linear(0, yMax, plotBottom, MARGIN.top);
  const x = linear(0, Math.max(1, rows.length - 1), MARGIN.left + 50, WIDTH - MARGIN.right - 30);
  const xAt = (i: number): number => (rows.length === 1 ? (MARGIN.left + WIDTH - MARGIN.right) / 2 : x(i));

  const svg = s('svg', {
    class: 'tw-chart tw-bench-chart',
    viewBox: `0 0 ${WIDTH} ${HEIGHT}`,
    width: WIDTH,
    height: HEIGHT,
    role: 'img',
    'aria-label': `${title}: TFLOP/s by problem size`
  });
  const axes = s('g', { class: 'tw-axis' });
  for (const tick of ticks) {
    axes.append(
      s('line', { class: 'tw-grid', x1: MARGIN.left, x2: WIDTH - MARGIN.right, y1: y(tick), y2: y(tick) }),
      s('text', { x: MARGIN.left - 6, y: y(tick) + 4, 'text-anchor': 'end' }, tick)
    );
  }
  rows.forEach((row, i) => {
    axes.appendChild(
      s(
        'text',
        {
          x: xAt(i),
          y: plotBottom + 14,
          'text-anchor': 'end',
          transform: `rotate(-30 ${xAt(i)} ${plotBottom + 14})`
        },
        sizeLabel(row)
      )
    );
  });
  axes.appendChild(
    s(
      'text',
      {
        class: 'tw-axis-label',
        x: 12,
        y: (MARGIN.top + plotBottom) / 2,
        transform: `rotate(-90 12 ${(MARGIN.top + plotBottom) / 2})`,
        'text-anchor': 'middle'
      },
      'TFLOP/s'
    )
  );
  svg.appendChild(axes);

  for (const se of series) {
    const group = s('g', {
      class: `tw-series tw-series-${se.key}`,
      'data-testid': `tw-series-${se.key}`,
      'data-label': se.label
    });
    const points = rows
      .map((row, i) => ({ row, i, v: se.value(row) }))
      .filter((p): p is { row: IBenchRow; i: number; v: number } => typeof p.v === 'number');
    group.appendChild(s('polyline', { points: points.map(p => `${xAt(p.i)},${y(p.v)}`).join(' ') }));
    for (const p of points) {
      const text =
        `${se.label} ${sizeLabel(p.row)}: ${p.v.toFixed(1)} TFLOP/s` +
        (p.row.ratio !== null && p.row.ratio !== undefined ? ` (ratio ${p.row.ratio.toFixed(2)})` : '');
      const dot = s(
        'circle',
        {
          class: p.row.correct === false ? 'tw-point tw-incorrect' : 'tw-point',
          cx: xAt(p.i),
          cy: y(p.v),
          r: 4
        },
        svgTitle(text)
      );
      hover.bind(dot, text);
      group.appendChild(dot);
    }
    svg.appendChild(group);
  }
  return h(
    'div',
    { class: 'tw-bench-plot', 'data-testid': 'tw-bench-plot', 'data-group': title },
    h('div', { class: 'tw-section-title' }, title),
    h(
      'div',
      { class: 'tw-legend' },
      ...series.map(se =>
        h(
          'span',
          { class: `tw-legend-item tw-series-${se.key}` },
          h('span', { class: 'tw-swatch' }),
          se.label
        )
      )
    ),
    h('div', { class: 'tw-chart-scroll' }, svg)
  );
}

function ratioCell(ratio: number | null): HTMLElement {
  if (ratio === null || ratio === undefined) {
    return h('span', {}, '—');
  }
  const cls = ratio >= 1 ? 'tw-good' : ratio >= 0.8 ? 'tw-fair' : 'tw-poor';
  return h('span', { class: `tw-ratio ${cls}` }, `${ratio.toFixed(2)}×`);
}

function fixed(value: number | null | undefined, digits: number): string {
  return typeof value === 'number' ? value.toFixed(digits) : '—';
}

export function renderBench(bench: IBench): HTMLElement {
  const hover = new HoverDetail('Hover a point for its value and ratio to cuBLAS.');
  const machine = Object.entries(bench.machine ?? {})
    .filter(([, v]) => v !== null && v !== undefined && v !== '')
    .map(([k, v]) => `${k} ${formatValue(v)}`)
    .join(' · ');
  const root = h(
    'div',
    { class: 'tw-bench', 'data-testid': 'tw-bench' },
    h('div', { class: 'tw-summary-line' }, machine || 'machine unknown'),
    bench.complete === false ? h('div', { class: 'tw-summary-line tw-warning-text' }, 'Run still in progress.') : ''
  );
  if (!bench.rows.length) {
    root.appendChild(h('div', { class: 'tw-empty' }, 'No benchmark rows.'));
    return root;
  }
  groupRows(bench.rows).forEach((rows, title) => root.appendChild(plot(title, rows, hover)));
  root.append(
    hover.node,
    table(
      { 'data-testid': 'tw-bench-table' },
      ['suite', 'kernel', 'dtype', 'size', 'ms', 'TFLOP/s', 'cuBLAS TFLOP/s', 'ratio', 'correct', 'rel err', 'error'],
      bench.rows.map(r => [
        r.suite,
        r.kernel,
        r.dtype,
        sizeLabel(r),
        fixed(r.ms, 3),
        fixed(r.tflops, 1),
        fixed(r.cublas_tflops, 1),
        ratioCell(r.ratio),
        r.correct === null || r.correct === undefined ? '—' : r.correct ? '✔' : '✖',
        typeof r.rel_err === 'number' ? r.rel_err.toExponential(1) : '—',
        r.error ?? ''
      ]),
      i => ({ class: bench.rows[i].correct === false || bench.rows[i].error ? 'tw-incorrect' : null })
    )
  );
  return root;
}
