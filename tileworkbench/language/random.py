"""``T.rng_init``, ``T.rng_rand``, ``T.rng_rand_float``: random numbers drawn by each thread, as
TileLang's kernels draw them with cuRAND (dropout masks, sampling, stochastic rounding).

Each thread holds one Philox 4x32-10 generator (``tw/random.h``; cuRAND's
``curandStatePhilox4_32_10_t``, stepped the same way): ``T.rng_init(seed, seq, off)`` starts it as
``curand_init(seed, seq, off, &state)`` does, and every ``T.rng_rand()`` is the next 32-bit word,
the same integers cuRAND gives. What a thread draws depends on the order in which it meets the
draws: in a ``T.Parallel`` loop, on how the loop's elements are spread over the threads (as in
TileLang), so a program that wants the same numbers on another number of threads initialises the
generator per element (``off``) rather than per thread. ``passes/verify_draws.py`` says where draws
may stand (one in a statement, none in an index or a condition, after the generator starts)."""

from __future__ import annotations

from ..frontend import builder as _b
from ..frontend.builder import error
from ..ir import nodes as ir
from .kernel import get_block_binding, get_thread_binding, get_thread_extent

GENERATORS = ("curandStatePhilox4_32_10_t", "curandStateXORWOW_t", "curandStateMRG32k3a_t")


def rng_init(seed, seq=None, off=0, generator: str = "curandStatePhilox4_32_10_t"):
    """Start this thread's generator: key ``seed``, subsequence ``seq`` (by default the thread's
    place in the grid along x, ``tx + bx * threads``, as TileLang's), ``off`` words along it."""
    if generator != GENERATORS[0]:
        known = generator in GENERATORS
        raise error(f"T.rng_init: generator={generator!r} is {'not supported' if known else 'not a generator'}: "
                    f"tileworkbench draws from Philox 4x32-10 ({GENERATORS[0]}, the default) only")
    if seq is None:
        seq = get_thread_binding(0) + get_block_binding(0) * get_thread_extent(0)
    args = tuple(ir.cast(_b.integer(v, f"T.rng_init: {name}"), ir.dtypes.uint64)
                 for v, name in ((seed, "seed"), (seq, "seq"), (off, "off")))
    _b.current().emit(ir.Evaluate(ir.Call(ir.RNG_INIT, args)))


def rng_rand():
    """The next 32-bit word of this thread's generator (``uint32``; cuRAND's ``curand``)."""
    return _draw("tw_rng.rand")


def rng_rand_float(bit: int = 32, dist: str = "uniform"):
    """A float of ``bit`` bits (32 or 64) from this thread's generator: ``"uniform"`` in (0, 1]
    (cuRAND's ``curand_uniform`` from one word, ``curand_uniform_double`` from two), or ``"normal"``
    (mean 0, deviation 1: Box-Muller on two uniforms, the pair's second value kept for the next
    call)."""
    if bit not in (32, 64):
        raise error(f"T.rng_rand_float: bit is 32 or 64, not {bit!r}")
    if dist not in ("uniform", "normal"):
        raise error(f"T.rng_rand_float: dist is 'uniform' or 'normal', not {dist!r}")
    return _draw(_FLOAT_DRAWS[dist, bit])


_FLOAT_DRAWS = {("uniform", 32): "tw_rng.uniform", ("uniform", 64): "tw_rng.uniform_double",
                ("normal", 32): "tw_rng.normal_value", ("normal", 64): "tw_rng.normal_double_value"}


def _draw(name: str) -> ir.Call:
    _b.launch(f"T.{'rng_rand' if name == 'tw_rng.rand' else 'rng_rand_float'}()")
    return ir.Call(name, (), ir.dtypes.as_dtype(ir.RNG_DRAWS[name]))
