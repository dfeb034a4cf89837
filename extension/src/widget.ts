/**
 * Lumino widgets that JupyterLab's rendermime instantiates for our MIME types.
 *
 * `renderModel` may be called again on the same widget (output updated in
 * place, e.g. `display(..., update=True)`), so it always clears the node and
 * disposes the previous view before rendering: the result is the same however
 * often it runs.
 */
import type { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import { Widget } from '@lumino/widgets';
import { h } from './dom';
import { isLegacy, LEGACY_NOTE } from './mime';
import { parseBench, parseTrace } from './schema';
import { renderBench } from './views/bench';
import { TraceTab, TraceView } from './views/trace';

/** The note shown above an output saved by an older tileworkbench (unversioned MIME type). */
function legacyNote(): HTMLElement {
  return h('div', { class: 'tw-legacy-note', 'data-testid': 'tw-legacy-note' }, LEGACY_NOTE);
}

function errorBox(message: string): HTMLElement {
  return h(
    'div',
    { class: 'tw-error tw-render-error', 'data-testid': 'tw-render-error' },
    `tileworkbench: ${message}`
  );
}

/** Renders a compile trace (`TRACE_MIME_TYPE`, or the legacy type with a note). */
export class TraceRenderer extends Widget implements IRenderMime.IRenderer {
  private readonly mimeType: string;
  private view: TraceView | null = null;
  /** Tab shown last, kept across re-renders of an updated output. */
  private lastTab: TraceTab = 'passes';

  constructor(options: IRenderMime.IRendererOptions) {
    super();
    this.mimeType = options.mimeType;
    this.addClass('tw-root');
    this.addClass('tw-trace-renderer');
  }

  /** The current view (null before the first render or after an error). */
  get traceView(): TraceView | null {
    return this.view;
  }

  renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    this.clear();
    if (isLegacy(this.mimeType)) {
      this.node.appendChild(legacyNote());
    }
    const parsed = parseTrace(model.data[this.mimeType]);
    if (!parsed.ok) {
      this.node.appendChild(errorBox(parsed.error));
      return Promise.resolve();
    }
    this.view = new TraceView(parsed.doc, this.lastTab);
    this.node.appendChild(this.view.node);
    return Promise.resolve();
  }

  dispose(): void {
    if (!this.isDisposed) {
      this.clear();
    }
    super.dispose();
  }

  private clear(): void {
    if (this.view) {
      this.lastTab = this.view.tab;
      this.view.dispose();
      this.view = null;
    }
    this.node.textContent = '';
  }
}

/** Renders a benchmark record (`BENCH_MIME_TYPE`, or the legacy type with a note). */
export class BenchRenderer extends Widget implements IRenderMime.IRenderer {
  private readonly mimeType: string;

  constructor(options: IRenderMime.IRendererOptions) {
    super();
    this.mimeType = options.mimeType;
    this.addClass('tw-root');
    this.addClass('tw-bench-renderer');
  }

  renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    this.node.textContent = '';
    if (isLegacy(this.mimeType)) {
      this.node.appendChild(legacyNote());
    }
    const parsed = parseBench(model.data[this.mimeType]);
    this.node.appendChild(parsed.ok ? renderBench(parsed.doc) : errorBox(parsed.error));
    return Promise.resolve();
  }
}
