/**
 * The pass stepper: the list of passes as they ran, and for the selected pass
 * its diff against its input and the IR it produced.
 *
 * Keys: j = next pass, k = previous pass (vi-style, as in the notebook).
 */
import type { IPassSnapshot } from '../types';
import { h, segmented } from '../dom';
import { renderCode } from './codeview';
import { DiffMode, renderDiff } from './diffview';

export interface IStepperState {
  selected: number;
  hideUnchanged: boolean;
  diffMode: DiffMode;
  query: string;
}

function passStatus(pass: IPassSnapshot): 'failed' | 'changed' | 'unchanged' {
  if (pass.error) {
    return 'failed';
  }
  return pass.changed ? 'changed' : 'unchanged';
}

function formatMs(ms: number | null): string {
  if (ms === null || ms === undefined) {
    return '';
  }
  return ms >= 100 ? `${ms.toFixed(0)} ms` : `${ms.toFixed(2)} ms`;
}

/** Keys typed into form fields belong to the field, not the stepper. */
function isTextEntry(target: EventTarget | null): boolean {
  return (
    target instanceof HTMLInputElement ||
    target instanceof HTMLTextAreaElement ||
    target instanceof HTMLSelectElement
  );
}

export class PassStepper {
  readonly node: HTMLElement;
  private readonly passes: IPassSnapshot[];
  private readonly state: IStepperState;
  private readonly items: HTMLElement[];
  private readonly detail: HTMLElement;
  private readonly searchCount: HTMLElement;

  constructor(passes: IPassSnapshot[], initial: Partial<IStepperState> = {}) {
    this.passes = passes;
    this.state = {
      selected: 0,
      hideUnchanged: false,
      diffMode: 'unified',
      query: '',
      ...initial
    };
    this.items = passes.map((pass, idx) => this.passItem(pass, idx));
    this.detail = h('div', { class: 'tw-pass-detail', 'data-testid': 'tw-pass-detail' });
    this.searchCount = h('span', { class: 'tw-search-count', 'data-testid': 'tw-search-count' });
    this.node = h(
      'div',
      {
        class: 'tw-stepper',
        'data-testid': 'tw-stepper',
        tabindex: 0,
        // JupyterLab binds J/K to cell navigation in command mode; while focus
        // is inside the stepper the keys must step passes instead.
        'data-lm-suppress-shortcuts': true
      },
      this.toolbar(),
      h(
        'div',
        { class: 'tw-stepper-main' },
        h('ol', { class: 'tw-pass-list', 'data-testid': 'tw-pass-list' }, ...this.items),
        this.detail
      )
    );
    this.node.addEventListener('keydown', this.onKeyDown);
    this.applyFilter();
    this.select(this.state.selected);
  }

  /** Index (into the full pass list) of the selected pass, or -1 when none. */
  get selected(): number {
    return this.state.selected;
  }

  dispose(): void {
    this.node.removeEventListener('keydown', this.onKeyDown);
  }

  /** Passes the list currently shows, as indices into the full list. */
  visibleIndices(): number[] {
    return this.passes
      .map((pass, idx) => ({ pass, idx }))
      .filter(({ pass }) => !this.state.hideUnchanged || pass.changed || !!pass.error)
      .map(({ idx }) => idx);
  }

  select(index: number): void {
    if (this.passes.length === 0) {
      this.state.selected = -1;
      this.renderDetail();
      return;
    }
    this.state.selected = Math.max(0, Math.min(index, this.passes.length - 1));
    this.items.forEach((item, idx) => {
      const on = idx === this.state.selected;
      item.classList.toggle('tw-selected', on);
      item.setAttribute('aria-selected', String(on));
      if (on && typeof item.scrollIntoView === 'function') {
        item.scrollIntoView({ block: 'nearest' });
      }
    });
    this.renderDetail();
  }

  /** Move by `delta` visible passes (j = +1, k = -1), stopping at the ends. */
  step(delta: number): void {
    const visible = this.visibleIndices();
    if (visible.length === 0) {
      return;
    }
    const pos = visible.indexOf(this.state.selected);
    let next: number;
    if (pos >= 0) {
      next = visible[Math.max(0, Math.min(pos + delta, visible.length - 1))];
    } else {
      // The selection is hidden: go to the nearest visible pass in that direction.
      const after = visible.filter(i => (delta > 0 ? i > this.state.selected : i < this.state.selected));
      next = after.length ? (delta > 0 ? after[0] : after[after.length - 1]) : visible[0];
    }
    if (next !== this.state.selected) {
      this.select(next);
    }
  }

  setHideUnchanged(hide: boolean): void {
    this.state.hideUnchanged = hide;
    this.applyFilter();
    const visible = this.visibleIndices();
    if (visible.length && !visible.includes(this.state.selected)) {
      // Keep the selection visible: the next shown pass, else the last one.
      this.select(visible.find(i => i > this.state.selected) ?? visible[visible.length - 1]);
    }
  }

  setQuery(query: string): void {
    this.state.query = query;
    this.renderDetail();
  }

  setDiffMode(mode: DiffMode): void {
    this.state.diffMode = mode;
    this.renderDetail();
  }

  private onKeyDown = (event: KeyboardEvent): void => {
    if (isTextEntry(event.target) || event.ctrlKey || event.metaKey || event.altKey) {
      return;
    }
    const delta = event.key === 'j' ? 1 : event.key === 'k' ? -1 : 0;
    if (delta !== 0) {
      event.preventDefault();
      event.stopPropagation();
      this.step(delta);
    }
  };

  private toolbar(): HTMLElement {
    const prev = h(
      'button',
      { type: 'button', class: 'tw-button', 'data-testid': 'tw-prev', title: 'Previous pass (k)' },
      '◀ prev'
    );
    const next = h(
      'button',
      { type: 'button', class: 'tw-button', 'data-testid': 'tw-next', title: 'Next pass (j)' },
      'next ▶'
    );
    prev.addEventListener('click', () => this.step(-1));
    next.addEventListener('click', () => this.step(1));

    const hide = h('input', { type: 'checkbox', 'data-testid': 'tw-hide-unchanged' });
    hide.checked = this.state.hideUnchanged;
    hide.addEventListener('change', () => this.setHideUnchanged(hide.checked));

    const search = h('input', {
      type: 'search',
      class: 'tw-search',
      placeholder: 'Search IR…',
      'data-testid': 'tw-search',
      value: this.state.query
    });
    search.addEventListener('input', () => this.setQuery(search.value));

    const modes = segmented(
      { class: 'tw-segmented tw-diff-mode' },
      [
        { key: 'unified', label: 'Unified', testid: 'tw-diff-mode-unified' },
        { key: 'split', label: 'Side by side', testid: 'tw-diff-mode-split' }
      ],
      this.state.diffMode,
      key => this.setDiffMode(key as DiffMode)
    );

    return h(
      'div',
      { class: 'tw-toolbar' },
      prev,
      next,
      h('span', { class: 'tw-hint' }, 'j / k'),
      h('label', { class: 'tw-check' }, hide, ' hide unchanged'),
      modes,
      search,
      this.searchCount
    );
  }

  private passItem(pass: IPassSnapshot, idx: number): HTMLElement {
    const status = passStatus(pass);
    const item = h(
      'li',
      {
        class: `tw-pass-item tw-${status}`,
        'data-testid': 'tw-pass-item',
        'data-index': idx,
        'data-status': status,
        'data-phase': pass.phase,
        role: 'option',
        title: pass.error ?? `${pass.name} (${pass.phase}, ${status})`
      },
      h('span', { class: 'tw-pass-index' }, pass.index ?? idx),
      h('span', { class: `tw-phase tw-phase-${pass.phase}` }, pass.phase),
      h('span', { class: 'tw-pass-name' }, pass.name),
      h('span', { class: 'tw-pass-status' }, status === 'changed' ? '●' : status === 'failed' ? '✖' : '○'),
      h('span', { class: 'tw-pass-time' }, formatMs(pass.time_ms))
    );
    item.addEventListener('click', () => this.select(idx));
    return item;
  }

  private applyFilter(): void {
    const visible = new Set(this.visibleIndices());
    this.items.forEach((item, idx) => {
      item.hidden = !visible.has(idx);
    });
    this.node.classList.toggle('tw-hiding-unchanged', this.state.hideUnchanged);
  }

  private renderDetail(): void {
    this.detail.textContent = '';
    const pass = this.passes[this.state.selected];
    if (!pass) {
      this.detail.appendChild(h('div', { class: 'tw-empty' }, 'This trace has no passes.'));
      this.searchCount.textContent = '';
      return;
    }
    const status = passStatus(pass);
    const ir = renderCode(pass.ir_after, { testid: 'tw-ir', query: this.state.query });
    const matches = Number(ir.dataset.matches ?? 0);
    this.searchCount.textContent = this.state.query ? `${matches} match${matches === 1 ? '' : 'es'}` : '';
    this.detail.dataset.index = String(this.state.selected);
    this.detail.append(
      h(
        'div',
        { class: 'tw-pass-header' },
        h(
          'span',
          { class: 'tw-pass-title', 'data-testid': 'tw-pass-title' },
          `#${pass.index ?? this.state.selected} ${pass.name}`
        ),
        h('span', { class: `tw-phase tw-phase-${pass.phase}` }, pass.phase),
        h('span', { class: `tw-badge tw-${status}` }, status),
        h('span', { class: 'tw-pass-time' }, formatMs(pass.time_ms))
      ),
      pass.error
        ? h('div', { class: 'tw-error tw-pass-error', 'data-testid': 'tw-pass-error' }, pass.error)
        : '',
      h('div', { class: 'tw-section-title' }, 'Change made by this pass'),
      renderDiff(pass.ir_before, pass.ir_after, {
        mode: this.state.diffMode,
        labels: ['IR before', `after ${pass.name}`]
      }),
      h('div', { class: 'tw-section-title' }, 'IR after this pass'),
      ir
    );
    if (this.state.query) {
      const first = ir.querySelector('mark.tw-match');
      if (first && typeof first.scrollIntoView === 'function') {
        first.scrollIntoView({ block: 'nearest' });
      }
    }
  }
}
