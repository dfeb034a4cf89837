"""On the GPU, each thread's Philox generator (CPU tests: tests/tilelang_compat/test_random.py):
the integers of TileLang's rand_uint example and of per-element generators equal the scalar
Philox reference and cuRAND's stepping bit for bit, the uniform floats too, the normal floats to
the last places of CUDA's sin and log; only the threads that draw step their generator; and
over a million draws the uniforms and normals have the moments they should."""

from __future__ import annotations

import numpy as np

import tileworkbench as tw
import tileworkbench.language as T
from tileworkbench.testing import gpu_marks

from tilelang_compat.test_random import per_element, rand_1d, skipped_draws, words

pytestmark = gpu_marks(9, 0)


def test_a_thread_draws_curands_words_in_order(torch):
    for M in (1024, 1000):
        a = torch.zeros(M, device="cuda", dtype=torch.uint32)
        tw.compile(rand_1d(M))(a)
        assert a.cpu().numpy().tolist() == words(42, 0, 0, M)


def test_per_element_generators_match_the_cpu_interpreter(torch):
    outs = [torch.zeros(2048, device="cuda", dtype=dt) for dt in (torch.uint32, torch.float32, torch.float64,
                                                                   torch.float32)]
    tw.compile(per_element)(*outs)
    cpu = [np.zeros(2048, dt) for dt in (np.uint32, np.float32, np.float64, np.float32)]
    tw.compile(per_element, target="cpu")(*cpu)
    gpu = [o.cpu().numpy() for o in outs]
    for k in range(3):  # integers and uniforms: bit for bit
        np.testing.assert_array_equal(gpu[k], cpu[k])
    np.testing.assert_allclose(gpu[3], cpu[3], rtol=1e-5, atol=1e-5)


def test_only_the_threads_that_draw_step_their_generator(torch):
    b = torch.zeros(256, device="cuda", dtype=torch.uint32)
    tw.compile(skipped_draws)(b)
    want = [words(5, t, 0, 2)[1 if t % 2 == 0 else 0] for t in range(256)]
    assert b.cpu().numpy().tolist() == want


@T.prim_func
def many(U: T.Tensor((1 << 20,), "float32"), N: T.Tensor((1 << 20,), "float32")):
    with T.Kernel(256, threads=256) as bx:
        T.rng_init(2026)
        for i in T.Parallel(4096):
            U[bx * 4096 + i] = T.rng_rand_float()
        for i in T.Parallel(4096):
            N[bx * 4096 + i] = T.rng_rand_float(dist="normal")


def test_a_million_draws_have_the_moments_they_should(torch):
    u, n = (torch.zeros(1 << 20, device="cuda") for _ in range(2))
    tw.compile(many)(u, n)
    assert 0 < u.min().item() and u.max().item() <= 1
    assert abs(u.mean().item() - 0.5) < 2e-3 and abs(u.var().item() - 1 / 12) < 2e-3
    assert abs(n.mean().item()) < 5e-3 and abs(n.std().item() - 1) < 5e-3
    assert torch.unique(u).numel() > 0.95 * u.numel()  # float32 values repeat: about 2% of a million


def test_a_jit_kernel_of_outputs_only_returns_torch_tensors(torch):
    """TileLang's rand_uint example as a user writes it: no input tensor to follow, so the output
    comes back as a torch tensor (TileLang's), since the program uses torch."""
    import tileworkbench as tilelang

    @tilelang.jit
    def rand_1d(M=1024, seed=42):
        A = T.empty((M,), "uint32")
        with T.Kernel(T.ceildiv(M, 128), threads=1) as bx:
            tx = T.get_thread_binding()
            T.rng_init(seed, 0, bx * 128 + tx * 128)
            for i, j in T.Parallel(1, 128):
                idx = (bx + i) * 128 + j
                if idx < M:
                    A[idx] = T.rng_rand()
        return A

    out = rand_1d(1000, 42)
    assert isinstance(out, torch.Tensor) and out.is_cuda and out.dtype == torch.uint32
    assert out.cpu().numpy().tolist() == words(42, 0, 0, 1000)
