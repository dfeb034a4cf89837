"""Rules and pieces the passes share (none of these is a pass): where TMA may copy and how
(``tma``), which tensor-core path a gemm takes (``gemm``), when a warp-specialised GEMM may walk
its tiles persistently and how (``persistent``), and when an epilogue goes through shared memory
(``epilogue``), which values every thread of a block shares (``uniformity``). Only passes use them; what a pass hands a later stage is a typed record in
``ir.records``."""
