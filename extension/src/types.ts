/**
 * TypeScript view of the trace and benchmark documents (docs/trace-schema.md,
 * version 1). Only what the views read is typed; unknown keys are tolerated so
 * a newer compiler adding fields does not break the renderer.
 */

export type Phase = 'frontend' | 'tile' | 'lower' | 'memory' | 'codegen';

export interface IPassSnapshot {
  index: number;
  name: string;
  phase: Phase | string;
  ir_before: string;
  ir_after: string;
  changed: boolean;
  time_ms: number | null;
  error: string | null;
}

export interface ISmemBuffer {
  name: string;
  kind: 'buffer' | 'barrier' | string;
  dtype: string;
  shape: number[];
  versions: number;
  offset: number;
  size_bytes: number;
  align: number;
  swizzle: string;
  live: [number, number];
}

export interface ISmemPlan {
  limit_bytes: number;
  total_bytes: number;
  buffers: ISmemBuffer[];
}

export type BarrierEventKind = 'init' | 'expect_tx' | 'tma_load' | 'arrive' | 'phase_complete' | 'wait';

export interface IBarrierEvent {
  seq: number;
  barrier: string;
  slot: number | null;
  kind: BarrierEventKind | string;
  iteration: number | null;
  stage?: string;
  scope?: string;
  line?: number | null;
  count?: number;
  bytes?: number;
  parity?: number;
  phase?: number;
  /** Index into the trace's `findings` when this event is the offending one. */
  finding?: number;
}

export interface IBarrierSim {
  barriers: { name: string; slots: number; init_count: number }[];
  iterations: number;
  events: IBarrierEvent[];
  /** The block whose walk the events are, and every block walked (where the protocol reads the block index). */
  block?: number[];
  blocks?: number[][];
}

/** A `tw.timeline` kernel's recording plan (`TimelinePlan.to_json()`); the views read little of it. */
export interface ITimelinePlan {
  /** Every k-th unit records: a block, or (`unit` "tile") a tile of each block of a persistent kernel. */
  every?: number;
  unit?: 'block' | 'tile';
  capacity?: number;
  recorders?: number[];
  roles?: string[];
  /** `recorded_by`: the site whose record stands for this one too (null: its own). */
  sites?: {
    kind: string;
    role: string;
    barrier: string | null;
    line: number | null;
    text: string;
    recorded_by?: number | null;
  }[];
}

export type TimelineEventKind =
  | 'wait_begin'
  | 'wait_end'
  | 'arrive'
  | 'expect_tx'
  | 'tma_issue'
  | 'wgmma_issue'
  | 'wgmma_wait'
  | 'store_issue'
  | 'store_wait';

/** One recorded event of the shown block; `t_ns` counts from the launch's earliest recorded open. */
export interface ITimelineEvent {
  stream: number;
  role: string;
  kind: TimelineEventKind | string;
  barrier: string | null;
  slot: number | null;
  parity: number | null;
  line: number | null;
  t_ns: number;
}

/** A wait as an interval: a `wait_begin` and the `wait_end` after it in its stream. */
export interface ITimelineWait {
  stream: number;
  role: string;
  barrier: string;
  slot: number | null;
  parity: number | null;
  begin_ns: number;
  end_ns: number;
}

/** A recording warpgroup: its stream index, role and first thread. */
export interface ITimelineStream {
  stream: number;
  role: string;
  thread: number;
}

export interface ITimelineSlotWait {
  role: string;
  barrier: string;
  slot: number;
  waits: number;
  total_ns: number;
  per_block_ns: number;
}

export interface ITimelineViolation {
  block?: number;
  stream?: number;
  barrier?: string;
  iteration?: number;
  what?: string;
  cause_ns?: number;
  wait_end_ns?: number;
}

export interface ITimelinePipeline {
  waits_checked: number | null;
  violations: ITimelineViolation[];
  lead_stages_median: number | null;
  lead_stages_min: number | null;
  /** Share of the checked waits where the producer was more than one stage ahead. */
  ahead_of_lockstep: number | null;
  load_to_wait_end_ns_median: number | null;
}

/** One SM's recorded blocks and their busy time (`busy_fraction`: of the launch's span). */
export interface ITimelineSmBusy {
  sm: number;
  blocks: number;
  busy_ns: number;
  busy_fraction: number;
}

export interface ITimelineSummary {
  events: number | null;
  recorded_blocks: number | null;
  span_ns: number | null;
  dropped_events: number | null;
  unclosed_streams: number | null;
  /** Streams whose recording warp's lanes diverged (left out); absent in older traces. */
  diverged_streams?: number | null;
  cycles_per_ns: number | null;
  wait_by_slot: ITimelineSlotWait[];
  consumer_wait_on_loads_fraction: number | null;
  pipeline: ITimelinePipeline | null;
  sm_busy: { sms: number | null; per_sm: ITimelineSmBusy[] } | null;
}

/** What `kernel.timeline()` read: one block's events in full, facts about every recorded block. */
export interface IMeasuredTimeline {
  /** The block's number in dispatch order. */
  block: number | null;
  /** `[bx, by, bz]` as the kernel numbers its blocks (a reordered grid makes them differ); null if unknown. */
  block_indices: number[] | null;
  sm: number | null;
  events: ITimelineEvent[];
  truncated: boolean;
  waits: ITimelineWait[];
  streams: ITimelineStream[];
  /** `[block, sm, open_ns, close_ns]` per recorded block. */
  blocks: [number, number, number, number][];
  summary: ITimelineSummary | null;
}

/** `tw.timeline`: the plan always; the measurement once `kernel.timeline()` has read one. */
export interface ITimeline {
  plan: ITimelinePlan | null;
  measured: IMeasuredTimeline | null;
}

export interface ITmaDescriptor {
  name: string;
  buffer: string;
  data_type: number;
  data_type_name: string;
  rank: number;
  global_dims: number[];
  global_strides_bytes: number[];
  box_dims: number[];
  element_strides: number[];
  interleave: string;
  swizzle: string;
  l2_promotion: string;
  oob_fill: string;
}

export interface IFinding {
  severity: 'error' | 'warning' | string;
  message: string;
  /** Producer extension: a short identifier of the check. */
  code?: string;
  barrier?: string | null;
  slot?: number | null;
  iteration?: number | null;
  line?: number | null;
}

/** A spilling kernel compiled a second way, its main loops reading the thread index again. */
export interface IThreadIndexReread {
  kept: boolean;
  spills_bytes?: number | null;
  spills_bytes_without?: number | null;
  registers?: number | null;
  registers_without?: number | null;
  /** Why the second form could not be compiled (a compiler bug). */
  error?: string;
}

export interface IResources {
  registers: number | null;
  spills_bytes: number | null;
  smem_bytes: number | null;
  threads: number | null;
  grid: number[] | null;
  thread_index_reread?: IThreadIndexReread | null;
  warp_specialization?: IWarpSpecialization | null;
}

/** What the compiler made of a kernel's pipelined loop (`resources.warp_specialization`). */
export interface IWarpSpecialization {
  applied: boolean;
  /** Why the loop kept one role (not split). */
  reason?: string;
  /** Split, then compiled again with one role: its shared tiles did not fit after all. */
  retried?: boolean;
  stages?: number;
  consumer_threads?: number;
  producer_threads?: number;
  /** The split's shared tiles share bytes, placed by lifetime. */
  shares_bytes?: boolean;
}

export interface IKernelInfo {
  name: string;
  target: { kind: string; arch: string };
  pass_configs: Record<string, unknown>;
  source_file: string | null;
  source_line: number | null;
  /** A notebook cell's kernel as the user knows it (`In [3], line 10`), when the producer knows. */
  source_label?: string | null;
  /** The results come from the CPU interpreter, not a GPU. */
  interpreted?: boolean;
}

/** One analysis of the compile's analysis stage (smem plan, barrier simulation, barrier check). */
export interface IAnalysisSnapshot {
  name: string;
  time_ms: number;
  /** How many findings it added to the trace. */
  findings: number;
  error: string | null;
}

export interface ITrace {
  schema: 'tileworkbench.trace';
  version: 1;
  kernel: IKernelInfo;
  passes: IPassSnapshot[];
  sources: { device: string | null; host: string | null };
  smem: ISmemPlan | null;
  barriers: IBarrierSim | null;
  tma_descriptors: ITmaDescriptor[];
  resources: IResources;
  findings: IFinding[];
  /** Absent in traces written before the analysis stage existed. */
  analyses?: IAnalysisSnapshot[];
  /** Only for a kernel compiled with `tw.timeline`; the parser makes it null when absent or unreadable. */
  timeline?: ITimeline | null;
  /** Not part of the compiler output: a bundle may attach a second kernel to diff against. */
  compare?: { label: string; trace: ITrace };
}

export interface IBenchRow {
  suite: string;
  kernel: string;
  dtype: string;
  M: number;
  N: number;
  K: number;
  ms: number | null;
  tflops: number | null;
  cublas_tflops: number | null;
  ratio: number | null;
  correct: boolean | null;
  rel_err: number | null;
  /** Optional display label for the size axis (otherwise "MxNxK"). */
  label?: string;
  /** Producer extension: why this row has no result. */
  error?: string | null;
}

export interface IBench {
  schema: 'tileworkbench.bench';
  version: 1;
  machine: Record<string, unknown>;
  rows: IBenchRow[];
  /** Producer extension: false while a run is still under way. */
  complete?: boolean;
}
