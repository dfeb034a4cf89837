"""``tilelang.carver.arch.driver`` on the GPU: its answers are the device's, as torch reports them."""

from __future__ import annotations

from tileworkbench.carver.arch import driver
from tileworkbench.testing import gpu_marks

pytestmark = gpu_marks(9, 0)


def test_the_device_queries_match_torchs(torch):
    props = torch.cuda.get_device_properties(0)
    assert driver.get_num_sms() == props.multi_processor_count
    assert driver.get_device_name() == props.name
    assert driver.get_max_dynamic_shared_size_bytes() >= 227 * 1024  # Hopper's opt-in shared memory
    assert driver.get_registers_per_block() == 65536
    assert driver.get_cuda_device_properties(0).multi_processor_count == props.multi_processor_count
