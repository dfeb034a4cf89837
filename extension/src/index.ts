/**
 * tileworkbench JupyterLab mime-renderer extension.
 *
 * Renders the compile trace and benchmark documents defined in
 * docs/trace-schema.md. It reads only those documents and recomputes no
 * compiler facts.
 */
import type { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import { BENCH_MIME_TYPE, LEGACY_BENCH_MIME_TYPE, LEGACY_TRACE_MIME_TYPE, TRACE_MIME_TYPE } from './mime';
import { BenchRenderer, TraceRenderer } from './widget';

export { BenchRenderer, TraceRenderer } from './widget';
export { parseBench, parseTrace } from './schema';
export * from './types';
export * from './mime';

/**
 * Outputs are rendered with DOM APIs only (no HTML injection, no scripts), so
 * the factories are safe for untrusted notebooks. Rank 0 puts them ahead of
 * JupyterLab's standard renderers (text/html is 50, text/plain 120): the Python
 * package sends an HTML report and a text line as fallbacks in the same bundle.
 */
export const traceRendererFactory: IRenderMime.IRendererFactory = {
  safe: true,
  mimeTypes: [TRACE_MIME_TYPE, LEGACY_TRACE_MIME_TYPE],
  defaultRank: 0,
  createRenderer: options => new TraceRenderer(options)
};

export const benchRendererFactory: IRenderMime.IRendererFactory = {
  safe: true,
  mimeTypes: [BENCH_MIME_TYPE, LEGACY_BENCH_MIME_TYPE],
  defaultRank: 0,
  createRenderer: options => new BenchRenderer(options)
};

export const traceExtension: IRenderMime.IExtension = {
  id: 'tileworkbench:trace',
  description: 'Renders tileworkbench compile traces (pass stepper, sources, smem and barrier timelines).',
  rendererFactory: traceRendererFactory,
  rank: 0,
  dataType: 'json'
};

export const benchExtension: IRenderMime.IExtension = {
  id: 'tileworkbench:bench',
  description: 'Renders tileworkbench benchmark records (TFLOP/s vs size, ours vs cuBLAS).',
  rendererFactory: benchRendererFactory,
  rank: 0,
  dataType: 'json'
};

const extensions: IRenderMime.IExtension[] = [traceExtension, benchExtension];

export default extensions;
