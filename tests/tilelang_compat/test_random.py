"""``T.rng_init``, ``T.rng_rand``, ``T.rng_rand_float``: each thread's Philox 4x32-10 generator,
stepped as cuRAND's (TileLang's ``examples/rand/rand_uint.py`` checks its integers against
Triton's ``randint4x``). Checked here against a scalar Philox written out in this file (itself
checked against the generator's published known answer), on both CPU interpreters (the tile
level hands a kernel that draws to the thread level), with NVRTC, and the errors for draws whose
order or number the code would not keep."""

from __future__ import annotations

import math

import numpy as np
import pytest

import tileworkbench as tw
import tileworkbench.language as T
from tileworkbench.errors import CompileError

from .interpreters import on_both_interpreters


def philox(counter, key):
    """Philox 4x32-10 of one 128-bit counter (four words, lowest first) under a 64-bit key."""
    c, k = list(counter), list(key)
    for _ in range(10):
        p0, p1 = 0xD2511F53 * c[0], 0xCD9E8D57 * c[2]
        c = [(p1 >> 32) ^ c[1] ^ k[0], p1 & 0xFFFFFFFF, (p0 >> 32) ^ c[3] ^ k[1], p0 & 0xFFFFFFFF]
        k = [(k[0] + 0x9E3779B9) & 0xFFFFFFFF, (k[1] + 0xBB67AE85) & 0xFFFFFFFF]
    return c


def words(seed: int, seq: int, off: int, n: int) -> list[int]:
    """The first ``n`` words after ``curand_init(seed, seq, off)``: word ``off + j`` of subsequence
    ``seq`` is word ``(off + j) % 4`` of the block at counter ``(off + j) // 4`` + ``seq`` * 2^64."""
    key = [seed & 0xFFFFFFFF, seed >> 32]
    out = []
    for j in range(off, off + n):
        block = j // 4 + (seq << 64)
        out.append(philox([(block >> (32 * w)) & 0xFFFFFFFF for w in range(4)], key)[j % 4])
    return out


def test_the_reference_is_philox():
    # Random123's known answer for Philox 4x32-10 at counter 0, key 0
    assert philox([0, 0, 0, 0], [0, 0]) == [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]


def rand_1d(M: int):
    """TileLang's rand_uint example: one thread a block draws 128 words in order."""
    @T.prim_func
    def main(A: T.Tensor((M,), "uint32")):
        with T.Kernel(T.ceildiv(M, 128), threads=1) as bx:
            tx = T.get_thread_binding()
            T.rng_init(42, 0, bx * 128 + tx * 128)
            for i, j in T.Parallel(1, 128):
                idx = (bx + i) * 128 + j
                if idx < M:
                    A[idx] = T.rng_rand()
    return main


@on_both_interpreters
@pytest.mark.parametrize("M", [1024, 1000])
def test_a_thread_draws_curands_words_in_order(run, M):
    a = np.zeros(M, np.uint32)
    run(rand_1d(M), a)
    assert a.tolist() == words(42, 0, 0, M)


@T.prim_func
def per_element(A: T.Tensor((2048,), "uint32"), U: T.Tensor((2048,), "float32"), D: T.Tensor((2048,), "float64"),
                N: T.Tensor((2048,), "float32")):
    """A generator started per element (subsequence = the element): the same numbers however the
    elements are spread over threads."""
    with T.Kernel(2, threads=128) as bx:
        for i in T.Parallel(1024):
            T.rng_init(7, bx * 1024 + i)
            A[bx * 1024 + i] = T.rng_rand()
            U[bx * 1024 + i] = T.rng_rand_float()
            D[bx * 1024 + i] = T.rng_rand_float(64)
            N[bx * 1024 + i] = T.rng_rand_float(dist="normal")


@on_both_interpreters
def test_integers_uniforms_and_normals_of_per_element_generators(run):
    a, u = np.zeros(2048, np.uint32), np.zeros(2048, np.float32)
    d, n = np.zeros(2048, np.float64), np.zeros(2048, np.float32)
    run(per_element, a, u, d, n)
    for e in range(0, 2048, 37):
        w = words(7, e, 0, 6)
        assert a[e] == w[0]
        assert u[e] == np.float32(w[1]) * np.float32(2.0**-32) + np.float32(2.0**-33)
        assert d[e] == (w[2] ^ (w[3] << 21)) * 2.0**-53 + 2.0**-54
        uniform = [np.float32(x) * np.float32(2.0**-32) + np.float32(2.0**-33) for x in w[4:6]]
        normal = math.sqrt(-2 * math.log(uniform[0])) * math.sin(2 * math.pi * uniform[1])
        assert n[e] == pytest.approx(normal, rel=1e-5, abs=1e-5)
    assert 0 < u.min() and u.max() <= 1 and abs(u.mean() - 0.5) < 0.03
    assert abs(n.mean()) < 0.1 and abs(n.std() - 1) < 0.1


@T.prim_func
def skipped_draws(B: T.Tensor((256,), "uint32")):
    """Even threads draw once under an `if`; every thread's next draw shows who drew."""
    with T.Kernel(2, threads=128) as bx:
        tx = T.get_thread_binding()
        T.rng_init(5)
        if tx % 2 == 0:
            skipped = T.rng_rand()
            B[bx * 128 + tx] = skipped  # overwritten below: the draw is what counts
        B[bx * 128 + tx] = T.rng_rand()


@on_both_interpreters
def test_only_the_threads_that_draw_step_their_generator(run):
    b = np.zeros(256, np.uint32)
    run(skipped_draws, b)
    for t in range(256):  # the default subsequence: tx + bx * threads
        assert b[t] == words(5, t, 0, 2)[1 if t % 2 == 0 else 0]


def test_the_generator_is_declared_once_and_its_header_inlined(nvrtc_check):
    for kernel in (rand_1d(1000), per_element, skipped_draws):
        source = tw.lower(kernel, target="sm_90a").device_source
        assert source.count("tw::Philox tw_rng;") == 1 and "// ---- tw/random.h ----" in source
        nvrtc_check(source, "sm_90a")


def test_a_kernel_that_does_not_draw_has_no_generator():
    source = tw.lower(rand_1d(1000), target="sm_90a").device_source
    plain = tw.lower(_copy_kernel(), target="sm_90a").device_source
    assert "tw/random.h" in source and "tw/random.h" not in plain and "tw_rng" not in plain


def _copy_kernel():
    @T.prim_func
    def main(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128):
            for i in T.Parallel(128):
                B[i] = A[i]
    return main


def refused(form: str):
    """A kernel drawing where the code would not keep the draws' order or number."""
    @T.prim_func
    def main(A: T.Tensor((256,), "uint32"), F: T.Tensor((256,), "float32")):
        with T.Kernel(1, threads=128):
            tx = T.get_thread_binding()
            s = T.alloc_shared((128,), "float32")
            if form != "before init":
                T.rng_init(1)
            if form == "before init":
                A[tx] = T.rng_rand()
                T.rng_init(1)
            if form == "two in one":
                A[tx] = T.rng_rand() - T.rng_rand()
            if form == "in an index":
                A[T.rng_rand() % 256] = 1
            if form == "in a condition":
                if T.rng_rand_float() < 0.5:
                    A[tx] = 1
            if form == "in a fill":
                T.fill(s, T.rng_rand_float())
                F[tx] = s[tx]
    return main


@pytest.mark.parametrize("form, message", [
    ("before init", "a random draw before T.rng_init"),
    ("two in one", "2 random draws in one statement"),
    ("in an index", "a random draw in an index"),
    ("in a condition", "a random draw in the condition"),
    ("in a fill", "a random draw in the arguments of a tile operation"),
])
def test_draws_whose_order_or_number_would_change_are_refused_at_their_line(form, message):
    with pytest.raises(CompileError, match=message) as info:
        tw.lower(refused(form), target="sm_90a")
    assert info.value.loc is not None and "rng" in info.value.loc.text


@pytest.mark.parametrize("call, message", [
    (lambda: T.rng_init(1, generator="curandStateXORWOW_t"), "Philox 4x32-10"),
    (lambda: T.rng_rand_float(16), "bit is 32 or 64"),
    (lambda: T.rng_rand_float(dist="poisson"), "dist is 'uniform' or 'normal'"),
])
def test_what_the_generator_does_not_do_is_a_compile_error(call, message):
    with pytest.raises(CompileError, match=message):
        @T.prim_func
        def main(A: T.Tensor((128,), "float32")):
            with T.Kernel(1, threads=128):
                T.rng_init(1)
                call()


def test_a_draw_is_each_threads_own_value():
    """A condition on a draw differs between threads: shared work under it is refused, as under
    ``tx % 2``, instead of a barrier some threads would skip."""
    @T.prim_func
    def main(A: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128):
            tx = T.get_thread_binding()
            s = T.alloc_shared((128,), "float32")
            T.rng_init(3)
            coin = T.rng_rand()
            if coin % 2 == 0:
                s[tx] = 1.0
                A[tx] = s[127 - tx]

    with pytest.raises(CompileError, match="may differ between the threads of a block"):
        tw.lower(main, target="sm_90a")
