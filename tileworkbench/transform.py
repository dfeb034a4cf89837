"""TileLang's ``tilelang.transform``: here only ``PassConfigKey`` (TileLang programs import it from
this module). TileLang's passes themselves are TVM's; asking for one says so."""

from __future__ import annotations

from .target import PassConfigKey

__all__ = ["PassConfigKey"]


def __getattr__(name):
    if name.startswith("__"):  # what tools probe modules for (__path__, __wrapped__ ...)
        raise AttributeError(f"module 'tileworkbench.transform' has no attribute {name!r}")
    raise ImportError(f"tileworkbench.transform.{name} is not supported: TileLang's transform passes are TVM's, and "
                      "tileworkbench has no TVM underneath; its passes run inside lower() and compile() "
                      "(tileworkbench.lower(func).trace lists them). Only PassConfigKey is here",
                      name=f"tileworkbench.transform.{name}")
