#!/usr/bin/env bash
# Builds, on this (Debian) machine, what scripts/gpu-check.sh runs on a GPU machine that has CUDA
# 13 and PyTorch but none of our Debian libraries and no network, and puts it in gpu-bundle/
# (ignored by git: hand it over as a carried path). Our binaries link only the CUDA runtime,
# cuBLAS, CUPTI and NCCL besides the C/C++ runtime (simdjson, CLI11, nlohmann and Catch2 are static or
# header-only), and those come from the GPU machine's CUDA install, so only the binaries travel.
# No .cu files: nothing is compiled for a particular GPU architecture. MPI is left out (the GPU
# machine has no mpirun and Open MPI would have to travel).
set -euo pipefail
cd "$(dirname "$0")/.."
build=build/gpu
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCSIM_BUILD_GUI=OFF \
  -DCSIM_BUILD_BENCH=ON -DCSIM_WITH_CUDA=ON -DCSIM_WITH_MPI=OFF >/dev/null
cmake --build "$build" --target simrun tracediff tests_cuda tests_real
rm -rf gpu-bundle
mkdir -p gpu-bundle/bin
cp "$build/tools/simrun" "$build/tools/tracediff" "$build/tests/cuda/tests_cuda" \
  "$build/tests/tests_real" gpu-bundle/bin/
strip gpu-bundle/bin/*
# Anything a binary needs from outside the C runtime and CUDA would have to travel too: list it.
extra=$(ldd gpu-bundle/bin/* | awk '/=>/ {print $1}' | sort -u |
  grep -v -E '^(libc|libm|libdl|libpthread|librt|libgcc_s|libstdc\+\+|libcudart|libcublas|libcublasLt|libnccl|libcupti)\.so' || true)
if [ -n "$extra" ]; then
  echo "gpu-bundle: also needs (not bundled): $extra" >&2
fi
du -sh gpu-bundle
echo "gpu-bundle: ready; on the GPU machine run scripts/gpu-check.sh"
