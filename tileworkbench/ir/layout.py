"""Fragment layouts: which thread holds which element of a block-wide fragment.

A layout maps (thread, local index) to the logical indices of the fragment. Every access to a
fragment inside a ``T.Parallel`` loop is rewritten through it, so all uses of one fragment agree.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import nodes as ir


@dataclass(frozen=True)
class BlockedLayout:
    """Element ``flat`` of the row-major fragment lives in thread ``flat % threads`` at local
    index ``flat // threads``. The default for fragments no tensor-core op constrains.

    With ``vec > 1`` a thread holds runs of ``vec`` neighbours instead: element ``flat`` lives in
    thread ``(flat // vec) % threads`` at local index ``(flat // (vec * threads)) * vec + flat % vec``,
    so a thread moves a run to or from memory with one 16-byte access (``infer_fragment_layouts``
    chooses it only where every row is a whole number of sweeps, ``shape[-1] % (vec * threads) == 0``).

    With ``row`` (a padded row length, more than ``shape[-1]``; ``vec`` 1) each row starts a new
    stretch of ``row`` slots: element ``[r, c]`` (``r`` over the leading dimensions) is slot
    ``r * row + c``, held as above, and the slots past the row's end hold nothing (a guard). So a
    row whose length neither divides nor is divided by the threads (1000 over 128) is whole sweeps
    or shared by a power-of-two run of threads all the same, which a reduction along it needs
    (``infer_fragment_layouts`` pads only fragments reduced or read by rows)."""

    shape: tuple
    threads: int
    vec: int = 1
    row: int = 0  # the padded row length, 0 for none

    @property
    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def row_length(self) -> int:
        """Slots a row takes: its padded length, or its length."""
        return self.row or self.shape[-1]

    @property
    def slots(self) -> int:
        return self.numel // self.shape[-1] * self.row_length

    @property
    def local_size(self) -> int:
        return -(-self.slots // (self.threads * self.vec)) * self.vec

    def forward(self, tid: ir.Expr, j: ir.Expr) -> tuple[tuple, ir.Expr | None]:
        """(logical indices, guard) of local element ``j`` of thread ``tid``."""
        if self.vec == 1:
            flat = j * self.threads + tid
        else:
            v = self.vec
            flat = (j // v) * (self.threads * v) + tid * v + j % v
        guard = None if self.slots % (self.threads * self.vec) == 0 else ir.cmp("<", flat, self.slots)
        if not self.row:
            return unravel(flat, self.shape), guard
        column = flat % self.row
        inside = ir.cmp("<", column, self.shape[-1])
        leading = unravel(flat // self.row, self.shape[:-1]) if len(self.shape) > 1 else ()
        return leading + (column,), inside if guard is None else ir.logical_and(guard, inside)

    def describe(self) -> str:
        runs = f", runs of {self.vec}" if self.vec > 1 else ""
        padded = f", rows padded to {self.row}" if self.row else ""
        return f"blocked({self.threads} threads x {self.local_size}{runs}{padded})"


@dataclass(frozen=True)
class MmaAccumLayout:
    """The accumulator layout of ``tw::gemm_ss`` (mma.sync m16n8k16, warps in a WM x WN grid)."""

    shape: tuple  # (M, N)
    warps_m: int
    warps_n: int

    # Elements 2m and 2m + 1 of a thread are neighbours in one row (column e = j % 2), so a
    # 16-bit result can be stored two at a time.
    adjacent_pairs = True

    @property
    def threads(self) -> int:
        return 32 * self.warps_m * self.warps_n

    @property
    def mi(self) -> int:
        return self.shape[0] // self.warps_m // 16

    @property
    def ni(self) -> int:
        return self.shape[1] // self.warps_n // 8

    @property
    def local_size(self) -> int:
        return self.mi * self.ni * 4

    def forward(self, tid: ir.Expr, j: ir.Expr) -> tuple[tuple, None]:
        tm, tn = self.shape[0] // self.warps_m, self.shape[1] // self.warps_n
        warp, lane = tid // 32, tid % 32
        wr, wc = warp // self.warps_n, warp % self.warps_n
        e, h = j % 2, (j // 2) % 2
        ni, mi = (j // 4) % self.ni, j // (4 * self.ni)
        row = wr * tm + mi * 16 + lane // 4 + h * 8
        col = wc * tn + ni * 8 + (lane % 4) * 2 + e
        return (row, col), None

    def describe(self) -> str:
        return f"mma_accum({self.warps_m}x{self.warps_n} warps, {self.local_size} per thread)"


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


def unravel(flat: ir.Expr, shape: tuple) -> tuple:
    idx = []
    for dim in reversed(shape[1:]):
        idx.append(flat % dim)
        flat = flat // dim
    idx.append(flat)
    return tuple(reversed(idx))


def choose_warp_grid(m: int, n: int, warps: int) -> tuple[int, int] | None:
    """(WM, WN) with WM*WN == warps tiling an m x n accumulator in 16 x 8 steps, warp tiles as
    square as possible (fewer shared-memory loads per mma)."""
    best = None
    for wm in range(1, warps + 1):
        if warps % wm:
            continue
        wn = warps // wm
        if m % (16 * wm) or n % (8 * wn):
            continue
        tm, tn = m // wm, n // wn
        score = (abs(tm - tn), -tm)
        if best is None or score < best[0]:
            best = (score, (wm, wn))
    return None if best is None else best[1]


@dataclass(frozen=True)
class WgmmaAccumLayout:
    """The accumulator layout of ``tw::wgmma_gemm_ss``: ``warpgroups`` along M times ``n_groups``
    along N; warpgroup ``g`` (``gm = g // n_groups``, ``gn = g % n_groups``) owns rows
    ``[gm*M/G, (gm+1)*M/G)`` in blocks of 64 (one ``wgmma.m64nNk16`` each, N' = N / n_groups
    columns from ``gn*N'``); inside a block warp ``w`` holds rows ``16w .. 16w+15``. Thread element
    ``j = mi*N'/2 + ni*4 + h*2 + e`` is row ``gm*M/G + 64 mi + 16 w + lane/4 + 8 h``, column
    ``gn*N' + 8 ni + 2 (lane % 4) + e``."""

    shape: tuple  # (M, N)
    warpgroups: int  # along M
    n_groups: int = 1  # along N

    # Elements 2m and 2m + 1 of a thread are neighbours in one row (column e = j % 2), so a
    # 16-bit result can be stored two at a time.
    adjacent_pairs = True

    @property
    def threads(self) -> int:
        return 128 * self.warpgroups * self.n_groups

    @property
    def local_size(self) -> int:
        return self.shape[0] * self.shape[1] // self.threads

    @property
    def group_columns(self) -> int:
        """N': the columns one warpgroup holds."""
        return self.shape[1] // self.n_groups

    def group_of(self, tid: ir.Expr) -> tuple:
        """(gm, gn): thread ``tid``'s warpgroup's place along M and along N (gn None: one along N)."""
        group = tid // 128
        return (group, None) if self.n_groups == 1 else (group // self.n_groups, group % self.n_groups)

    def forward(self, tid: ir.Expr, j: ir.Expr) -> tuple[tuple, None]:
        m, n = self.shape[0], self.group_columns
        per_group = m // self.warpgroups
        (gm, gn), warp, lane = self.group_of(tid), (tid % 128) // 32, tid % 32
        e, h = j % 2, (j // 2) % 2
        ni, mi = (j // 4) % (n // 8), j // (n // 2)
        row = gm * per_group + mi * 64 + warp * 16 + lane // 4 + h * 8
        col = ni * 8 + (lane % 4) * 2 + e
        return (row, col if self.n_groups == 1 else gn * n + col), None

    @property
    def matrix_groups(self) -> int | None:
        """How many ``stmatrix.x4`` stores hold a thread's elements (four pairs each), or None
        where a group of four pairs would not be four whole 8x8 matrices (N' not a multiple of 16)."""
        return self.local_size // 8 if self.group_columns % 16 == 0 else None

    def matrix_row(self, tid: ir.Expr, group: ir.Expr) -> tuple:
        """(row, col) where thread ``tid``'s lane ``l`` points ``stmatrix`` for store ``group``:
        row ``l % 8`` of the 8x8 matrix of pair ``4 group + l / 8``. Across a warp a pair is one 8x8
        matrix, lane ``l`` holding its row ``l / 4``, columns ``2 (l % 4)`` and ``2 (l % 4) + 1``
        (``forward`` with ``h``, ``ni``, ``mi`` fixed by the pair): the register layout stmatrix
        stores. Written with the thread's and the group's terms apart (pairs ``4 group + q``,
        ``q < 4``, share ``mi`` and an even-odd pair of ``ni``), so an unrolled loop over groups
        adds a constant to one per-thread offset. ``col`` is always a multiple of 8 (a row of a
        matrix starts a 16-byte chunk), which ``partition_parallel_loops`` relies on."""
        m, n = self.shape[0], self.group_columns
        per_group = m // self.warpgroups
        groups_per_row_block = n // 16  # groups of four pairs in one 64-row block of the tile
        (gm, gn), warp, lane = self.group_of(tid), (tid % 128) // 32, tid % 32
        q = lane // 8  # the matrix this lane addresses: pair 4 group + q, its h = q % 2, its ni odd when q >= 2
        row = gm * per_group + (group // groups_per_row_block) * 64 + warp * 16 + lane % 8 + (q % 2) * 8
        col = (group % groups_per_row_block) * 16 + (q // 2) * 8
        return row, (col if self.n_groups == 1 else gn * n + col)

    def describe(self) -> str:
        split = "" if self.n_groups == 1 else f" x {self.n_groups} along N"
        return f"wgmma_accum({self.warpgroups} warpgroup(s){split}, {self.local_size} per thread)"


def strided_offset(buf: ir.Buffer, indices) -> ir.Expr:
    """Element offset of ``buf[indices]`` by the buffer's strides (its logical layout)."""
    offset = ir.const(0)
    for i, s in zip(indices, buf.effective_strides()):
        offset = offset + i * s
    return offset


def shared_element_offset(buf: ir.Buffer, indices) -> ir.Expr:
    """Element offset of ``buf[indices]`` in shared memory, honouring 128-byte panels: a tile
    (rows, cols) with panel P is stored as cols/P panels of rows x P elements."""
    panel = buf.attrs.get("panel", 0)
    if not panel:
        return strided_offset(buf, indices)
    shape = buf.static_shape()
    rows, cols = shape[-2], shape[-1]
    *lead, r, c = indices
    offset = (c // panel) * (rows * panel) + r * panel + c % panel
    if lead:
        offset = offset + lead[0] * (rows * cols)
    return offset


def padded_row(n: int, threads: int) -> int:
    """The row length a blocked layout over ``threads`` needs for rows of ``n`` elements to be shared
    by a power-of-two run of threads or to be whole sweeps of them: ``n`` where it already is, else
    the next power of two that divides ``threads``, or the next whole number of sweeps."""
    if n % threads == 0 or (threads % n == 0 and n & (n - 1) == 0):
        return n
    if n < threads:
        p = 1 << (n - 1).bit_length()
        if threads % p == 0:
            return p
    return -(-n // threads) * threads



def _squeezed(shape: tuple) -> tuple:
    """``shape`` without its unit dimensions (one left where all are)."""
    kept = tuple(s for s in shape if s != 1)
    return kept or (1,)


def with_shape(layout, shape: tuple):
    """``layout`` for a fragment of ``shape``, which differs from the layout's only in unit
    dimensions (LayerNorm's ``dgamma_acc[j]``, shape ``(D,)``, in a loop over ``(1, D)``): a blocked
    layout places the element of flat index ``f`` alike at either shape, so the same layout at the
    other shape; the layout itself at its own shape; None where neither holds (a tensor-core
    accumulator, or a padded row that would be another dimension's)."""
    shape = tuple(shape)
    if tuple(layout.shape) == shape:
        return layout
    if not isinstance(layout, BlockedLayout) or _squeezed(layout.shape) != _squeezed(shape):
        return None
    if layout.row and (layout.shape[-1] != shape[-1]):
        return None
    return BlockedLayout(shape, layout.threads, layout.vec, layout.row)


def slice_layout(layout, lead: int):
    """The layout of ``F[k, ...]`` (the first ``lead`` indices fixed, GQA decoding's
    ``lse_local[k, j]`` in a loop over ``j``) where every such slice lies alike over the threads: a
    blocked ``layout`` whose slots per slice are whole sweeps of the threads (their count times the
    run), so the slice's element ``f`` is in thread ``(f // vec) % threads`` whatever ``k``, at slot
    ``k_flat * slice_slots(layout, lead) + `` its slot in the returned layout; else None."""
    if not isinstance(layout, BlockedLayout) or not 0 < lead < len(layout.shape):
        return None
    inner = _slice(layout, lead)
    return None if inner.slots % (layout.threads * layout.vec) else inner


def _slice(layout: BlockedLayout, lead: int) -> BlockedLayout:
    return BlockedLayout(tuple(layout.shape[lead:]), layout.threads, layout.vec, layout.row)


def slice_slots(layout: BlockedLayout, lead: int) -> int:
    """Slots a thread holds of each slice ``F[k, ...]`` (``slice_layout``)."""
    return _slice(layout, lead).slots // layout.threads


def stacked_layout(layout, lead_shape: tuple):
    """The inverse of ``slice_layout``: the layout of a fragment whose slices ``F[k, ...]`` have
    ``layout``, or None where no blocked layout gives every slice that one."""
    if not isinstance(layout, BlockedLayout):
        return None
    whole = BlockedLayout(tuple(lead_shape) + tuple(layout.shape), layout.threads, layout.vec, layout.row)
    return whole if slice_layout(whole, len(lead_shape)) == layout else None
