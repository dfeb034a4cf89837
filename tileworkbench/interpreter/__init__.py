"""The CPU interpreter: tile programs run without a GPU (``compile(..., target="cpu")``, or
``TILEWORKBENCH_INTERPRET=1`` with ``target="auto"``).

It runs the kernel's IR after the tile-level passes (``jit.lower.lower_tile_level``): what the
GPU would run, before threads, TMA and tile operations are lowered. ``values`` evaluates
expressions with numpy, ``machine`` runs one block (tile operations whole, ``T.Parallel`` nests
vectorised, barriers with phases, the sides of a warp-specialised block side by side), ``kernel``
binds arguments and runs the blocks one after another.
"""

from .kernel import CpuKernel, CpuSequence
from .values import Unsupported

__all__ = ["CpuKernel", "CpuSequence", "Unsupported"]
