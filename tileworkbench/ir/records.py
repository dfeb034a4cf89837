"""Typed records one stage of the compiler hands the next (instead of string keys in ``attrs``):

* :class:`TmaDescriptor`: a tensor map ``lower_tma`` plans, which codegen passes as a kernel
  parameter, the host launcher encodes and ``jit`` keeps (``func.attrs["tma_descriptors"]``);
* :class:`WgmmaPlan`: the wgmma path ``choose_shared_layouts`` chooses for a gemm
  (``ir.Gemm.plan``), which the fragment layouts and the gemm's lowering follow, and
  :func:`wgmma_functor_name`, the C++ functor of one wgmma shape (codegen emits it, the lowered
  gemm calls it);
* :class:`LoopForm`: how the code generator writes a loop (``ir.For.form``, the codegen phase);
* :class:`PersistentWalk`: a user's ``T.Persistent`` loop, which the front end marks
  (``ir.PERSISTENT_WALK``) and ``unwrap_persistent_walk`` may turn into a grid;
* :class:`SharedView`: a shared tile ``T.view`` made of another (``ir.SHARED_VIEW`` on the view),
  which ``verify_shared_views`` checks;
* :class:`DynamicSize`: where a call finds a ``T.dynamic`` size (the front end records it,
  ``func.attrs["dynamic_sizes"]``), and :func:`size_arguments`, a call's arguments with the sizes
  put in (``jit``'s kernels and the CPU interpreter's);
* :class:`TimelinePlan` and :class:`TimelineSite`: what ``instrument_timeline`` records in a kernel
  compiled with ``tw.timeline`` (``func.attrs["timeline"]``), which the code generator, the host
  launcher (the buffer's size) and ``analysis.timeline`` (decoding the buffer) read.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from .. import dtypes
from ..errors import KernelRuntimeError


@dataclass
class TmaDescriptor:
    """One ``CUtensorMap``: everything ``cuTensorMapEncodeTiled`` takes except the address."""

    name: str
    buffer: str  # the global tensor (kernel parameter) it describes
    data_type: int
    rank: int
    global_dims: tuple  # innermost first, in elements
    global_strides_bytes: tuple  # rank - 1 entries
    box_dims: tuple
    element_strides: tuple
    interleave: int
    swizzle: int
    l2_promotion: int
    oob_fill: int

    @property
    def data_type_name(self) -> str:
        return dtypes.TMA_TYPE_NAMES.get(self.data_type, str(self.data_type))

    def key(self):
        return (self.buffer, self.data_type, self.box_dims, self.swizzle)

    def to_json(self) -> dict:
        doc = asdict(self)
        doc["data_type_name"] = self.data_type_name
        doc["global_dims"] = [_json_dim(d) for d in self.global_dims]
        doc["global_strides_bytes"] = [_json_dim(d) for d in self.global_strides_bytes]
        return doc


def _json_dim(d):
    return d if isinstance(d, int) else str(d)


@dataclass(frozen=True)
class WgmmaPlan:
    m: int
    n: int
    k: int
    warpgroups: int  # along M
    a_span: int  # swizzle bytes of A's rows (0: A in registers)
    b_span: int  # swizzle bytes of B
    b_panel: int  # elements per 128-byte panel of a B whose rows are wider than 128 bytes (0: none)
    b_k_major: bool
    a_k_major: bool = True  # False: A stored K x M (transpose_A), M-major for wgmma
    a_panel: int = 0  # elements per 128-byte panel of an A whose rows are wider than 128 bytes (0: none)
    a_registers: bool = False  # A is a fragment in the accumulator layout (attention's P @ V)
    # warpgroups side by side along N (TileLang's split of a 64-row tile over two warpgroups):
    # warpgroup g computes rows of g // n_groups and columns of g % n_groups
    n_groups: int = 1
    # wgmma instructions side by side along N in each warpgroup, where its columns are more than one
    # instruction's 256 (DeepSeek's 512-wide value heads on one warpgroup)
    n_chunks: int = 1

    @property
    def n_per_group(self) -> int:
        """Columns each warpgroup computes."""
        return self.n // self.n_groups

    @property
    def n_per_instruction(self) -> int:
        """The N of its wgmma instructions."""
        return self.n // self.n_groups // self.n_chunks


# The PTX type of wgmma's operands for each tile type (float32 tiles multiply in TF32).
WGMMA_PTX_TYPES = {"float16": "f16", "bfloat16": "bf16", "float8_e4m3": "e4m3", "float8_e5m2": "e5m2", "int8": "s8",
                   "uint8": "u8", "float32": "tf32"}
# Tile types wgmma reads only K-major (A stored M x K, B stored N x K): it has no transposed form for them.
WGMMA_K_MAJOR_ONLY = ("float8_e4m3", "float8_e5m2", "int8", "uint8", "float32")


def wgmma_k(dtype: str) -> int:
    """The K of one wgmma instruction on ``dtype`` tiles: 32 bytes of each operand's rows."""
    return 32 * 8 // dtypes.as_dtype(dtype).bits


def wgmma_functor_name(n: int, dtype: str, b_k_major: bool, a_k_major: bool = True,
                       a_registers: bool = False) -> str:
    """Name of the generated C++ functor for one wgmma shape (codegen/wgmma.py emits it): the
    suffix says where A and B are (k: K-major, m/n: M- or N-major in shared memory; r: A in
    registers)."""
    short = WGMMA_PTX_TYPES[dtype]
    a = "r" if a_registers else "k" if a_k_major else "m"
    k = wgmma_k(dtype)
    return f"tw_wgmma_m64n{n}k{k}_{short}_{a}{'k' if b_k_major else 'n'}"


@dataclass(frozen=True)
class LoopForm:
    """How a loop is written: ``end`` is the bound its variable runs up to (``start + extent``,
    simplified); ``at_least_once``: a do-while (a loop around a wgmma gemm whose trip count is not a
    constant but provably at least one: written as a for loop, which ptxas must allow to run zero
    times, such a loop ran 16-18% slower, scripts/experiments/zero_trip_loops.py); ``unroll_by``: an
    unrolled loop written ``#pragma unroll N`` (``passes.resolve_int_arithmetic.GUARDED_UNROLL``)."""

    end: object
    at_least_once: bool = False
    unroll_by: int = 0  # an unrolled loop unrolled this many iterations at a time (0: in full)


@dataclass(frozen=True, repr=False)
class PersistentWalk:
    """A ``T.Persistent(domain, wave_size, index)`` loop as the front end wrote it (the loop over
    waves, ``ir.PERSISTENT_WALK``): ``coords`` are the loop's names, bound per tile inside it (one
    per domain dimension, slowest first), ``index`` the block's place in a wave."""

    domain: tuple  # ints, slowest first
    wave_size: int
    index: object  # ir.Expr
    coords: tuple  # ir.Vars

    def __repr__(self) -> str:  # short: the printed IR shows it on the loop
        return f"PersistentWalk(domain={self.domain}, wave_size={self.wave_size})"


@dataclass(frozen=True, repr=False)
class SharedView:
    """``V = T.view(S, shape, dtype)`` of a shared tile ``S`` (the front end): in TileLang ``V``
    shares ``S``'s bytes, a way to reuse shared memory (DeepSeek's sparse MLA backward stages its
    float32 results in the bf16 key tile). Here ``V`` is laid out and checked like a tile of its
    own: the same program wherever no value flows between the two names, which
    ``verify_shared_views`` checks (what one name reads of bytes the other wrote would depend on
    how each tile is laid out). ``share_view_storage`` then sets ``shares_bytes`` where ``V`` may
    lie over ``S`` (``plan_shared_memory`` puts it there, ``insert_thread_syncs`` orders the two
    names' accesses as one tile's); elsewhere ``V`` has bytes of its own."""

    source: object  # the ir.Buffer viewed
    loc: object  # the T.view call's SourceLocation
    shares_bytes: bool = False


@dataclass(frozen=True)
class DynamicSize:
    """A ``T.dynamic`` size: dimension ``dim`` of the tensor at parameter index ``tensor``, divided
    by ``multiple`` (a kernel compiled for sizes that are multiples of it takes the quotient)."""

    tensor: int
    dim: int
    multiple: int = 1

    @classmethod
    def of(cls, where) -> "DynamicSize":
        """From the ``(tensor, dim[, multiple])`` a trace or kernel record keeps."""
        return where if isinstance(where, cls) else cls(*where)


def size_arguments(kernel: str, params: list, sizes: dict, out_idx, args) -> tuple[list, dict]:
    """Every argument of a call of a kernel with ``T.dynamic`` sizes, which the caller does not
    pass: ``params`` are (name, tensor rank or None) in order, ``sizes`` parameter index ->
    :class:`DynamicSize` (or its tuple). Outputs the caller leaves out are None. Returns the
    arguments and the sizes by name."""
    sizes = {i: DynamicSize.of(w) for i, w in sizes.items()}
    given = len(params) - len(sizes)
    if len(args) not in (given, given - len(out_idx)):
        def names(keep):
            return ", ".join(name for i, (name, _) in enumerate(params) if keep(i))
        raise KernelRuntimeError(
            f"{kernel} takes {given - len(out_idx)} inputs ({names(lambda i: i not in sizes and i not in out_idx)}) "
            f"or all {given} arguments ({names(lambda i: i not in sizes)}); its T.dynamic sizes "
            f"({names(lambda i: i in sizes)}) come from the tensors; got {len(args)}")
    rest, values, full = iter(args), {}, []
    for i, (name, _) in enumerate(params):
        if i in sizes:
            at = sizes[i]
            shape = getattr(full[at.tensor], "shape", None)
            if shape is None or len(shape) <= at.dim:
                tensor, rank = params[at.tensor]
                raise KernelRuntimeError(f"{kernel}: argument {tensor} should be a tensor of {rank} dimensions, "
                                         f"whose dimension {at.dim} gives the size {name}")
            if int(shape[at.dim]) % at.multiple:
                raise KernelRuntimeError(f"{kernel} is compiled for sizes that are multiples of {at.multiple}; "
                                         f"argument {params[at.tensor][0]}'s dimension {at.dim} is {shape[at.dim]}")
            values[name] = int(shape[at.dim]) // at.multiple
            full.append(values[name])
        elif i in out_idx and len(args) < given:
            full.append(None)
        else:
            full.append(next(rest))
    return full, values


# Event kinds a timeline site records (analysis/timeline.py decodes them by these names).
TIMELINE_KINDS = ("wait_begin", "wait_end", "arrive", "expect_tx", "tma_issue", "wgmma_issue", "wgmma_wait",
                  "store_issue", "store_wait")


@dataclass(frozen=True)
class TimelineSite:
    """One place in the kernel that records an event: its kind (``TIMELINE_KINDS``), the role of
    the threads running it (``producer``, ``consumer``, ``block``, ``ws(0)``...), the barrier it
    names (None for wgmma and stores), the kernel line and the statement as the IR prints it.
    ``recorded_by``: the site whose record stands for this one too (None: its own record). Sites
    with nothing that waits between them share one record (``passes/instrument_timeline.py``)."""

    kind: str
    role: str
    barrier: str | None
    line: int | None
    text: str
    recorded_by: int | None = None


TIMELINE_HEADER_WORDS = 16  # tw/timeline.h's HEADER


def timeline_stream_words(capacity: int) -> int:
    """32-bit words of one recording thread's stream: its header, then two words an event."""
    return TIMELINE_HEADER_WORDS + 2 * capacity


def timeline_sampled_blocks(blocks: int, every: int) -> int:
    """Blocks of a launch of ``blocks`` that record (block 0, every, 2 * every, ...)."""
    return -(-blocks // every)


@dataclass(frozen=True)
class TimelinePlan:
    """Timeline mode (``tw.timeline``): every ``every``-th unit records, a unit being a block (in
    launch order; ``unit`` "block") or, in a persistent kernel, a tile of each block's tile loop
    (``unit`` "tile": every block opens its streams, ``block_every`` 1, and records its every
    ``every``-th tile). In a recording block
    stream ``i`` is written by thread ``recorders[i]`` (the first thread of each warpgroup of a
    role) with at most ``capacity`` events of 8 bytes (the low 32 bits of ``clock64`` and the site,
    slot and parity) after a header of ``TIMELINE_HEADER_WORDS`` words (``%globaltimer`` and
    ``clock64`` at the stream's open and close, the event count, the SM, the block). The buffer of a
    launch is ``timeline_sampled_blocks`` (of ``block_every``) x streams x ``timeline_stream_words``, which the
    launcher, the runtime and ``analysis.timeline`` all compute with these functions."""

    every: int
    capacity: int
    recorders: tuple  # block thread index writing each stream
    roles: tuple  # the role each stream records
    sites: tuple  # TimelineSite per site id
    unit: str = "block"  # what ``every`` samples: blocks, or each block's tiles in a persistent kernel

    @property
    def stream_words(self) -> int:
        return timeline_stream_words(self.capacity)

    @property
    def block_every(self) -> int:
        """Every how many blocks open streams (all of them when tiles are sampled)."""
        return self.every if self.unit == "block" else 1

    def to_json(self) -> dict:
        return {"every": self.every, "unit": self.unit, "block_every": self.block_every, "capacity": self.capacity,
                "recorders": list(self.recorders), "roles": list(self.roles), "sites": [asdict(s) for s in self.sites]}
