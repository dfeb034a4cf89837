import {
  BENCH_MIME_TYPE,
  benchExtension,
  LEGACY_BENCH_MIME_TYPE,
  LEGACY_TRACE_MIME_TYPE,
  TRACE_MIME_TYPE,
  traceExtension
} from '../index';
import { loadFixture, makeTrace, renderBenchDoc, renderTrace } from './helpers';

describe('versioned MIME types', () => {
  it('are versioned and registered beside the legacy ones', () => {
    expect(TRACE_MIME_TYPE).toBe('application/vnd.tileworkbench.trace.v1+json');
    expect(BENCH_MIME_TYPE).toBe('application/vnd.tileworkbench.bench.v1+json');
    expect(traceExtension.rendererFactory.mimeTypes).toEqual([TRACE_MIME_TYPE, LEGACY_TRACE_MIME_TYPE]);
    expect(benchExtension.rendererFactory.mimeTypes).toEqual([BENCH_MIME_TYPE, LEGACY_BENCH_MIME_TYPE]);
  });

  it('render a current trace without a note', async () => {
    const renderer = await renderTrace(makeTrace());
    expect(renderer.node.querySelector('[data-testid="tw-legacy-note"]')).toBeNull();
    expect(renderer.traceView).not.toBeNull();
    renderer.dispose();
  });

  it('render a trace saved under the unversioned type, with a note saying it is older', async () => {
    const renderer = await renderTrace(makeTrace(), LEGACY_TRACE_MIME_TYPE);
    const note = renderer.node.querySelector('[data-testid="tw-legacy-note"]');
    expect(note?.textContent).toContain('saved by an older tileworkbench');
    expect(renderer.traceView).not.toBeNull(); // the view itself still renders
    renderer.dispose();
  });

  it('render a legacy bench record with the note too', async () => {
    const renderer = await renderBenchDoc(loadFixture('bench_sample.json'), LEGACY_BENCH_MIME_TYPE);
    expect(renderer.node.querySelector('[data-testid="tw-legacy-note"]')).not.toBeNull();
    expect(renderer.node.querySelector('[data-testid="tw-render-error"]')).toBeNull();
  });
});
