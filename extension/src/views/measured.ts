/**
 * The measured timeline (`timeline.measured`, kernels compiled with `tw.timeline`): one recorded
 * block as it ran on the GPU, drawn on the planned barrier timeline's rows. One lane per barrier
 * slot, in the planned view's order and with its labels (`lanesOf` in barriers.ts), then one lane
 * per recording warpgroup for what belongs to no barrier (wgmma, TMA stores). x is time in
 * microseconds. Waits are bars from their begin to their end, coloured by role (one sub-row per
 * stream, so two consumer warpgroups waiting together stay apart); issues and arrivals are marks.
 * Below: what the measurement shows against the plan (`summary`), as the producer computed it.
 */
import type {
  IBarrierSim,
  IMeasuredTimeline,
  ITimeline,
  ITimelineEvent,
  ITimelineSummary,
  ITimelineWait
} from '../types';
import { h, s, svgTitle, table } from '../dom';
import { linear, niceTicks } from './axis';
import { laneCharts, laneKey, lanesOf } from './barriers';
import { HoverDetail } from './hover';
import { renderSmActivity } from './smactivity';

/** Waits, and marks, drawn at most; the rest are counted in a note under the chart. */
export const MAX_DRAWN = 3000;
/** Marks in reading order (legend); wait_begin / wait_end are drawn as the wait bars. */
export const MARK_KINDS = [
  'tma_issue',
  'expect_tx',
  'arrive',
  'wgmma_issue',
  'wgmma_wait',
  'store_issue',
  'store_wait'
];
const WAIT_KINDS = new Set(['wait_begin', 'wait_end']);
const ROLES = ['producer', 'consumer'];
/**
 * A slot lane holds a row of marks (on the lane line) over a band of wait bars, apart so that
 * neither hides the other; a stream lane holds marks only.
 */
const SLOT_LANE = 36;
const STREAM_LANE = 22;
const MARK_ROW = 10; // px from a slot lane's top to its marks
const BAND_TOP = 17; // px from a slot lane's top to its wait bars
const BAND = 15; // px the wait bars of all streams share, one sub-row each
const RADIUS = 4;
const MARGIN = { left: 12, right: 24, top: 34, bottom: 12 };
/** Stream labels (`consumer (thread 128)`) are longer than the planned view's slot labels. */
const LABEL_WIDTH = 160;
const PX_PER_US = 60;
const MIN_PLOT = 640;
const MAX_PLOT = 8000;

export interface IMeasuredLane {
  key: string;
  label: string;
  kind: 'slot' | 'stream';
}

const streamKey = (stream: number): string => `stream:${stream}`;

/**
 * The lanes: the planned view's barrier slots (same order, same labels), any slot only the
 * measurement has, then one per recording stream (`role (thread N)`).
 */
export function measuredLanes(sim: IBarrierSim | null, measured: IMeasuredTimeline): IMeasuredLane[] {
  const lanes: IMeasuredLane[] = [];
  const seen = new Set<string>();
  const add = (key: string, label: string, kind: IMeasuredLane['kind']): void => {
    if (!seen.has(key)) {
      seen.add(key);
      lanes.push({ key, label, kind });
    }
  };
  for (const lane of sim ? lanesOf(sim) : []) {
    const key = laneKey(lane.barrier, lane.slot);
    add(key, key, 'slot');
  }
  for (const item of [...measured.waits, ...measured.events]) {
    if (item.barrier !== null) {
      const key = laneKey(item.barrier, item.slot);
      add(key, key, 'slot');
    }
  }
  for (const st of measured.streams) {
    add(streamKey(st.stream), `${st.role} (thread ${st.thread})`, 'stream');
  }
  for (const ev of measured.events) {
    add(streamKey(ev.stream), `${ev.role} (stream ${ev.stream})`, 'stream');
  }
  return lanes;
}

const roleClass = (role: string): string => `tw-role-${ROLES.includes(role) ? role : 'other'}`;
const us = (ns: number, digits = 3): string => `${(ns / 1000).toFixed(digits)} µs`;

function formatNumber(value: number | null | undefined, digits = 2): string {
  if (value === null || value === undefined) {
    return '—';
  }
  return Number.isInteger(value) ? String(value) : value.toFixed(digits);
}

/** 1st, 2nd, 3rd, 4th, ..., 11th, 12th, 13th, 21st. */
function ordinal(n: number): string {
  const teen = n % 100 >= 11 && n % 100 <= 13;
  const suffix = teen ? 'th' : (({ 1: 'st', 2: 'nd', 3: 'rd' } as Record<number, string>)[n % 10] ?? 'th');
  return `${n}${suffix}`;
}

export function formatPercent(value: number | null | undefined): string {
  return value === null || value === undefined ? '—' : `${(value * 100).toFixed(1)}%`;
}

function describeWait(w: ITimelineWait): string {
  return (
    `${w.role} (stream ${w.stream}) waited on ${laneKey(w.barrier, w.slot)}` +
    (w.parity === null ? '' : ` for parity ${w.parity}`) +
    `: ${(w.end_ns - w.begin_ns).toFixed(0)} ns\nfrom ${us(w.begin_ns)} to ${us(w.end_ns)}`
  );
}

function describeEvent(ev: ITimelineEvent): string {
  const where = ev.barrier === null ? '' : ` on ${laneKey(ev.barrier, ev.slot)}`;
  const facts = [
    `stream ${ev.stream}`,
    ev.barrier !== null && ev.parity !== null ? `parity ${ev.parity}` : null,
    ev.line !== null ? `line ${ev.line}` : null
  ].filter(Boolean);
  return `${ev.role} ${ev.kind}${where} at ${us(ev.t_ns)}\n${facts.join(', ')}`;
}

function markShape(kind: string, cx: number, cy: number): SVGElement {
  const r = RADIUS;
  if (kind === 'tma_issue') {
    return s('polygon', {
      points: `${cx},${cy - r - 1} ${cx + r + 1},${cy} ${cx},${cy + r + 1} ${cx - r - 1},${cy}`
    });
  }
  if (kind === 'expect_tx') {
    return s('polygon', { points: `${cx},${cy - r} ${cx + r},${cy + r} ${cx - r},${cy + r}` });
  }
  if (kind === 'wgmma_wait' || kind === 'store_wait') {
    return s('rect', { x: cx - 1, y: cy - r - 2, width: 2, height: 2 * r + 4 });
  }
  return s('circle', { cx, cy, r });
}

interface IChart {
  node: HTMLElement;
  waitsDrawn: number;
  marksDrawn: number;
  marksTotal: number;
}

function chart(sim: IBarrierSim | null, measured: IMeasuredTimeline, hover: HoverDetail): IChart {
  const lanes = measuredLanes(sim, measured);
  // Per lane: where its marks sit (the lane line) and where its wait band starts.
  const markY = new Map<string, number>();
  const bandY = new Map<string, number>();
  let bottom = MARGIN.top;
  for (const lane of lanes) {
    markY.set(lane.key, bottom + (lane.kind === 'slot' ? MARK_ROW : STREAM_LANE / 2));
    bandY.set(lane.key, bottom + BAND_TOP);
    bottom += lane.kind === 'slot' ? SLOT_LANE : STREAM_LANE;
  }
  const marks = measured.events.filter(ev => !WAIT_KINDS.has(ev.kind));
  const waits = measured.waits.slice(0, MAX_DRAWN);
  const drawnMarks = marks.slice(0, MAX_DRAWN);

  // Time domain: from the block's open (else its first event) to its last event.
  // (A loop, not Math.min(...spread): a hand-made document may hold more events than arguments fit.)
  let lo = measured.blocks.find(b => b[0] === measured.block)?.[2] ?? Infinity;
  let hi = -Infinity;
  for (const t of [
    ...measured.events.map(ev => ev.t_ns),
    ...measured.waits.flatMap(w => [w.begin_ns, w.end_ns])
  ]) {
    lo = Math.min(lo, t);
    hi = Math.max(hi, t);
  }
  hi = Math.max(hi, lo + 1);
  const plot = Math.min(MAX_PLOT, Math.max(MIN_PLOT, ((hi - lo) / 1000) * PX_PER_US));
  const width = MARGIN.left + plot + MARGIN.right;
  const height = bottom + MARGIN.bottom;
  const x = linear(lo, hi, MARGIN.left, MARGIN.left + plot);

  // Each stream's wait bars get their own sub-row of a lane's band.
  const streams = [...new Set([...measured.streams.map(st => st.stream), ...waits.map(w => w.stream)])];
  const subRow = BAND / Math.max(1, streams.length);

  const { labels, svg } = laneCharts(LABEL_WIDTH, width, height, 'tw-measured-chart',
    'Measured waits and events per barrier slot and warpgroup over time');
  const grid = s('g', { class: 'tw-measured-axis', 'data-testid': 'tw-measured-axis' });
  for (const tick of niceTicks(lo / 1000, hi / 1000, Math.max(4, Math.round(plot / 90)))) {
    const tx = x(tick * 1000);
    grid.append(
      s('line', { class: 'tw-grid', x1: tx, x2: tx, y1: MARGIN.top - 6, y2: height - MARGIN.bottom }),
      s('text', { class: 'tw-axis-label', x: tx, y: MARGIN.top - 10, 'text-anchor': 'middle' }, `${tick}`)
    );
  }
  svg.appendChild(grid);
  labels.appendChild(
    s('text', { class: 'tw-axis-label', x: LABEL_WIDTH - 8, y: MARGIN.top - 10, 'text-anchor': 'end' }, 'µs')
  );
  for (const lane of lanes) {
    const y = markY.get(lane.key)!;
    svg.appendChild(
      s('line', {
        class: `tw-lane tw-lane-${lane.kind}`,
        x1: MARGIN.left,
        x2: MARGIN.left + plot,
        y1: y,
        y2: y
      })
    );
    labels.appendChild(
      s(
        'text',
        {
          class: `tw-lane-label tw-lane-${lane.kind}`,
          'data-testid': 'tw-measured-lane',
          'data-kind': lane.kind,
          x: LABEL_WIDTH - 8,
          y: y + 4,
          'text-anchor': 'end'
        },
        lane.label
      )
    );
  }

  const bars = s('g', { class: 'tw-measured-waits' });
  for (const w of waits) {
    const y = bandY.get(laneKey(w.barrier, w.slot))!;
    const row = Math.max(0, streams.indexOf(w.stream));
    const x0 = x(w.begin_ns);
    const text = describeWait(w);
    const bar = s(
      'g',
      {
        class: `tw-measured-wait ${roleClass(w.role)}`,
        'data-testid': 'tw-measured-wait',
        'data-role': w.role,
        'data-stream': w.stream,
        'data-lane': laneKey(w.barrier, w.slot)
      },
      svgTitle(text),
      s('rect', {
        x: x0,
        y: y + row * subRow,
        width: Math.max(1, x(w.end_ns) - x0),
        height: Math.max(2, subRow - 1)
      })
    );
    hover.bind(bar, text);
    bars.appendChild(bar);
  }
  svg.appendChild(bars);

  const points = s('g', { class: 'tw-measured-marks' });
  for (const ev of drawnMarks) {
    const key = ev.barrier === null ? streamKey(ev.stream) : laneKey(ev.barrier, ev.slot);
    const text = describeEvent(ev);
    const mark = s(
      'g',
      {
        class: `tw-measured-mark tw-mkind-${MARK_KINDS.includes(ev.kind) ? ev.kind : 'other'}`,
        'data-testid': 'tw-measured-mark',
        'data-kind': ev.kind,
        'data-stream': ev.stream,
        'data-lane': key
      },
      svgTitle(text),
      markShape(ev.kind, x(ev.t_ns), markY.get(key)!)
    );
    hover.bind(mark, text);
    points.appendChild(mark);
  }
  svg.appendChild(points);

  return {
    node: h('div', { class: 'tw-barrier-frame' }, labels, h('div', { class: 'tw-chart-scroll' }, svg)),
    waitsDrawn: waits.length,
    marksDrawn: drawnMarks.length,
    marksTotal: marks.length
  };
}

function legend(): HTMLElement {
  return h(
    'div',
    { class: 'tw-legend' },
    ...ROLES.map(role =>
      h(
        'span',
        { class: `tw-legend-item ${roleClass(role)}` },
        h('span', { class: 'tw-swatch tw-swatch-bar' }),
        `${role} waiting`
      )
    ),
    ...MARK_KINDS.map(kind =>
      h('span', { class: `tw-legend-item tw-mkind-${kind}` }, h('span', { class: 'tw-swatch' }), kind)
    ),
    h(
      'span',
      { class: 'tw-legend-note' },
      'one bar sub-row per warpgroup; x: µs from this block’s start'
    )
  );
}

/** What the measurement shows against the plan, one row per fact (`data-fact` names it). */
/** Which units record: "every block", "every 4th block", "every 4th tile of each block". */
export function sampling(every: number | undefined, unit: string | undefined): string {
  if (!every) {
    return '';
  }
  if (unit === 'tile') {
    return ` (every ${every === 1 ? 'tile' : `${ordinal(every)} tile`} of each block)`;
  }
  return ` (every ${every === 1 ? 'block' : ordinal(every)})`;
}

function facts(summary: ITimelineSummary, every: number | undefined, unit?: string): HTMLElement {
  const p = summary.pipeline;
  const violations = p?.violations ?? [];
  const busy = summary.sm_busy;
  const meanBusy =
    busy && busy.per_sm.length
      ? busy.per_sm.reduce((sum, e) => sum + e.busy_fraction, 0) / busy.per_sm.length
      : null;
  const rows: [string, string, string, string?][] = [
    [
      'lead',
      'producer’s lead in stages (loads issued when a wait began; the plan’s lockstep order: 1)',
      `median ${formatNumber(p?.lead_stages_median)}, min ${formatNumber(p?.lead_stages_min)}`
    ],
    ['ahead', 'waits ahead of the plan’s lockstep order', formatPercent(p?.ahead_of_lockstep)],
    ['bubbles', 'consumers’ time waiting for loads', formatPercent(summary.consumer_wait_on_loads_fraction)],
    [
      'load-to-wait',
      'load issued to wait ended (median)',
      p?.load_to_wait_end_ns_median === null || p?.load_to_wait_end_ns_median === undefined
        ? '—'
        : `${p.load_to_wait_end_ns_median.toFixed(0)} ns`
    ],
    [
      'violations',
      'protocol violations (a wait ended before its load or arrival)',
      `${violations.length} of ${formatNumber(p?.waits_checked)} waits checked`,
      violations.length ? 'tw-error' : undefined
    ],
    [
      'sms',
      'SMs busy (recorded blocks)',
      `${formatNumber(busy?.sms)} SMs, ${formatPercent(meanBusy)} busy on average over ` +
        (summary.span_ns === null ? '—' : us(summary.span_ns, 1))
    ],
    [
      'events',
      'events recorded',
      `${formatNumber(summary.events)} from ${formatNumber(summary.recorded_blocks)} block(s)` +
        sampling(every, unit)
    ],
    [
      'dropped',
      'dropped events (past the buffer’s capacity)',
      formatNumber(summary.dropped_events),
      summary.dropped_events ? 'tw-warning-text' : undefined
    ],
    [
      'unclosed',
      'streams not closed (kernel cut short)',
      formatNumber(summary.unclosed_streams),
      summary.unclosed_streams ? 'tw-warning-text' : undefined
    ],
    [
      'diverged',
      'streams left out (their warp’s lanes did not record together)',
      formatNumber(summary.diverged_streams ?? 0),
      summary.diverged_streams ? 'tw-warning-text' : undefined
    ]
  ];
  const factTable = table(
    { 'data-testid': 'tw-measured-facts' },
    ['measured', 'value'],
    rows.map(([, label, value, cls]) => [label, h('span', { class: cls }, value)]),
    i => ({ 'data-fact': rows[i][0] })
  );
  const slotTable = table(
    { 'data-testid': 'tw-measured-slot-table' },
    ['role', 'barrier slot', 'waits', 'total µs', 'µs per block'],
    summary.wait_by_slot.map(e => [
      e.role,
      laneKey(e.barrier, e.slot),
      e.waits,
      (e.total_ns / 1000).toFixed(2),
      (e.per_block_ns / 1000).toFixed(2)
    ]),
    i => ({ class: roleClass(summary.wait_by_slot[i].role), 'data-testid': 'tw-measured-slot-row' })
  );
  const shown = violations.slice(0, 5);
  return h(
    'div',
    { class: 'tw-measured-summary', 'data-testid': 'tw-measured-summary' },
    h('div', { class: 'tw-measured-tables' }, factTable, slotTable),
    shown.length
      ? h(
          'ul',
          { class: 'tw-finding-list tw-error' },
          ...shown.map(v =>
            h(
              'li',
              { class: 'tw-finding-item', 'data-testid': 'tw-measured-violation' },
              `block ${formatNumber(v.block)}, stream ${formatNumber(v.stream)}, ${v.barrier ?? '?'} ` +
                `iteration ${formatNumber(v.iteration)}: ${v.what ?? 'violation'}` +
                (v.cause_ns !== undefined && v.wait_end_ns !== undefined
                  ? ` (cause at ${us(v.cause_ns)}, wait ended ${us(v.wait_end_ns)})`
                  : '')
            )
          ),
          violations.length > shown.length
            ? h('li', { class: 'tw-finding-item' }, `… and ${violations.length - shown.length} more`)
            : null
        )
      : null
  );
}

/** The "Measured timeline" panel; `timeline` null means the kernel records none (no panel). */
export function renderMeasured(timeline: ITimeline | null, sim: IBarrierSim | null): HTMLElement {
  const root = h('div', { class: 'tw-measured', 'data-testid': 'tw-measured-timeline' });
  const measured = timeline?.measured ?? null;
  if (!measured) {
    root.appendChild(
      h(
        'div',
        { class: 'tw-measured-note', 'data-testid': 'tw-measured-note' },
        timeline?.plan
          ? 'This kernel records a timeline (tw.timeline); after a call, kernel.timeline() fills it in here.'
          : 'No measured timeline in this trace.'
      )
    );
    return root;
  }
  const every = timeline?.plan?.every;
  const summary = measured.summary;
  root.appendChild(
    h(
      'div',
      { class: 'tw-summary-line', 'data-testid': 'tw-measured-headline' },
      `Block ${formatNumber(measured.block)}` +
        (measured.block_indices ? ` (bx, by, bz = ${measured.block_indices.join(', ')})` : '') +
        ` on SM ${formatNumber(measured.sm)}, as it ran: ` +
        `${measured.events.length} events, ${measured.waits.length} waits` +
        (summary?.recorded_blocks ? ` (one of ${summary.recorded_blocks} recorded blocks)` : '') +
        '. Rows: the planned barrier timeline’s slots, then each recording warpgroup.'
    )
  );
  if (measured.events.length === 0 && measured.waits.length === 0) {
    root.appendChild(h('div', { class: 'tw-empty' }, 'No measured events in this block.'));
  } else {
    const hover = new HoverDetail('Hover a wait or a mark for its stream, slot, parity and time.');
    const drawn = chart(sim, measured, hover);
    root.append(legend(), drawn.node, hover.node);
    const capped = drawn.waitsDrawn < measured.waits.length || drawn.marksDrawn < drawn.marksTotal;
    if (capped || measured.truncated) {
      root.appendChild(
        h(
          'div',
          { class: 'tw-measured-note tw-warning-text', 'data-testid': 'tw-measured-cap' },
          (capped
            ? `Drawn: the first ${drawn.waitsDrawn} of ${measured.waits.length} waits and ` +
              `${drawn.marksDrawn} of ${drawn.marksTotal} marks (at most ${MAX_DRAWN} each). `
            : '') +
            (measured.truncated ? 'The trace keeps only the first events of this block (truncated).' : '')
        )
      );
    }
  }
  if (summary) {
    root.appendChild(facts(summary, every, timeline?.plan?.unit));
  }
  root.appendChild(renderSmActivity(measured.blocks));
  return root;
}
