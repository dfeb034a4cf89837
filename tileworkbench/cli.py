"""The ``tileworkbench`` command.

``tileworkbench report FILE.py::FUNC -o report.html [--args ...]`` lowers a kernel (a
``@T.prim_func``, or a builder called with ``--args``), runs the analyses and writes the
self-contained HTML report. ``FILE.py`` may also be a module path
(``tileworkbench.examples.gemm::matmul_tma_copy``) or a saved trace (``trace.json``).
``tileworkbench trace ...`` writes the trace JSON instead.
"""

from __future__ import annotations

import argparse
import json
import sys


def _add_kernel_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("kernel", help="FILE.py::FUNC, package.module::FUNC, or a trace .json")
    p.add_argument("--args", nargs="*", default=[], metavar="VALUE",
                   help="builder arguments (Python literals, bare words are strings, NAME=VALUE keywords)")
    p.add_argument("--target", default="sm_90", help="target arch (default sm_90; no GPU is needed)")
    p.add_argument("--pass-config", action="append", default=[], metavar="KEY=VALUE",
                   help="a pass config, repeatable: tl.disable_warp_specialized=true, tw.barrier_check=warn, ... "
                        "(docs/architecture.md lists them)")
    p.add_argument("--out-idx", help="output parameter index (or comma-separated indices)")
    p.add_argument("--compare-args", nargs="*", metavar="VALUE",
                   help="builder arguments of a second variant; its sources are diffed in the report")
    p.add_argument("--compare-label", help="label of the second variant")


DESCRIPTION = """\
Lower a tile kernel for Hopper (no GPU needed) and write what the compiler did: every pass's IR,
the generated CUDA, the shared-memory plan and the barrier timeline, as an HTML report or as the
trace JSON the JupyterLab extension draws."""
EXAMPLES = """examples:
  tileworkbench report tileworkbench.examples.gemm::matmul_tma_copy \\
      --args 1024 1024 1024 128 128 32 float16 float16 float32 128 2 -o report.html
  tileworkbench report my_kernels.py::main -o main.html
  tileworkbench trace my_kernels.py::build --args 4096 block_M=128 --pass-config tw.barrier_check=warn -o trace.json
  tileworkbench report trace.json -o report.html        # a saved trace, rendered again
"""
_FORMATTER = argparse.RawDescriptionHelpFormatter


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tileworkbench", description=DESCRIPTION, epilog=EXAMPLES,
                                     formatter_class=_FORMATTER)
    sub = parser.add_subparsers(dest="command", required=True, metavar="{report,trace}")
    report = sub.add_parser("report", help="write the self-contained HTML report of a kernel",
                            description="Lower the kernel, run the analyses and write one HTML file (no server "
                                        "needed) with the passes, sources, shared-memory plan and barrier timeline.",
                            epilog=EXAMPLES, formatter_class=_FORMATTER)
    _add_kernel_args(report)
    report.add_argument("-o", "--output", default="report.html", help="HTML file to write (default report.html)")
    trace = sub.add_parser("trace", help="write the trace JSON of a kernel",
                           description="Lower the kernel and write its trace (the MIME bundle's JSON, "
                                       "docs/trace-schema.md) to a file or stdout.",
                           epilog=EXAMPLES, formatter_class=_FORMATTER)
    _add_kernel_args(trace)
    trace.add_argument("-o", "--output", default="-", help="JSON file to write (default: stdout)")
    return parser


def _trace_of(opts, args_tokens) -> dict:
    from .notebook import build

    if opts.kernel.endswith(".json") and "::" not in opts.kernel:
        with open(opts.kernel, encoding="utf-8") as fh:
            return json.load(fh)
    obj, _ = build.load_object(opts.kernel)
    args, kwargs = build.parse_call_args(args_tokens)
    func = build.prim_func_of(obj, args, kwargs)
    from .jit.lower import lower

    from .backend.nvrtc import nvrtc_version

    # NVRTC where it can be loaded (no GPU needed): the report then shows registers and spills
    artifact = lower(func, target=build.parse_target(opts.target), pass_configs=build.parse_pass_configs(opts.pass_config),
                     out_idx=build.parse_out_idx(opts.out_idx), enable_device_compile=nvrtc_version() is not None)
    doc = artifact.trace.to_dict()
    target = opts.kernel.rpartition("::")[2]
    doc["kernel"]["label"] = f"{target}({', '.join(args_tokens)})" if args_tokens else target
    return doc


def document(opts) -> dict:
    """The trace document the options describe (with ``compare`` when asked for)."""
    doc = _trace_of(opts, opts.args)
    if opts.compare_args is not None:
        from .report import with_compare

        other = _trace_of(opts, opts.compare_args)
        label = opts.compare_label or f"{opts.kernel.rpartition('::')[2]}({' '.join(opts.compare_args)})"
        doc = with_compare(doc, other, label)
    return doc


def main(argv=None) -> int:
    from .errors import CompileError

    opts = build_parser().parse_args(argv)
    try:
        doc = document(opts)
    except CompileError as err:
        print(f"tileworkbench: compile error\n{err}", file=sys.stderr)
        return 1
    except (OSError, ValueError, AttributeError, TypeError, ImportError) as err:
        print(f"tileworkbench: {err}", file=sys.stderr)
        return 2
    if opts.command == "report":
        from .report import render_page

        with open(opts.output, "w", encoding="utf-8") as fh:
            fh.write(render_page(doc))
        n_err = sum(1 for f in doc.get("findings", []) if f.get("severity") == "error")
        print(f"wrote {opts.output} ({doc['kernel'].get('name')}: {len(doc.get('passes', []))} passes"
              + (f", {n_err} error finding(s)" if n_err else "") + ")")
    else:
        text = json.dumps(doc, indent=1)
        if opts.output == "-":
            print(text)
        else:
            with open(opts.output, "w", encoding="utf-8") as fh:
                fh.write(text)
            print(f"wrote {opts.output} ({doc['kernel'].get('name')}: {len(doc.get('passes', []))} passes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
