/**
 * Generated sources: the device CUDA C++ and the host Python launcher, plus a
 * diff against a second kernel when the bundle carries `compare`
 * (e.g. the same GEMM with 2 vs 3 pipeline stages).
 */
import type { ITrace } from '../types';
import { h, segmented } from '../dom';
import { renderCode } from './codeview';
import { DiffMode, renderDiff } from './diffview';

type SourceKind = 'device' | 'host';
type SourceTab = SourceKind | 'compare';

const SOURCE_LABEL: Record<SourceKind, string> = {
  device: 'Device (CUDA)',
  host: 'Host launcher (Python)'
};

/** Where the generated CUDA's kernel starts, after the inlined tileworkbench headers. */
export const KERNEL_MARKER = '// ---- kernel ----';

/**
 * The device source as [headers, kernel, first line of the kernel], or null when it has no
 * headers before a kernel marker. The headers are hundreds of lines the user rarely reads.
 */
export function splitHeaders(text: string): [string, string, number] | null {
  const at = text.indexOf(KERNEL_MARKER);
  if (at <= 0) {
    return null;
  }
  const headers = text.slice(0, at);
  return [headers, text.slice(at), headers.split('\n').length];
}

/** Why a source is missing: the first failed pass stopped lowering before codegen. */
function missingMessage(trace: ITrace, kind: SourceKind): string {
  const failed = trace.passes.find(pass => pass.error);
  return failed
    ? `No ${kind} source: compilation stopped in pass "${failed.name}".`
    : `No ${kind} source was generated.`;
}

export class SourceView {
  readonly node: HTMLElement;
  private readonly trace: ITrace;
  private readonly body: HTMLElement;
  private tab: SourceTab = 'device';
  private compareKind: SourceKind = 'device';
  private compareMode: DiffMode = 'unified';

  constructor(trace: ITrace) {
    this.trace = trace;
    this.body = h('div', { class: 'tw-source-body' });
    const tabs = [
      { key: 'device', label: SOURCE_LABEL.device, testid: 'tw-source-tab-device' },
      { key: 'host', label: SOURCE_LABEL.host, testid: 'tw-source-tab-host' }
    ];
    if (trace.compare) {
      tabs.push({ key: 'compare', label: `Diff vs ${trace.compare.label}`, testid: 'tw-source-tab-compare' });
    }
    this.node = h(
      'div',
      { class: 'tw-source', 'data-testid': 'tw-source' },
      segmented({ class: 'tw-segmented' }, tabs, this.tab, key => this.show(key as SourceTab)),
      this.body
    );
    this.render();
  }

  show(tab: SourceTab): void {
    this.tab = tab;
    this.render();
  }

  private render(): void {
    this.body.textContent = '';
    if (this.tab === 'compare') {
      this.body.appendChild(this.renderCompare());
      return;
    }
    const text = this.trace.sources[this.tab];
    const parts = this.tab === 'device' && text ? splitHeaders(text) : null;
    if (parts) {
      // the kernel first; the inlined headers folded after it, keeping their line numbers
      const [headers, kernel, first] = parts;
      this.body.appendChild(
        renderCode(kernel, { testid: 'tw-source-code', attrs: { 'data-source': 'device' }, firstLine: first })
      );
      this.body.appendChild(
        h(
          'details',
          { class: 'tw-source-headers', 'data-testid': 'tw-source-headers' },
          h('summary', {}, `Inlined tileworkbench headers (lines 1-${first - 1})`),
          renderCode(headers, { testid: 'tw-source-headers-code' })
        )
      );
      return;
    }
    this.body.appendChild(
      renderCode(text, {
        testid: 'tw-source-code',
        attrs: { 'data-source': this.tab },
        emptyMessage: missingMessage(this.trace, this.tab)
      })
    );
  }

  private renderCompare(): HTMLElement {
    const compare = this.trace.compare!;
    const diffBox = h('div', { class: 'tw-compare-diff' });
    const redraw = (): void => {
      diffBox.textContent = '';
      diffBox.appendChild(
        renderDiff(compare.trace.sources[this.compareKind], this.trace.sources[this.compareKind], {
          mode: this.compareMode,
          labels: [compare.label, this.trace.kernel.name],
          testid: 'tw-source-diff'
        })
      );
    };
    redraw();
    return h(
      'div',
      { class: 'tw-compare' },
      h(
        'div',
        { class: 'tw-toolbar' },
        segmented(
          { class: 'tw-segmented' },
          [
            { key: 'device', label: 'Device', testid: 'tw-compare-device' },
            { key: 'host', label: 'Host', testid: 'tw-compare-host' }
          ],
          this.compareKind,
          key => {
            this.compareKind = key as SourceKind;
            redraw();
          }
        ),
        segmented(
          { class: 'tw-segmented' },
          [
            { key: 'unified', label: 'Unified', testid: 'tw-compare-unified' },
            { key: 'split', label: 'Side by side', testid: 'tw-compare-split' }
          ],
          this.compareMode,
          key => {
            this.compareMode = key as DiffMode;
            redraw();
          }
        )
      ),
      diffBox
    );
  }
}
