/**
 * Checks that a MIME payload is a document this renderer understands.
 *
 * The schema says readers must refuse a version they do not know, so an
 * unknown `version` is an error shown to the user rather than a best-effort
 * render that could silently misreport compiler facts.
 */
import type { IBench, ITrace } from './types';

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
