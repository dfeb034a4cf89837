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


@dataclass(frozen=True)
class StackedLayout:
    """Slices ``F[k, ...]`` (the leading ``len(lead_shape)`` indices fixed) each laid out as
    ``inner``, a layout no blocked one stacks into (MHA inference's ``lse_local[k, i]`` read in a
    loop whose rows are an accumulator's, ``ir.fragment_parts.ProjectedLayout``): slice ``k``'s
    element at ``inner``'s slot ``j`` is slot ``k_flat * inner.local_size + j`` of the same thread.
    Stores to memory are made by ``inner``'s owner."""

    inner: object
    lead_shape: tuple

    @property
    def shape(self) -> tuple:
        return tuple(self.lead_shape) + tuple(self.inner.shape)

    @property
    def threads(self) -> int:
        return self.inner.threads

    @property
    def local_size(self) -> int:
        n = 1
        for d in self.lead_shape:
            n *= d
        return n * self.inner.local_size

    def forward(self, tid: ir.Expr, r: ir.Expr) -> tuple[tuple, ir.Expr | None]:
        idx, guard = self.inner.forward(tid, r % self.inner.local_size)
        return unravel(r // self.inner.local_size, tuple(self.lead_shape)) + tuple(idx), guard

    def owner(self, tid: ir.Expr):
        return self.inner.owner(tid) if hasattr(self.inner, "owner") else None

    def describe(self) -> str:
        return f"{' x '.join(map(str, self.lead_shape))} slices of {self.inner.describe()}"


def slice_layout(layout, lead: int):
    """The layout of ``F[k, ...]`` (the first ``lead`` indices fixed, GQA decoding's
    ``lse_local[k, j]`` in a loop over ``j``) where every such slice lies alike over the threads: a
    blocked ``layout`` whose slots per slice are whole sweeps of the threads (their count times the
    run), so the slice's element ``f`` is in thread ``(f // vec) % threads`` whatever ``k``, at slot
    ``k_flat * slice_slots(layout, lead) + `` its slot in the returned layout; a ``StackedLayout``'s
    own slices; else None."""
    if isinstance(layout, StackedLayout):
        return layout.inner if lead == len(layout.lead_shape) else None
    if not isinstance(layout, BlockedLayout) or not 0 < lead < len(layout.shape):
        return None
    inner = _slice(layout, lead)
    return None if inner.slots % (layout.threads * layout.vec) else inner


def _slice(layout: BlockedLayout, lead: int) -> BlockedLayout:
    return BlockedLayout(tuple(layout.shape[lead:]), layout.threads, layout.vec, layout.row)


def slice_slots(layout, lead: int) -> int:
    """Slots a thread holds of each slice ``F[k, ...]`` (``slice_layout``)."""
    if isinstance(layout, StackedLayout):
        return layout.inner.local_size
    return _slice(layout, lead).slots // layout.threads


def stacked_layout(layout, lead_shape: tuple):
    """The inverse of ``slice_layout``: the layout of a fragment whose slices ``F[k, ...]`` have
    ``layout`` (a blocked one where that gives every slice it; else a ``StackedLayout`` of it, where
    its slots have no guard), or None."""
    if not isinstance(layout, BlockedLayout):
        if isinstance(layout, StackedLayout) or layout.forward(ir.Var("t"), ir.Var("r"))[1] is not None:
            return None
        return StackedLayout(layout, tuple(lead_shape))
    whole = BlockedLayout(tuple(lead_shape) + tuple(layout.shape), layout.threads, layout.vec, layout.row)
    return whole if slice_layout(whole, len(lead_shape)) == layout else None
