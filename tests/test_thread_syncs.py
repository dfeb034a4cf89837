"""Where ``insert_thread_syncs`` puts block barriers in loops: none inside a loop whose iterations
touch different elements of a shared tile, one before a loop where only what came before it
needs one, and still one per iteration where iterations do share elements."""

from __future__ import annotations

import pytest

import tileworkbench as tw
import tileworkbench.language as T

SM90 = "sm_90a"


def _loop_bodies(src: str) -> dict:
    """{loop variable: the text of that loop's body}, for the kernel's `for (int v = ...` loops."""
    out = {}
    lines = src[src.find('extern "C"'):].splitlines()
    for n, line in enumerate(lines):
        if line.strip().startswith("for (int "):
            var = line.strip()[len("for (int "):].split(" ")[0]
            depth, body = 0, []
            for inner in lines[n:]:
                depth += inner.count("{") - inner.count("}")
                body.append(inner)
                if depth == 0:
                    break
            out[var] = "\n".join(body[1:])
    return out


def staged_dot(per_element_sync: bool):
    """Each thread stages a row of B and the block a slice of x in shared memory, element by
    element, then reads them back; with ``per_element_sync`` the staging loop writes x[0] in every
    iteration (iterations share an element, so a barrier per iteration stays)."""
    @T.prim_func
    def main(x: T.Tensor((1024,), "float32"), B: T.Tensor((128, 1024), "float32"), y: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128):
            t = T.get_thread_binding(0)
            xs = T.alloc_shared((128,), "float32")
            bs = T.alloc_shared((128, 128), "float32")
            acc = T.alloc_local((1,), "float32")
            acc[0] = 0.0
            for kb in T.serial(8):
                for k in T.serial(128):
                    if per_element_sync:
                        xs[0] = x[kb * 128 + k]
                    else:
                        xs[k] = x[kb * 128 + k]
                    bs[t, k] = B[t, kb * 128 + k]
                for k in T.serial(128):
                    acc[0] += xs[k] * bs[t, k]
            y[t] = acc[0]
    return main


def test_a_loop_whose_iterations_touch_different_elements_has_no_barrier_inside():
    loops = _loop_bodies(tw.lower(staged_dot(False), target=SM90).device_source)
    outer, staging, reading = loops["kb"], loops["k"], loops["k_1"]
    assert "__syncthreads" not in staging and "__syncthreads" not in reading
    assert outer.count("__syncthreads") == 2  # before staging (WAR on the last reads) and before reading


def test_a_loop_whose_iterations_share_an_element_keeps_its_barrier():
    loops = _loop_bodies(tw.lower(staged_dot(True), target=SM90).device_source)
    assert "__syncthreads" in loops["k"]  # xs[0] is written by every iteration
    assert "__syncthreads" not in loops["k_1"]  # reads only: the barrier before the loop suffices


def masked_tile_sum(condition: str):
    """Each block stages a 128-element tile in shared memory and sums it reversed, all inside an
    ``if``: on a mask read at the block's index (the same for every thread), or on the thread
    index (different threads take different branches)."""
    @T.prim_func
    def main(x: T.Tensor((1024,), "float32"), mask: T.Tensor((8,), "int32"), y: T.Tensor((1024,), "float32")):
        with T.Kernel(8, threads=128) as bx:
            t = T.get_thread_binding(0)
            xs = T.alloc_shared((128,), "float32")
            if condition == "block" and mask[bx] != 0:
                xs[t] = x[bx * 128 + t]
                y[bx * 128 + t] = xs[127 - t]
            if condition == "thread" and t < 48:  # part of a warp: no scope of its own (t < 64 would be)
                xs[t] = x[bx * 128 + t]
                y[bx * 128 + t] = xs[47 - t]
    return main


def test_a_hazard_inside_an_if_on_a_block_uniform_condition_gets_its_barrier_inside():
    src = tw.lower(masked_tile_sum("block"), target=SM90).device_source
    body = src[src.find("if ("):]
    write, sync, read = body.find("xs["), body.find("__syncthreads"), body.find("= xs[")
    assert -1 not in (write, sync, read) and write < sync < read  # the read waits for every thread's write


def test_a_hazard_inside_an_if_on_the_thread_index_is_a_compile_error_at_the_if():
    with pytest.raises(tw.CompileError) as info:
        tw.lower(masked_tile_sum("thread"), target=SM90)
    message = str(info.value)
    assert "may differ between the threads of a block" in message and "(t < 48)" in message
    assert info.value.loc is not None and "if condition == \"thread\"" in info.value.loc.text


def test_uniformity_follows_scalars_fragments_and_indices():
    from tileworkbench.ir import nodes as ir
    from tileworkbench.ir.visitor import collect
    from tileworkbench.passes.rules.uniformity import Variance

    @T.prim_func
    def main(x: T.Tensor((1024,), "float32"), y: T.Tensor((1024,), "float32")):
        with T.Kernel(8, threads=128) as bx:
            t = T.get_thread_binding(0)
            row = bx * 2  # from the block index
            lane = t % 32  # from the thread index
            by_lane = T.alloc_var(T.int32)
            by_lane[0] = lane
            by_row = T.alloc_var(T.int32)
            by_row[0] = row
            frag = T.alloc_fragment((128,), "float32")
            for i in T.Parallel(128):
                frag[i] = x[row + i]
            for k in T.serial(4):
                if row + k > 2:
                    y[0] = 1.0
                if lane > 2:
                    y[1] = 1.0
                if x[row + k] > 0:
                    y[2] = 1.0
                if x[lane] > 0:
                    y[3] = 1.0
                if frag[0] > 0:
                    y[4] = 1.0
                if by_lane[0] > 0:
                    y[5] = 1.0
                if by_row[0] > 0:
                    y[6] = 1.0

    variance = Variance(main)
    uniform = [variance.is_uniform(s.cond) for s in collect(main.body, ir.IfThenElse)]
    assert uniform == [True, False, True, False, False, False, True]


def chained_tiles():
    """Retention's shape: each iteration fills ``a`` (scaled, element by element) and ``b`` (a copy)
    from global memory, multiplies them, stages the product in ``t`` and ends with a gemm that reads
    ``t`` and ``b``; ``b``'s next fill must wait for that last read, ``a``'s need not (its last
    reader is before the barrier ``t`` needs)."""
    @T.prim_func
    def main(A: T.Tensor((512, 64), "float16"), B: T.Tensor((512, 64), "float16"), C: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128):
            a, b, t = T.alloc_shared((64, 64), "float16"), T.alloc_shared((64, 64), "float16"), \
                T.alloc_shared((64, 64), "float16")
            s, state = T.alloc_fragment((64, 64), "float32"), T.alloc_fragment((64, 64), "float32")
            T.clear(state)
            for i in T.serial(8):
                for r, c in T.Parallel(64, 64):
                    a[r, c] = A[i * 64 + r, c] * 0.5
                T.copy(B[i * 64, 0], b)
                T.gemm(a, b, s, clear_accum=True)
                T.copy(s, t)
                T.gemm(t, b, state)
            T.copy(state, C)
    return main


def test_a_barrier_for_the_last_iterations_reads_goes_on_top_when_that_costs_none():
    """The barrier ``b``'s fill needs (after the previous iteration's last gemm) stands at the top of
    the body, before ``a``'s fill: both tiles' global loads are then in flight together, and the
    body still has three barriers (the others before each gemm)."""
    body = _loop_bodies(tw.lower(chained_tiles(), target=SM90).device_source)["i"]
    lines = [x.strip() for x in body.splitlines()]
    syncs = [n for n, x in enumerate(lines) if x == "__syncthreads();"]
    loads = [n for n, x in enumerate(lines) if "(&A[" in x or "(&B[" in x]
    gemms = [n for n, x in enumerate(lines) if "wgmma_gemm" in x]
    assert len(syncs) == 3 and len(gemms) == 2 and len(loads) == 2, body
    assert syncs[0] < min(loads) and max(loads) < syncs[1] < gemms[0] < syncs[2] < gemms[1], body


def test_a_threads_own_cp_async_waits_for_the_other_threads_reads_of_its_bytes():
    """``T.ptx_cp_async`` lands for an mbarrier, as a TMA load does, so nothing needs a barrier after
    it; but it overwrites shared bytes other threads read just before (thread 0 reads what thread
    127's copy replaces): a block barrier stands between (there was none)."""

    @T.prim_func
    def main(A: T.Tensor((1024,), "float16"), B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128):
            s = T.alloc_shared((1024,), "float16")
            bar = T.alloc_barrier(arrive_count=128)
            tx = T.get_thread_binding()
            T.copy(A, s)
            v = T.alloc_local((1,), "float32")
            v[0] = T.cast(s[1023 - tx * 8], "float32")
            T.ptx_cp_async(T.access_ptr(s[tx * 8], "w", 8), T.access_ptr(A[(tx * 8 + 8) % 1024], "r", 8), 8)
            T.cp_async_barrier_noinc(bar)
            T.barrier_wait(bar, 0)
            B[tx] = v[0] + T.cast(s[tx * 8], "float32")

    src = tw.lower(main, target=SM90).kernel_source
    read = src.index("v[0] = ")
    copy = src.index("tw::cp_async<16>", read)
    assert "__syncthreads();" in src[read:copy]
    wait = src.index(".wait(0);", copy)
    assert "__syncthreads();" not in src[copy:src.index("B[", wait)]  # the mbarrier orders the read after it
