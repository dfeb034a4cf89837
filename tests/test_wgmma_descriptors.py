"""The shared-memory descriptors ``tw::wgmma_gemm_ss`` and ``tw::wgmma_gemm_rs`` hand each wgmma.

Each gemm builds one descriptor per operand and moves it along K with ``tw::wgmma_desc_plus`` (one
32-bit add on the start-address field). Every instruction must still get exactly the descriptor
of its own operand address: ``wgmma_desc<SPAN>(address, lbo, sbo)``, the address worked out from
the tile's layout as the header documents it (A K-major in panels of M rows, or M-major panels of
64 rows; B K-major in panels of N rows, or N-major; warpgroups along M and N, instructions side by
side along N). The header's descriptor functions are compiled for the host with the system's C++
compiler and compared over every instruction of a range of gemm shapes, for operand tiles at every
1024-byte offset of the shared window; no GPU needed.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

HEADER = Path(__file__).resolve().parents[1] / "tileworkbench" / "runtime" / "include" / "tw" / "wgmma.h"

# (M, N, K, WG, SWA, SWB, B_K_MAJOR, A_K_MAJOR, NG, NC, EB): shapes the code generator emits
# (attention, the sparse MLA backward's 64 x 512 dQ in two instructions, FP8, TF32, M-major A).
SHAPES = [
    (64, 64, 64, 1, 128, 128, "true", "true", 1, 1, 2),
    (128, 128, 64, 2, 128, 128, "true", "true", 1, 1, 2),
    (128, 256, 64, 1, 128, 128, "true", "true", 2, 1, 2),
    (64, 512, 32, 1, 64, 128, "false", "true", 1, 2, 2),
    (64, 32, 512, 1, 128, 128, "true", "true", 1, 1, 2),
    (128, 128, 128, 2, 128, 128, "false", "false", 1, 1, 2),
    (64, 64, 64, 1, 64, 64, "true", "false", 1, 1, 2),
    (128, 64, 128, 1, 128, 128, "true", "true", 1, 1, 1),
    (64, 64, 32, 1, 128, 128, "true", "true", 1, 1, 4),
    (256, 128, 64, 2, 128, 32, "false", "true", 2, 1, 2),
    (64, 256, 64, 1, 32, 64, "true", "true", 1, 2, 2),
]

_CHECK = r"""
#include <cstdio>
#define __device__
#define __forceinline__ inline
namespace tw {
%(region)s
}
using namespace tw;
long bad = 0, checked = 0;

// Where the instruction for rows m0.., K-rows kk.. (and B columns from n0) reads, from the layouts.
template <int M, int N, int K, int SWA, int SWB, bool BK, bool AK, int EB>
unsigned long long expected_a(unsigned a_base, int m0, int kk) {
  constexpr int A_PANEL = SWA / EB;
  return AK ? wgmma_desc<SWA>(a_base + (kk / A_PANEL) * (M * SWA) + m0 * SWA + (kk %% A_PANEL) * EB, 16, 8 * SWA)
            : wgmma_desc<SWA>(a_base + (m0 / 64) * (K * SWA) + kk * SWA, K * SWA, 8 * SWA);
}
template <int N, int K, int SWB, bool BK, int EB>
unsigned long long expected_b(unsigned b_base, int n0, int kk) {
  constexpr int PANEL = SWB / EB;
  const unsigned at = b_base + wgmma_b_columns<K, SWB, BK, EB>(n0);
  return BK ? wgmma_desc<SWB>(at + (kk / PANEL) * (N * SWB) + (kk %% PANEL) * EB, 16, 8 * SWB)
            : wgmma_desc<SWB>(at + kk * SWB, K * SWB, 8 * SWB);
}

// The gemm's own walk (tw::wgmma_gemm_ss), descriptors as it builds them.
template <int M, int N, int K, int WG, int SWA, int SWB, bool BK, bool AK, int NG, int NC, int EB>
void check(unsigned a_base, unsigned b_base_in) {
  constexpr int K_STEP = 32 / EB, NW = N / NG, NI = NW / NC, RPG = M / WG, MI = RPG / 64;
  for (int thread = 0; thread < WG * NG * 128; thread += 32) {
    const int group = WG == 1 ? 0 : thread / 128 / NG, gn = thread / 128 %% NG;
    const unsigned b_base = b_base_in + (NG == 1 ? 0u : wgmma_b_columns<K, SWB, BK, EB>(gn * NW));
    const unsigned long long a0 = AK ? wgmma_desc<SWA>(a_base + group * RPG * SWA, 16, 8 * SWA)
                                     : wgmma_desc<SWA>(a_base + group * (RPG / 64) * (K * SWA), K * SWA, 8 * SWA);
    const unsigned long long b0 = wgmma_b_desc0<K, SWB, BK>(b_base);
    for (int mi = 0; mi < MI; ++mi) {
      for (int kk = 0; kk < K; kk += K_STEP) {
        const unsigned a_bytes = AK ? (kk / (SWA / EB)) * (M * SWA) + mi * 64 * SWA + (kk %% (SWA / EB)) * EB
                                    : mi * (K * SWA) + kk * SWA;
        const unsigned long long da = wgmma_desc_plus(a0, a_bytes);
        const int m0 = (thread / 128 / NG) * RPG + mi * 64;
        for (int c = 0; c < NC; ++c) {
          const unsigned b_chunk = NC == 1 ? 0u : wgmma_b_columns<K, SWB, BK, EB>(c * NI);
          const unsigned long long db = wgmma_desc_plus(b0, b_chunk + wgmma_b_rows<N, SWB, BK, EB>(kk));
          ++checked;
          if (da != expected_a<M, N, K, SWA, SWB, BK, AK, EB>(a_base, m0, kk) ||
              db != expected_b<N, K, SWB, BK, EB>(b_base_in, gn * NW + c * NI, kk)) {
            if (bad++ < 5) printf("M%%d N%%d K%%d thread %%d mi %%d kk %%d c %%d: %%llx %%llx\n", M, N, K, thread, mi, kk, c, da, db);
          }
        }
      }
    }
  }
}

template <int M, int N, int K, int WG, int SWA, int SWB, bool BK, bool AK, int NG, int NC, int EB>
void sweep() {
  constexpr unsigned A_BYTES = M * K * EB, B_BYTES = N * K * EB;
  for (unsigned a = 0; a + A_BYTES + B_BYTES <= 232448; a += 1024) {
    check<M, N, K, WG, SWA, SWB, BK, AK, NG, NC, EB>(a, a + A_BYTES);
  }
}

int main() {
%(sweeps)s
  printf("checked %%ld mismatches %%ld\n", checked, bad);
  return bad != 0;
}
"""


def _compiler() -> str | None:
    return shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")


@pytest.mark.skipif(_compiler() is None, reason="no C++ compiler (c++, g++ or clang++) on the PATH")
def test_every_wgmma_gets_the_descriptor_of_its_own_operand_address(tmp_path):
    text = HEADER.read_text()
    region = text[text.index("// Swizzle span in bytes"):text.index("// M x K (A:")]
    sweeps = "\n".join(f"  sweep<{', '.join(map(str, shape))}>();" for shape in SHAPES)
    source = tmp_path / "descriptors.cpp"
    source.write_text(_CHECK % {"region": region, "sweeps": sweeps})
    subprocess.run([_compiler(), "-std=c++17", "-O1", str(source), "-o", str(tmp_path / "check")], check=True)
    run = subprocess.run([str(tmp_path / "check")], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout
    checked = int(run.stdout.split()[1])
    assert checked > 10000 and run.stdout.strip().endswith("mismatches 0")
