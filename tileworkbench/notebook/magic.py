"""The ``%%tilekernel`` cell magic (``%load_ext tileworkbench`` registers it).

::

    %%tilekernel matmul 1024 1024 1024 --out-idx 2 --target sm_90 --pass-config tl.disable_warp_specialized=true
    @tileworkbench.jit ...   # or a plain builder
    def matmul(M, N, K): ...

The cell runs in the user's namespace; the kernel named on the magic line (default: the last
function the cell defines) is a ``@T.prim_func`` or a builder called with the values after its
name. It is compiled with ``tileworkbench.compile`` (without a GPU the Kernel is not loaded on a
device), its trace gets the shared-memory plan and the barrier simulation, the Kernel is bound
to ``--name`` (default: the kernel's name on the magic line) and the workbench view is shown.
Compile errors show as the kernel line with a caret, not as a traceback through the compiler.
``--debug`` compiles in debug mode (pass config ``tw.debug_barrier_timeout=2``): a barrier wait
that would hang gives up after 2 s and the call raises ``KernelRuntimeError`` saying where.
"""

from __future__ import annotations

import argparse
import ast
import shlex

from ..errors import CompileError, label_source
from ..target import PassConfigKey, normalize_pass_configs
from . import build

DEBUG_TIMEOUT_S = 2.0  # what --debug means


class TileKernelError(CompileError):
    """A compile error raised by the magic; IPython shows ``_render_traceback_`` instead of a
    traceback through the compiler's frames."""

    def _render_traceback_(self):
        return ["tileworkbench: compile error", *str(self).splitlines()]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="%%tilekernel", add_help=False, exit_on_error=False,
                                description="compile the kernel a cell defines and show the workbench")
    p.add_argument("kernel", nargs="*", help="kernel (or builder) name, then builder arguments")
    p.add_argument("--name", help="bind the compiled Kernel to this name (default: the kernel's name)")
    p.add_argument("--out-idx", help="output parameter index (or comma-separated indices)")
    p.add_argument("--target", default="auto", help="sm_90 (default: this machine's GPU, else sm_90a)")
    p.add_argument("--pass-config", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--compare-args", help="builder arguments of a second variant to diff against")
    p.add_argument("--compare-pass-config", action="append", default=[], metavar="KEY=VALUE",
                   help="pass configs of the second variant (added to --pass-config)")
    p.add_argument("--compare-label", help="label of the second variant")
    p.add_argument("--stepper", action="store_true", help="also show the ipywidgets pass stepper")
    p.add_argument("--debug", action="store_true",
                   help=f"bounded barrier waits: a hang becomes an error after {DEBUG_TIMEOUT_S:g} s "
                        "(tw.debug_barrier_timeout)")
    p.add_argument("--timeline", action="store_true",
                   help="record a measured timeline (tw.timeline): call the kernel, then kernel.timeline(), and "
                        "display the kernel again to see it over the plan")
    p.add_argument("--no-display", action="store_true", help="compile and bind, show nothing")
    return p


def parse_line(line: str) -> argparse.Namespace:
    from IPython.core.error import UsageError

    try:
        return _parser().parse_intermixed_args(shlex.split(line))
    except (argparse.ArgumentError, ValueError, SystemExit) as err:
        raise UsageError(f"%%tilekernel: {err}\n{_parser().format_usage()}") from None


def _last_function(cell: str) -> str | None:
    try:
        tree = ast.parse(cell)
    except SyntaxError:
        return None
    names = [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    return names[-1] if names else None


def _leading_blank_lines(text: str) -> int:
    n = 0
    for line in text.splitlines():
        if line.strip():
            break
        n += 1
    return n


def _run_cell_code(shell, cell: str) -> None:
    """Execute the cell body in the user namespace so that ``inspect.getsource`` finds the
    functions it defines (the front end parses kernels from their source)."""
    # Pad with blank lines so that kernel line numbers match the cell as the user sees it:
    # the %%tilekernel line is line 1, and transform_cell drops leading blank lines.
    code = shell.transform_cell(cell)
    code = "\n" * (1 + _leading_blank_lines(cell) - _leading_blank_lines(code)) + code
    filename = shell.compile.cache(code, shell.execution_count, raw_code=code)
    # The number Jupyter shows for this cell, not /tmp/ipykernel_NNNN/NNNN.py. IPython 9 counts the
    # cell before running it (execution_count is then the next one's), IPython 8 after:
    # the display hook's prompt_count is this cell's number under both.
    label_source(filename, f"In [{shell.displayhook.prompt_count}]")
    # shell.compile, not compile(): the built-in would inherit this module's __future__ flags
    # (string annotations), the shell's compiler uses the user's.
    exec(shell.compile(code, filename, "exec"), shell.user_ns)  # noqa: S102 - running the user's cell is the point


def _short(err: CompileError) -> TileKernelError:
    short = TileKernelError(err.message, err.loc)
    short.__cause__ = None
    return short


def tilekernel(line: str, cell: str, shell=None):
    """Implementation of ``%%tilekernel`` (see the module docstring)."""
    from IPython import get_ipython
    from IPython.core.error import UsageError
    from IPython.display import display

    from ..jit.kernel import compile as tw_compile
    from ..jit.lower import lower
    from .display import TraceView
    from .stepper import stepper

    shell = shell or get_ipython()
    opts = parse_line(line)
    try:
        _run_cell_code(shell, cell)
    except CompileError as err:
        raise _short(err) from None
    kernel_name = opts.kernel[0] if opts.kernel else _last_function(cell)
    if kernel_name is None:
        raise UsageError("%%tilekernel: the cell defines no function; name the kernel on the magic line")
    if kernel_name not in shell.user_ns:
        raise UsageError(f"%%tilekernel: the cell does not define {kernel_name!r}")
    obj = shell.user_ns[kernel_name]
    args, kwargs = build.parse_call_args(opts.kernel[1:])
    try:
        configs = normalize_pass_configs(build.parse_pass_configs(opts.pass_config))
        if opts.debug:  # an explicit --pass-config tw.debug_barrier_timeout=... wins
            configs.setdefault(PassConfigKey.TW_DEBUG_BARRIER_TIMEOUT.value, DEBUG_TIMEOUT_S)
        if opts.timeline:  # an explicit --pass-config tw.timeline=k wins
            configs.setdefault(PassConfigKey.TW_TIMELINE.value, True)
        out_idx = build.parse_out_idx(opts.out_idx)
    except ValueError as err:
        raise UsageError(f"%%tilekernel: {err}") from None
    target = build.parse_target(opts.target)
    try:
        func = build.prim_func_of(obj, args, kwargs)
        kernel = tw_compile(func, out_idx=out_idx, target=target, pass_configs=configs)  # its trace has it all
        compare = None
        if opts.compare_args is not None or opts.compare_pass_config:
            c_args, c_kwargs = build.parse_call_args(shlex.split(opts.compare_args or ""))
            if opts.compare_args is None:
                c_args, c_kwargs = args, kwargs
            c_configs = {**configs, **build.parse_pass_configs(opts.compare_pass_config)}
            c_func = build.prim_func_of(obj, c_args, c_kwargs)
            compare = lower(c_func, target=target, pass_configs=c_configs, out_idx=out_idx).trace
    except CompileError as err:
        raise _short(err) from None
    bind = opts.name or kernel_name
    shell.user_ns[bind] = kernel
    if opts.no_display:
        return
    label = opts.compare_label or (f"{kernel_name}({opts.compare_args})" if opts.compare_args is not None
                                   else "compare")
    view = TraceView(kernel.trace, compare, label)
    display(view)
    if opts.stepper:
        display(stepper(view))
    return


def register_magics(ipython) -> None:
    """Register ``%%tilekernel`` on an IPython shell."""

    def _magic(line, cell):
        return tilekernel(line, cell, ipython)

    _magic.__doc__ = __doc__
    ipython.register_magic_function(_magic, magic_kind="cell", magic_name="tilekernel")
