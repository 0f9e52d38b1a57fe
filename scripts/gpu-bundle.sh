#!/usr/bin/env bash
# Builds, on this (Debian) machine, what scripts/gpu-check.sh runs on a GPU machine that has CUDA
# 13 and PyTorch but none of our Debian libraries and no network, into gpu-bundle/ (ignored by
# git: hand it over as a carried path). docs/gpu-check.md describes both scripts.
#
#   gpu-bundle/bin/   simrun, tracediff, tests_cuda, tests_real (stripped; RUNPATH $ORIGIN/../lib)
#   gpu-bundle/lib/   libcsim_cuda_backend.so (the CUDA backend module simrun loads from
#                     $ORIGIN/../lib for --backend cuda) and the Debian libraries the binaries
#                     and the module link that the GPU machine lacks (BUNDLED_LIBS)
#   gpu-bundle/MANIFEST.txt  commit, date, CUDA architecture, each binary's ldd, newest glibc
#
# Every library a bundled binary or library needs must be in gpu-bundle/lib, or be one the GPU
# machine has (ALLOWED_LIBS: the CUDA libraries from its toolkit or PyTorch's nvidia wheels, the
# driver's, and glibc / libstdc++ / libgcc): anything else, or anything ldd does not find here,
# fails the script. No .cu files: nothing is compiled for a GPU architecture, but the architecture
# (first argument or CUDA_ARCH, default 90 = Hopper) is passed to CMake and recorded. MPI is left
# out (the GPU machine has no mpirun, and Open MPI would have to travel).
#
# Usage: scripts/gpu-bundle.sh [ARCH]        (BUILD_DIR overrides build/gpu)
set -euo pipefail
cd "$(dirname "$0")/.."
arch=${1:-${CUDA_ARCH:-90}}
build=${BUILD_DIR:-build/gpu}
bundle=gpu-bundle
targets=(simrun tracediff tests_cuda tests_real csim_cuda_backend)

# Sonames (without version) the GPU machine provides. glibc and the GCC runtime: its base system;
# the CUDA ones: $CUDA_HOME or site-packages/nvidia/*/lib (gpu-check.sh puts both on
# LD_LIBRARY_PATH); libcuda / libnvidia-ml: the driver (dlopened, never linked, but allowed).
ALLOWED_LIBS='linux-vdso|ld-linux-x86-64|libc|libm|libdl|libpthread|librt|libutil|libgcc_s|libstdc\+\+'
ALLOWED_LIBS+='|libcudart|libcublas|libcublasLt|libnccl|libcupti|libcuda|libnvidia-ml'
# Debian libraries that travel in gpu-bundle/lib, as no static archive of simdjson is installed
# (libsimdjson-dev ships only libsimdjson.so); zlib travels with it rather than rely on the GPU
# machine's.
BUNDLED_LIBS='libsimdjson|libz'

launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
# shellcheck disable=SC2016 # $ORIGIN is the dynamic linker's, not the shell's
rpath='$ORIGIN/../lib'
# RUNPATH (not RPATH): LD_LIBRARY_PATH still comes first, so the GPU machine's CUDA libraries win
# over any build-machine path CMake adds.
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCSIM_BUILD_GUI=OFF \
  -DCSIM_BUILD_BENCH=OFF -DCSIM_WITH_CUDA=ON -DCSIM_WITH_MPI=OFF \
  -DCMAKE_CUDA_ARCHITECTURES="$arch" -DCMAKE_BUILD_RPATH="$rpath" \
  -DCMAKE_EXE_LINKER_FLAGS=-Wl,--enable-new-dtags -DCMAKE_MODULE_LINKER_FLAGS=-Wl,--enable-new-dtags \
  "${launcher[@]}" >/dev/null
cmake --build "$build" --target "${targets[@]}"

rm -rf "$bundle"
mkdir -p "$bundle/bin" "$bundle/lib"
cp "$build/tools/simrun" "$build/tools/tracediff" "$build/tests/cuda/tests_cuda" \
  "$build/tests/tests_real" "$bundle/bin/"
cp "$build/lib/libcsim_cuda_backend.so" "$bundle/lib/"
strip "$bundle"/bin/* "$bundle/lib/libcsim_cuda_backend.so"

# soname -> path of every library `ldd` resolves for the given files ("not found" kept as is).
deps() { ldd "$@" | awk '/=>/ {print $1, $3} /^[[:space:]]*\/.*ld-linux/ {print $1, $1}' | sort -u; }

# Copy the Debian libraries that travel (by their soname, as the binaries ask for them).
while read -r soname path; do
  base=${soname%%.so*}
  if [[ $base =~ ^($BUNDLED_LIBS)$ ]]; then
    [ "$path" != "not" ] || { echo "gpu-bundle: $soname is not found here" >&2; exit 1; }
    cp -L "$path" "$bundle/lib/$soname"
  fi
done < <(deps "$bundle"/bin/* "$bundle/lib/libcsim_cuda_backend.so")

# The check: every dependency of every bundled file resolves into the bundle, or is allowed.
bad=0
for f in "$bundle"/bin/* "$bundle"/lib/*; do
  while read -r soname path; do
    base=${soname%%.so*}
    base=${base##*/}
    if [ "$path" = "not" ]; then
      echo "gpu-bundle: $f needs $soname, which ldd does not find here" >&2
      bad=1
    elif [[ $base =~ ^($ALLOWED_LIBS)$ ]]; then
      :
    elif [[ $(realpath "$path") != "$(realpath "$bundle/lib")"/* ]]; then
      echo "gpu-bundle: $f needs $soname from $path, neither bundled nor allowed" >&2
      bad=1
    fi
  done < <(deps "$f")
done
if [ "$bad" -ne 0 ]; then
  echo "gpu-bundle: FAILED: add the library to BUNDLED_LIBS (it travels) or link it statically" >&2
  exit 1
fi

# The newest glibc and libstdc++ symbol versions needed: the GPU machine's must be as new.
glibc=$(objdump -T "$bundle"/bin/* "$bundle"/lib/* | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1)
glibcxx=$(objdump -T "$bundle"/bin/* "$bundle"/lib/* | grep -o 'GLIBCXX_[0-9.]*' | sort -uV | tail -1)
{
  echo "commit: $(git rev-parse HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (with uncommitted changes)')"
  echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -sr), $(ldd --version | head -1)"
  echo "cuda architecture: $arch (no .cu files: recorded only)"
  echo "newest symbol versions needed: $glibc, $glibcxx"
  for f in "$bundle"/bin/* "$bundle"/lib/*; do
    echo "== ldd $f"
    ldd "$f"
  done
} >"$bundle/MANIFEST.txt"
du -sh "$bundle"
libs=("$bundle"/lib/*)
echo "gpu-bundle: ready (needs $glibc and $glibcxx or newer; bundled: ${libs[*]##*/})"
echo "gpu-bundle: on the GPU machine, with gpu-bundle carried: scripts/gpu-check.sh"
