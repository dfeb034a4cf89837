/**
 * mbarrier protocol timeline: one lane per (barrier, slot), one mark per
 * simulated event at its sequence number, coloured by kind. Wait parity and
 * completed phase are printed above their marks because a parity mismatch is
 * the classic pipelining bug; events the simulator blamed (`finding`) are red.
 */
import type { IBarrierEvent, IBarrierSim, IFinding } from '../types';
import { h, s, svgTitle } from '../dom';
import { HoverDetail } from './hover';

const KINDS = ['init', 'expect_tx', 'tma_load', 'arrive', 'phase_complete', 'wait'];
const STEP = 18; // px per sequence number
const LANE = 40; // px per lane (room for parity above and iteration below)
const MARGIN = { left: 12, right: 20, top: 30, bottom: 28 };
/** Lane labels live in their own SVG beside the scrolling chart, so they stay in view. */
const LABEL_WIDTH = 110;
const RADIUS = 6;

export interface ILane {
  barrier: string;
  slot: number | null;
}

/** A lane's key and label: `barrier[slot]` (`[*]` for an event of no particular slot). */
export const laneKey = (barrier: string, slot: number | null): string => `${barrier}[${slot ?? '*'}]`;

/**
 * Lanes for every declared slot, plus any (barrier, slot) only seen in events. The measured
 * timeline (measured.ts) starts from the same lanes so its rows line up with these.
 */
export function lanesOf(sim: IBarrierSim): ILane[] {
  const lanes: ILane[] = [];
  const seen = new Set<string>();
  const add = (barrier: string, slot: number | null): void => {
    const key = laneKey(barrier, slot);
    if (!seen.has(key)) {
      seen.add(key);
      lanes.push({ barrier, slot });
    }
  };
  for (const bar of sim.barriers) {
    for (let slot = 0; slot < bar.slots; slot++) {
      add(bar.name, slot);
    }
  }
  for (const ev of sim.events) {
    add(ev.barrier, ev.slot);
  }
  return lanes;
}

/** Keys shown in the headline or handled separately rather than as facts. */
const HEADLINE_KEYS = new Set(['seq', 'kind', 'barrier', 'slot', 'finding']);
/** Facts in reading order; other scalar keys a producer adds follow them. */
const FACT_ORDER = ['iteration', 'stage', 'scope', 'bytes', 'count', 'parity', 'phase', 'line'];

/** A lane chart's two SVGs: the lane labels (``labelWidth`` wide, kept in view) and the chart. */
export function laneCharts(
  labelWidth: number,
  width: number,
  height: number,
  chartClass: string,
  ariaLabel: string
): { labels: SVGElement; svg: SVGElement } {
  const labels = s('svg', {
    class: 'tw-chart tw-lane-labels',
    viewBox: `0 0 ${labelWidth} ${height}`,
    width: labelWidth,
    height
  });
  const svg = s('svg', {
    class: `tw-chart ${chartClass}`,
    viewBox: `0 0 ${width} ${height}`,
    width,
    height,
    role: 'img',
    'aria-label': ariaLabel
  });
  return { labels, svg };
}

export function describeEvent(ev: IBarrierEvent, findings: IFinding[]): string {
  const parts = [`#${ev.seq} ${ev.kind} on ${laneKey(ev.barrier, ev.slot)}`];
  const record = ev as unknown as Record<string, unknown>;
  const extra = Object.keys(record).filter(k => !HEADLINE_KEYS.has(k) && !FACT_ORDER.includes(k));
  const shown = [...FACT_ORDER, ...extra]
    .filter(k => ['string', 'number', 'boolean'].includes(typeof record[k]))
    .map(k => `${k} ${record[k]}`);
  if (shown.length) {
    parts.push(shown.join(', '));
  }
  if (ev.finding !== undefined && ev.finding !== null) {
    const finding = findings[ev.finding];
    parts.push(`⚠ ${finding ? `${finding.severity}: ${finding.message}` : `finding #${ev.finding}`}`);
  }
  return parts.join('\n');
}

/**
 * Shaded background per contiguous run of events in one pipeline stage
 * (setup, prologue, steady, epilogue). Iterations overlap in a pipeline, so
 * they are labelled per mark instead of banded.
 */
function stageBands(events: IBarrierEvent[], x: (seq: number) => number, height: number): SVGElement {
  const runs: { stage: string; lo: number; hi: number }[] = [];
  for (const ev of [...events].sort((a, b) => a.seq - b.seq)) {
    const stage = ev.stage ?? '';
    const last = runs[runs.length - 1];
    if (last && last.stage === stage) {
      last.hi = ev.seq;
    } else {
      runs.push({ stage, lo: ev.seq, hi: ev.seq });
    }
  }
  const group = s('g', { class: 'tw-stages' });
  runs.forEach((run, i) => {
    const x0 = x(run.lo) - STEP / 2;
    const w = x(run.hi) - x(run.lo) + STEP;
    // ~6px per character at 10px font; shorten labels of narrow runs.
    const label = run.stage.length * 6 > w ? run.stage.slice(0, Math.max(1, Math.floor(w / 6))) : run.stage;
    group.append(
      s(
        'rect',
        {
          class: `tw-stage-band tw-band-${i % 2}`,
          x: x0,
          y: MARGIN.top - 6,
          width: w,
          height: height - MARGIN.top - MARGIN.bottom + 12
        },
        svgTitle(`stage ${run.stage}: events ${run.lo}–${run.hi}`)
      ),
      s('text', { class: 'tw-stage-label', x: x0 + 2, y: MARGIN.top - 10 }, label)
    );
  });
  return group;
}

function eventMark(ev: IBarrierEvent, cx: number, cy: number, text: string): SVGElement {
  const finding = ev.finding !== undefined && ev.finding !== null;
  const kindClass = KINDS.includes(ev.kind) ? ev.kind : 'other';
  const mark = s(
    'g',
    {
      class: `tw-barrier-event tw-kind-${kindClass}${finding ? ' tw-finding' : ''}`,
      'data-testid': 'tw-barrier-event',
      'data-seq': ev.seq,
      'data-kind': ev.kind,
      'data-barrier': ev.barrier,
      'data-slot': ev.slot ?? '',
      'data-iteration': ev.iteration ?? '',
      'data-parity': ev.parity ?? ''
    },
    svgTitle(text)
  );
  if (ev.kind === 'wait') {
    // A square for waits, so parity labels sit on a distinct shape.
    mark.appendChild(
      s('rect', { x: cx - RADIUS, y: cy - RADIUS, width: 2 * RADIUS, height: 2 * RADIUS, rx: 1.5 })
    );
  } else {
    mark.appendChild(s('circle', { cx, cy, r: RADIUS }));
  }
  const label = ev.kind === 'wait' ? ev.parity : ev.kind === 'phase_complete' ? ev.phase : undefined;
  if (label !== undefined && label !== null) {
    mark.appendChild(
      s(
        'text',
        { class: 'tw-parity-label', x: cx, y: cy - RADIUS - 3, 'text-anchor': 'middle' },
        ev.kind === 'wait' ? `p${label}` : `φ${label}`
      )
    );
  }
  if (ev.iteration !== null && ev.iteration !== undefined) {
    mark.appendChild(
      s(
        'text',
        { class: 'tw-iteration-label', x: cx, y: cy + RADIUS + 10, 'text-anchor': 'middle' },
        `i${ev.iteration}`
      )
    );
  }
  return mark;
}

function chart(sim: IBarrierSim, findings: IFinding[], hover: HoverDetail): HTMLElement {
  const lanes = lanesOf(sim);
  const seqs = sim.events.map(ev => ev.seq);
  const minSeq = Math.min(...seqs);
  const maxSeq = Math.max(...seqs);
  const width = MARGIN.left + (maxSeq - minSeq + 1) * STEP + MARGIN.right;
  const height = MARGIN.top + lanes.length * LANE + MARGIN.bottom;
  const x = (seq: number): number => MARGIN.left + (seq - minSeq + 0.5) * STEP;
  const laneY = new Map(
    lanes.map((lane, i) => [laneKey(lane.barrier, lane.slot), MARGIN.top + (i + 0.5) * LANE])
  );

  const { labels, svg } = laneCharts(LABEL_WIDTH, width, height, 'tw-barrier-chart',
    'Barrier events per slot over sequence');
  svg.appendChild(stageBands(sim.events, x, height));
  lanes.forEach(lane => {
    const y = laneY.get(laneKey(lane.barrier, lane.slot))!;
    svg.appendChild(s('line', { class: 'tw-lane', x1: MARGIN.left, x2: width - MARGIN.right, y1: y, y2: y }));
    labels.appendChild(
      s(
        'text',
        { class: 'tw-lane-label', x: LABEL_WIDTH - 8, y: y + 4, 'text-anchor': 'end' },
        laneKey(lane.barrier, lane.slot)
      )
    );
  });
  for (const ev of sim.events) {
    const text = describeEvent(ev, findings);
    const mark = eventMark(ev, x(ev.seq), laneY.get(laneKey(ev.barrier, ev.slot))!, text);
    hover.bind(mark, text);
    svg.appendChild(mark);
  }
  labels.appendChild(
    s('text', { class: 'tw-axis-label', x: LABEL_WIDTH - 8, y: height - 8, 'text-anchor': 'end' }, `seq ${minSeq} …`)
  );
  svg.appendChild(
    s('text', { class: 'tw-axis-label', x: width - MARGIN.right, y: height - 8, 'text-anchor': 'end' }, `… ${maxSeq}`)
  );
  return h('div', { class: 'tw-barrier-frame' }, labels, h('div', { class: 'tw-chart-scroll' }, svg));
}

function legend(): HTMLElement {
  return h(
    'div',
    { class: 'tw-legend' },
    ...KINDS.map(kind =>
      h('span', { class: `tw-legend-item tw-kind-${kind}` }, h('span', { class: 'tw-swatch' }), kind)
    ),
    h('span', { class: 'tw-legend-item tw-finding' }, h('span', { class: 'tw-swatch' }), 'finding'),
    h(
      'span',
      { class: 'tw-legend-note' },
      'above a mark: p0/p1 = wait parity, φn = completed phase; below: iN = iteration'
    )
  );
}

export function renderBarriers(sim: IBarrierSim | null, findings: IFinding[]): HTMLElement {
  const root = h('div', { class: 'tw-barriers', 'data-testid': 'tw-barrier-timeline' });
  if (!sim || sim.events.length === 0) {
    root.appendChild(
      h(
        'div',
        { class: 'tw-empty' },
        'No barrier simulation in this trace (the kernel uses no mbarriers, or lowering stopped earlier).'
      )
    );
    return root;
  }
  const hover = new HoverDetail('Hover an event for its kind, slot, iteration, bytes and parity.');
  const flagged = sim.events.filter(ev => ev.finding !== undefined && ev.finding !== null).length;
  root.append(
    h(
      'div',
      { class: flagged ? 'tw-summary-line tw-error' : 'tw-summary-line' },
      `${sim.events.length} events on ${sim.barriers.length} barrier(s) over ${sim.iterations} iteration(s)` +
        walkedBlocks(sim) +
        (flagged ? ` — ${flagged} flagged` : '')
    ),
    legend(),
    chart(sim, findings, hover),
    hover.node
  );
  return root;
}

/** ", in block (7, 0, 0), the longest of the 2 blocks simulated" where more than one block was walked. */
export function walkedBlocks(sim: IBarrierSim): string {
  const blocks = sim.blocks ?? [];
  if (blocks.length < 2 || !sim.block) {
    return '';
  }
  return `, in block (${sim.block.join(', ')}), the longest of the ${blocks.length} blocks simulated`;
}
