import type { IBench } from '../types';
import { all, byTestId, loadFixture, renderBenchDoc } from './helpers';

afterEach(() => {
  document.body.textContent = '';
});

const row = (M: number, tflops: number, cublas: number | null, extra = {}) => ({
  suite: 'gemm',
  kernel: 'tileworkbench',
  dtype: 'float16',
  M,
  N: M,
  K: M,
  ms: 1,
  tflops,
  cublas_tflops: cublas,
  ratio: cublas ? tflops / cublas : null,
  correct: true,
  rel_err: 1e-4,
  ...extra
});

function bench(rows: unknown[]): IBench {
  return { schema: 'tileworkbench.bench', version: 1, machine: { gpu: 'NVIDIA H200' }, rows } as IBench;
}

describe('bench plot', () => {
  it('draws two series (ours and cuBLAS) with a point per row, ordered by size', async () => {
    const { node } = await renderBenchDoc(
      bench([row(4096, 600, 700), row(1024, 150, 200), row(2048, 380, 450)])
    );
    const plot = byTestId(node, 'tw-bench-plot');
    const series = all(plot, '.tw-series');
    expect(series.map(s => s.dataset.testid)).toEqual(['tw-series-ours', 'tw-series-cublas']);
    for (const s of series) {
      expect(all(s, 'circle')).toHaveLength(3);
    }
    const titles = all(byTestId(plot, 'tw-series-ours'), 'circle title').map(t => t.textContent);
    expect(titles[0]).toContain('1024×1024×1024: 150.0');
    expect(titles[2]).toContain('4096×4096×4096: 600.0');
    // higher TFLOP/s is drawn higher (smaller y)
    const ys = all(byTestId(plot, 'tw-series-ours'), 'circle').map(c => Number(c.getAttribute('cy')));
    expect(ys[0]).toBeGreaterThan(ys[2]);
  });

  it('draws each kernel as a series of its own, with a legend, so spec kernels do not zigzag', async () => {
    const spec = (M: number, tflops: number) => row(M, tflops, M === 4096 ? 700 : 200, { kernel: 'matmul_tma_copy s2' });
    const { node } = await renderBenchDoc(
      bench([row(1024, 150, 200), row(4096, 700, 700), spec(4096, 590), spec(1024, 120), row(2048, 380, 450)])
    );
    const plot = byTestId(node, 'tw-bench-plot');
    const series = all(plot, '.tw-series');
    expect(series.map(s => s.dataset.testid)).toEqual([
      'tw-series-ours',
      'tw-series-kernel-matmul-tma-copy-s2',
      'tw-series-cublas'
    ]);
    expect(all(series[0], 'circle')).toHaveLength(3);
    expect(all(series[1], 'circle')).toHaveLength(2);
    expect(all(series[2], 'circle')).toHaveLength(3); // one cuBLAS point per size, not per row
    // the x axis lists each size once
    const sizes = all(plot, '.tw-axis > text').map(t => t.textContent).filter(t => t!.includes('×'));
    expect(sizes).toEqual(['1024×1024×1024', '2048×2048×2048', '4096×4096×4096']);
    const legend = all(byTestId(plot, 'tw-bench-legend'), '.tw-legend-item').map(i => i.textContent);
    expect(legend).toEqual(['tileworkbench', 'matmul_tma_copy s2', 'cuBLAS']);
  });

  it('switches to the ratio to cuBLAS, with a line at 1x', async () => {
    const { node } = await renderBenchDoc(bench([row(1024, 150, 200), row(2048, 500, 400)]));
    const plot = byTestId(node, 'tw-bench-plot');
    byTestId(plot, 'tw-bench-metric-ratio').click();
    expect(plot.querySelector('svg')!.getAttribute('data-metric')).toBe('ratio');
    expect(plot.querySelector('[data-testid="tw-series-cublas"]')).toBeNull();
    const titles = all(byTestId(plot, 'tw-series-ours'), 'circle title').map(t => t.textContent);
    expect(titles).toEqual(['tileworkbench 1024×1024×1024: 0.750× cuBLAS', 'tileworkbench 2048×2048×2048: 1.250× cuBLAS']);
    const parity = byTestId(plot, 'tw-parity');
    const ys = all(byTestId(plot, 'tw-series-ours'), 'circle').map(c => Number(c.getAttribute('cy')));
    expect(ys[0]).toBeGreaterThan(Number(parity.getAttribute('y1'))); // 0.75 below the 1x line
    expect(ys[1]).toBeLessThan(Number(parity.getAttribute('y1')));
    byTestId(plot, 'tw-bench-metric-tflops').click();
    expect(all(byTestId(plot, 'tw-series-cublas'), 'circle')).toHaveLength(2);
  });

  it('lists every row with its recorded ratio', async () => {
    const { node } = await renderBenchDoc(bench([row(1024, 150, 200), row(2048, 500, 400)]));
    const cells = all(byTestId(node, 'tw-bench-table'), 'tbody tr').map(tr => tr.children[7].textContent);
    expect(cells).toEqual(['0.75×', '1.25×']);
  });

  it('skips missing cuBLAS values and marks incorrect rows', async () => {
    const { node } = await renderBenchDoc(
      bench([row(1024, 150, null), row(2048, 400, 500, { correct: false })])
    );
    expect(all(byTestId(node, 'tw-series-cublas'), 'circle')).toHaveLength(1);
    expect(all(byTestId(node, 'tw-series-ours'), 'circle.tw-incorrect')).toHaveLength(1);
    expect(all(byTestId(node, 'tw-bench-table'), 'tr.tw-incorrect')).toHaveLength(1);
  });

  it('shows a failed row with its error and no point, and an unfinished run', async () => {
    const doc = { ...bench([row(1024, 150, 200), row(2048, 0, 450, { tflops: null, error: 'CompileError: smem' })]), complete: false };
    const { node } = await renderBenchDoc(doc);
    expect(all(byTestId(node, 'tw-series-ours'), 'circle')).toHaveLength(1);
    const failed = all(byTestId(node, 'tw-bench-table'), 'tr.tw-incorrect');
    expect(failed).toHaveLength(1);
    expect(failed[0].textContent).toContain('CompileError: smem');
    expect(node.textContent).toContain('Run still in progress.');
  });

  it('uses a row label for the size axis when given', async () => {
    const { node } = await renderBenchDoc(bench([row(1024, 150, 200, { label: 'square-1k' })]));
    expect(byTestId(node, 'tw-bench-plot').textContent).toContain('square-1k');
  });

  it('renders the sample fixture: one point per row in each series', async () => {
    const doc = loadFixture<IBench>('bench_sample.json');
    const { node } = await renderBenchDoc(doc);
    const points = all(node, '[data-testid="tw-series-ours"] circle');
    expect(points).toHaveLength(doc.rows.filter(r => typeof r.tflops === 'number').length);
    expect(all(byTestId(node, 'tw-bench-table'), 'tbody tr')).toHaveLength(doc.rows.length);
  });

  it('refuses a wrong schema', async () => {
    const { node } = await renderBenchDoc({ schema: 'tileworkbench.trace', version: 1, rows: [] });
    expect(byTestId(node, 'tw-render-error').textContent).toContain('expected schema "tileworkbench.bench"');
  });
});
