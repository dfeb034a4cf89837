"""Warp votes on the GPU (CPU tests: tests/test_warp_votes.py): the same kernel against numpy."""

import numpy as np

import tileworkbench as tw
from tileworkbench.testing import gpu_marks

from tests.warp_vote_programs import votes, votes_input, votes_reference

pytestmark = gpu_marks(9, 0)


def test_the_votes_match_numpy(torch):
    x = votes_input(47)
    outs = [torch.zeros(128, dtype=dt, device="cuda") for dt in (torch.int32, torch.uint64, torch.uint64, torch.int32)]
    tw.compile(votes)(torch.tensor(x, device="cuda"), *outs)
    for got, want in zip(outs, votes_reference(x)):
        assert np.array_equal(got.cpu().numpy(), want)
