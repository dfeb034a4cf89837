/** Per-SM activity of the measured timeline recorded on an H200 (tests/fixtures/trace_timeline.json). */
import type { ITrace } from '../types';
import { renderSmActivity } from '../views/smactivity';
import { loadFixture } from './helpers';

const blocks = loadFixture<ITrace>('trace_timeline.json').timeline!.measured!.blocks;

describe('per-SM activity', () => {
  it('draws a bar per recorded block, a row per SM', () => {
    const node = renderSmActivity(blocks);
    expect(node.querySelectorAll('rect.tw-sm-block').length).toBe(blocks.length);
    expect(node.textContent).toContain(`${new Set(blocks.map(b => b[1])).size} SMs`);
    const [block, sm, lo, hi] = blocks[0];
    expect(node.querySelector('rect.tw-sm-block title')!.textContent).toBe(
      `block ${block} on SM ${sm}: ${(lo / 1000).toFixed(1)}–${(hi / 1000).toFixed(1)} µs`
    );
  });

  it('says so when nothing was recorded', () => {
    const node = renderSmActivity([]);
    expect(node.querySelectorAll('rect').length).toBe(0);
    expect(node.textContent).toContain('No recorded blocks.');
  });
});
