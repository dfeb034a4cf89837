"""elide_private_syncs: a block barrier goes only where, across it, every thread meets nothing but
its own elements; the proof of who owns an element is checked by brute force."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

import tileworkbench as tw
import tileworkbench.language as T
from tileworkbench.examples.tilelang_programs import norms
from tileworkbench.ir import nodes as ir
from tileworkbench.passes.elide_private_syncs import _Access, _Owner

from tests.test_thread_syncs import _loop_bodies


def kernel_code(source: str) -> str:
    return source.split("// ---- kernel ----")[1]


def loop_bodies(code: str) -> list:
    """The text of each split-K step loop (``for (int k...``) of the kernel, in order."""
    return [body for var, body in _loop_bodies(code).items() if var.startswith("k")]


def test_rms_norm_splitk_reads_back_its_own_runs_with_no_barrier():
    kernel = norms.CASES["rms_norm_splitk"]["compile"]()
    code = kernel_code(kernel.get_kernel_source())
    steps = loop_bodies(code)
    assert len(steps) == 2
    for step in steps:  # each thread copies 16 bytes of the row in and reads (and writes) back the same four floats
        assert "tw::copy_vec<16>((&A_shared[(i0" in step and "(tx * 4) + j" in step
        assert "__syncthreads" not in step
    # the reduction across warps keeps the barrier between lane 0's partials and everyone's reads
    reduction = code[code.index("A_powsum_warps[((tx / 32)"):]
    assert reduction.index("__syncthreads();") < reduction.index("A_powsum_part[0] = (((A_powsum_warps")


def scaled(reverse=False, fragment_runs=True):
    """A row copied into a shared tile in 16-byte pieces, then scaled in place by a T.Parallel loop
    (each thread its own four floats, or element ``511 - j``: another thread's), then copied out."""

    @T.prim_func
    def main(A: T.Tensor((64, 512), "float32"), B: T.Tensor((64, 512), "float32")):
        with T.Kernel(64, threads=128) as bx:
            s = T.alloc_shared((1, 512), "float32")
            for k in T.serial(2):
                T.copy(A[bx, 0], s)
                for i, j in T.Parallel(1, 512):
                    if reverse:
                        s[i, j] = s[i, 511 - j] * 2.0
                    else:
                        s[i, j] = s[i, j] * 2.0
                T.copy(s, B[bx, 0])

    return main


def test_another_threads_element_keeps_the_barriers():
    own = kernel_code(tw.lower(scaled(), target="sm_90a").device_source)
    other = kernel_code(tw.lower(scaled(reverse=True), target="sm_90a").device_source)
    assert own.count("__syncthreads") == 0
    # after the copy in and before the copy out; the one before the copy in goes: since the last one,
    # the last step only copied out its threads' own runs
    assert other.count("__syncthreads") == 2
    body = loop_bodies(other)[0]
    assert body.index("tw::copy_vec<16>((&s[(i0") < body.index("__syncthreads") < body.index("s_run[k_1] = (s[")


def test_a_kernel_with_tensor_cores_or_async_copies_is_left_alone():
    from tileworkbench.examples import matmul

    art = tw.lower(matmul(256, 256, 256, 128, 128, 32, "float16", "float16", 2, 128), target="sm_90a")
    assert "elided_syncs" not in art.func.attrs


def test_a_value_one_thread_writes_for_all_keeps_its_barrier():
    @T.prim_func
    def broadcast(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128):
            s = T.alloc_shared((1,), "float32")
            tx = T.get_thread_binding()
            if tx == 0:
                s[0] = A[0]
            for i in T.Parallel(128):
                B[i] = A[i] + s[0]

    code = kernel_code(tw.lower(broadcast, target="sm_90a").device_source)
    assert code.index("s[0] = A[0]") < code.index("__syncthreads") < code.index("+ s[0]")


THREADS = 8


@settings(max_examples=500, deadline=None)
@given(st.sampled_from([1, 2, 4, 8]),
       st.lists(st.tuples(st.integers(-40, 40), st.integers(-2, 2), st.sampled_from([1, 2, 4]), st.integers(-64, 64)),
                min_size=2, max_size=2))
def test_accesses_given_one_run_never_share_an_element_between_threads(step, forms):
    """Brute force over every thread and loop value: where the proof gives two accesses the same
    run, no element either touches is touched by two different threads."""
    tx, u, v = ir.Var("tx"), ir.Var("u"), ir.Var("v")
    owner = _Owner.__new__(_Owner)
    owner.tx, owner.threads, owner.ranges = tx, THREADS, {tx: (0, THREADS - 1), u: (0, 3), v: (0, 2)}
    buf = ir.Buffer("s", (ir.const(4096),), ir.dtypes.float32, "shared")
    accesses = [_Access(buf, tx * step + u * b + v * (c * step * THREADS) + d, w, True) for b, c, w, d in forms]
    runs = [owner.run(x) for x in accesses]
    if runs[0] is None or runs[0] != runs[1]:
        return
    touched = {}
    for (b, c, w, d), thread, uv, vv in itertools.product(forms, range(THREADS), range(4), range(3)):
        start = step * thread + b * uv + c * step * THREADS * vv + d
        for element in range(start, start + w):
            assert touched.setdefault(element, thread) == thread


def _kernel(body) -> ir.PrimFunc:
    tx = ir.Var("tx")
    launch = ir.Launch(grid=(ir.const(1),), threads=128, block_vars=(ir.Var("bx"),), thread_var=tx)
    return ir.PrimFunc("k", [], body(tx), launch)


def _elided(func) -> int:
    from tileworkbench.passes.elide_private_syncs import elide_private_syncs

    return elide_private_syncs(func, None).attrs.get("elided_syncs", 0)


def test_what_decides_a_branch_or_a_loop_counts_on_its_side_of_the_barrier():
    s = ir.Buffer("s", (ir.const(128),), ir.dtypes.float32, "shared", attrs={"offset": 0})

    def own(tx):  # each thread writes its own element: nothing to order
        return ir.seq([ir.BufferStore(s, (tx,), ir.const(1.0)), ir.SyncThreads(), ir.BufferStore(s, (tx,), ir.const(2.0))])

    def flag_in_condition(tx):  # every thread reads s[0] to decide, then thread 0 writes it past the barrier
        write = ir.IfThenElse(ir.cmp("==", tx, 0), ir.BufferStore(s, (ir.const(0),), ir.const(0.0)))
        return ir.IfThenElse(ir.cmp(">", ir.BufferLoad(s, (ir.const(0),), ir.dtypes.float32), ir.const(0.0)),
                             ir.seq([ir.SyncThreads(), write]))

    def flag_in_bound(tx):  # a loop whose trip count every thread reads from s[0], re-written inside
        k = ir.Var("k")
        n = ir.cast(ir.BufferLoad(s, (ir.const(0),), ir.dtypes.float32), ir.dtypes.int32)
        write = ir.IfThenElse(ir.cmp("==", tx, 0), ir.BufferStore(s, (ir.const(0),), ir.const(0.0)))
        return ir.For(k, n, ir.seq([write, ir.SyncThreads()]))

    assert _elided(_kernel(own)) == 1
    assert _elided(_kernel(flag_in_condition)) == 0
    assert _elided(_kernel(flag_in_bound)) == 0


def test_a_quotient_and_remainder_of_one_index_are_put_back_together():
    """``(x // b) * b c + (x % b) * c`` is ``x * c``: a copy that splits its flat index into a row
    and a column of 16-byte pieces still gives each thread its own run."""
    from tileworkbench.ir.printer import expr_text
    from tileworkbench.passes.elide_private_syncs import _recombined

    tx, it = ir.Var("tx"), ir.Var("it")
    flat = it * 128 + tx
    form = _recombined(flat // 8 * 32 + flat % 8 * 4 + 7)
    assert {expr_text(a): c for a, c in form.terms.values()} == {"it": 512, "tx": 4} and form.const == 7
    unrelated = _recombined(tx // 8 * 32 + tx % 8 * 3)  # 32 is not 8 * 3: left as it is
    assert {expr_text(a) for a, _ in unrelated.terms.values()} == {"tx // 8", "tx % 8"}


@settings(max_examples=300, deadline=None)
@given(st.integers(-300, 300), st.sampled_from([2, 4, 8, 32]), st.integers(-5, 5), st.integers(-9, 9))
def test_putting_a_quotient_and_remainder_back_keeps_the_value(x, b, c, k):
    from tileworkbench.passes.elide_private_syncs import _recombined

    v = ir.Var("v")
    form = _recombined(v // b * (b * c) + v % b * c + k)
    assert all(atom is v for atom, _ in form.terms.values())  # put back together: v alone
    value = form.const + sum(coef * x for _, coef in form.terms.values())
    assert value == (x // b) * (b * c) + (x % b) * c + k  # Python's // and % are floor division's


def test_elementwise_add_through_shared_tiles_needs_no_barrier():
    """TileLang's elementwise example copies A and B into shared tiles, adds them into a fragment,
    copies that into a third tile and out: with the fragment in the copies' 16-byte runs each thread
    meets only what it copied itself, so neither barrier stays where the threads copy the tile out
    (TMA lowering off). By default a TMA store takes the tile: it reads every thread's part, so the
    barrier before it stays, and only that one."""
    from tileworkbench.examples.tilelang_programs import elementwise

    threads_only = tw.jit(pass_configs={"tl.disable_tma_lower": True})(elementwise.elementwise_add.fn)
    kernel = threads_only.compile(M=1024, N=1024, block_M=32, block_N=32, threads=128, in_dtype=T.float32,
                                  out_dtype=T.float32)
    code = kernel_code(kernel.get_kernel_source())
    assert "__syncthreads" not in code and code.count("tw::copy_vec<16>") == 3
    assert "int x = (((tx * 4) % 32) + (j % 4));" in code  # four neighbours a thread
    by_tma = kernel_code(elementwise.CASES["elementwise_add"]["compile"]().get_kernel_source())
    assert "int x = (((tx * 4) % 32) + (j % 4));" in by_tma and by_tma.count("__syncthreads") == 1
    assert by_tma.index("tw::fence_proxy_async") < by_tma.index("__syncthreads") < by_tma.index("tw::tma_store(")
