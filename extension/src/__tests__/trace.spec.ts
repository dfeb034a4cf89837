import { TRACE_MIME_TYPE } from '../mime';
import type { IBarrierSim, IPassSnapshot, ISmemBuffer, ITmaDescriptor, ITrace } from '../types';
import { describeReread, describeSplit, renderHeader, renderTma, swizzleName } from '../views/details';
import { all, byTestId, codeText, IR, loadFixture, makeTrace, pass, press, renderTrace } from './helpers';

afterEach(() => {
  document.body.textContent = '';
});

function selectedIndex(root: Element): number {
  const selected = all(root, '[data-testid="tw-pass-item"].tw-selected');
  expect(selected).toHaveLength(1);
  return Number(selected[0].dataset.index);
}

describe('the sample fixture (schema only, no fixture-specific content)', () => {
  const trace = loadFixture<ITrace>('trace_sample.json');

  it('lists every pass with its status', async () => {
    const { node } = await renderTrace(trace);
    const items = all(node, '[data-testid="tw-pass-item"]');
    expect(items).toHaveLength(trace.passes.length);
    items.forEach((item, i) => {
      const p = trace.passes[i];
      expect(item.dataset.status).toBe(p.error ? 'failed' : p.changed ? 'changed' : 'unchanged');
      expect(item.textContent).toContain(p.name);
    });
  });

  it('shows the IR after the selected pass and steps through all passes with j', async () => {
    const { node } = await renderTrace(trace);
    const stepper = byTestId(node, 'tw-stepper');
    for (let i = 0; i < trace.passes.length; i++) {
      expect(selectedIndex(node)).toBe(i);
      expect(codeText(byTestId(node, 'tw-ir'))).toBe(trace.passes[i].ir_after.replace(/\n?$/, '\n'));
      press(stepper, 'j');
    }
    expect(selectedIndex(node)).toBe(trace.passes.length - 1); // stops at the end
  });

  it('diff lines come from the pass input (deleted) and output (added)', async () => {
    const { node } = await renderTrace(trace);
    const stepper = byTestId(node, 'tw-stepper');
    for (const p of trace.passes) {
      const diff = byTestId(node, 'tw-diff');
      const before = new Set(p.ir_before.split('\n'));
      const after = new Set(p.ir_after.split('\n'));
      for (const line of all(diff, '.tw-diff-del .tw-diff-text')) {
        expect(before.has(line.textContent!)).toBe(true);
      }
      for (const line of all(diff, '.tw-diff-add .tw-diff-text')) {
        expect(after.has(line.textContent!)).toBe(true);
      }
      const changedText = p.ir_before !== p.ir_after;
      expect(Number(diff.dataset.added) + Number(diff.dataset.removed) > 0).toBe(changedText);
      press(stepper, 'j');
    }
  });

  it('draws one barrier mark per event and one smem bar per buffer', async () => {
    const { node } = await renderTrace(trace);
    const events = trace.barriers?.events ?? [];
    expect(all(byTestId(node, 'tw-barrier-timeline'), '[data-testid="tw-barrier-event"]')).toHaveLength(
      events.length
    );
    expect(all(byTestId(node, 'tw-smem-timeline'), '[data-testid="tw-smem-buffer"]')).toHaveLength(
      trace.smem?.buffers.length ?? 0
    );
    expect(all(byTestId(node, 'tw-barrier-timeline'), '.tw-finding')).toHaveLength(
      events.filter(e => e.finding !== undefined && e.finding !== null).length + 1 /* legend */
    );
  });
});

describe('pass stepper', () => {
  it('steps forward with j and back with k, updating the IR', async () => {
    const trace = makeTrace();
    const { node } = await renderTrace(trace);
    const stepper = byTestId(node, 'tw-stepper');
    expect(selectedIndex(node)).toBe(0);
    press(stepper, 'j');
    press(stepper, 'j');
    expect(selectedIndex(node)).toBe(2);
    expect(codeText(byTestId(node, 'tw-ir'))).toBe(IR.v2);
    expect(byTestId(node, 'tw-pass-title').textContent).toContain('add_fence');
    press(stepper, 'k');
    expect(selectedIndex(node)).toBe(1);
    expect(byTestId(node, 'tw-pass-title').textContent).toContain('noop_a');
    press(stepper, 'k');
    press(stepper, 'k');
    expect(selectedIndex(node)).toBe(0);
  });

  it('ignores j/k typed into the search box', async () => {
    const { node } = await renderTrace(makeTrace());
    const search = byTestId(node, 'tw-search');
    press(search, 'j');
    expect(selectedIndex(node)).toBe(0);
  });

  it('hide unchanged filters the list and stepping skips hidden passes', async () => {
    const { node } = await renderTrace(makeTrace());
    const checkbox = byTestId(node, 'tw-hide-unchanged') as HTMLInputElement;
    checkbox.checked = true;
    checkbox.dispatchEvent(new Event('change'));
    const visible = all(node, '[data-testid="tw-pass-item"]').filter(item => !item.hidden);
    expect(visible.map(item => item.dataset.index)).toEqual(['0', '2']);
    press(byTestId(node, 'tw-stepper'), 'j');
    expect(selectedIndex(node)).toBe(2);
    checkbox.checked = false;
    checkbox.dispatchEvent(new Event('change'));
    expect(all(node, '[data-testid="tw-pass-item"]').filter(item => !item.hidden)).toHaveLength(4);
  });

  it('hiding unchanged moves a hidden selection to the next shown pass, and keeps failed passes', async () => {
    const trace = makeTrace();
    trace.passes.push(pass(4, 'boom', IR.v2, IR.v2, { error: 'CompileError: layout conflict' }));
    const { node } = await renderTrace(trace);
    press(byTestId(node, 'tw-stepper'), 'j'); // select noop_a (unchanged)
    const checkbox = byTestId(node, 'tw-hide-unchanged') as HTMLInputElement;
    checkbox.checked = true;
    checkbox.dispatchEvent(new Event('change'));
    expect(selectedIndex(node)).toBe(2);
    const shown = all(node, '[data-testid="tw-pass-item"]').filter(item => !item.hidden);
    expect(shown.map(item => item.dataset.status)).toEqual(['changed', 'changed', 'failed']);
  });

  it('shows the error of a failed pass', async () => {
    const trace = makeTrace({
      passes: [pass(0, 'lower_tile_copy', IR.v0, IR.v0, { error: 'CompileError: bad copy' })]
    });
    const { node } = await renderTrace(trace);
    expect(byTestId(node, 'tw-pass-error').textContent).toBe('CompileError: bad copy');
    expect(byTestId(node, 'tw-pass-item').classList).toContain('tw-failed');
  });

  it('search highlights every match in the IR and counts them', async () => {
    const { node } = await renderTrace(makeTrace());
    const search = byTestId(node, 'tw-search') as HTMLInputElement;
    search.value = 'A';
    search.dispatchEvent(new Event('input'));
    const marks = all(byTestId(node, 'tw-ir'), 'mark.tw-match');
    // IR.v1 has "A" in def f(A), load(A, 0) and store(A, y); the search is case-insensitive
    // and also matches the "a" of "load".
    expect(marks.map(m => m.textContent)).toEqual(['A', 'a', 'A', 'A']);
    expect(byTestId(node, 'tw-search-count').textContent).toBe('4 matches');
    search.value = 'zzz';
    search.dispatchEvent(new Event('input'));
    expect(all(byTestId(node, 'tw-ir'), 'mark.tw-match')).toHaveLength(0);
  });
});

describe('IR diff', () => {
  it('unified diff marks the removed and added lines with word highlights', async () => {
    const { node } = await renderTrace(makeTrace());
    const diff = byTestId(node, 'tw-diff');
    expect(all(diff, '.tw-diff-del .tw-diff-text').map(e => e.textContent)).toEqual(['    y = x * 2']);
    expect(all(diff, '.tw-diff-add .tw-diff-text').map(e => e.textContent)).toEqual(['    y = x * 4']);
    expect(all(diff, '.tw-word-del').map(e => e.textContent)).toEqual(['2']);
    expect(all(diff, '.tw-word-add').map(e => e.textContent)).toEqual(['4']);
    expect(diff.dataset.added).toBe('1');
    expect(diff.dataset.removed).toBe('1');
  });

  it('a pure insertion has only added lines; an unchanged pass says so', async () => {
    const { node } = await renderTrace(makeTrace());
    const stepper = byTestId(node, 'tw-stepper');
    press(stepper, 'j');
    expect(all(byTestId(node, 'tw-diff'), '.tw-diff-add, .tw-diff-del')).toHaveLength(0);
    expect(byTestId(node, 'tw-diff').textContent).toContain('No textual change');
    press(stepper, 'j');
    const diff = byTestId(node, 'tw-diff');
    expect(all(diff, '.tw-diff-add .tw-diff-text').map(e => e.textContent)).toEqual(['    fence()']);
    expect(all(diff, '.tw-diff-del')).toHaveLength(0);
  });

  it('side-by-side mode pairs old and new lines in one row', async () => {
    const trace = makeTrace({ passes: [pass(0, 'fuse', IR.v2, IR.v3)] });
    const { node } = await renderTrace(trace);
    byTestId(node, 'tw-diff-mode-split').click();
    const diff = byTestId(node, 'tw-diff');
    expect(diff.classList).toContain('tw-diff-split');
    const rows = all(diff, 'tbody tr').filter(row => row.querySelector('.tw-diff-del, .tw-diff-add'));
    expect(rows).toHaveLength(2); // two deleted lines beside one added line
    expect(rows[0].querySelector('.tw-diff-del')!.textContent).toBe('    x = load(A, 0)');
    expect(rows[0].querySelector('.tw-diff-add')!.textContent).toBe('    y = load(A, 0) * 4');
    expect(rows[1].querySelector('.tw-diff-del')!.textContent).toBe('    y = x * 4');
    expect(rows[1].querySelector('.tw-diff-empty')).not.toBeNull();
  });
});

describe('TMA descriptors', () => {
  it('names each swizzle as the shared-memory tab does', () => {
    expect([0, 1, 2, 3, 7].map(swizzleName)).toEqual(['none (0)', '32B (1)', '64B (2)', '128B (3)', '7']);
    const desc = {
      name: 'A_desc', buffer: 'A', data_type: 6, data_type_name: 'FLOAT16', rank: 2, global_dims: [64, 64],
      global_strides_bytes: [128], box_dims: [64, 64], element_strides: [1, 1], interleave: 0, swizzle: 3,
      l2_promotion: 2, oob_fill: 0
    } as unknown as ITmaDescriptor;
    const cells = all(renderTma([desc]), 'tbody td').map(td => td.textContent);
    expect(cells).toContain('128B (3)');
  });
});

describe('the second form of a spilling kernel', () => {
  it('says whether the form reading the thread index again was kept, and what each spilled and used', () => {
    const kept = { kept: true, spills_bytes: 72, spills_bytes_without: 316, registers: 255, registers_without: 255 };
    expect(describeReread(kept)).toBe('kept (spills 316 -> 72 B, registers 255 -> 255)');
    expect(describeReread({ ...kept, kept: false, spills_bytes: 0, registers: 192 })).toBe(
      'not kept (spills 316 -> 0 B, registers 255 -> 192)'
    );
    expect(describeReread({ kept: false, error: 'internal error: NVRTC refused it' })).toBe(
      'not compiled: internal error: NVRTC refused it'
    );
    const trace = makeTrace();
    const chips = (t: ITrace) => all(renderHeader(t), '.tw-chip').map(c => c.textContent ?? '');
    expect(chips(trace).some(text => text.startsWith('index read again'))).toBe(false);
    trace.resources.thread_index_reread = kept;
    expect(chips(trace)).toContain('index read againkept (spills 316 -> 72 B, registers 255 -> 255)');
  });
});

describe('the pipelined loop split or not', () => {
  it('says what the producer and consumers are, or why the loop kept one role', () => {
    const split = { applied: true, stages: 2, consumer_threads: 256, producer_threads: 128, shares_bytes: true };
    expect(describeSplit(split)).toBe(
      'a producer warpgroup and 256 consumer threads, 2 stage(s); shared tiles placed by lifetime'
    );
    expect(describeSplit({ ...split, shares_bytes: false })).toBe(
      'a producer warpgroup and 256 consumer threads, 2 stage(s)'
    );
    expect(describeSplit({ applied: false, reason: 'num_stages=0' })).toBe('one role: num_stages=0');
    const trace = makeTrace();
    const chips = (t: ITrace) => all(renderHeader(t), '.tw-chip').map(c => c.textContent ?? '');
    expect(chips(trace).some(text => text.startsWith('warp specialisation'))).toBe(false);
    trace.resources.warp_specialization = { applied: false, reason: 'num_stages=0' };
    expect(chips(trace)).toContain('warp specialisationone role: num_stages=0');
  });
});

describe('sources', () => {
  it('shows device and host sources in tabs', async () => {
    const trace = makeTrace();
    const { node } = await renderTrace(trace);
    const source = byTestId(node, 'tw-source');
    expect(codeText(byTestId(source, 'tw-source-code'))).toBe(trace.sources.device);
    byTestId(source, 'tw-source-tab-host').click();
    expect(codeText(byTestId(source, 'tw-source-code'))).toBe(trace.sources.host);
    expect(source.querySelector('[data-testid="tw-source-tab-compare"]')).toBeNull();
  });

  it('shows the kernel first and folds the inlined headers, keeping line numbers', async () => {
    const device = '// Generated by tileworkbench\n// ---- tw/common.h ----\nnamespace tw {}\n// ---- kernel ----\nextern "C" __global__ void k() {}\n';
    const { node } = await renderTrace(makeTrace({ sources: { device, host: 'def launch(): pass\n' } }));
    const code = byTestId(node, 'tw-source-code');
    expect(codeText(code)).toBe('// ---- kernel ----\nextern "C" __global__ void k() {}\n');
    expect(code.querySelector('.tw-ln')!.textContent).toBe('4');
    const headers = byTestId(node, 'tw-source-headers') as HTMLDetailsElement;
    expect(headers.open).toBe(false);
    expect(headers.querySelector('summary')!.textContent).toBe('Inlined tileworkbench headers (lines 1-3)');
    expect(codeText(byTestId(headers, 'tw-source-headers-code'))).toContain('namespace tw {}');
  });

  it('explains a missing device source by the failed pass', async () => {
    const trace = makeTrace({ sources: { device: null, host: null } });
    trace.passes[2] = { ...trace.passes[2], error: 'CompileError: no layout' } as IPassSnapshot;
    const { node } = await renderTrace(trace);
    expect(byTestId(node, 'tw-source-code').textContent).toContain('add_fence');
  });

  it('diffs against the compare kernel', async () => {
    const other = makeTrace({
      sources: { device: 'int main() {\n  stages = 2;\n  return 0;\n}\n', host: null }
    });
    const trace = makeTrace({
      sources: { device: 'int main() {\n  stages = 3;\n  return 0;\n}\n', host: null },
      compare: { label: 'num_stages=2', trace: other }
    });
    const { node } = await renderTrace(trace);
    const tab = byTestId(node, 'tw-source-tab-compare');
    expect(tab.textContent).toContain('num_stages=2');
    tab.click();
    const diff = byTestId(node, 'tw-source-diff');
    expect(all(diff, '.tw-diff-del .tw-diff-text').map(e => e.textContent)).toEqual(['  stages = 2;']);
    expect(all(diff, '.tw-diff-add .tw-diff-text').map(e => e.textContent)).toEqual(['  stages = 3;']);
  });
});

describe('barrier timeline', () => {
  const sim: IBarrierSim = {
    barriers: [{ name: 'mbar', slots: 2, init_count: 1 }],
    iterations: 2,
    events: [
      { seq: 0, barrier: 'mbar', slot: 0, kind: 'init', count: 1, iteration: null, stage: 'setup' },
      { seq: 1, barrier: 'mbar', slot: 1, kind: 'init', count: 1, iteration: null, stage: 'setup' },
      { seq: 2, barrier: 'mbar', slot: 0, kind: 'expect_tx', bytes: 8192, iteration: 0, stage: 'prologue' },
      { seq: 3, barrier: 'mbar', slot: 0, kind: 'tma_load', bytes: 8192, iteration: 0, stage: 'prologue' },
      { seq: 4, barrier: 'mbar', slot: 0, kind: 'phase_complete', phase: 0, iteration: 0, stage: 'prologue' },
      { seq: 5, barrier: 'mbar', slot: 0, kind: 'wait', parity: 0, iteration: 0, stage: 'steady' },
      { seq: 6, barrier: 'mbar', slot: 1, kind: 'wait', parity: 1, iteration: 1, stage: 'steady', finding: 0 }
    ]
  };
  const findings = [
    {
      severity: 'error',
      message: 'wait on a phase that never completes',
      barrier: 'mbar',
      slot: 1,
      iteration: 1,
      line: 9
    }
  ];

  it('has one mark per event, in a lane per slot, with parity and findings visible', async () => {
    const { node } = await renderTrace(makeTrace({ barriers: sim, findings }));
    const timeline = byTestId(node, 'tw-barrier-timeline');
    const marks = all(timeline, '[data-testid="tw-barrier-event"]');
    expect(marks).toHaveLength(sim.events.length);
    expect(marks.map(m => m.dataset.kind)).toEqual(sim.events.map(e => e.kind));
    expect(all(timeline, '.tw-lane-label').map(l => l.textContent)).toEqual(['mbar[0]', 'mbar[1]']);
    const waits = marks.filter(m => m.dataset.kind === 'wait');
    expect(waits.map(m => m.querySelector('.tw-parity-label')!.textContent)).toEqual(['p0', 'p1']);
    const flagged = marks.filter(m => m.classList.contains('tw-finding'));
    expect(flagged.map(m => m.dataset.seq)).toEqual(['6']);
    expect(flagged[0].querySelector('title')!.textContent).toContain('wait on a phase that never completes');
  });

  it('says which block the timeline is when more than one was simulated', async () => {
    const one = byTestId((await renderTrace(makeTrace({ barriers: sim, findings }))).node, 'tw-barrier-timeline');
    expect(one.textContent).not.toContain('blocks simulated');
    const causal = { ...sim, block: [7, 0, 0], blocks: [[0, 0, 0], [7, 0, 0]] };
    const two = byTestId((await renderTrace(makeTrace({ barriers: causal, findings }))).node, 'tw-barrier-timeline');
    expect(two.textContent).toContain('in block (7, 0, 0), the longest of the 2 blocks simulated');
  });

  it('hover shows the event details', async () => {
    const { node } = await renderTrace(makeTrace({ barriers: sim, findings }));
    const timeline = byTestId(node, 'tw-barrier-timeline');
    const load = all(timeline, '[data-testid="tw-barrier-event"]')[3];
    load.dispatchEvent(new MouseEvent('mouseenter'));
    const detail = byTestId(timeline, 'tw-hover-detail').textContent!;
    expect(detail).toContain('tma_load on mbar[0]');
    expect(detail).toContain('bytes 8192');
    expect(detail).toContain('iteration 0');
  });
});

describe('kernel header', () => {
  it('names a notebook cell as the user knows it, and an interpreted kernel as such', async () => {
    const kernel = {
      name: 'k',
      target: { kind: 'cuda', arch: 'sm_90a' },
      pass_configs: {},
      source_file: '/tmp/ipykernel_1/2.py',
      source_line: 10,
      source_label: 'In [3], line 10',
      interpreted: true
    };
    const { node } = await renderTrace(makeTrace({ kernel }));
    const header = byTestId(node, 'tw-header').textContent!;
    expect(header).toContain('In [3], line 10');
    expect(header).not.toContain('ipykernel');
    expect(header).toContain('sm_90a (run by the CPU interpreter)');
  });

  it('falls back to the file and line', async () => {
    const kernel = { name: 'k', target: { kind: 'cuda', arch: 'sm_90a' }, pass_configs: {}, source_file: '/a/b.py',
      source_line: 7 };
    const { node } = await renderTrace(makeTrace({ kernel }));
    expect(byTestId(node, 'tw-header').textContent!).toContain('/a/b.py:7');
  });
});

describe('producer extensions to the schema', () => {
  it('shows unknown scalar event keys in the hover details and ignores the rest', async () => {
    const sim = {
      barriers: [{ name: 'mbar', slots: 1, init_count: 1 }],
      iterations: 1,
      events: [
        { seq: 0, barrier: 'mbar', slot: 0, kind: 'wait', parity: 1, iteration: 0, stage: 'body', completes: true, ir_line: 12, nested: { a: 1 } }
      ]
    } as unknown as IBarrierSim;
    const { node } = await renderTrace(makeTrace({ barriers: sim }));
    const detail = all(byTestId(node, 'tw-barrier-timeline'), '[data-testid="tw-barrier-event"] title')[0].textContent!;
    expect(detail).toContain('parity 1');
    expect(detail).toContain('completes true, ir_line 12');
    expect(detail).not.toContain('nested');
  });
});

describe('shared-memory timeline', () => {
  const buffer = (name: string, offset: number, size: number, live: [number, number], kind = 'buffer'): ISmemBuffer => ({
    name, kind, dtype: 'float16', shape: [size / 2], versions: 2, offset, size_bytes: size, align: 8, swizzle: 'none', live
  });

  function bars(node: Element): Record<string, { y: number; h: number; x: number; w: number }> {
    const out: Record<string, { y: number; h: number; x: number; w: number }> = {};
    for (const g of all(byTestId(node, 'tw-smem-timeline'), '[data-testid="tw-smem-buffer"]')) {
      const r = g.querySelector('rect')!;
      const n = (a: string): number => Number(r.getAttribute(a));
      out[g.dataset.name!] = { x: n('x'), w: n('width'), y: n('y'), h: n('height') };
    }
    return out;
  }

  it('draws buffers by offset and live range, to scale when all are large', async () => {
    const smem = { limit_bytes: 232448, total_bytes: 32768, buffers: [buffer('A', 0, 16384, [2, 9]), buffer('B', 16384, 16384, [4, 9])] };
    const { node } = await renderTrace(makeTrace({ smem }));
    const b = bars(node);
    expect(b.A.h).toBeCloseTo(b.B.h);
    expect(b.A.y + b.A.h).toBeCloseTo(b.B.y);
    expect(b.B.x).toBeGreaterThan(b.A.x); // B goes live later
    expect(byTestId(node, 'tw-smem-timeline').textContent).not.toContain('enlarged');
  });

  it('keeps tiny barrier buffers visible and in offset order', async () => {
    const smem = {
      limit_bytes: 232448,
      total_bytes: 32784,
      buffers: [buffer('A', 0, 16384, [2, 9]), buffer('B', 16384, 16384, [2, 9]), buffer('mbar', 32768, 16, [0, 9], 'barrier')]
    };
    const { node } = await renderTrace(makeTrace({ smem }));
    const b = bars(node);
    expect(b.mbar.h).toBeGreaterThanOrEqual(14);
    expect(b.B.y + b.B.h).toBeLessThanOrEqual(b.mbar.y + 1e-6);
    expect(byTestId(node, 'tw-smem-timeline').textContent).toContain('small buffers enlarged');
    expect(all(byTestId(node, 'tw-smem-table'), 'tbody tr')).toHaveLength(3);
  });
});

describe('renderer contract', () => {
  it('renderModel is idempotent', async () => {
    const renderer = await renderTrace(makeTrace());
    const first = renderer.node.innerHTML;
    const view = renderer.traceView;
    await renderer.renderModel({
      data: { [TRACE_MIME_TYPE]: makeTrace() }
    } as never);
    expect(renderer.node.innerHTML).toBe(first);
    expect(all(renderer.node, '[data-testid="tw-trace"]')).toHaveLength(1);
    expect(renderer.traceView).not.toBe(view);
  });

  it('keeps the chosen tab across re-renders', async () => {
    const renderer = await renderTrace(makeTrace());
    byTestId(renderer.node, 'tw-tab-barriers').click();
    await renderer.renderModel({
      data: { [TRACE_MIME_TYPE]: makeTrace() }
    } as never);
    expect(renderer.traceView!.tab).toBe('barriers');
    const shown = all(renderer.node, '.tw-panel').filter(p => !p.hidden);
    expect(shown.map(p => p.dataset.panel)).toEqual(['barriers']);
  });

  it('refuses an unknown schema version', async () => {
    const { node } = await renderTrace({ ...makeTrace(), version: 2 });
    expect(byTestId(node, 'tw-render-error').textContent).toContain(
      'unsupported tileworkbench.trace version 2'
    );
    expect(node.querySelector('[data-testid="tw-stepper"]')).toBeNull();
  });

  it('accepts the document as a JSON string', async () => {
    const { node } = await renderTrace(JSON.stringify(makeTrace()));
    expect(all(node, '[data-testid="tw-pass-item"]')).toHaveLength(4);
  });
});
