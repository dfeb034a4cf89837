/**
 * Shared-memory plan: each buffer is a rectangle spanning its byte range
 * (vertical, offset 0 at the top) and its live range in statement indices
 * (horizontal). Overlapping rectangles would be a planning bug, so the
 * picture makes reuse and waste visible at a glance.
 */
import type { ISmemBuffer, ISmemPlan } from '../types';
import { formatBytes, formatValue, h, s, svgTitle, table } from '../dom';
import { linear, niceTicks, pow2Step, ticksOf } from './axis';
import { HoverDetail } from './hover';

const WIDTH = 720;
const PLOT_HEIGHT = 260;
const MARGIN = { left: 78, right: 16, top: 12, bottom: 36 };
/** Narrow live ranges still get a visible bar. */
const MIN_BAR_PX = 5;
/** Height of a byte range a buffer covers, at least: room for a label. */
const MIN_SEGMENT_PX = 14;
/** Closest two offset labels may be on the byte axis. */
const MIN_LABEL_GAP_PX = 13;

function describe(buf: ISmemBuffer): string {
  const end = buf.offset + buf.size_bytes;
  return [
    `${buf.name} (${buf.kind}) ${buf.dtype}[${buf.shape.join(', ')}] × ${buf.versions} version(s)`,
    `bytes ${buf.offset}–${end} (${formatBytes(buf.size_bytes)}, align ${buf.align})`,
    `swizzle ${buf.swizzle}, live statements ${buf.live[0]}–${buf.live[1]}`
  ].join('\n');
}

interface IByteScale {
  /** Byte offset to y pixel (offset 0 at the top). */
  y: (byte: number) => number;
  /** Buffer edges, ascending: where the axis is labelled when not to scale. */
  stops: number[];
  /** Plot height in px. */
  height: number;
  /** Whether some byte range was drawn taller than its share. */
  enlarged: boolean;
}

/**
 * Piecewise-linear byte axis. To scale, a 16-byte mbarrier would vanish next
 * to a 16 KiB tile, so every range between buffer edges that a buffer covers
 * gets at least MIN_SEGMENT_PX; the axis then labels the edges themselves and
 * says it is not to scale. Plans without tiny buffers stay exactly linear.
 */
function byteScale(buffers: ISmemBuffer[], maxByte: number): IByteScale {
  const stops = [...new Set([0, maxByte, ...buffers.flatMap(b => [b.offset, b.offset + b.size_bytes])])].sort(
    (a, b) => a - b
  );
  const covered = (lo: number, hi: number): boolean =>
    buffers.some(b => b.offset <= lo && b.offset + b.size_bytes >= hi);
  const pos = [MARGIN.top];
  let enlarged = false;
  for (let i = 1; i < stops.length; i++) {
    const share = ((stops[i] - stops[i - 1]) / maxByte) * PLOT_HEIGHT;
    const least = covered(stops[i - 1], stops[i]) ? MIN_SEGMENT_PX : 0;
    enlarged = enlarged || share < least;
    pos.push(pos[i - 1] + Math.max(share, least));
  }
  const y = (byte: number): number => {
    const i = Math.max(0, stops.findIndex((stop, k) => byte <= stops[Math.min(k + 1, stops.length - 1)]));
    const j = Math.min(i + 1, stops.length - 1);
    const span = stops[j] - stops[i];
    return span > 0 ? pos[i] + ((byte - stops[i]) / span) * (pos[j] - pos[i]) : pos[i];
  };
  return { y, stops, height: pos[pos.length - 1] - MARGIN.top, enlarged };
}

/** Whole KiB read best as KiB; other edges (barriers) need the exact byte. */
function axisBytes(bytes: number): string {
  return bytes % 1024 === 0 ? formatBytes(bytes) : `${bytes} B`;
}

/** Offsets to label: round powers of two when to scale, else the buffer edges. */
function byteTicks(scale: IByteScale, maxByte: number): number[] {
  if (!scale.enlarged) {
    return ticksOf(0, maxByte, pow2Step(maxByte, 4));
  }
  const ticks: number[] = [];
  for (const stop of scale.stops) {
    const last = ticks[ticks.length - 1];
    if (last === undefined || scale.y(stop) - scale.y(last) >= MIN_LABEL_GAP_PX) {
      ticks.push(stop);
    }
  }
  return ticks;
}

function chart(plan: ISmemPlan, hover: HoverDetail): SVGElement {
  const buffers = plan.buffers;
  const maxStmt = Math.max(1, ...buffers.map(b => b.live[1] + 1));
  const maxByte = Math.max(1, plan.total_bytes, ...buffers.map(b => b.offset + b.size_bytes));
  const scale = byteScale(buffers, maxByte);
  const y = scale.y;
  const plotBottom = MARGIN.top + scale.height;
  const height = plotBottom + MARGIN.bottom;
  const x = linear(0, maxStmt, MARGIN.left, WIDTH - MARGIN.right);

  const svg = s('svg', {
    class: 'tw-chart tw-smem-chart',
    viewBox: `0 0 ${WIDTH} ${height}`,
    width: WIDTH,
    height,
    role: 'img',
    'aria-label': 'Shared-memory buffers over byte offset and live range'
  });
  const axes = s('g', { class: 'tw-axis' });
  for (const tick of byteTicks(scale, maxByte)) {
    axes.append(
      s('line', { class: 'tw-grid', x1: MARGIN.left, x2: WIDTH - MARGIN.right, y1: y(tick), y2: y(tick) }),
      s('text', { x: MARGIN.left - 6, y: y(tick) + 4, 'text-anchor': 'end' }, axisBytes(tick))
    );
  }
  for (const tick of niceTicks(0, maxStmt, 8).filter(Number.isInteger)) {
    axes.append(
      s('line', { class: 'tw-tick', x1: x(tick), x2: x(tick), y1: plotBottom, y2: plotBottom + 4 }),
      s('text', { x: x(tick), y: plotBottom + 16, 'text-anchor': 'middle' }, tick)
    );
  }
  const midY = (MARGIN.top + plotBottom) / 2;
  axes.append(
    s(
      'text',
      { class: 'tw-axis-label', x: (MARGIN.left + WIDTH) / 2, y: height - 4, 'text-anchor': 'middle' },
      'live range (statement index)'
    ),
    s(
      'text',
      { class: 'tw-axis-label', x: 12, y: midY, transform: `rotate(-90 12 ${midY})`, 'text-anchor': 'middle' },
      scale.enlarged ? 'offset (small buffers enlarged)' : 'offset'
    )
  );
  svg.appendChild(axes);

  buffers.forEach((buf, idx) => {
    const x0 = x(buf.live[0]);
    const w = Math.max(MIN_BAR_PX, x(buf.live[1] + 1) - x0);
    const y0 = y(buf.offset);
    const hgt = Math.max(2, y(buf.offset + buf.size_bytes) - y0);
    const text = describe(buf);
    const group = s(
      'g',
      {
        class: `tw-smem-buffer tw-smem-${buf.kind === 'barrier' ? 'barrier' : `c${idx % 6}`}`,
        'data-testid': 'tw-smem-buffer',
        'data-name': buf.name
      },
      svgTitle(text),
      s('rect', { x: x0, y: y0, width: w, height: hgt, rx: 2 })
    );
    // Multi-buffered (pipelined) buffers: a line between versions, where they are tall enough.
    for (let v = 1; v < buf.versions && hgt / buf.versions >= 6; v++) {
      const yv = y(buf.offset + (buf.size_bytes * v) / buf.versions);
      group.appendChild(s('line', { class: 'tw-version-split', x1: x0, x2: x0 + w, y1: yv, y2: yv }));
    }
    if (hgt >= 13 && w >= 60) {
      group.appendChild(s('text', { class: 'tw-bar-label', x: x0 + 4, y: y0 + 11 }, buf.name));
    }
    hover.bind(group, text);
    svg.appendChild(group);
  });
  return svg;
}

export function renderSmem(plan: ISmemPlan | null): HTMLElement {
  const root = h('div', { class: 'tw-smem', 'data-testid': 'tw-smem-timeline' });
  if (!plan) {
    root.appendChild(
      h('div', { class: 'tw-empty' }, 'No shared-memory plan in this trace (planning did not run).')
    );
    return root;
  }
  const share = plan.limit_bytes ? (100 * plan.total_bytes) / plan.limit_bytes : 0;
  const over = plan.limit_bytes > 0 && plan.total_bytes > plan.limit_bytes;
  const hover = new HoverDetail('Hover a buffer for its bytes, alignment, swizzle and live range.');
  root.append(
    h(
      'div',
      { class: over ? 'tw-summary-line tw-error' : 'tw-summary-line' },
      `${formatBytes(plan.total_bytes)} of ${formatBytes(plan.limit_bytes)} (${share.toFixed(1)}%) in ${plan.buffers.length} buffers`
    ),
    h('div', { class: 'tw-chart-scroll' }, chart(plan, hover)),
    hover.node,
    table(
      { 'data-testid': 'tw-smem-table' },
      ['name', 'kind', 'dtype', 'shape', 'versions', 'offset', 'bytes', 'align', 'swizzle', 'live'],
      plan.buffers.map(b => [
        b.name,
        b.kind,
        b.dtype,
        formatValue(b.shape),
        b.versions,
        b.offset,
        b.size_bytes,
        b.align,
        b.swizzle,
        `${b.live[0]}–${b.live[1]}`
      ])
    )
  );
  return root;
}
