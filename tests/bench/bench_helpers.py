"""A synthetic GEMM record built with the suite's own row code (no GPU): the CPU tests' input."""

from tileworkbench.bench import gemm, schema

MACHINE = {"gpu": "NVIDIA H200", "driver": "580.159.04", "cuda": "13.0", "cupy": "14.2.0", "torch": "2.11.0",
           "commit": "abc1234", "dirty": False, "date": "2026-11-30T23:00:00Z", "hostname": "test-host"}


def fake(name, ms, err, correct, flops):
    return {"name": name, "ms": ms, "ms_min": ms * 0.98, "tflops": flops / (ms * 1e-3) / 1e12,
            "rel_err": err, "correct": correct, "compile_s": 0.5}


def synthetic_rows():
    rows = []
    for (M, N, K), dtype in [((4096, 4096, 4096), "float16"), ((16, 4096, 4096), "bfloat16")]:
        flops = 2.0 * M * N * K
        job = gemm.Job("tileworkbench", M, N, K, dtype, [])
        results = [fake("matmul 128x128x32 s3 t128", 0.30, 3e-4, True, flops),
                   fake("matmul 128x256x32 s3 t256", 0.20, 3e-4, True, flops),
                   fake("matmul broken", 0.10, 0.5, False, flops),  # fastest but wrong: must not win
                   {"name": "matmul 256x256x64", "error": "CompileError: too much shared memory", "correct": False}]
        cublas = {"torch": fake("torch", 0.18, 2e-4, True, flops),
                  "cupy": fake("cupy", 0.19, 2e-4, True, flops) if dtype == "float16"
                  else {"error": "TypeError: CuPy has no bfloat16"}}
        rows.append(gemm.make_row(job, results, cublas, "float64", gemm.THRESHOLDS[dtype]))
    flops = 2.0 * 4096 ** 3
    job = gemm.Job("matmul_tma_copy s2", 4096, 4096, 4096, "float16", [])
    rows.append(gemm.make_row(job, [fake("matmul_tma_copy s2", 0.5, 4e-4, True, flops)],
                              {"torch": fake("torch", 0.18, 2e-4, True, flops)}, "float32", 2e-3))
    return rows


def synthetic_record(date=MACHINE["date"], commit=MACHINE["commit"]):
    compile_times = {"kernel": "matmul_tma_copy 4096^3", "device_loaded": True,
                     "cold": {"total_s": 1.25, "parse_s": 0.01, "lower_s": 0.06, "load_s": 1.18, "cache": "lowered"},
                     "disk_hit": {"total_s": 0.31, "load_s": 0.25, "cache": "disk"},
                     "memory_hit": {"total_s": 0.004, "parse_s": 0.0039, "same_kernel": True}, "problems": []}
    return schema.make_record(dict(MACHINE, date=date, commit=commit), synthetic_rows(),
                              settings={"warmup": 10, "rep": 50, "quick": False}, compile_times=compile_times)
