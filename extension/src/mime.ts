/**
 * The workbench's MIME types, spelled as tileworkbench/mime.py defines them
 * (tests/workbench/test_mime.py checks that they agree).
 */

/** A compile trace (`Trace.to_json()`). */
export const TRACE_MIME_TYPE = 'application/vnd.tileworkbench.trace.v1+json';

/** A benchmark record. */
export const BENCH_MIME_TYPE = 'application/vnd.tileworkbench.bench.v1+json';

/** What outputs saved before the types were versioned carry: rendered, with a note. */
export const LEGACY_TRACE_MIME_TYPE = 'application/vnd.tileworkbench.trace+json';
export const LEGACY_BENCH_MIME_TYPE = 'application/vnd.tileworkbench.bench+json';

const LEGACY = new Set([LEGACY_TRACE_MIME_TYPE, LEGACY_BENCH_MIME_TYPE]);

/** Whether an output under `mimeType` was saved by a tileworkbench before versioned types. */
export function isLegacy(mimeType: string): boolean {
  return LEGACY.has(mimeType);
}

/** The note a legacy output is shown with. */
export const LEGACY_NOTE =
  'This output was saved by an older tileworkbench (before its MIME types were versioned); ' +
  're-run the cell to refresh it.';
