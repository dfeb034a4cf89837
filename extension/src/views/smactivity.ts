/**
 * Per-SM activity of a measured timeline's recorded blocks (`timeline.measured.blocks`: block,
 * SM, first open and last close in ns from the launch's first open): one row per SM, a bar per
 * block, so the waves, the tail and idle SMs show. The HTML report draws the same
 * (report/timeline_svg.py, sm_activity_svg).
 */
import { h, s, svgTitle } from '../dom';
import { linear, niceTicks } from './axis';

const WIDTH = 900;
const LEFT = 70;
const TOP = 18;
const BOTTOM = 22;

export function renderSmActivity(blocks: [number, number, number, number][]): HTMLElement {
  const root = h('details', { class: 'tw-sm-activity', 'data-testid': 'tw-sm-activity' });
  root.appendChild(h('summary', {}, `Per-SM activity (${blocks.length} recorded blocks)`));
  if (blocks.length === 0) {
    root.appendChild(h('div', { class: 'tw-empty' }, 'No recorded blocks.'));
    return root;
  }
  const sms = [...new Set(blocks.map(b => b[1]))].sort((a, b) => a - b);
  const row = new Map(sms.map((sm, i) => [sm, i]));
  const rowH = Math.max(3, Math.min(12, Math.floor(480 / sms.length)));
  const end = Math.max(...blocks.map(b => b[3]), 1);
  const height = TOP + rowH * sms.length + BOTTOM;
  const x = linear(0, end, LEFT, WIDTH - 10);
  const svg = s('svg', {
    class: 'tw-chart tw-sm-chart',
    viewBox: `0 0 ${WIDTH} ${height}`,
    width: WIDTH,
    height,
    role: 'img',
    'aria-label': 'Recorded blocks per SM over time'
  });
  for (const t of niceTicks(0, end / 1000, 8)) {
    svg.appendChild(
      s('text', { class: 'tw-axis-label', x: x(t * 1000), y: height - 6, 'text-anchor': 'middle' }, `${t} µs`)
    );
  }
  svg.appendChild(s('text', { class: 'tw-axis-label', x: LEFT - 6, y: TOP + 10, 'text-anchor': 'end' }, `${sms.length} SMs`));
  for (const [block, sm, lo, hi] of blocks) {
    const bar = s('rect', {
      class: 'tw-sm-block',
      x: x(lo),
      y: TOP + rowH * (row.get(sm) ?? 0),
      width: Math.max(x(hi) - x(lo), 1),
      height: Math.max(rowH - 1, 2)
    });
    bar.appendChild(svgTitle(`block ${block} on SM ${sm}: ${(lo / 1000).toFixed(1)}–${(hi / 1000).toFixed(1)} µs`));
    svg.appendChild(bar);
  }
  root.appendChild(svg);
  return root;
}
