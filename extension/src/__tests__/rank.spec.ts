import type * as RenderMime from '@jupyterlab/rendermime';
import { benchExtension, BENCH_MIME_TYPE, traceExtension, TRACE_MIME_TYPE } from '../index';

let rendermime: typeof RenderMime;

beforeAll(() => {
  // Loading JupyterLab's registry pulls in its UI packages, which warn about
  // browser APIs jsdom lacks (clipboard); those warnings are not ours.
  const warn = jest.spyOn(console, 'warn').mockImplementation(() => undefined);
  rendermime = require('@jupyterlab/rendermime');
  warn.mockRestore();
});

describe('mime ranking', () => {
  it.each([
    ['trace', traceExtension, TRACE_MIME_TYPE],
    ['bench', benchExtension, BENCH_MIME_TYPE]
  ])('JupyterLab prefers the %s view over the HTML and text fallbacks', (_, ext, mime) => {
    const registry = new rendermime.RenderMimeRegistry({
      initialFactories: rendermime.standardRendererFactories
    });
    registry.addFactory(ext.rendererFactory, ext.rank);
    // The Python package sends the document with text/html and text/plain fallbacks.
    const bundle = { [mime]: {}, 'text/html': '<b>fallback</b>', 'text/plain': 'fallback' };
    expect(registry.preferredMimeType(bundle, 'any')).toBe(mime);
    expect(registry.preferredMimeType(bundle, 'ensure')).toBe(mime);
  });
});
