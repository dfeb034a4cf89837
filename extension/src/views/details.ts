/** Kernel header, TMA descriptor table and findings list. */
import type { IFinding, IThreadIndexReread, ITmaDescriptor, ITrace, IWarpSpecialization } from '../types';
import { formatBytes, formatValue, h, table } from '../dom';

/** What the compiler made of the pipelined loop: a producer warpgroup beside the consumers, or why not. */
export function describeSplit(split: IWarpSpecialization): string {
  if (!split.applied) {
    return `one role: ${split.reason ?? '?'}`;
  }
  const shared = split.shares_bytes ? '; shared tiles placed by lifetime' : '';
  const consumers = `${split.consumer_threads ?? '?'} consumer threads`;
  return `a producer warpgroup and ${consumers}, ${split.stages ?? '?'} stage(s)${shared}`;
}

/** What the compile of a spilling kernel's second form (its loops reading the thread index again) came to. */
export function describeReread(reread: IThreadIndexReread): string {
  if (reread.error) {
    return `not compiled: ${reread.error}`;
  }
  const spills = `spills ${reread.spills_bytes_without ?? '?'} -> ${reread.spills_bytes ?? '?'} B`;
  const registers = `registers ${reread.registers_without ?? '?'} -> ${reread.registers ?? '?'}`;
  return `${reread.kept ? 'kept' : 'not kept'} (${spills}, ${registers})`;
}

export function renderHeader(trace: ITrace): HTMLElement {
  const { kernel, resources, passes, findings } = trace;
  const failed = passes.find(pass => pass.error);
  const errors = findings.filter(f => f.severity === 'error').length;
  const chip = (label: string, value: unknown): HTMLElement =>
    h('span', { class: 'tw-chip' }, h('span', { class: 'tw-chip-label' }, label), formatValue(value));
  const where =
    kernel.source_label ||
    (kernel.source_file ? `${kernel.source_file}${kernel.source_line ? `:${kernel.source_line}` : ''}` : null);
  return h(
    'div',
    { class: 'tw-header', 'data-testid': 'tw-header' },
    h(
      'div',
      { class: 'tw-title-row' },
      h('span', { class: 'tw-kernel-name', 'data-testid': 'tw-kernel-name' }, kernel.name),
      h(
        'span',
        { class: 'tw-target' },
        `${kernel.target?.kind ?? '?'} ${kernel.target?.arch ?? ''}` +
          (kernel.interpreted ? ' (run by the CPU interpreter)' : '')
      ),
      where ? h('span', { class: 'tw-where' }, where) : null,
      failed
        ? h('span', { class: 'tw-badge tw-failed' }, `failed in ${failed.name}`)
        : h('span', { class: 'tw-badge tw-ok' }, `${passes.length} passes`),
      findings.length
        ? h(
            'span',
            { class: `tw-badge ${errors ? 'tw-failed' : 'tw-warning'}` },
            `${findings.length} finding(s)`
          )
        : null
    ),
    h(
      'div',
      { class: 'tw-chips' },
      chip('threads', resources.threads),
      chip('grid', resources.grid),
      chip('smem', resources.smem_bytes === null ? null : formatBytes(resources.smem_bytes)),
      chip('registers', resources.registers),
      chip('spills', resources.spills_bytes === null ? null : formatBytes(resources.spills_bytes)),
      resources.thread_index_reread ? chip('index read again', describeReread(resources.thread_index_reread)) : null,
      resources.warp_specialization ? chip('warp specialisation', describeSplit(resources.warp_specialization)) : null,
      ...Object.entries(kernel.pass_configs ?? {}).map(([k, v]) => chip(k, v))
    )
  );
}

/** CUtensorMapSwizzle codes, named as the shared-memory tab names a tile's swizzle. */
const SWIZZLE_NAMES: Record<string, string> = { 0: 'none', 1: '32B', 2: '64B', 3: '128B' };

export function swizzleName(code: string | number): string {
  const name = SWIZZLE_NAMES[String(code)];
  return name === undefined ? String(code) : `${name} (${code})`;
}

export function renderTma(descriptors: ITmaDescriptor[]): HTMLElement {
  const root = h('div', { class: 'tw-tma', 'data-testid': 'tw-tma' });
  if (!descriptors.length) {
    root.appendChild(h('div', { class: 'tw-empty' }, 'No TMA descriptors.'));
    return root;
  }
  root.appendChild(
    table(
      {},
      [
        'name',
        'buffer',
        'data type',
        'rank',
        'global dims',
        'global strides (B)',
        'box',
        'elem strides',
        'interleave',
        'swizzle',
        'L2 promo',
        'OOB fill'
      ],
      descriptors.map(d => [
        d.name,
        d.buffer,
        `${d.data_type_name} (${d.data_type})`,
        d.rank,
        formatValue(d.global_dims),
        formatValue(d.global_strides_bytes),
        formatValue(d.box_dims),
        formatValue(d.element_strides),
        d.interleave,
        swizzleName(d.swizzle),
        d.l2_promotion,
        d.oob_fill
      ])
    )
  );
  return root;
}

export function renderFindings(findings: IFinding[]): HTMLElement {
  const root = h('div', { class: 'tw-findings', 'data-testid': 'tw-findings' });
  if (!findings.length) {
    root.appendChild(
      h('div', { class: 'tw-empty' }, 'No findings: the barrier protocol and memory plan checked clean.')
    );
    return root;
  }
  root.appendChild(
    h(
      'ol',
      { class: 'tw-finding-list' },
      ...findings.map(f => {
        const where = [
          f.barrier ? `${f.barrier}${f.slot !== null && f.slot !== undefined ? `[${f.slot}]` : ''}` : null,
          f.iteration !== null && f.iteration !== undefined ? `iteration ${f.iteration}` : null,
          f.line !== null && f.line !== undefined ? `line ${f.line}` : null
        ].filter(Boolean);
        return h(
          'li',
          { class: `tw-finding-item tw-severity-${f.severity}` },
          h('span', { class: 'tw-badge' }, f.severity),
          typeof f.code === 'string' ? h('span', { class: 'tw-finding-code' }, ` [${f.code}]`) : '',
          ' ',
          f.message,
          where.length ? h('span', { class: 'tw-where' }, ` (${where.join(', ')})`) : null
        );
      })
    )
  );
  return root;
}
