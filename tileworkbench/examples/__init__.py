"""Example kernels: the ones the tests, the demo, the benchmarks and the notebooks share."""

from .elementwise import elementwise_add
from .gemm import lower_triangular_matmul, matmul, matmul_tma_copy, matmul_tma_copy_store
from .reduction import row_sum

ALL_EXAMPLES = {
    "elementwise_add": lambda: elementwise_add(1024, 1024, 32, 128),
    "row_sum": lambda: row_sum(1024, 512, 16),
    "matmul_fp16": lambda: matmul(1024, 1024, 1024, 128, 128, 32),
    "matmul_bf16_ragged": lambda: matmul(1000, 1030, 770, 128, 128, 32, dtype="bfloat16"),
    "lower_triangular_matmul": lambda: lower_triangular_matmul(1024, 1024),
    "matmul_tma_copy_2": lambda: matmul_tma_copy(1024, 1024, 1024, 128, 128, 32, "float16", "float16",
                                                 "float32", 128, 2),
    "matmul_tma_copy_store_3": lambda: matmul_tma_copy_store(1024, 1024, 1024, 128, 128, 32, "float16",
                                                             "float16", "float32", 128, 3),
}

__all__ = ["elementwise_add", "lower_triangular_matmul", "matmul", "matmul_tma_copy", "matmul_tma_copy_store", "row_sum", "ALL_EXAMPLES"]
