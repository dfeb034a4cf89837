/**
 * A details line under a chart that shows what the pointer is over.
 * SVG `<title>` tooltips are kept as well; this line also works where native
 * tooltips are slow or absent (touch, screenshots, screen readers via aria-live).
 */
import { h } from '../dom';

export class HoverDetail {
  readonly node: HTMLElement;
  private readonly placeholder: string;

  constructor(placeholder: string) {
    this.placeholder = placeholder;
    this.node = h(
      'div',
      { class: 'tw-hover-detail', 'data-testid': 'tw-hover-detail', 'aria-live': 'polite' },
      placeholder
    );
  }

  /** Show `text` while the pointer is over `target`. */
  bind(target: Element, text: string): void {
    target.addEventListener('mouseenter', () => {
      this.node.textContent = text;
      this.node.classList.add('tw-active');
    });
    target.addEventListener('mouseleave', () => {
      this.node.textContent = this.placeholder;
      this.node.classList.remove('tw-active');
    });
  }
}
