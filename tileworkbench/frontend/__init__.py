"""Front end: the Python AST of a ``@T.prim_func`` becomes our IR."""

from .parser import parse

__all__ = ["parse"]
