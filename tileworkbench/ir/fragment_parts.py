"""Layouts of a fragment indexed by part of another's indices, a tensor-core accumulator's mostly:
its rows (``ProjectedLayout``: the result of ``T.reduce_*(x, s, dim=1)``, ``s[i]`` read in a loop over
``x[i, j]``), its columns (``ColumnsLayout``: ``mask[j]`` in a loop over ``acc_s[i, j]``) and runs of its
rows (``SegmentsLayout``: a fragment view's heads summed). Every thread holding an element of the
other fragment holds the part it names, so a loop over that fragment reads this one from its own
registers. Built on ``ir.layout``'s layouts (which do not know these)."""

from __future__ import annotations

from dataclasses import dataclass

from . import nodes as ir
from .layout import BlockedLayout, MmaAccumLayout, WgmmaAccumLayout

@dataclass(frozen=True, eq=False)
class ProjectedLayout:
    """The layout of a fragment indexed by some dimensions of another (``kept`` of ``base``'s):
    the result of reducing ``base``'s fragment along the others (``T.reduce_sum(x, s, dim=1)``),
    or a fragment read as ``s[i]`` in a loop over ``x[i, j]``. Every thread that holds an element
    ``x[i, j]`` holds ``s[i]`` (a copy of it: the threads that hold one row share it), in slot
    :meth:`slot_of` of its base element, so a loop over ``x`` reads ``s`` from its own registers.

    Defined for a row (``kept == (0,)``) of a 2-D wgmma or mma.sync accumulator, and of a 2-D
    blocked fragment whose row length (padded, where ``BlockedLayout.row`` says) divides, or is
    divided by, one sweep of the threads (their count times the run length): :func:`project` says
    why not otherwise. ``lane_masks``: the
    ``shfl.xor`` distances between threads that share an element within a warp; ``warp_sharers``:
    how many warps share one (combined through shared memory), ``warp_slot(tid)`` which of them a
    thread is in."""

    base: object
    kept: tuple

    def _rows_key(self) -> tuple:
        """What decides which thread holds which row in which slot: the rows of two tensor-core
        accumulators of one height and warp layout are the same whatever their widths (the
        scores and the output of attention: 64 x 64 and 64 x 256), so those compare equal."""
        b = self.base
        if isinstance(b, WgmmaAccumLayout):
            return ("wgmma", b.shape[0], b.warpgroups, b.n_groups, self.kept)
        if isinstance(b, MmaAccumLayout):
            return ("mma", b.shape[0], b.warps_m, b.warps_n, self.kept)
        return ("base", b, self.kept)

    def __eq__(self, other) -> bool:
        return isinstance(other, ProjectedLayout) and self._rows_key() == other._rows_key()

    def __hash__(self) -> int:
        return hash(self._rows_key())

    @property
    def shape(self) -> tuple:
        return tuple(self.base.shape[d] for d in self.kept)

    @property
    def threads(self) -> int:
        return self.base.threads

    @property
    def local_size(self) -> int:
        """Rows each thread holds."""
        b = self.base
        if isinstance(b, WgmmaAccumLayout):
            return 2 * (b.shape[0] // b.warpgroups // 64)
        if isinstance(b, MmaAccumLayout):
            return 2 * b.mi
        m, n = b.shape[0], b.row_length
        sharers = self._blocked_row_sharers
        return m if sharers == b.threads else -(-b.local_size // (n // sharers))

    @property
    def _blocked_row_sharers(self) -> int:
        """Threads of a blocked base holding parts of one row: all of them where a row is whole
        sweeps of the threads, else the consecutive threads whose runs make up one row."""
        b = self.base
        n = b.row_length
        return b.threads if n % (b.threads * b.vec) == 0 else n // b.vec

    def slot_of(self, j: ir.Expr) -> ir.Expr:
        """The slot holding the row of base element ``j`` (of the same thread). Only for the
        ``base`` this layout was projected from: a loop over another fragment with equal rows asks
        that fragment's own projection (``rules.fragments.FragmentAccess``)."""
        b = self.base
        if isinstance(b, WgmmaAccumLayout):
            return (j // (b.group_columns // 2)) * 2 + (j // 2) % 2
        if isinstance(b, MmaAccumLayout):
            return (j // (4 * b.ni)) * 2 + (j // 2) % 2
        # a thread holds a row's elements together: n // sharers of them (a run, or whole sweeps' worth)
        return j // (b.row_length // self._blocked_row_sharers)

    def forward(self, tid: ir.Expr, r: ir.Expr) -> tuple[tuple, ir.Expr | None]:
        """((row,), guard) of slot ``r`` of thread ``tid``."""
        b = self.base
        if isinstance(b, WgmmaAccumLayout):
            (gm, _), warp, lane = b.group_of(tid), (tid % 128) // 32, tid % 32
            row = gm * (b.shape[0] // b.warpgroups) + (r // 2) * 64 + warp * 16 + lane // 4 + (r % 2) * 8
            return (row,), None
        if isinstance(b, MmaAccumLayout):
            warp, lane = tid // 32, tid % 32
            row = (warp // b.warps_n) * (b.shape[0] // b.warps_m) + (r // 2) * 16 + lane // 4 + (r % 2) * 8
            return (row,), None
        m, n = b.shape[0], b.row_length
        sharers = self._blocked_row_sharers
        if sharers == b.threads:
            return (r,), None
        row = r * (b.threads // sharers) + tid // sharers
        return (row,), (None if (m * n) % (b.threads * b.vec) == 0 else ir.cmp("<", row, m))

    @property
    def lane_masks(self) -> tuple:
        b = self.base
        if isinstance(b, (WgmmaAccumLayout, MmaAccumLayout)):
            return (1, 2)  # the four lanes lane // 4 names hold one row
        return tuple(1 << k for k in range(min(self._blocked_row_sharers, 32).bit_length() - 1))

    @property
    def warp_sharers(self) -> int:
        b = self.base
        if isinstance(b, WgmmaAccumLayout):
            return b.n_groups  # warp w of each warpgroup along N holds the same rows
        if isinstance(b, MmaAccumLayout):
            return b.warps_n
        return max(1, self._blocked_row_sharers // 32)

    def warp_slot(self, tid: ir.Expr) -> ir.Expr:
        """Which of the ``warp_sharers`` warps that share its elements thread ``tid`` is in."""
        b = self.base
        if isinstance(b, WgmmaAccumLayout):
            return b.group_of(tid)[1] if b.n_groups > 1 else ir.const(0)
        if isinstance(b, MmaAccumLayout):
            return (tid // 32) % b.warps_n
        return (tid % self._blocked_row_sharers) // 32

    @property
    def sharers(self) -> int:
        """Threads holding each row (lanes of a warp times warps)."""
        return (1 << len(self.lane_masks)) * self.warp_sharers

    def sharer_index(self, tid: ir.Expr) -> ir.Expr:
        """Which of the ``sharers`` of its rows thread ``tid`` is (0 to sharers - 1): its lane
        among the lanes sharing them, then its warp among the warps."""
        lanes = 1 << len(self.lane_masks)
        index = tid % lanes if lanes > 1 else ir.const(0)
        return index + self.warp_slot(tid) * lanes if self.warp_sharers > 1 else index

    def owner(self, tid: ir.Expr) -> ir.Expr | None:
        """Whether thread ``tid`` is the one of the threads sharing its elements that stores them to
        memory (the first lane of the first warp), or None where no thread shares them."""
        conds = []
        lanes = 1 << len(self.lane_masks)
        if lanes > 1:
            conds.append(ir.cmp("==", tid % lanes, 0))
        if self.warp_sharers > 1:
            conds.append(ir.cmp("==", self.warp_slot(tid), 0))
        return ir.logical_and(*conds) if conds else None

    def describe(self) -> str:
        return f"rows of {self.base.describe()} ({self.local_size} per thread)"


@dataclass(frozen=True)
class ColumnsLayout:
    """The layout of a fragment read as the columns of a tensor-core accumulator: ``mask[j]`` in a
    loop over ``acc_s[i, j]`` (DeepSeek's sparse MLA). Every thread that holds an element
    ``x[i, j]`` holds ``c[j]`` (a copy of it: the threads that hold one column share it), in slot
    :meth:`slot_of` of its base element, so a loop over ``x`` reads ``c`` from its own registers;
    a loop over ``c`` alone runs each thread over the columns it holds, and :meth:`owner` says which
    of the threads sharing a column stores it to memory. Defined for a wgmma or mma.sync
    accumulator ``base``: a thread holds pairs of neighbouring columns, ``2 (lane % 4)`` and the
    next, in each block of 8 of its warp(group)'s columns. With ``split``, the fragment is 2-D,
    ``(N // split, split)``, column ``c`` its element ``(c // split, c % split)`` (read as
    ``w[j // H, j % H]``: ``rules.fragments.is_column``)."""

    base: object
    split: int = 0

    @property
    def shape(self) -> tuple:
        n = self.base.shape[1]
        return (n,) if not self.split else (n // self.split, self.split)

    @property
    def threads(self) -> int:
        return self.base.threads

    @property
    def _blocks(self) -> int:
        """Blocks of 8 columns a warp(group) holds."""
        b = self.base
        return b.group_columns // 8 if isinstance(b, WgmmaAccumLayout) else b.ni

    @property
    def local_size(self) -> int:
        return 2 * self._blocks

    def slot_of(self, j: ir.Expr) -> ir.Expr:
        """The slot holding the column of base element ``j`` of the same thread (``j = ... + 4 ni + 2 h
        + e`` in both accumulators: column ``8 ni + 2 (lane % 4) + e``)."""
        return ((j // 4) % self._blocks) * 2 + j % 2

    def _first_column(self, tid: ir.Expr) -> ir.Expr:
        b = self.base
        if isinstance(b, WgmmaAccumLayout):
            gn = b.group_of(tid)[1]
            return (tid % 4) * 2 if gn is None else gn * b.group_columns + (tid % 4) * 2
        return ((tid // 32) % b.warps_n) * (b.shape[1] // b.warps_n) + (tid % 4) * 2

    def forward(self, tid: ir.Expr, r: ir.Expr) -> tuple[tuple, None]:
        """((column,), None) of slot ``r`` of thread ``tid`` (with ``split``, the column's place)."""
        column = self._first_column(tid) + (r // 2) * 8 + r % 2
        return ((column,) if not self.split else (column // self.split, column % self.split)), None

    def owner(self, tid: ir.Expr) -> ir.Expr:
        """Whether thread ``tid`` is the one of the threads sharing its columns that stores them:
        lane ``lane % 4`` of the first row of lanes, in the first warp of rows (and warpgroup)."""
        b = self.base
        if isinstance(b, WgmmaAccumLayout):
            first_rows = ir.cmp("<", tid % 128, 4)
            return first_rows if b.warpgroups == 1 else ir.logical_and(first_rows, ir.cmp("==", b.group_of(tid)[0], 0))
        return ir.logical_and(ir.cmp("<", tid % 32, 4), ir.cmp("==", (tid // 32) // b.warps_n, 0))

    def describe(self) -> str:
        return f"columns of {self.base.describe()} ({self.local_size} per thread)"


@dataclass(frozen=True)
class SegmentsLayout:
    """The layout of a reduction over runs of a tensor-core accumulator's rows: ``T.reduce_sum`` of
    an ``(M, Q, H)`` view of an ``(M, Q * H)`` accumulator into ``(M, Q)`` (DeepSeek's FP8 indexers
    summing each token's heads). Every thread holding a row of ``base`` holds that row's ``Q``
    results (a copy: the four lanes of the row share them), in slot ``row_slot * Q + q``, so the
    reduction's partials stay in registers and combine over the row's lanes. Defined where a run is
    whole blocks of 8 columns and one warp(group) holds a row's every column (a wgmma accumulator
    on warpgroups along M only, an mma.sync one with one warp along N): :func:`segments_of`."""

    base: object
    segment: int

    @property
    def rows(self) -> ProjectedLayout:
        return ProjectedLayout(self.base, (0,))

    @property
    def runs(self) -> int:
        return self.base.shape[1] // self.segment

    @property
    def shape(self) -> tuple:
        return (self.base.shape[0], self.runs)

    @property
    def threads(self) -> int:
        return self.base.threads

    @property
    def local_size(self) -> int:
        return self.rows.local_size * self.runs

    def slot_of(self, j: ir.Expr) -> ir.Expr:
        """The slot holding the run of base element ``j`` of the same thread: element ``j`` is in
        column ``8 ((j // 4) % blocks) + 2 (lane % 4) + j % 2``, whose run does not depend on the
        lane (a run is whole blocks of 8)."""
        blocks = self.base.shape[1] // 8
        return self.rows.slot_of(j) * self.runs + ((j // 4) % blocks) // (self.segment // 8)

    def forward(self, tid: ir.Expr, r: ir.Expr) -> tuple[tuple, None]:
        (row,), _ = self.rows.forward(tid, r // self.runs)
        return (row, r % self.runs), None

    lane_masks = (1, 2)  # the four lanes lane // 4 names hold one row
    warp_sharers = 1

    def owner(self, tid: ir.Expr) -> ir.Expr:
        """Whether thread ``tid`` stores its rows' results to memory: the first of the row's four lanes."""
        return ir.cmp("==", tid % 4, 0)

    def describe(self) -> str:
        return f"runs of {self.segment} of the rows of {self.base.describe()} ({self.local_size} per thread)"


def segments_of(layout, segment: int) -> SegmentsLayout:
    """``SegmentsLayout(layout, segment)``, or a ``ValueError`` saying why it is not supported."""
    if isinstance(layout, WgmmaAccumLayout) and layout.n_groups != 1 or \
            isinstance(layout, MmaAccumLayout) and layout.warps_n != 1:
        raise ValueError("the accumulator's rows are split between warps along N")
    if not isinstance(layout, (WgmmaAccumLayout, MmaAccumLayout)):
        raise ValueError(f"runs of rows are held in registers for tensor-core accumulators only, not {layout.describe()}")
    if segment % 8 or layout.shape[1] % segment:
        raise ValueError(f"runs of {segment} columns are not whole blocks of 8 of the {layout.shape[1]}")
    return SegmentsLayout(layout, segment)


def columns_of(layout, split: int = 0) -> ColumnsLayout:
    """``ColumnsLayout(layout, split)``, or a ``ValueError`` saying why it is not supported."""
    if not isinstance(layout, (WgmmaAccumLayout, MmaAccumLayout)):
        raise ValueError(f"columns are held by threads of a tensor-core accumulator only, not of {layout.describe()}")
    if split and layout.shape[1] % split:
        raise ValueError(f"rows of {split} do not tile the {layout.shape[1]} columns")
    return ColumnsLayout(layout, split)


def project(layout, kept: tuple) -> ProjectedLayout:
    """``ProjectedLayout(layout, kept)``, or a ``ValueError`` saying why it is not supported."""
    if isinstance(layout, ProjectedLayout):
        raise ValueError("a fragment indexed by part of a fragment that is itself part of another")
    if len(layout.shape) != 2 or tuple(kept) != (0,):
        raise ValueError(f"only rows of 2-D fragments (the first index of a {len(layout.shape)}-D fragment "
                         f"{tuple(layout.shape)} kept: {tuple(kept)}) are supported")
    if isinstance(layout, BlockedLayout):
        m, n = layout.shape[0], layout.row_length
        t, v = layout.threads, layout.vec
        runs = f" in runs of {v}" if v > 1 else ""
        if n % (t * v) and ((t * v) % n or n % v):
            raise ValueError(f"a row of {n} elements over {t} threads{runs} (neither divides the other)")
        if v > 1 and (m * n) % (t * v):
            raise ValueError(f"{m} x {n} elements in runs of {v} over {t} threads leave a sweep part-filled")
        sharers = t if n % (t * v) == 0 else n // v
        # lanes combine by shfl.xor: a power of two of them, unless whole warps (any number) share a row
        if sharers & (sharers - 1) and (sharers != t or t % 32):
            raise ValueError(f"rows shared by {sharers} threads (a power of two is needed)")
    return ProjectedLayout(layout, tuple(kept))
