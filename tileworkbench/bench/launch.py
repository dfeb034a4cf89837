"""What a call of a tiny kernel costs the host: ours beside torch.matmul, cupy.matmul and
TileLang (where importable), plain and under CUDA graph replay (issue 18).

    python -m tileworkbench.bench launch [--n 128] [--out DIR] [--ours-only]

The problem is an ``n`` x ``n`` x ``n`` float16 GEMM, the same program for us and TileLang
(``examples/tilelang_programs/gemm.py``, block 128 x 128 x 32, 2 stages). Every implementation's
result is checked against float32 first. ``us_per_call`` is host time: the median over rounds of
100 calls each, synchronised between rounds (not timed), so the launch queue never fills and the
GPU's own time does not show; the ``@jit`` function called with tensors (TileLang's current
front door: a call compiles on its first shape, then finds its kernel) is timed for both compilers
beside the compiled kernel's call; the implementations take turns round by round (``host_us_in_turns``),
so a lent host whose speed drifts during the run weighs on all of them alike. Graph rows capture 100 calls in one ``torch.cuda.CUDAGraph``:
``us_per_call`` is the host time of a replay per call, ``wall_us_per_call`` the time until the
GPU is done per call (what GPU-bound speed is). Ours runs twice: through the C launch path
(``backend/fastcall.py``, what a call takes where it is built; ``launch_path`` in the record says
whether it was) and through the generated Python launcher alone. ``driver floor`` is the Python
launcher's last step alone (the parameters packed, ``cuLaunchKernel`` through cuda-bindings);
``c_floor_us`` the driver from C (the C path's last launch made again, one per call of
``repeat_last(1)``): what no launch path goes below on this host.

Writes ``<out>/launch-<date>-<gpu>-<commit>.json`` (schema below) and prints a table with each
implementation's time over ours.
"""

from __future__ import annotations

import copy
import statistics
import sys
import tempfile
import time
from pathlib import Path

SCHEMA = "tileworkbench.launch"
VERSION = 1
CALLS, ROUNDS = 100, 60
GOAL_US = 5.0


def host_us(fn, sync, calls: int = CALLS, rounds: int = ROUNDS) -> float:
    """Median host microseconds per call (see the module docstring): ``host_us_in_turns`` of one."""
    return host_us_in_turns({"fn": fn}, sync, calls, rounds)["fn"]


def host_us_in_turns(fns: dict, sync, calls: int = CALLS, rounds: int = ROUNDS) -> dict:
    """``host_us`` of each of ``fns`` (name -> call), the calls taking turns: every round runs each
    one's ``calls`` calls, in an order rotated from round to round, so that a host that slows down
    or speeds up during the run (lent machines do, by 10-30% over seconds) weighs on all alike."""
    names = list(fns)
    for name in names:
        for _ in range(3 * calls):
            fns[name]()
    sync()
    samples: dict = {name: [] for name in names}
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            fn = fns[name]
            start = time.perf_counter()
            for _ in range(calls):
                fn()
            samples[name].append((time.perf_counter() - start) / calls * 1e6)
            sync()
    return {name: statistics.median(values) for name, values in samples.items()}


def wall_us(fn, sync, calls: int, rounds: int = 5) -> float:
    """Median microseconds per call until the GPU is done, over ``rounds`` runs of ``fn``."""
    samples = []
    for _ in range(rounds):
        sync()
        start = time.perf_counter()
        fn()
        sync()
        samples.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(samples)


def _rel_err(torch, out, ref) -> float:
    return float((out.float() - ref).norm() / ref.norm())


def _graph_of(torch, call, count: int = CALLS):
    """``call`` captured ``count`` times in one graph (warmed up on a side stream first)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        call()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(count):
            call()
    return graph


def _without_c_path(kernel):
    """The same kernel, every call through the generated Python launcher (for the comparison)."""
    python_only = copy.copy(kernel)
    python_only.take_c_path(None)
    return python_only


def _attribute_reader(kernel):
    """The same kernel on a C launcher that reads its tensors by their attributes, or None where
    ours already does (no DLPack exchange API in this torch, or no C path)."""
    from ..jit.kernel import _c_launcher

    if kernel._fast is None or kernel._fast.tensor_reader != "dlpack":
        return None
    reading_attributes = copy.copy(kernel)
    reading_attributes.take_c_path(_c_launcher(kernel, kernel._runtime, exchange_api=False))
    return reading_attributes


def _dynamic_rows(workdir, a, b, c) -> dict:
    """Rows of TileLang's T.dynamic GEMM at the same sizes: called as a user calls it (its two
    compiled forms; the aligned one takes these sizes, and after the first call its C launcher),
    its form for any sizes called directly (after its first call, this size's C launcher), and
    that form's Python launcher; C launchers per set of sizes unless
    ``TILEWORKBENCH_FASTCALL_SIZED=0`` (the row names say which). Empty where it does not compile."""
    from ..jit import sized_launch
    from .tilelang_programs import load_program

    sized = "C per size on" if sized_launch.enabled() else "C per size off"
    try:
        program = load_program("dynamic_shape", "tileworkbench", workdir)
        dynamic = program.matmul_dynamic_mnk.compile(**program.CONFIG)
    except Exception as exc:  # a result, not the end of the run
        print(f"the T.dynamic GEMM did not compile ({type(exc).__name__}: {exc}); no dynamic rows", file=sys.stderr)
        return {}
    general = dynamic.general
    return {f"tileworkbench T.dynamic kernel(a, b, c), as called ({sized})": lambda: dynamic(a, b, c),
            f"tileworkbench T.dynamic kernel(a, b, c), its form for any sizes ({sized})": lambda: general(a, b, c),
            "tileworkbench T.dynamic kernel(a, b, c), Python launcher": lambda: general._call(a, b, c)}


def _floor_calls(kernel, python_only, a, b, c) -> dict:
    """The driver alone, as calls to time with the others: ``driver floor`` is the Python
    launcher's last step (the parameters packed, ``cuLaunchKernel`` through cuda-bindings) with the
    arguments a call of ``python_only`` hands it; ``C floor`` (where the C path is on) a C launcher's
    launch of (a, b, c) made again from C (``repeat_last``), once a call."""
    rt = python_only._runtime
    seen = {}
    real = rt.launch
    rt.launch = lambda name, grid, block, smem, args, stream: seen.update(
        name=name, grid=grid, block=block, smem=smem, args=args, stream=stream)
    try:
        python_only(a, b, c)
    finally:
        rt.launch = real
    args = (seen["name"], seen["grid"], seen["block"], seen["smem"], seen["args"], seen["stream"])
    real(*args)  # builds the launcher
    launcher = rt._launchers[(seen["name"], rt.device)]
    calls = {"driver floor": lambda: launcher(*args)}
    if kernel._fast is not None:
        # A launcher of its own, whose last launch is always this (a, b, c), which outlive the run
        # (the kernel's own may last have launched on an output freed since).
        from ..jit.kernel import _c_launcher

        own = _c_launcher(kernel, kernel._runtime)
        own(a, b, c)
        repeat = own.repeat_last
        calls["C floor"] = lambda: repeat(1)
    return calls


def run(out: Path, n: int = 128, ours_only: bool = False) -> int:
    import torch

    from . import schema
    from .machine import machine_info
    from .tilelang_programs import load_program

    sync = torch.cuda.synchronize
    a, b = (torch.randn(n, n, device="cuda", dtype=torch.float16) for _ in range(2))
    c = torch.empty(n, n, device="cuda", dtype=torch.float16)
    ref = a.float() @ b.float()
    shape = dict(M=n, N=n, K=n, block_M=128, block_N=128, block_K=32, num_stages=2)
    workdir = Path(tempfile.mkdtemp())
    our_program = load_program("gemm", "tileworkbench", workdir)
    ours = our_program.matmul.compile(**shape)
    tiles = (shape["block_M"], shape["block_N"], shape["block_K"])
    python_only = _without_c_path(ours)
    impls = {"tileworkbench kernel(a, b)": lambda: ours(a, b),
             "tileworkbench kernel(a, b, c)": lambda: ours(a, b, c),
             "tileworkbench kernel(a, b), Python launcher": lambda: python_only(a, b),
             "tileworkbench kernel(a, b, c), Python launcher": lambda: python_only(a, b, c),
             "tileworkbench matmul(a, b, ...), the @jit function called": lambda: our_program.matmul(
                 a, b, *tiles, shape["num_stages"]),
             "torch.matmul(a, b)": lambda: torch.matmul(a, b),
             "torch.matmul(a, b, out=c)": lambda: torch.matmul(a, b, out=c)}
    by_attributes = _attribute_reader(ours)
    if by_attributes is not None:  # what DLPack's exchange API saves, in the same turns
        impls["tileworkbench kernel(a, b, c), C path reading attributes"] = lambda: by_attributes(a, b, c)
    impls.update(_dynamic_rows(workdir, a, b, c))
    try:
        import cupy

        ca, cb = cupy.asarray(a), cupy.asarray(b)
        impls["cupy.matmul(a, b)"] = lambda: cupy.matmul(ca, cb)
    except ImportError:
        pass
    tilelang_version = None
    if not ours_only:
        try:
            import tilelang

            their_program = load_program("gemm", "tilelang", workdir)
            theirs = their_program.matmul.compile(**shape)
            tilelang_version = getattr(tilelang, "__version__", "unknown")
            impls["tilelang kernel(a, b)"] = lambda: theirs(a, b)
            impls["tilelang matmul(a, b, ...), the @jit function called"] = lambda: their_program.matmul(
                a, b, *tiles, shape["num_stages"])
        except Exception as exc:
            print(f"TileLang is not importable here ({type(exc).__name__}: {exc}); timing the others",
                  file=sys.stderr)
    rows = []
    for name, call in impls.items():
        try:
            result = call()
            sync()
        except Exception as exc:  # a call one compiler cannot make is a result, not the end of the run
            rows.append({"implementation": name, "mode": "plain", "correct": False,
                         "error": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"})
            continue
        result = c if result is None else torch.as_tensor(result, device="cuda")  # CuPy's through DLPack
        err = _rel_err(torch, result, ref)
        rows.append({"implementation": name, "mode": "plain", "rel_err": err, "correct": err < 2e-3})
    # Timed in turns (host_us_in_turns), the correct ones only; the driver alone, from Python and
    # from C, in the same turns.
    timed = {r["implementation"]: impls[r["implementation"]] for r in rows if r["correct"]}
    floors = _floor_calls(ours, python_only, a, b, c)
    us = host_us_in_turns({**timed, **floors}, sync)
    for row in rows:
        if row["correct"]:
            row["us_per_call"] = us[row["implementation"]]
        outcome = f"err {row['rel_err']:.1e}" if "rel_err" in row else row["error"]
        print(f"  {row['implementation']}: {row.get('us_per_call', float('nan')):.2f} us per call ({outcome})",
              file=sys.stderr, flush=True)
    for name in ("tileworkbench kernel(a, b, c)", "torch.matmul(a, b, out=c)"):
        c.zero_()
        graph = _graph_of(torch, impls[name])
        graph.replay()
        sync()
        err = _rel_err(torch, c, ref)
        row = {"implementation": name, "mode": "graph", "rel_err": err, "correct": err < 2e-3}
        if row["correct"]:
            row["us_per_call"] = host_us(graph.replay, sync, calls=10) / CALLS
            row["wall_us_per_call"] = wall_us(lambda: [graph.replay() for _ in range(20)], sync, 20 * CALLS)
        rows.append(row)
    loop = {"implementation": "tileworkbench kernel(a, b, c)", "mode": "loop", "correct": True,
            "wall_us_per_call": wall_us(lambda: [ours(a, b, c) for _ in range(2000)], sync, 2000)}
    rows.append(loop)
    record = {"schema": SCHEMA, "version": VERSION, "suite": "launch", "machine": machine_info(),
              "tilelang": tilelang_version, "settings": {"n": n, "calls": CALLS, "rounds": ROUNDS, "turns": True,
                                                         **shape},
              "goal_us": GOAL_US, "launch_path": ours.launch_path, "driver_floor_us": us["driver floor"],
              "c_floor_us": us.get("C floor"), "rows": rows}
    path = schema.write_record(record, out, schema.record_filename(record))
    print(table(record))
    print(f"wrote {path}", file=sys.stderr)
    return 0 if all(r["correct"] for r in rows) else 1


def table(record: dict) -> str:
    rows = record["rows"]
    ours = next(r.get("us_per_call") for r in rows if r["implementation"] == "tileworkbench kernel(a, b)"
                and r["mode"] == "plain")
    lines = ["| implementation | mode | us per call (host) | over ours (kernel(a, b)) | wall us per call |",
             "|---|---|---|---|---|"]
    for r in rows:
        us = r.get("us_per_call")
        ratio = f"{us / ours:.2f}x" if us and ours and r["mode"] == "plain" else ""
        wall = f"{r['wall_us_per_call']:.2f}" if r.get("wall_us_per_call") else ""
        failed = r.get("error") or ("wrong result" if not r["correct"] else "")
        lines.append(f"| {r['implementation']} | {r['mode']} | {us:.2f} | {ratio} | {wall} |" if us else
                     f"| {r['implementation']} | {r['mode']} | {failed} | | {wall} |")
    lines.append(f"| driver floor (packed parameters + cuLaunchKernel) | plain | {record['driver_floor_us']:.2f} | | |")
    if record.get("c_floor_us"):
        lines.append(f"| the driver from C (the C path's cuLaunchKernel alone) | plain | {record['c_floor_us']:.2f} | | |")
    lines.append(f"\nours launched through: {record.get('launch_path', 'Python')}")
    return "\n".join(lines)
