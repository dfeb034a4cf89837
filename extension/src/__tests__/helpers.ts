/** Test helpers: small synthetic documents and a render-through-MimeModel helper. */
import * as fs from 'fs';
import * as path from 'path';
import { MimeModel } from '@jupyterlab/rendermime/lib/mimemodel';
import type { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import {
  BENCH_MIME_TYPE,
  BenchRenderer,
  benchRendererFactory,
  TRACE_MIME_TYPE,
  TraceRenderer,
  traceRendererFactory
} from '../index';
import type { IBench, IPassSnapshot, ITrace } from '../types';

const FIXTURES = path.resolve(__dirname, '../../../tests/fixtures');

export function loadFixture<T>(name: string): T {
  return JSON.parse(fs.readFileSync(path.join(FIXTURES, name), 'utf8')) as T;
}

export function pass(
  index: number,
  name: string,
  before: string,
  after: string,
  extra: Partial<IPassSnapshot> = {}
): IPassSnapshot {
  return {
    index,
    name,
    phase: 'tile',
    ir_before: before,
    ir_after: after,
    changed: before !== after,
    time_ms: 0.5,
    error: null,
    ...extra
  };
}

/** IR versions with known line differences between them. */
export const IR = {
  v0: 'def f(A):\n    x = load(A, 0)\n    y = x * 2\n    store(A, y)\n',
  v1: 'def f(A):\n    x = load(A, 0)\n    y = x * 4\n    store(A, y)\n',
  v2: 'def f(A):\n    x = load(A, 0)\n    y = x * 4\n    fence()\n    store(A, y)\n',
  v3: 'def f(A):\n    y = load(A, 0) * 4\n    fence()\n    store(A, y)\n'
};

/** Four passes: changed, unchanged, changed, unchanged. */
export function makeTrace(overrides: Partial<ITrace> = {}): ITrace {
  return {
    schema: 'tileworkbench.trace',
    version: 1,
    kernel: {
      name: 'k',
      target: { kind: 'cuda', arch: 'sm_90a' },
      pass_configs: {},
      source_file: null,
      source_line: null
    },
    passes: [
      pass(0, 'scale', IR.v0, IR.v1),
      pass(1, 'noop_a', IR.v1, IR.v1),
      pass(2, 'add_fence', IR.v1, IR.v2, { phase: 'lower' }),
      pass(3, 'noop_b', IR.v2, IR.v2, { phase: 'memory' })
    ],
    sources: { device: 'int main() {\n  return 0;\n}\n', host: 'def launch():\n    pass\n' },
    smem: null,
    barriers: null,
    tma_descriptors: [],
    resources: { registers: null, spills_bytes: null, smem_bytes: null, threads: 128, grid: [1, 1, 1] },
    findings: [],
    ...overrides
  };
}

export async function renderTrace(data: unknown, mimeType = TRACE_MIME_TYPE): Promise<TraceRenderer> {
  // Only mimeType is read by our renderers; the rest of the options is Lab plumbing.
  const renderer = traceRendererFactory.createRenderer({
    mimeType
  } as IRenderMime.IRendererOptions) as TraceRenderer;
  document.body.appendChild(renderer.node);
  await renderer.renderModel(new MimeModel({ data: { [mimeType]: data as never } }));
  return renderer;
}

export async function renderBenchDoc(data: IBench | unknown, mimeType = BENCH_MIME_TYPE): Promise<BenchRenderer> {
  const renderer = benchRendererFactory.createRenderer({
    mimeType
  } as IRenderMime.IRendererOptions) as BenchRenderer;
  document.body.appendChild(renderer.node);
  await renderer.renderModel(new MimeModel({ data: { [mimeType]: data as never } }));
  return renderer;
}

export function all(root: Element, selector: string): HTMLElement[] {
  return Array.from(root.querySelectorAll<HTMLElement>(selector));
}

export function byTestId(root: Element, id: string): HTMLElement {
  const el = root.querySelector<HTMLElement>(`[data-testid="${id}"]`);
  if (!el) {
    throw new Error(`no element with data-testid=${id}`);
  }
  return el;
}

export function press(target: Element, key: string): void {
  target.dispatchEvent(new KeyboardEvent('keydown', { key, bubbles: true, cancelable: true }));
}

/** Text of a rendered code listing without its line-number gutter. */
export function codeText(el: Element): string {
  return (
    all(el, '.tw-code-text')
      .map(line => line.textContent)
      .join('\n') + '\n'
  );
}
