"""A ``@jit`` kernel compiled inside a ``PassContext`` that asks for other configs is compiled
again, not handed back from the jit's cache; and a ``T.dynamic`` kernel's aligned form, compiled
at a later call, keeps the configs its first call ran under."""

import pytest

import tileworkbench as tilelang
import tileworkbench.language as T


@tilelang.jit
def scale(A, factor):
    n = T.const("n")
    A: T.Tensor((n,), T.float32)
    B = T.empty((n,), T.float32)
    with T.Kernel(T.ceildiv(n, 128), threads=128) as bx:
        for i in T.Parallel(128):
            B[bx * 128 + i] = A[bx * 128 + i] * factor
    return B


@tilelang.jit(out_idx=[1])
def scale_builder(n, factor):
    @T.prim_func
    def main(A: T.Tensor((n,), T.float32), B: T.Tensor((n,), T.float32)):
        with T.Kernel(T.ceildiv(n, 128), threads=128) as bx:
            for i in T.Parallel(128):
                B[bx * 128 + i] = A[bx * 128 + i] * factor
    return main


def _configs(kernel) -> dict:
    return kernel.trace.kernel.get("pass_configs", {})


@pytest.mark.parametrize("compile_it", [lambda: scale.compile(n=1024, factor=2.0),
                                        lambda: scale_builder(1024, 2.0)], ids=["eager", "builder"])
def test_jit_cache_follows_the_pass_context(compile_it):
    outside = compile_it()
    with tilelang.PassContext(config={"tl.disable_tma_lower": True}):
        inside = compile_it()
        assert compile_it() is inside  # the same context: the cached kernel
    assert inside is not outside
    assert _configs(inside) == {"tl.disable_tma_lower": True} and _configs(outside) == {}
    assert compile_it() is outside  # outside again: the first kernel


def test_a_dynamic_kernels_aligned_form_keeps_the_configs_it_was_compiled_under(monkeypatch):
    """The aligned form of a ``T.dynamic`` kernel is compiled at a later call, maybe outside the
    context the first call ran in: it still gets that call's configs."""
    from tileworkbench.examples.tilelang_programs import dynamic_shape as example

    monkeypatch.setenv("TILEWORKBENCH_DISABLE_CACHE", "1")
    with tilelang.PassContext(config={"tw.disable_rasterization": True}):
        sized = example.matmul_dynamic_mnk._kernel(dict(example.CONFIG), {"A": ((1000, 520), "float16"),
                                                                          "B": ((520, 300), "float16")})
    assert _configs(sized.general) == {"tw.disable_rasterization": True}
    assert _configs(sized.aligned()) == {"tw.disable_rasterization": True}
