/** The whole trace view: kernel header plus one tab per aspect of the compile. */
import type { ITrace } from '../types';
import { h, segmented } from '../dom';
import { renderBarriers } from './barriers';
import { renderFindings, renderHeader, renderTma } from './details';
import { renderMeasured } from './measured';
import { renderSmem } from './smem';
import { SourceView } from './source';
import { PassStepper } from './stepper';

export type TraceTab = 'passes' | 'source' | 'smem' | 'barriers' | 'timeline' | 'tma' | 'findings';

export class TraceView {
  readonly node: HTMLElement;
  readonly stepper: PassStepper;
  private readonly panels: Map<TraceTab, HTMLElement>;
  private _tab: TraceTab;

  constructor(trace: ITrace, tab: TraceTab = 'passes') {
    this.stepper = new PassStepper(trace.passes);
    // Every panel is built up front: traces are small, and hidden panels keep
    // their state (selected pass, source tab) when the user switches back.
    // The measured timeline (tw.timeline) only exists for kernels that record one.
    const timeline = trace.timeline ?? null;
    this.panels = new Map<TraceTab, HTMLElement>([
      ['passes', this.stepper.node],
      ['source', new SourceView(trace).node],
      ['smem', renderSmem(trace.smem)],
      ['barriers', renderBarriers(trace.barriers, trace.findings)],
      ...(timeline
        ? [['timeline', renderMeasured(timeline, trace.barriers)] as [TraceTab, HTMLElement]]
        : []),
      ['tma', renderTma(trace.tma_descriptors)],
      ['findings', renderFindings(trace.findings)]
    ]);
    // A tab kept from an earlier render may not exist in this trace.
    tab = this.panels.has(tab) ? tab : 'passes';
    this._tab = tab;
    const events = trace.barriers?.events.length ?? 0;
    const tabs = [
      { key: 'passes', label: `Passes (${trace.passes.length})` },
      { key: 'source', label: 'Source' },
      { key: 'smem', label: 'Shared memory' },
      { key: 'barriers', label: `Barriers (${events})` },
      ...(timeline ? [{ key: 'timeline', label: 'Measured timeline' }] : []),
      { key: 'tma', label: `TMA (${trace.tma_descriptors.length})` },
      { key: 'findings', label: `Findings (${trace.findings.length})` }
    ].map(t => ({ ...t, testid: `tw-tab-${t.key}` }));
    const body = h('div', { class: 'tw-panels' });
    this.panels.forEach((panel, key) => {
      body.appendChild(h('div', { class: 'tw-panel', 'data-panel': key }, panel));
    });
    this.node = h(
      'div',
      { class: 'tw-trace', 'data-testid': 'tw-trace' },
      renderHeader(trace),
      segmented({ class: 'tw-segmented tw-tabs' }, tabs, tab, key => this.show(key as TraceTab)),
      body
    );
    this.show(tab);
  }

  get tab(): TraceTab {
    return this._tab;
  }

  show(tab: TraceTab): void {
    this._tab = tab;
    this.node.querySelectorAll<HTMLElement>('.tw-panel').forEach(panel => {
      panel.hidden = panel.dataset.panel !== tab;
    });
    this.node.querySelectorAll<HTMLElement>('.tw-tabs .tw-seg-button').forEach(button => {
      const on = button.dataset.key === tab;
      button.classList.toggle('tw-active', on);
      button.setAttribute('aria-selected', String(on));
    });
  }

  dispose(): void {
    this.stepper.dispose();
  }
}
