"""Benchmarks against cuBLAS, their records, tables and plots.

Modules, by where they may run:

* GPU machine (torch, CuPy, numpy only): ``gemm`` (the suite and its candidate kernels),
  ``timing`` (CUDA-event timing, L2 flush, relative error), ``compile_time``, ``machine``,
  ``schema`` (bench records), ``table`` (markdown, BENCHMARKS.md), ``cli``;
* analysis (pandas / matplotlib, imported lazily): ``records`` (``load_records``), ``plots``
  (``plot_tflops``).

This package imports none of them eagerly, so ``import tileworkbench.bench`` is cheap anywhere.
"""

