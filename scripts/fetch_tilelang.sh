#!/usr/bin/env bash
# TileLang 0.1.15 for the side-by-side runs on the GPU machine (which has no pip and no network):
#   .tilelang/site.tar.xz  the wheel and those it needs beyond the GPU image (apache-tvm-ffi,
#                          torch-c-dlpack-ext, z3-solver) for Python 3.12, unpacked into one folder
#                          (z3's second copy of its library left out: about 45 MB);
#   .tilelang/examples/    with a TileLang repository (a work tree or a bare git directory) as the
#                          argument, its examples folders named by EXAMPLE_DIRS (default: the two
#                          sparse MLA folders; the whole examples folder is larger than a call may
#                          carry beside the site).
# .tilelang/ is git-ignored; name it in the device tool's `carry`. `scripts/gpu_check.sh` unpacks
# the site to /tmp/tl; scripts/experiments/unedited/run.sh runs the examples (docs/tilelang.md).
#
#   bash scripts/fetch_tilelang.sh [/path/to/tilelang-repo]
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .tilelang
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
platforms=()
for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_24_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64; do
  platforms+=(--platform "$p")
done
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp "${platforms[@]}" \
  -d "$work/wheels" tilelang==0.1.15 "apache-tvm-ffi<0.1.13" torch-c-dlpack-ext "z3-solver<4.15.5"
for wheel in "$work"/wheels/*.whl; do
  unzip -q -o "$wheel" -d "$work/site"
done
rm -rf "$work"/site/z3_solver-*.data
tar -cf - -C "$work/site" . | xz -6 -T0 > .tilelang/site.tar.xz
echo ".tilelang/site.tar.xz: $(du -h .tilelang/site.tar.xz | cut -f1)"
if [ $# -ge 1 ]; then
  repo=$1
  if [ -d "$repo/.git" ]; then gitdir="$repo/.git"; else gitdir=$repo; fi
  rm -rf .tilelang/examples && mkdir -p .tilelang/examples
  for dir in ${EXAMPLE_DIRS:-deepseek_v32 dsa_sparse_finetune}; do
    git --git-dir="$gitdir" archive HEAD "examples/$dir" | tar -x -C "$work"
    cp -r "$work/examples/$dir" .tilelang/examples/
  done
  rm -rf .tilelang/examples/*/figures
  echo ".tilelang/examples: $(ls .tilelang/examples | tr '\n' ' ')($(du -sh .tilelang/examples | cut -f1))"
fi
