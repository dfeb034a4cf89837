"""The buffers ``tw.timeline`` kernels record into (``runtime/include/tw/timeline.h``): one per
kernel, sized for the launch's grid, kept for ``kernel.timeline()`` to read. ``Runtime`` has these
methods; the generated launcher calls ``rt.timeline_buffer`` and ``rt.timeline_wave``."""

from __future__ import annotations

from ..errors import KernelRuntimeError
from ..ir.records import timeline_sampled_blocks


class TimelineBuffers:
    """``self.timelines``: kernel name -> (buffer, grid, stream) of its last launch (``Runtime``
    sets it up)."""

    def timeline_buffer(self, kernel_name, grid, layout, stream: int = 0) -> int:
        """The zeroed buffer a ``tw.timeline`` kernel records into, sized for ``grid`` (``layout``:
        every k-th block, streams per block, words per stream; the launcher's ``TIMELINE``), kept
        as the kernel's last timeline; its device pointer. Zeroed when allocated and reused while
        the size stays, not zeroed again: every stream's header is rewritten by the launch (its
        open marks it not closed), so a call costs no memset. Not inside a CUDA graph capture: it
        is read on the host."""
        every, streams, words = layout
        blocks = int(grid[0]) * int(grid[1]) * int(grid[2])
        size = timeline_sampled_blocks(blocks, every) * streams * words
        if size >= 1 << 32:  # tw/timeline.h addresses the buffer by 32-bit word offsets
            raise KernelRuntimeError(f"{kernel_name}'s timeline buffer would hold {size} words, more than the 2^32 "
                                     "a kernel addresses: record fewer blocks (tw.timeline k) or lower "
                                     "tw.timeline_capacity")
        import cupy

        if stream and cupy.cuda.runtime.streamIsCapturing(stream):
            raise KernelRuntimeError(f"{kernel_name} records a timeline (tw.timeline) and cannot be captured in a "
                                     "CUDA graph: its buffer is read back after each call. Compile it without "
                                     "tw.timeline for graphs")
        previous = self.timelines.get(kernel_name)
        buffer = previous[0] if previous is not None and previous[0].size == size else None
        if buffer is None:
            buffer = cupy.zeros(size, dtype=cupy.uint32)
        self.timelines[kernel_name] = (buffer, tuple(int(g) for g in grid), stream)
        return buffer.data.ptr

    def timeline_wave(self, kernel_name, block, smem_bytes: int):
        """The kernel's wave (blocks resident at once, ``resident_blocks``) as its ``unsigned int``
        parameter: a sampled block of the last wave does not record (``tw/timeline.h``)."""
        import numpy as np

        wave = self.timeline_waves[kernel_name] = min(self.resident_blocks(kernel_name, block, smem_bytes),
                                                      (1 << 32) - 1)
        return np.uint32(wave)

    def timeline_words(self, kernel_name):
        """The words, grid and wave (``timeline_wave``; None if not asked) of ``kernel_name``'s last
        timeline (waits for its launch), or None."""
        last = self.timelines.get(kernel_name)
        if last is None:
            return None
        buffer, grid, stream = last
        return read_after(buffer, stream), grid, self.timeline_waves.get(kernel_name)


def read_after(buffer, stream: int):
    """A device array's words (a timeline buffer, the debug record), read once the work queued on ``stream`` before now is done."""
    if stream:
        import cupy

        cupy.cuda.runtime.streamSynchronize(stream)
    return buffer.get()
