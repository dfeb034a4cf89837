/**
 * The measured timeline (`timeline.measured`, tw.timeline), from a real recording:
 * tests/fixtures/trace_timeline.json is a warp-specialised GEMM measured on an H200.
 */
import { parseTimeline, parseTrace } from '../schema';
import type { IMeasuredTimeline, ITimelineEvent, ITimelineWait, ITrace } from '../types';
import { formatPercent, MARK_KINDS, MAX_DRAWN, sampling } from '../views/measured';
import { TraceView } from '../views/trace';
import { all, byTestId, loadFixture, makeTrace, renderTrace } from './helpers';

afterEach(() => {
  document.body.textContent = '';
});

const fixture = loadFixture<ITrace>('trace_timeline.json');
const measured = fixture.timeline!.measured!;

function fact(root: Element, key: string): string {
  const row = root.querySelector(`[data-testid="tw-measured-facts"] tr[data-fact="${key}"]`);
  if (!row) {
    throw new Error(`no fact row ${key}`);
  }
  return row.querySelectorAll('td')[1].textContent ?? '';
}

function laneLabels(root: Element, kind?: string): string[] {
  return all(root, '[data-testid="tw-measured-lane"]')
    .filter(el => kind === undefined || el.dataset.kind === kind)
    .map(el => el.textContent ?? '');
}

describe('the recorded fixture', () => {
  it('is a real recording (guards the assertions below against an empty fixture)', () => {
    expect(measured.events.length).toBeGreaterThan(100);
    expect(measured.waits.length).toBeGreaterThan(10);
    expect(measured.streams.length).toBeGreaterThan(1);
    expect(measured.summary).toBeTruthy();
  });

  it('adds a "Measured timeline" tab right after the barrier tab', async () => {
    const { node } = await renderTrace(fixture);
    const keys = all(node, '.tw-tabs .tw-seg-button').map(b => b.dataset.key);
    expect(keys.indexOf('timeline')).toBe(keys.indexOf('barriers') + 1);
    expect(byTestId(node, 'tw-tab-timeline').textContent).toBe('Measured timeline');
    expect(all(node, '[data-testid="tw-render-error"]')).toHaveLength(0);
  });

  it('has the planned barrier lanes (same order, same labels), then one per stream', async () => {
    const { node } = await renderTrace(fixture);
    const planned = all(byTestId(node, 'tw-barrier-timeline'), '.tw-lane-labels .tw-lane-label').map(
      el => el.textContent
    );
    const timeline = byTestId(node, 'tw-measured-timeline');
    // The fixture's plan declares every slot the measurement touches, so no extra slot lanes.
    expect(planned.length).toBeGreaterThan(0);
    expect(laneLabels(timeline, 'slot')).toEqual(planned);
    expect(laneLabels(timeline, 'stream')).toEqual(
      measured.streams.map(st => `${st.role} (thread ${st.thread})`)
    );
    expect(laneLabels(timeline)).toEqual([...planned, ...laneLabels(timeline, 'stream')]);
  });

  it('draws every wait as a bar on its slot lane, coloured by role, left to right in time', async () => {
    const { node } = await renderTrace(fixture);
    const timeline = byTestId(node, 'tw-measured-timeline');
    const bars = all(timeline, '[data-testid="tw-measured-wait"]');
    expect(measured.waits.length).toBeLessThanOrEqual(MAX_DRAWN); // so all are drawn
    expect(bars).toHaveLength(measured.waits.length);
    bars.forEach((bar, i) => {
      const w = measured.waits[i];
      expect(bar.dataset.lane).toBe(`${w.barrier}[${w.slot}]`);
      expect(bar.dataset.role).toBe(w.role);
      expect(bar.classList).toContain(`tw-role-${w.role}`);
      expect(bar.querySelector('title')!.textContent).toContain(`waited on ${w.barrier}[${w.slot}]`);
      expect(bar.querySelector('title')!.textContent).toContain(`${(w.end_ns - w.begin_ns).toFixed(0)} ns`);
    });
    // Producers and consumers both wait in this kernel (stage_empty / stage_full).
    expect(new Set(bars.map(b => b.dataset.role))).toEqual(new Set(['producer', 'consumer']));
    // x follows begin_ns; width follows the wait's length.
    const rect = (i: number) => bars[i].querySelector('rect')!;
    const order = measured.waits.map((w, i) => [w.begin_ns, Number(rect(i).getAttribute('x'))]);
    const sorted = [...order].sort((a, b) => a[0] - b[0]);
    for (let i = 1; i < sorted.length; i++) {
      expect(sorted[i][1]).toBeGreaterThanOrEqual(sorted[i - 1][1]);
    }
    expect(all(timeline, '[data-testid="tw-measured-cap"]')).toHaveLength(0);
  });

  it('marks issues/arrivals on slot lanes, wgmma/store events on stream lanes, with tooltips', async () => {
    const { node } = await renderTrace(fixture);
    const timeline = byTestId(node, 'tw-measured-timeline');
    const marks = all(timeline, '[data-testid="tw-measured-mark"]');
    const expected = measured.events.filter(ev => ev.kind !== 'wait_begin' && ev.kind !== 'wait_end');
    expect(marks).toHaveLength(expected.length);
    const kinds = new Set(marks.map(m => m.dataset.kind));
    for (const kind of ['tma_issue', 'arrive', 'wgmma_issue', 'wgmma_wait']) {
      expect(kinds.has(kind)).toBe(true);
    }
    marks.forEach((mark, i) => {
      const ev = expected[i];
      expect(mark.dataset.kind).toBe(ev.kind);
      expect(mark.dataset.lane).toBe(
        ev.barrier === null ? `stream:${ev.stream}` : `${ev.barrier}[${ev.slot}]`
      );
      expect(mark.querySelector('title')!.textContent).toContain(`${ev.role} ${ev.kind}`);
    });
    expect(MARK_KINDS.every(k => timeline.querySelector(`.tw-legend-item.tw-mkind-${k}`))).toBe(true);
  });

  it('has a time axis in microseconds covering the block', async () => {
    const { node } = await renderTrace(fixture);
    const timeline = byTestId(node, 'tw-measured-timeline');
    const ticks = all(byTestId(timeline, 'tw-measured-axis'), 'text').map(t => Number(t.textContent));
    expect(ticks.length).toBeGreaterThanOrEqual(3);
    const last = Math.max(...measured.events.map(ev => ev.t_ns)) / 1000;
    expect(Math.max(...ticks)).toBeLessThanOrEqual(last);
    expect(Math.max(...ticks)).toBeGreaterThan(last / 2);
    expect(timeline.querySelector('.tw-lane-labels')!.textContent).toContain('µs');
  });

  it('shows the summary numbers', async () => {
    const { node } = await renderTrace(fixture);
    const timeline = byTestId(node, 'tw-measured-timeline');
    const s = measured.summary!;
    const p = s.pipeline!;
    expect(p.lead_stages_median).toBe(1);
    expect(fact(timeline, 'lead')).toBe('median 1, min 1');
    expect(fact(timeline, 'ahead')).toBe(`${(p.ahead_of_lockstep! * 100).toFixed(1)}%`);
    expect(fact(timeline, 'ahead')).toBe('3.1%');
    expect(fact(timeline, 'bubbles')).toBe('20.0%'); // consumer_wait_on_loads_fraction 0.1998...
    expect(fact(timeline, 'load-to-wait')).toBe(`${Math.round(p.load_to_wait_end_ns_median!)} ns`);
    expect(fact(timeline, 'violations')).toBe(`0 of ${p.waits_checked} waits checked`);
    expect(fact(timeline, 'sms')).toMatch(new RegExp(`^${s.sm_busy!.sms} SMs, \\d+\\.\\d% busy on average`));
    expect(fact(timeline, 'events')).toBe(`${s.events} from ${s.recorded_blocks} block(s) (every 4th)`);
    expect(fact(timeline, 'dropped')).toBe('0');
    expect(fact(timeline, 'unclosed')).toBe('0');
    expect(fact(timeline, 'diverged')).toBe('0'); // the fixture predates the count: read as none
    expect(all(timeline, '[data-testid="tw-measured-violation"]')).toHaveLength(0);

    const rows = all(timeline, '[data-testid="tw-measured-slot-row"]');
    expect(rows).toHaveLength(s.wait_by_slot.length);
    rows.forEach((row, i) => {
      const e = s.wait_by_slot[i];
      const cells = Array.from(row.querySelectorAll('td')).map(td => td.textContent);
      expect(cells).toEqual([
        e.role,
        `${e.barrier}[${e.slot}]`,
        String(e.waits),
        (e.total_ns / 1000).toFixed(2),
        (e.per_block_ns / 1000).toFixed(2)
      ]);
    });
    expect(byTestId(timeline, 'tw-measured-headline').textContent).toContain(
      `Block ${measured.block} on SM ${measured.sm}`
    );
  });

  it("names a reordered grid's block by the kernel's own indices too", async () => {
    const trace = {
      ...fixture,
      timeline: { ...fixture.timeline, measured: { ...measured, block: 5, block_indices: [62, 3, 0] } }
    };
    const { node } = await renderTrace(trace);
    const timeline = byTestId(node, 'tw-measured-timeline');
    expect(byTestId(timeline, 'tw-measured-headline').textContent).toContain(
      `Block 5 (bx, by, bz = 62, 3, 0) on SM ${measured.sm}`
    );
  });
});

describe('traces without a measurement', () => {
  it('a trace without "timeline" has no measured-timeline tab or section', async () => {
    const sample = loadFixture<ITrace>('trace_sample.json');
    expect('timeline' in sample).toBe(false);
    const { node } = await renderTrace(sample);
    expect(all(node, '[data-testid="tw-tab-timeline"]')).toHaveLength(0);
    expect(all(node, '[data-testid="tw-measured-timeline"]')).toHaveLength(0);
  });

  it('a planned but not yet measured timeline says how to fill it', async () => {
    const trace = { ...fixture, timeline: { plan: fixture.timeline!.plan, measured: null } };
    const { node } = await renderTrace(trace);
    const timeline = byTestId(node, 'tw-measured-timeline');
    expect(byTestId(timeline, 'tw-measured-note').textContent).toMatch(
      /records a timeline.*kernel\.timeline\(\)/
    );
    expect(all(timeline, 'svg')).toHaveLength(0);
    expect(all(timeline, '[data-testid="tw-measured-wait"]')).toHaveLength(0);
  });

  it('a kept tab the new trace lacks falls back to the passes', () => {
    const view = new TraceView(makeTrace(), 'timeline');
    expect(view.tab).toBe('passes');
    expect(view.node.querySelector<HTMLElement>('[data-panel="passes"]')!.hidden).toBe(false);
  });
});

describe('malformed "timeline" is ignored safely', () => {
  const bad: unknown[] = [
    'timeline',
    42,
    [],
    null,
    { plan: 'x', measured: 'y' },
    { plan: null, measured: { events: 'not a list' } },
    { measured: [] }
  ];

  it.each(bad.map(v => [JSON.stringify(v), v]))(
    'timeline = %s parses to null and renders no section',
    async (_, value) => {
      expect(parseTimeline(value)).toBeNull();
      const trace = makeTrace({ timeline: value } as unknown as Partial<ITrace>);
      const parsed = parseTrace(trace);
      expect(parsed.ok).toBe(true);
      expect(parsed.ok && parsed.doc.timeline).toBeNull();
      const { node } = await renderTrace(trace);
      expect(all(node, '[data-testid="tw-render-error"]')).toHaveLength(0);
      expect(all(node, '[data-testid="tw-tab-timeline"]')).toHaveLength(0);
      expect(all(node, '[data-testid="tw-measured-timeline"]')).toHaveLength(0);
    }
  );

  it('drops unusable entries and summary fields but draws the rest', async () => {
    const m = measured;
    const broken = {
      ...m,
      events: [...m.events.slice(0, 20), { kind: 'arrive', t_ns: 'soon' }, 'junk', null],
      waits: [...m.waits.slice(0, 5), { stream: 0, barrier: 'stage_full', begin_ns: 1 }, 7],
      streams: [...m.streams, { role: 'consumer' }],
      blocks: [[0, 1], 'x'],
      summary: { wait_by_slot: 'no', pipeline: [], sm_busy: 3, consumer_wait_on_loads_fraction: 'lots' }
    };
    const trace = { ...fixture, timeline: { plan: fixture.timeline!.plan, measured: broken } };
    const parsed = parseTrace(trace);
    expect(parsed.ok).toBe(true);
    const got = parsed.ok ? parsed.doc.timeline!.measured! : null;
    expect(got!.events).toHaveLength(20);
    expect(got!.waits).toHaveLength(5);
    expect(got!.streams).toHaveLength(m.streams.length);
    expect(got!.blocks).toEqual([]);
    expect(got!.summary!.wait_by_slot).toEqual([]);
    expect(got!.summary!.pipeline).toBeNull();

    const { node } = await renderTrace(trace);
    const timeline = byTestId(node, 'tw-measured-timeline');
    expect(all(timeline, '[data-testid="tw-measured-wait"]')).toHaveLength(5);
    expect(fact(timeline, 'lead')).toBe('median —, min —');
    expect(fact(timeline, 'bubbles')).toBe('—');
    expect(all(timeline, '[data-testid="tw-measured-slot-row"]')).toHaveLength(0);
  });

  it('a measurement without a summary still draws its waits', async () => {
    const trace = { ...fixture, timeline: { plan: null, measured: { ...measured, summary: 'n/a' } } };
    const { node } = await renderTrace(trace);
    const timeline = byTestId(node, 'tw-measured-timeline');
    expect(all(timeline, '[data-testid="tw-measured-wait"]')).toHaveLength(measured.waits.length);
    expect(all(timeline, '[data-testid="tw-measured-facts"]')).toHaveLength(0);
  });
});

describe('large and unusual measurements', () => {
  it(`draws at most ${MAX_DRAWN} waits and ${MAX_DRAWN} marks, and says so`, async () => {
    const many: ITimelineWait[] = Array.from({ length: MAX_DRAWN + 500 }, (_, i) => ({
      stream: i % 2,
      role: 'consumer',
      barrier: 'full',
      slot: i % 3,
      parity: i % 2,
      begin_ns: i * 10,
      end_ns: i * 10 + 5
    }));
    // More events than a function takes arguments (a spread into Math.max would throw).
    const arrivals: ITimelineEvent[] = Array.from({ length: 200_000 }, (_, i) => ({
      stream: 2,
      role: 'producer',
      kind: 'arrive',
      barrier: 'full',
      slot: i % 3,
      parity: 0,
      line: null,
      t_ns: i
    }));
    const big: IMeasuredTimeline = {
      block: 0,
      block_indices: null,
      sm: 0,
      events: arrivals,
      truncated: true,
      waits: many,
      streams: [],
      blocks: [],
      summary: null
    };
    const { node } = await renderTrace(makeTrace({ timeline: { plan: null, measured: big } }));
    const timeline = byTestId(node, 'tw-measured-timeline');
    expect(all(timeline, '[data-testid="tw-measured-wait"]')).toHaveLength(MAX_DRAWN);
    const note = byTestId(timeline, 'tw-measured-cap').textContent!;
    expect(note).toContain(`the first ${MAX_DRAWN} of ${MAX_DRAWN + 500} waits`);
    expect(note).toContain(`${MAX_DRAWN} of ${arrivals.length} marks`);
    expect(all(timeline, '[data-testid="tw-measured-mark"]')).toHaveLength(MAX_DRAWN);
    expect(note).toContain('truncated');
    // Without a planned barrier view the slot lanes come from the measurement itself.
    expect(laneLabels(timeline, 'slot')).toEqual(['full[0]', 'full[1]', 'full[2]']);
  });

  it('adds lanes for slots the plan lacks after the planned ones; lists the first violations', async () => {
    const extra = { ...measured.waits[0], barrier: 'surprise', slot: 7 };
    const violations = Array.from({ length: 7 }, (_, i) => ({
      block: 0,
      stream: 2,
      barrier: 'stage_full',
      iteration: i,
      what: 'wait ended before its load was issued',
      cause_ns: 100,
      wait_end_ns: 90
    }));
    const summary = { ...measured.summary!, pipeline: { ...measured.summary!.pipeline!, violations } };
    const trace = {
      ...fixture,
      timeline: { ...fixture.timeline, measured: { ...measured, waits: [...measured.waits, extra], summary } }
    };
    const { node } = await renderTrace(trace);
    const timeline = byTestId(node, 'tw-measured-timeline');
    const slots = laneLabels(timeline, 'slot');
    expect(slots[slots.length - 1]).toBe('surprise[7]');
    expect(fact(timeline, 'violations')).toBe(
      `7 of ${measured.summary!.pipeline!.waits_checked} waits checked`
    );
    expect(timeline.querySelector('tr[data-fact="violations"] .tw-error')).not.toBeNull();
    const listed = all(timeline, '[data-testid="tw-measured-violation"]');
    expect(listed).toHaveLength(5);
    expect(listed[0].textContent).toContain('wait ended before its load was issued');
    expect(timeline.textContent).toContain('… and 2 more');
  });

  it('formats fractions as percentages', () => {
    expect(formatPercent(0.19983620321296588)).toBe('20.0%');
    expect(formatPercent(null)).toBe('—');
  });

  it('says which units record: blocks, or tiles of each block of a persistent kernel', () => {
    expect(sampling(1, undefined)).toBe(' (every block)');
    expect(sampling(4, 'block')).toBe(' (every 4th)');
    expect(sampling(2, 'tile')).toBe(' (every 2nd tile of each block)');
    expect(sampling(1, 'tile')).toBe(' (every tile of each block)');
    expect(sampling(undefined, 'tile')).toBe('');
  });
});
