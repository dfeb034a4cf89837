"""How many blocks of a kernel run at once (one wave) and how many a persistent grid launches:
``Runtime``'s occupancy questions, from the driver's occupancy calculator (a mixin: ``Runtime``
holds the loaded functions and the ``_resident_blocks`` cache)."""

from __future__ import annotations

from ..errors import KernelRuntimeError


def balanced_blocks(tiles: int, resident: int) -> int:
    """The fewest blocks that finish ``tiles`` tiles in as few rounds as ``resident`` blocks would.

    A block walking tiles ``blockIdx.x + i * gridDim.x`` runs ``ceil(tiles / blocks)`` of them at
    most, and that count sets the kernel's time. Launching more blocks than needed for it buys
    nothing and, on a GPU at its power limit (every large GEMM on the H200), costs clock: 512
    tiles on 128 blocks (4 each) ran 0.5-0.8% faster than on 132 (3 or 4 each), the same 8192^3
    kernel ran the same either way (scripts/experiments/persistent_grid_size.py)."""
    tiles, resident = max(1, tiles), max(1, resident)
    rounds = -(-tiles // resident)
    return -(-tiles // rounds)


class Occupancy:
    """``persistent_blocks`` and ``resident_blocks`` for ``Runtime`` (``self.function(name)``
    and ``self._resident_blocks``: its own)."""

    def persistent_blocks(self, kernel_name, tiles: int, block, smem_bytes: int) -> int:
        """Blocks for a persistent kernel over ``tiles`` tiles: ``balanced_blocks`` of the tiles and
        the blocks that can be resident at once (``resident_blocks``)."""
        return balanced_blocks(tiles, self.resident_blocks(kernel_name, block, smem_bytes))

    def resident_blocks(self, kernel_name, block, smem_bytes: int) -> int:
        """Blocks of the kernel resident at once on the current device (one wave): multiprocessors
        times the blocks one holds, from the driver's occupancy calculator for this kernel, its
        threads and shared memory."""
        import cupy

        device = cupy.cuda.runtime.getDevice()
        resident = self._resident_blocks.get((kernel_name, device))
        if resident is None:
            fn = self.function(kernel_name)
            per_multiprocessor = fn.max_active_blocks(block[0], smem_bytes)
            if per_multiprocessor < 1:
                raise KernelRuntimeError(f"{kernel_name} cannot run: no block of {block[0]} threads and "
                                         f"{smem_bytes} bytes of shared memory fits a multiprocessor")
            multiprocessors = cupy.cuda.Device(device).attributes["MultiProcessorCount"]
            resident = self._resident_blocks[(kernel_name, device)] = multiprocessors * per_multiprocessor
        return resident
