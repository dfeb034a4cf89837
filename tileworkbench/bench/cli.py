"""``python -m tileworkbench.bench``: run a suite, or refresh BENCHMARKS.md from a record.

    python -m tileworkbench.bench gemm [--sizes 1024,4096x14336x4096] [--dtypes float16,bfloat16]
                                       [--quick] [--out DIR] [--warmup N] [--rep N] [--no-compile-time]
                                       [--ray [ADDRESS]]
    python -m tileworkbench.bench update-md [RECORD.json] [--md BENCHMARKS.md] [--results DIR]
    python -m tileworkbench.bench table RECORD.json
    python -m tileworkbench.bench tilelang [--families gemm,norms] [--out DIR] [--ours-only]
    python -m tileworkbench.bench attention [--rows 8192x128,decode] [--quick] [--out DIR] [--ours-only]
    python -m tileworkbench.bench launch [--n 128] [--out DIR] [--ours-only]
    python -m tileworkbench.bench interpreter [--n 256]
    python -m tileworkbench.bench timeline [--quick] [--out DIR]
    python -m tileworkbench.bench sweep [--size 4096x4096x4096] [--dtype float16] [--configs 64]
                                        [--ray [ADDRESS]] [--no-local] [--compile-only] [--out DIR]

``gemm`` writes ``<out>/gemm-<date>-<gpu>-<commit>.json`` (rewritten after every row, so a run
cut short keeps its rows) and ``<out>/table.md``, shows one progress line per row on stderr, and
prints a short summary table last on stdout.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .machine import REPO_ROOT

RESULTS_DIR = REPO_ROOT / "benchmarks" / "results"
BENCHMARKS_MD = REPO_ROOT / "BENCHMARKS.md"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m tileworkbench.bench", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    g = sub.add_parser("gemm", help="GEMM: ours vs cuBLAS (torch, CuPy), fp16/bf16, plus compile time")
    g.add_argument("--sizes", help="comma list of N (square) or MxNxK; default: 1024..8192 squares + LLM shapes")
    g.add_argument("--dtypes", default="float16,bfloat16", help="comma list of float16, bfloat16")
    g.add_argument("--quick", action="store_true", help="smoke run: 1024 and 4096 only, fewer repetitions")
    g.add_argument("--out", type=Path, default=RESULTS_DIR, help=f"output folder (default {RESULTS_DIR})")
    g.add_argument("--warmup", type=int, help="warm-up calls per kernel (default 10, quick 3)")
    g.add_argument("--rep", type=int, help="timed calls per kernel (default 50, quick 15)")
    g.add_argument("--seed", type=int, default=0, help="base seed of the random inputs (row i uses seed+i)")
    g.add_argument("--no-spec", action="store_true", help="leave out the spec's TMA kernel rows")
    g.add_argument("--no-compile-time", action="store_true", help="skip the compile-time measurement")
    g.add_argument("--ray", nargs="?", const="local", metavar="ADDRESS",
                   help="run the rows on a Ray cluster (compiles on CPU workers, a GPU per row): a running "
                        "cluster's address, or none for a local one (needs the [ray] extra)")
    u = sub.add_parser("update-md", help="rewrite the table section of BENCHMARKS.md from a record")
    u.add_argument("record", nargs="?", type=Path, help="record JSON (default: the newest in --results)")
    u.add_argument("--md", type=Path, default=BENCHMARKS_MD)
    u.add_argument("--results", type=Path, default=RESULTS_DIR)
    tl = sub.add_parser("tilelang", help="TileLang's programs (examples/tilelang_programs) under ours and "
                                         "TileLang, checked against torch and timed side by side")
    tl.add_argument("--families", help="comma list (default: all of tileworkbench.examples.tilelang_programs)")
    tl.add_argument("--out", type=Path, default=RESULTS_DIR, help=f"output folder (default {RESULTS_DIR})")
    tl.add_argument("--ours-only", action="store_true", help="do not import TileLang even where it is installed")
    tl.add_argument("--sources", type=Path, help="also write each kernel's CUDA source from both compilers here")
    at = sub.add_parser("attention", help="FlashAttention forward and decoding: ours vs torch SDPA's backends and "
                                          "TileLang 0.1.15, checked against float32 and timed side by side")
    at.add_argument("--rows", help="comma list of words; runs the rows whose names contain one (e.g. 8192x128,decode)")
    at.add_argument("--quick", action="store_true", help="smoke run: 1x16x4096x128 causal and not, a small decode")
    at.add_argument("--out", type=Path, default=RESULTS_DIR, help=f"output folder (default {RESULTS_DIR})")
    at.add_argument("--ours-only", action="store_true", help="do not import TileLang even where it is installed")
    at.add_argument("--seed", type=int, default=0, help="base seed of the random inputs (row i uses seed+i)")
    at.add_argument("--ray", nargs="?", const="local", metavar="ADDRESS",
                    help="run the rows on a Ray cluster (our compiles on CPU workers, a GPU per row): a running "
                         "cluster's address, or none for a local one (needs the [ray] extra)")
    la = sub.add_parser("launch", help="host time per call of a tiny GEMM: ours, torch, CuPy, TileLang; plain "
                                       "and under CUDA graph replay")
    la.add_argument("--n", type=int, default=128, help="the GEMM's size (n x n x n, a multiple of 128; default 128)")
    la.add_argument("--out", type=Path, default=RESULTS_DIR, help=f"output folder (default {RESULTS_DIR})")
    la.add_argument("--ours-only", action="store_true", help="do not import TileLang even where it is installed")
    it = sub.add_parser("interpreter", help="the CPU interpreter's time per kernel (no GPU needed)")
    it.add_argument("--n", type=int, default=256, help="the GEMMs' size (n x n x n; default 256)")
    sw = sub.add_parser("sweep", help="one autotuning sweep of the GEMM, on this machine and on a Ray cluster: "
                                      "wall, compile and timing seconds, the speed-up")
    sw.add_argument("--size", default="4096x4096x4096",
                    help="the GEMM: N (square) or MxNxK (default 4096x4096x4096)")
    sw.add_argument("--dtype", default="float16", help="float16 or bfloat16 (default float16)")
    sw.add_argument("--configs", type=int, default=64, help="how many configs of the space (bench/sweep.py) to "
                                                            "sweep, at most 72 (default 64)")
    sw.add_argument("--ray", nargs="?", const="local", metavar="ADDRESS",
                    help="also sweep on a Ray cluster: a running cluster's address, or none to start a local one "
                         "(needs the [ray] extra)")
    sw.add_argument("--no-local", action="store_true", help="leave out the sweep on this machine's process pool")
    sw.add_argument("--compile-only", action="store_true", help="stop each sweep after its compile step (no GPU "
                                                                "needed)")
    sw.add_argument("--target", default="sm_90a", help="the arch compiled for (default sm_90a)")
    sw.add_argument("--warmup", type=int, default=10, help="warm-up calls per config (default 10)")
    sw.add_argument("--rep", type=int, default=50, help="timed calls per config (default 50)")
    sw.add_argument("--trial-timeout", type=float, help="Ray: seconds a compile or timing task may run (default "
                                                        "600)")
    sw.add_argument("--out", type=Path, default=RESULTS_DIR, help=f"output folder (default {RESULTS_DIR})")
    tm = sub.add_parser("timeline", help="what recording a measured timeline (tw.timeline) costs: the 8192^3 GEMM, "
                                         "the spec kernels and attention, plain and instrumented")
    tm.add_argument("--quick", action="store_true", help="smoke run: 4096^3, fewer kernels and repetitions")
    tm.add_argument("--out", type=Path, default=RESULTS_DIR, help=f"output folder (default {RESULTS_DIR})")
    t = sub.add_parser("table", help="print the markdown table of a record")
    t.add_argument("record", type=Path)
    return p


def run_gemm(args) -> int:
    from . import gemm, schema, table
    from .machine import machine_info

    dtypes = [d.strip() for d in args.dtypes.split(",") if d.strip()]
    unknown = [d for d in dtypes if d not in gemm.THRESHOLDS]
    if unknown:
        print(f"unknown dtype(s) {', '.join(unknown)}; choose from {', '.join(gemm.THRESHOLDS)}", file=sys.stderr)
        return 2
    shapes = gemm.parse_shapes(args.sizes) if args.sizes else gemm.default_shapes(args.quick)
    settings = gemm.Settings.for_mode(args.quick, warmup=args.warmup, rep=args.rep, seed=args.seed,
                                      compile_bench=not args.no_compile_time)
    jobs = gemm.plan(shapes, dtypes, spec=not args.no_spec)
    if args.ray is None:
        if not _torch_gpu("the GEMM suite", "torch and CuPy"):
            return 2
        import torch
    else:
        if not _ray_present("gemm"):
            return 2
        settings.compile_bench = False  # it times this machine's compiler, not the cluster's

    from ..backend.timing import FLUSH_BYTES, SPIN_NS

    meta = {"warmup": settings.warmup, "rep": settings.rep, "quick": settings.quick, "seed": settings.seed,
            "head_to_head_rounds": settings.rounds, "head_to_head_rep": settings.round_rep,
            "flush_l2_bytes": FLUSH_BYTES, "spin_ns": SPIN_NS, "thresholds": gemm.THRESHOLDS,
            "float64_reference_max_flops": gemm.REF64_MAX_FLOPS,
            "ray": args.ray}
    if args.ray is None:
        meta["torch_fp16_reduced_precision_reduction"] = getattr(torch.backends.cuda.matmul,
                                                                 "allow_fp16_reduced_precision_reduction", None)
    record = schema.make_record(machine_info(), [], settings=meta, complete=False)
    name = schema.record_filename(record)
    out = Path(args.out)

    def save(rows, complete=False):
        record["rows"], record["complete"] = list(rows), complete
        schema.write_record(record, out, name)
        (out / "table.md").write_text(table.gemm_table(record))

    print(f"GEMM suite: {len(jobs)} rows on {record['machine']['gpu']}; record {out / name}", file=sys.stderr)
    if args.ray is None:
        rows = gemm.run_suite(jobs, settings, on_row=save)
    else:
        from .gemm_ray import run_suite_on_ray

        try:
            rows = run_suite_on_ray(jobs, settings, None if args.ray == "local" else args.ray, on_row=save)
        except RuntimeError as exc:  # a cluster without GPUs: said plainly, nothing half-written kept
            print(f"gemm --ray: {exc}", file=sys.stderr)
            (out / name).unlink(missing_ok=True)
            return 2
    if settings.compile_bench:
        print("compile time: cold / disk hit / in-process hit of the spec GEMM ...", file=sys.stderr, flush=True)
        try:
            from .compile_time import measure_compile_times

            record["compile"] = measure_compile_times()
        except Exception as exc:
            record["compile"] = {"error": f"{type(exc).__name__}: {exc}"}
    save(rows, complete=True)
    print(f"wrote {out / name} and {out / 'table.md'}", file=sys.stderr, flush=True)
    print(table.summary_table(record), flush=True)
    return 0 if all(r.get("correct") for r in rows) else 1


def run_update_md(args) -> int:
    from . import schema, table

    try:
        path = args.record or schema.latest_record(args.results)
        record = schema.read_record(path)
    except (OSError, ValueError) as exc:  # FileNotFoundError included: no record yet
        print(f"update-md: {exc}", file=sys.stderr)
        return 2
    try:
        source = Path(path).resolve().relative_to(REPO_ROOT).as_posix()
    except ValueError:
        source = Path(path).name
    changed = table.update_markdown(args.md, record, source)
    print(f"{args.md}: table section {'updated' if changed else 'already current'} from {source}")
    return 0


def run_table(args) -> int:
    from . import schema, table

    print(table.gemm_table(schema.read_record(args.record)), end="")
    return 0


def run_tilelang(args) -> int:
    from .tilelang_programs import run

    families = [f.strip() for f in args.families.split(",") if f.strip()] if args.families else None
    return run(families, Path(args.out), ours_only=args.ours_only, sources=args.sources)


def _torch_gpu(what: str, stack: str = "torch") -> bool:
    """Whether torch sees a CUDA GPU; if not, says on stderr that ``what`` needs one (with ``stack``)."""
    try:
        import torch

        if not torch.cuda.is_available():
            raise RuntimeError("torch sees no CUDA GPU")
    except Exception as exc:  # ImportError or no GPU: said plainly instead of a traceback
        print(f"{what} needs a CUDA GPU with {stack}: {exc}", file=sys.stderr)
        return False
    return True


def _ray_present(suite: str) -> bool:
    """Whether Ray can be imported; if not, says on stderr that ``suite --ray`` needs it."""
    try:
        import ray  # noqa: F401
    except ImportError:
        print(f"{suite} --ray needs Ray: pip install 'tileworkbench[ray]'", file=sys.stderr)
        return False
    return True


def run_attention(args) -> int:
    from .attention import run, select_rows

    try:
        rows = select_rows(args.rows, quick=args.quick)
    except ValueError as exc:
        print(f"attention: {exc}", file=sys.stderr)
        return 2
    if args.ray is not None:
        if not _ray_present("attention"):
            return 2
        from .attention_ray import run_on_ray

        try:
            return run_on_ray(rows, Path(args.out), None if args.ray == "local" else args.ray,
                              ours_only=args.ours_only, seed=args.seed)
        except (RuntimeError, ConnectionError) as exc:  # a cluster without GPUs, or none there: said plainly
            print(f"attention --ray: {exc}", file=sys.stderr)
            return 2
    if not _torch_gpu("the attention suite"):
        return 2
    return run(rows, Path(args.out), ours_only=args.ours_only, seed=args.seed)


def run_launch(args) -> int:
    if args.n < 128 or args.n % 128:
        print(f"--n must be a multiple of 128 (the GEMM's block), not {args.n}", file=sys.stderr)
        return 2
    if not _torch_gpu("the launch benchmark"):
        return 2
    from .launch import run

    return run(Path(args.out), n=args.n, ours_only=args.ours_only)


def run_interpreter(args) -> int:
    from .interpreter import run

    return run(args.n)


def run_sweep(args) -> int:
    from . import sweep

    try:
        M, N, K = sweep.parse_size(args.size)
        configs = sweep.sweep_configs(args.configs)
        if args.dtype not in sweep.DTYPES:
            raise ValueError(f"--dtype must be one of {', '.join(sweep.DTYPES)}, not {args.dtype!r}")
        if args.no_local and args.ray is None:
            raise ValueError("--no-local leaves nothing to run without --ray")
        if args.trial_timeout is not None and not args.trial_timeout > 0:
            raise ValueError(f"--trial-timeout must be positive seconds, not {args.trial_timeout:g}")
    except ValueError as exc:
        print(f"sweep: {exc}", file=sys.stderr)
        return 2
    if args.ray is not None and not _ray_present("sweep"):
        return 2
    # the local run times on this machine's GPU (a Ray-only run on the cluster's, which it checks)
    timed_here = not args.compile_only and not args.no_local
    if timed_here and not _torch_gpu("timing the sweep (--compile-only skips it)"):
        return 2
    settings = sweep.SweepSettings(M, N, K, args.dtype, args.target, args.compile_only, args.warmup, args.rep,
                                   args.trial_timeout)
    return sweep.run(configs, settings, Path(args.out), local=not args.no_local, ray=args.ray)


def run_timeline(args) -> int:
    if not _torch_gpu("the timeline benchmark"):
        return 2
    from .timeline import run

    return run(Path(args.out), quick=args.quick)


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    return {"gemm": run_gemm, "update-md": run_update_md, "table": run_table,
            "tilelang": run_tilelang, "attention": run_attention, "launch": run_launch, "interpreter": run_interpreter,
            "sweep": run_sweep, "timeline": run_timeline}[args.command](args)
