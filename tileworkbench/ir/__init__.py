"""The IR of tileworkbench: nodes, printer, visitors and the expression simplifier."""

from . import nodes
from .nodes import *  # noqa: F401,F403
from .printer import print_ir, expr_text, stmt_text
from .simplify import simplify, interval
from .visitor import IRMutator, IRVisitor, substitute, collect
