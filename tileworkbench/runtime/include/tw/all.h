// tw/all.h - everything generated kernels use. The code generator inlines these headers into the
// generated source (CuPy's cache key does not cover -I headers; inlining keeps it honest).
#pragma once
#include "common.h"
#include "sync.h"
#include "tma.h"
#include "cp_async.h"
#include "mma.h"
#include "wgmma.h"
#include "mma_tf32.h"
#include "random.h"
