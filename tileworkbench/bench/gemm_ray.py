"""The GEMM suite on a Ray cluster: ``python -m tileworkbench.bench gemm --ray [ADDRESS]``.

Every candidate kernel of every row is compiled first, as Ray CPU tasks, and comes back as its
kernel record, cubin included (nothing depends on a disk cache shared between machines). Each row
then runs as a task holding one GPU: the same ``GemmRunner`` as on one machine (cuBLAS, the
candidates, the head-to-head final), its candidates loaded from their records. Rows come back as
they finish, are printed and written to the record in the suite's order, and a row whose worker
dies or that runs past the time limit is recorded with that error while the others go on
(``autotuner.ray_backend.RaySweep``). The compile-time measurement of the plain suite is not part
of a Ray run (it times this machine's compiler).

Written and tested on CPU workers (the compile step, the refusals); the GPU rows have not run on a
GPU yet (issue 22).
"""

from __future__ import annotations

import sys
import time

from .gemm import THRESHOLDS, Job, Settings, candidate_key, make_row, progress_line

ROW_TIMEOUT_S = 1800.0  # a row of the suite: every candidate, cuBLAS and the final rounds


def compile_candidate(cand):
    """The kernel record of one candidate (no GPU needed), on a CPU worker."""
    from ..jit.kernel import compile as compile_kernel

    return compile_kernel(cand.build(), out_idx=[2], pass_configs=cand.pass_configs, load_device=False).record


def run_row(job: Job, settings: Settings, index: int, records: dict) -> dict:
    """One row of the suite on the GPU this task holds."""
    from .gemm import GemmRunner

    return GemmRunner(settings, records).run(job, index)


def compile_all(sweep, jobs: list, log=None) -> dict:
    """``candidate_key`` -> record for every candidate of ``jobs`` that compiled (the others are
    compiled, and fail with their own error, inside their row)."""
    unique = {}
    for job in jobs:
        for cand in job.candidates:
            unique.setdefault(candidate_key(cand), cand)
    keys = list(unique)
    records, failed = {}, []

    def done(i, outcome):
        if outcome.ok:
            records[keys[i]] = outcome.value
        else:
            failed.append(f"{unique[keys[i]].name}: {outcome.error_type}")
        print(f"[compile {len(records) + len(failed)}/{len(keys)}] {unique[keys[i]].name}"
              f"{'' if outcome.ok else ' failed (' + str(outcome.error_type) + ')'}", file=log or sys.stderr, flush=True)

    sweep.run(compile_candidate, [(unique[k],) for k in keys], {"num_cpus": 1}, sweep.cpu_slots(), done)
    return records


def run_suite_on_ray(jobs: list, settings: Settings, address: str | None, on_row=None, log=None,
                     row_timeout_s: float = ROW_TIMEOUT_S) -> list:
    """The suite's rows (in order) from a Ray cluster (module doc); ``on_row(rows)`` whenever a
    row arrives, with the rows finished so far in the suite's order."""
    from ..autotuner.ray_backend import RaySweep

    sweep = RaySweep(address, row_timeout_s, gpus_per_trial=1)
    with sweep.session():
        gpus = sweep.require_gpus("GEMM suite")
        print(f"GEMM suite on Ray: {len(jobs)} rows over {gpus:g} GPU(s)", file=log or sys.stderr, flush=True)
        records = compile_all(sweep, jobs, log)
        rows: list = [None] * len(jobs)
        started = time.perf_counter()

        def done(i, outcome):
            job = jobs[i]
            if outcome.ok:
                rows[i] = outcome.value
            else:  # the worker died or the row ran past its time limit: recorded, the suite goes on
                rows[i] = make_row(job, [{"name": "row", "error": f"{outcome.error_type}: {outcome.error}",
                                          "correct": False}], {}, "none", THRESHOLDS.get(job.dtype, 0.0))
            finished = sum(r is not None for r in rows)
            print(progress_line(finished, len(jobs), rows[i], time.perf_counter() - started),
                  file=log or sys.stderr, flush=True)
            if on_row is not None:
                on_row([r for r in rows if r is not None])

        payloads = [(job, settings, i + 1, {candidate_key(c): records[candidate_key(c)] for c in job.candidates
                                            if candidate_key(c) in records}) for i, job in enumerate(jobs)]
        sweep.run(run_row, payloads, {"num_gpus": 1}, sweep.gpu_slots(), done)
    return rows
