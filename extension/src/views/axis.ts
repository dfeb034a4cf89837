/** Tick helpers shared by the SVG charts. */

/** A round step (1/2/5 × 10^k) giving about `count` intervals over [lo, hi]. */
export function niceStep(lo: number, hi: number, count = 5): number {
  const raw = Math.max(hi - lo, Number.MIN_VALUE) / Math.max(1, count);
  const mag = Math.pow(10, Math.floor(Math.log10(raw)));
  return [1, 2, 5, 10].map(m => m * mag).find(v => v >= raw) ?? 10 * mag;
}

/** A power-of-two step giving about `count` intervals: byte axes read best in 2^k. */
export function pow2Step(hi: number, count = 5): number {
  return Math.pow(2, Math.max(0, Math.ceil(Math.log2(Math.max(1, hi / Math.max(1, count))))));
}

/** Multiples of `step` inside [lo, hi]. */
export function ticksOf(lo: number, hi: number, step: number): number[] {
  const ticks: number[] = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) {
    ticks.push(Number(v.toPrecision(12)));
  }
  return ticks;
}

/** About `count` round tick values inside [lo, hi]. */
export function niceTicks(lo: number, hi: number, count = 5): number[] {
  return hi > lo ? ticksOf(lo, hi, niceStep(lo, hi, count)) : [lo];
}

/** Linear map from [d0, d1] to [r0, r1]; a zero-width domain maps to r0. */
export function linear(d0: number, d1: number, r0: number, r1: number): (v: number) => number {
  const span = d1 - d0;
  return (v: number) => (span === 0 ? r0 : r0 + ((v - d0) / span) * (r1 - r0));
}
