// Shared by the CUDA runtime's tests: hand-built Programs (one op appended with the fields every
// op has) and the visible skips of [gpu] tests. No GPU at all: the test prints "SKIPPED: <why>"
// and the process exits 77 (CTest's SKIP_RETURN_CODE; Catch2 2.13 has no SKIP), since every later
// [gpu] test would skip too. A GPU, but fewer than a test needs (a [2gpu] test on one H200): that
// test alone prints "SKIPPED: <why>" (CTest's SKIP_REGULAR_EXPRESSION, when it runs alone), WARNs
// the same in Catch2's report and returns, so the tests after it still run.
#pragma once

#include <cuda_runtime_api.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <iostream>
#include <string>

#include "core/program/program.hpp"

namespace csim::test {

inline core::Op& add_op(core::Program& p, core::OpKind kind, const std::string& name, int thread,
                        int stream, int gpu) {
  core::Op op;
  op.id = static_cast<core::OpId>(p.ops.size());
  op.kind = kind;
  op.name = p.names.intern(name);
  op.thread = thread;
  op.stream = stream;
  op.gpu = gpu;
  op.step = 1;
  p.ops.push_back(op);
  return p.ops.back();
}

[[noreturn]] inline void skip(const std::string& why) {
  std::cout << "SKIPPED: " << why << std::endl;
  std::exit(77);
}

// What a test that needs `needed` CUDA devices does with `present` of them.
enum class GpuSkip {
  kRun,         // enough devices
  kSkipTest,    // some, too few: skip this test, run the others
  kSkipBinary,  // none: every [gpu] test would skip, exit 77
};
inline GpuSkip gpu_skip(int needed, int present) {
  if (present >= needed) return GpuSkip::kRun;
  return present <= 0 ? GpuSkip::kSkipBinary : GpuSkip::kSkipTest;
}

// CUDA devices here, 0 when none is usable (no driver, no device).
inline int cuda_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return count;
}

// True when this machine has `needed` CUDA devices; else skips visibly (above): exits 77 without
// any GPU, or returns false, and the caller returns.
inline bool have_gpus(int needed) {
  const int present = cuda_device_count();
  const std::string why =
      "needs " + std::to_string(needed) + " CUDA device(s), " + std::to_string(present) + " here";
  switch (gpu_skip(needed, present)) {
    case GpuSkip::kRun:
      return true;
    case GpuSkip::kSkipBinary:
      skip(why);
    case GpuSkip::kSkipTest:
      break;
  }
  std::cout << "SKIPPED: " << why << std::endl;
  WARN("SKIPPED: " << why);
  return false;
}

}  // namespace csim::test
