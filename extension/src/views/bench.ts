/**
 * Benchmark record: one chart per (suite, dtype), a series per kernel (ours, each spec
 * kernel) and cuBLAS, in TFLOP/s or as a ratio to cuBLAS, and every row with its ratio in a
 * table. Values are
 * shown as recorded; only the size ordering (M*N*K) is computed here.
 */
import type { IBench, IBenchRow } from '../types';
import { formatValue, h, s, segmented, svgTitle, table } from '../dom';
import { linear, niceStep, ticksOf } from './axis';
import { HoverDetail } from './hover';

const WIDTH = 640;
const HEIGHT = 300;
const MARGIN = { left: 56, right: 24, top: 16, bottom: 84 };

type Metric = 'tflops' | 'ratio';

interface ISeries {
  key: string;
  testid: string;
  cls: string;
  label: string;
  /** [index on the size axis, value, the row] of each point */
  points: [number, number, IBenchRow][];
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

const slug = (text: string): string => text.toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-|-$/g, '');

/**
 * One series per kernel of the group (the best of ours, each spec kernel ...) and, for
 * TFLOP/s, one for cuBLAS (a point per size): a kernel's line joins only its own points, so
 * kernels measured at the same size never zigzag into one line.
 */
export function seriesOf(rows: IBenchRow[], sizes: string[], metric: Metric): ISeries[] {
  const at = (row: IBenchRow): number => sizes.indexOf(sizeLabel(row));
  const kernels = [...new Set(rows.map(r => r.kernel ?? 'ours'))];
  const out: ISeries[] = kernels.map((kernel, i) => {
    const ours = i === 0;
    const points = rows
      .filter(r => (r.kernel ?? 'ours') === kernel)
      .map(r => [at(r), metric === 'tflops' ? r.tflops : r.ratio, r] as [number, number | null, IBenchRow])
      .filter((p): p is [number, number, IBenchRow] => typeof p[1] === 'number');
    return {
      key: ours ? 'ours' : `kernel-${slug(kernel)}`,
      testid: ours ? 'tw-series-ours' : `tw-series-kernel-${slug(kernel)}`,
      cls: ours ? 'tw-series-ours' : `tw-series-other tw-series-other-${(i - 1) % 4}`,
      label: kernel,
      points
    };
  });
  if (metric === 'tflops') {
    const seen = new Set<number>();
    const points: [number, number, IBenchRow][] = [];
    for (const r of rows) {
      if (typeof r.cublas_tflops === 'number' && !seen.has(at(r))) {
        seen.add(at(r));
        points.push([at(r), r.cublas_tflops, r]);
      }
    }
    out.push({ key: 'cublas', testid: 'tw-series-cublas', cls: 'tw-series-cublas', label: 'cuBLAS', points });
  }
  return out;
}

function plot(title: string, rows: IBenchRow[], hover: HoverDetail, metric: Metric): SVGElement {
  const sizes = [...new Set(rows.map(sizeLabel))];
  const series = seriesOf(rows, sizes, metric);
  const unit = metric === 'tflops' ? 'TFLOP/s' : '× cuBLAS';
  const values = series.flatMap(se => se.points.map(p => p[1]));
  // The axis ends at the first round value above the largest point (and above 1x for ratios), so
  // nothing is clipped and no label runs into the top.
  const top = Math.max(metric === 'ratio' ? 1.05 : 1, ...values);
  const step = niceStep(0, top, 5);
  const yMax = Math.ceil((top * 1.06) / step) * step;
  const ticks = ticksOf(0, yMax, step);
  const plotBottom = HEIGHT - MARGIN.bottom;
  const y = linear(0, yMax, plotBottom, MARGIN.top);
  const x = linear(0, Math.max(1, sizes.length - 1), MARGIN.left + 50, WIDTH - MARGIN.right - 30);
  const xAt = (i: number): number => (sizes.length === 1 ? (MARGIN.left + WIDTH - MARGIN.right) / 2 : x(i));

  const svg = s('svg', {
    class: 'tw-chart tw-bench-chart',
    viewBox: `0 0 ${WIDTH} ${HEIGHT}`,
    width: WIDTH,
    height: HEIGHT,
    role: 'img',
    'data-metric': metric,
    'aria-label': `${title}: ${unit} by problem size`
  });
  const axes = s('g', { class: 'tw-axis' });
  for (const tick of ticks) {
    axes.append(
      s('line', { class: 'tw-grid', x1: MARGIN.left, x2: WIDTH - MARGIN.right, y1: y(tick), y2: y(tick) }),
      s('text', { x: MARGIN.left - 6, y: y(tick) + 4, 'text-anchor': 'end' }, metric === 'ratio' ? tick.toFixed(2) : tick)
    );
  }
  if (metric === 'ratio') {
    axes.appendChild(
      s('line', { class: 'tw-parity', 'data-testid': 'tw-parity', x1: MARGIN.left, x2: WIDTH - MARGIN.right, y1: y(1), y2: y(1) })
    );
  }
  sizes.forEach((size, i) => {
    axes.appendChild(
      s(
        'text',
        {
          x: xAt(i),
          y: plotBottom + 14,
          'text-anchor': 'end',
          transform: `rotate(-30 ${xAt(i)} ${plotBottom + 14})`
        },
        size
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
      unit
    )
  );
  svg.appendChild(axes);

  for (const se of series) {
    const group = s('g', { class: `tw-series ${se.cls}`, 'data-testid': se.testid, 'data-label': se.label });
    group.appendChild(s('polyline', { points: se.points.map(([i, v]) => `${xAt(i)},${y(v)}`).join(' ') }));
    for (const [i, v, row] of se.points) {
      const text =
        `${se.label} ${sizeLabel(row)}: ${metric === 'tflops' ? `${v.toFixed(1)} TFLOP/s` : `${v.toFixed(3)}× cuBLAS`}` +
        (metric === 'tflops' && se.key !== 'cublas' && typeof row.ratio === 'number'
          ? ` (ratio ${row.ratio.toFixed(3)})`
          : '');
      const dot = s(
        'circle',
        { class: row.correct === false && se.key !== 'cublas' ? 'tw-point tw-incorrect' : 'tw-point', cx: xAt(i), cy: y(v), r: 4 },
        svgTitle(text)
      );
      hover.bind(dot, text);
      group.appendChild(dot);
    }
    svg.appendChild(group);
  }
  return svg;
}

function plotPanel(title: string, rows: IBenchRow[], hover: HoverDetail): HTMLElement {
  let metric: Metric = 'tflops';
  const chart = h('div', { class: 'tw-chart-scroll' });
  const legend = h('div', { class: 'tw-legend', 'data-testid': 'tw-bench-legend' });
  const draw = (): void => {
    chart.textContent = '';
    legend.textContent = '';
    chart.appendChild(plot(title, rows, hover, metric));
    for (const se of seriesOf(rows, [...new Set(rows.map(sizeLabel))], metric)) {
      legend.appendChild(h('span', { class: `tw-legend-item ${se.cls}` }, h('span', { class: 'tw-swatch' }), se.label));
    }
  };
  draw();
  return h(
    'div',
    { class: 'tw-bench-plot', 'data-testid': 'tw-bench-plot', 'data-group': title },
    h('div', { class: 'tw-section-title' }, title),
    h(
      'div',
      { class: 'tw-toolbar' },
      segmented(
        { class: 'tw-segmented' },
        [
          { key: 'tflops', label: 'TFLOP/s', testid: 'tw-bench-metric-tflops' },
          { key: 'ratio', label: 'Ratio to cuBLAS', testid: 'tw-bench-metric-ratio' }
        ],
        metric,
        key => {
          metric = key as Metric;
          draw();
        }
      ),
      legend
    ),
    chart
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
  groupRows(bench.rows).forEach((rows, title) => root.appendChild(plotPanel(title, rows, hover)));
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
