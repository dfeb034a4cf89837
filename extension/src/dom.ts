/**
 * Minimal DOM builders. All text goes through textContent / text nodes, never
 * innerHTML: trace text (IR, CUDA source) is arbitrary and outputs may be
 * untrusted, so nothing from the document is ever parsed as markup.
 */

export type Child = Node | string | number | null | undefined | false;
export type Attrs = Record<string, string | number | boolean | null | undefined>;

const SVG_NS = 'http://www.w3.org/2000/svg';

function apply(el: Element, attrs: Attrs, children: Child[]): void {
  for (const [key, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) {
      continue;
    }
    el.setAttribute(key, value === true ? '' : String(value));
  }
  for (const child of children) {
    if (child === null || child === undefined || child === false) {
      continue;
    }
    el.appendChild(typeof child === 'object' ? child : document.createTextNode(String(child)));
  }
}

/** Create an HTML element: `h('div', {class: 'x'}, 'text', otherNode)`. */
export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Attrs = {},
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  apply(el, attrs, children);
  return el;
}

/** Create an SVG element in the SVG namespace. */
export function s(tag: string, attrs: Attrs = {}, ...children: Child[]): SVGElement {
  const el = document.createElementNS(SVG_NS, tag) as SVGElement;
  apply(el, attrs, children);
  return el;
}

/** An SVG `<title>`: browsers show it as the native hover tooltip. */
export function svgTitle(text: string): SVGElement {
  return s('title', {}, text);
}

export function formatBytes(bytes: number | null | undefined): string {
  if (bytes === null || bytes === undefined) {
    return '—';
  }
  if (bytes >= 1024 && bytes % 1024 === 0) {
    return `${bytes / 1024} KiB`;
  }
  if (bytes >= 1024) {
    return `${(bytes / 1024).toFixed(1)} KiB`;
  }
  return `${bytes} B`;
}

export function formatValue(value: unknown): string {
  if (value === null || value === undefined) {
    return '—';
  }
  if (Array.isArray(value)) {
    return `[${value.map(formatValue).join(', ')}]`;
  }
  if (typeof value === 'object') {
    return JSON.stringify(value);
  }
  return String(value);
}

/** A simple table: header labels plus rows of cells. */
export function table(
  attrs: Attrs,
  header: string[],
  rows: Child[][],
  rowAttrs: (index: number) => Attrs = () => ({})
): HTMLTableElement {
  return h(
    'table',
    { class: 'tw-table', ...attrs },
    h('thead', {}, h('tr', {}, ...header.map(label => h('th', {}, label)))),
    h('tbody', {}, ...rows.map((cells, i) => h('tr', rowAttrs(i), ...cells.map(cell => h('td', {}, cell)))))
  );
}

/**
 * A row of toggle buttons where one is active. Returns the bar; `onSelect`
 * receives the chosen key. Used for view tabs and diff modes.
 */
export function segmented(
  attrs: Attrs,
  options: { key: string; label: string; testid?: string }[],
  active: string,
  onSelect: (key: string) => void
): HTMLElement {
  const bar = h('div', { class: 'tw-segmented', role: 'tablist', ...attrs });
  const buttons = options.map(option => {
    const button = h(
      'button',
      {
        type: 'button',
        class: 'tw-seg-button',
        role: 'tab',
        'data-key': option.key,
        'data-testid': option.testid
      },
      option.label
    );
    button.addEventListener('click', () => {
      setActive(option.key);
      onSelect(option.key);
    });
    return button;
  });
  const setActive = (key: string): void => {
    for (const button of buttons) {
      const on = button.dataset.key === key;
      button.classList.toggle('tw-active', on);
      button.setAttribute('aria-selected', String(on));
    }
  };
  setActive(active);
  bar.append(...buttons);
  return bar;
}
