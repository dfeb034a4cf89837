"""The IR of tileworkbench: nodes, printer, visitors and the expression simplifier."""

from . import nodes  # noqa: F401 (re-exported)
from .nodes import *  # noqa: F401,F403
from .printer import print_ir, expr_text, stmt_text  # noqa: F401 (re-exported)
from .simplify import simplify, interval  # noqa: F401 (re-exported)
from .visitor import IRMutator, IRVisitor, substitute, collect  # noqa: F401 (re-exported)
