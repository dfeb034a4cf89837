"""Experiment: what the GPU gives for C's float-to-integer conversions where C leaves them undefined
(NaN, infinities, values past the target's range), for float and double sources and every integer
width, as NVRTC compiles ``(T)x`` and as the conversion intrinsics do. The CPU interpreters and
``tw::narrow_from_float`` follow what this finds (docs/experiments.md, "Float to integer").

    PYTHONPATH=. python3 scripts/experiments/float_to_int.py      (needs a GPU and CuPy)
"""

import cupy
import numpy as np

VALUES = [np.nan, np.inf, -np.inf, -0.7, -1.5, -129.5, 255.9, 70000.0, -40000.0, 3e9, -3e9, 5e9, 1e19, -1e19, 2e19]
TARGETS = [("signed char", np.int8), ("unsigned char", np.uint8), ("short", np.int16), ("unsigned short", np.uint16),
           ("int", np.int32), ("unsigned int", np.uint32), ("long long", np.int64), ("unsigned long long", np.uint64)]
INTRINSICS = [("__float2int_rz", "float", np.int32), ("__float2uint_rz", "float", np.uint32),
              ("__float2ll_rz", "float", np.int64), ("__float2ull_rz", "float", np.uint64),
              ("__double2int_rz", "double", np.int32), ("__double2uint_rz", "double", np.uint32),
              ("__double2ll_rz", "double", np.int64), ("__double2ull_rz", "double", np.uint64)]


def run(expression: str, source: str, np_target) -> list:
    code = (f'extern "C" __global__ void k(const {source}* x, long long* y, int n) {{'
            f' int i = threadIdx.x; if (i < n) y[i] = (long long)({expression}); }}')
    kernel = cupy.RawKernel(code, "k", options=("-std=c++17",))
    x = cupy.asarray(np.asarray(VALUES, np.float32 if source == "float" else np.float64))
    y = cupy.zeros(len(VALUES), cupy.int64)
    kernel((1,), (32,), (x, y, np.int32(len(VALUES))))
    out = cupy.asnumpy(y)
    # the value as the target type holds it (the long long carries its bits, sign-extended or not)
    return [int(np.asarray(v).astype(np.int64).astype(np_target).item()) if np_target != np.uint64
            else int(np.int64(v).view(np.uint64)) for v in out]


def main():
    print("inputs:", VALUES)
    for source in ("float", "double"):
        for name, np_target in TARGETS:
            print(f"({name})({source}):", run(f"({name})x[i]", source, np_target))
    for name, source, np_target in INTRINSICS:
        print(f"{name}:", run(f"{name}(x[i])", source, np_target))


if __name__ == "__main__":
    main()
