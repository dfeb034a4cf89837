"""On the GPU, this session's new fragment forms and front-end fixes (CPU tests in
tests/tilelang_compat: test_fragment_views, test_read_fragments, test_python_helpers,
test_kernel_sequence, test_dynamic), each against torch in float64 on random inputs: fragments up
to unit dimensions (LayerNorm backward), slices (GQA decoding's combine) and slice copies, rows
over a tile of another width, fragments every thread holds whole (a stored scalar, a mask a loop
computes, a whole-fragment maximum), comparisons in plain Python helpers, two kernels naming one
variable, and a builder's T.dynamic size in a kernel sequence; and (later) vectors computed in loops
of their own (KDA's column vector from shared memory, GDN's row vector) fragments read or stored
transposed and a column vector no thread holds whole (through shared memory); a fragment too big
for every thread to hold, read only as slices (mHC's pre kernel's mix); slices laid out as an
accumulator's rows (MHA inference's combine)."""

from __future__ import annotations

import numpy as np

import tileworkbench as tw
from tileworkbench.testing import gpu_marks

from test_stage_fragment_operands import transposes
from tilelang_compat.test_dynamic import _split_and_combine
from tilelang_compat.test_fragment_rows import row_vector_computed_first
from tilelang_compat.test_fragment_views import (combine, layer_norm_backward, rows_over_another_width, slice_copies,
                                                split_combine, split_combine_want, weighted_rows)
from tilelang_compat.test_kernel_sequence import fused_two_steps
from tilelang_compat.test_python_helpers import _want as tile_masks_want, tile_masks
from tilelang_compat.test_read_fragments import (column_mask_and_full_max, column_scale, column_scale_want,
                                                 column_vector_from_shared, scalar_fragments, squares_by_groups)

pytestmark = gpu_marks(9, 0)


def test_unit_dimensions_in_layer_norm_backward(torch):
    x, dy = torch.randn(8, 256, device="cuda"), torch.randn(8, 256, device="cuda")
    dx, dg = torch.zeros(8, 256, device="cuda"), torch.zeros(256, device="cuda")
    tw.compile(layer_norm_backward)(x, dy, dx, dg)
    x2 = 2 * x.double()
    torch.testing.assert_close(dx.double(), x2 - x2.mean(1, keepdim=True), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(dg.double(), (dy.double() * x2).sum(0), rtol=1e-5, atol=1e-4)


def test_slices_in_gqa_decoding_s_combine(torch):
    lse, part = torch.randn(4, 128, device="cuda") * 3, torch.randn(4, 128, device="cuda")
    out = torch.zeros(128, device="cuda")
    tw.compile(combine)(lse, part, out)
    l64 = lse.double()
    total = torch.log2(torch.exp2(l64 - l64.max(0).values).sum(0)) + l64.max(0).values
    torch.testing.assert_close(out.double(), (part.double() * torch.exp2(l64 - total)).sum(0), rtol=1e-5, atol=1e-6)


def test_slice_copies(torch):
    lse = torch.randn(4, 128, device="cuda")
    out = torch.zeros_like(lse)
    tw.compile(slice_copies)(lse, out)
    torch.testing.assert_close(out, lse * torch.tensor([4.0, 3.0, 2.0, 1.0], device="cuda")[:, None], rtol=0, atol=0)


def test_rows_over_another_width(torch):
    x, s = torch.rand(16, 64, device="cuda") + 0.5, torch.randn(16, 40, device="cuda")
    out = torch.zeros_like(s)
    tw.compile(rows_over_another_width)(x, s, out)
    x64 = x.double()
    torch.testing.assert_close(out.double(), (s.double() - x64.max(1, keepdim=True).values) / x64.sum(1, keepdim=True),
                               rtol=1e-5, atol=1e-6)


def test_fragments_every_thread_holds_whole(torch):
    d, x = torch.randn(4, device="cuda"), torch.randn(4, 16, 32, device="cuda")
    out = torch.zeros_like(x)
    tw.compile(scalar_fragments)(d, x, out)
    bias = torch.where(torch.arange(4, device="cuda") % 2 == 1, d * 10, torch.zeros_like(d))
    torch.testing.assert_close(out, x * d[:, None, None] + bias[:, None, None], rtol=1e-6, atol=1e-6)
    idx = torch.randint(-3, 5, (32,), device="cuda", dtype=torch.int32)
    s, v = torch.randn(16, 32, device="cuda"), torch.randn(64, device="cuda")
    masked, shifted = torch.zeros_like(s), torch.zeros_like(v)
    tw.compile(column_mask_and_full_max)(idx, s, v, masked, shifted)
    assert torch.equal(masked, torch.where(idx[None, :] >= 0, s, torch.full_like(s, -1.0)))
    assert torch.equal(shifted, v - v.max())


def test_vectors_computed_in_loops_of_their_own(torch):
    """A column vector every thread computes from shared memory (KDA backward), and a row vector
    that takes the rows of the fragment it later scales (GDN backward)."""
    k, beta, g = torch.randn(8, 64, device="cuda"), torch.randn(8, device="cuda"), torch.randn(16, 64, device="cuda")
    out = torch.zeros_like(g)
    tw.compile(column_vector_from_shared)(k, beta, g, out)
    kb = k.double() * beta.double()[:, None]
    want = g.double() + torch.stack([kb[i:].sum(0) for i in range(16)])
    torch.testing.assert_close(out.double(), want, rtol=1e-5, atol=1e-5)
    gv, q = torch.randn(64, device="cuda"), torch.randn(64, 32, device="cuda")
    scaled = torch.zeros_like(q)
    tw.compile(row_vector_computed_first)(gv, q, scaled)
    torch.testing.assert_close(scaled.double(), q.double() * gv.double().exp()[:, None], rtol=1e-5, atol=1e-6)


def test_fragments_read_and_stored_transposed(torch):
    x = torch.randn(32, 64, device="cuda")
    y, z = torch.zeros(64, 32, device="cuda"), torch.zeros(64, 32, device="cuda")
    tw.compile(transposes)(x, y, z)
    assert torch.equal(y, x.T * 2) and torch.equal(z, x.T + 1)


def test_a_column_read_through_shared_memory(torch):
    x, d = torch.randn(4, 32, 64, device="cuda"), torch.randn(4, 32, device="cuda")
    y = torch.zeros(4, 64, 32, device="cuda")
    tw.compile(column_scale)(x, d, y)
    np.testing.assert_allclose(y.cpu().numpy(), column_scale_want(x.cpu().numpy(), d.cpu().numpy()), rtol=1e-5,
                               atol=1e-6)


def test_a_large_fragment_read_at_computed_indices(torch):
    x = torch.randn(32, 512, device="cuda")
    s = torch.zeros(32, 4, device="cuda")
    tw.compile(squares_by_groups)(x, s)
    torch.testing.assert_close(s.double(), (x.double() ** 2).reshape(32, 128, 4).sum(1), rtol=1e-5, atol=1e-5)


def test_comparisons_in_python_helpers(torch):
    for strict in (0, 1):
        out = torch.full((32, 32), -1, device="cuda", dtype=torch.int32)
        tw.compile(tile_masks)(torch.tensor([strict], device="cuda", dtype=torch.int32), out)
        assert np.array_equal(out.cpu().numpy(), tile_masks_want(bool(strict)))


def test_two_kernel_blocks_and_a_builder_size_in_a_sequence(torch):
    a, b = torch.randn(256, device="cuda"), torch.zeros(256, device="cuda")
    mid = tw.jit(fused_two_steps)(a, b)
    torch.testing.assert_close(mid, a * 2, rtol=0, atol=0)
    torch.testing.assert_close(b, (a * 2).view(4, 64).flip(0).reshape(-1) + 1, rtol=0, atol=0)
    kernel = tw.compile(_split_and_combine(), out_idx=-1)
    for n in (37, 64):
        k = torch.randn(n, 4, device="cuda")
        torch.testing.assert_close(kernel(k).double(), k.double().sum(0), rtol=1e-5, atol=1e-5)


def test_a_fragment_read_only_as_slices(torch):
    for threads, scoped in ((96, False), (96, True), (128, False)):
        r, p = torch.randn(4, 256, device="cuda"), torch.randn(4, device="cuda")
        out, flag = torch.zeros(256, device="cuda"), torch.zeros(1, device="cuda")
        tw.compile(weighted_rows(threads, scoped))(r, p, out, flag)
        torch.testing.assert_close(out.double(), (p.double()[:, None] * r.double()).sum(0), rtol=1e-5, atol=1e-5)


def test_slices_as_the_rows_of_an_accumulator(torch):
    lse = torch.randn(4, 128, device="cuda").half()
    parts = torch.randn(128, 4, 128, device="cuda").half()
    out = torch.zeros(128, 128, device="cuda")
    tw.compile(split_combine())(lse, parts, out)
    np.testing.assert_allclose(out.cpu().numpy(), split_combine_want(lse.cpu().numpy(), parts.cpu().numpy()),
                               rtol=1e-4, atol=1e-4)
