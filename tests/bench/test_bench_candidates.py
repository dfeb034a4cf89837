"""Every kernel the GEMM suite would run lowers and NVRTC-compiles for sm_90a (no GPU needed)."""

import pytest

import tileworkbench as tw
from tileworkbench.backend.nvrtc import compile_check
from tileworkbench.bench import gemm
from tileworkbench.examples.gemm import matmul_tma_copy, matmul_tma_copy_store

SM90 = {"kind": "cuda", "arch": "sm_90"}
SMEM_LIMIT = 227 * 1024


def _cases():
    for (M, N, K), dtypes in [((4096, 4096, 4096), gemm.DTYPES), ((16, 4096, 4096), ("float16",))]:
        for dtype in dtypes:
            for cand in gemm.candidate_kernels(M, N, K, dtype):
                yield pytest.param(cand, id=f"{M}x{N}x{K}-{dtype}-{cand.name}")
    for cand in gemm.spec_kernels(4096, 4096, 4096):
        yield pytest.param(cand, id=f"spec-{cand.name}")


@pytest.mark.parametrize("cand", list(_cases()))
def test_candidate_lowers_and_compiles_for_sm90a(cand):
    artifact = tw.lower(cand.build(), target=SM90, pass_configs=cand.pass_configs)
    assert artifact.target.arch == "sm_90a"
    assert 0 < artifact.trace.resources["smem_bytes"] <= SMEM_LIMIT
    result = compile_check(artifact.device_source, artifact.target.arch, name=f"{artifact.kernel_name}.cu")
    assert result.cubin, "NVRTC produced no cubin"
    assert result.spills_bytes == 0, f"{cand.name} spills {result.spills_bytes} bytes:\n{result.log}"


def test_spec_rows_use_the_seed_kernels_as_the_spec_runs_them():
    cands = gemm.spec_kernels(8192, 8192, 8192)
    assert [c.name for c in cands] == ["matmul_tma_copy s2", "matmul_tma_copy s3",
                                       "matmul_tma_copy_store s2", "matmul_tma_copy_store s3"]
    assert [c.builder for c in cands] == [matmul_tma_copy, matmul_tma_copy, matmul_tma_copy_store, matmul_tma_copy_store]
    for c in cands:
        assert (c.kwargs["block_M"], c.kwargs["block_N"], c.kwargs["block_K"], c.kwargs["threads"]) == (128, 128, 32, 128)
        assert (c.kwargs["in_dtype"], c.kwargs["out_dtype"], c.kwargs["accum_dtype"]) == ("float16", "float16", "float32")
        assert c.pass_configs == {tw.PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True}


def test_small_m_problems_get_small_m_tiles():
    assert all(c.kwargs["block_M"] <= 64 for c in gemm.candidate_kernels(16, 4096, 4096, "float16"))
    general = [f"matmul {t.name}" for t in gemm.GENERAL_TILES]
    assert [c.name for c in gemm.candidate_kernels(4096, 4096, 4096, "float16")] == general
    assert [c.name for c in gemm.candidate_kernels(65, 4096, 4096, "float16")] == general
    assert all(c.kwargs["dtype"] == "bfloat16" for c in gemm.candidate_kernels(1024, 1024, 1024, "bfloat16"))


def test_extra_candidate_sources_join_every_row(monkeypatch):
    monkeypatch.setattr(gemm, "EXTRA_CANDIDATES", [])
    before = len(gemm.candidate_kernels(1024, 1024, 1024, "float16"))

    @gemm.register_candidates
    def faster(M, N, K, dtype):
        yield gemm.matmul_candidate(M, N, K, dtype, gemm.Config(64, 64, 64, 4, 128))

    names = [c.name for c in gemm.candidate_kernels(1024, 1024, 1024, "float16")]
    assert len(names) == before + 1 and names[-1] == "matmul 64x64x64 s4 t128"


def test_plan_rows():
    full = gemm.plan(gemm.default_shapes(quick=False))
    assert len(full) == 7 * 2 + 2 * 4  # 7 shapes x 2 dtypes, then 4 spec kernels at 4096^3 and 8192^3
    assert {(j.M, j.N, j.K) for j in full} == {(s, s, s) for s in gemm.SQUARE_SIZES} | set(gemm.LLM_SHAPES)
    spec = [j for j in full if j.kernel != "tileworkbench"]
    assert {(j.M, j.dtype) for j in spec} == {(4096, "float16"), (8192, "float16")}
    quick = gemm.plan(gemm.default_shapes(quick=True))
    assert len(quick) == 2 * 2 + 4 and {j.M for j in quick} == {1024, 4096}
    assert all(j.kernel == "tileworkbench" for j in gemm.plan([(4096,) * 3], ["bfloat16"]))
    assert len(gemm.plan([(4096,) * 3], ["float16"], spec=False)) == 1


def test_parse_shapes():
    assert gemm.parse_shapes("1024, 4096x14336x4096") == [(1024, 1024, 1024), (4096, 14336, 4096)]
    for bad in ("12x34", "0", "axb"):
        with pytest.raises(ValueError):
            gemm.parse_shapes(bad)
