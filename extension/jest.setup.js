// jsdom has no DragEvent, but @lumino/dragdrop (pulled in by @lumino/widgets)
// subclasses it when imported. A MouseEvent subclass is enough for our tests.
if (typeof globalThis.DragEvent === 'undefined') {
  globalThis.DragEvent = class DragEvent extends MouseEvent {};
}

// jsdom has no matchMedia; JupyterLab's web components query it at import time.
if (typeof window.matchMedia !== 'function') {
  window.matchMedia = query => ({
    matches: false,
    media: query,
    onchange: null,
    addListener: () => undefined,
    removeListener: () => undefined,
    addEventListener: () => undefined,
    removeEventListener: () => undefined,
    dispatchEvent: () => false
  });
}
