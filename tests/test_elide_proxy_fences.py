"""elide_proxy_fences in a kernel of one role: a fence stays before a block barrier only where an
async-proxy access (wgmma, TMA) can follow that barrier before the next fenced one; inside a ``T.ws``
scope the same for the scope's own barriers, where an mbarrier arrival (handing a tile to another
scope's wgmma) counts as such an access too. The fences
removed order nothing a later fence does not: that fence covers every earlier access of its
thread. (Whether the kernels still compute what they should is the GPU tests' part: the CPU
interpreters do not model the two proxies.)"""

from __future__ import annotations

import re

import tileworkbench as tw
import tileworkbench.language as T
from tileworkbench.examples.tilelang_programs import sparse_mla_bwd
from tileworkbench.ir import nodes as ir
from tileworkbench.ir.visitor import collect
from tileworkbench.target import PassConfigKey


def two_phases():
    """A loop whose threads write both gemm operands (generic proxy) before the wgmma reads them,
    then a tile written and read back by threads only."""

    @T.prim_func
    def main(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, 64), "float16"), D: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128):
            a_s = T.alloc_shared((64, 64), "float16")
            b_s = T.alloc_shared((64, 64), "float16")
            t = T.alloc_shared((64, 64), "float32")
            acc = T.alloc_fragment((64, 64), "float32")
            T.clear(acc)
            for k in T.serial(2):
                for i, j in T.Parallel(64, 64):
                    a_s[i, j] = A[i, j] * (k + 1)
                for i, j in T.Parallel(64, 64):
                    b_s[i, j] = B[i, j]
                T.gemm(a_s, b_s, acc, transpose_B=True)
            for i, j in T.Parallel(64, 64):
                t[i, j] = acc[i, j]
            for i, j in T.Parallel(64, 64):
                D[i, j] = t[63 - i, j]

    return main


def kernel_code(func, **configs) -> str:
    kernel = tw.compile(func, target="sm_90a", pass_configs=configs or None)
    return kernel.get_kernel_source().split("// ---- kernel ----")[1]


def barriers(code: str) -> list:
    """Each block barrier of ``code`` in order: whether a proxy fence stands right before it, and
    the code from it to the next barrier."""
    parts = re.split(r"__syncthreads\(\);", code)
    return [(parts[i].rstrip().endswith("tw::fence_proxy_async();"), parts[i + 1]) for i in range(len(parts) - 1)]


def test_a_fence_stays_only_where_a_wgmma_follows_before_the_next_fenced_barrier():
    kept = barriers(kernel_code(two_phases()))
    assert [fenced for fenced, _ in kept] == [False, True, False]
    # the loop's first barrier (threads overwrite what the last wgmma read: the wait ordered that)
    # and the one between the threads' write and read of t need none; the one before the wgmma does
    assert "wgmma_gemm_ss" in kept[1][1] and "wgmma" not in kept[0][1] and "wgmma" not in kept[2][1]


def test_every_fence_stays_when_asked():
    every = barriers(kernel_code(two_phases(), **{PassConfigKey.TW_KEEP_PROXY_FENCES: True}))
    assert [fenced for fenced, _ in every] == [True, True, True]


def step_loop(kernel) -> str:
    code = kernel.get_kernel_source().split("// ---- kernel ----")[1]
    loop = code[code.index("for (int k = 0; k < 16"):]
    return loop[:loop.index("\n  }\n")]


def test_sparse_mla_backward_loop_fences_only_before_its_gemms():
    """Our port of the sparse MLA backward, its step loop: a fence before each barrier a wgmma
    follows (the gathered keys, the scores cast for dQ), none before the loop's first barrier or
    the dKV staging barriers, whose reads and atomics are the threads' own."""
    sizes = dict(S=2048, SKV=2048, heads=64, dim=512, tail_dim=64, topk=512)
    loop = step_loop(sparse_mla_bwd.sparse_mla_bwd.compile(**sizes))
    fenced = [(f, "wgmma_gemm" in after) for f, after in barriers(loop)]
    assert len(fenced) == 5 and all(f == reads_wgmma for f, reads_wgmma in fenced)
    with tw.PassContext(config={PassConfigKey.TW_KEEP_PROXY_FENCES: True}):
        every = step_loop(sparse_mla_bwd.sparse_mla_bwd.compile(**sizes))
    assert [f for f, _ in barriers(every)] == [True] * 5


def handed_over():
    """Scope 0 writes a tile its own threads read back (two barriers of the scope), then the tile
    scope 1's wgmma reads, and arrives; scope 1 waits and multiplies."""

    @T.prim_func
    def main(X: T.Tensor((64, 64), "float16"), W: T.Tensor((64, 64), "float16"), D: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=256):
            x_s = T.alloc_shared((64, 64), "float16")
            w_s = T.alloc_shared((64, 64), "float16")
            t_s = T.alloc_shared((64, 64), "float16")
            u_s = T.alloc_shared((64, 64), "float16")
            acc = T.alloc_fragment((64, 64), "float32")
            ready = T.alloc_barrier(arrive_count=128)
            tx = T.get_thread_binding()
            T.copy(W, w_s)
            if tx < 128:
                T.copy(X, t_s)
                for i, j in T.Parallel(64, 64):
                    u_s[i, j] = t_s[63 - i, j]
                for i, j in T.Parallel(64, 64):
                    x_s[i, j] = u_s[i, 63 - j]
                T.barrier_arrive(ready)
            else:
                T.barrier_wait(ready, 0)
                T.gemm(x_s, w_s, acc, transpose_B=True)
                T.copy(acc, D)

    return main


def scope_barriers(code: str) -> list:
    """Scope 0's barriers in order: whether a proxy fence stands right before each."""
    scope = code[code.index("// T.ws(0)"):code.index("// T.ws(1)")]
    parts = scope.split("tw::sync_consumers<128>();")
    return [part.rstrip().endswith("tw::fence_proxy_async();") for part in parts[:-1]]


def test_inside_a_scope_a_fence_stays_only_where_an_arrival_or_wgmma_can_follow():
    """The first barrier (threads write t_s and read it back) is followed by the second fenced one
    before anything the async proxy or another scope could read: no fence. The second is followed
    by the tile scope 1's wgmma reads and the arrival that hands it over: its fence stays, and the
    arrival keeps the fence of its own that fence_before_arrivals gives it."""
    code = kernel_code(handed_over())
    assert scope_barriers(code) == [False, True]
    scope = code[code.index("// T.ws(0)"):code.index("// T.ws(1)")]
    assert scope.rstrip().split("ready[0].arrive();")[0].rstrip().endswith("tw::fence_proxy_async();")
    every = kernel_code(handed_over(), **{PassConfigKey.TW_KEEP_PROXY_FENCES: True})
    assert scope_barriers(every) == [True, True]


def handed_over_then_threads_only():
    """Scope 0 writes x_s (scope 1's wgmma reads it) and a tile of its own, reads that back across a
    barrier, hands x_s over, then reads a third tile back across a second barrier and arrives again."""

    @T.prim_func
    def main(X: T.Tensor((64, 64), "float16"), W: T.Tensor((64, 64), "float16"), D: T.Tensor((64, 64), "float32"),
             E: T.Tensor((64, 64), "float16")):
        with T.Kernel(1, threads=256):
            x_s = T.alloc_shared((64, 64), "float16")
            w_s = T.alloc_shared((64, 64), "float16")
            t_s = T.alloc_shared((64, 64), "float16")
            u_s = T.alloc_shared((64, 64), "float16")
            acc = T.alloc_fragment((64, 64), "float32")
            ready = T.alloc_barrier(arrive_count=128)
            done = T.alloc_barrier(arrive_count=128)
            tx = T.get_thread_binding()
            T.copy(W, w_s)
            if tx < 128:
                for i, j in T.Parallel(64, 64):
                    x_s[i, j] = X[63 - i, j]
                for i, j in T.Parallel(64, 64):
                    t_s[i, j] = X[i, 63 - j]
                for i, j in T.Parallel(64, 64):
                    u_s[i, j] = t_s[63 - i, j]
                T.barrier_arrive(ready)
                for i, j in T.Parallel(64, 64):
                    E[i, j] = u_s[i, 63 - j]
                T.barrier_arrive(done)
            else:
                T.barrier_wait(ready, 0)
                T.gemm(x_s, w_s, acc, transpose_B=True)
                T.copy(acc, D)
                T.barrier_wait(done, 0)

    return main


def test_inside_a_scope_a_fence_with_no_async_tile_touched_since_the_last_goes():
    """Both barriers are followed by an arrival, but since the first fence (which orders x_s, written
    before it, for scope 1's wgmma) the threads touched only tiles no wgmma or TMA call reads or
    writes: the second fence orders nothing the first did not."""
    assert scope_barriers(kernel_code(handed_over_then_threads_only())) == [True, False]
    every = kernel_code(handed_over_then_threads_only(), **{PassConfigKey.TW_KEEP_PROXY_FENCES: True})
    assert scope_barriers(every) == [True, True]


def gathered_by_a_producer():
    """The seesaw sparse MLA's producer in small: before the scopes every thread copies W (which the
    consumers' wgmma reads) and arrives; the producer scope then, each round, writes flags its own
    threads read back across the scope's barrier and gathers rows of X by cp.async into x_s (the
    wgmma's other tile), arriving once they land; the consumers wait and multiply."""

    @T.prim_func
    def main(X: T.Tensor((128, 64), "float16"), W: T.Tensor((64, 64), "float16"), Idx: T.Tensor((64,), "int32"),
             D: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=256):
            x_s = T.alloc_shared((64, 64), "float16")
            w_s = T.alloc_shared((64, 64), "float16")
            valid = T.alloc_shared((64,), "bool")
            acc = T.alloc_fragment((64, 64), "float32")
            w_ready = T.alloc_barrier(arrive_count=256)
            x_ready = T.alloc_barrier(arrive_count=128)
            tx = T.get_thread_binding()
            T.copy(W, w_s)
            T.barrier_arrive(w_ready)
            if tx >= 128:
                for r in T.serial(8):
                    valid[r * 8 + (tx - 128) // 16] = Idx[r * 8 + (tx - 128) // 16] >= 0
                    if valid[r * 8 + (tx - 128) // 16]:
                        T.ptx_cp_async(T.access_ptr(x_s[r * 8 + (tx - 128) // 16, (tx - 128) % 16 * 4], "w", 4),
                                       T.access_ptr(X[Idx[r * 8 + (tx - 128) // 16], (tx - 128) % 16 * 4], "r", 4), 4)
                T.cp_async_barrier_noinc(x_ready)
            else:
                T.barrier_wait(w_ready, 0)
                T.barrier_wait(x_ready, 0)
                T.gemm(x_s, w_s, acc, transpose_B=True)
                T.copy(acc, D)

    return main


def test_a_fence_orders_no_cp_async_its_thread_issued_before_it():
    """The producer's barrier after each round's flags is preceded by no fence: since the scope
    began its threads touched a wgmma tile only by issuing cp.async copies, which land later and are
    fenced by the consumers after their wait (lower_tma), and what every thread wrote before the
    scope is fenced before the arrival that precedes it (fence_before_arrivals)."""
    code = kernel_code(gathered_by_a_producer())
    producer = code[code.index("// T.ws(1)"):]
    producer = producer[:producer.index("// T.ws(0)")] if "// T.ws(0)" in producer else producer
    assert "tw::sync_consumers<128>();" in producer and "tw::cp_async<" in producer
    assert "tw::fence_proxy_async();" not in producer
    before = code[:code.index("// T.ws(")]
    assert before.rstrip().split("w_ready[0].arrive();")[0].rstrip().endswith("tw::fence_proxy_async();")
    consumer = code[code.index("// T.ws(0)"):]
    wait = consumer.index("x_ready[0].wait(")
    assert consumer[wait:].split(";", 1)[1].lstrip().startswith("tw::fence_proxy_async();")
    every = kernel_code(gathered_by_a_producer(), **{PassConfigKey.TW_KEEP_PROXY_FENCES: True})
    kept = every[every.index("// T.ws(1)"):]
    assert "tw::fence_proxy_async();" in kept[:kept.index("tw::cp_async<")]


def test_a_fence_after_a_threads_wait_for_its_own_copies_stays():
    """Where the thread itself waits for its cp.async copies (``cp_async_wait``, a pipelined loop's
    in a scope) and a barrier of the scope then hands the tile to a wgmma, the fence between is the
    one that orders the copies; the copy's issue alone does not need one (the IR as ``lower_tma``
    leaves it, walked by the pass's own rule)."""
    from tileworkbench import dtypes
    from tileworkbench.ir.intrinsic_calls import cp_async_wait
    from tileworkbench.passes import elide_proxy_fences as elide
    from tileworkbench.passes.rules.calls import address_of
    from tileworkbench.passes.rules.proxies import fence, is_fence

    x_s = ir.Buffer("x_s", (64, 64), dtypes.float16, "shared")
    x = ir.Buffer("X", (64, 64), dtypes.float16, "global")
    var = ir.Var("t", dtypes.int32)
    copy = ir.Evaluate(ir.Call("tw::cp_async<16>", (address_of(x_s, (var, ir.const(0))),
                                                    address_of(x, (var, ir.const(0))), ir.const(True))))
    gemm = ir.Evaluate(ir.Call("tw::wgmma_gemm_ss<64, 64, 64>", (address_of(x_s, (ir.const(0), ir.const(0))),)))

    def scope_fences(*stmts) -> list:
        body = ir.ThreadScope(0, 128, ir.seq(list(stmts)), var)
        out = elide._drop_unreached_fences(ir.seq([fence(), ir.SyncThreads(), body]))
        return [is_fence(s) for s in collect(out, ir.ThreadScope)[0].body.stmts]

    waited = scope_fences(copy, cp_async_wait(0), fence(), ir.SyncThreads(threads=128), gemm)
    assert waited == [False, False, True, False, False]
    issued = scope_fences(copy, fence(), ir.SyncThreads(threads=128), gemm)
    assert issued == [False, False, False]
