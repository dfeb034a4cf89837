/**
 * Checks that a MIME payload is a document this renderer understands.
 *
 * The schema says readers must refuse a version they do not know, so an
 * unknown `version` is an error shown to the user rather than a best-effort
 * render that could silently misreport compiler facts.
 */
import type {
  IBench,
  IMeasuredTimeline,
  ITimeline,
  ITimelineEvent,
  ITimelinePipeline,
  ITimelineSmBusy,
  ITimelineSlotWait,
  ITimelineStream,
  ITimelineSummary,
  ITimelineWait,
  ITrace
} from './types';

export const TRACE_SCHEMA = 'tileworkbench.trace';
export const BENCH_SCHEMA = 'tileworkbench.bench';
export const SUPPORTED_VERSION = 1;

export type Parsed<T> = { ok: true; doc: T } | { ok: false; error: string };

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Front-ends may send the document as a JSON string rather than an object. */
function decode(data: unknown): unknown {
  if (typeof data === 'string') {
    try {
      return JSON.parse(data);
    } catch {
      return data;
    }
  }
  return data;
}

function checkHeader(doc: unknown, schema: string): string | null {
  if (!isObject(doc)) {
    return `expected a JSON object for ${schema}`;
  }
  if (doc.schema !== schema) {
    return `expected schema "${schema}", got ${JSON.stringify(doc.schema)}`;
  }
  if (doc.version !== SUPPORTED_VERSION) {
    return (
      `unsupported ${schema} version ${JSON.stringify(doc.version)} ` +
      `(this extension reads version ${SUPPORTED_VERSION}; upgrade tileworkbench-extension)`
    );
  }
  return null;
}

export function parseTrace(data: unknown): Parsed<ITrace> {
  const doc = decode(data);
  const error = checkHeader(doc, TRACE_SCHEMA);
  if (error) {
    return { ok: false, error };
  }
  const obj = doc as Record<string, unknown>;
  if (!isObject(obj.kernel) || !Array.isArray(obj.passes)) {
    return { ok: false, error: 'trace lacks "kernel" or "passes"' };
  }
  // Fill absent or null list/object sections so views need no existence checks
  // (smem and barriers stay nullable: null means "that stage did not run").
  const trace = { ...obj } as unknown as ITrace;
  trace.sources = (isObject(obj.sources) ? obj.sources : { device: null, host: null }) as ITrace['sources'];
  trace.smem = (isObject(obj.smem) ? obj.smem : null) as ITrace['smem'];
  trace.barriers = (isObject(obj.barriers) ? obj.barriers : null) as ITrace['barriers'];
  trace.tma_descriptors = Array.isArray(obj.tma_descriptors) ? obj.tma_descriptors : [];
  trace.findings = Array.isArray(obj.findings) ? obj.findings : [];
  trace.timeline = parseTimeline(obj.timeline);
  trace.resources = {
    registers: null,
    spills_bytes: null,
    smem_bytes: null,
    threads: null,
    grid: null,
    ...(isObject(obj.resources) ? obj.resources : {})
  };
  if (trace.compare !== undefined) {
    const inner = isObject(trace.compare) ? parseTrace(trace.compare.trace) : null;
    if (!inner || !inner.ok) {
      return { ok: false, error: `bad "compare": ${inner ? inner.error : 'not an object'}` };
    }
    trace.compare = { label: String(trace.compare.label ?? 'compare'), trace: inner.doc };
  }
  return { ok: true, doc: trace };
}

/** A finite number, else null (JSON has no NaN, but a hand-made document may hold anything). */
function num(value: unknown): number | null {
  return typeof value === 'number' && Number.isFinite(value) ? value : null;
}

function str(value: unknown): string | null {
  return typeof value === 'string' ? value : null;
}

/** The entries of `value` (when it is an array) that `read` accepts; the rest are dropped. */
function listOf<T>(value: unknown, read: (item: Record<string, unknown>) => T | null): T[] {
  if (!Array.isArray(value)) {
    return [];
  }
  const out: T[] = [];
  for (const item of value) {
    const parsed = isObject(item) ? read(item) : null;
    if (parsed !== null) {
      out.push(parsed);
    }
  }
  return out;
}

function readEvent(e: Record<string, unknown>): ITimelineEvent | null {
  const stream = num(e.stream);
  const kind = str(e.kind);
  const t = num(e.t_ns);
  if (stream === null || kind === null || t === null) {
    return null;
  }
  return {
    stream,
    role: str(e.role) ?? '?',
    kind,
    barrier: str(e.barrier),
    slot: num(e.slot),
    parity: num(e.parity),
    line: num(e.line),
    t_ns: t
  };
}

function readWait(w: Record<string, unknown>): ITimelineWait | null {
  const stream = num(w.stream);
  const barrier = str(w.barrier);
  const begin = num(w.begin_ns);
  const end = num(w.end_ns);
  if (stream === null || barrier === null || begin === null || end === null) {
    return null;
  }
  return {
    stream,
    role: str(w.role) ?? '?',
    barrier,
    slot: num(w.slot),
    parity: num(w.parity),
    begin_ns: begin,
    end_ns: end
  };
}

function readStream(s: Record<string, unknown>): ITimelineStream | null {
  const stream = num(s.stream);
  const thread = num(s.thread);
  return stream === null || thread === null ? null : { stream, role: str(s.role) ?? '?', thread };
}

function readSlotWait(e: Record<string, unknown>): ITimelineSlotWait | null {
  const [slot, waits, total, perBlock] = [num(e.slot), num(e.waits), num(e.total_ns), num(e.per_block_ns)];
  const barrier = str(e.barrier);
  if (barrier === null || slot === null || waits === null || total === null) {
    return null;
  }
  return { role: str(e.role) ?? '?', barrier, slot, waits, total_ns: total, per_block_ns: perBlock ?? total };
}

function readSmBusy(e: Record<string, unknown>): ITimelineSmBusy | null {
  const [sm, blocks, ns, fraction] = [num(e.sm), num(e.blocks), num(e.busy_ns), num(e.busy_fraction)];
  return sm === null || blocks === null || ns === null || fraction === null
    ? null
    : { sm, blocks, busy_ns: ns, busy_fraction: fraction };
}

function readPipeline(p: unknown): ITimelinePipeline | null {
  if (!isObject(p)) {
    return null;
  }
  return {
    waits_checked: num(p.waits_checked),
    violations: Array.isArray(p.violations) ? p.violations.filter(isObject) : [],
    lead_stages_median: num(p.lead_stages_median),
    lead_stages_min: num(p.lead_stages_min),
    ahead_of_lockstep: num(p.ahead_of_lockstep),
    load_to_wait_end_ns_median: num(p.load_to_wait_end_ns_median)
  };
}

function readSummary(s: unknown): ITimelineSummary | null {
  if (!isObject(s)) {
    return null;
  }
  const busy = isObject(s.sm_busy) ? s.sm_busy : null;
  return {
    events: num(s.events),
    recorded_blocks: num(s.recorded_blocks),
    span_ns: num(s.span_ns),
    dropped_events: num(s.dropped_events),
    unclosed_streams: num(s.unclosed_streams),
    cycles_per_ns: num(s.cycles_per_ns),
    wait_by_slot: listOf(s.wait_by_slot, readSlotWait),
    consumer_wait_on_loads_fraction: num(s.consumer_wait_on_loads_fraction),
    pipeline: readPipeline(s.pipeline),
    sm_busy: busy
      ? {
          sms: num(busy.sms),
          per_sm: listOf(busy.per_sm, readSmBusy)
        }
      : null
  };
}

function readMeasured(m: unknown): IMeasuredTimeline | null {
  if (!isObject(m) || !Array.isArray(m.events)) {
    return null;
  }
  const blocks = Array.isArray(m.blocks)
    ? (m.blocks.filter(
        b => Array.isArray(b) && b.length >= 4 && b.slice(0, 4).every(v => num(v) !== null)
      ) as [number, number, number, number][])
    : [];
  const indices = Array.isArray(m.block_indices) ? m.block_indices.map(num) : null;
  return {
    block: num(m.block),
    block_indices: indices && indices.length === 3 && indices.every(v => v !== null) ? (indices as number[]) : null,
    sm: num(m.sm),
    events: listOf(m.events, readEvent),
    truncated: m.truncated === true,
    waits: listOf(m.waits, readWait),
    streams: listOf(m.streams, readStream),
    blocks,
    summary: readSummary(m.summary)
  };
}

/**
 * `timeline` (`tw.timeline` kernels): absent, not an object, or holding neither a plan nor a
 * readable measurement gives null. Within a measurement, entries that lack what the view draws
 * (a time, a kind, a stream) are dropped rather than drawn wrongly.
 */
export function parseTimeline(value: unknown): ITimeline | null {
  if (!isObject(value)) {
    return null;
  }
  const plan = isObject(value.plan) ? (value.plan as ITimeline['plan']) : null;
  const measured = readMeasured(value.measured);
  return plan || measured ? { plan, measured } : null;
}

export function parseBench(data: unknown): Parsed<IBench> {
  const doc = decode(data);
  const error = checkHeader(doc, BENCH_SCHEMA);
  if (error) {
    return { ok: false, error };
  }
  const obj = doc as Record<string, unknown>;
  if (!Array.isArray(obj.rows)) {
    return { ok: false, error: 'bench record lacks "rows"' };
  }
  return {
    ok: true,
    doc: { ...obj, machine: isObject(obj.machine) ? obj.machine : {} } as unknown as IBench
  };
}
