"""Experiment: kernels where ptxas spills, with their main loop reading the thread index again
(``tw.reread_thread_index`` True: ``passes/reread_thread_index.py``) and without (False), on the GPU
in one process: results compared, then both timed in alternating rounds. Each target is compiled
once more as ``jit.lower`` compiles it by itself, which prints the form it keeps and why
(``resources.thread_index_reread``: the spill bytes and registers of each form).

    PYTHONPATH=.:scripts/experiments python3 scripts/experiments/reread_ab.py TARGET...

TARGET is one of

* ``family:NAME``: every case of ``examples/tilelang_programs/NAME.py`` (the bench's inputs,
  each form checked against the case's reference, then ``do_bench`` alternately);
* ``perf:FILE``: a TileLang example file (``tilelang`` meaning tileworkbench) whose
  ``run_regression_perf()`` builds, runs and times its kernels (its own inputs; ms returned);
* ``v32bwd:EXAMPLES``: DeepSeek v3.2's sparse MLA backward (``EXAMPLES/deepseek_v32``) on its
  script's inputs (as ``sparse_mla_bwd_edits.py``), the two forms' dQ and dKV compared;
* ``ftfwd:EXAMPLES``: the fine-tuning sparse MLA forward (``EXAMPLES/dsa_sparse_finetune``) on
  its script's inputs, at the script's configuration (64-row blocks, 256 threads) and at the
  kernel's default (32, 128), the forms' outputs compared.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import tileworkbench as tw  # noqa: E402
from tileworkbench.jit import lower as lower_module  # noqa: E402
from tileworkbench.target import PassContext  # noqa: E402

ROUNDS = 5
FORMS = {"reread": {tw.PassConfigKey.TW_REREAD_THREAD_INDEX: True},
         "plain": {tw.PassConfigKey.TW_REREAD_THREAD_INDEX: False}}


def _report_tries():
    """Print each retry's outcome as compiles happen."""
    tried = lower_module._reread_where_it_spills_less

    def reporting(artifact, *args):
        result = tried(artifact, *args)
        print(f"    {artifact.kernel_name}: spills {artifact.trace.resources.get('thread_index_reread')}", flush=True)
        return result

    lower_module._reread_where_it_spills_less = reporting


def _in_form(form: str, make):
    """``make()`` with the form's configs; "auto": as jit.lower chooses (its choice printed)."""
    with PassContext(config=FORMS.get(form, {})):
        return make()


def _forms(make) -> dict:
    _in_form("auto", make)
    return {form: _in_form(form, make) for form in FORMS}


def _timed(calls: dict, do_bench) -> dict:
    times = {name: [] for name in calls}
    for _ in range(ROUNDS):
        for name, call in calls.items():
            times[name].append(call() if do_bench is None else do_bench(call, warmup=25, rep=100))
    return {name: statistics.median(samples) for name, samples in times.items()}


def _print(label: str, ms: dict):
    base = ms["plain"]
    for form, t in ms.items():
        print(f"{label} {form:7s} {t:.4f} ms  {base / t:.3f}x of plain", flush=True)


def family(name: str):
    import importlib

    import torch

    from tileworkbench.bench.tilelang_programs import check
    from tileworkbench.profiler import do_bench

    module = importlib.import_module(f"tileworkbench.examples.tilelang_programs.{name}")
    for case_name, case in module.CASES.items():
        print(f"{name}.{case_name}:", flush=True)
        kernels = _forms(case["compile"])
        torch.manual_seed(0)
        inputs = case["inputs"](torch)
        for form, kernel in kernels.items():
            verdict = check(kernel, case, inputs, torch)
            print(f"    {form}: correct {verdict['correct']}, max abs err {verdict['max_abs_err']:.3g}", flush=True)
        _print(f"{name}.{case_name}", _timed({f: (lambda k=k: k(*inputs)) for f, k in kernels.items()}, do_bench))


def perf(path: str):
    import tilelang_examples as te

    file = Path(path)
    te._install(file.parent.parent)
    sys.path.insert(0, str(file.parent))
    module = te._load(file)
    _in_form("auto", module.run_regression_perf)
    _print(file.name, _timed({f: (lambda f=f: _in_form(f, module.run_regression_perf)) for f in FORMS}, None))


def v32bwd(examples: str):
    from _edited import v32_sparse_mla_bwd
    from tileworkbench.profiler import do_bench

    m, args, call_args, dkv = v32_sparse_mla_bwd(examples)
    kernels = _forms(lambda: m.bwd.compile(*args))
    results = {}
    for form, kernel in kernels.items():
        dkv.zero_()
        results[form] = (kernel(*call_args).float(), dkv.clone())
    for what, (a, b) in zip(("dQ", "dKV"), zip(results["plain"], results["reread"])):
        err = ((a - b).norm() / a.norm()).item()
        print(f"    {what}: relative difference {err:.2e}", flush=True)
    _print("v3.2 sparse_mla_bwd", _timed({f: (lambda k=k: k(*call_args)) for f, k in kernels.items()}, do_bench))


def ftfwd(examples: str):
    import torch

    import tilelang_examples as te
    from tileworkbench.profiler import do_bench

    examples = Path(examples)
    te._install(examples)
    sys.path.insert(0, str(examples / "dsa_sparse_finetune"))
    m = te._load(examples / "dsa_sparse_finetune" / "sparse_mla_fwd.py")
    S, H, HKV, DQK, topk = 4096, 128, 1, 576, 1024  # the script's
    torch.manual_seed(0)
    q = torch.randn((S, H, DQK), dtype=torch.bfloat16, device="cuda")
    kv = torch.randn((S, HKV, DQK), dtype=torch.bfloat16, device="cuda")
    offsets = torch.tensor([0, S // 2 - 1, S], dtype=torch.int32, device="cuda")
    indices = torch.full((S, HKV, topk), S, dtype=torch.int32, device="cuda")
    for i in range(offsets.shape[0] - 1):
        for t in range(int(offsets[i + 1] - offsets[i])):
            chosen = torch.randperm(max(1, t))[:topk]
            indices[offsets[i] + t, 0, :len(chosen)] = chosen
    for block_I, threads in ((64, 256), (32, 128)):
        def call(block_I=block_I, threads=threads):
            return m.sparse_mla_fwd_interface(q, kv, indices, offsets, block_I=block_I, num_stages=2, threads=threads)

        _in_form("auto", call)
        outs = {form: _in_form(form, call)[0].float() for form in FORMS}
        err = ((outs["plain"] - outs["reread"]).norm() / outs["plain"].norm()).item()
        print(f"    block_I {block_I}, {threads} threads: relative difference {err:.2e}", flush=True)
        _print(f"fine-tuning sparse_mla_fwd {block_I}x{threads}",
               _timed({f: (lambda f=f, c=call: _in_form(f, c)) for f in FORMS}, do_bench))


def main(targets: list):
    _report_tries()
    for target in targets:
        kind, _, what = target.partition(":")
        {"family": family, "perf": perf, "v32bwd": v32bwd, "ftfwd": ftfwd}[kind](what)


if __name__ == "__main__":
    main(sys.argv[1:])
